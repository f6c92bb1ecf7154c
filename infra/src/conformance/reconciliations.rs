//! The reconciliation part of the store port: transactions found by rail and confirmation
//! day, and reconciliations kept once per statement, the same on SQLite as on DynamoDB.

use ops_domain::access::Environment;
use ops_domain::cause::{Actor, Cause};
use ops_domain::ids::{ReconciliationId, TransactionId};
use ops_domain::money::{Amount, Currency};
use ops_domain::operations::Beneficiary;
use ops_domain::ports::{Changeset, Store, StoreError, Write};
use ops_domain::rail::{Period, RailDirection, StatementFormat};
use ops_domain::reconciliations::{
    ManyToOne, OutcomeCounts, Reconciliation, ReconciliationQuery, ReconciliationRules, Tolerance,
};
use ops_domain::transactions::{ReturnSweep, Transaction, TransactionStatus};
use time::macros::{date, datetime};
use time::OffsetDateTime;

/// A transaction of `rail`, confirmed at `confirmed_at` (else submitted).
pub fn transaction(id: &str, rail: &str, confirmed_at: Option<OffsetDateTime>) -> Transaction {
    let at = datetime!(2026-11-20 08:00 UTC);
    Transaction {
        end_to_end_id: None,
        id: id.into(),
        operation_id: "op_rec".into(),
        customer_id: "cus_rec".into(),
        item_id: "itm_rec".into(),
        rail: rail.into(),
        rail_reference: Some(format!("ref-{id}")),
        amount: Amount::new(1500).unwrap(),
        currency: Currency::parse("CLP").unwrap(),
        beneficiary: Beneficiary {
            id_type: "RUT".into(),
            id: "1".into(),
        },
        account: "123".into(),
        reference: None,
        status: match confirmed_at {
            Some(_) => TransactionStatus::Confirmed,
            None => TransactionStatus::Submitted,
        },
        cause: Cause::new("confirmed_by_rail", "confirmed", Actor::system(), at),
        submit_attempts: 1,
        submitting_since: None,
        possibly_submitted: true,
        next_poll_at: None,
        status_polls: 1,
        confirmed_at,
        created_at: at,
        updated_at: at,
        environment: Environment::Test,
        hold_id: None,
        hold_expires_at: None,
        direction: RailDirection::Credit,
        credit_account_id: None,
        cutoff_at: None,
        settlement_day: None,
        submit_after: None,
        bank_file: None,
        version: 1,
    }
}

pub async fn run_all(store: &dyn Store) {
    transactions_are_found_by_rail_and_confirmation_day(store).await;
    return_sweeps_read_a_rails_confirmations_in_order_from_where_they_got_to(store).await;
    a_statement_is_reconciled_once(store).await;
    reconciliations_are_listed_newest_import_first_of_a_rail_or_all(store).await;
    a_rails_rules_are_kept_per_environment_version_by_version(store).await;
}

async fn transactions_are_found_by_rail_and_confirmation_day(store: &dyn Store) {
    let rail = "psp-local:conformance";
    let written = [
        transaction("txn_rec1", rail, Some(datetime!(2026-11-23 23:59:59 UTC))),
        transaction("txn_rec2", rail, Some(datetime!(2026-11-24 00:00 UTC))),
        transaction("txn_rec3", rail, Some(datetime!(2026-11-25 12:00 UTC))),
        transaction("txn_rec4", rail, Some(datetime!(2026-11-26 00:00 UTC))),
        transaction("txn_rec5", "psp-local:other", Some(datetime!(2026-11-24 12:00 UTC))),
        transaction("txn_rec6", rail, None),
    ];
    let writes = written.iter().cloned().map(Write::InsertTransaction).collect();
    store.commit(Changeset { writes }).await.unwrap();
    let ids = |found: Vec<Transaction>| found.into_iter().map(|t| t.id.to_string()).collect::<Vec<_>>();
    assert_eq!(
        ids(store
            .confirmed_on_rail(rail, date!(2026 - 11 - 24), date!(2026 - 11 - 25))
            .await
            .unwrap()),
        ["txn_rec2", "txn_rec3"]
    );
    // A return keeps the day it was confirmed.
    let mut returned = written[1].clone();
    returned.status = TransactionStatus::Returned;
    returned.version = 2;
    store
        .commit(Changeset {
            writes: vec![Write::UpdateTransaction(returned.clone())],
        })
        .await
        .unwrap();
    let found = store
        .confirmed_on_rail(rail, date!(2026 - 11 - 24), date!(2026 - 11 - 24))
        .await
        .unwrap();
    assert_eq!(found, vec![returned]);
}

async fn return_sweeps_read_a_rails_confirmations_in_order_from_where_they_got_to(store: &dyn Store) {
    let rail = "psp-local:sweep";
    let both = datetime!(2026-11-24 00:00:00.250 UTC);
    let written = [
        transaction("txn_sw4", rail, Some(datetime!(2026-11-24 10:00 UTC))),
        transaction("txn_sw3", rail, Some(both)),
        transaction("txn_sw2", rail, Some(both)),
        transaction("txn_sw1", rail, Some(datetime!(2026-11-23 23:59:59.5 UTC))),
        transaction("txn_sw5", "psp-local:other", Some(datetime!(2026-11-24 09:00 UTC))),
        transaction("txn_sw6", rail, Some(datetime!(2026-11-24 12:00:00.001 UTC))),
        transaction("txn_sw7", rail, None),
    ];
    let writes = written.iter().cloned().map(Write::InsertTransaction).collect();
    store.commit(Changeset { writes }).await.unwrap();
    let until = datetime!(2026-11-24 12:00 UTC);
    let between = |after: (OffsetDateTime, &str), until, limit| {
        let after_id = TransactionId::from(after.1.to_owned());
        async move {
            let found = store
                .confirmed_between(rail, (after.0, &after_id), until, limit)
                .await
                .unwrap();
            found.into_iter().map(|t| t.id.to_string()).collect::<Vec<_>>()
        }
    };
    let from_start = (datetime!(2026-11-23 23:00 UTC), "");
    // By confirmation time across days, then id; none later than `until`, none of another rail.
    assert_eq!(
        between(from_start, until, 10).await,
        ["txn_sw1", "txn_sw2", "txn_sw3", "txn_sw4"]
    );
    assert_eq!(between(from_start, until, 2).await, ["txn_sw1", "txn_sw2"]);
    // On from the last one read: the one confirmed at the same instant with a greater id comes.
    assert_eq!(between((both, "txn_sw2"), until, 10).await, ["txn_sw3", "txn_sw4"]);
    assert_eq!(between((both, "txn_sw3"), until, 10).await, ["txn_sw4"]);
    // `until` counts the instant itself.
    assert_eq!(between(from_start, both, 10).await, ["txn_sw1", "txn_sw2", "txn_sw3"]);

    assert_eq!(store.return_sweep(rail, 1).await.unwrap(), None);
    let mut sweep = ReturnSweep {
        rail: rail.into(),
        check: 1,
        confirmed_at: both,
        transaction_id: "txn_sw2".into(),
    };
    let put = |sweep: &ReturnSweep| Changeset {
        writes: vec![Write::PutReturnSweep(sweep.clone())],
    };
    store.commit(put(&sweep)).await.unwrap();
    assert_eq!(store.return_sweep(rail, 1).await.unwrap(), Some(sweep.clone()));
    sweep.transaction_id = "txn_sw3".into();
    store.commit(put(&sweep)).await.unwrap();
    assert_eq!(store.return_sweep(rail, 1).await.unwrap(), Some(sweep));
    assert_eq!(store.return_sweep(rail, 2).await.unwrap(), None);
}

/// The reconciliation of `statement` on `rail`, imported at `at`.
fn reconciliation(rail: &str, statement: &[u8], at: OffsetDateTime) -> Reconciliation {
    Reconciliation {
        id: Reconciliation::id_of(Environment::Test, rail, StatementFormat::Csv, statement),
        rail: rail.into(),
        format: StatementFormat::Csv,
        period: Period {
            from: date!(2026 - 11 - 24),
            to: date!(2026 - 11 - 24),
        },
        sha256: "ab".into(),
        statement_lines: 3,
        outcomes: OutcomeCounts {
            matched: 2,
            unmatched: 1,
            ..OutcomeCounts::default()
        },
        transitions_applied: 0,
        work_items_opened: 1,
        rules_version: 0,
        balances: vec![],
        cause: Cause::new("statement_imported", "3 lines", Actor::system(), at),
        created_at: at,
        environment: Environment::Test,
        version: 1,
    }
}

async fn a_statement_is_reconciled_once(store: &dyn Store) {
    let reconciliation = reconciliation("psp-local:conformance", b"lines", datetime!(2026-11-24 08:00 UTC));
    let id = reconciliation.id.clone();
    assert!(id.as_str().starts_with("rec_"));
    assert_eq!(store.reconciliation(&id).await.unwrap(), None);
    let insert = || Changeset {
        writes: vec![Write::InsertReconciliation(reconciliation.clone())],
    };
    store.commit(insert()).await.unwrap();
    assert_eq!(store.reconciliation(&id).await.unwrap(), Some(reconciliation.clone()));
    assert!(matches!(store.commit(insert()).await, Err(StoreError::Conflict)));
}

async fn reconciliations_are_listed_newest_import_first_of_a_rail_or_all(store: &dyn Store) {
    // Imported after every other reconciliation of the suite, so the newest of all; two on
    // each day, imported within the same millisecond (the order's precision), then by id.
    let (monday, tuesday) = (datetime!(2031-01-05 06:00 UTC), datetime!(2031-01-06 06:00:00.5 UTC));
    let (spei, pix) = ("psp-local:listed-spei", "psp-local:listed-pix");
    let made = [
        reconciliation(spei, b"monday", monday),
        reconciliation(pix, b"monday", monday + time::Duration::nanoseconds(1)),
        reconciliation(spei, b"tuesday", tuesday),
        reconciliation(spei, b"tuesday, again", tuesday),
    ];
    for one in &made {
        let insert = Changeset {
            writes: vec![Write::InsertReconciliation(one.clone())],
        };
        store.commit(insert).await.unwrap();
    }
    let list = |rail: Option<&str>, after: Option<&Reconciliation>, limit| {
        let query = ReconciliationQuery {
            rail: rail.map(str::to_owned),
            starting_after: after.cloned(),
            limit,
        };
        async move {
            let listed = store.reconciliations(&query).await.unwrap();
            listed.into_iter().map(|r| r.id).collect::<Vec<_>>()
        }
    };
    let by_id = |a: &Reconciliation, b: &Reconciliation| match a.id > b.id {
        true => [a.id.clone(), b.id.clone()],
        false => [b.id.clone(), a.id.clone()],
    };
    let newest: Vec<_> = [by_id(&made[2], &made[3]), by_id(&made[0], &made[1])].concat();
    assert_eq!(list(None, None, 4).await, newest);
    // A page goes on after the last of the one before, however the ids sort.
    assert_eq!(list(None, None, 2).await, newest[..2]);
    let last = made.iter().find(|r| r.id == newest[1]).unwrap();
    assert_eq!(list(None, Some(last), 2).await, newest[2..]);
    let third = made.iter().find(|r| r.id == newest[2]).unwrap();
    assert_eq!(list(None, Some(third), 1).await, newest[3..]);
    // One rail's.
    let spei_newest: Vec<_> = [by_id(&made[2], &made[3]).to_vec(), vec![made[0].id.clone()]].concat();
    assert_eq!(list(Some(spei), None, 10).await, spei_newest);
    let spei_first = made.iter().find(|r| r.id == spei_newest[0]).unwrap();
    assert_eq!(list(Some(spei), Some(spei_first), 1).await, spei_newest[1..2]);
    assert_eq!(list(Some(pix), None, 10).await, [made[1].id.clone()]);
    assert_eq!(
        list(Some(pix), Some(&made[1]), 10).await,
        Vec::<ReconciliationId>::new()
    );
    assert_eq!(
        list(Some("psp-local:none"), None, 10).await,
        Vec::<ReconciliationId>::new()
    );
}

async fn a_rails_rules_are_kept_per_environment_version_by_version(store: &dyn Store) {
    let rail = "psp-local:ruled";
    assert_eq!(store.reconciliation_rules(rail, Environment::Test).await.unwrap(), None);
    let mut rules = ReconciliationRules::defaults(rail, Environment::Test);
    rules.rules.tolerance = Tolerance {
        minor_units: 25,
        basis_points: 10,
    };
    rules.rules.many_to_one = Some(ManyToOne { max_transactions: 3 });
    rules.version = 1;
    let put = |rules: &ReconciliationRules| Changeset {
        writes: vec![Write::PutReconciliationRules(rules.clone())],
    };
    store.commit(put(&rules)).await.unwrap();
    assert_eq!(
        store.reconciliation_rules(rail, Environment::Test).await.unwrap(),
        Some(rules.clone())
    );
    assert_eq!(
        store.reconciliation_rules(rail, Environment::Production).await.unwrap(),
        None,
        "one environment's rules are not the other's"
    );
    // A second version 1 (a concurrent first save) is a conflict; version 2 replaces it.
    assert!(matches!(store.commit(put(&rules)).await, Err(StoreError::Conflict)));
    rules.version = 2;
    rules.rules.date_window_days = 7;
    store.commit(put(&rules)).await.unwrap();
    assert_eq!(
        store.reconciliation_rules(rail, Environment::Test).await.unwrap(),
        Some(rules.clone())
    );
    rules.version = 4;
    assert!(matches!(store.commit(put(&rules)).await, Err(StoreError::Conflict)));
}
