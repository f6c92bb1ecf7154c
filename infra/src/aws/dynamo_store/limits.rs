//! Payout limits: each customer's limits (`LIMITS#<customer>`), and the counters of what was
//! approved against them (`LIMITUSE#<counter>`, its value in `used`).

use super::*;
use async_trait::async_trait;
use aws_sdk_dynamodb::types::{AttributeValue, TransactWriteItem, Update};
use ops_domain::ids::CustomerId;
use ops_domain::limits::{KnownPayee, LimitStore, LimitUse, PayoutLimits};

impl DynamoStore {
    pub(super) fn put_limits(&self, limits: &PayoutLimits) -> TransactWriteItem {
        let item = keyed(
            keys::payout_limits(limits.customer_id.as_str()),
            vec![
                ("entity", s("payout_limits")),
                ("doc", doc(limits)),
                ("version", n(limits.version)),
            ],
        );
        self.versioned(item, limits.version)
    }

    /// The counter moves from `before` to `after`, or the transaction fails: a counter never
    /// written holds 0.
    pub(super) fn use_limit(&self, used: &LimitUse) -> TransactWriteItem {
        let condition = match used.before {
            0 => "attribute_not_exists(#used) OR #used = :before",
            _ => "#used = :before",
        };
        let update = Update::builder()
            .table_name(&self.table)
            .set_key(Some(item(key_item(keys::limit_counter(&used.key)))))
            .update_expression("SET #used = :after, #entity = :entity")
            .condition_expression(condition)
            .expression_attribute_names("#used", "used")
            .expression_attribute_names("#entity", "entity")
            .expression_attribute_values(":before", n(used.before))
            .expression_attribute_values(":after", n(used.after))
            .expression_attribute_values(":entity", s("limit_counter"))
            .build()
            .expect("table, key and expression set");
        TransactWriteItem::builder().update(update).build()
    }
}

impl DynamoStore {
    pub(super) fn remember_payee(&self, payee: &KnownPayee) -> TransactWriteItem {
        let item = keyed(
            keys::known_payee(payee.customer_id.as_str(), &payee.payee),
            vec![("entity", s("known_payee")), ("doc", doc(payee))],
        );
        self.put(item, None, vec![])
    }
}

#[async_trait]
impl LimitStore for DynamoStore {
    async fn payout_limits(&self, customer_id: &CustomerId) -> Result<Option<PayoutLimits>, StoreError> {
        self.get(keys::payout_limits(customer_id.as_str())).await
    }

    async fn limit_counters(&self, counters: &[String]) -> Result<Vec<i64>, StoreError> {
        let wanted: Vec<keys::Primary> = counters.iter().map(|counter| keys::limit_counter(counter)).collect();
        let found = self.items_by_key(&wanted).await?;
        Ok(wanted
            .iter()
            .map(|key| match found.get(key).and_then(|item| item.get("used")) {
                Some(AttributeValue::N(used)) => used.parse().unwrap_or(0),
                _ => 0,
            })
            .collect())
    }

    async fn known_payees(
        &self,
        customer_id: &CustomerId,
        payees: &[String],
    ) -> Result<Vec<Option<KnownPayee>>, StoreError> {
        let wanted: Vec<keys::Primary> = payees
            .iter()
            .map(|payee| keys::known_payee(customer_id.as_str(), payee))
            .collect();
        let found = self.items_by_key(&wanted).await?;
        wanted
            .iter()
            .map(|key| found.get(key).map(read_doc).transpose())
            .collect()
    }
}
