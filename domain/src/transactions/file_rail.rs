//! Submission to a file rail: a transaction waits in its rail's next cut-off's bank file;
//! at the cut-off the file is closed, written, kept and handed over once, and each of its
//! transactions becomes `submitted` under the file's id.

use super::bank_file::{write_pain001, BankFile, BankFileStatus, MAX_BANK_FILE_PARTS, MAX_BANK_FILE_TRANSACTIONS};
use super::pipeline::{poll_backoff, rail_actor, system, SUBMIT_TIMEOUT};
use crate::access::{Principal, Scope};
use crate::cause::Cause;
use crate::error::DomainError;
use crate::ids::{BankFileId, TransactionId};
use crate::ports::{Changeset, StoreError, Write};
use crate::rail::{Ack, FileHandover, RailAdapter, RailError};
use crate::service::{Handled, Service};
use crate::transactions::{Transaction, TransactionStatus, TransactionTransition};
use crate::validate::optional_reason;
use serde::Deserialize;
use std::sync::Arc;
use time::OffsetDateTime;

/// How often a lost race on a file's record is tried again before the message comes back.
const FILE_RACES: usize = 8;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CancelTransaction {
    pub reason: Option<String>,
}

impl Service {
    /// The submit of a transaction whose rail takes files: it joins its cut-off's file, or,
    /// the cut-off come, the file is sent (once, whichever of its transactions gets here
    /// first) and the transaction is `submitted` under it.
    pub(super) async fn submit_to_file_rail(
        &self,
        found: Transaction,
        adapter: Arc<dyn RailAdapter>,
    ) -> Result<Handled, DomainError> {
        if found.status != TransactionStatus::Pending {
            return Ok(Handled::Done);
        }
        let file = match &found.bank_file {
            Some(id) => self.store.bank_file(id).await?,
            None => None,
        };
        let Some(file) = file.filter(|f| f.status != BankFileStatus::Refused) else {
            self.join_bank_file(found).await?;
            return Ok(Handled::Done);
        };
        if self.now() < file.cutoff_at {
            // It waits; the poll at the cut-off brings it back.
            return Ok(Handled::Done);
        }
        let file = self.send_bank_file(file, adapter.as_ref()).await?;
        match file.status {
            BankFileStatus::HandedOver => self.mark_submitted(&file, &found.id).await?,
            BankFileStatus::Refused => self.mark_refused(&file, &found.id).await?,
            // Another worker is handing it over, or its outcome will be asked: the poll
            // brings the transaction back.
            BankFileStatus::Open | BankFileStatus::Closed => {}
        }
        Ok(Handled::Done)
    }

    /// Puts the transaction in the open file of its rail's next cut-off (the next part when
    /// one is full), in one commit with the file: a lost race is tried again on both as they
    /// now are.
    async fn join_bank_file(&self, found: Transaction) -> Result<(), DomainError> {
        let id = found.id.clone();
        let mut copy = Some(found);
        for _ in 0..FILE_RACES {
            let mut transaction = match copy.take() {
                Some(copy) => copy,
                None => self
                    .store
                    .transaction(&id)
                    .await?
                    .ok_or_else(|| DomainError::not_found("transaction", &id))?,
            };
            if transaction.status != TransactionStatus::Pending {
                return Ok(());
            }
            let now = self.now();
            let cutoff = self.rail_cutoff(&transaction.rail, now).await?;
            // A rail that keeps no cut-offs sends a file a minute.
            let cutoff_at = cutoff.map_or_else(|| next_minute(now), |c| c.cutoff_at);
            let mut file = self.open_file_of(&transaction.rail, cutoff_at, now).await?;
            file.transaction_ids.push(id.clone());
            let file = file.changed(now);
            transaction.bank_file = Some(file.id.clone());
            transaction.cutoff_at = Some(cutoff_at);
            transaction.settlement_day = cutoff.map(|c| c.settlement_day);
            transaction.submit_after = Some(cutoff_at);
            transaction.next_poll_at = Some(cutoff_at);
            transaction.version += 1;
            transaction.updated_at = now;
            let mut changes = self.transaction_changes(&transaction, None).await?;
            changes.push(Write::PutBankFile(file));
            match self.store.commit(changes).await {
                Ok(()) => return Ok(()),
                Err(StoreError::Conflict) => continue,
                Err(other) => return Err(other.into()),
            }
        }
        Err(DomainError::conflict("The cut-off's file is changing too fast; retry."))
    }

    /// The first file of the cut-off with room, opened if there is none yet.
    async fn open_file_of(
        &self,
        rail: &str,
        cutoff_at: OffsetDateTime,
        now: OffsetDateTime,
    ) -> Result<BankFile, DomainError> {
        for part in 1..=MAX_BANK_FILE_PARTS {
            let file_id = BankFile::id_of(self.environment, rail, cutoff_at, part);
            let Some(file) = self.store.bank_file(&file_id).await? else {
                let cause = Cause::new(
                    "bank_file_opened",
                    format!("Opened for {rail}'s cut-off at {cutoff_at}"),
                    system(),
                    now,
                );
                return Ok(BankFile::open(self.environment, rail, cutoff_at, part, cause));
            };
            if file.status != BankFileStatus::Open {
                // Closed at its cut-off a moment ago: the next cut-off's file, next time.
                return Err(DomainError::conflict("The cut-off is passing; retry."));
            }
            if file.transaction_ids.len() < MAX_BANK_FILE_TRANSACTIONS {
                return Ok(file);
            }
        }
        Err(DomainError::conflict(
            "Every file of this cut-off is full; retry later.",
        ))
    }

    /// Closes the file if its cut-off has come and hands it over unless that is done or under
    /// way: answers the file as it then stands.
    async fn send_bank_file(&self, mut file: BankFile, adapter: &dyn RailAdapter) -> Result<BankFile, DomainError> {
        for _ in 0..FILE_RACES {
            let now = self.now();
            let next = match file.status {
                BankFileStatus::HandedOver | BankFileStatus::Refused => return Ok(file),
                BankFileStatus::Open => {
                    let mut closed = file.clone().changed(now);
                    closed.status = BankFileStatus::Closed;
                    closed.closed_at = Some(now);
                    closed.cause = Cause::new(
                        "bank_file_closed",
                        format!(
                            "{} transaction(s) at the cut-off at {}",
                            closed.transaction_ids.len(),
                            closed.cutoff_at
                        ),
                        system(),
                        now,
                    );
                    closed
                }
                BankFileStatus::Closed => match file.handing_over_since {
                    Some(since) if now - since < SUBMIT_TIMEOUT => return Ok(file),
                    lost => {
                        // A handover that ended without an outcome: the rail may have the
                        // file, so it is asked before the file goes again.
                        if lost.is_some() || file.outcome_unknown {
                            match adapter.file_received(&file.id).await {
                                Ok(Some(reference)) => handed_over(file.clone().changed(now), reference, "asked", now),
                                Ok(None) => claimed(file.clone(), now),
                                Err(error) => {
                                    tracing::info!(file = %file.id, %error, "the rail cannot say yet whether it has the file");
                                    return Ok(file);
                                }
                            }
                        } else {
                            claimed(file.clone(), now)
                        }
                    }
                },
            };
            let mut changes = Changeset::default();
            changes.push(Write::PutBankFile(next.clone()));
            match self.store.commit(changes).await {
                Ok(()) if next.status == BankFileStatus::Closed && next.handing_over_since.is_some() => {
                    file = self.record_handover(next, adapter).await?;
                    return Ok(file);
                }
                Ok(()) => file = next,
                Err(StoreError::Conflict) => {
                    file = self
                        .store
                        .bank_file(&file.id)
                        .await?
                        .ok_or_else(|| DomainError::not_found("bank_file", &file.id))?;
                }
                Err(other) => return Err(other.into()),
            }
        }
        Ok(file)
    }

    /// Makes the call a stored claim allows and records its outcome.
    async fn record_handover(&self, claimed: BankFile, adapter: &dyn RailAdapter) -> Result<BankFile, DomainError> {
        let pain001 = self.bank_file_bytes(&claimed).await?;
        let result = adapter
            .hand_over_file(&FileHandover {
                file_id: &claimed.id,
                cutoff_at: claimed.cutoff_at,
                transactions: claimed.transaction_ids.len(),
                pain001: &pain001,
            })
            .await;
        let now = self.now();
        let mut next = claimed.clone().changed(now);
        next.handing_over_since = None;
        next.sha256 = Some(hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&pain001)));
        let rail = rail_actor(&next.rail);
        match result {
            Ok(Ack::Accepted { rail_reference }) => next = handed_over(next, rail_reference, "handed over", now),
            Ok(Ack::Rejected { code, reason }) => {
                next.status = BankFileStatus::Refused;
                next.cause = Cause::new(&format!("rail_rejected_{code}"), reason, rail, now);
            }
            Err(RailError::Permanent(reason)) => {
                next.status = BankFileStatus::Refused;
                next.cause = Cause::new("rail_permanent_error", reason, rail, now);
            }
            Err(RailError::Transient(reason)) => {
                tracing::info!(file = %next.id, %reason, "the rail did not take the file; it goes again at the next poll");
            }
            Err(RailError::Timeout | RailError::Unknown(_)) => next.outcome_unknown = true,
        }
        let mut changes = Changeset::default();
        changes.push(Write::PutBankFile(next.clone()));
        match self.store.commit(changes).await {
            Ok(()) => {}
            // Another worker took the claim as lost meanwhile and asked the rail: its record stands.
            Err(StoreError::Conflict) => {
                return self
                    .store
                    .bank_file(&next.id)
                    .await?
                    .ok_or_else(|| DomainError::not_found("bank_file", &next.id))
            }
            Err(other) => return Err(other.into()),
        }
        match next.status {
            BankFileStatus::HandedOver => {
                for id in &next.transaction_ids {
                    self.mark_submitted(&next, id).await?;
                }
            }
            BankFileStatus::Refused => {
                for id in &next.transaction_ids {
                    self.mark_refused(&next, id).await?;
                }
            }
            _ => {}
        }
        Ok(next)
    }

    /// The file's pain.001: the kept bytes when it was written before, else written from its
    /// transactions (the same bytes: everything in it is fixed at its closing) and kept.
    async fn bank_file_bytes(&self, file: &BankFile) -> Result<Vec<u8>, DomainError> {
        let key = BankFile::blob_key(&file.id);
        if let Some(kept) = self.blobs.get(&key).await? {
            return Ok(kept);
        }
        let bytes = self.written_bank_file(file).await?;
        self.blobs.put(&key, "application/xml", bytes.clone()).await?;
        Ok(bytes)
    }

    async fn written_bank_file(&self, file: &BankFile) -> Result<Vec<u8>, DomainError> {
        let mut transactions = Vec::with_capacity(file.transaction_ids.len());
        for id in &file.transaction_ids {
            let transaction = self
                .store
                .transaction(id)
                .await?
                .ok_or_else(|| DomainError::not_found("transaction", id))?;
            transactions.push(transaction);
        }
        Ok(write_pain001(file, &transactions).into_bytes())
    }

    /// A transaction of a file the rail took becomes `submitted` under the file's id.
    async fn mark_submitted(&self, file: &BankFile, id: &TransactionId) -> Result<(), DomainError> {
        self.update_transaction(id, None, |txn, now| {
            if txn.status != TransactionStatus::Pending || txn.bank_file.as_ref() != Some(&file.id) {
                return Ok(None);
            }
            txn.submit_after = None;
            txn.next_poll_at = Some(now + poll_backoff(0));
            txn.submit_attempts += 1;
            txn.possibly_submitted = true;
            let cause = Cause::new(
                "accepted_by_rail",
                format!(
                    "In bank file {} for the cut-off at {}, taken by {}",
                    file.id, file.cutoff_at, txn.rail
                ),
                rail_actor(&txn.rail),
                now,
            );
            txn.apply(TransactionTransition::Submit {
                rail_reference: file.id.to_string(),
                cause,
            })
            .map(|c| Some(Some(c)))
        })
        .await?;
        Ok(())
    }

    /// A transaction of a file the rail refused fails with the rail's word, or waits for an
    /// operator when the rail gave none (who may send it again, in a later file).
    async fn mark_refused(&self, file: &BankFile, id: &TransactionId) -> Result<(), DomainError> {
        self.update_transaction(id, None, |txn, now| {
            if txn.status != TransactionStatus::Pending || txn.bank_file.as_ref() != Some(&file.id) {
                return Ok(None);
            }
            txn.submit_after = None;
            txn.next_poll_at = None;
            let cause = Cause::new(
                &file.cause.code,
                format!("Bank file {} refused: {}", file.id, file.cause.message),
                file.cause.actor.clone(),
                now,
            );
            let transition = match file.cause.code.starts_with("rail_rejected_") {
                true => TransactionTransition::Fail(cause),
                false => TransactionTransition::FlagForAttention(cause),
            };
            txn.apply(transition).map(|c| Some(Some(c)))
        })
        .await?;
        Ok(())
    }

    /// A file rail's file, to those who may see every rail's (platform operators).
    pub async fn get_bank_file(&self, principal: &Principal, id: &BankFileId) -> Result<BankFile, DomainError> {
        principal.require(Scope::OperationsRead)?;
        if !principal.is_platform() {
            return Err(DomainError::not_found("bank_file", id));
        }
        self.store
            .bank_file(id)
            .await?
            .filter(|f| f.environment == self.environment)
            .ok_or_else(|| DomainError::not_found("bank_file", id))
    }

    /// A file's pain.001 as handed over (none before its cut-off).
    pub async fn bank_file_content(&self, principal: &Principal, id: &BankFileId) -> Result<Vec<u8>, DomainError> {
        let file = self.get_bank_file(principal, id).await?;
        if file.status == BankFileStatus::Open {
            return Err(DomainError::invalid_state(
                "bank_file_open",
                format!("Bank file {id} is written at its cut-off, {}.", file.cutoff_at),
            ));
        }
        match self.blobs.get(&BankFile::blob_key(&file.id)).await? {
            Some(kept) => Ok(kept),
            // Closed and not yet handed over: as it will be written.
            None => self.written_bank_file(&file).await,
        }
    }

    /// Takes a transaction out of its file rail's file before the cut-off: it fails, its hold
    /// released, with the cause given. After the cut-off it is in the file the bank gets, and
    /// the cancel is refused naming that cut-off.
    pub async fn cancel_transaction(
        &self,
        principal: &Principal,
        id: &TransactionId,
        command: CancelTransaction,
    ) -> Result<Transaction, DomainError> {
        principal.require(Scope::OperationsWrite)?;
        let reason = optional_reason(command.reason, "reason", 500)?;
        for _ in 0..FILE_RACES {
            let mut transaction = self.get_transaction(principal, id).await?;
            let file = match &transaction.bank_file {
                Some(file_id) => self.store.bank_file(file_id).await?,
                None => None,
            };
            let Some(mut file) = file else {
                return Err(DomainError::invalid_state(
                    "not_cancellable",
                    format!(
                        "Transaction {id} is {}: only a transaction waiting for a file rail's cut-off can be cancelled.",
                        transaction.status.as_str()
                    ),
                ));
            };
            let now = self.now();
            let waiting = transaction.status == TransactionStatus::Pending && file.status == BankFileStatus::Open;
            if !waiting || now >= file.cutoff_at {
                return Err(DomainError::invalid_state(
                    "cutoff_passed",
                    format!(
                        "The cut-off at {} has passed: transaction {id} is in bank file {}, for the bank.",
                        file.cutoff_at, file.id
                    ),
                ));
            }
            file.transaction_ids.retain(|t| t != id);
            let file = file.changed(now);
            let message = reason
                .clone()
                .unwrap_or_else(|| format!("Cancelled before the cut-off at {}", file.cutoff_at));
            let cause = Cause::new("cancelled_before_cutoff", message, principal.actor(), now);
            transaction.bank_file = None;
            transaction.submit_after = None;
            transaction.next_poll_at = None;
            let change = transaction.apply(TransactionTransition::Fail(cause))?;
            transaction.version += 1;
            transaction.updated_at = now;
            let mut changes = self.transaction_changes(&transaction, Some(change)).await?;
            changes.push(Write::PutBankFile(file));
            match self.store.commit(changes).await {
                Ok(()) => return Ok(transaction),
                Err(StoreError::Conflict) => continue,
                Err(other) => return Err(other.into()),
            }
        }
        Err(DomainError::conflict("The transaction is changing too fast; retry."))
    }
}

fn handed_over(mut file: BankFile, rail_reference: String, how: &str, now: OffsetDateTime) -> BankFile {
    file.status = BankFileStatus::HandedOver;
    file.handing_over_since = None;
    file.outcome_unknown = false;
    file.cause = Cause::new(
        "bank_file_handed_over",
        format!("Taken by {} as {rail_reference} ({how})", file.rail),
        rail_actor(&file.rail),
        now,
    );
    file.rail_reference = Some(rail_reference);
    file
}

/// The file claimed for a handover: the claim is stored before the call, so a worker that
/// dies during it leaves a claim that the next one finds, and asks about.
fn claimed(file: BankFile, now: OffsetDateTime) -> BankFile {
    let mut claimed = file.changed(now);
    claimed.handing_over_since = Some(now);
    claimed.outcome_unknown = false;
    claimed.handovers += 1;
    claimed
}

fn next_minute(now: OffsetDateTime) -> OffsetDateTime {
    let start = now
        .replace_second(0)
        .and_then(|t| t.replace_nanosecond(0))
        .unwrap_or(now);
    start + time::Duration::minutes(1)
}
