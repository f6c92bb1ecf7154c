//! The entity item as its own outbox.
//!
//! A changeset that changes one operation, one transaction or one work item, with the events
//! and audit entries of that change, is written as the entity's own write (a lone conditional
//! put, after the idempotency key's record when a create takes one ([`super::key_first`]), or
//! a transaction with the board's counters when the desk opens or closes an item) carrying in
//! its `outbox` attribute what those events and entries are. They are then written as plain
//! puts, outside the transaction: a transaction takes two write units per item, so the event
//! and the entry cost half. If the writer dies between the two writes, the table's stream
//! still holds the entity's record, and `stream-outbox` ([`DynamoStore::complete_outbox`])
//! writes whatever of it is missing. Each event and entry has one key (its id, its sequence,
//! fixed in the outbox), so writing one twice writes it once, and the event consumers take
//! only inserts.
//!
//! An event the entity's document rebuilds exactly (`operation.<status>` from the operation,
//! `transaction.<status>` from the transaction, `work_item.<change>` from the work item) is
//! kept in the outbox by its id alone, and an audit entry of the entity's move by its action
//! and the status it left, so the entity's item grows by a few dozen bytes rather than by the
//! event and the entry.

use super::*;
use super::{documents, keys};
use aws_sdk_dynamodb::types::{AttributeValue, Put, TransactWriteItem};
use aws_sdk_dynamodb::types::{PutRequest, WriteRequest};
use ops_domain::desk::SubjectType;
use ops_domain::desk::WorkItem;
use ops_domain::event::Event;
use ops_domain::idempotency::{IdempotencyClaim, StoredResponse};
use ops_domain::ids::{EventId, IdGenerator, IdKind};
use ops_domain::operations::Operation;
use ops_domain::ports::{AuditEntry, Changeset, StoreError, Write};
use ops_domain::transactions::Transaction;
use serde::Serialize;

/// The most an outbox may take in its entity's item (deflated); past it, the changeset is one
/// transaction as before. An outbox that names its events and entries takes a few dozen bytes.
const OUTBOX_LIMIT: usize = 2048;

/// What the outbox of an entity's item says is still to write.
#[derive(Debug, Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Entry {
    /// An event the entity's document rebuilds: `operation.<suffix>` from the operation (its
    /// status, or `created`), `transaction.<status>` from the transaction, `work_item.<change>`
    /// from the work item.
    Rebuilt {
        id: EventId,
        suffix: String,
    },
    Event {
        event: Event,
    },
    /// An audit entry of the entity's move to where it now is, for the reason it records:
    /// rebuilt from its `action` and the status it left.
    RebuiltAudit {
        sequence: String,
        action: String,
        from: Option<String>,
    },
    Audit {
        sequence: String,
        entry: AuditEntry,
    },
    /// The entries of the operations' lookup the entity makes, rebuilt from it.
    Findings,
}

/// The entity an outbox rides on.
enum Carrier<'a> {
    Operation(&'a Operation),
    Transaction(&'a Transaction),
    WorkItem(&'a WorkItem),
}

impl Carrier<'_> {
    fn of(write: &Write) -> Option<Carrier<'_>> {
        match write {
            Write::InsertOperation(op) | Write::UpdateOperation(op) => Some(Carrier::Operation(op)),
            Write::InsertTransaction(t) | Write::UpdateTransaction(t) => Some(Carrier::Transaction(t)),
            Write::InsertWorkItem(item) | Write::UpdateWorkItem(item) => Some(Carrier::WorkItem(item)),
            _ => None,
        }
    }

    /// A work item carries an outbox only where no operation or transaction changes with it:
    /// theirs are the lifecycle's, and the item's events ride on them whole.
    fn is_work_item(&self) -> bool {
        matches!(self, Carrier::WorkItem(_))
    }

    /// The outbox's entry for `event`: by id alone if this entity rebuilds it exactly.
    fn entry_for(&self, event: &Event) -> Entry {
        let suffix = match self {
            Carrier::Operation(_) => event.kind.strip_prefix("operation."),
            Carrier::Transaction(_) => event.kind.strip_prefix("transaction."),
            Carrier::WorkItem(_) => event.kind.strip_prefix("work_item."),
        };
        if let Some(suffix) = suffix {
            let rebuilt = rebuild(self, &event.id, suffix);
            if rebuilt.as_ref() == Some(event) {
                return Entry::Rebuilt {
                    id: event.id.clone(),
                    suffix: suffix.to_owned(),
                };
            }
        }
        Entry::Event { event: event.clone() }
    }
}

impl Carrier<'_> {
    /// The lookup's entries this entity makes, when its write makes any
    /// ([`super::finding_items`]: a new operation, a submitted transaction).
    fn findings(&self) -> Vec<Item> {
        let findings = match self {
            Carrier::Operation(op) => op.findings(),
            Carrier::Transaction(t) => t.finding().into_iter().collect(),
            Carrier::WorkItem(_) => vec![],
        };
        findings.iter().map(super::writes::finding_item).collect()
    }

    /// The outbox's entry for `entry`: by its action and the status it left alone if this
    /// entity rebuilds it exactly.
    fn audit_entry_for(&self, entry: &AuditEntry, sequence: String) -> Entry {
        let rebuilt = rebuild_audit(self, &entry.action, entry.from.as_deref());
        if &rebuilt == entry {
            return Entry::RebuiltAudit {
                sequence,
                action: entry.action.clone(),
                from: entry.from.clone(),
            };
        }
        Entry::Audit {
            sequence,
            entry: entry.clone(),
        }
    }
}

fn rebuild_audit(carrier: &Carrier, action: &str, from: Option<&str>) -> AuditEntry {
    match carrier {
        Carrier::Operation(op) => AuditEntry::new("operation", &op.id, action, op.cause.clone())
            .moving(from, op.status.as_str())
            .of_operation(&op.id),
        Carrier::Transaction(t) => AuditEntry::new("transaction", &t.id, action, t.cause.clone())
            .moving(from, t.status.as_str())
            .of_operation(&t.operation_id),
        Carrier::WorkItem(item) => {
            let entry =
                AuditEntry::new("work_item", &item.id, action, item.cause.clone()).moving(from, item.status.as_str());
            match item.subject.kind {
                SubjectType::Operation => entry.of_operation(&item.subject.id),
                _ => entry,
            }
        }
    }
}

fn rebuild(carrier: &Carrier, id: &EventId, suffix: &str) -> Option<Event> {
    match carrier {
        Carrier::Operation(op) => Some(Event::of_operation(id.clone(), suffix, op)),
        Carrier::Transaction(t) => (t.status.as_str() == suffix).then(|| Event::of_transaction(id.clone(), t)),
        Carrier::WorkItem(item) => Some(Event::of_work_item(id.clone(), suffix, item)),
    }
}

/// A changeset taken apart for the outbox: the writes that must land together (with the
/// carrier among them), and the events and audit entries that follow.
pub(super) struct Split<'a> {
    essential: Vec<&'a Write>,
    /// Where the carrier is among the essential writes, and what it is.
    carrier: (usize, Carrier<'a>),
    derived: Vec<&'a Write>,
}

impl Split<'_> {
    /// `None` unless the changeset changes exactly one operation or transaction, or else
    /// exactly one work item, and records events or audit entries: the rest keep one
    /// transaction for everything.
    pub(super) fn of(changes: &Changeset) -> Option<Split<'_>> {
        let (derived, essential): (Vec<&Write>, Vec<&Write>) = changes
            .writes
            .iter()
            .partition(|w| matches!(w, Write::Event(_) | Write::Audit(_)));
        let (items, entities): (Vec<_>, Vec<_>) = essential
            .iter()
            .enumerate()
            .filter_map(|(at, w)| Carrier::of(w).map(|c| (at, c)))
            .partition(|(_, c)| c.is_work_item());
        let mut carriers = if entities.is_empty() { items } else { entities }.into_iter();
        let carrier = carriers.next()?;
        if carriers.next().is_some() || derived.is_empty() {
            return None;
        }
        Some(Split {
            essential,
            carrier,
            derived,
        })
    }
}

impl<'a> Split<'a> {
    /// When what must land is a new operation or transaction and the write taking an
    /// idempotency key: the key's claim and response, and the split of the entity alone,
    /// written key first ([`super::key_first`]). Any other split comes back as it was.
    pub(super) fn key_first(self) -> Result<(KeyToTake<'a>, Split<'a>), Split<'a>> {
        let key = match self.essential.as_slice() {
            [Write::TakeIdempotency { claim, response }, Write::InsertOperation(_) | Write::InsertTransaction(_)]
            | [Write::InsertOperation(_) | Write::InsertTransaction(_), Write::TakeIdempotency { claim, response }] => {
                KeyToTake { claim, response }
            }
            _ => return Err(self),
        };
        let entity_alone = Split {
            essential: self
                .essential
                .into_iter()
                .filter(|w| Carrier::of(w).is_some())
                .collect(),
            carrier: (0, self.carrier.1),
            derived: self.derived,
        };
        Ok((key, entity_alone))
    }

    /// The primary key of the entity that carries the outbox.
    pub(super) fn carrier_key(&self) -> keys::Primary {
        match &self.carrier.1 {
            Carrier::Operation(op) => keys::operation(&op.id),
            Carrier::Transaction(t) => keys::transaction(&t.id),
            Carrier::WorkItem(item) => keys::work_item(&item.id),
        }
    }
}

/// An idempotency key a create takes: its claim and the response it completes it with.
pub(super) struct KeyToTake<'a> {
    pub claim: &'a IdempotencyClaim,
    pub response: &'a StoredResponse,
}

/// The record of an item carrying an outbox, as the table's stream hands it over.
#[derive(Debug, Clone)]
pub struct OutboxRecord {
    /// The item's `entity`.
    pub entity: String,
    /// The item's document, as JSON.
    pub doc: String,
    /// The item's `outbox` attribute.
    pub outbox: Vec<u8>,
}

impl DynamoStore {
    /// Commits a split changeset: the essential writes (the carrier with its outbox), then the
    /// events and audit entries. A failure after the first write is not the caller's: the
    /// change happened, and the stream finishes what is left.
    pub(super) async fn commit_with_outbox(&self, split: Split<'_>) -> Result<(), StoreError> {
        let (carrier_at, carrier) = &split.carrier;
        let mut entries = vec![];
        let mut derived = vec![];
        for write in &split.derived {
            match write {
                Write::Event(event) => {
                    entries.push(carrier.entry_for(event));
                    derived.push(self.event_item(event));
                }
                Write::Audit(entry) => {
                    let sequence = self.sort_keys.new_id(IdKind::Event);
                    derived.push(Self::audit_item_at(entry, &sequence));
                    entries.push(carrier.audit_entry_for(entry, sequence));
                }
                _ => unreachable!("only events and audit entries are derived"),
            }
        }
        // A new operation's values, or a submission's rail reference: not every write of them.
        let findings = super::finding_items(&split.essential);
        if !findings.is_empty() {
            entries.push(Entry::Findings);
        }
        let outbox = encode(&entries);
        if outbox.as_b().map_or(0, |b| b.as_ref().len()) > OUTBOX_LIMIT {
            // Events the entity does not rebuild (a create that failed for want of funds, say,
            // whose earlier events show it before) would grow the entity's item by their
            // documents, up to past DynamoDB's 400 KB: written in the transaction instead.
            let all: Vec<&Write> = split.essential.iter().chain(&split.derived).copied().collect();
            return self.commit_finding(self.changeset_items(&all), findings).await;
        }
        let mut outbox = Some(outbox);
        let mut items = vec![];
        for (position, write) in split.essential.iter().enumerate() {
            let mut written = self.write(write);
            if position == *carrier_at {
                let put = written[0].put.as_mut().expect("an entity is put");
                put.item.insert("outbox".into(), outbox.take().expect("one carrier"));
            }
            items.extend(written);
        }
        items.extend(self.board_counters(&split.essential));
        self.commit_items(items).await?;
        derived.extend(findings);
        let keep = self.faults.derived_kept();
        let derived = match keep {
            usize::MAX => derived,
            keep => derived.into_iter().take(keep).collect(),
        };
        if let Err(error) = self.put_all(derived).await {
            tracing::warn!(%error, "events and audit entries left to the outbox's stream consumer");
        }
        Ok(())
    }

    /// Writes what `record`'s outbox holds and the table lacks; answers how many it wrote.
    /// What is already there is left alone, so a record handled twice writes nothing more.
    pub async fn complete_outbox(&self, record: &OutboxRecord) -> Result<usize, StoreError> {
        let json = documents::inflate(&record.outbox).map_err(unavailable)?;
        let entries: Vec<Entry> = serde_json::from_str(&json).map_err(unavailable)?;
        let operation: Operation;
        let transaction: Transaction;
        let work_item: WorkItem;
        let carrier = match record.entity.as_str() {
            "operation" => {
                operation = serde_json::from_str(&record.doc).map_err(unavailable)?;
                Carrier::Operation(&operation)
            }
            "transaction" => {
                transaction = serde_json::from_str(&record.doc).map_err(unavailable)?;
                Carrier::Transaction(&transaction)
            }
            "work_item" => {
                work_item = serde_json::from_str(&record.doc).map_err(unavailable)?;
                Carrier::WorkItem(&work_item)
            }
            other => return Err(unavailable(format!("an outbox on an item of {other}"))),
        };
        let mut items = vec![];
        for entry in &entries {
            items.extend(self.entry_items(entry, &carrier)?);
        }
        let keys: Vec<keys::Primary> = items.iter().filter_map(primary_of).collect();
        // An eventually consistent read is enough: one that misses what the writer wrote a
        // moment ago writes the same item again, which changes nothing, and the event
        // consumers take inserts only (a write unit, now and then, where a strongly consistent
        // read would cost twice the reads of every record).
        let found = self.items_by_key_read(&keys, false).await?;
        let missing: Vec<Item> = items
            .into_iter()
            .filter(|item| primary_of(item).is_some_and(|key| !found.contains_key(&key)))
            .collect();
        let written = missing.len();
        self.put_all(missing).await?;
        Ok(written)
    }

    /// The items an outbox entry stands for. A record whose entity no longer rebuilds an event
    /// its outbox names (a damaged record: the two are written together) is an error for the
    /// batch to report, not a panic.
    fn entry_items(&self, entry: &Entry, carrier: &Carrier) -> Result<Vec<Item>, StoreError> {
        Ok(vec![match entry {
            Entry::Rebuilt { id, suffix } => {
                let event = rebuild(carrier, id, suffix)
                    .ok_or_else(|| unavailable(format!("the outbox's event {id} is not the entity's {suffix}")))?;
                self.event_item(&event)
            }
            Entry::Event { event } => self.event_item(event),
            Entry::RebuiltAudit { sequence, action, from } => {
                Self::audit_item_at(&rebuild_audit(carrier, action, from.as_deref()), sequence)
            }
            Entry::Audit { sequence, entry } => Self::audit_item_at(entry, sequence),
            Entry::Findings => return Ok(carrier.findings()),
        }])
    }

    /// Plain puts of whole items (`BatchWriteItem`, 25 a request), each asked again while
    /// DynamoDB leaves it unprocessed.
    pub(super) async fn put_all(&self, items: Vec<Item>) -> Result<(), StoreError> {
        for item in &items {
            let write = TransactWriteItem::builder()
                .put(
                    Put::builder()
                        .table_name(&self.table)
                        .set_item(Some(item.clone()))
                        .build()
                        .expect("an item"),
                )
                .build();
            let (units, image) = self.write_units_of(&write, false);
            self.meter.units(kind_of(&write), units);
            self.meter.single_write();
            if let Some(images) = self.meter.index_images().as_mut() {
                images.extend(image);
            }
        }
        for chunk in items.chunks(25) {
            let mut pending: Vec<WriteRequest> = chunk
                .iter()
                .map(|item| {
                    let put = PutRequest::builder()
                        .set_item(Some(item.clone()))
                        .build()
                        .expect("an item");
                    WriteRequest::builder().put_request(put).build()
                })
                .collect();
            while !pending.is_empty() {
                self.meter.request();
                let answer = self
                    .client
                    .batch_write_item()
                    .request_items(&self.table, std::mem::take(&mut pending))
                    .send()
                    .await
                    .map_err(sdk_error)?;
                if let Some(left) = answer.unprocessed_items().and_then(|u| u.get(&self.table)) {
                    pending = left.clone();
                }
            }
        }
        Ok(())
    }
}

/// The `outbox` attribute: the entries' JSON, deflated like a document (the stream consumer's
/// filter matches on a binary `outbox`).
fn encode(entries: &[Entry]) -> AttributeValue {
    let json = serde_json::to_string(entries).expect("entries always serialize");
    AttributeValue::B(aws_sdk_dynamodb::primitives::Blob::new(documents::deflate(
        json.as_bytes(),
    )))
}
