//! Identifiers: `<prefix>_<opaque>`. The opaque part is a lowercase ULID, so ids sort by
//! creation time and lists can page on the id alone.

use serde::{Deserialize, Serialize};
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
    Schedule,
    Account,
    Movement,
    WorkItem,
    File,
    Reconciliation,
    Request,
    Calendar,
    BankFile,
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
            IdKind::Schedule => "sch",
            IdKind::Account => "acc",
            IdKind::Movement => "mov",
            IdKind::WorkItem => "wi",
            IdKind::File => "file",
            IdKind::Reconciliation => "rec",
            IdKind::Request => "req",
            IdKind::Calendar => "cal",
            IdKind::BankFile => "bf",
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

    /// Whether `id` is one this service could have made: the prefix and a lowercase ULID. A
    /// page may start after such an id even if it names nothing, since ids sort by time; a
    /// cursor of any other shape sorts at one end of the list and would silently restart or
    /// empty it, so lists refuse it.
    /// The smallest id of this kind made at or after `at`: ids sort in the order they were
    /// made, so those made before it sort below it.
    pub fn first_made_at(self, at: time::OffsetDateTime) -> String {
        let ms = u64::try_from(at.unix_timestamp_nanos() / 1_000_000).unwrap_or(0);
        let ulid = ulid::Ulid::from_parts(ms, 0);
        format!("{}_{}", self.prefix(), ulid.to_string().to_ascii_lowercase())
    }

    pub fn could_have_made(self, id: &str) -> bool {
        id.strip_prefix(self.prefix())
            .and_then(|rest| rest.strip_prefix('_'))
            .is_some_and(|opaque| {
                !opaque.bytes().any(|b| b.is_ascii_uppercase()) && ulid::Ulid::from_string(opaque).is_ok()
            })
    }
}

/// One type per kind of id, so an operation id is never passed where a transaction id is
/// wanted. The JSON is the plain string. An id given by a caller is read with `parse` at the
/// edge (a malformed one names nothing, so it is refused there); ids read back from the store
/// or made by the generator are trusted as they are.
macro_rules! typed_ids {
    ($($(#[$doc:meta])* $name:ident => $kind:ident, $resource:literal),* $(,)?) => {$(
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            /// A caller's id, if it has this kind's shape.
            pub fn parse(id: &str) -> Option<$name> {
                IdKind::$kind.matches(id).then(|| $name(id.to_owned()))
            }

            /// A new id of this kind.
            pub fn new(ids: &dyn IdGenerator) -> $name {
                $name(ids.new_id(IdKind::$kind))
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl TypedId for $name {
            const KIND: IdKind = IdKind::$kind;
            const RESOURCE: &'static str = $resource;

            fn parse(id: &str) -> Option<$name> {
                $name::parse(id)
            }
        }

        impl std::ops::Deref for $name {
            type Target = str;
            fn deref(&self) -> &str {
                &self.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl std::borrow::Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.0)
            }
        }

        /// Trusted ids only (the store's, the tests'): a caller's goes through `parse`.
        impl From<&str> for $name {
            fn from(id: &str) -> $name {
                $name(id.to_owned())
            }
        }

        impl From<String> for $name {
            fn from(id: String) -> $name {
                $name(id)
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }

        impl From<&$name> for String {
            fn from(id: &$name) -> String {
                id.0.clone()
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }

        impl PartialEq<String> for $name {
            fn eq(&self, other: &String) -> bool {
                &self.0 == other
            }
        }
    )*};
}

/// What every typed id can do, for code that reads any of them (the HTTP edge's path ids).
pub trait TypedId: Sized {
    const KIND: IdKind;
    /// The resource's name in a "No such …" answer.
    const RESOURCE: &'static str;
    fn parse(id: &str) -> Option<Self>;
}

typed_ids! {
    CustomerId => Customer, "customer",
    UserId => User, "user",
    ApiKeyId => ApiKey, "api_key",
    OperationId => Operation, "operation",
    ItemId => Item, "item",
    TransactionId => Transaction, "transaction",
    EventId => Event, "event",
    WebhookEndpointId => WebhookEndpoint, "webhook_endpoint",
    DeliveryId => Delivery, "webhook_delivery",
    ScheduleId => Schedule, "schedule",
    AccountId => Account, "account",
    MovementId => Movement, "movement",
    WorkItemId => WorkItem, "work_item",
    FileId => File, "file",
    ReconciliationId => Reconciliation, "reconciliation",
    CalendarId => Calendar, "calendar",
    BankFileId => BankFile, "bank_file",
}

impl MovementId {
    /// The movement an operation's item makes (a payout's hold, a collection's credit, a
    /// transfer's posting): fixed by the item, so making it twice is a conflict, not a second
    /// movement.
    pub fn of_item(item_id: &ItemId) -> MovementId {
        MovementId(format!("mov_{}", item_id.trim_start_matches("itm_")))
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
    fn a_typed_id_reads_only_its_own_kind_and_is_a_plain_string_in_json() {
        assert!(OperationId::parse("op_01abc").is_some());
        for bad in ["txn_01abc", "op_", "op_a-b", "op 1"] {
            assert!(OperationId::parse(bad).is_none(), "{bad}");
        }
        let id = TransactionId::new(&UlidGenerator::default());
        assert!(id.starts_with("txn_"));
        assert_eq!(serde_json::to_string(&id).unwrap(), format!("\"{id}\""));
    }

    #[test]
    fn only_an_id_of_the_generators_shape_could_have_been_made() {
        let made = UlidGenerator::default().new_id(IdKind::Operation);
        assert!(IdKind::Operation.could_have_made(&made));
        assert!(!IdKind::Transaction.could_have_made(&made));
        let upper = format!("op_{}", made["op_".len()..].to_ascii_uppercase());
        for bad in [
            "op_nope",
            "op_01abc",
            &upper,
            &format!("{made}0"),
            "op_01arz3ndektsv4rrffq69g5fai",
        ] {
            assert!(!IdKind::Operation.could_have_made(bad), "{bad}");
        }
    }

    #[test]
    fn malformed_ids_do_not_match() {
        for bad in ["op_", "op", "cus_abc", "op_a-b", "op_ä", "xop_abc"] {
            assert!(!IdKind::Operation.matches(bad), "{bad}");
        }
    }
}
