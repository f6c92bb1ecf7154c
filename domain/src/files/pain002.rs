//! A pain.001's status report: ISO 20022 `pain.002` (customer payment status report), at
//! group, payment information and transaction level, in the version that answers the file's
//! (pain.001.001.03 → pain.002.001.03 … .08 → .08, then .09 → .10, .10 → .11, .11 → .12).
//!
//! Each transaction's status is read from what the service made of it:
//!
//! | the file's transaction                               | `TxSts` |
//! |------------------------------------------------------|---------|
//! | validated, its operation not yet made                | `ACTC`  |
//! | its operation waits for approval                     | `PDNG`  |
//! | approved, not yet handed to the rail                 | `ACCP`  |
//! | handed to the rail (or its outcome being asked)      | `ACSP`  |
//! | confirmed by the rail                                | `ACSC`  |
//! | refused, rejected, cancelled, failed or returned     | `RJCT`  |
//!
//! A rejection carries an ISO external status reason: the rail's own when it gave one of four
//! characters, `DS02` for a cancelled operation, `MS02` for one its customer's approver
//! rejected, else `NARR`, always with the cause in words. A group's (and the message's) status
//! is its transactions' when they agree; `RJCT` when all are rejected, `PART` when some are,
//! else the least advanced.

use super::pain001::Initiation;
use crate::cause::Cause;
use crate::event::Event;
use crate::event_data::EventData;
use crate::ids::{CustomerId, EventId};
use crate::operations::{Operation, OperationStatus};
use crate::transactions::{Transaction, TransactionStatus};
use crate::xml_writer::Xml;
use serde::Serialize;
use sha2::{Digest, Sha256};
use time::OffsetDateTime;

/// A transaction's status in the report, in the order a payment advances.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum PaymentStatus {
    Validated,
    Pending,
    Accepted,
    InProcess,
    Settled,
    Rejected { reason: String, information: String },
}

impl PaymentStatus {
    pub fn code(&self) -> &'static str {
        match self {
            PaymentStatus::Validated => "ACTC",
            PaymentStatus::Pending => "PDNG",
            PaymentStatus::Accepted => "ACCP",
            PaymentStatus::InProcess => "ACSP",
            PaymentStatus::Settled => "ACSC",
            PaymentStatus::Rejected { .. } => "RJCT",
        }
    }

    fn rejected(reason: &str, information: &str) -> PaymentStatus {
        PaymentStatus::Rejected {
            reason: reason.to_owned(),
            information: information.to_owned(),
        }
    }

    /// The status of a transaction whose chunk made no operation, for `why`.
    pub fn refused(why: &str) -> PaymentStatus {
        PaymentStatus::rejected("NARR", why)
    }

    /// The status of a transaction of `operation`, its own transaction if made.
    pub fn of(operation: &Operation, transaction: Option<&Transaction>) -> PaymentStatus {
        let cause = &operation.cause.message;
        match operation.status {
            OperationStatus::PendingApproval => return PaymentStatus::Pending,
            OperationStatus::Rejected => return PaymentStatus::rejected("MS02", cause),
            OperationStatus::Cancelled => return PaymentStatus::rejected("DS02", cause),
            // No code says "its approvals did not come in time": the cause says it.
            OperationStatus::Expired => return PaymentStatus::rejected("NARR", cause),
            _ => {}
        }
        let Some(transaction) = transaction else {
            return match operation.status {
                OperationStatus::Failed => PaymentStatus::rejected("NARR", cause),
                _ => PaymentStatus::Accepted,
            };
        };
        match transaction.status {
            TransactionStatus::Pending => PaymentStatus::Accepted,
            TransactionStatus::Submitted | TransactionStatus::Unknown | TransactionStatus::NeedsAttention => {
                PaymentStatus::InProcess
            }
            TransactionStatus::Confirmed => PaymentStatus::Settled,
            TransactionStatus::Failed | TransactionStatus::Returned => {
                PaymentStatus::rejected(&reason_of(&transaction.cause.code), &transaction.cause.message)
            }
        }
    }
}

/// The rail's reason code when its cause carries one (`rail_rejected_AC04`), else `NARR`.
fn reason_of(cause_code: &str) -> String {
    let code = cause_code.rsplit('_').next().unwrap_or_default();
    let iso = code.len() == 4 && code.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit());
    if iso { code } else { "NARR" }.to_owned()
}

/// The status of a group of transactions (a payment information, the message).
pub fn group_status<'a>(statuses: impl IntoIterator<Item = &'a PaymentStatus>) -> &'static str {
    let (mut rejected, mut least, mut all) = (0, None::<&PaymentStatus>, 0);
    for status in statuses {
        all += 1;
        match status {
            PaymentStatus::Rejected { .. } => rejected += 1,
            other => least = Some(least.map_or(other, |known| known.min(other))),
        }
    }
    match (rejected, least) {
        (0, Some(least)) => least.code(),
        (_, None) if all > 0 => "RJCT",
        (_, Some(_)) => "PART",
        _ => "ACTC",
    }
}

/// One transaction of the file, with its ids and status.
#[derive(Debug, Clone)]
pub struct ReportedTransaction {
    /// Its payment information, by index.
    pub group: usize,
    pub end_to_end_id: Option<String>,
    pub instruction_id: Option<String>,
    pub status: PaymentStatus,
}

/// The pain.002 version answering a pain.001 version.
pub fn answering_version(pain001_version: u8) -> u8 {
    if pain001_version <= 8 {
        pain001_version
    } else {
        pain001_version + 1
    }
}

/// Writes the report of `initiation`'s transactions, as of `now`. Its `MsgId` is a digest of
/// what it reports, so the same statuses make the same message id.
pub fn write(initiation: &Initiation, transactions: &[ReportedTransaction], now: OffsetDateTime) -> String {
    let version = answering_version(initiation.version);
    let mut body = Xml::default();
    body.open("OrgnlGrpInfAndSts");
    body.text("OrgnlMsgId", &initiation.message_id);
    body.text("OrgnlMsgNmId", &initiation.message_name());
    body.text("OrgnlCreDtTm", &initiation.created_at);
    body.text("OrgnlNbOfTxs", &initiation.number_of_transactions.to_string());
    if let Some(sum) = &initiation.control_sum {
        body.text("OrgnlCtrlSum", sum);
    }
    body.text("GrpSts", group_status(transactions.iter().map(|t| &t.status)));
    body.close("OrgnlGrpInfAndSts");
    for (group, information) in initiation.payment_informations.iter().enumerate() {
        let of_group: Vec<&ReportedTransaction> = transactions.iter().filter(|t| t.group == group).collect();
        body.open("OrgnlPmtInfAndSts");
        body.text("OrgnlPmtInfId", &information.id);
        body.text("OrgnlNbOfTxs", &information.number_of_transactions.to_string());
        if let Some(sum) = &information.control_sum {
            body.text("OrgnlCtrlSum", sum);
        }
        body.text("PmtInfSts", group_status(of_group.iter().map(|t| &t.status)));
        for transaction in of_group {
            body.open("TxInfAndSts");
            if let Some(id) = &transaction.instruction_id {
                body.text("OrgnlInstrId", id);
            }
            if let Some(id) = &transaction.end_to_end_id {
                body.text("OrgnlEndToEndId", id);
            }
            body.text("TxSts", transaction.status.code());
            if let PaymentStatus::Rejected { reason, information } = &transaction.status {
                body.open("StsRsnInf");
                body.open("Rsn");
                body.text("Cd", reason);
                body.close("Rsn");
                // AddtlInf is at most 105 characters.
                body.text("AddtlInf", &information.chars().take(105).collect::<String>());
                body.close("StsRsnInf");
            }
            body.close("TxInfAndSts");
        }
        body.close("OrgnlPmtInfAndSts");
    }
    let digest = hex::encode(Sha256::digest(body.0.as_bytes()));
    let created = now
        .replace_nanosecond(0)
        .unwrap_or(now)
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default();
    let mut document = Xml("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n".to_owned());
    document.0.push_str(&format!(
        "<Document xmlns=\"urn:iso:std:iso:20022:tech:xsd:pain.002.001.{version:02}\">\n<CstmrPmtStsRpt>\n"
    ));
    document.open("GrpHdr");
    document.text("MsgId", &format!("PSR{}", &digest[..32]));
    document.text("CreDtTm", &created);
    document.close("GrpHdr");
    document.0.push_str(&body.0);
    document.0.push_str("</CstmrPmtStsRpt>\n</Document>\n");
    document.0
}

/// `file.status_report`: an operation a pain.001 made changed status, so the file's
/// status report (pain.002) did too; where to read it.
pub fn status_report_event(id: EventId, operation: &Operation) -> Option<Event> {
    #[derive(Serialize)]
    struct Data<'a> {
        file_id: &'a crate::ids::FileId,
        customer_id: &'a CustomerId,
        operation_id: &'a crate::ids::OperationId,
        operation_status: OperationStatus,
        payment_information: Option<&'a String>,
        cause: &'a Cause,
        status_report: String,
    }
    let file_id = operation.file_id.as_ref()?;
    let data = EventData::of(&Data {
        file_id,
        customer_id: &operation.customer_id,
        operation_id: &operation.id,
        operation_status: operation.status,
        payment_information: operation.metadata.get(super::STATUS_REPORTED),
        cause: &operation.cause,
        status_report: format!("/v1/files/{file_id}/status_report?format=pain.002"),
    });
    Some(Event::new(
        id,
        "file.status_report".into(),
        &operation.customer_id,
        operation.environment,
        operation.updated_at,
        data,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rejected() -> PaymentStatus {
        PaymentStatus::rejected("AC04", "closed")
    }

    #[test]
    fn a_group_is_its_least_advanced_transaction_partial_when_some_are_rejected() {
        use PaymentStatus::*;
        assert_eq!(group_status(&[Settled, InProcess, Settled]), "ACSP");
        assert_eq!(group_status(&[Settled, Settled]), "ACSC");
        assert_eq!(group_status(&[Settled, rejected()]), "PART");
        assert_eq!(group_status(&[rejected(), rejected()]), "RJCT");
        assert_eq!(group_status(&[Pending, Validated]), "ACTC");
    }

    #[test]
    fn each_stage_of_an_operation_and_its_transaction_has_its_status() {
        use crate::operations::tests::operation_in;
        use OperationStatus as Op;
        let mut transaction = crate::transactions::tests::transaction();
        let of =
            |operation: Op, transaction: Option<&Transaction>| PaymentStatus::of(&operation_in(operation), transaction);
        assert_eq!(of(Op::PendingApproval, None).code(), "PDNG");
        assert!(matches!(of(Op::Rejected, None), PaymentStatus::Rejected { reason, .. } if reason == "MS02"));
        assert!(matches!(of(Op::Cancelled, None), PaymentStatus::Rejected { reason, .. } if reason == "DS02"));
        assert_eq!(of(Op::Approved, None).code(), "ACCP");
        assert!(matches!(of(Op::Failed, None), PaymentStatus::Rejected { reason, .. } if reason == "NARR"));
        for (status, code) in [
            (TransactionStatus::Pending, "ACCP"),
            (TransactionStatus::Submitted, "ACSP"),
            (TransactionStatus::Unknown, "ACSP"),
            (TransactionStatus::Confirmed, "ACSC"),
            (TransactionStatus::Failed, "RJCT"),
            (TransactionStatus::Returned, "RJCT"),
        ] {
            transaction.status = status;
            assert_eq!(of(Op::Processing, Some(&transaction)).code(), code, "{status:?}");
        }
        transaction.cause.code = "rail_rejected_AC04".into();
        transaction.status = TransactionStatus::Failed;
        assert!(
            matches!(of(Op::Processing, Some(&transaction)), PaymentStatus::Rejected { reason, .. } if reason == "AC04")
        );
    }

    #[test]
    fn a_rails_four_character_reason_is_kept_anything_else_is_narrative() {
        assert_eq!(reason_of("rail_rejected_AC04"), "AC04");
        assert_eq!(reason_of("rail_rejected_closed_account"), "NARR");
        assert_eq!(reason_of("returned"), "NARR");
    }

    #[test]
    fn pain001_versions_are_answered_by_the_pain002_of_their_release() {
        assert_eq!([3, 8, 9, 11].map(answering_version), [3, 8, 10, 12]);
    }
}
