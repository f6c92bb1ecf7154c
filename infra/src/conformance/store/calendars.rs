//! Calendars and rails' cut-offs, each kept version by version.

use super::cause;
use ops_domain::access::Environment;
use ops_domain::calendars::{AfterLastCutoff, Calendar, Holiday, RailCutoffs};
use ops_domain::ports::{Changeset, Store, StoreError, Write};
use time::macros::{date, time};
use time::OffsetDateTime;

pub(super) async fn calendars_and_cutoffs_are_kept_version_by_version(store: &dyn Store) {
    let mut calendar = Calendar {
        id: "cal_conformance".into(),
        name: "Chile".into(),
        timezone: "America/Santiago".into(),
        working_days: vec!["mon".into(), "fri".into()],
        holidays: vec![Holiday {
            date: date!(2026 - 12 - 25),
            name: "Navidad".into(),
        }],
        cause: cause("calendar_created"),
        created_at: OffsetDateTime::UNIX_EPOCH,
        updated_at: OffsetDateTime::UNIX_EPOCH,
        environment: Environment::Test,
        version: 1,
    };
    let put = |write: Write| Changeset { writes: vec![write] };
    assert_eq!(store.calendar(&calendar.id).await.unwrap(), None);
    store.commit(put(Write::PutCalendar(calendar.clone()))).await.unwrap();
    assert_eq!(store.calendar(&calendar.id).await.unwrap(), Some(calendar.clone()));
    assert!(matches!(
        store.commit(put(Write::PutCalendar(calendar.clone()))).await,
        Err(StoreError::Conflict)
    ));
    calendar.version = 2;
    calendar.holidays.clear();
    store.commit(put(Write::PutCalendar(calendar.clone()))).await.unwrap();
    assert_eq!(store.calendar(&calendar.id).await.unwrap(), Some(calendar.clone()));

    let mut cutoffs = RailCutoffs {
        rail: "psp-local:cut".into(),
        environment: Environment::Test,
        calendar_id: calendar.id.clone(),
        cutoffs: vec![time!(14:00), time!(17:30)],
        after_last_cutoff: AfterLastCutoff::SendNow,
        cause: cause("rail_cutoffs_saved"),
        version: 1,
    };
    store.commit(put(Write::PutRailCutoffs(cutoffs.clone()))).await.unwrap();
    assert_eq!(
        store.rail_cutoffs(&cutoffs.rail, Environment::Test).await.unwrap(),
        Some(cutoffs.clone())
    );
    assert_eq!(
        store
            .rail_cutoffs(&cutoffs.rail, Environment::Production)
            .await
            .unwrap(),
        None
    );
    cutoffs.version = 3;
    assert!(matches!(
        store.commit(put(Write::PutRailCutoffs(cutoffs.clone()))).await,
        Err(StoreError::Conflict)
    ));
}

/// A file rail's bank file is kept version by version, and a transaction joins it in one
/// commit with it: when either write loses its race, neither lands, so a transaction is never
/// in a file that does not name it, nor named by two.
pub(super) async fn a_transaction_joins_a_bank_file_together_with_it_or_not_at_all(store: &dyn Store) {
    use crate::conformance::reconciliations::transaction;
    use ops_domain::transactions::{BankFile, BankFileStatus};
    let at = time::macros::datetime!(2026-12-07 14:00 UTC);
    let mut file = BankFile::open(Environment::Test, "psp-local:bank", at, 1, cause("bank_file_opened"));
    assert_eq!(store.bank_file(&file.id).await.unwrap(), None);
    let mut joining = transaction("txn_01kbankfileconformance0001", "psp-local:bank", None);
    joining.status = ops_domain::transactions::TransactionStatus::Pending;
    store
        .commit(Changeset {
            writes: vec![Write::InsertTransaction(joining.clone())],
        })
        .await
        .unwrap();
    file.transaction_ids.push(joining.id.clone());
    file.version = 1;
    joining.bank_file = Some(file.id.clone());
    joining.version = 2;
    let join = |file: &BankFile, joining: &ops_domain::transactions::Transaction| Changeset {
        writes: vec![
            Write::UpdateTransaction(joining.clone()),
            Write::PutBankFile(file.clone()),
        ],
    };
    store.commit(join(&file, &joining)).await.unwrap();
    assert_eq!(store.bank_file(&file.id).await.unwrap(), Some(file.clone()));
    // The same join again: the transaction's version is taken, so the file does not move.
    let mut again = file.clone();
    again.transaction_ids.push(joining.id.clone());
    again.version = 2;
    assert!(matches!(
        store.commit(join(&again, &joining)).await,
        Err(StoreError::Conflict)
    ));
    assert_eq!(store.bank_file(&file.id).await.unwrap(), Some(file.clone()));
    // A close that lost its race to a join leaves the file as the join left it.
    let mut closed = file.clone();
    closed.status = BankFileStatus::Closed;
    closed.version = 3;
    assert!(matches!(
        store
            .commit(Changeset {
                writes: vec![Write::PutBankFile(closed)]
            })
            .await,
        Err(StoreError::Conflict)
    ));
    let kept = store.bank_file(&file.id).await.unwrap().unwrap();
    assert_eq!((kept.status, kept.version), (BankFileStatus::Open, 1));
    assert_eq!(
        store.transaction(&joining.id).await.unwrap().and_then(|t| t.bank_file),
        Some(file.id)
    );
}
