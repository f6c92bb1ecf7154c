//! Identifiers: `<prefix>_<opaque>`. The opaque part is a lowercase ULID, so ids sort by
//! creation time and lists can page on the id alone.

use std::sync::Mutex;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdKind {
    Customer,
    User,
    ApiKey,
    Operation,
    Item,
    Transaction,
    Event,
    WebhookEndpoint,
    Delivery,
    Request,
}

impl IdKind {
    pub fn prefix(self) -> &'static str {
        match self {
            IdKind::Customer => "cus",
            IdKind::User => "usr",
            IdKind::ApiKey => "key",
            IdKind::Operation => "op",
            IdKind::Item => "itm",
            IdKind::Transaction => "txn",
            IdKind::Event => "evt",
            IdKind::WebhookEndpoint => "whe",
            IdKind::Delivery => "whd",
            IdKind::Request => "req",
        }
    }

    /// Whether `id` has this kind's shape; used to refuse malformed ids with a 4xx early.
    pub fn matches(self, id: &str) -> bool {
        id.strip_prefix(self.prefix())
            .and_then(|rest| rest.strip_prefix('_'))
            .is_some_and(|opaque| {
                !opaque.is_empty() && opaque.len() <= 64 && opaque.bytes().all(|b| b.is_ascii_alphanumeric())
            })
    }
}

/// Port: where new ids come from (deterministic in some tests, ULIDs otherwise).
pub trait IdGenerator: Send + Sync {
    fn new_id(&self, kind: IdKind) -> String;
}

/// Monotonic ULIDs: ids made in the same millisecond still sort in creation order.
#[derive(Default)]
pub struct UlidGenerator {
    generator: Mutex<ulid::Generator>,
}

impl IdGenerator for UlidGenerator {
    fn new_id(&self, kind: IdKind) -> String {
        let mut generator = self.generator.lock().unwrap_or_else(|e| e.into_inner());
        let ulid = match generator.generate() {
            Ok(ulid) => ulid,
            Err(overflow) => overflow.commit_overflow_increment(),
        };
        format!("{}_{}", kind.prefix(), ulid.to_string().to_ascii_lowercase())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_have_their_prefix_and_sort_in_creation_order() {
        let ids = UlidGenerator::default();
        let made: Vec<String> = (0..1000).map(|_| ids.new_id(IdKind::Operation)).collect();
        assert!(made.iter().all(|id| IdKind::Operation.matches(id)));
        let mut sorted = made.clone();
        sorted.sort();
        assert_eq!(made, sorted);
    }

    #[test]
    fn malformed_ids_do_not_match() {
        for bad in ["op_", "op", "cus_abc", "op_a-b", "op_ä", "xop_abc"] {
            assert!(!IdKind::Operation.matches(bad), "{bad}");
        }
    }
}
