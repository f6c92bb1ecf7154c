//! How a changeset's writes land in the tables: each write one or a few statements, a
//! condition that fails rolling the whole changeset back.

use super::*;
use ops_domain::desk::board::{column_bucket, queue_bucket};
use ops_domain::desk::WorkItemStatus;
use ops_domain::idempotency::RETENTION;
use ops_domain::operations::Finding;
use ops_domain::ports::{Changeset, StoreError, Write};
use ops_domain::schedules::ScheduleStatus;
use ops_domain::webhooks::{Delivery, DeliveryStatus};
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

/// A conditional write's outcome: it changed its one row, or its condition failed.
pub(super) fn one_row(changed: usize) -> Result<(), TxError> {
    match changed {
        1 => Ok(()),
        _ => Err(ConditionFailed.into()),
    }
}

/// An entry of the operations' lookup: written once, whichever write names it first.
fn insert_finding(tx: &Connection, finding: &Finding) -> Result<(), TxError> {
    tx.run(
        "INSERT OR IGNORE INTO operation_finds (kind, value, customer_id, operation_id) VALUES (?1, ?2, ?3, ?4)",
        params![
            finding.by.as_str(),
            finding.value,
            finding.customer_id.as_str(),
            finding.operation_id.as_str()
        ],
    )?;
    Ok(())
}

fn apply(tx: &Connection, write: &Write) -> Result<(), TxError> {
    match write {
        Write::InsertCustomer(c) => {
            tx.run(
                "INSERT INTO customers (id, body) VALUES (?1, ?2)",
                params![c.id.as_str(), json(c)],
            )?;
        }
        Write::InsertUser(u) => {
            tx.run(
                "INSERT INTO users (id, customer_id, body) VALUES (?1, ?2, ?3)",
                params![u.id.as_str(), u.customer_id.as_str(), json(u)],
            )?;
            tx.run(
                "INSERT INTO user_emails (customer_id, email, user_id) VALUES (?1, ?2, ?3)",
                params![u.customer_id.as_str(), u.email_key(), u.id.as_str()],
            )?;
        }
        Write::UpdateCustomer(c) => {
            // A customer stored before versions existed is version 1.
            one_row(tx.run(
                "UPDATE customers SET body = ?2 WHERE id = ?1 AND coalesce(json_extract(body, '$.version'), 1) = ?3",
                params![c.id.as_str(), json(c), c.version as i64 - 1],
            )?)?;
        }
        Write::UpdateUser(u) => {
            // A user stored before versions existed is version 1.
            one_row(tx.run(
                "UPDATE users SET body = ?2 WHERE id = ?1 AND coalesce(json_extract(body, '$.version'), 1) = ?3",
                params![u.id.as_str(), json(u), u.version as i64 - 1],
            )?)?;
        }
        Write::PutApiKey(k) => {
            // Version 1 is a new key; a key stored before versions existed is version 1.
            one_row(tx.run(
                "INSERT INTO api_keys (id, secret_hash, body) VALUES (?1, ?2, ?3)
                 ON CONFLICT (id) DO UPDATE SET body = excluded.body
                 WHERE coalesce(json_extract(api_keys.body, '$.version'), 1) = ?4 - 1",
                params![k.id.as_str(), k.secret_hash, json(k), k.version as i64],
            )?)?;
        }
        Write::InsertOperation(op) => {
            tx.run(
                "INSERT INTO operations (id, customer_id, status, type, version, body) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![
                    op.id.as_str(),
                    op.customer_id.as_str(),
                    op.status.as_str(),
                    op.kind.as_str(),
                    op.version as i64,
                    json(op)
                ],
            )?;
            for finding in op.findings() {
                insert_finding(tx, &finding)?;
            }
        }
        Write::UpdateOperation(op) => {
            one_row(tx.run(
                "UPDATE operations SET status = ?2, version = ?3, body = ?4 WHERE id = ?1 AND version = ?5",
                params![
                    op.id.as_str(),
                    op.status.as_str(),
                    op.version as i64,
                    json(op),
                    op.version as i64 - 1
                ],
            )?)?;
        }
        Write::PutWorkflow(w) => {
            one_row(tx.run(
                "INSERT INTO workflows (owner, name, version, body) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (owner, name) DO UPDATE SET version = excluded.version, body = excluded.body
                 WHERE workflows.version = excluded.version - 1",
                params![owner_key(&w.owner), w.name, w.version as i64, json(w)],
            )?)?;
        }
        Write::InsertTransaction(t) => {
            tx.run(
                "INSERT INTO transactions (id, operation_id, status, next_poll_at, version, body) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![t.id.as_str(), t.operation_id.as_str(), t.status.as_str(), t.next_poll_at.map(|at| at.unix_timestamp()), t.version as i64, json(t)],
            )?;
            if let Some(finding) = t.finding() {
                insert_finding(tx, &finding)?;
            }
        }
        Write::UpdateTransaction(t) => {
            one_row(tx.run(
                "UPDATE transactions SET status = ?2, next_poll_at = ?3, version = ?4, body = ?5 WHERE id = ?1 AND version = ?6",
                params![t.id.as_str(), t.status.as_str(), t.next_poll_at.map(|at| at.unix_timestamp()), t.version as i64, json(t), t.version as i64 - 1],
            )?)?;
            if let Some(finding) = t.finding() {
                insert_finding(tx, &finding)?;
            }
        }
        Write::Event(e) => {
            tx.run(
                "INSERT INTO events (id, customer_id, type, body) VALUES (?1, ?2, ?3, ?4)",
                params![e.id.as_str(), e.customer_id.as_str(), e.kind, json(e)],
            )?;
        }
        Write::PutWebhookEndpoint(w) => {
            one_row(tx.run(
                "INSERT INTO webhook_endpoints (id, customer_id, version, body) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (id) DO UPDATE SET version = excluded.version, body = excluded.body
                 WHERE webhook_endpoints.version = excluded.version - 1",
                params![w.id.as_str(), w.customer_id.as_deref(), w.version as i64, json(w)],
            )?)?;
        }
        Write::PutEndpointRoster(roster) => {
            one_row(tx.run(
                "INSERT INTO endpoint_rosters (owner, version, body) VALUES (?1, ?2, ?3)
                 ON CONFLICT (owner) DO UPDATE SET version = excluded.version, body = excluded.body
                 WHERE endpoint_rosters.version = excluded.version - 1",
                params![
                    roster.owner.as_ref().map_or("", |id| id.as_str()),
                    roster.version as i64,
                    json(roster)
                ],
            )?)?;
        }
        Write::PutEndpointHealth(health) => {
            one_row(tx.run(
                "INSERT INTO endpoint_health (endpoint_id, version, body) VALUES (?1, ?2, ?3)
                 ON CONFLICT (endpoint_id) DO UPDATE SET version = excluded.version, body = excluded.body
                 WHERE endpoint_health.version = excluded.version - 1",
                params![health.endpoint_id.as_str(), health.version as i64, json(health)],
            )?)?;
        }
        Write::PutDeliveryLine(line) => {
            one_row(tx.run(
                "INSERT INTO delivery_lines (endpoint_id, operation_id, version, body) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (endpoint_id, operation_id) DO UPDATE SET version = excluded.version, body = excluded.body
                 WHERE delivery_lines.version = excluded.version - 1",
                params![
                    line.endpoint_id.as_str(),
                    line.operation_id.as_str(),
                    line.version as i64,
                    json(line)
                ],
            )?)?;
        }
        Write::PutSchedule(schedule) => {
            let due = schedule
                .next_run_at
                .filter(|_| schedule.status == ScheduleStatus::Active)
                .map(|at| at.unix_timestamp());
            one_row(tx.run(
                "INSERT INTO schedules (id, customer_id, visible, due_at, version, body) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (id) DO UPDATE SET visible = excluded.visible, due_at = excluded.due_at,
                   version = excluded.version, body = excluded.body
                 WHERE schedules.version = excluded.version - 1",
                params![
                    schedule.id.as_str(),
                    schedule.customer_id.as_str(),
                    schedule.is_visible(),
                    due,
                    schedule.version as i64,
                    json(schedule)
                ],
            )?)?;
        }
        Write::InsertOccurrence(occurrence) => {
            tx.run(
                "INSERT INTO occurrences (schedule_id, scheduled_at, body) VALUES (?1, ?2, ?3)",
                params![
                    occurrence.schedule_id.as_str(),
                    occurrence.scheduled_at.unix_timestamp(),
                    json(occurrence)
                ],
            )?;
        }
        Write::BackfillOccurrence(occurrence) => {
            one_row(tx.run(
                "INSERT INTO occurrences (schedule_id, scheduled_at, body) VALUES (?1, ?2, ?3)
                 ON CONFLICT (schedule_id, scheduled_at) DO UPDATE SET body = excluded.body
                 WHERE json_extract(occurrences.body, '$.status') <> 'created'",
                params![
                    occurrence.schedule_id.as_str(),
                    occurrence.scheduled_at.unix_timestamp(),
                    json(occurrence)
                ],
            )?)?;
        }
        Write::InsertAccount(account) => {
            tx.run(
                "INSERT INTO accounts (id, holder, currency, customer_id, body) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![
                    account.id.as_str(),
                    account.holder(),
                    account.currency.code(),
                    account.customer_id.as_deref(),
                    json(account)
                ],
            )?;
        }
        Write::InsertWorkItem(item) => {
            tx.run(
                "INSERT INTO work_items (id, queue, status, customer_id, assignee, subject_id, due_at, version, body)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                params![
                    item.id.as_str(),
                    item.queue.as_str(),
                    item.status.as_str(),
                    item.customer_id.as_str(),
                    item.assignee,
                    item.subject.id,
                    item.due_at.unix_timestamp(),
                    item.version as i64,
                    json(item)
                ],
            )?;
            count_on_board(tx, item.customer_id.as_str(), &queue_bucket(item.queue), "", 1, 0)?;
        }
        Write::UpdateWorkItem(item) => {
            one_row(tx.run(
                "UPDATE work_items SET status = ?2, assignee = ?3, version = ?4, body = ?5 WHERE id = ?1 AND version = ?6",
                params![
                    item.id.as_str(),
                    item.status.as_str(),
                    item.assignee,
                    item.version as i64,
                    json(item),
                    item.version as i64 - 1
                ],
            )?)?;
            // Done is final: the one update that reaches it takes the item off the count.
            if item.status == WorkItemStatus::Done {
                count_on_board(tx, item.customer_id.as_str(), &queue_bucket(item.queue), "", -1, 0)?;
            }
        }
        Write::MoveOnBoard(moved) => {
            let entry = &moved.entry;
            let changed = if entry.version == 1 {
                tx.run(
                    "INSERT INTO board_entries (operation_id, version, body) VALUES (?1, 1, ?2)",
                    params![entry.operation_id.as_str(), json(entry)],
                )?
            } else {
                tx.run(
                    "UPDATE board_entries SET version = ?2, body = ?3 WHERE operation_id = ?1 AND version = ?4",
                    params![
                        entry.operation_id.as_str(),
                        entry.version as i64,
                        json(entry),
                        entry.version as i64 - 1
                    ],
                )?
            };
            one_row(changed)?;
            let (customer, currency) = (entry.customer_id.as_str(), entry.currency.code());
            if let Some(from) = moved.from {
                count_on_board(
                    tx,
                    customer,
                    &column_bucket(from),
                    currency,
                    -1,
                    -i128::from(entry.amount),
                )?;
            }
            if let Some(to) = entry.column {
                count_on_board(tx, customer, &column_bucket(to), currency, 1, entry.amount.into())?;
            }
        }
        Write::InsertMovement(movement) => {
            tx.run(
                "INSERT INTO movements (id, version, body) VALUES (?1, ?2, ?3)",
                params![movement.id.as_str(), movement.version as i64, json(movement)],
            )?;
            for entry in &movement.entries {
                tx.run(
                    "INSERT INTO movement_entries (account_id, movement_id) VALUES (?1, ?2)",
                    params![entry.account_id.as_str(), movement.id.as_str()],
                )?;
            }
        }
        Write::InsertFile { file, unique_bytes } => {
            tx.run(
                "INSERT INTO files (id, customer_id, version, body) VALUES (?1, ?2, ?3, ?4)",
                params![
                    file.id.as_str(),
                    file.customer_id.as_str(),
                    file.version as i64,
                    json(file)
                ],
            )?;
            let digest = if *unique_bytes {
                "INSERT INTO file_digests (customer_id, sha256, file_id) VALUES (?1, ?2, ?3)"
            } else {
                "INSERT OR REPLACE INTO file_digests (customer_id, sha256, file_id) VALUES (?1, ?2, ?3)"
            };
            tx.run(
                digest,
                params![file.customer_id.as_str(), file.duplicate_key(), file.id.as_str()],
            )?;
        }
        Write::InsertReconciliation(reconciliation) => {
            tx.run(
                "INSERT INTO reconciliations (id, body) VALUES (?1, ?2)",
                params![reconciliation.id.as_str(), json(reconciliation)],
            )?;
        }
        Write::PutPayoutLimits(limits) => super::limits::put_limits(tx, limits)?,
        Write::UseLimit(used) => super::limits::use_limit(tx, used)?,
        Write::RememberPayee(payee) => super::limits::remember_payee(tx, payee)?,
        Write::PutCalendar(calendar) => {
            one_row(tx.run(
                "INSERT INTO calendars (id, version, body) VALUES (?1, ?2, ?3)
                 ON CONFLICT (id) DO UPDATE SET version = excluded.version, body = excluded.body
                 WHERE calendars.version = excluded.version - 1",
                params![calendar.id.as_str(), calendar.version as i64, json(calendar)],
            )?)?;
        }
        Write::PutBankFile(file) => {
            one_row(tx.run(
                "INSERT INTO bank_files (id, version, body) VALUES (?1, ?2, ?3)
                 ON CONFLICT (id) DO UPDATE SET version = excluded.version, body = excluded.body
                 WHERE bank_files.version = excluded.version - 1",
                params![file.id.as_str(), file.version as i64, json(file)],
            )?)?;
        }
        Write::PutRailCutoffs(cutoffs) => {
            one_row(tx.run(
                "INSERT INTO rail_cutoffs (environment, rail, version, body) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (environment, rail) DO UPDATE SET version = excluded.version, body = excluded.body
                 WHERE rail_cutoffs.version = excluded.version - 1",
                params![
                    cutoffs.environment.as_str(),
                    cutoffs.rail,
                    cutoffs.version as i64,
                    json(cutoffs)
                ],
            )?)?;
        }
        Write::PutReconciliationRules(rules) => {
            one_row(tx.run(
                "INSERT INTO reconciliation_rules (environment, rail, version, body) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (environment, rail) DO UPDATE SET version = excluded.version, body = excluded.body
                 WHERE reconciliation_rules.version = excluded.version - 1",
                params![
                    rules.environment.as_str(),
                    rules.rail,
                    rules.version as i64,
                    json(rules)
                ],
            )?)?;
        }
        Write::Tally(tally) => super::tallies::add(tx, tally)?,
        Write::PutReturnSweep(sweep) => {
            tx.run(
                "INSERT INTO return_sweeps (rail, check_index, body) VALUES (?1, ?2, ?3)
                 ON CONFLICT (rail, check_index) DO UPDATE SET body = excluded.body",
                params![sweep.rail, sweep.check as i64, json(sweep)],
            )?;
        }
        Write::UpdateFile(file) => {
            one_row(tx.run(
                "UPDATE files SET version = ?2, body = ?3 WHERE id = ?1 AND version = ?4",
                params![
                    file.id.as_str(),
                    file.version as i64,
                    json(file),
                    file.version as i64 - 1
                ],
            )?)?;
        }
        Write::UpdateMovement(movement) => {
            one_row(tx.run(
                "UPDATE movements SET version = ?2, body = ?3 WHERE id = ?1 AND version = ?4",
                params![
                    movement.id.as_str(),
                    movement.version as i64,
                    json(movement),
                    movement.version as i64 - 1
                ],
            )?)?;
        }
        Write::ChangeBalances(account) => {
            let change = &account.change;
            one_row(tx.run(
                "UPDATE accounts SET posted = posted + ?2, pending_debits = pending_debits + ?3,
                   pending_credits = pending_credits + ?4,
                   body = json_set(body, '$.balances.posted', posted + ?2,
                     '$.balances.pending_debits', pending_debits + ?3,
                     '$.balances.pending_credits', pending_credits + ?4)
                 WHERE id = ?1 AND (?5 = 0 OR posted - pending_debits + ?2 - ?3 >= 0)",
                params![
                    account.account_id.as_str(),
                    change.posted,
                    change.pending_debits,
                    change.pending_credits,
                    account.guard_available
                ],
            )?)?;
            if change.posted != 0 {
                tx.run(
                    "INSERT INTO account_days (account_id, day, posted) VALUES (?1, ?2, ?3)
                     ON CONFLICT (account_id, day) DO UPDATE SET posted = posted + excluded.posted",
                    params![account.account_id.as_str(), account.on.to_string(), change.posted],
                )?;
            }
        }
        Write::InsertDelivery(d) => {
            tx.run(
                "INSERT INTO deliveries (id, event_id, version, body) VALUES (?1, ?2, ?3, ?4)",
                params![d.id.as_str(), d.event_id.as_str(), d.version as i64, json(d)],
            )?;
            list_failed_delivery(tx, d)?;
        }
        Write::UpdateDelivery(d) => {
            one_row(tx.run(
                "UPDATE deliveries SET version = ?2, body = ?3 WHERE id = ?1 AND version = ?4",
                params![d.id.as_str(), d.version as i64, json(d), d.version as i64 - 1],
            )?)?;
            list_failed_delivery(tx, d)?;
        }
        Write::Audit(entry) => {
            tx.run(
                "INSERT INTO audit (entity_id, operation_id, body) VALUES (?1, ?2, ?3)",
                params![entry.entity_id, entry.operation_id, json(entry)],
            )?;
        }
        Write::TakeIdempotency { claim, response } => {
            let now = claim.now.unix_timestamp();
            one_row(tx.run(
                "INSERT INTO idempotency (scope, key, fingerprint, status, response, locked_until, expires_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                 ON CONFLICT (scope, key) DO UPDATE SET fingerprint = excluded.fingerprint, status = excluded.status,
                     response = excluded.response, locked_until = excluded.locked_until, expires_at = excluded.expires_at
                 WHERE idempotency.expires_at <= ?6 OR (idempotency.status IS NULL AND idempotency.locked_until <= ?6)",
                params![claim.scope, claim.key, claim.fingerprint, response.status, response.body, now, now + RETENTION.whole_seconds()],
            )?)?;
        }
        Write::CompleteIdempotency { scope, key, response } => {
            one_row(tx.run(
                "UPDATE idempotency SET status = ?3, response = ?4 WHERE scope = ?1 AND key = ?2 AND status IS NULL",
                params![scope, key, response.status, response.body],
            )?)?;
        }
    }
    Ok(())
}

/// Keeps `failed_deliveries` to the deliveries awaiting a follow-up (failed and not followed
/// up, or waiting for their disabled endpoint): listed when one fails or starts waiting, taken
/// off when its follow-up is recorded or it is sent on (pending again). A delivered one
/// touches nothing; a pending one's update deletes nothing but a waiting one's row.
fn list_failed_delivery(tx: &Connection, d: &Delivery) -> Result<(), TxError> {
    let key = params![d.endpoint_id.as_str(), d.event_id.as_str(), d.id.as_str()];
    if d.awaits_follow_up() {
        tx.run(
            "INSERT OR IGNORE INTO failed_deliveries (endpoint_id, event_id, delivery_id) VALUES (?1, ?2, ?3)",
            key,
        )?;
    } else if d.status != DeliveryStatus::Delivered {
        tx.run(
            "DELETE FROM failed_deliveries WHERE endpoint_id = ?1 AND event_id = ?2 AND delivery_id = ?3",
            key,
        )?;
    }
    Ok(())
}

/// Applies every write of `changes` on `c` (a transaction or a savepoint), stopping at the
/// first that fails; the caller rolls back.
fn apply_all(c: &Connection, changes: &Changeset) -> Result<(), StoreError> {
    changes.writes.iter().try_for_each(|write| match apply(c, write) {
        Ok(()) => Ok(()),
        Err(TxError::Condition) => Err(StoreError::Conflict),
        Err(TxError::Sql(e)) => Err(unavailable(e)),
    })
}

/// Applies every write of `changes` in one transaction, or none.
pub(super) fn commit_on(c: &mut Connection, changes: &Changeset) -> Result<(), StoreError> {
    let tx = c
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(unavailable)?;
    apply_all(&tx, changes)?;
    tx.commit().map_err(unavailable)
}

/// Applies each changeset in a savepoint of its own, all in one transaction (one sync to
/// disk): a changeset whose condition fails is rolled back alone. The outer error is the
/// transaction's own (nothing committed).
pub(super) fn commit_together(
    c: &mut Connection,
    changesets: &[Changeset],
) -> Result<Vec<Result<(), StoreError>>, StoreError> {
    let mut tx = c
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(unavailable)?;
    let mut outcomes = Vec::with_capacity(changesets.len());
    for changes in changesets {
        let savepoint = tx.savepoint().map_err(unavailable)?;
        let outcome = apply_all(&savepoint, changes);
        // A savepoint dropped without commit rolls back its changeset alone.
        if outcome.is_ok() {
            savepoint.commit().map_err(unavailable)?;
        }
        outcomes.push(outcome);
    }
    tx.commit().map_err(unavailable)?;
    Ok(outcomes)
}

/// Adds to a board counter of `customer` (the platform's board adds up every customer's). The
/// amount is added here, in 128 bits, and stored as text: SQLite's own sum would overflow.
fn count_on_board(
    tx: &Connection,
    customer: &str,
    bucket: &str,
    currency: &str,
    count: i64,
    amount: i128,
) -> Result<(), TxError> {
    let held = tx
        .query_row(
            "SELECT amount FROM board_sums WHERE owner = ?1 AND bucket = ?2 AND currency = ?3",
            params![customer, bucket, currency],
            |row| decimal(row, 0),
        )
        .optional()?;
    let amount = held.unwrap_or(0) + amount;
    tx.run(
        "INSERT INTO board_sums (owner, bucket, currency, count, amount) VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (owner, bucket, currency) DO UPDATE
         SET count = count + excluded.count, amount = excluded.amount",
        params![customer, bucket, currency, count, amount.to_string()],
    )?;
    Ok(())
}

/// A board amount, kept as decimal text.
pub(super) fn decimal(row: &rusqlite::Row, column: usize) -> rusqlite::Result<i128> {
    let text: String = row.get(column)?;
    text.parse()
        .map_err(|e| rusqlite::Error::FromSqlConversionFailure(column, rusqlite::types::Type::Text, Box::new(e)))
}
