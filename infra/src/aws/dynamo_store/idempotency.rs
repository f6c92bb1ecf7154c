//! Idempotency records: a claim is one conditional write, its completion another.

use super::*;
use super::{documents, keys};
use async_trait::async_trait;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::types::{AttributeValue, Put, ReturnValuesOnConditionCheckFailure, TransactWriteItem};
use ops_domain::idempotency::{
    ClaimOutcome, IdempotencyClaim, IdempotencyStore, StoredResponse, CLAIM_TIMEOUT, RETENTION,
};
use ops_domain::ports::StoreError;

/// An idempotency key's record, as a claim writes it.
pub(super) fn idempotency_item(claim: &IdempotencyClaim) -> Item {
    let now = claim.now.unix_timestamp();
    keyed(
        keys::idempotency(&claim.scope, &claim.key),
        vec![
            ("entity", s("idempotency")),
            ("fingerprint", s(&claim.fingerprint)),
            ("locked_until", n(now + CLAIM_TIMEOUT.whole_seconds())),
            ("expires_at", n(now + RETENTION.whole_seconds())),
            // DynamoDB deletes expired items itself, within days; `expires_at` is what counts.
            ("ttl", n(now + RETENTION.whole_seconds() + 3600)),
        ],
    )
}

impl DynamoStore {
    /// The put of a key's record, completed with `response`, on condition that the key is free.
    pub(super) fn take_idempotency(
        &self,
        claim: &IdempotencyClaim,
        response: &StoredResponse,
        more: Vec<(&str, AttributeValue)>,
    ) -> TransactWriteItem {
        let mut record = idempotency_item(claim);
        record.insert("status".into(), n(response.status));
        let (name, body) = stored_response(&response.body);
        record.insert(name.into(), body);
        record.extend(item(more));
        let put = Put::builder()
            .table_name(&self.table)
            .set_item(Some(record))
            .condition_expression(KEY_IS_FREE)
            .expression_attribute_names("#status", "status")
            .expression_attribute_values(":now", n(claim.now.unix_timestamp()))
            .build()
            .expect("take");
        TransactWriteItem::builder().put(put).build()
    }
}

/// A key may be taken if no record holds it, or its record is past retention, or it is a
/// claim whose request died before completing it.
pub(super) const KEY_IS_FREE: &str =
    "attribute_not_exists(PK) OR expires_at <= :now OR (attribute_not_exists(#status) AND locked_until <= :now)";

/// What a live record of a key means to a request with `fingerprint`.
pub(super) fn claim_outcome(existing: &Item, fingerprint: &str) -> ClaimOutcome {
    if existing
        .get("fingerprint")
        .and_then(|v| v.as_s().ok())
        .map(String::as_str)
        != Some(fingerprint)
    {
        return ClaimOutcome::Mismatch;
    }
    let status = existing
        .get("status")
        .and_then(|v| v.as_n().ok())
        .and_then(|v| v.parse::<u16>().ok());
    let body = match (existing.get("response_z"), existing.get("response")) {
        (Some(AttributeValue::B(deflated)), _) => match documents::inflate_bytes(deflated.as_ref()) {
            Ok(body) => Some(body),
            Err(error) => {
                tracing::error!(%error, "an idempotency record's response does not inflate");
                None
            }
        },
        (None, Some(AttributeValue::B(body))) => Some(body.as_ref().to_vec()),
        _ => None,
    };
    match (status, body) {
        (Some(status), Some(body)) => ClaimOutcome::Replay(StoredResponse { status, body }),
        _ => ClaimOutcome::InFlight,
    }
}

/// An idempotency record's response as stored: the bytes in `response`, or deflated in
/// `response_z` when long (a created operation's body is 1–2 KB of JSON: deflated, the record
/// takes one write unit instead of two). Records written before keep their `response`.
pub(super) fn stored_response(body: &[u8]) -> (&'static str, AttributeValue) {
    match documents::encode_bytes(body) {
        Ok(short) => ("response", AttributeValue::B(short.to_vec().into())),
        Err(deflated) => ("response_z", AttributeValue::B(deflated.into())),
    }
}

#[async_trait]
impl IdempotencyStore for DynamoStore {
    async fn claim_idempotency_key(&self, claim: &IdempotencyClaim) -> Result<ClaimOutcome, StoreError> {
        let now = claim.now.unix_timestamp();
        let item = idempotency_item(claim);
        self.meter.small_write("idempotency");
        let attempt = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression(KEY_IS_FREE)
            .expression_attribute_names("#status", "status")
            .expression_attribute_values(":now", n(now))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        let existing = match attempt {
            Ok(_) => return Ok(ClaimOutcome::Claimed),
            Err(error) => match error.into_service_error() {
                PutItemError::ConditionalCheckFailedException(failed) => failed.item.unwrap_or_default(),
                other => return Err(unavailable(other)),
            },
        };
        match self.unfinished(&existing, claim).await? {
            // An abandoned record, now deleted: the key is free to claim.
            Some(ClaimOutcome::Claimed) => self.claim_idempotency_key(claim).await,
            Some(outcome) => Ok(outcome),
            None => Ok(claim_outcome(&existing, &claim.fingerprint)),
        }
    }

    async fn idempotency_record(&self, claim: &IdempotencyClaim) -> Result<ClaimOutcome, StoreError> {
        self.meter.request();
        let found = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(item(key_item(keys::idempotency(&claim.scope, &claim.key)))))
            .consistent_read(true)
            .send()
            .await
            .map_err(sdk_error)?;
        let now = claim.now.unix_timestamp();
        let number = |record: &Item, name: &str| {
            record
                .get(name)
                .and_then(|v| v.as_n().ok())
                .and_then(|v| v.parse::<i64>().ok())
        };
        Ok(match found.item() {
            Some(record) => {
                let expired = number(record, "expires_at").is_some_and(|at| at <= now);
                let abandoned =
                    !record.contains_key("status") && number(record, "locked_until").is_some_and(|at| at <= now);
                match expired || abandoned {
                    true => ClaimOutcome::Claimed,
                    false => match self.unfinished(record, claim).await? {
                        Some(outcome) => outcome,
                        None => claim_outcome(record, &claim.fingerprint),
                    },
                }
            }
            None => ClaimOutcome::Claimed,
        })
    }

    async fn release_idempotency_key(&self, scope: &str, key: &str) -> Result<(), StoreError> {
        self.meter.small_write("idempotency");
        self.client
            .delete_item()
            .table_name(&self.table)
            .set_key(Some(item(key_item(keys::idempotency(scope, key)))))
            .condition_expression("attribute_not_exists(#status)")
            .expression_attribute_names("#status", "status")
            .send()
            .await
            .map(|_| ())
            .or_else(|e| match e.into_service_error() {
                aws_sdk_dynamodb::operation::delete_item::DeleteItemError::ConditionalCheckFailedException(_) => Ok(()),
                other => Err(unavailable(other)),
            })
    }
}
