//! The operations board: operations pending approval, in progress and needing
//! attention, each with its count, amount per currency and oldest age, and the desk's queues.
//! Counts are kept as the changes happen (the desk's stream consumer moves each operation
//! between columns once, by its version), so reading the board never reads history.

use super::Queue;
use crate::ids::{CustomerId, EventId, OperationId};
use crate::money::Currency;
use crate::operations::OperationStatus;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use time::OffsetDateTime;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Column {
    PendingApproval,
    InProgress,
    NeedsAttention,
}

impl Column {
    pub const ALL: [Column; 3] = [Column::PendingApproval, Column::InProgress, Column::NeedsAttention];

    pub fn as_str(self) -> &'static str {
        match self {
            Column::PendingApproval => "pending_approval",
            Column::InProgress => "in_progress",
            Column::NeedsAttention => "needs_attention",
        }
    }

    /// The column an operation in `status` is counted in; none once it is settled.
    pub fn of(status: OperationStatus) -> Option<Column> {
        match status {
            OperationStatus::PendingApproval => Some(Column::PendingApproval),
            OperationStatus::Approved | OperationStatus::Processing => Some(Column::InProgress),
            OperationStatus::NeedsAttention => Some(Column::NeedsAttention),
            _ => None,
        }
    }

    /// The statuses counted in this column.
    pub fn statuses(self) -> &'static [OperationStatus] {
        match self {
            Column::PendingApproval => &[OperationStatus::PendingApproval],
            Column::InProgress => &[OperationStatus::Approved, OperationStatus::Processing],
            Column::NeedsAttention => &[OperationStatus::NeedsAttention],
        }
    }
}

/// Where an operation is counted, as of which of its versions: a delivery of an older change
/// (or the same one again) moves nothing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BoardEntry {
    pub operation_id: OperationId,
    pub customer_id: CustomerId,
    pub currency: Currency,
    pub amount: i64,
    pub column: Option<Column>,
    /// The operation's version and the event this entry reflects: one commit can make several
    /// events of one version (a transfer is approved, processed and completed at once), in the
    /// order of their ids.
    pub operation_version: u64,
    pub event_id: EventId,
    /// The entry's own version (1 when first written).
    pub version: u64,
}

/// An operation moving between columns: the entry as it now is, and the column it leaves.
#[derive(Debug, Clone)]
pub struct BoardMove {
    pub entry: BoardEntry,
    pub from: Option<Column>,
}

/// One counter of the board: a column's operations in one currency, or a queue's open items
/// (`currency` none). Amounts add up past 64 bits (nine thousand payouts at the largest total
/// do), so they are kept in 128.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoardCount {
    pub bucket: String,
    pub currency: Option<String>,
    pub count: i64,
    pub amount: i128,
}

/// A counter's key on the board: a column and currency, or a queue.
pub fn column_bucket(column: Column) -> String {
    format!("column:{}", column.as_str())
}

pub fn queue_bucket(queue: Queue) -> String {
    format!("queue:{}", queue.as_str())
}

#[derive(Debug, Clone, Serialize)]
pub struct ColumnView {
    pub count: i64,
    /// Minor units per currency code, as decimal strings: sums pass 2^53, past which a
    /// browser's JSON numbers round.
    #[serde(serialize_with = "decimal_strings")]
    pub amount: BTreeMap<String, i128>,
    /// Seconds since the oldest operation in the column was created; none when empty.
    pub oldest_age_seconds: Option<i64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct QueueView {
    /// Items not done (open or claimed).
    pub open: i64,
    /// Of them, past their due time.
    pub past_due: i64,
}

/// `GET /v1/board`.
#[derive(Debug, Clone, Serialize)]
pub struct Board {
    pub customer_id: Option<CustomerId>,
    pub pending_approval: ColumnView,
    pub in_progress: ColumnView,
    pub needs_attention: ColumnView,
    pub queues: BTreeMap<&'static str, QueueView>,
    #[serde(with = "time::serde::rfc3339")]
    pub as_of: OffsetDateTime,
}

fn decimal_strings<S: serde::Serializer>(amounts: &BTreeMap<String, i128>, to: S) -> Result<S::Ok, S::Error> {
    to.collect_map(amounts.iter().map(|(currency, amount)| (currency, amount.to_string())))
}
