//! Importing a statement (matching it, applying what it says, opening its breaks) and reading
//! a reconciliation back.

use super::matching::candidate_days;
pub use super::statement_file::ImportStatement;
use super::statement_file::{check_line_references, checked_statement, period_of, PeriodParam, StatementFile};
use super::{
    break_item_id, match_statement, LineOutcome, MatchingRules, OutcomeCounts, Reconciliation, ReconciliationLine,
    ReconciliationQuery, ReconciliationRules,
};
use crate::access::require_platform_admin;
use crate::access::Principal;
use crate::cause::{Actor, Cause};
use crate::desk::{Queue, Subject, SubjectType};
use crate::error::DomainError;
use crate::event::{Event, PLATFORM};
use crate::idempotency::Ticket;
use crate::ids::{CustomerId, EventId, FileId, OperationId, ReconciliationId, TransactionId};
use crate::ports::{AuditEntry, Changeset, StoreError, Write};
use crate::rail::{Period, RailError, RailState, Statement, StatementFormat, StatementStatus};
use crate::service::{Page, Service};
use crate::transactions::{RailSource, Transaction};
use crate::validate::required_text;
use std::collections::HashSet;

/// What a statement would do, answered by a dry run and kept nowhere.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct StatementPreview {
    pub rail: String,
    pub format: StatementFormat,
    pub period: Period,
    pub statement_lines: u32,
    pub outcomes: OutcomeCounts,
    /// The version of the rail's rules it was matched by (0: the defaults).
    pub rules_version: u64,
    /// The statement's booked balances, each against the ledger.
    pub balances: Vec<super::BalanceCheck>,
    /// Every line, as the reconciliation would keep it (nothing `applied`, no work item).
    pub lines: Vec<ReconciliationLine>,
}

/// A statement read and matched, before anything is applied.
struct Matched {
    statement: Statement,
    period: Period,
    rules: ReconciliationRules,
    lines: Vec<ReconciliationLine>,
    balances: Vec<super::BalanceCheck>,
}

/// The one member of `set`, if it has exactly one.
fn the_only<T>(set: std::collections::BTreeSet<T>) -> Option<T> {
    let mut members = set.into_iter();
    match (members.next(), members.next()) {
        (Some(only), None) => Some(only),
        _ => None,
    }
}

fn rail_state(status: StatementStatus, line: &ReconciliationLine) -> RailState {
    let said = "reported in the rail's statement".to_owned();
    match status {
        StatementStatus::Confirmed => RailState::Confirmed {
            rail_reference: line.rail_reference.clone().unwrap_or_default(),
        },
        StatementStatus::Failed => RailState::Failed {
            code: "statement".into(),
            reason: format!("Failed, {said}"),
        },
        StatementStatus::Returned => RailState::Returned {
            code: "statement".into(),
            reason: format!("Returned, {said}"),
        },
    }
}

impl Service {
    /// Reads a rail's statement through its adapter, matches every line, applies the
    /// outcomes the statement reports for transactions still open or confirmed here, opens
    /// an exceptions item per break, and keeps the whole as a reconciliation. The same
    /// statement again is answered with the reconciliation it already made.
    pub async fn import_statement(
        &self,
        principal: &Principal,
        command: ImportStatement,
        ticket: Option<Ticket<Reconciliation>>,
    ) -> Result<Reconciliation, DomainError> {
        require_platform_admin(principal)?;
        let file = checked_statement(&command, &self.rails)?;
        let id = Reconciliation::id_of(self.environment, &file.rail, file.format, &file.bytes);
        if let Some(done) = self.store.reconciliation(&id).await? {
            return self.answered(done, ticket).await;
        }
        let Matched {
            statement,
            period,
            rules,
            mut lines,
            balances,
        } = self.read_and_match(&file, command.period).await?;
        let StatementFile {
            rail, format, bytes, ..
        } = file;
        let now = self.now();
        let mut applied = 0;
        for line in lines.iter_mut() {
            let (Some(status), Some(transaction_id)) = (line.status, line.transaction_id.clone()) else {
                continue;
            };
            if line.outcome != LineOutcome::Mismatched || line.transaction_status.is_none() {
                continue;
            }
            let changed = self
                .apply_rail_state(
                    &transaction_id,
                    None,
                    Ok(rail_state(status, line)),
                    RailSource::Statement(&id),
                )
                .await?;
            if let Some(transaction) = changed {
                line.applied = Some(transaction.status);
                applied += 1;
            }
        }
        let opened = self.open_breaks(&id, &rail, &mut lines, &rules.rules, now).await?;
        let outcomes = OutcomeCounts::of(&lines);
        let cause = Cause::new(
            "statement_imported",
            format!(
                "{} line(s): {} matched, {} with a difference, {} mismatched, {} unmatched, {} the wrong way; {} missing; {} of {} balance(s) not as the ledger holds them",
                statement.lines.len(),
                outcomes.matched,
                outcomes.matched_with_difference,
                outcomes.mismatched,
                outcomes.unmatched,
                outcomes.wrong_direction,
                outcomes.missing,
                outcomes.balance_mismatch,
                balances.len()
            ),
            principal.actor(),
            now,
        );
        let reconciliation = Reconciliation {
            id: id.clone(),
            rail,
            format,
            period,
            sha256: hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&bytes)),
            statement_lines: statement.lines.len() as u32,
            outcomes,
            transitions_applied: applied,
            work_items_opened: opened,
            rules_version: rules.version,
            balances,
            cause: cause.clone(),
            created_at: now,
            environment: self.environment,
            version: 1,
        };
        let body = serde_json::to_vec(&lines).expect("lines serialize");
        self.blobs
            .put(&Reconciliation::lines_key(&id), "application/json", body)
            .await?;
        let mut changes = Changeset::default();
        changes.push(Write::Audit(
            AuditEntry::new("reconciliation", &id, "created", cause).moving(None, "completed"),
        ));
        changes.push(Write::Event(Event::of_reconciliation(
            EventId::new(&*self.ids),
            &reconciliation,
        )));
        changes.push(Write::InsertReconciliation(reconciliation.clone()));
        if let Some(ticket) = &ticket {
            changes.push(ticket.complete(&reconciliation));
        }
        match self.store.commit(changes).await {
            Ok(()) => Ok(reconciliation),
            // The same statement, imported by a concurrent request.
            Err(StoreError::Conflict) => match self.store.reconciliation(&id).await? {
                Some(done) => self.answered(done, ticket).await,
                None => Err(self.commit_error(StoreError::Conflict)),
            },
            Err(other) => Err(self.commit_error(other)),
        }
    }

    /// A dry run of [`Service::import_statement`]: every line's outcome against the
    /// transactions as they are now, and nothing changed or kept.
    pub async fn preview_statement(
        &self,
        principal: &Principal,
        command: ImportStatement,
    ) -> Result<StatementPreview, DomainError> {
        require_platform_admin(principal)?;
        let file = checked_statement(&command, &self.rails)?;
        let Matched {
            statement,
            period,
            rules,
            lines,
            balances,
        } = self.read_and_match(&file, command.period).await?;
        Ok(StatementPreview {
            rules_version: rules.version,
            balances,
            rail: file.rail,
            format: file.format,
            period,
            statement_lines: statement.lines.len() as u32,
            outcomes: OutcomeCounts::of(&lines),
            lines,
        })
    }

    /// The statement read by its rail's adapter, its period, the rail's rules, each line
    /// matched by them, and its balances checked against the ledger (a mismatch a line of its
    /// own, after the others).
    async fn read_and_match(&self, file: &StatementFile, period: Option<PeriodParam>) -> Result<Matched, DomainError> {
        let statement = file
            .adapter
            .import_statement(file.format, &file.bytes)
            .await
            .map_err(|error| match error {
                RailError::Permanent(message) => DomainError::invalid("statement", "invalid_statement", message),
                other => DomainError::RailUnavailable {
                    message: format!("The rail could not read the statement: {other}"),
                },
            })?;
        check_line_references(&statement)?;
        let period = period_of(period, &statement)?;
        let rules = self.rules_of(&file.rail).await?;
        let known = self
            .transactions_spoken_of(&file.rail, &statement, period, &rules.rules)
            .await?;
        let mut lines = match_statement(&statement.lines, &known, period, &rules.rules);
        if statement.partial {
            // Missing lines come last, after every line of the statement.
            lines.retain(|line| line.outcome != LineOutcome::Missing);
        }
        self.name_batch_payers(&mut lines, &known).await?;
        let balances = self.check_balances(&file.rail, &statement.balances).await?;
        super::balances::mismatch_lines(&balances, &mut lines);
        Ok(Matched {
            statement,
            period,
            rules,
            lines,
            balances,
        })
    }

    /// Names, on each batch booking's lines, the operation and the file its payments all
    /// belong to, when every detail matched a transaction and they all do (a file of more
    /// than a thousand lines is several operations).
    async fn name_batch_payers(
        &self,
        lines: &mut [ReconciliationLine],
        known: &[Transaction],
    ) -> Result<(), DomainError> {
        use std::collections::{BTreeMap, BTreeSet, HashMap};
        let operation_of: HashMap<&str, &OperationId> =
            known.iter().map(|t| (t.id.as_str(), &t.operation_id)).collect();
        // Each entry's operations; none once a detail matched no transaction.
        let mut operations: BTreeMap<u32, Option<BTreeSet<OperationId>>> = BTreeMap::new();
        let details = lines
            .iter()
            .filter(|l| !l.differences.contains(&super::Difference::BatchTotal));
        for line in details {
            let Some(batch) = &line.batch else { continue };
            let matched = matches!(line.outcome, LineOutcome::Matched | LineOutcome::Mismatched);
            let operation = line
                .transaction_id
                .as_ref()
                .filter(|_| matched)
                .and_then(|t| operation_of.get(t.as_str()));
            let seen = operations.entry(batch.entry).or_insert_with(|| Some(BTreeSet::new()));
            match (seen.as_mut(), operation) {
                (Some(set), Some(operation)) => {
                    set.insert((*operation).clone());
                }
                _ => *seen = None,
            }
        }
        let mut file_of: HashMap<OperationId, Option<FileId>> = HashMap::new();
        for (entry, operations) in operations {
            let Some(operations) = operations else { continue };
            let mut files = BTreeSet::new();
            for operation in &operations {
                if !file_of.contains_key(operation) {
                    let file = self.store.operation(operation).await?.and_then(|o| o.file_id);
                    file_of.insert(operation.clone(), file);
                }
                files.insert(file_of[operation].clone());
            }
            let (operation, file) = (the_only(operations), the_only(files).flatten());
            for batch in lines
                .iter_mut()
                .filter_map(|l| l.batch.as_mut())
                .filter(|b| b.entry == entry)
            {
                batch.operation_id = operation.clone();
                batch.file_id = file.clone();
            }
        }
        Ok(())
    }

    /// Answers with a reconciliation made before, completing this request's key with it.
    async fn answered(
        &self,
        done: Reconciliation,
        ticket: Option<Ticket<Reconciliation>>,
    ) -> Result<Reconciliation, DomainError> {
        if let Some(ticket) = ticket {
            let mut changes = Changeset::default();
            changes.push(ticket.complete(&done));
            self.store.commit(changes).await?;
        }
        Ok(done)
    }

    /// The rail's transactions a statement of `period` may speak of: those confirmed around
    /// the period, and those its lines name by id.
    async fn transactions_spoken_of(
        &self,
        rail: &str,
        statement: &Statement,
        period: Period,
        rules: &MatchingRules,
    ) -> Result<Vec<Transaction>, DomainError> {
        let (from, to) = candidate_days(period, rules);
        let mut known = self.store.confirmed_on_rail(rail, from, to).await?;
        let mut seen: HashSet<TransactionId> = known.iter().map(|t| t.id.clone()).collect();
        let references: HashSet<&str> = known.iter().filter_map(|t| t.rail_reference.as_deref()).collect();
        let named: Vec<TransactionId> = statement
            .lines
            .iter()
            .filter(|l| l.rail_reference.as_deref().is_none_or(|r| !references.contains(r)))
            .filter_map(|l| l.transaction_id.clone())
            .filter(|id| seen.insert(id.clone()))
            .collect();
        for id in named {
            if let Some(transaction) = self.store.transaction(&id).await? {
                known.push(transaction);
            }
        }
        known.retain(|t| t.rail == rail && t.environment == self.environment);
        Ok(known)
    }

    /// Opens one exceptions item per break, and per difference above the rules' threshold
    /// (each in its own changeset: an item also moves the board's counters). An item already
    /// open from an earlier try is kept.
    async fn open_breaks(
        &self,
        id: &ReconciliationId,
        rail: &str,
        lines: &mut [ReconciliationLine],
        rules: &MatchingRules,
        now: time::OffsetDateTime,
    ) -> Result<u32, DomainError> {
        let mut opened = 0;
        let worth_an_item = |line: &ReconciliationLine| {
            line.outcome.is_break()
                || (line.outcome == LineOutcome::MatchedWithDifference
                    && line.amount_difference.unwrap_or(0).abs() > rules.difference_work_item_above)
        };
        for line in lines.iter_mut().filter(|l| worth_an_item(l)) {
            let item_id = break_item_id(id, line.number);
            line.work_item_id = Some(item_id.clone());
            if self.store.work_item(&item_id).await?.is_some() {
                continue;
            }
            let kind = format!("reconciliation_{}", line.outcome.as_str());
            let cause = Cause::new(&kind, line.break_message(rail, id), Actor::system(), now);
            let subject = Subject {
                kind: SubjectType::StatementLine,
                id: format!("{id}:{}", line.number),
            };
            let item = self.new_work_item(
                item_id,
                Queue::Exceptions,
                &kind,
                subject,
                CustomerId::from(PLATFORM),
                cause,
            );
            let mut changes = Changeset::default();
            self.record_work_item(&mut changes, &item, "opened");
            changes.push(Write::InsertWorkItem(item));
            match self.store.commit(changes).await {
                Ok(()) => opened += 1,
                // Opened by a concurrent import of the same statement.
                Err(StoreError::Conflict) => {}
                Err(other) => return Err(other.into()),
            }
        }
        Ok(opened)
    }

    pub async fn get_reconciliation(
        &self,
        principal: &Principal,
        id: &ReconciliationId,
    ) -> Result<Reconciliation, DomainError> {
        require_platform_admin(principal)?;
        self.store
            .reconciliation(id)
            .await?
            .filter(|r| r.environment == self.environment)
            .ok_or_else(|| DomainError::not_found("reconciliation", id))
    }

    /// The reconciliations imported, newest first, of `rail` or of every rail: what an
    /// operator reads to find yesterday's, or to see that one was not run.
    pub async fn list_reconciliations(
        &self,
        principal: &Principal,
        rail: Option<String>,
        starting_after: Option<&ReconciliationId>,
        limit: usize,
    ) -> Result<Page<Reconciliation>, DomainError> {
        require_platform_admin(principal)?;
        let rail = rail.map(|rail| required_text(Some(rail), "rail", 80)).transpose()?;
        let starting_after = match starting_after {
            Some(id) => Some(
                self.store
                    .reconciliation(id)
                    .await?
                    .filter(|r| r.environment == self.environment)
                    .ok_or_else(|| {
                        DomainError::missing_reference("starting_after", format!("No such reconciliation: '{id}'"))
                    })?,
            ),
            None => None,
        };
        let query = ReconciliationQuery {
            rail,
            starting_after,
            limit: limit + 1,
        };
        let found = self.store.reconciliations(&query).await?;
        let data = found
            .into_iter()
            .filter(|r| r.environment == self.environment)
            .collect();
        Ok(Page::of(data, limit))
    }

    /// A page of a reconciliation's lines, in order, after line `starting_after`.
    pub async fn reconciliation_lines(
        &self,
        principal: &Principal,
        id: &ReconciliationId,
        outcome: Option<LineOutcome>,
        starting_after: Option<u32>,
        limit: usize,
    ) -> Result<Page<ReconciliationLine>, DomainError> {
        let reconciliation = self.get_reconciliation(principal, id).await?;
        let key = Reconciliation::lines_key(&reconciliation.id);
        let bytes = self
            .blobs
            .get(&key)
            .await?
            .ok_or_else(|| DomainError::not_found("reconciliation", id))?;
        let lines: Vec<ReconciliationLine> = serde_json::from_slice(&bytes)
            .map_err(|e| DomainError::Blob(crate::ports::BlobError::new(format!("lines of {id}: {e}"))))?;
        let after = starting_after.unwrap_or(0);
        let data: Vec<ReconciliationLine> = lines
            .into_iter()
            .filter(|l| l.number > after && outcome.is_none_or(|o| l.outcome == o))
            .take(limit + 1)
            .collect();
        Ok(Page::of(data, limit))
    }
}
