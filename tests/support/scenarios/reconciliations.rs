//! Reconciliation never books the same money twice: statements imported in any order, again
//! byte for byte, or with the same lines inside other statements, apply each return once.

use crate::{statement_body, Api, ADMIN_KEY};
use proptest::prelude::*;
use serde_json::{json, Value};

/// A confirmed payout as the sandbox rail's statement lists it: its seven fields.
#[derive(Debug, Clone)]
pub struct PaidLine(pub Vec<String>);

impl PaidLine {
    fn transaction_id(&self) -> &str {
        &self.0[1]
    }

    fn amount(&self) -> i64 {
        self.0[2].parse().unwrap()
    }
}

/// What a statement line says became of a payout.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Said {
    Confirmed,
    Returned,
    /// Confirmed money cannot fail: a confirmed transaction the statement says failed is
    /// returned.
    Failed,
}

#[derive(Debug, Clone)]
pub enum Import {
    /// A statement of these payouts' lines (by index, each saying what it says), in this
    /// order, and a line of money no payout answers to, whose amount makes the bytes its own.
    Lines { lines: Vec<(usize, Said)>, salt: u16 },
    /// An earlier statement of the sequence again, byte for byte (its index, modulo how many
    /// there were).
    Again(usize),
}

/// Sequences of imports over `payouts` confirmed payouts.
pub fn imports(payouts: usize) -> impl Strategy<Value = Vec<Import>> {
    let said = prop_oneof![2 => Just(Said::Confirmed), 2 => Just(Said::Returned), 1 => Just(Said::Failed)];
    let lines = prop::collection::vec((0..payouts, said), 1..=payouts + 2);
    let import = prop_oneof![
        3 => (lines, any::<u16>()).prop_map(|(lines, salt)| Import::Lines { lines, salt }),
        1 => any::<usize>().prop_map(Import::Again),
    ];
    prop::collection::vec(import, 1..7)
}

/// Imports the statements `imports` describes, one after the other, and after each checks:
/// a statement imported again answers the reconciliation it made; each payout is returned
/// exactly when some statement said returned or failed, with one return in its history; and
/// the account holds what it was funded with less the payouts whose money stayed out.
pub async fn statements_never_book_the_same_money_twice(
    app: &Api,
    operation: &str,
    account: &str,
    funded: i64,
    paid: &[PaidLine],
    imports: &[Import],
) {
    let mut made: Vec<(Value, Value)> = vec![];
    let mut said_returned = vec![false; paid.len()];
    for (n, import) in imports.iter().enumerate() {
        let (body, earlier) = match import {
            Import::Lines { lines, salt } => {
                let mut statement = vec![];
                for (index, said) in lines {
                    let mut fields = paid[*index].0.clone();
                    fields[4] = match said {
                        Said::Confirmed => "confirmed",
                        Said::Returned => "returned",
                        Said::Failed => "failed",
                    }
                    .into();
                    statement.push(fields.join(","));
                }
                let day = &paid[0].0[5];
                statement.push(format!(
                    "sbx_stranger,,{},CLP,confirmed,{day},credit",
                    1 + u32::from(*salt)
                ));
                (statement_body("csv", statement.join("\n").as_bytes()), None)
            }
            Import::Again(k) if !made.is_empty() => {
                let (body, answer) = &made[k % made.len()];
                (body.clone(), Some(answer.clone()))
            }
            Import::Again(_) => continue,
        };
        let answer = app
            .send(
                reqwest::Method::POST,
                "/v1/reconciliations",
                Some(ADMIN_KEY),
                Some(&format!("import-{n}")),
                Some(&body),
            )
            .await;
        assert_eq!(answer.status, 201, "{}", answer.json());
        let answer = answer.json();
        match earlier {
            Some(earlier) => assert_eq!(answer, earlier, "the same statement answers what it made"),
            None => {
                if let Import::Lines { lines, .. } = import {
                    for (index, said) in lines {
                        said_returned[*index] |= *said != Said::Confirmed;
                    }
                }
                made.push((body, answer));
            }
        }
        check(app, operation, account, funded, paid, &said_returned).await;
    }
}

async fn check(app: &Api, operation: &str, account: &str, funded: i64, paid: &[PaidLine], said_returned: &[bool]) {
    let history = app
        .get(&format!("/v1/operations/{operation}/history"), ADMIN_KEY)
        .await
        .json();
    let entries = history["data"].as_array().unwrap_or_else(|| panic!("{history}"));
    let mut out = funded;
    for (line, returned) in paid.iter().zip(said_returned) {
        let id = line.transaction_id();
        let transaction = app.get(&format!("/v1/transactions/{id}"), ADMIN_KEY).await.json();
        let expected = if *returned { "returned" } else { "confirmed" };
        assert_eq!(transaction["status"], expected, "{transaction}");
        let returns = entries
            .iter()
            .filter(|e| e["entity_id"] == id && e["to"] == "returned")
            .count();
        assert_eq!(returns, usize::from(*returned), "{id}: {history}");
        if !returned {
            out -= line.amount();
        }
    }
    let shown = app.get(&format!("/v1/accounts/{account}"), ADMIN_KEY).await.json();
    let balance = |name: &str| shown["balances"][name].as_i64();
    assert_eq!(
        (balance("posted"), balance("available")),
        (Some(out), Some(out)),
        "{shown}"
    );
}

/// A customer's funded CLP account and an auto-approved payout of `amounts` from it: the
/// operation's id, the account's and the customer's key. The caller runs the pipeline until
/// the sandbox confirmed them.
pub async fn funded_payouts(app: &Api, funded: i64, amounts: &[i64]) -> (String, String, String) {
    let customer = app.create_customer().await;
    let account = app
        .post(
            "/v1/accounts",
            ADMIN_KEY,
            json!({"customer_id": customer.id, "currency": "CLP"}),
        )
        .await;
    assert_eq!(account.status, 201, "{}", account.json());
    let account = account.id();
    let funding = app
        .post(
            &format!("/v1/accounts/{account}/adjustments"),
            ADMIN_KEY,
            json!({"amount": funded, "direction": "credit", "reason": "opening balance"}),
        )
        .await;
    assert_eq!(funding.status, 201, "{}", funding.json());
    // Drawn on the customer's CLP account, as a payout is by default.
    let made = app
        .post(
            "/v1/operations",
            &customer.key,
            crate::payout(&customer.id, "auto", amounts),
        )
        .await;
    assert_eq!(made.status, 201, "{}", made.json());
    assert_eq!(made.json()["source_account_id"], account.as_str());
    (made.id(), account, customer.key)
}

/// The sandbox statement's lines of `operation`'s payouts, in amount order.
pub async fn paid_lines(app: &Api, key: &str, operation: &str, statement: &str) -> Vec<PaidLine> {
    let transactions = app
        .get(&format!("/v1/transactions?operation_id={operation}"), key)
        .await
        .json();
    let ids: Vec<&str> = transactions["data"]
        .as_array()
        .unwrap_or_else(|| panic!("{transactions}"))
        .iter()
        .map(|t| t["id"].as_str().unwrap())
        .collect();
    let mut lines: Vec<PaidLine> = statement
        .lines()
        .map(|l| PaidLine(l.split(',').map(String::from).collect()))
        .filter(|l| ids.contains(&l.transaction_id()))
        .collect();
    lines.sort_by_key(PaidLine::amount);
    assert_eq!(lines.len(), ids.len(), "{statement}");
    lines
}

/// After a payout of 30,000 drawn on `account` (operation `operation`) is confirmed on the
/// sandbox rail, the PSP records 500,000 at the rail's bank on the settlement account; a
/// statement whose closing balance is 470,000 agrees with the ledger, one 100 more is a
/// `balance_mismatch` break with both figures and an exceptions item.
pub async fn statement_balances_agree_or_break(app: &Api, operation: &str, account: &str, sandbox_statement: &str) {
    let movements = app
        .get(&format!("/v1/accounts/{account}/movements"), ADMIN_KEY)
        .await
        .json();
    let payout = movements["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["operation_id"] == operation)
        .expect("the payout's movement");
    assert_eq!(payout["status"], "posted", "{payout}");
    let settlement = payout["entries"][1]["account_id"].as_str().unwrap().to_owned();
    // The PSP's money at the bank, recorded on the ledger's side of it.
    let funded = app
        .post(
            &format!("/v1/accounts/{settlement}/adjustments"),
            ADMIN_KEY,
            json!({"amount": 500_000, "direction": "debit", "reason": "funds at the rail's bank"}),
        )
        .await;
    assert_eq!(funded.status, 201, "{}", funded.json());
    let line = sandbox_statement.lines().nth(1).unwrap();
    let today = line.split(',').nth(5).unwrap().to_owned();
    let camt = |closing: &str| {
        format!(
            r#"<Document><BkToCstmrStmt><Stmt>
<Bal><Tp><CdOrPrtry><Cd>OPBD</Cd></CdOrPrtry></Tp><Amt Ccy="CLP">0</Amt><CdtDbtInd>CRDT</CdtDbtInd><Dt><Dt>{today}</Dt></Dt></Bal>
<Bal><Tp><CdOrPrtry><Cd>CLBD</Cd></CdOrPrtry></Tp><Amt Ccy="CLP">{closing}</Amt><CdtDbtInd>CRDT</CdtDbtInd><Dt><Dt>{today}</Dt></Dt></Bal>
<Ntry><Amt Ccy="CLP">30000</Amt><CdtDbtInd>DBIT</CdtDbtInd><Sts><Cd>BOOK</Cd></Sts><BookgDt><Dt>{today}</Dt></BookgDt></Ntry>
</Stmt></BkToCstmrStmt></Document>"#
        )
    };
    let agreeing = import(app, "balances-1", camt("470000")).await;
    assert_eq!(agreeing.status, 201, "{}", agreeing.json());
    let checks: Vec<Value> = agreeing.json()["balances"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| json!([b["kind"], b["statement"], b["ledger"], b["agrees"], b["account_id"]]))
        .collect();
    assert_eq!(
        checks,
        [
            json!(["opening", 0, 0, true, settlement]),
            json!(["closing", 470_000, 470_000, true, settlement])
        ]
    );
    assert_eq!(agreeing.json()["outcomes"]["balance_mismatch"], 0);
    assert_eq!(agreeing.json()["outcomes"]["matched"], 1);

    let off = import(app, "balances-2", camt("470100")).await;
    assert_eq!(off.status, 201, "{}", off.json());
    assert_eq!(off.json()["outcomes"]["balance_mismatch"], 1, "{}", off.json());
    let id = off.json()["id"].as_str().unwrap().to_owned();
    let page = app
        .get(
            &format!("/v1/reconciliations/{id}/lines?outcome=balance_mismatch"),
            ADMIN_KEY,
        )
        .await
        .json();
    let line = &page["data"][0];
    assert_eq!(
        (
            &line["balance"]["statement"],
            &line["balance"]["ledger"],
            &line["amount_difference"]
        ),
        (&json!(470_100), &json!(470_000), &json!(100))
    );
    let items: Vec<Value> = app
        .open_exceptions()
        .await
        .into_iter()
        .filter(|i| i["subject"]["type"] == "statement_line")
        .collect();
    let item = items
        .iter()
        .find(|i| i["kind"] == "reconciliation_balance_mismatch")
        .expect("an exceptions item for the balance");
    assert!(
        item["cause"]["message"].as_str().unwrap().starts_with(&format!(
            "The statement's closing booked balance at the end of {today} is 470100 CLP"
        )),
        "{item}"
    );
}

async fn import(app: &Api, key: &str, camt: String) -> crate::Reply {
    let body = statement_body("camt053", camt.as_bytes());
    app.send(
        reqwest::Method::POST,
        "/v1/reconciliations",
        Some(ADMIN_KEY),
        Some(key),
        Some(&body),
    )
    .await
}
