//! Idempotency claims and answers.

use super::changes;
use ops_domain::idempotency::{ClaimOutcome, IdempotencyClaim, StoredResponse};
use ops_domain::ports::{Store, StoreError, Write};
use time::OffsetDateTime;

pub(super) async fn idempotency_claims(store: &dyn Store) {
    let now = OffsetDateTime::UNIX_EPOCH + time::Duration::days(10_000);
    let claim = |fingerprint: &str, at: OffsetDateTime| IdempotencyClaim {
        scope: "test:cus_i".into(),
        key: "k1".into(),
        fingerprint: fingerprint.into(),
        now: at,
    };
    assert_eq!(
        store.claim_idempotency_key(&claim("f1", now)).await.unwrap(),
        ClaimOutcome::Claimed
    );
    assert_eq!(
        store.claim_idempotency_key(&claim("f1", now)).await.unwrap(),
        ClaimOutcome::InFlight
    );
    assert_eq!(
        store.claim_idempotency_key(&claim("f2", now)).await.unwrap(),
        ClaimOutcome::Mismatch
    );

    let response = StoredResponse {
        status: 201,
        body: b"{\"id\":\"op_1\"}".to_vec(),
    };
    let complete = Write::CompleteIdempotency {
        scope: "test:cus_i".into(),
        key: "k1".into(),
        response: response.clone(),
    };
    store.commit(changes(vec![complete.clone()])).await.unwrap();
    assert_eq!(
        store.claim_idempotency_key(&claim("f1", now)).await.unwrap(),
        ClaimOutcome::Replay(response.clone())
    );
    // Completing twice is refused: one key, one effect.
    assert!(matches!(
        store.commit(changes(vec![complete])).await,
        Err(StoreError::Conflict)
    ));
    // Still remembered after 23 hours, forgotten after the retention period.
    let later = now + time::Duration::hours(23);
    assert_eq!(
        store.claim_idempotency_key(&claim("f1", later)).await.unwrap(),
        ClaimOutcome::Replay(response)
    );
    let much_later = now + time::Duration::hours(25);
    assert_eq!(
        store.claim_idempotency_key(&claim("f2", much_later)).await.unwrap(),
        ClaimOutcome::Claimed
    );

    // A released claim (its request failed before any effect) can be claimed afresh, and a
    // claim abandoned by a dead process is taken over after its timeout.
    let other = |at: OffsetDateTime| IdempotencyClaim {
        scope: "test:cus_i".into(),
        key: "k2".into(),
        fingerprint: "f".into(),
        now: at,
    };
    assert_eq!(
        store.claim_idempotency_key(&other(now)).await.unwrap(),
        ClaimOutcome::Claimed
    );
    store.release_idempotency_key("test:cus_i", "k2").await.unwrap();
    assert_eq!(
        store.claim_idempotency_key(&other(now)).await.unwrap(),
        ClaimOutcome::Claimed
    );
    assert_eq!(
        store
            .claim_idempotency_key(&other(now + time::Duration::seconds(61)))
            .await
            .unwrap(),
        ClaimOutcome::Claimed
    );
}

/// An answer of a few kilobytes (a created operation's body), taken in the changeset or
/// completing a claim, is replayed byte for byte (a store may keep it deflated).
pub(super) async fn idempotency_replays_long_answers_byte_for_byte(store: &dyn Store) {
    let now = OffsetDateTime::UNIX_EPOCH + time::Duration::days(10_000);
    let claim = |key: &str| IdempotencyClaim {
        scope: "test:cus_long".into(),
        key: key.into(),
        fingerprint: "f".into(),
        now,
    };
    let items: Vec<String> = (0..80)
        .map(|i| format!("{{\"id\":\"itm_{i:04}\",\"amount\":{i}}}"))
        .collect();
    let response = StoredResponse {
        status: 201,
        body: format!("{{\"id\":\"op_long\",\"items\":[{}]}}\n", items.join(",")).into_bytes(),
    };
    assert!(response.body.len() > 2048);
    let taken = Write::TakeIdempotency {
        claim: claim("taken"),
        response: response.clone(),
    };
    store.commit(changes(vec![taken])).await.unwrap();
    assert_eq!(
        store.idempotency_record(&claim("taken")).await.unwrap(),
        ClaimOutcome::Replay(response.clone())
    );
    assert_eq!(
        store.claim_idempotency_key(&claim("claimed")).await.unwrap(),
        ClaimOutcome::Claimed
    );
    let complete = Write::CompleteIdempotency {
        scope: "test:cus_long".into(),
        key: "claimed".into(),
        response: response.clone(),
    };
    store.commit(changes(vec![complete])).await.unwrap();
    assert_eq!(
        store.claim_idempotency_key(&claim("claimed")).await.unwrap(),
        ClaimOutcome::Replay(response)
    );
}

/// A key taken in the effect's own changeset: free until a changeset takes it, then the
/// stored answer; a second take (a racing request with the same key) is a conflict, as is a
/// take over another request's live claim; a key past its retention, or a claim abandoned by a
/// dead process, can be taken.
pub(super) async fn idempotency_taken_in_the_changeset(store: &dyn Store) {
    let now = OffsetDateTime::UNIX_EPOCH + time::Duration::days(10_000);
    let claim = |key: &str, fingerprint: &str, at: OffsetDateTime| IdempotencyClaim {
        scope: "test:cus_t".into(),
        key: key.into(),
        fingerprint: fingerprint.into(),
        now: at,
    };
    let response = StoredResponse {
        status: 201,
        body: b"{\"id\":\"op_t\"}".to_vec(),
    };
    let take = |claim: IdempotencyClaim| Write::TakeIdempotency {
        claim,
        response: response.clone(),
    };
    assert_eq!(
        store.idempotency_record(&claim("t1", "f1", now)).await.unwrap(),
        ClaimOutcome::Claimed,
        "an unused key is free, and reading it writes nothing"
    );
    assert_eq!(
        store.idempotency_record(&claim("t1", "f1", now)).await.unwrap(),
        ClaimOutcome::Claimed
    );
    store.commit(changes(vec![take(claim("t1", "f1", now))])).await.unwrap();
    assert_eq!(
        store.idempotency_record(&claim("t1", "f1", now)).await.unwrap(),
        ClaimOutcome::Replay(response.clone())
    );
    assert_eq!(
        store.idempotency_record(&claim("t1", "f2", now)).await.unwrap(),
        ClaimOutcome::Mismatch
    );
    assert!(matches!(
        store.commit(changes(vec![take(claim("t1", "f1", now))])).await,
        Err(StoreError::Conflict)
    ));
    // The same as any claim: a replay for 24 hours, then the key is free again.
    assert_eq!(
        store.claim_idempotency_key(&claim("t1", "f1", now)).await.unwrap(),
        ClaimOutcome::Replay(response.clone())
    );
    let much_later = now + time::Duration::hours(25);
    assert_eq!(
        store.idempotency_record(&claim("t1", "f2", much_later)).await.unwrap(),
        ClaimOutcome::Claimed
    );
    store
        .commit(changes(vec![take(claim("t1", "f2", much_later))]))
        .await
        .unwrap();

    // A live claim by a request that claimed first holds the key; a dead one's does not.
    assert_eq!(
        store.claim_idempotency_key(&claim("t2", "f1", now)).await.unwrap(),
        ClaimOutcome::Claimed
    );
    assert_eq!(
        store.idempotency_record(&claim("t2", "f1", now)).await.unwrap(),
        ClaimOutcome::InFlight
    );
    assert!(matches!(
        store.commit(changes(vec![take(claim("t2", "f1", now))])).await,
        Err(StoreError::Conflict)
    ));
    let after_timeout = now + time::Duration::seconds(61);
    assert_eq!(
        store
            .idempotency_record(&claim("t2", "f1", after_timeout))
            .await
            .unwrap(),
        ClaimOutcome::Claimed
    );
    store
        .commit(changes(vec![take(claim("t2", "f1", after_timeout))]))
        .await
        .unwrap();
    assert_eq!(
        store
            .idempotency_record(&claim("t2", "f1", after_timeout))
            .await
            .unwrap(),
        ClaimOutcome::Replay(response)
    );
}
