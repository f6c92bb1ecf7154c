//! ISO 20022 bank-to-customer cash management messages, read into statement lines: `camt.053`
//! (the end-of-day statement, `BkToCstmrStmt/Stmt`), `camt.052` (the intraday account report,
//! `BkToCstmrAcctRpt/Rpt`) and `camt.054` (debit and credit notifications, entry by entry,
//! `BkToCstmrDbtCdtNtfctn/Ntfctn`, which tell of the bookings they list only, so no transaction
//! is `missing` from one). The three share their entries (`Ntry`), so one reading serves them.
//!
//! Each booked entry (`Ntry` with status `BOOK`) becomes a line: its amount and currency
//! (`Amt@Ccy`), its direction (`CdtDbtInd`), its booking day (`BookgDt`), the rail's reference
//! (`AcctSvcrRef` of the entry or of its transaction details, else `NtryRef`; all optional),
//! our transaction id when `InstrId` or the end-to-end id carries one, and the customer's
//! end-to-end id. A reversal (`RvslInd`) is the booking it reverses coming back: `returned`,
//! with that booking's direction (the indicator flipped); return information (`RtrInf`) makes
//! it `returned`; status `RJCT` `failed`. An entry that books several payments as one (a
//! batch: transaction details each with its own amount, `TxDtls/Amt` or
//! `TxDtls/AmtDtls/TxAmt/Amt`) is a line per detail, each with its own amount, direction and
//! references and the entry it belongs to (its number among the document's `Ntry`) with the
//! entry's amount. Pending and information-only entries tell no outcome and are left out. The
//! statements' (reports', notifications') `FrToDt` give the period, and their opening and
//! closing booked balances (`Bal` of type `OPBD`, `PRCD` or `CLBD`) are read for the ledger's
//! check. Versions .001.02 to .001.13 share these elements; anything else is ignored.

use crate::money::{Amount, Currency};
use crate::rail::{
    BalanceKind, BatchDetail, EntryDirection, Period, Statement, StatementBalance, StatementFormat, StatementLine,
    StatementStatus,
};
use serde::Deserialize;
use time::Date;

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Document {
    bk_to_cstmr_stmt: Option<Statements>,
    bk_to_cstmr_acct_rpt: Option<Reports>,
    bk_to_cstmr_dbt_cdt_ntfctn: Option<Notifications>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Statements {
    #[serde(default)]
    stmt: Vec<Stmt>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Reports {
    #[serde(default)]
    rpt: Vec<Stmt>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Notifications {
    #[serde(default)]
    ntfctn: Vec<Stmt>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Stmt {
    fr_to_dt: Option<FromTo>,
    #[serde(default)]
    bal: Vec<Balance>,
    #[serde(default)]
    ntry: Vec<Entry>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Balance {
    tp: Option<BalanceType>,
    amt: Option<Money>,
    cdt_dbt_ind: Option<String>,
    dt: Option<DateChoice>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct BalanceType {
    cd_or_prtry: Option<CodeOrProprietary>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct CodeOrProprietary {
    cd: Option<String>,
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
    /// The detail's own amount (`Amt` from .001.03 on, else `AmtDtls/TxAmt/Amt`).
    amt: Option<Money>,
    amt_dtls: Option<AmountDetails>,
    cdt_dbt_ind: Option<String>,
    rtr_inf: Option<serde::de::IgnoredAny>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct AmountDetails {
    tx_amt: Option<AmountAndCurrency>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct AmountAndCurrency {
    amt: Money,
}

impl TransactionDetails {
    fn amount(&self) -> Option<&Money> {
        self.amt
            .as_ref()
            .or(self.amt_dtls.as_ref().and_then(|d| d.tx_amt.as_ref()).map(|t| &t.amt))
    }
}

/// A direction indicator (`CRDT`, `DBIT`), or what is wrong with it.
fn direction_of(indicator: Option<&str>) -> Result<Option<EntryDirection>, String> {
    match indicator.map(str::trim) {
        Some("CRDT") => Ok(Some(EntryDirection::Credit)),
        Some("DBIT") => Ok(Some(EntryDirection::Debit)),
        Some(other) => Err(format!("CdtDbtInd is CRDT or DBIT, not {other:?}")),
        None => Ok(None),
    }
}

/// An amount in its currency's minor units, or what is wrong with it.
fn money_of(money: &Money) -> Result<(Amount, Currency), (&'static str, String)> {
    let currency = Currency::parse(money.currency.trim())
        .ok_or_else(|| ("Amt/@Ccy", format!("unknown currency {:?}", money.currency)))?;
    let amount = currency
        .minor_units_of(money.value.trim())
        .ok_or_else(|| ("Amt", format!("bad amount {:?} for {currency}", money.value)))?;
    Ok((amount, currency))
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct References {
    acct_svcr_ref: Option<String>,
    instr_id: Option<String>,
    end_to_end_id: Option<String>,
}

/// A booked balance the statement opens (`OPBD`, or `PRCD`, the day before's close) or
/// closes (`CLBD`) with; other balances (interim, available, forward) are not the ledger's.
fn balance_of(balance: &Balance) -> Result<Option<StatementBalance>, (&'static str, String)> {
    let code = balance
        .tp
        .as_ref()
        .and_then(|t| t.cd_or_prtry.as_ref())
        .and_then(|c| c.cd.as_deref());
    let (kind, day_before) = match code.map(str::trim) {
        Some("OPBD") => (BalanceKind::Opening, true),
        Some("PRCD") => (BalanceKind::Opening, false),
        Some("CLBD") => (BalanceKind::Closing, false),
        _ => return Ok(None),
    };
    let money = balance.amt.as_ref().ok_or(("Amt", "Amt is missing".to_owned()))?;
    let currency = Currency::parse(money.currency.trim())
        .ok_or_else(|| ("Amt/@Ccy", format!("unknown currency {:?}", money.currency)))?;
    let units = currency
        .units_of(money.value.trim())
        .ok_or_else(|| ("Amt", format!("bad amount {:?} for {currency}", money.value)))?;
    let sign = match direction_of(balance.cdt_dbt_ind.as_deref()).map_err(|what| ("CdtDbtInd", what))? {
        Some(EntryDirection::Debit) => -1,
        _ => 1,
    };
    let dated = balance.dt.as_ref().and_then(|d| d.dt.as_deref().or(d.dt_tm.as_deref()));
    let on = dated.and_then(day).ok_or(("Dt", "Dt is not an ISO date".to_owned()))?;
    Ok(Some(StatementBalance {
        kind,
        at_end_of: if day_before {
            on.previous_day().unwrap_or(on)
        } else {
            on
        },
        currency,
        amount: sign * units,
    }))
}

/// The day of an ISO date or date-time (`2026-11-24`, `2026-11-24T10:00:00+01:00`).
fn day(text: &str) -> Option<Date> {
    let format = time::macros::format_description!("[year]-[month]-[day]");
    Date::parse(text.trim().get(..10)?, &format).ok()
}

/// Reads a `camt.053`, `camt.052` or `camt.054` document (`format` says which); the error
/// says what is wrong and where.
pub fn parse(format: StatementFormat, xml: &[u8]) -> Result<Statement, String> {
    let text = std::str::from_utf8(xml).map_err(|e| format!("the statement is not UTF-8: {e}"))?;
    let (name, root, container, noun) = match format {
        StatementFormat::Camt052 => ("camt.052", "BkToCstmrAcctRpt", "Rpt", "report"),
        StatementFormat::Camt054 => ("camt.054", "BkToCstmrDbtCdtNtfctn", "Ntfctn", "notification"),
        _ => ("camt.053", "BkToCstmrStmt", "Stmt", "statement"),
    };
    let document: Document = quick_xml::de::from_str(text).map_err(|e| format!("not a {name} document: {e}"))?;
    let parts = match format {
        StatementFormat::Camt052 => document.bk_to_cstmr_acct_rpt.map(|r| r.rpt),
        StatementFormat::Camt054 => document.bk_to_cstmr_dbt_cdt_ntfctn.map(|n| n.ntfctn),
        _ => document.bk_to_cstmr_stmt.map(|s| s.stmt),
    };
    let parts = parts.ok_or_else(|| format!("not a {name} document: no /Document/{root}"))?;
    let mut statement = Statement {
        // A notification tells of the bookings it notifies, not of every booking of its days.
        partial: format == StatementFormat::Camt054,
        ..Statement::default()
    };
    let mut entries = 0u32;
    for (s, stmt) in parts.iter().enumerate() {
        if let Some(period) = &stmt.fr_to_dt {
            let (Some(from), Some(to)) = (day(&period.fr_dt_tm), day(&period.to_dt_tm)) else {
                return Err(format!("{noun} {}: FrToDt is not a pair of ISO dates", s + 1));
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
        for (b, balance) in stmt.bal.iter().enumerate() {
            let at = |element: &str, what: &str| {
                format!(
                    "{noun} {s}, balance {b}: {what} (/Document/{root}/{container}[{s}]/Bal[{b}]/{element})",
                    s = s + 1,
                    b = b + 1
                )
            };
            if let Some(read) = balance_of(balance).map_err(|(element, what)| at(element, &what))? {
                statement.balances.push(read);
            }
        }
        for (n, entry) in stmt.ntry.iter().enumerate() {
            entries += 1;
            // What is wrong, with the element's path in the document.
            let at = |element: &str, what: &str| {
                format!(
                    "{noun} {s}, entry {n}: {what} (/Document/{root}/{container}[{s}]/Ntry[{n}]/{element})",
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
            let booked = direction_of(entry.cdt_dbt_ind.as_deref())
                .map_err(|what| at("CdtDbtInd", &what))?
                .ok_or_else(|| at("CdtDbtInd", "CdtDbtInd is missing"))?;
            let amt = entry.amt.as_ref().ok_or_else(|| at("Amt", "Amt is missing"))?;
            let (entry_amount, entry_currency) = money_of(amt).map_err(|(element, what)| at(element, &what))?;
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
            // A batch booking (several details, each with its amount) is a line per detail;
            // any other entry is one line, its references from its first detail.
            let batch = details.len() > 1 && details.iter().all(|d| d.amount().is_some());
            let parts: Vec<Option<&TransactionDetails>> = if batch {
                details.iter().copied().map(Some).collect()
            } else {
                vec![details.first().copied()]
            };
            for (d, detail) in parts.iter().enumerate() {
                let in_detail = |element: &str, what: &str| at(&format!("NtryDtls/TxDtls[{}]/{element}", d + 1), what);
                let (amount, currency, booked) = match detail.filter(|_| batch) {
                    Some(detail) => {
                        let money = detail.amount().expect("a batch's details each have an amount");
                        let (amount, currency) =
                            money_of(money).map_err(|(element, what)| in_detail(element, &what))?;
                        let own = direction_of(detail.cdt_dbt_ind.as_deref())
                            .map_err(|what| in_detail("CdtDbtInd", &what))?;
                        (amount, currency, own.unwrap_or(booked))
                    }
                    None => (entry_amount, entry_currency.clone(), booked),
                };
                let returned = reversal || detail.is_some_and(|d| d.rtr_inf.is_some());
                let references = detail.and_then(|d| d.refs.as_ref());
                // A batch's own references name the batch, not its payments.
                let detail_reference = references.and_then(|r| r.acct_svcr_ref.as_deref());
                let rail_reference = match batch {
                    true => detail_reference,
                    false => entry
                        .acct_svcr_ref
                        .as_deref()
                        .or(detail_reference)
                        .or(entry.ntry_ref.as_deref()),
                };
                let rail_reference = rail_reference
                    .map(str::trim)
                    .filter(|r| !r.is_empty())
                    .map(str::to_owned);
                let (transaction_id, end_to_end_id) = super::named_by(
                    references.and_then(|r| r.instr_id.as_deref()),
                    references.and_then(|r| r.end_to_end_id.as_deref()),
                );
                statement.lines.push(StatementLine {
                    rail_reference,
                    transaction_id,
                    amount,
                    currency,
                    status: if returned { StatementStatus::Returned } else { status },
                    direction: if reversal { booked.flipped() } else { booked },
                    reversal,
                    batch: batch.then_some(BatchDetail {
                        entry: entries,
                        details: details.len() as u32,
                        entry_amount,
                    }),
                    booked_on,
                    end_to_end_id,
                });
            }
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
        let statement = parse(StatementFormat::Camt053, STATEMENT.as_bytes()).unwrap();
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
            let error = parse(StatementFormat::Camt053, document.as_bytes()).unwrap_err();
            assert!(error.contains(says), "{error} should say {says}");
        }
    }

    /// A batch booking: one entry, a line per transaction detail with its own amount,
    /// direction and references; an entry whose details lack amounts stays one line.
    #[test]
    fn a_batch_entry_is_a_line_per_detail() {
        let batch = r#"<Document><BkToCstmrStmt><Stmt>
      <Ntry><Amt Ccy="EUR">9.00</Amt><CdtDbtInd>DBIT</CdtDbtInd><Sts>BOOK</Sts><AcctSvcrRef>BATCH</AcctSvcrRef>
        <NtryDtls><Btch><NbOfTxs>2</NbOfTxs></Btch>
          <TxDtls><Refs><AcctSvcrRef>D-1</AcctSvcrRef><EndToEndId>txn_01abc</EndToEndId></Refs><Amt Ccy="EUR">4.00</Amt></TxDtls>
          <TxDtls><Refs><EndToEndId>txn_01abd</EndToEndId></Refs><AmtDtls><TxAmt><Amt Ccy="EUR">5.00</Amt></TxAmt></AmtDtls><CdtDbtInd>DBIT</CdtDbtInd></TxDtls>
        </NtryDtls></Ntry>
      <Ntry><Amt Ccy="EUR">1.00</Amt><CdtDbtInd>DBIT</CdtDbtInd><Sts>BOOK</Sts>
        <NtryDtls><TxDtls><Refs><EndToEndId>txn_01abe</EndToEndId></Refs></TxDtls><TxDtls/></NtryDtls></Ntry>
    </Stmt></BkToCstmrStmt></Document>"#;
        let lines = parse(StatementFormat::Camt053, batch.as_bytes()).unwrap().lines;
        let seen: Vec<_> = lines
            .iter()
            .map(|l| {
                (
                    l.rail_reference.as_deref(),
                    l.transaction_id.as_ref().map(|t| t.to_string()),
                    l.amount.minor_units(),
                    l.batch.map(|b| (b.entry, b.details, b.entry_amount.minor_units())),
                )
            })
            .collect();
        assert_eq!(
            seen,
            vec![
                (Some("D-1"), Some("txn_01abc".into()), 400, Some((1, 2, 900))),
                (None, Some("txn_01abd".into()), 500, Some((1, 2, 900))),
                (None, Some("txn_01abe".into()), 100, None),
            ]
        );
        let error = parse(StatementFormat::Camt053, batch.replace(">5.00<", ">5.001<").as_bytes()).unwrap_err();
        assert!(
            error.ends_with("(/Document/BkToCstmrStmt/Stmt[1]/Ntry[1]/NtryDtls/TxDtls[2]/Amt)"),
            "{error}"
        );
    }

    /// The intraday report (camt.052) and the notifications (camt.054) carry the same
    /// entries under their own containers; a document of another kind is refused by name.
    #[test]
    fn reports_and_notifications_are_read_as_statements_are() {
        let entry = r#"<Ntry><Amt Ccy="EUR">12.50</Amt><CdtDbtInd>CRDT</CdtDbtInd><Sts><Cd>BOOK</Cd></Sts>
            <BookgDt><Dt>2026-11-24</Dt></BookgDt><AcctSvcrRef>R-1</AcctSvcrRef></Ntry>"#;
        let report = format!(
            "<Document><BkToCstmrAcctRpt><Rpt><FrToDt><FrDtTm>2026-11-24T00:00:00</FrDtTm>\
             <ToDtTm>2026-11-24T12:00:00</ToDtTm></FrToDt>{entry}</Rpt></BkToCstmrAcctRpt></Document>"
        );
        let notification = format!(
            "<Document><BkToCstmrDbtCdtNtfctn><Ntfctn>{entry}{entry}</Ntfctn></BkToCstmrDbtCdtNtfctn></Document>"
        );
        let read = parse(StatementFormat::Camt052, report.as_bytes()).unwrap();
        assert_eq!(read.lines.len(), 1);
        assert_eq!(
            (read.lines[0].direction, read.lines[0].amount.minor_units()),
            (EntryDirection::Credit, 1250)
        );
        assert!(read.period.is_some());
        assert_eq!(
            parse(StatementFormat::Camt054, notification.as_bytes())
                .unwrap()
                .lines
                .len(),
            2
        );
        let error = parse(StatementFormat::Camt053, notification.as_bytes()).unwrap_err();
        assert_eq!(error, "not a camt.053 document: no /Document/BkToCstmrStmt");
        let error = parse(StatementFormat::Camt054, notification.replace("12.50", "x").as_bytes()).unwrap_err();
        assert!(
            error.starts_with("notification 1, entry 1: bad amount")
                && error.ends_with("(/Document/BkToCstmrDbtCdtNtfctn/Ntfctn[1]/Ntry[1]/Amt)"),
            "{error}"
        );
    }
}
