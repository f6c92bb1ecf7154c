//! ISO 20022 `camt.053` (bank-to-customer statement), read into statement lines.
//!
//! Each booked entry (`Ntry` with status `BOOK`) becomes a line: its amount and currency
//! (`Amt@Ccy`), its direction (`CdtDbtInd`), its booking day (`BookgDt`), the rail's reference
//! (`AcctSvcrRef` of the entry or of its transaction details, else `NtryRef`; all optional) and
//! our transaction id when the end-to-end id carries one. A reversal (`RvslInd`) is the
//! booking it reverses coming back: `returned`, with that booking's direction (the indicator
//! flipped); return information (`RtrInf`) makes it `returned`; status `RJCT` `failed`. Pending and information-only entries tell no
//! outcome and are left out. The statements' `FrToDt` give the period. Versions .001.02 to
//! .001.13 share these elements; anything else in the document is ignored.

use crate::ids::TransactionId;
use crate::money::Currency;
use crate::rail::{EntryDirection, Period, Statement, StatementLine, StatementStatus};
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
    amt: Option<Money>,
    cdt_dbt_ind: Option<String>,
    rvsl_ind: Option<bool>,
    sts: Option<EntryStatus>,
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
            // What is wrong, with the element's path in the document.
            let at = |element: &str, what: &str| {
                format!(
                    "statement {s}, entry {n}: {what} (/Document/BkToCstmrStmt/Stmt[{s}]/Ntry[{n}]/{element})",
                    s = s + 1,
                    n = n + 1
                )
            };
            let sts = entry.sts.as_ref().ok_or_else(|| at("Sts", "Sts is missing"))?;
            let code = sts.cd.as_deref().or(sts.text.as_deref()).map(str::trim);
            let status = match code {
                Some("BOOK") => StatementStatus::Confirmed,
                Some("RJCT") => StatementStatus::Failed,
                Some("PDNG" | "INFO" | "FUTR") => continue,
                other => return Err(at("Sts", &format!("unknown status {:?}", other.unwrap_or("")))),
            };
            let details: Vec<&TransactionDetails> = entry.ntry_dtls.iter().flat_map(|d| &d.tx_dtls).collect();
            let reversal = entry.rvsl_ind == Some(true);
            let returned = reversal || details.iter().any(|d| d.rtr_inf.is_some());
            let status = if returned { StatementStatus::Returned } else { status };
            let booked = match entry.cdt_dbt_ind.as_deref().map(str::trim) {
                Some("CRDT") => EntryDirection::Credit,
                Some("DBIT") => EntryDirection::Debit,
                Some(other) => return Err(at("CdtDbtInd", &format!("CdtDbtInd is CRDT or DBIT, not {other:?}"))),
                None => return Err(at("CdtDbtInd", "CdtDbtInd is missing")),
            };
            let direction = if reversal { booked.flipped() } else { booked };
            let amt = entry.amt.as_ref().ok_or_else(|| at("Amt", "Amt is missing"))?;
            let currency = Currency::parse(amt.currency.trim())
                .ok_or_else(|| at("Amt/@Ccy", &format!("unknown currency {:?}", amt.currency)))?;
            let amount = currency
                .minor_units_of(amt.value.trim())
                .ok_or_else(|| at("Amt", &format!("bad amount {:?} for {currency}", amt.value)))?;
            let booked_on = match &entry.bookg_dt {
                Some(date) => Some(
                    date.dt
                        .as_deref()
                        .or(date.dt_tm.as_deref())
                        .and_then(day)
                        .ok_or_else(|| at("BookgDt", "BookgDt is not an ISO date"))?,
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
                .map(str::to_owned);
            let transaction_id = references
                .and_then(|r| r.end_to_end_id.as_deref())
                .and_then(|id| TransactionId::parse(id.trim()));
            statement.lines.push(StatementLine {
                rail_reference,
                transaction_id,
                amount,
                currency,
                status,
                direction,
                reversal,
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
      <Ntry><Amt Ccy="EUR">2.00</Amt><CdtDbtInd>CRDT</CdtDbtInd><RvslInd>true</RvslInd><Sts>BOOK</Sts><NtryRef>R-3</NtryRef></Ntry>
      <Ntry><Amt Ccy="EUR">3.00</Amt><CdtDbtInd>CRDT</CdtDbtInd><Sts>BOOK</Sts><BookgDt><Dt>2026-11-24</Dt></BookgDt></Ntry>
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
                    l.rail_reference.as_deref(),
                    l.transaction_id.as_ref().map(|t| t.to_string()),
                    l.amount.minor_units(),
                    l.currency.code(),
                    l.status,
                    (l.direction, l.reversal),
                    l.booked_on,
                )
            })
            .collect();
        let (debit, credit) = (EntryDirection::Debit, EntryDirection::Credit);
        let day = Some(date("2026-11-24"));
        assert_eq!(
            seen,
            vec![
                (
                    Some("R-1"),
                    Some("txn_01abc".to_owned()),
                    1250,
                    "EUR",
                    StatementStatus::Confirmed,
                    (debit, false),
                    day
                ),
                (
                    Some("R-2 & co"),
                    None,
                    1500,
                    "JPY",
                    StatementStatus::Returned,
                    (debit, false),
                    day
                ),
                // The reversal of a debit, booked as a credit: the debit's money coming back.
                (
                    Some("R-3"),
                    None,
                    200,
                    "EUR",
                    StatementStatus::Returned,
                    (debit, true),
                    None
                ),
                // No reference at all, as ISO 20022 allows: a line matched by value.
                (None, None, 300, "EUR", StatementStatus::Confirmed, (credit, false), day),
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
                &STATEMENT.replace("<Amt Ccy=\"EUR\">2.00</Amt>", ""),
                "statement 1, entry 4: Amt is missing (/Document/BkToCstmrStmt/Stmt[1]/Ntry[4]/Amt)",
            ),
            (
                &STATEMENT.replace("<CdtDbtInd>CRDT</CdtDbtInd><Sts>BOOK", "<Sts>BOOK"),
                "entry 5: CdtDbtInd is missing (/Document/BkToCstmrStmt/Stmt[1]/Ntry[5]/CdtDbtInd)",
            ),
            (
                &STATEMENT.replace(
                    "<CdtDbtInd>CRDT</CdtDbtInd><Sts>BOOK",
                    "<CdtDbtInd>UP</CdtDbtInd><Sts>BOOK",
                ),
                "entry 5: CdtDbtInd is CRDT or DBIT, not \"UP\"",
            ),
        ] {
            let error = parse(document.as_bytes()).unwrap_err();
            assert!(error.contains(says), "{error} should say {says}");
        }
    }
}
