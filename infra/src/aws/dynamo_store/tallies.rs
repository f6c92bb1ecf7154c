//! Tallies on DynamoDB: one small counter item per period, customer, series and shard
//! ([`keys::tally`]), added to by an update in the transaction of what it counts.

use super::*;
use aws_sdk_dynamodb::types::{TransactWriteItem, Update};
use ops_domain::ids::CustomerId;
use ops_domain::tallies::{Period, Series, Tally, TallyCount, TallyStore};
use std::collections::BTreeMap;
use time::OffsetDateTime;

impl DynamoStore {
    pub(super) fn tally_update(&self, tally: &Tally) -> TransactWriteItem {
        let (period, series) = (tally.period_key(), tally.series.key());
        let key = keys::tally(&period, &tally.customer_id, &series, &tally.spread_by);
        let update = Update::builder()
            .table_name(&self.table)
            .set_key(Some(item(key_item(key))))
            .update_expression(
                "SET #entity = :entity, #period = :period, #series = :series, #customer = :customer ADD #count :count",
            )
            .expression_attribute_names("#entity", "entity")
            .expression_attribute_names("#period", "period")
            .expression_attribute_names("#series", "series")
            .expression_attribute_names("#customer", "customer_id")
            .expression_attribute_names("#count", "count")
            .expression_attribute_values(":entity", s("tally"))
            .expression_attribute_values(":period", s(&period))
            .expression_attribute_values(":series", s(&series))
            .expression_attribute_values(":customer", s(&tally.customer_id))
            .expression_attribute_values(":count", n(tally.count))
            .build()
            .expect("table, key and expression set");
        TransactWriteItem::builder().update(update).build()
    }
}

#[async_trait]
impl TallyStore for DynamoStore {
    /// The window's partitions (a day's hours, a month's days), each read by its range of
    /// sort keys; a customer's counters picked out by a filter, as a chart's window holds
    /// one item per customer, series and shard that counted anything in it.
    async fn tallies(
        &self,
        customer_id: Option<&CustomerId>,
        period: Period,
        from: OffsetDateTime,
        to: OffsetDateTime,
    ) -> Result<Vec<TallyCount>, StoreError> {
        let mut starts = vec![];
        let mut start = period.start_of(from);
        while start < to {
            starts.push(start);
            start += period.length();
        }
        let (Some(first), Some(last)) = (starts.first(), starts.last()) else {
            return Ok(vec![]);
        };
        let (first, last) = keys::tallies_from_to(&period.key(*first), &period.key(*last));
        let mut partitions: Vec<String> = starts
            .iter()
            .map(|at| keys::tally_partition(&period.key(*at)))
            .collect();
        partitions.dedup();
        let filter = Filter::default()
            .with("customer", "customer_id", customer_id.map(|c| c.as_str()))
            .into_option();
        let read = futures_util::future::try_join_all(partitions.into_iter().map(|partition| {
            let values = vec![(":pk", s(partition)), (":first", s(&first)), (":last", s(&last))];
            let condition = "PK = :pk AND SK BETWEEN :first AND :last";
            self.query_entries(None, condition, values, filter.clone(), false, usize::MAX)
        }))
        .await?;
        let mut sums: BTreeMap<(String, String), i64> = BTreeMap::new();
        for counter in read.iter().flatten() {
            let text = |name: &str| counter.get(name).and_then(|v| v.as_s().ok()).cloned();
            let count = counter
                .get("count")
                .and_then(|v| v.as_n().ok())
                .and_then(|v| v.parse::<i64>().ok());
            if let (Some(period), Some(series), Some(count)) = (text("period"), text("series"), count) {
                *sums.entry((period, series)).or_default() += count;
            }
        }
        // A counter this version cannot read (a later one's series) is not counted.
        Ok(sums
            .into_iter()
            .filter_map(|((period, series), count)| {
                Some(TallyCount {
                    starts_at: Period::start_of_key(&period)?.1,
                    series: Series::of_key(&series)?,
                    count,
                })
            })
            .collect())
    }
}
