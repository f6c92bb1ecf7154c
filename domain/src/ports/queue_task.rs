//! The tasks that travel on the queues, read back by every deployment that might meet them.

use super::QueueName;
use serde::{Deserialize, Serialize};

/// What travels on the queues: one tagged enum whose tags carry a version, so a message from
/// an older or a newer deployment is read, or refused by its name, and never misread.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "task")]
pub enum QueueTask {
    /// Hand this transaction to its rail (the submissions queue).
    #[serde(rename = "submit_transaction.v1")]
    SubmitTransaction { transaction_id: crate::ids::TransactionId },
    /// Attempt this webhook delivery (the webhooks queue).
    #[serde(rename = "send_webhook.v1")]
    SendWebhook { delivery_id: crate::ids::DeliveryId },
    /// Send on the deliveries that waited for this endpoint, now enabled again, a batch at a
    /// time, paced (the webhooks queue).
    #[serde(rename = "release_waiting.v1")]
    ReleaseWaiting {
        endpoint_id: crate::ids::WebhookEndpointId,
        /// Where the endpoint's list was looked through up to (none: from its start).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        after: Option<crate::ids::DeliveryId>,
    },
    /// Make the operations of this file's chunks still missing (the files queue).
    #[serde(rename = "split_file.v1")]
    SplitFile { file_id: crate::ids::FileId },
    /// Move this approved operation to processing and make the next of its transactions still
    /// missing, queueing the task again for the rest (the submissions queue, in the customer's
    /// lane: off the stream, so one customer's thousand-item operations do not hold back
    /// another's next payout).
    #[serde(rename = "make_transactions.v1")]
    MakeTransactions { operation_id: crate::ids::OperationId },
    /// Recompute this operation's status from its transactions (the submissions queue, in
    /// the customer's lane).
    #[serde(rename = "settle_operation.v1")]
    SettleOperation { operation_id: crate::ids::OperationId },
}

/// A message body that is no task this deployment knows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a task this deployment reads: {0}")]
pub struct UnknownTask(pub String);

impl QueueTask {
    pub fn queue(&self) -> QueueName {
        match self {
            QueueTask::SubmitTransaction { .. }
            | QueueTask::MakeTransactions { .. }
            | QueueTask::SettleOperation { .. } => QueueName::Submissions,
            QueueTask::SendWebhook { .. } | QueueTask::ReleaseWaiting { .. } => QueueName::Webhooks,
            QueueTask::SplitFile { .. } => QueueName::Files,
        }
    }

    pub fn to_body(&self) -> String {
        serde_json::to_string(self).expect("tasks always serialize")
    }

    /// Reads a message body: this version's tasks, and the untagged bodies the first
    /// deployments sent (`{"transaction_id"}`, `{"delivery_id"}`). Anything else is refused,
    /// naming the task it claims to be.
    pub fn parse(body: &str) -> Result<QueueTask, UnknownTask> {
        #[derive(Deserialize)]
        #[serde(untagged, deny_unknown_fields)]
        enum Legacy {
            Submit { transaction_id: crate::ids::TransactionId },
            Webhook { delivery_id: crate::ids::DeliveryId },
        }
        if let Ok(task) = serde_json::from_str::<QueueTask>(body) {
            return Ok(task);
        }
        let value: serde_json::Value =
            serde_json::from_str(body).map_err(|e| UnknownTask(format!("unreadable: {e}")))?;
        if let Some(name) = value.get("task") {
            return Err(UnknownTask(format!("task {name}")));
        }
        match serde_json::from_value::<Legacy>(value) {
            Ok(Legacy::Submit { transaction_id }) => Ok(QueueTask::SubmitTransaction { transaction_id }),
            Ok(Legacy::Webhook { delivery_id }) => Ok(QueueTask::SendWebhook { delivery_id }),
            Err(_) => Err(UnknownTask(format!("untagged body {body}"))),
        }
    }
}

#[cfg(test)]
mod queue_task_tests {
    use super::*;

    #[test]
    fn tasks_read_back_and_older_or_unknown_bodies_are_read_or_refused_by_name() {
        for task in [
            QueueTask::SubmitTransaction {
                transaction_id: "txn_1".into(),
            },
            QueueTask::SendWebhook {
                delivery_id: "whd_1".into(),
            },
            QueueTask::SplitFile {
                file_id: "file_1".into(),
            },
            QueueTask::ReleaseWaiting {
                endpoint_id: "whe_1".into(),
                after: Some("whd_1".into()),
            },
            QueueTask::MakeTransactions {
                operation_id: "op_1".into(),
            },
            QueueTask::SettleOperation {
                operation_id: "op_1".into(),
            },
        ] {
            assert_eq!(QueueTask::parse(&task.to_body()), Ok(task));
        }
        assert_eq!(
            QueueTask::SubmitTransaction {
                transaction_id: "txn_1".into()
            }
            .to_body(),
            r#"{"task":"submit_transaction.v1","transaction_id":"txn_1"}"#
        );
        // What the first deployments sent.
        assert_eq!(
            QueueTask::parse(r#"{"transaction_id":"txn_1"}"#),
            Ok(QueueTask::SubmitTransaction {
                transaction_id: "txn_1".into()
            })
        );
        assert_eq!(
            QueueTask::parse(r#"{"delivery_id":"whd_1"}"#),
            Ok(QueueTask::SendWebhook {
                delivery_id: "whd_1".into()
            })
        );
        // A newer task, or a newer version of one, is refused by name, never read as another.
        let newer = QueueTask::parse(r#"{"task":"submit_transaction.v2","transaction_id":"txn_1","amount":5}"#);
        assert!(newer.unwrap_err().0.contains("submit_transaction.v2"));
        assert!(QueueTask::parse(r#"{"transaction_id":"txn_1","delivery_id":"whd_1"}"#).is_err());
        assert!(QueueTask::parse("not json").is_err());
    }
}
