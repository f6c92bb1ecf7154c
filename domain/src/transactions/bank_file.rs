//! A file rail's bank file: the transactions submitted to the rail before one of its
//! cut-offs, sent to the bank together as one ISO 20022 `pain.001` at that cut-off.
//!
//! A transaction joins the open file of its rail's next cut-off in the same commit that
//! names the file on the transaction, so it is in at most one file. At the cut-off the file is
//! closed (nothing joins or leaves it after), written once and kept, and handed to the rail's
//! connectivity layer. A handover whose outcome was lost is asked about before the file is
//! handed over again, and a file handed over again is the kept bytes, with the same `MsgId`.

use crate::access::Environment;
use crate::cause::Cause;
use crate::ids::{BankFileId, TransactionId};
use crate::money::Currency;
use crate::ports::StoreError;
use crate::transactions::Transaction;
use crate::xml_writer::Xml;
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use time::OffsetDateTime;

/// The most transactions one file holds; the next go into the cut-off's next part, so a
/// file's record stays far below a store item's size.
pub const MAX_BANK_FILE_TRANSACTIONS: usize = 2_000;
/// The most parts one cut-off's files take: 200,000 transactions a cut-off.
pub const MAX_BANK_FILE_PARTS: u32 = 100;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BankFileStatus {
    /// Before its cut-off: transactions join it, and may be cancelled out of it.
    Open,
    /// Its cut-off passed: what it holds is fixed, and it is being handed over.
    Closed,
    /// The rail's connectivity layer took it.
    HandedOver,
    /// The connectivity layer refused it: its transactions failed, or wait for an operator.
    Refused,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BankFile {
    /// Also the file's `MsgId`: the same for every handover of it.
    pub id: BankFileId,
    pub rail: String,
    pub environment: Environment,
    #[serde(with = "time::serde::rfc3339")]
    pub cutoff_at: OffsetDateTime,
    /// Which of the cut-off's files, from 1.
    pub part: u32,
    pub status: BankFileStatus,
    pub transaction_ids: Vec<TransactionId>,
    /// When it closed: its `CreDtTm`, so that it is written the same every time.
    #[serde(default, with = "time::serde::rfc3339::option")]
    pub closed_at: Option<OffsetDateTime>,
    /// The SHA-256 of the bytes kept and handed over.
    #[serde(default)]
    pub sha256: Option<String>,
    /// A handover is under way: set before the call, cleared with its outcome. Found set by a
    /// later worker long after, the outcome was lost, and the rail is asked before anything
    /// is sent again.
    #[serde(default, with = "time::serde::rfc3339::option")]
    pub handing_over_since: Option<OffsetDateTime>,
    /// The last handover's outcome is not known: ask the rail before handing it over again.
    #[serde(default)]
    pub outcome_unknown: bool,
    /// Handover calls made so far.
    #[serde(default)]
    pub handovers: u32,
    /// The connectivity layer's reference for it.
    #[serde(default)]
    pub rail_reference: Option<String>,
    pub cause: Cause,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    pub updated_at: OffsetDateTime,
    pub version: u64,
}

impl BankFile {
    /// The id of `rail`'s file `part` for the cut-off at `cutoff_at`: the same wherever and
    /// however often it is worked out, so two workers joining the same cut-off meet on one
    /// record. A ULID of the cut-off's time whose random part is the rail's digest, so files
    /// sort by cut-off; 29 characters, within `MsgId`'s 35.
    pub fn id_of(environment: Environment, rail: &str, cutoff_at: OffsetDateTime, part: u32) -> BankFileId {
        let digest = Sha256::digest(format!("{}|{rail}|{part}", environment.as_str()).as_bytes());
        let mut random = [0u8; 16];
        random[6..].copy_from_slice(&digest[..10]);
        let ms = u64::try_from(cutoff_at.unix_timestamp_nanos() / 1_000_000).unwrap_or(0);
        let ulid = ulid::Ulid::from_parts(ms, u128::from_be_bytes(random));
        BankFileId::from(format!("bf_{}", ulid.to_string().to_ascii_lowercase()))
    }

    pub fn open(environment: Environment, rail: &str, cutoff_at: OffsetDateTime, part: u32, cause: Cause) -> BankFile {
        let now = cause.at;
        BankFile {
            id: BankFile::id_of(environment, rail, cutoff_at, part),
            rail: rail.to_owned(),
            environment,
            cutoff_at,
            part,
            status: BankFileStatus::Open,
            transaction_ids: vec![],
            closed_at: None,
            sha256: None,
            handing_over_since: None,
            outcome_unknown: false,
            handovers: 0,
            rail_reference: None,
            cause,
            created_at: now,
            updated_at: now,
            version: 0,
        }
    }

    /// Where its bytes are kept.
    pub fn blob_key(id: &BankFileId) -> String {
        format!("bank_files/{id}.xml")
    }

    /// The next version of it, as changed at `now`.
    pub fn changed(mut self, now: OffsetDateTime) -> BankFile {
        self.version += 1;
        self.updated_at = now;
        self
    }
}

/// Port: where bank files are kept.
#[async_trait]
pub trait BankFileStore: Send + Sync {
    async fn bank_file(&self, id: &BankFileId) -> Result<Option<BankFile>, StoreError>;
}

/// Writes `file`'s pain.001 (version .001.09) of `transactions`, in the file's order: one
/// payment information a currency, each transaction's `InstrId` its id here (which the bank's
/// status reports and notifications give back) and its `EndToEndId` the customer's, or its id
/// when the customer gave none. The debtor is the service's account at the rail, named by the
/// rail's id.
pub fn write_pain001(file: &BankFile, transactions: &[Transaction]) -> String {
    let created = file
        .closed_at
        .unwrap_or(file.cutoff_at)
        .replace_nanosecond(0)
        .unwrap_or(file.cutoff_at)
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default();
    let execution_day = file.cutoff_at.date().to_string();
    let mut currencies: Vec<&Currency> = transactions.iter().map(|t| &t.currency).collect();
    currencies.sort_by_key(|c| c.code().to_owned());
    currencies.dedup();
    let mut xml = Xml("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n".to_owned());
    xml.0
        .push_str("<Document xmlns=\"urn:iso:std:iso:20022:tech:xsd:pain.001.001.09\">\n<CstmrCdtTrfInitn>\n");
    xml.open("GrpHdr");
    xml.text("MsgId", &file.id);
    xml.text("CreDtTm", &created);
    xml.text("NbOfTxs", &transactions.len().to_string());
    // A group control sum adds amounts of one currency; a file of several has none (it is
    // optional), and each payment information has its own.
    if let [currency] = currencies.as_slice() {
        xml.text("CtrlSum", &decimal_sum(transactions, currency));
    }
    xml.open("InitgPty");
    xml.text("Nm", &file.rail);
    xml.close("InitgPty");
    xml.close("GrpHdr");
    for currency in currencies {
        let of_currency: Vec<&Transaction> = transactions.iter().filter(|t| &t.currency == currency).collect();
        xml.open("PmtInf");
        xml.text("PmtInfId", &format!("{}-{}", file.id, currency.code()));
        xml.text("PmtMtd", "TRF");
        xml.text("BtchBookg", "true");
        xml.text("NbOfTxs", &of_currency.len().to_string());
        xml.text("CtrlSum", &decimal_sum(transactions, currency));
        xml.open("ReqdExctnDt");
        xml.text("Dt", &execution_day);
        xml.close("ReqdExctnDt");
        xml.open("Dbtr");
        xml.text("Nm", &file.rail);
        xml.close("Dbtr");
        xml.open("DbtrAcct");
        other_id(&mut xml, &file.rail, None);
        xml.close("DbtrAcct");
        xml.open("DbtrAgt");
        xml.open("FinInstnId");
        xml.open("Othr");
        xml.text("Id", "NOTPROVIDED");
        xml.close("Othr");
        xml.close("FinInstnId");
        xml.close("DbtrAgt");
        for transaction in of_currency {
            xml.open("CdtTrfTxInf");
            xml.open("PmtId");
            xml.text("InstrId", &transaction.id);
            xml.text(
                "EndToEndId",
                transaction.end_to_end_id.as_deref().unwrap_or(&transaction.id),
            );
            xml.close("PmtId");
            xml.open("Amt");
            xml.0.push_str(&format!(
                "<InstdAmt Ccy=\"{}\">{}</InstdAmt>\n",
                currency.code(),
                decimal(transaction.amount.minor_units().into(), currency)
            ));
            xml.close("Amt");
            xml.open("Cdtr");
            xml.open("Id");
            xml.open("PrvtId");
            xml.open("Othr");
            xml.text("Id", &clip(&transaction.beneficiary.id));
            xml.open("SchmeNm");
            xml.text("Prtry", &clip(&transaction.beneficiary.id_type));
            xml.close("SchmeNm");
            xml.close("Othr");
            xml.close("PrvtId");
            xml.close("Id");
            xml.close("Cdtr");
            xml.open("CdtrAcct");
            other_id(&mut xml, &transaction.account, None);
            xml.close("CdtrAcct");
            if let Some(reference) = &transaction.reference {
                xml.open("RmtInf");
                xml.text("Ustrd", &reference.chars().take(140).collect::<String>());
                xml.close("RmtInf");
            }
            xml.close("CdtTrfTxInf");
        }
        xml.close("PmtInf");
    }
    xml.0.push_str("</CstmrCdtTrfInitn>\n</Document>\n");
    xml.0
}

/// An account identified by something other than an IBAN (`Othr/Id`, at most 34 characters).
fn other_id(xml: &mut Xml, id: &str, scheme: Option<&str>) {
    xml.open("Id");
    xml.open("Othr");
    xml.text("Id", &id.chars().take(34).collect::<String>());
    if let Some(scheme) = scheme {
        xml.open("SchmeNm");
        xml.text("Prtry", scheme);
        xml.close("SchmeNm");
    }
    xml.close("Othr");
    xml.close("Id");
}

/// At most the 35 characters a `Max35Text` takes.
fn clip(text: &str) -> String {
    text.chars().take(35).collect()
}

fn decimal_sum(transactions: &[Transaction], currency: &Currency) -> String {
    let sum: i128 = transactions
        .iter()
        .filter(|t| &t.currency == currency)
        .map(|t| i128::from(t.amount.minor_units()))
        .sum();
    decimal(sum, currency)
}

/// Minor units as the decimal a pain.001 amount is written in.
fn decimal(minor_units: i128, currency: &Currency) -> String {
    let digits = currency.minor_digits();
    if digits == 0 {
        return minor_units.to_string();
    }
    let scale = 10i128.pow(digits);
    format!(
        "{}.{:0width$}",
        minor_units / scale,
        minor_units % scale,
        width = digits as usize
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cutoffs_file_ids_are_fixed_by_rail_and_part_and_sort_by_cutoff() {
        let at = time::macros::datetime!(2026-12-07 14:00 UTC);
        let id = BankFile::id_of(Environment::Test, "psp-local:bank", at, 1);
        assert_eq!(id, BankFile::id_of(Environment::Test, "psp-local:bank", at, 1));
        assert_ne!(id, BankFile::id_of(Environment::Test, "psp-local:bank", at, 2));
        assert_ne!(id, BankFile::id_of(Environment::Production, "psp-local:bank", at, 1));
        assert_ne!(id, BankFile::id_of(Environment::Test, "psp-local:other", at, 1));
        let later = BankFile::id_of(Environment::Test, "psp-local:bank", at + time::Duration::hours(4), 1);
        assert!(id < later, "{id} {later}");
        assert!(BankFileId::parse(&id).is_some() && id.len() <= 35, "{id}");
    }

    #[test]
    fn amounts_are_written_in_their_currencys_decimals() {
        let eur = Currency::parse("EUR").unwrap();
        let clp = Currency::parse("CLP").unwrap();
        assert_eq!(decimal(123_405, &eur), "1234.05");
        assert_eq!(decimal(5, &eur), "0.05");
        assert_eq!(decimal(123_400, &clp), "123400");
    }
}
