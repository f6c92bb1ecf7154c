//! ISO 20022 `camt.053` (bank-to-customer statement), read into statement lines.
//!
//! Each booked entry (`Ntry` with status `BOOK`) becomes a line: its amount and currency
//! (`Amt@Ccy`), its booking day (`BookgDt`), the rail's reference (`AcctSvcrRef` of the entry
//! or of its transaction details, else `NtryRef`) and our transaction id when the end-to-end
//! id carries one. A reversal (`RvslInd`) or return information (`RtrInf`) makes it
//! `returned`; status `RJCT` makes it `failed`. Pending and information-only entries tell no
//! outcome and are left out. The statements' `FrToDt` give the period. Versions .001.02 to
//! .001.13 share these elements; anything else in the document is ignored.

use crate::ids::TransactionId;
use crate::money::Currency;
use crate::rail::{Period, Statement, StatementLine, StatementStatus};
use serde::Deserialize;
use time::Date;

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Document {
    bk_to_cstmr_stmt: BankToCustomerStatement,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct BankToCustomerStatement {
    #[serde(default)]
    stmt: Vec<Stmt>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Stmt {
    fr_to_dt: Option<FromTo>,
    #[serde(default)]
    ntry: Vec<Entry>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct FromTo {
    fr_dt_tm: String,
    to_dt_tm: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Entry {
    ntry_ref: Option<String>,
    amt: Money,
    rvsl_ind: Option<bool>,
    sts: EntryStatus,
    bookg_dt: Option<DateChoice>,
    acct_svcr_ref: Option<String>,
    #[serde(default)]
    ntry_dtls: Vec<EntryDetails>,
}

#[derive(Deserialize)]
struct Money {
    #[serde(rename = "@Ccy")]
    currency: String,
    #[serde(rename = "$text")]
    value: String,
}

/// `<Sts>BOOK</Sts>` (up to .001.06) or `<Sts><Cd>BOOK</Cd></Sts>` (later versions).
#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct EntryStatus {
    #[serde(rename = "$text")]
    text: Option<String>,
    cd: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct DateChoice {
    dt: Option<String>,
    dt_tm: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct EntryDetails {
    #[serde(default)]
    tx_dtls: Vec<TransactionDetails>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct TransactionDetails {
    refs: Option<References>,
    rtr_inf: Option<serde::de::IgnoredAny>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct References {
    acct_svcr_ref: Option<String>,
    end_to_end_id: Option<String>,
}

/// The day of an ISO date or date-time (`2026-11-24`, `2026-11-24T10:00:00+01:00`).
fn day(text: &str) -> Option<Date> {
    let format = time::macros::format_description!("[year]-[month]-[day]");
    Date::parse(text.trim().get(..10)?, &format).ok()
}

/// Reads a `camt.053` document; the error says what is wrong and where.
pub fn parse(xml: &[u8]) -> Result<Statement, String> {
    let text = std::str::from_utf8(xml).map_err(|e| format!("the statement is not UTF-8: {e}"))?;
    let document: Document = quick_xml::de::from_str(text).map_err(|e| format!("not a camt.053 document: {e}"))?;
    let mut statement = Statement::default();
    for (s, stmt) in document.bk_to_cstmr_stmt.stmt.iter().enumerate() {
        if let Some(period) = &stmt.fr_to_dt {
            let (Some(from), Some(to)) = (day(&period.fr_dt_tm), day(&period.to_dt_tm)) else {
                return Err(format!("statement {}: FrToDt is not a pair of ISO dates", s + 1));
            };
            let widened = match statement.period {
                Some(known) => Period {
                    from: known.from.min(from),
                    to: known.to.max(to),
                },
                None => Period { from, to },
            };
            statement.period = Some(widened);
        }
        for (n, entry) in stmt.ntry.iter().enumerate() {
            let at = |what: &str| format!("statement {}, entry {}: {what}", s + 1, n + 1);
            let code = entry.sts.cd.as_deref().or(entry.sts.text.as_deref()).map(str::trim);
            let status = match code {
                Some("BOOK") => StatementStatus::Confirmed,
                Some("RJCT") => StatementStatus::Failed,
                Some("PDNG" | "INFO" | "FUTR") => continue,
                other => return Err(at(&format!("unknown status {:?}", other.unwrap_or("")))),
            };
            let details: Vec<&TransactionDetails> = entry.ntry_dtls.iter().flat_map(|d| &d.tx_dtls).collect();
            let returned = entry.rvsl_ind == Some(true) || details.iter().any(|d| d.rtr_inf.is_some());
            let status = if returned { StatementStatus::Returned } else { status };
            let currency = Currency::parse(entry.amt.currency.trim())
                .ok_or_else(|| at(&format!("unknown currency {:?}", entry.amt.currency)))?;
            let amount = currency
                .minor_units_of(entry.amt.value.trim())
                .ok_or_else(|| at(&format!("bad amount {:?} for {currency}", entry.amt.value)))?;
            let booked_on = match &entry.bookg_dt {
                Some(date) => Some(
                    date.dt
                        .as_deref()
                        .or(date.dt_tm.as_deref())
                        .and_then(day)
                        .ok_or_else(|| at("BookgDt is not an ISO date"))?,
                ),
                None => None,
            };
            let references = details.iter().find_map(|d| d.refs.as_ref());
            let rail_reference = entry
                .acct_svcr_ref
                .as_deref()
                .or(references.and_then(|r| r.acct_svcr_ref.as_deref()))
                .or(entry.ntry_ref.as_deref())
                .map(str::trim)
                .filter(|r| !r.is_empty())
                .ok_or_else(|| at("no reference (AcctSvcrRef or NtryRef)"))?;
            let transaction_id = references
                .and_then(|r| r.end_to_end_id.as_deref())
                .and_then(|id| TransactionId::parse(id.trim()));
            statement.lines.push(StatementLine {
                rail_reference: rail_reference.to_owned(),
                transaction_id,
                amount,
                currency,
                status,
                booked_on,
            });
        }
    }
    Ok(statement)
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATEMENT: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<Document xmlns="urn:iso:std:iso:20022:tech:xsd:camt.053.001.02">
  <BkToCstmrStmt>
    <GrpHdr><MsgId>STMT-1</MsgId><CreDtTm>2026-11-25T06:00:00</CreDtTm></GrpHdr>
    <Stmt>
      <Id>S1</Id>
      <FrToDt><FrDtTm>2026-11-24T00:00:00</FrDtTm><ToDtTm>2026-11-24T23:59:59</ToDtTm></FrToDt>
      <Acct><Id><IBAN>DE89370400440532013000</IBAN></Id></Acct>
      <Ntry>
        <Amt Ccy="EUR">12.50</Amt><CdtDbtInd>DBIT</CdtDbtInd><Sts>BOOK</Sts>
        <BookgDt><Dt>2026-11-24</Dt></BookgDt><AcctSvcrRef>R-1</AcctSvcrRef>
        <NtryDtls><TxDtls><Refs><EndToEndId>txn_01abc</EndToEndId></Refs></TxDtls></NtryDtls>
      </Ntry>
      <Ntry>
        <Amt Ccy="JPY">1500</Amt><CdtDbtInd>DBIT</CdtDbtInd><Sts><Cd>BOOK</Cd></Sts>
        <BookgDt><DtTm>2026-11-24T10:00:00+01:00</DtTm></BookgDt>
        <NtryDtls><TxDtls><Refs><AcctSvcrRef>R-2 &amp; co</AcctSvcrRef><EndToEndId>NOTPROVIDED</EndToEndId></Refs>
          <RtrInf><Rsn><Cd>AC04</Cd></Rsn></RtrInf></TxDtls></NtryDtls>
      </Ntry>
      <Ntry><Amt Ccy="EUR">1.00</Amt><CdtDbtInd>DBIT</CdtDbtInd><Sts>PDNG</Sts><NtryRef>P</NtryRef></Ntry>
      <Ntry><Amt Ccy="EUR">2.00</Amt><CdtDbtInd>DBIT</CdtDbtInd><RvslInd>true</RvslInd><Sts>BOOK</Sts><NtryRef>R-3</NtryRef></Ntry>
    </Stmt>
  </BkToCstmrStmt>
</Document>"#;

    #[test]
    fn booked_entries_become_lines_with_their_outcome_day_and_references() {
        let statement = parse(STATEMENT.as_bytes()).unwrap();
        let date = |d: &str| day(d).unwrap();
        assert_eq!(
            statement.period,
            Some(Period {
                from: date("2026-11-24"),
                to: date("2026-11-24")
            })
        );
        let seen: Vec<_> = statement
            .lines
            .iter()
            .map(|l| {
                (
                    l.rail_reference.as_str(),
                    l.transaction_id.as_ref().map(|t| t.to_string()),
                    l.amount.minor_units(),
                    l.currency.code(),
                    l.status,
                    l.booked_on,
                )
            })
            .collect();
        assert_eq!(
            seen,
            vec![
                (
                    "R-1",
                    Some("txn_01abc".to_owned()),
                    1250,
                    "EUR",
                    StatementStatus::Confirmed,
                    Some(date("2026-11-24"))
                ),
                (
                    "R-2 & co",
                    None,
                    1500,
                    "JPY",
                    StatementStatus::Returned,
                    Some(date("2026-11-24"))
                ),
                ("R-3", None, 200, "EUR", StatementStatus::Returned, None),
            ]
        );
    }

    #[test]
    fn a_malformed_document_is_refused_with_what_is_wrong() {
        for (document, says) in [
            ("<Document><BkToCstmrStmt>", "not a camt.053 document"),
            ("not xml at all", "not a camt.053 document"),
            (
                &STATEMENT.replace("12.50", "12.505"),
                "statement 1, entry 1: bad amount",
            ),
            (
                &STATEMENT.replace("Ccy=\"JPY\"", "Ccy=\"XYZ\""),
                "entry 2: unknown currency",
            ),
            (
                &STATEMENT.replace("<Sts>BOOK</Sts>", "<Sts>WHAT</Sts>"),
                "unknown status",
            ),
            (
                &STATEMENT.replace("<NtryRef>R-3</NtryRef>", ""),
                "entry 4: no reference",
            ),
        ] {
            let error = parse(document.as_bytes()).unwrap_err();
            assert!(error.contains(says), "{error} should say {says}");
        }
    }
}
