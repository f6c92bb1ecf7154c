//! A bank's ISO 20022 `pain.002` (customer payment status report) on a file the service sent
//! it, read as a statement: each transaction it reports settled (`ACSC`, `ACCC`) or rejected
//! (`RJCT`) is a line naming the transaction (`OrgnlInstrId`, which the service's files set
//! to the transaction's id, else `OrgnlEndToEndId`) with its amount (`OrgnlTxRef/Amt/InstdAmt`);
//! statuses on the way (`ACTC`, `ACCP`, `ACSP`, `PDNG` …) tell no outcome and are left out.
//! Its period is the day it was made (`GrpHdr/CreDtTm`), and it speaks only of the payments it
//! lists, so no other transaction is `missing` from it.
//! Versions .001.03 to .001.12 share these elements.

use crate::money::Currency;
use crate::rail::{EntryDirection, Statement, StatementLine, StatementStatus};
use serde::Deserialize;

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Document {
    cstmr_pmt_sts_rpt: Option<Report>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Report {
    grp_hdr: Option<GroupHeader>,
    #[serde(default)]
    orgnl_pmt_inf_and_sts: Vec<PaymentInformation>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct GroupHeader {
    cre_dt_tm: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct PaymentInformation {
    #[serde(default)]
    tx_inf_and_sts: Vec<TransactionStatus>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct TransactionStatus {
    orgnl_instr_id: Option<String>,
    orgnl_end_to_end_id: Option<String>,
    tx_sts: Option<String>,
    acct_svcr_ref: Option<String>,
    orgnl_tx_ref: Option<OriginalReference>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct OriginalReference {
    amt: Option<OriginalAmount>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct OriginalAmount {
    instd_amt: Option<Money>,
}

#[derive(Deserialize)]
struct Money {
    #[serde(rename = "@Ccy")]
    currency: String,
    #[serde(rename = "$text")]
    value: String,
}

/// Reads a pain.002 document; the error names the element that is wrong by its path.
pub fn parse(xml: &[u8]) -> Result<Statement, String> {
    let text = std::str::from_utf8(xml).map_err(|e| format!("the status report is not UTF-8: {e}"))?;
    let document: Document = quick_xml::de::from_str(text).map_err(|e| format!("not a pain.002 document: {e}"))?;
    let report = document
        .cstmr_pmt_sts_rpt
        .ok_or("not a pain.002 document: no /Document/CstmrPmtStsRpt")?;
    // The day the bank reported is the statement's period; it speaks of its own payments only.
    let day = report
        .grp_hdr
        .as_ref()
        .and_then(|h| h.cre_dt_tm.as_deref())
        .and_then(|t| t.trim().get(..10))
        .and_then(|t| time::Date::parse(t, time::macros::format_description!("[year]-[month]-[day]")).ok())
        .ok_or("/Document/CstmrPmtStsRpt/GrpHdr/CreDtTm: missing, or not an ISO date-time")?;
    let mut statement = Statement {
        period: Some(crate::rail::Period { from: day, to: day }),
        partial: true,
        ..Statement::default()
    };
    for (p, information) in report.orgnl_pmt_inf_and_sts.iter().enumerate() {
        for (t, transaction) in information.tx_inf_and_sts.iter().enumerate() {
            let at = |element: &str, what: &str| {
                format!(
                    "/Document/CstmrPmtStsRpt/OrgnlPmtInfAndSts[{}]/TxInfAndSts[{}]/{element}: {what}",
                    p + 1,
                    t + 1
                )
            };
            let status = match transaction.tx_sts.as_deref().map(str::trim) {
                Some("ACSC" | "ACCC") => StatementStatus::Confirmed,
                Some("RJCT") => StatementStatus::Failed,
                Some(_) => continue,
                None => return Err(at("TxSts", "missing")),
            };
            let money = transaction
                .orgnl_tx_ref
                .as_ref()
                .and_then(|r| r.amt.as_ref())
                .and_then(|a| a.instd_amt.as_ref())
                .ok_or_else(|| {
                    at(
                        "OrgnlTxRef/Amt/InstdAmt",
                        "missing: a settled or rejected payment's amount is needed to match it",
                    )
                })?;
            let currency = Currency::parse(money.currency.trim()).ok_or_else(|| {
                at(
                    "OrgnlTxRef/Amt/InstdAmt/@Ccy",
                    &format!("unknown currency {:?}", money.currency),
                )
            })?;
            let amount = currency.minor_units_of(money.value.trim()).ok_or_else(|| {
                at(
                    "OrgnlTxRef/Amt/InstdAmt",
                    &format!("bad amount {:?} for {currency}", money.value),
                )
            })?;
            let (transaction_id, end_to_end_id) = super::named_by(
                transaction.orgnl_instr_id.as_deref(),
                transaction.orgnl_end_to_end_id.as_deref(),
            );
            statement.lines.push(StatementLine {
                rail_reference: transaction
                    .acct_svcr_ref
                    .as_deref()
                    .map(str::trim)
                    .filter(|r| !r.is_empty())
                    .map(str::to_owned),
                transaction_id,
                amount,
                currency,
                status,
                // The service's files are credit transfers: their money leaves its account.
                direction: EntryDirection::Debit,
                reversal: false,
                batch: None,
                booked_on: None,
                end_to_end_id,
            });
        }
    }
    Ok(statement)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(transactions: &str) -> String {
        format!(
            r#"<?xml version="1.0" encoding="UTF-8"?>
<Document xmlns="urn:iso:std:iso:20022:tech:xsd:pain.002.001.10"><CstmrPmtStsRpt>
<GrpHdr><MsgId>B-1</MsgId><CreDtTm>2026-12-07T15:00:00Z</CreDtTm></GrpHdr>
<OrgnlGrpInfAndSts><OrgnlMsgId>bf_01</OrgnlMsgId><OrgnlMsgNmId>pain.001.001.09</OrgnlMsgNmId></OrgnlGrpInfAndSts>
<OrgnlPmtInfAndSts><OrgnlPmtInfId>bf_01-CLP</OrgnlPmtInfId>{transactions}</OrgnlPmtInfAndSts>
</CstmrPmtStsRpt></Document>"#
        )
    }

    #[test]
    fn settled_and_rejected_transactions_are_lines_and_the_rest_are_left_out() {
        let xml = report(
            r#"<TxInfAndSts><OrgnlInstrId>txn_01a</OrgnlInstrId><OrgnlEndToEndId>E2E-1</OrgnlEndToEndId><TxSts>ACSC</TxSts>
<OrgnlTxRef><Amt><InstdAmt Ccy="CLP">1500</InstdAmt></Amt></OrgnlTxRef></TxInfAndSts>
<TxInfAndSts><OrgnlEndToEndId>txn_01b</OrgnlEndToEndId><TxSts>RJCT</TxSts><StsRsnInf><Rsn><Cd>AC04</Cd></Rsn></StsRsnInf>
<OrgnlTxRef><Amt><InstdAmt Ccy="CLP">2500</InstdAmt></Amt></OrgnlTxRef></TxInfAndSts>
<TxInfAndSts><OrgnlInstrId>txn_01c</OrgnlInstrId><TxSts>ACSP</TxSts></TxInfAndSts>"#,
        );
        let statement = parse(xml.as_bytes()).unwrap();
        let lines: Vec<(Option<String>, i64, StatementStatus)> = statement
            .lines
            .iter()
            .map(|l| {
                (
                    l.transaction_id.as_ref().map(|t| t.to_string()),
                    l.amount.minor_units(),
                    l.status,
                )
            })
            .collect();
        assert_eq!(
            lines,
            vec![
                (Some("txn_01a".into()), 1500, StatementStatus::Confirmed),
                (Some("txn_01b".into()), 2500, StatementStatus::Failed),
            ]
        );
        assert!(statement.lines.iter().all(|l| l.direction == EntryDirection::Debit));
    }

    #[test]
    fn a_settled_transaction_without_its_amount_is_refused_by_its_path() {
        let xml = report("<TxInfAndSts><OrgnlInstrId>txn_01a</OrgnlInstrId><TxSts>ACSC</TxSts></TxInfAndSts>");
        let error = parse(xml.as_bytes()).unwrap_err();
        assert!(
            error.contains("OrgnlPmtInfAndSts[1]/TxInfAndSts[1]/OrgnlTxRef/Amt/InstdAmt"),
            "{error}"
        );
        assert!(parse(b"<Document><Other/></Document>").is_err());
    }
}
