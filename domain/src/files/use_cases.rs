//! Uploading a file (a payroll CSV or a pain.001), reading it back, the worker that makes its
//! chunks' operations, and a pain.001's status report.

use super::pain002::{self, PaymentStatus, ReportedTransaction};
use super::{
    chunk_lines, csv_lines, pain001, plan, File, FileFormat, FileQuery, FileStatus, PayrollLine, MAX_FILE_BYTES,
};
use crate::access::{Principal, Scope};
use crate::cause::{Actor, ActorType, Cause};
use crate::error::DomainError;
use crate::event::Event;
use crate::idempotency::Ticket;
use crate::ids::{EventId, FileId};
use crate::operations::OperationType;
use crate::ports::{AuditEntry, BatchOutcome, Changeset, QueueMessage, QueueTask, StoreError, Write};
use crate::service::{customer_scope, Handled, Page, Service};
use crate::validate::{self, CreateOperation};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

/// A file as uploaded: its bytes, what they are written in, and the query's parameters.
#[derive(Debug, Clone, Default)]
pub struct UploadFile {
    pub customer_id: Option<String>,
    pub workflow: Option<String>,
    pub allow_duplicate: bool,
    pub format: FileFormat,
    /// The rail a pain.001's payouts go to (a CSV's lines each name theirs).
    pub rail: Option<String>,
    pub bytes: Vec<u8>,
}

/// A file's lines as its format reads them, with what a pain.001 says of itself.
struct ReadFile {
    lines: Vec<PayrollLine>,
    initiation: Option<pain001::Initiation>,
}

/// Reads a file's bytes by its format: every line, or every error (and how many there were).
fn read_file(
    format: FileFormat,
    bytes: &[u8],
    rail: Option<&str>,
    known_rail: &dyn Fn(&str) -> bool,
) -> Result<ReadFile, DomainError> {
    let read = match format {
        FileFormat::Csv => csv_lines::parse(bytes, known_rail).map(|lines| ReadFile {
            lines,
            initiation: None,
        }),
        FileFormat::Pain001 => pain001::parse(bytes, rail.unwrap_or_default()).map(|read| ReadFile {
            lines: read.lines,
            initiation: Some(read.initiation),
        }),
    };
    read.map_err(|(errors, total)| DomainError::InvalidFile { errors, total })
}

/// The metadata key of a pain.001 chunk's operation naming its payment information: its
/// status changes are the file's status report changing.
pub const STATUS_REPORTED: &str = "file_payment_information";

/// Refusals of a chunk's operation that will not change by trying again: the chunk is
/// recorded with the reason instead.
fn is_refusal(error: &DomainError) -> bool {
    matches!(
        error,
        DomainError::InvalidRequest { .. } | DomainError::NotFound { .. } | DomainError::Forbidden { .. }
    )
}

fn file_actor(id: &FileId) -> Actor {
    Actor {
        kind: ActorType::System,
        id: format!("file:{id}"),
    }
}

impl Service {
    /// Validates every line of a payroll file and keeps it, planned into chunks; the worker
    /// makes their operations (the `file.accepted` event queues it). An invalid file is
    /// refused with all its errors, and nothing is written.
    pub async fn upload_file(
        &self,
        principal: &Principal,
        command: UploadFile,
        ticket: Option<Ticket<File>>,
    ) -> Result<File, DomainError> {
        principal.require(Scope::OperationsWrite)?;
        let customer_id = self.acting_customer(principal, command.customer_id.as_deref()).await?;
        let workflow = validate::workflow_name(command.workflow)?;
        if self
            .workflow_and_floor(&customer_id, &workflow, OperationType::Payout)
            .await?
            .0
            .is_none()
        {
            return Err(crate::approvals::unknown_workflow(&workflow, &customer_id));
        }
        if command.bytes.len() > MAX_FILE_BYTES {
            return Err(DomainError::invalid(
                "file",
                "file_too_large",
                format!("A file is at most {MAX_FILE_BYTES} bytes."),
            ));
        }
        let known_rail = |rail: &str| self.rails.contains(rail);
        let rail = match (command.format, command.rail) {
            (FileFormat::Pain001, rail) => Some(validate::item_field::rail(rail, "rail", &known_rail)?),
            (FileFormat::Csv, None) => None,
            (FileFormat::Csv, Some(_)) => {
                return Err(DomainError::invalid(
                    "rail",
                    "parameter_unknown",
                    "A payroll CSV names the rail on each line; rail is a pain.001's.",
                ))
            }
        };
        let ReadFile { lines, initiation } = read_file(command.format, &command.bytes, rail.as_deref(), &known_rail)?;
        let sha256 = hex::encode(Sha256::digest(&command.bytes));
        let duplicate_key = super::duplicate_key(initiation.as_ref(), &sha256);
        if !command.allow_duplicate {
            if let Some(earlier) = self.store.file_with_digest(&customer_id, &duplicate_key).await? {
                return Err(duplicate(&earlier, initiation.as_ref()));
            }
        }
        let now = self.now();
        let id = FileId::new(&*self.ids);
        let (totals, mut chunks) = plan(&lines);
        if let Some(initiation) = &initiation {
            for chunk in &mut chunks {
                chunk.payment_information = initiation.payment_informations.get(chunk.group).map(|p| p.id.clone());
            }
        }
        let cause = Cause::new(
            "file_accepted",
            format!("{} line(s) valid, in {} chunk(s)", lines.len(), chunks.len()),
            principal.actor(),
            now,
        );
        let file = File {
            id: id.clone(),
            customer_id,
            workflow,
            status: FileStatus::Accepted,
            format: command.format,
            initiation,
            rail,
            sha256,
            size: command.bytes.len(),
            line_count: lines.len(),
            totals,
            chunks,
            api_key_id: principal.key.id.clone(),
            created_by: principal.actor().id,
            cause: cause.clone(),
            created_at: now,
            updated_at: now,
            environment: self.environment,
            version: 1,
        };
        // The bytes first: a file stored without them could never be split. Bytes without a
        // file (this request failed after) are never read.
        self.blobs
            .put(&file.blob_key(), command.format.content_type(), command.bytes)
            .await?;
        let mut changes = Changeset::default();
        changes.push(Write::Audit(
            AuditEntry::new("file", &id, "created", cause).moving(None, FileStatus::Accepted.as_str()),
        ));
        changes.push(Write::Event(Event::of_file(EventId::new(&*self.ids), &file)));
        changes.push(Write::InsertFile {
            file: file.clone(),
            unique_bytes: !command.allow_duplicate,
        });
        if let Some(ticket) = &ticket {
            changes.push(ticket.complete(&file));
        }
        match self.store.commit(changes).await {
            Ok(()) => Ok(file),
            // The same bytes, uploaded by a concurrent request.
            Err(StoreError::Conflict) if !command.allow_duplicate => {
                match self
                    .store
                    .file_with_digest(&file.customer_id, &file.duplicate_key())
                    .await?
                {
                    Some(earlier) => Err(duplicate(&earlier, file.initiation.as_ref())),
                    None => Err(self.commit_error(StoreError::Conflict)),
                }
            }
            Err(other) => Err(self.commit_error(other)),
        }
    }

    pub async fn get_file(&self, principal: &Principal, id: &FileId) -> Result<File, DomainError> {
        principal.require(Scope::OperationsRead)?;
        self.store
            .file(id)
            .await?
            .filter(|file| principal.can_access(&file.customer_id))
            .ok_or_else(|| DomainError::not_found("file", id))
    }

    pub async fn list_files(&self, principal: &Principal, query: FileQuery) -> Result<Page<File>, DomainError> {
        principal.require(Scope::OperationsRead)?;
        let Some(customer_id) = customer_scope(principal, query.customer_id.clone()) else {
            return Ok(Page::empty());
        };
        let limit = query.limit;
        let files = self
            .store
            .files(&FileQuery {
                customer_id,
                limit: limit + 1,
                ..query
            })
            .await?;
        Ok(Page::of(files, limit))
    }

    /// The files queue's consumer: each message makes a few chunks' operations.
    pub async fn handle_file_splits(&self, messages: &[QueueMessage]) -> BatchOutcome {
        let mut outcome = BatchOutcome::default();
        for message in messages {
            let result = match QueueTask::parse(&message.body) {
                Ok(QueueTask::SplitFile { file_id }) => self.split_file(&file_id).await,
                Ok(other) => {
                    tracing::error!(task = ?other, "a task on the files queue that is not a file's");
                    Ok(Handled::Done)
                }
                Err(unknown) => {
                    tracing::error!(%unknown, "an unreadable message on the files queue");
                    Err(DomainError::invalid("body", "unknown_task", unknown.to_string()))
                }
            };
            if !matches!(result, Ok(Handled::Done)) {
                if let Err(error) = &result {
                    tracing::warn!(message = %message.id, %error, "splitting a file failed; the message comes again");
                }
                outcome.failed.push(message.id.clone());
            }
        }
        outcome
    }

    /// Makes the operations of up to [`super::CHUNKS_PER_RUN`] chunks still missing, each in
    /// one changeset with the file's record of it (under the file's version: a second worker
    /// on the same file loses the race and reads the file again), then hands the rest to the
    /// next message.
    pub(crate) async fn split_file(&self, id: &FileId) -> Result<Handled, DomainError> {
        let Some(file) = self.store.file(id).await? else {
            tracing::warn!(file = %id, "a split for no file");
            return Ok(Handled::Done);
        };
        if file.status == FileStatus::Completed {
            return Ok(Handled::Done);
        }
        let lines = self.stored_lines(&file).await?;
        let mut made = 0;
        let mut races = 0;
        while made < super::CHUNKS_PER_RUN {
            let file = self
                .store
                .file(id)
                .await?
                .ok_or_else(|| DomainError::not_found("file", id))?;
            let Some(chunk) = file.chunks.iter().find(|c| !c.is_done()).cloned() else {
                return Ok(Handled::Done);
            };
            let now = self.now();
            let principal = self
                .acting_principal(&file.customer_id, &file.api_key_id, now, "the file")
                .await?;
            let drafted = match principal {
                Ok(principal) => {
                    let command = CreateOperation {
                        customer_id: Some(file.customer_id.to_string()),
                        kind: Some(OperationType::Payout.as_str().into()),
                        currency: Some(chunk.currency.code().into()),
                        items: Some(chunk_lines(&lines, &chunk).iter().map(|l| l.item()).collect()),
                        workflow: Some(file.workflow.clone()),
                        metadata: Some(
                            [
                                ("file_id".to_string(), Some(file.id.to_string())),
                                ("file_chunk".to_string(), Some(chunk.number.to_string())),
                                (STATUS_REPORTED.to_string(), chunk.payment_information.clone()),
                            ]
                            .into_iter()
                            .filter_map(|(key, value)| Some((key, value?)))
                            .collect::<BTreeMap<_, _>>(),
                        ),
                        source_account_id: None,
                        destination_account_id: None,
                        hold_ttl: None,
                        file_id: Some(file.id.clone()),
                        reversal_of: None,
                    };
                    match self.draft_operation(&principal, command, None).await {
                        Ok(drafted) => Ok(drafted),
                        Err(refused) if is_refusal(&refused) => Err(format!("The operation was refused: {refused}")),
                        Err(other) => return Err(other),
                    }
                }
                Err(reason) => Err(reason),
            };
            let mut next = file.clone();
            let recorded = next
                .chunks
                .iter_mut()
                .find(|c| c.number == chunk.number)
                .expect("the chunk is the file's");
            let (mut changes, cause) = match drafted {
                Ok((operation, changes)) => {
                    recorded.operation_id = Some(operation.id.clone());
                    let cause = Cause::new(
                        "file_chunk_created",
                        format!("Chunk {} made operation {}", chunk.number, operation.id),
                        file_actor(&file.id),
                        now,
                    );
                    (changes, cause)
                }
                Err(reason) => {
                    recorded.refused = Some(reason.clone());
                    let cause = Cause::new(
                        "file_chunk_refused",
                        format!("Chunk {} made no operation: {reason}", chunk.number),
                        file_actor(&file.id),
                        now,
                    );
                    (Changeset::default(), cause)
                }
            };
            let status = if next.chunks.iter().all(|c| c.is_done()) {
                FileStatus::Completed
            } else {
                FileStatus::Processing
            };
            changes.push(Write::Audit(AuditEntry::new(
                "file",
                &file.id,
                "chunk_recorded",
                cause.clone(),
            )));
            if status != file.status {
                // The last chunk done completes the file: its cause says how all of them went.
                let cause = match status {
                    FileStatus::Completed => {
                        let (chunks, refused) = (
                            next.chunks.len(),
                            next.chunks.iter().filter(|c| c.refused.is_some()).count(),
                        );
                        let message = match refused {
                            0 => format!("All {chunks} chunk(s) done, each made its operation"),
                            _ => format!(
                                "All {chunks} chunk(s) done: {} made an operation, {refused} refused",
                                chunks - refused
                            ),
                        };
                        Cause::new("file_completed", message, file_actor(&file.id), now)
                    }
                    _ => cause,
                };
                changes.push(Write::Audit(
                    AuditEntry::new("file", &file.id, "status_changed", cause.clone())
                        .moving(Some(file.status.as_str()), status.as_str()),
                ));
                next.status = status;
                next.cause = cause;
            }
            next.version += 1;
            next.updated_at = now;
            if status != file.status {
                changes.push(Write::Event(Event::of_file(EventId::new(&*self.ids), &next)));
            }
            changes.push(Write::UpdateFile(next));
            match self.store.commit(changes).await {
                Ok(()) => made += 1,
                // Another worker recorded a chunk first (or an account's funds moved): read
                // the file again.
                Err(StoreError::Conflict) if races < 10 => races += 1,
                Err(other) => return Err(self.commit_error(other)),
            }
        }
        // More to make: the next message goes on where this one stopped.
        let task = QueueTask::SplitFile { file_id: id.clone() };
        self.enqueue(task, &file.customer_id, time::Duration::ZERO).await?;
        Ok(Handled::Done)
    }
}

impl Service {
    /// The lines of a stored file, read from its bytes again.
    async fn stored_lines(&self, file: &File) -> Result<Vec<PayrollLine>, DomainError> {
        let id = &file.id;
        let bytes =
            self.blobs.get(&file.blob_key()).await?.ok_or_else(|| {
                DomainError::invalid_state("file_bytes_missing", format!("The bytes of {id} are gone."))
            })?;
        let read = read_file(file.format, &bytes, file.rail.as_deref(), &|rail| {
            self.rails.contains(rail)
        });
        read.map(|read| read.lines).map_err(|error| {
            DomainError::invalid_state(
                "file_unreadable",
                format!("The stored bytes of {id} no longer validate: {error:?}"),
            )
        })
    }

    /// A pain.001's status report (pain.002): each of its transactions' status as its
    /// operations and transactions now stand.
    pub async fn file_status_report(
        &self,
        principal: &Principal,
        id: &FileId,
        format: Option<&str>,
    ) -> Result<String, DomainError> {
        match format {
            None | Some("pain.002") => {}
            Some(_) => return Err(DomainError::invalid("format", "invalid_format", "format is pain.002.")),
        }
        let file = self.get_file(principal, id).await?;
        let Some(initiation) = &file.initiation else {
            return Err(DomainError::invalid_state(
                "no_status_report",
                format!("{id} is a payroll CSV; a status report (pain.002) answers a pain.001."),
            ));
        };
        let lines = self.stored_lines(&file).await?;
        let mut reported = vec![];
        for chunk in &file.chunks {
            let of_chunk = chunk_lines(&lines, chunk);
            let operation = match &chunk.operation_id {
                Some(operation_id) => self.store.operation(operation_id).await?,
                None => None,
            };
            let transactions = match &operation {
                Some(operation) => self.store.transactions_of_operation(operation).await?,
                None => vec![],
            };
            for (position, line) in of_chunk.into_iter().enumerate() {
                // A chunk's operation holds its lines as items, in order.
                let status = match (&operation, &chunk.refused) {
                    (Some(operation), _) => {
                        let item = operation.items.get(position);
                        let transaction = item
                            .and_then(|i| i.transaction_id.as_ref())
                            .and_then(|t| transactions.iter().find(|found| &found.id == t));
                        PaymentStatus::of(operation, transaction)
                    }
                    (None, Some(why)) => PaymentStatus::refused(why),
                    (None, None) => PaymentStatus::Validated,
                };
                reported.push((
                    line.line,
                    ReportedTransaction {
                        group: line.group,
                        end_to_end_id: line.end_to_end_id.clone(),
                        instruction_id: line.instruction_id.clone(),
                        status,
                    },
                ));
            }
        }
        // In the order the file lists them.
        reported.sort_by_key(|(line, _)| *line);
        let reported: Vec<ReportedTransaction> = reported.into_iter().map(|(_, t)| t).collect();
        Ok(pain002::write(initiation, &reported, self.now()))
    }
}

fn duplicate(earlier: &FileId, initiation: Option<&pain001::Initiation>) -> DomainError {
    let what = match initiation {
        Some(initiation) => format!("A pain.001 with MsgId {} was uploaded before", initiation.message_id),
        None => "These bytes were uploaded before".to_owned(),
    };
    DomainError::invalid_state(
        "duplicate_file",
        format!("{what} as {earlier}; send allow_duplicate=true to upload it again."),
    )
}
