//! Queue → rail submit, and timer → status poll: a transaction is handed to its rail at most
//! once, and its outcome asked for until it is known.

use super::pipeline::{
    poll_backoff, rail_actor, submit_backoff, system, MAX_NOT_FOUND_POLLS, MAX_SUBMIT_ATTEMPTS, POLL_BATCH,
    POLL_CONCURRENCY, RETURN_CHECKS, RETURN_SWEEP_LOOKBACK, SUBMIT_TIMEOUT, UNANSWERED_PATIENCE, UNSERVED_RAIL_WAIT,
};
use crate::cause::Cause;
use crate::error::DomainError;
use crate::ids::TransactionId;
use crate::ports::{BatchOutcome, Changeset, QueueMessage, QueueTask, Write};
use crate::rail::{Ack, Instruction, RailError, RailKind, RailState};
use crate::service::{Handled, Service};
use crate::transactions::{ReturnSweep, Transaction, TransactionStatus, TransactionTransition, HOLD_EXPIRED};
use futures_util::StreamExt;

impl Service {
    // ---- queue → rail submit ------------------------------------------------------------

    pub async fn handle_submissions(&self, messages: &[QueueMessage]) -> BatchOutcome {
        let mut outcome = BatchOutcome::default();
        for message in messages {
            let result = match QueueTask::parse(&message.body) {
                Ok(QueueTask::SubmitTransaction { transaction_id }) => self.submit(&transaction_id).await,
                Ok(QueueTask::MakeTransactions { operation_id }) => self.start_processing(&operation_id).await,
                Ok(QueueTask::SettleOperation { operation_id }) => self.settle_operation(&operation_id).await,
                Ok(other) => {
                    tracing::error!(message = %message.id, task = ?other, "a task of another queue dropped from the submissions queue");
                    Ok(Handled::Done)
                }
                // Kept for its dead-letter queue, where a deployment that reads it can redrive it.
                Err(error) => Err(DomainError::Queue(crate::ports::QueueError::new(error))),
            };
            if !matches!(result, Ok(Handled::Done)) {
                if let Err(error) = &result {
                    tracing::warn!(message = %message.id, %error, "submission failed; the message comes again");
                }
                outcome.failed.push(message.id.clone());
            }
        }
        outcome
    }

    /// Hands a pending transaction to its rail, at most once per attempt: the attempt is
    /// recorded before the call, so a worker that finds an attempt without outcome knows the
    /// rail may hold the instruction and asks instead of sending again.
    ///
    /// A rail that keeps cut-offs is told nothing after a banking day's last one when it
    /// waits: the transaction records the cut-off and day it is for and waits for that day's
    /// window, which the poll timer opens.
    async fn submit(&self, transaction_id: &TransactionId) -> Result<Handled, DomainError> {
        // A task for a transaction not stored fails, to end in the dead-letter queue.
        let found = self
            .store
            .transaction(transaction_id)
            .await?
            .ok_or_else(|| DomainError::not_found("transaction", transaction_id))?;
        if found.hold_expired(self.now()) {
            return self.fail_expired_hold(found).await;
        }
        if let Some(adapter) = self.rails.get(&found.rail).filter(|a| a.kind() == RailKind::Files) {
            return self.submit_to_file_rail(found, adapter.clone()).await;
        }
        let cutoff = match found.status == TransactionStatus::Pending && found.submitting_since.is_none() {
            true => self.rail_cutoff(&found.rail, self.now()).await?,
            false => None,
        };
        if let Some(waits_until) = cutoff.and_then(|c| c.waits_until) {
            self.update_transaction(transaction_id, Some(found), |txn, _| {
                if txn.status != TransactionStatus::Pending || txn.submitting_since.is_some() {
                    return Ok(None);
                }
                txn.cutoff_at = cutoff.map(|c| c.cutoff_at);
                txn.settlement_day = cutoff.map(|c| c.settlement_day);
                txn.submit_after = Some(waits_until);
                // Its hold may expire first: the poll then finds it, and the submit fails it.
                txn.next_poll_at = Some(txn.hold_expires_at.map_or(waits_until, |at| at.min(waits_until)));
                Ok(Some(None))
            })
            .await?;
            return Ok(Handled::Done);
        }
        let claimed = self
            .update_transaction(transaction_id, Some(found), |txn, now| {
                if txn.status != TransactionStatus::Pending {
                    return Ok(None);
                }
                match txn.submitting_since {
                    Some(since) if now - since < SUBMIT_TIMEOUT => Ok(None),
                    Some(_) => {
                        // A worker died during the call: the outcome is unknown.
                        txn.submitting_since = None;
                        txn.next_poll_at = Some(now);
                        let cause = Cause::new(
                            "submit_outcome_lost",
                            "A submit call ended without a recorded outcome; asking the rail",
                            system(),
                            now,
                        );
                        txn.apply(TransactionTransition::MarkUnknown(cause))
                            .map(|c| Some(Some(c)))
                    }
                    None => {
                        txn.submitting_since = Some(now);
                        txn.submit_attempts += 1;
                        if let Some(cutoff) = cutoff {
                            txn.cutoff_at = Some(cutoff.cutoff_at);
                            txn.settlement_day = Some(cutoff.settlement_day);
                        }
                        // A wait that is over leaves no poll behind.
                        if txn.submit_after.take().is_some() {
                            txn.next_poll_at = None;
                        }
                        Ok(Some(None))
                    }
                }
            })
            .await?;
        let Some(transaction) = claimed else {
            let current = self.store.transaction(transaction_id).await?;
            let busy = current.is_some_and(|t| t.status == TransactionStatus::Pending && t.submitting_since.is_some());
            return Ok(if busy { Handled::Later } else { Handled::Done });
        };
        if transaction.status != TransactionStatus::Pending {
            return Ok(Handled::Done); // just marked unknown
        }
        let Some(adapter) = self.rails.get(&transaction.rail).cloned() else {
            let cause = Cause::new(
                "rail_unavailable",
                format!("No adapter serves rail {}", transaction.rail),
                system(),
                self.now(),
            );
            self.record_submit_outcome(transaction, Err(RailError::Permanent(cause.message.clone())))
                .await?;
            return Ok(Handled::Done);
        };
        let instruction = Instruction {
            transaction_id: transaction.id.clone(),
            operation_id: transaction.operation_id.clone(),
            customer_id: transaction.customer_id.clone(),
            amount: transaction.amount,
            currency: transaction.currency.clone(),
            beneficiary: transaction.beneficiary.clone(),
            account: transaction.account.clone(),
            reference: transaction.reference.clone(),
            end_to_end_id: transaction.end_to_end_id.clone(),
            environment: transaction.environment,
            direction: transaction.direction,
        };
        let result = adapter.submit(&instruction).await;
        self.record_submit_outcome(transaction, result).await
    }

    /// A transaction whose hold expired before it was handed to its rail: it fails, which
    /// voids the hold with that cause, and nothing is sent.
    async fn fail_expired_hold(&self, found: Transaction) -> Result<Handled, DomainError> {
        self.update_transaction(&found.id.clone(), Some(found), |txn, now| {
            if !txn.hold_expired(now) {
                return Ok(None);
            }
            let expired_at = txn.hold_expires_at.unwrap_or(now);
            let message = format!("Its hold expired at {expired_at} before it was handed to {}", txn.rail);
            let cause = Cause::new(HOLD_EXPIRED, message, system(), now);
            txn.next_poll_at = None;
            txn.apply(TransactionTransition::Fail(cause)).map(|c| Some(Some(c)))
        })
        .await?;
        Ok(Handled::Done)
    }

    /// Records the rail's answer on the transaction as the submit claim left it.
    async fn record_submit_outcome(
        &self,
        claimed: Transaction,
        result: Result<Ack, RailError>,
    ) -> Result<Handled, DomainError> {
        let retry_after = std::sync::Mutex::new(None);
        let (transaction_id, customer_id) = (claimed.id.clone(), claimed.customer_id.clone());
        self.update_transaction(&transaction_id, Some(claimed), |txn, now| {
            if txn.status != TransactionStatus::Pending || txn.submitting_since.is_none() {
                return Ok(None);
            }
            txn.submitting_since = None;
            let rail = rail_actor(&txn.rail);
            let transition = match &result {
                Ok(Ack::Accepted { rail_reference }) => {
                    txn.next_poll_at = Some(now + poll_backoff(0));
                    let cause = Cause::new("accepted_by_rail", format!("Accepted by {} as {rail_reference}", txn.rail), rail, now);
                    TransactionTransition::Submit { rail_reference: rail_reference.clone(), cause }
                }
                Ok(Ack::Rejected { code, reason }) => TransactionTransition::Fail(Cause::new(&format!("rail_rejected_{code}"), reason.clone(), rail, now)),
                Err(RailError::Timeout) => {
                    txn.next_poll_at = Some(now + poll_backoff(0));
                    TransactionTransition::MarkUnknown(Cause::new("rail_timeout", "The rail did not answer in time; its status will be asked", rail, now))
                }
                Err(RailError::Unknown(answer)) => {
                    txn.next_poll_at = Some(now + poll_backoff(0));
                    TransactionTransition::MarkUnknown(Cause::new("rail_outcome_unknown", format!("{answer}; its status will be asked"), rail, now))
                }
                Err(RailError::Transient(reason)) if txn.submit_attempts < MAX_SUBMIT_ATTEMPTS => {
                    let wait = submit_backoff(txn.submit_attempts);
                    *retry_after.lock().unwrap_or_else(|e| e.into_inner()) = Some(wait);
                    tracing::info!(transaction = %txn.id, attempt = txn.submit_attempts, %reason, "transient rail error; retrying");
                    return Ok(Some(None));
                }
                Err(RailError::Transient(reason)) => TransactionTransition::FlagForAttention(Cause::new(
                    "submit_retries_exhausted",
                    format!("{} submit attempts failed; last: {reason}", txn.submit_attempts),
                    system(),
                    now,
                )),
                Err(RailError::Permanent(reason)) => TransactionTransition::FlagForAttention(Cause::new("rail_permanent_error", reason.clone(), rail, now)),
            };
            txn.apply(transition).map(|c| Some(Some(c)))
        })
        .await?;
        if let Some(wait) = retry_after.into_inner().unwrap_or_else(|e| e.into_inner()) {
            self.enqueue(QueueTask::SubmitTransaction { transaction_id }, &customer_id, wait)
                .await?;
        }
        Ok(Handled::Done)
    }

    // ---- timer → status poll ------------------------------------------------------------

    /// Asks the rails about the transactions whose poll is due (up to [`POLL_BATCH`], several
    /// at a time); returns how many it asked.
    pub async fn poll_rails(&self) -> Result<usize, DomainError> {
        let due = self.store.transactions_due(self.now(), POLL_BATCH).await?;
        Ok(self.poll_each(due).await + self.sweep_returns().await?)
    }

    /// Polls each transaction, a few at a time; answers how many were asked about.
    async fn poll_each(&self, transactions: Vec<Transaction>) -> usize {
        let asked: Vec<bool> = futures_util::stream::iter(transactions)
            .map(|transaction| async move { self.poll(&transaction).await })
            .buffer_unordered(POLL_CONCURRENCY)
            .collect()
            .await;
        asked.into_iter().filter(|asked| *asked).count()
    }

    /// The return checks ([`RETURN_CHECKS`]): for each rail served and each check, asks the
    /// rail about the transactions it confirmed that long ago, from where the last sweep got
    /// to. A transaction's checks move no index entry and write nothing unless the money came
    /// back; a sweep writes where it got to, once a round.
    async fn sweep_returns(&self) -> Result<usize, DomainError> {
        let now = self.now();
        let mut asked = 0;
        for rail in self.rails.ids() {
            for (check, wait) in RETURN_CHECKS.iter().enumerate() {
                let until = now - *wait;
                let (after, after_id) = match self.store.return_sweep(rail, check).await? {
                    Some(sweep) => (sweep.confirmed_at, sweep.transaction_id),
                    None => (until - RETURN_SWEEP_LOOKBACK, TransactionId::from(String::new())),
                };
                let confirmed = self
                    .store
                    .confirmed_between(rail, (after, &after_id), until, POLL_BATCH)
                    .await?;
                let reached = match confirmed.last() {
                    Some(last) => ReturnSweep {
                        rail: rail.to_owned(),
                        check,
                        confirmed_at: last.confirmed_at.unwrap_or(until),
                        transaction_id: last.id.clone(),
                    },
                    // A rail quiet for a day: its sweep moves up to the end of its window, so
                    // that it does not read through ever more days. Nothing confirmed up to
                    // there can still appear: the window ends a check's wait (a minute at
                    // least) before now.
                    None if until - after > RETURN_SWEEP_LOOKBACK => ReturnSweep {
                        rail: rail.to_owned(),
                        check,
                        confirmed_at: until,
                        transaction_id: TransactionId::from(String::new()),
                    },
                    None => continue,
                };
                // Returned already (by a report, a statement or an earlier check): nothing to ask.
                let still_confirmed: Vec<Transaction> = confirmed
                    .into_iter()
                    .filter(|t| t.status == TransactionStatus::Confirmed)
                    .collect();
                // The last check ends the reserve on the collections it finds still confirmed.
                let collections: Vec<Transaction> = if check + 1 == RETURN_CHECKS.len() {
                    still_confirmed
                        .iter()
                        .filter(|t| t.credit_account_id.is_some())
                        .cloned()
                        .collect()
                } else {
                    vec![]
                };
                asked += self.poll_each(still_confirmed).await;
                for collection in &collections {
                    self.release_collection_reserve(collection).await?;
                }
                let mut changes = Changeset::default();
                changes.push(Write::PutReturnSweep(reached));
                self.store.commit(changes).await?;
            }
        }
        Ok(asked)
    }

    /// Asks the transaction's rail about it and records the answer; false when no adapter
    /// serves the rail (any more), in which case the poll waits, so that such transactions
    /// do not fill every round ahead of the others.
    async fn poll(&self, transaction: &Transaction) -> bool {
        if transaction.status == TransactionStatus::Pending && transaction.submitting_since.is_none() {
            self.open_window(transaction).await;
            return false;
        }
        let Some(adapter) = self.rails.get(&transaction.rail).cloned() else {
            let deferred = self
                .update_transaction(&transaction.id, Some(transaction.clone()), |txn, now| {
                    Ok(txn.next_poll_at.is_some().then(|| {
                        txn.next_poll_at = Some(now + UNSERVED_RAIL_WAIT);
                        None
                    }))
                })
                .await;
            if let Err(error) = deferred {
                tracing::warn!(transaction = %transaction.id, %error, "could not defer the poll of an unserved rail");
            }
            return false;
        };
        let state = adapter
            .status(&transaction.id, transaction.rail_reference.as_deref())
            .await;
        let copy = Some(transaction.clone());
        if let Err(error) = self
            .apply_rail_state(&transaction.id, copy, state, RailSource::Inquiry)
            .await
        {
            tracing::warn!(transaction = %transaction.id, %error, "could not record a status answer");
        }
        true
    }

    /// A transaction that waited for its settlement day's window goes back to the
    /// submissions queue (the submit decides again); it is looked at again a while later in
    /// case the message is lost.
    async fn open_window(&self, transaction: &Transaction) {
        let task = QueueTask::SubmitTransaction {
            transaction_id: transaction.id.clone(),
        };
        if let Err(error) = self.enqueue(task, &transaction.customer_id, time::Duration::ZERO).await {
            tracing::warn!(transaction = %transaction.id, %error, "a waiting transaction was not queued; it is due again");
            return;
        }
        let deferred = self
            .update_transaction(&transaction.id, Some(transaction.clone()), |txn, now| {
                let waiting = txn.status == TransactionStatus::Pending && txn.submitting_since.is_none();
                Ok((waiting && txn.next_poll_at.is_some()).then(|| {
                    txn.next_poll_at = Some(now + UNSERVED_RAIL_WAIT);
                    None
                }))
            })
            .await;
        if let Err(error) = deferred {
            tracing::warn!(transaction = %transaction.id, %error, "could not defer a waiting transaction");
        }
    }

    /// Records what a rail says of a transaction, from a status inquiry, a report or a
    /// statement; `copy` is the transaction as the caller found it.
    pub(crate) async fn apply_rail_state(
        &self,
        transaction_id: &TransactionId,
        copy: Option<Transaction>,
        state: Result<RailState, RailError>,
        source: RailSource<'_>,
    ) -> Result<Option<Transaction>, DomainError> {
        self.update_transaction(transaction_id, copy, |txn, now| {
            use TransactionStatus::*;
            let rail = rail_actor(&txn.rail);
            let said_by = match source {
                RailSource::Inquiry => "status inquiry".to_string(),
                RailSource::Report(id) => format!("rail report {id}"),
                RailSource::Statement(id) => format!("statement of reconciliation {id}"),
            };
            // A statement's word is final: it applies or changes nothing, and schedules no poll.
            let statement = matches!(source, RailSource::Statement(_));
            let code = |rail_code: String, said: &str| match statement {
                true => format!("statement_{said}"),
                false => rail_code,
            };
            let waiting = matches!(txn.status, Submitted | Unknown) && !statement;
            let transition = match (&state, txn.status) {
                (Ok(RailState::Confirmed { rail_reference }), Submitted | Unknown) => {
                    txn.rail_reference.get_or_insert_with(|| rail_reference.clone());
                    TransactionTransition::Confirm(Cause::new(
                        &code("confirmed_by_rail".into(), "confirmed"),
                        format!("Confirmed by {said_by}"),
                        rail,
                        now,
                    ))
                }
                (Ok(RailState::Failed { code: failure, reason }), Submitted | Unknown) => {
                    TransactionTransition::Fail(Cause::new(
                        &code(format!("rail_failed_{failure}"), "failed"),
                        format!("{reason} ({said_by})"),
                        rail,
                        now,
                    ))
                }
                (Ok(RailState::Returned { code: returned, reason }), Confirmed) => {
                    TransactionTransition::Return(Cause::new(
                        &code(format!("rail_returned_{returned}"), "returned"),
                        format!("{reason} ({said_by})"),
                        rail,
                        now,
                    ))
                }
                // Confirmed money can only come back: a statement that says it
                // failed after all reverses it as a return, under the statement's word.
                (Ok(RailState::Failed { reason, .. }), Confirmed) if statement => TransactionTransition::Return(
                    Cause::new("statement_failed", format!("{reason} ({said_by})"), rail, now),
                ),
                (Ok(RailState::NotFound), Unknown) if txn.status_polls + 1 >= MAX_NOT_FOUND_POLLS => {
                    TransactionTransition::FlagForAttention(Cause::new(
                        "rail_has_no_record",
                        format!("The rail reported no such transaction {} times", txn.status_polls + 1),
                        rail,
                        now,
                    ))
                }
                (Err(error), Unknown) if now - txn.cause.at >= UNANSWERED_PATIENCE => {
                    TransactionTransition::FlagForAttention(Cause::new(
                        "rail_status_unavailable",
                        format!(
                            "Unknown for {} minutes and the rail cannot be asked about it; last: {error}",
                            (now - txn.cause.at).whole_minutes()
                        ),
                        system(),
                        now,
                    ))
                }
                _ if waiting => {
                    // Nothing final yet: ask again later.
                    txn.status_polls += 1;
                    txn.next_poll_at = Some(now + poll_backoff(txn.status_polls));
                    return Ok(Some(None));
                }
                // Confirmed while return checks were polls: it leaves the poll schedule, and
                // the sweeps ask about it from now on.
                _ if txn.status == Confirmed && txn.next_poll_at.is_some() && !statement => {
                    txn.next_poll_at = None;
                    return Ok(Some(None));
                }
                _ => return Ok(None),
            };
            txn.status_polls += 1;
            let change = txn.apply(transition)?;
            // Known now. Confirmed money can still come back: the return sweeps ask again.
            txn.next_poll_at = None;
            Ok(Some(Some(change)))
        })
        .await
    }
}

/// Who tells the outcome a rail state records.
#[derive(Debug, Clone, Copy)]
pub(crate) enum RailSource<'a> {
    /// The pipeline asked the rail.
    Inquiry,
    /// A signed rail report, by its id.
    Report(&'a str),
    /// A statement, by the reconciliation that read it.
    Statement(&'a crate::ids::ReconciliationId),
}
