//! Changesets: whole or absent, one winner of a conflict, each caller its own outcome, the
//! largest operation, an entity's history.

use super::{audit, cause, changes, operation};
use ops_domain::event::Event;
use ops_domain::money::Amount;
use ops_domain::operations::{Beneficiary, Destination, Item, Operation, OperationStatus};
use ops_domain::ports::{AuditEntry, Store, StoreError, Write};
use ops_domain::validate::check_operation_size;
use std::sync::Arc;
use time::OffsetDateTime;

/// An entity's history holds its own entries only (not another entity's, nor one filed under
/// an operation), oldest first; past its bound, the newest of them.
pub(super) async fn an_entitys_history_is_its_own_newest_entries_oldest_first(store: &dyn Store) {
    use ops_domain::history::MAX_ENTITY_HISTORY;
    let entry = |entity: &str, operation: Option<&str>, action: String| {
        Write::Audit(AuditEntry {
            entity_type: "webhook_endpoint".into(),
            entity_id: entity.into(),
            operation_id: operation.map(Into::into),
            action: action.clone(),
            from: None,
            to: None,
            cause: cause(&action),
            at: OffsetDateTime::UNIX_EPOCH,
            details: None,
        })
    };
    let endpoint = "whe_history";
    assert!(store.entity_history(endpoint).await.unwrap().is_empty());
    store
        .commit(changes(vec![
            entry(endpoint, None, "created".into()),
            entry("whe_other", None, "created".into()),
            entry(endpoint, Some("op_history"), "filed_under_an_operation".into()),
        ]))
        .await
        .unwrap();
    store
        .commit(changes(vec![entry(endpoint, None, "updated".into())]))
        .await
        .unwrap();
    let actions = |history: Vec<AuditEntry>| history.into_iter().map(|e| e.action).collect::<Vec<_>>();
    let history = store.entity_history(endpoint).await.unwrap();
    assert_eq!(actions(history), ["created", "updated"]);

    // A hundred changes a commit (DynamoDB's most in a transaction) until past the bound.
    let mut made = 2;
    while made <= MAX_ENTITY_HISTORY {
        let writes = (made..(made + 100).min(MAX_ENTITY_HISTORY + 1))
            .map(|i| entry(endpoint, None, format!("change_{i:04}")))
            .collect::<Vec<_>>();
        made += writes.len();
        store.commit(changes(writes)).await.unwrap();
    }
    let history = actions(store.entity_history(endpoint).await.unwrap());
    assert_eq!(history.len(), MAX_ENTITY_HISTORY);
    assert_eq!(history[0], "updated", "the oldest one left out");
    assert_eq!(history.last().unwrap(), &format!("change_{MAX_ENTITY_HISTORY:04}"));
}

pub(super) async fn changesets_committed_together_stay_whole_each(store: &dyn Store) {
    let first = operation("op_each1", "cus_each", OperationStatus::Approved);
    let second = operation("op_each2", "cus_each", OperationStatus::Approved);
    let third = operation("op_each3", "cus_each", OperationStatus::Approved);
    store
        .commit(changes(vec![Write::InsertOperation(first.clone())]))
        .await
        .unwrap();
    // The second changeset inserts, then fails a condition: it alone writes nothing.
    let outcomes = store
        .commit_each(vec![
            changes(vec![audit("op_each1", "processing")]),
            changes(vec![
                Write::InsertOperation(second.clone()),
                Write::InsertOperation(first.clone()),
            ]),
            changes(vec![
                Write::InsertOperation(third.clone()),
                audit("op_each3", "approved"),
            ]),
        ])
        .await;
    assert!(matches!(
        outcomes.as_slice(),
        [Ok(()), Err(StoreError::Conflict), Ok(())]
    ));
    assert_eq!(store.operation(&second.id).await.unwrap(), None);
    assert_eq!(store.operation(&third.id).await.unwrap(), Some(third));
    let history = store.operation_history(&first.id).await.unwrap();
    assert_eq!(history.len(), 1);
    assert!(store.commit_each(vec![]).await.is_empty());
}

pub(super) async fn entity_and_audit_land_together(store: &dyn Store) {
    let op = operation("op_a1", "cus_a", OperationStatus::Approved);
    store
        .commit(changes(vec![
            Write::InsertOperation(op.clone()),
            audit("op_a1", "approved"),
        ]))
        .await
        .unwrap();
    assert_eq!(store.operation(&"op_a1".into()).await.unwrap(), Some(op.clone()));

    // A failing condition anywhere in the changeset writes nothing at all.
    let mut stale = op.clone();
    stale.status = OperationStatus::Cancelled; // version 1 again: the stored one is already 1
    let result = store
        .commit(changes(vec![
            audit("op_a1", "cancelled"),
            Write::UpdateOperation(stale),
        ]))
        .await;
    assert!(matches!(result, Err(StoreError::Conflict)));
    assert_eq!(store.operation(&"op_a1".into()).await.unwrap(), Some(op.clone()));
    let history = store.operation_history(&"op_a1".into()).await.unwrap();
    assert_eq!(history.len(), 1, "the refused changeset left no audit entry");

    // A lone write is held to its condition as well: an update made from a stale read loses.
    let mut skipped = op.clone();
    skipped.version = 3;
    let lone = store.commit(changes(vec![Write::UpdateOperation(skipped)])).await;
    assert!(matches!(lone, Err(StoreError::Conflict)));
    assert_eq!(store.operation(&"op_a1".into()).await.unwrap(), Some(op.clone()));

    // Inserting an id twice is a conflict, not an overwrite.
    let again = store.commit(changes(vec![Write::InsertOperation(op)])).await;
    assert!(matches!(again, Err(StoreError::Conflict)));
}

pub(super) async fn concurrent_conflicting_updates_have_one_winner(store: Arc<dyn Store>) {
    let op = operation("op_c1", "cus_c", OperationStatus::PendingApproval);
    store
        .commit(changes(vec![Write::InsertOperation(op.clone())]))
        .await
        .unwrap();
    let contenders = [
        OperationStatus::Approved,
        OperationStatus::Cancelled,
        OperationStatus::Rejected,
    ]
    .into_iter()
    .cycle()
    .take(12)
    .map(|status| {
        let store = store.clone();
        let mut next = op.clone();
        next.status = status;
        next.version = 2;
        tokio::spawn(async move {
            let result = store
                .commit(changes(vec![
                    Write::UpdateOperation(next),
                    audit("op_c1", status.as_str()),
                ]))
                .await;
            (status, result)
        })
    })
    .collect::<Vec<_>>();
    let mut winners = vec![];
    for contender in contenders {
        let (status, result) = contender.await.unwrap();
        match result {
            Ok(()) => winners.push(status),
            Err(e) => assert!(matches!(e, StoreError::Conflict), "{e}"),
        }
    }
    assert_eq!(winners.len(), 1, "exactly one concurrent update wins");
    let stored = store.operation(&"op_c1".into()).await.unwrap().unwrap();
    assert_eq!(stored.status, winners[0]);
    assert_eq!(
        store.operation_history(&"op_c1".into()).await.unwrap().len(),
        1,
        "only the winner's audit entry"
    );
}

/// Changesets committed at once (which a store may group into one transaction to share a
/// sync to disk) are each whole or absent on their own: a failed condition in one takes
/// nothing of the others with it, and each caller hears its own outcome.
pub(super) async fn concurrent_changesets_each_get_their_own_outcome(store: Arc<dyn Store>) {
    let taken = operation("op_g_taken", "cus_g", OperationStatus::Approved);
    store
        .commit(changes(vec![Write::InsertOperation(taken.clone())]))
        .await
        .unwrap();
    let racers = (0..32)
        .map(|n| {
            let store = store.clone();
            let taken = taken.clone();
            tokio::spawn(async move {
                let id = format!("op_g{n:02}");
                let mut writes = vec![
                    Write::InsertOperation(operation(&id, "cus_g", OperationStatus::Approved)),
                    audit(&id, "approved"),
                ];
                if n % 3 == 0 {
                    writes.push(Write::InsertOperation(taken));
                }
                (n, id, store.commit(changes(writes)).await)
            })
        })
        .collect::<Vec<_>>();
    for racer in racers {
        let (n, id, outcome) = racer.await.unwrap();
        let stored = store.operation(&id.as_str().into()).await.unwrap();
        let history = store.operation_history(&id.as_str().into()).await.unwrap();
        if n % 3 == 0 {
            assert!(matches!(outcome, Err(StoreError::Conflict)), "{id}: {outcome:?}");
            assert_eq!((stored, history.len()), (None, 0), "{id} wrote nothing");
        } else {
            assert!(outcome.is_ok(), "{id}: {outcome:?}");
            assert!(
                stored.is_some() && history.len() == 1,
                "{id} wrote its operation and audit entry"
            );
        }
    }
}

/// The API refuses an operation whose stored form exceeds its cap; one just under it, with
/// the longest fields, is stored with its events, and still fits once it has gained its
/// transaction ids (DynamoDB holds at most 400 KB in an item).
pub(super) async fn the_largest_operation_the_api_accepts_is_stored(store: &dyn Store) {
    let mut op = operation("op_big", "cus_big", OperationStatus::Approved);
    let item = |n: usize| Item {
        end_to_end_id: None,
        instruction_id: None,
        id: format!("itm_{n:026}").into(),
        beneficiary: Some(Beneficiary {
            id_type: "RUT".into(),
            id: "9".repeat(64),
        }),
        destination: Destination {
            rail: "psp-local:sandbox".into(),
            account: "0".repeat(64),
            account_id: None,
        },
        amount: Amount::new(999_999_999_999).unwrap(),
        reference: Some("r".repeat(140)),
        transaction_id: None,
    };
    // Every item serializes to the same length (plus a comma between two).
    let bare = serde_json::to_vec(&op).unwrap().len();
    let per_item = serde_json::to_vec(&item(0)).unwrap().len() + 1;
    let fitting = (1..)
        .take_while(|n| check_operation_size(bare + n * per_item, *n).is_ok())
        .last();
    op.items = (0..fitting.unwrap()).map(item).collect();
    assert!(check_operation_size(serde_json::to_vec(&op).unwrap().len(), op.items.len()).is_ok());
    let event = |id: &str, kind: &str, op: &Operation| Write::Event(Event::of_operation(id.into(), kind, op));
    store
        .commit(changes(vec![
            Write::InsertOperation(op.clone()),
            audit("op_big", "approved"),
            event("evt_big1", "created", &op),
            event("evt_big2", "approved", &op),
        ]))
        .await
        .unwrap();
    for item in op.items.iter_mut() {
        item.transaction_id = Some(item.id.replacen("itm_", "txn_", 1).into());
    }
    op.status = OperationStatus::Processing;
    op.version = 2;
    store
        .commit(changes(vec![
            Write::UpdateOperation(op.clone()),
            audit("op_big", "processing"),
            event("evt_big3", "processing", &op),
        ]))
        .await
        .unwrap();
    assert_eq!(store.operation(&"op_big".into()).await.unwrap(), Some(op));
}
