//! A create's idempotency record written before its entity, not in a transaction with it.
//!
//! A create that takes its key in its changeset ([`KeyHold::InTheChangeset`](ops_domain::idempotency::KeyHold))
//! wrote the key's record and the new entity in one `TransactWriteItems`: two write units
//! each. Here the record goes first, on its own, already completed with the response and naming
//! the entity it awaits; then the entity with its outbox, as any change of one entity: two units
//! instead of four, for one request more.
//!
//! The record holds the key from its write on, as the claim it is: no other request with the key
//! gets past it. It stands for a done request once its entity exists, so a reader of a record
//! that names one (a replay, a race: never the first request) asks whether it does. If the
//! writer died between its two writes, the entity never appears: while the record's lock lasts
//! the key is in use (409), then the record is abandoned, deleted by the reader that finds it so,
//! and the key is free. So the entity must never land after its record's lock ([`CLAIM_TIMEOUT`],
//! 60 s) has passed: its writer sends it only within [`ENTITY_DEADLINE`] (half the lock) of
//! starting the record, and gives up otherwise, its outcome left to the record. Every API
//! function's timeout (at most 30 s: `tests/aws/template.rs` holds the template to it) ends a
//! writer sooner; the deadline holds where nothing does (`ops-local` against AWS).

use super::keys;
use super::*;
use aws_sdk_dynamodb::types::AttributeValue;
use ops_domain::idempotency::{ClaimOutcome, IdempotencyClaim, CLAIM_TIMEOUT};
use ops_domain::ports::StoreError;

/// How long after starting its key's record a create may still send its entity: half the
/// record's lock, so that an entity sent in time has landed long before a reader could find it
/// missing past the lock and take the key over.
pub(super) const ENTITY_DEADLINE: std::time::Duration = std::time::Duration::from_secs(30);
const _: () = assert!(ENTITY_DEADLINE.as_secs() * 2 <= CLAIM_TIMEOUT.whole_seconds() as u64);

/// What a create written key first does after its key's record: in kill tests, die there (as
/// if its process ended) or stall there (as a process paused or starved would).
#[derive(Clone, Copy, Debug, Default)]
pub enum AfterKeyRecord {
    #[default]
    GoOn,
    Die,
    Stall(std::time::Duration),
}

/// How a create written key first goes on after its key's record.
#[derive(Clone, Copy, Debug)]
pub(super) struct KeyFirst {
    pub(super) after_record: AfterKeyRecord,
    pub(super) entity_deadline: std::time::Duration,
}

impl Default for KeyFirst {
    fn default() -> Self {
        KeyFirst {
            after_record: AfterKeyRecord::GoOn,
            entity_deadline: ENTITY_DEADLINE,
        }
    }
}

/// The attributes of a record naming the entity whose write completes it.
const AWAITS_PK: &str = "awaits_pk";
const AWAITS_SK: &str = "awaits_sk";

impl DynamoStore {
    /// Writes the key's record, naming the split's entity, then the split.
    pub(super) async fn commit_key_first(
        &self,
        outbox::KeyToTake { claim, response }: outbox::KeyToTake<'_>,
        split: outbox::Split<'_>,
    ) -> Result<(), StoreError> {
        let entity = split.carrier_key();
        let awaits = vec![(AWAITS_PK, s(&entity.pk)), (AWAITS_SK, s(&entity.sk))];
        let started = std::time::Instant::now();
        let KeyFirst {
            after_record,
            entity_deadline,
        } = self.faults.key_first();
        self.commit_items(vec![self.take_idempotency(claim, response, awaits)])
            .await?;
        let entity_write = async {
            match after_record {
                AfterKeyRecord::GoOn => {}
                AfterKeyRecord::Die => return Err(unavailable("the writer died after its key's record (a kill test)")),
                AfterKeyRecord::Stall(pause) => tokio::time::sleep(pause).await,
            }
            self.commit_with_outbox(split).await
        };
        let written = match tokio::time::timeout(entity_deadline.saturating_sub(started.elapsed()), entity_write).await
        {
            Ok(written) => written,
            // Whether a write already sent landed is not known here: the record settles it.
            Err(_) => Err(unavailable(
                "the entity was not written within its deadline after its key's record",
            )),
        };
        // A conflict wrote nothing, so the key is given back. Any other failure may have
        // written the entity after all: the record stays, and its readers ask.
        if let Err(StoreError::Conflict) = written {
            if let Err(error) = self.delete_abandoned(claim, &entity, None).await {
                tracing::warn!(%error, "a key's record is left to its lock");
            }
        }
        written
    }

    /// What a record means while the entity it awaits is missing: `None` if it awaits none or
    /// its entity exists (it is then what it says); else the key is in use while the record's
    /// lock lasts, and free once it has passed (the abandoned record is deleted).
    pub(super) async fn unfinished(
        &self,
        record: &Item,
        claim: &IdempotencyClaim,
    ) -> Result<Option<ClaimOutcome>, StoreError> {
        let (Some(AttributeValue::S(pk)), Some(AttributeValue::S(sk))) = (record.get(AWAITS_PK), record.get(AWAITS_SK))
        else {
            return Ok(None);
        };
        let entity = keys::Primary {
            pk: pk.clone(),
            sk: sk.clone(),
        };
        self.meter.request();
        let found = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(item(key_item(entity.clone()))))
            .projection_expression("PK")
            .consistent_read(true)
            .send()
            .await
            .map_err(sdk_error)?;
        if found.item().is_some() {
            return Ok(None);
        }
        let lock = record.get("locked_until").and_then(|v| v.as_n().ok()).cloned();
        let locked = lock
            .as_deref()
            .and_then(|at| at.parse::<i64>().ok())
            .is_some_and(|at| at > claim.now.unix_timestamp());
        let same = record.get("fingerprint").and_then(|v| v.as_s().ok()) == Some(&claim.fingerprint);
        Ok(Some(match (locked, same) {
            (true, true) => ClaimOutcome::InFlight,
            (true, false) => ClaimOutcome::Mismatch,
            (false, _) => {
                self.delete_abandoned(claim, &entity, lock).await?;
                ClaimOutcome::Claimed
            }
        }))
    }

    /// Deletes the key's record if it still awaits `entity` (and holds the lock `lock`, when
    /// given): one another request wrote since is left alone.
    async fn delete_abandoned(
        &self,
        claim: &IdempotencyClaim,
        entity: &keys::Primary,
        lock: Option<String>,
    ) -> Result<(), StoreError> {
        self.meter.small_write("idempotency");
        let mut delete = self
            .client
            .delete_item()
            .table_name(&self.table)
            .set_key(Some(item(key_item(keys::idempotency(&claim.scope, &claim.key)))))
            .condition_expression("#awaits = :awaits")
            .expression_attribute_names("#awaits", AWAITS_PK)
            .expression_attribute_values(":awaits", s(&entity.pk));
        if let Some(lock) = lock {
            delete = delete
                .condition_expression("#awaits = :awaits AND locked_until = :lock")
                .expression_attribute_values(":lock", AttributeValue::N(lock));
        }
        match delete.send().await {
            Ok(_) => Ok(()),
            Err(error) => match error.into_service_error() {
                aws_sdk_dynamodb::operation::delete_item::DeleteItemError::ConditionalCheckFailedException(_) => Ok(()),
                other => Err(unavailable(other)),
            },
        }
    }
}
