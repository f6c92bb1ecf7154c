//! Payout limits and their counters: a counter moves only from the value its writer read, so
//! of two approvals racing on one limit exactly one counts, with everything in its changeset.

use super::operation;
use ops_domain::access::Role;
use ops_domain::limits::{KnownPayee, LimitUse, OverLimit, PayeeReview, PayoutLimit, PayoutLimits};
use ops_domain::money::Currency;
use ops_domain::operations::OperationStatus;
use ops_domain::ports::{Changeset, Store, StoreError, Write};
use std::sync::Arc;
use time::OffsetDateTime;

pub(super) async fn payout_limits_are_kept_version_by_version(store: &dyn Store) {
    let customer = "cus_limits_conformance".into();
    let mut limits = PayoutLimits {
        customer_id: customer,
        limits: vec![PayoutLimit {
            currency: Currency::try_from("CLP".to_string()).unwrap(),
            daily: Some(1_000_000),
            monthly: None,
            per_operation: None,
            per_beneficiary_daily_count: Some(3),
            over_limit: OverLimit::Refuse,
        }],
        payee_review: Some(PayeeReview {
            new_payee: true,
            changed_account: false,
            role: Role::Admin,
        }),
        updated_at: OffsetDateTime::UNIX_EPOCH,
        version: 1,
    };
    let put = |write: Write| Changeset { writes: vec![write] };
    assert_eq!(store.payout_limits(&limits.customer_id).await.unwrap(), None);
    store.commit(put(Write::PutPayoutLimits(limits.clone()))).await.unwrap();
    assert_eq!(
        store.payout_limits(&limits.customer_id).await.unwrap(),
        Some(limits.clone())
    );
    assert!(matches!(
        store.commit(put(Write::PutPayoutLimits(limits.clone()))).await,
        Err(StoreError::Conflict)
    ));
    limits.version = 2;
    limits.limits.clear();
    store.commit(put(Write::PutPayoutLimits(limits.clone()))).await.unwrap();
    assert_eq!(store.payout_limits(&limits.customer_id).await.unwrap(), Some(limits));
}

pub(super) async fn a_limit_counter_moves_only_from_what_its_writer_read(store: Arc<dyn Store>) {
    let counter = "cus_limits_conformance:CLP:d2026-12-07".to_string();
    let other = format!("{counter}:b:rut:1-9");
    let read = |keys: Vec<String>| {
        let store = store.clone();
        async move { store.limit_counters(&keys).await.unwrap() }
    };
    assert_eq!(read(vec![counter.clone(), other.clone()]).await, [0, 0]);
    let counted = |before, after| {
        Write::UseLimit(LimitUse {
            key: counter.clone(),
            before,
            after,
        })
    };
    // Racing approvals each read 0: one counts, the rest conflict, their operations unwritten.
    let racers = (0..6).map(|n| {
        let store = store.clone();
        let approved = operation(
            &format!("op_limit_race_{n}"),
            "cus_limits_conformance",
            OperationStatus::Approved,
        );
        let changes = Changeset {
            writes: vec![Write::InsertOperation(approved), counted(0, 100 + n)],
        };
        async move { store.commit(changes).await }
    });
    let outcomes = futures_util::future::join_all(racers).await;
    let won: Vec<usize> = (0..6).filter(|n| outcomes[*n].is_ok()).collect();
    assert_eq!(won.len(), 1, "{outcomes:?}");
    for (n, outcome) in outcomes.iter().enumerate() {
        let stored = store.operation(&format!("op_limit_race_{n}").into()).await.unwrap();
        match outcome {
            Ok(()) => assert!(stored.is_some()),
            Err(error) => {
                assert!(matches!(error, StoreError::Conflict), "{error:?}");
                assert_eq!(stored, None, "a loser's operation is not written");
            }
        }
    }
    let value = 100 + won[0] as i64;
    assert_eq!(read(vec![counter.clone()]).await, [value]);
    // The next moves from the value read; a stale one, or one from 0 again, conflicts.
    let commit = |write| {
        let store = store.clone();
        async move { store.commit(Changeset { writes: vec![write] }).await }
    };
    assert!(matches!(commit(counted(0, 1)).await, Err(StoreError::Conflict)));
    assert!(matches!(commit(counted(value + 1, 1)).await, Err(StoreError::Conflict)));
    commit(counted(value, value + 50)).await.unwrap();
    assert_eq!(read(vec![other, counter]).await, [0, value + 50]);
}

pub(super) async fn a_known_payee_is_where_it_was_paid_last(store: &dyn Store) {
    let customer = "cus_payees_conformance".into();
    let payees = ["RUT:1-9".to_string(), "account:sbx:001".to_string()];
    assert_eq!(store.known_payees(&customer, &payees).await.unwrap(), [None, None]);
    let mut paid = KnownPayee {
        customer_id: customer.clone(),
        payee: payees[0].clone(),
        destination: "sbx:001".into(),
        first_paid_at: OffsetDateTime::UNIX_EPOCH,
        last_paid_at: OffsetDateTime::UNIX_EPOCH,
    };
    let remember = |payee: KnownPayee| Changeset {
        writes: vec![Write::RememberPayee(payee)],
    };
    store.commit(remember(paid.clone())).await.unwrap();
    paid.destination = "sbx:002".into();
    paid.last_paid_at = OffsetDateTime::UNIX_EPOCH + time::Duration::days(1);
    store.commit(remember(paid.clone())).await.unwrap();
    assert_eq!(
        store.known_payees(&customer, &payees).await.unwrap(),
        [Some(paid.clone()), None]
    );
    // Another customer's memory is its own.
    let other = "cus_payees_conformance_2".into();
    assert_eq!(store.known_payees(&other, &payees[..1]).await.unwrap(), [None]);
}
