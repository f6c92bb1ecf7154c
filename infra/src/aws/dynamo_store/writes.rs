//! How each write of a changeset becomes DynamoDB items: the entity's item with its index
//! keys, its condition, and the counters and balances it moves.

use super::keys;
use super::*;
use aws_sdk_dynamodb::types::{AttributeValue, Delete, Put, TransactWriteItem, Update};
use ops_domain::desk::board::{column_bucket, queue_bucket};
use ops_domain::desk::{WorkItem, WorkItemStatus};
use ops_domain::event::Event;
use ops_domain::files::File;
use ops_domain::ids::{IdGenerator, IdKind};
use ops_domain::ledger::Movement;
use ops_domain::operations::{Operation, OperationStatus};
use ops_domain::ports::{AuditEntry, Write};
use ops_domain::schedules::{Occurrence, OccurrenceStatus, Schedule, ScheduleStatus};
use ops_domain::transactions::Transaction;
use ops_domain::webhooks::EndpointStatus;
use std::collections::HashMap;

impl DynamoStore {
    pub(super) fn put(
        &self,
        item: Item,
        condition: Option<&str>,
        values: Vec<(&str, AttributeValue)>,
    ) -> TransactWriteItem {
        let mut put = Put::builder().table_name(&self.table).set_item(Some(item));
        if let Some(condition) = condition {
            put = put.condition_expression(condition);
        }
        for (k, v) in values {
            put = put.expression_attribute_values(k, v);
        }
        TransactWriteItem::builder()
            .put(put.build().expect("table and item set"))
            .build()
    }

    pub(super) fn versioned(&self, item: Item, version: u64) -> TransactWriteItem {
        match version {
            1 => self.put(item, Some("attribute_not_exists(PK)"), vec![]),
            v => self.put(item, Some("version = :previous"), vec![(":previous", n(v - 1))]),
        }
    }

    /// As [`Self::versioned`], for an entity whose items were once stored without a version:
    /// such an item is version 1.
    pub(super) fn versioned_since_unversioned(&self, item: Item, version: u64) -> TransactWriteItem {
        match version {
            2 => {
                let legacy = "version = :previous OR (attribute_exists(PK) AND attribute_not_exists(version))";
                self.put(item, Some(legacy), vec![(":previous", n(1))])
            }
            v => self.versioned(item, v),
        }
    }

    pub(super) fn audit_item(&self, entry: &AuditEntry) -> Item {
        Self::audit_item_at(entry, &self.sort_keys.new_id(IdKind::Event))
    }

    pub(super) fn audit_item_at(entry: &AuditEntry, sequence: &str) -> Item {
        let key = keys::audit(entry.operation_id.as_deref(), &entry.entity_id, sequence);
        keyed(key, vec![("entity", s("audit")), ("doc", doc(entry))])
    }

    pub(super) fn event_item(&self, e: &Event) -> Item {
        keyed(
            keys::event(&e.id),
            vec![
                // Stream consumers filter on this attribute.
                ("entity", s("event")),
                ("doc", doc(e)),
                ("type", s(&e.kind)),
                ("GSI1PK", s(keys::events_of(&e.customer_id))),
                ("GSI1SK", s(&e.id)),
            ],
        )
    }

    pub(super) fn operation_item(op: &Operation) -> Item {
        keyed(
            keys::operation(&op.id),
            vec![
                ("entity", s("operation")),
                ("doc", doc(op)),
                ("version", n(op.version)),
                ("GSI1PK", s(keys::operations_of(&op.customer_id))),
                ("GSI1SK", s(&op.id)),
                ("GSI2PK", s(keys::operations_of_in(&op.customer_id, op.status))),
                ("GSI2SK", s(&op.id)),
                ("GSI3PK", s(keys::all_operations_shard(&op.id))),
                ("GSI3SK", s(&op.id)),
                ("GSI4PK", s(keys::operations_in_shard(op.status, &op.id))),
                ("GSI4SK", s(&op.id)),
                ("type", s(op.kind.as_str())),
            ],
        )
    }

    pub(super) fn transaction_item(t: &Transaction) -> Item {
        let mut item = keyed(
            keys::transaction(&t.id),
            vec![("entity", s("transaction")), ("doc", doc(t)), ("version", n(t.version))],
        );
        if let Some(due) = t.next_poll_at {
            item.insert("GSI2PK".into(), s(keys::poll_shard(&t.id)));
            item.insert("GSI2SK".into(), s(keys::poll_sort(due, &t.id)));
        }
        if let Some(confirmed) = t.confirmed_at {
            item.insert("GSI3PK".into(), s(keys::confirmed_on(&t.rail, confirmed.date())));
            item.insert("GSI3SK".into(), s(keys::confirmed_sort(confirmed, &t.id)));
        }
        // Sparse: listed only while its status is watched, so a payout that runs well writes
        // no entry here.
        if t.status.is_watched() {
            let status = t.status.as_str();
            item.insert("GSI1PK".into(), s(keys::transactions_of_in(&t.customer_id, status)));
            item.insert("GSI1SK".into(), s(&t.id));
            item.insert("GSI4PK".into(), s(keys::transactions_in_shard(status, &t.id)));
            item.insert("GSI4SK".into(), s(&t.id));
        }
        item
    }

    /// A schedule: in its customer's and the platform's lists unless deleted, and in the
    /// due index while active.
    /// An occurrence's item, with whether it made its operation (what a backfill's condition
    /// reads).
    fn occurrence_item(occurrence: &Occurrence) -> Item {
        keyed(
            keys::occurrence(&occurrence.schedule_id, occurrence.scheduled_at),
            vec![
                ("entity", s("occurrence")),
                (
                    "made",
                    AttributeValue::Bool(occurrence.status == OccurrenceStatus::Created),
                ),
                ("doc", doc(occurrence)),
            ],
        )
    }

    pub(super) fn schedule_item(schedule: &Schedule) -> Item {
        let mut item = keyed(
            keys::schedule(&schedule.id),
            vec![
                ("entity", s("schedule")),
                ("doc", doc(schedule)),
                ("version", n(schedule.version)),
            ],
        );
        if schedule.is_visible() {
            item.insert("GSI1PK".into(), s(keys::schedules_of(&schedule.customer_id)));
            item.insert("GSI1SK".into(), s(&schedule.id));
            item.insert("GSI3PK".into(), s(keys::all_schedules_shard(&schedule.id)));
            item.insert("GSI3SK".into(), s(&schedule.id));
        }
        if let (ScheduleStatus::Active, Some(due)) = (schedule.status, schedule.next_run_at) {
            item.insert("GSI2PK".into(), s(keys::schedule_due_shard(&schedule.id)));
            item.insert("GSI2SK".into(), s(keys::poll_sort(due, &schedule.id)));
        }
        item
    }

    /// A file, in its customer's and the platform's lists.
    pub(super) fn file_item(file: &File) -> Item {
        keyed(
            keys::file(&file.id),
            vec![
                ("entity", s("file")),
                ("doc", doc(file)),
                ("version", n(file.version)),
                ("GSI1PK", s(keys::files_of(&file.customer_id))),
                ("GSI1SK", s(&file.id)),
                ("GSI3PK", s(keys::all_files_shard(&file.id))),
                ("GSI3SK", s(&file.id)),
            ],
        )
    }

    /// A movement, in the movement lists of the account it debits (GSI1) and credits (GSI2).
    pub(super) fn movement_item(movement: &Movement) -> Item {
        keyed(
            keys::movement(&movement.id),
            vec![
                ("entity", s("movement")),
                ("doc", doc(movement)),
                ("version", n(movement.version)),
                ("GSI1PK", s(keys::movements_of(movement.debited()))),
                ("GSI1SK", s(&movement.id)),
                ("GSI2PK", s(keys::movements_of(movement.credited()))),
                ("GSI2SK", s(&movement.id)),
            ],
        )
    }

    /// A work item, in its queue's and its customer's lists for its status (GSI1, GSI2) and
    /// its holder's (GSI3), each sorted by due time.
    pub(super) fn work_item_item(item: &WorkItem) -> Item {
        let (queue, status) = (item.queue.as_str(), item.status.as_str());
        let sort = keys::poll_sort(item.due_at, &item.id);
        let mut attributes = vec![
            ("entity", s("work_item")),
            ("doc", doc(item)),
            ("version", n(item.version)),
            ("queue", s(queue)),
            ("status", s(status)),
            ("customer_id", s(&item.customer_id)),
            ("GSI1PK", s(keys::work_items_shard(queue, status, &item.id))),
            ("GSI1SK", s(&sort)),
            ("GSI2PK", s(keys::work_items_of(&item.customer_id, queue, status))),
            ("GSI2SK", s(&sort)),
        ];
        if let Some(assignee) = &item.assignee {
            attributes.push(("GSI3PK", s(keys::work_items_held_by(assignee))));
            attributes.push(("GSI3SK", s(&sort)));
        }
        keyed(keys::work_item(&item.id), attributes)
    }

    /// The items a changeset writes: each write's, then its board counters'.
    pub(super) fn changeset_items(&self, writes: &[&Write]) -> Vec<TransactWriteItem> {
        let mut items: Vec<TransactWriteItem> = writes.iter().flat_map(|w| self.write(w)).collect();
        items.extend(self.board_counters(writes));
        items
    }

    /// The board counters a changeset changes, one update of each counter item it reaches: an
    /// operation's move out of one column and into the next, and each work item opened or
    /// done. A work item's queue is counted in the item its customer's move in the same
    /// changeset updates (its operation's move, from the same event), else in the customer's
    /// item without a currency: the board adds a queue's counts up from every item, so an
    /// item opened or closed with its subject's move takes no update of its own.
    pub(super) fn board_counters<'a>(&self, writes: &[&'a Write]) -> Vec<TransactWriteItem> {
        let moved: HashMap<&'a str, &'a str> = writes
            .iter()
            .filter_map(|write| match write {
                Write::MoveOnBoard(moved) => Some((moved.entry.customer_id.as_str(), moved.entry.currency.code())),
                _ => None,
            })
            .collect();
        // A work item's queue, in the counters its customer's move changes (else without currency).
        let queue = |item: &'a WorkItem, sign: i64| -> Vec<BoardChange<'a>> {
            let customer = item.customer_id.as_str();
            let currency = moved.get(customer).copied().unwrap_or("");
            vec![(customer, currency, queue_bucket(item.queue), sign, 0)]
        };
        // (customer, currency, bucket, count, amount) for each change, then summed per item.
        let changes = writes.iter().flat_map(|write| match write {
            Write::MoveOnBoard(moved) => {
                let entry = &moved.entry;
                [(moved.from, -1), (entry.column, 1)]
                    .into_iter()
                    .filter_map(|(column, sign)| {
                        let bucket = column_bucket(column?);
                        let customer = entry.customer_id.as_str();
                        Some((
                            customer,
                            entry.currency.code(),
                            bucket,
                            sign,
                            i128::from(sign * entry.amount),
                        ))
                    })
                    .collect()
            }
            Write::InsertWorkItem(item) => queue(item, 1),
            // Done is final: the one update that reaches it takes the item off the count.
            Write::UpdateWorkItem(item) if item.status == WorkItemStatus::Done => queue(item, -1),
            _ => vec![],
        });
        type BucketSums = std::collections::BTreeMap<String, (i64, i128)>;
        let mut counters: std::collections::BTreeMap<(&str, &str), BucketSums> = Default::default();
        for (customer, currency, bucket, count, amount) in changes {
            let counter = counters
                .entry((customer, currency))
                .or_default()
                .entry(bucket)
                .or_default();
            *counter = (counter.0 + count, counter.1 + amount);
        }
        counters
            .into_iter()
            .filter_map(|((customer, currency), changes)| {
                let changes: Vec<(String, i64, i128)> = changes
                    .into_iter()
                    .filter(|(_, (count, amount))| *count != 0 || *amount != 0)
                    .map(|(bucket, (count, amount))| (bucket, count, amount))
                    .collect();
                self.count_on_board(customer, currency, &changes)
            })
            .collect()
    }

    /// Adds `changes` (bucket, count, amount) in `currency` to the board counters of
    /// `customer`: one update of its item (the platform's board adds up every customer's).
    pub(super) fn count_on_board(
        &self,
        customer: &str,
        currency: &str,
        changes: &[(String, i64, i128)],
    ) -> Option<TransactWriteItem> {
        // An update must add something.
        if changes.is_empty() {
            return None;
        }
        let mut update = Update::builder()
            .table_name(&self.table)
            .set_key(Some(item(key_item(keys::board_counters_item(customer, currency)))))
            .expression_attribute_names("#entity", "entity")
            .expression_attribute_names("#currency", "currency")
            .expression_attribute_values(":entity", s("board_counter"))
            .expression_attribute_values(":currency", s(currency));
        let mut additions = vec![];
        for (i, (bucket, count, amount)) in changes.iter().enumerate() {
            additions.push(format!("#n{i} :n{i}"));
            update = update
                .expression_attribute_names(format!("#n{i}"), format!("{COUNT_PREFIX}{bucket}"))
                .expression_attribute_values(format!(":n{i}"), n(*count));
            if *amount != 0 {
                additions.push(format!("#a{i} :a{i}"));
                update = update
                    .expression_attribute_names(format!("#a{i}"), format!("{AMOUNT_PREFIX}{bucket}"))
                    .expression_attribute_values(format!(":a{i}"), n(*amount));
            }
        }
        let update = update
            .update_expression(format!(
                "SET #entity = :entity, #currency = :currency ADD {}",
                additions.join(", ")
            ))
            .build()
            .expect("counter update");
        Some(TransactWriteItem::builder().update(update).build())
    }

    pub(super) fn write(&self, write: &Write) -> Vec<TransactWriteItem> {
        match write {
            Write::InsertCustomer(c) => vec![self.put(customer_item(c), Some("attribute_not_exists(PK)"), vec![])],
            // Rewritten whole, index entry included: a customer made before the list's index
            // joins it once it is next changed.
            Write::UpdateCustomer(c) => vec![self.versioned_since_unversioned(customer_item(c), c.version)],
            Write::InsertUser(u) => {
                let claim = keyed(
                    keys::user_email(&u.customer_id, &u.email_key()),
                    vec![("entity", s("user_email")), ("user_id", s(&u.id))],
                );
                vec![
                    self.put(user_item(u), Some("attribute_not_exists(PK)"), vec![]),
                    self.put(claim, Some("attribute_not_exists(PK)"), vec![]),
                ]
            }
            Write::UpdateUser(u) => vec![self.versioned_since_unversioned(user_item(u), u.version)],
            Write::PutApiKey(k) => {
                let body = doc(k);
                let by_id = keyed(
                    keys::api_key(&k.id),
                    vec![
                        ("entity", s("api_key")),
                        ("doc", body.clone()),
                        ("GSI1PK", s(keys::keys_of(k.customer_id.as_deref()))),
                        ("GSI1SK", s(&k.id)),
                        ("version", n(k.version)),
                    ],
                );
                let by_hash = keyed(
                    keys::api_key_by_hash(&k.secret_hash),
                    vec![("entity", s("api_key_hash")), ("doc", body), ("key_id", s(&k.id))],
                );
                // A secret's hash stands for one key only: a second key under the same hash
                // (a collision, or a bug) is refused rather than let it take the first one over.
                // (Items written before `key_id` existed are taken over by their own key.)
                let unique = self.put(
                    by_hash,
                    Some("attribute_not_exists(PK) OR key_id = :key_id OR attribute_not_exists(key_id)"),
                    vec![(":key_id", s(&k.id))],
                );
                vec![self.versioned_since_unversioned(by_id, k.version), unique]
            }
            Write::InsertOperation(op) => {
                let mut writes = vec![self.put(Self::operation_item(op), Some("attribute_not_exists(PK)"), vec![])];
                if let (OperationStatus::PendingApproval, Some(expires_at)) = (op.status, op.approval_expires_at) {
                    let marker = keyed(
                        keys::approval_expiry(&op.id),
                        vec![
                            ("entity", s("approval_expiry")),
                            ("GSI2PK", s(keys::approval_expiry_shard(&op.id))),
                            ("GSI2SK", s(keys::poll_sort(expires_at, &op.id))),
                        ],
                    );
                    writes.push(self.put(marker, None, vec![]));
                }
                writes
            }
            Write::UpdateOperation(op) => {
                let mut writes = vec![self.versioned(Self::operation_item(op), op.version)];
                // Decided, cancelled or expired: no longer waiting, so off the expiry timer's
                // list. (Later changes find no marker to delete, and delete nothing.)
                if op.approval_expires_at.is_some() && op.status.left_pending_approval() {
                    let delete = Delete::builder()
                        .table_name(&self.table)
                        .set_key(Some(item(key_item(keys::approval_expiry(&op.id)))))
                        .build()
                        .expect("table and key set");
                    writes.push(TransactWriteItem::builder().delete(delete).build());
                }
                writes
            }
            Write::PutWorkflow(w) => {
                let it = keyed(
                    keys::workflow(&w.owner, &w.name),
                    vec![("entity", s("workflow")), ("doc", doc(w)), ("version", n(w.version))],
                );
                vec![self.versioned(it, w.version)]
            }
            Write::InsertTransaction(t) => {
                vec![self.put(Self::transaction_item(t), Some("attribute_not_exists(PK)"), vec![])]
            }
            Write::UpdateTransaction(t) => vec![self.versioned(Self::transaction_item(t), t.version)],
            Write::Event(e) => vec![self.put(self.event_item(e), Some("attribute_not_exists(PK)"), vec![])],
            Write::PutWebhookEndpoint(w) => {
                let body = doc(w);
                let mut attributes = vec![
                    ("entity", s("webhook_endpoint")),
                    ("doc", body),
                    ("version", n(w.version)),
                ];
                // Sparse: a deleted endpoint leaves its owner's list, which every event's
                // dispatch reads; it is still read by its id.
                if w.status != EndpointStatus::Deleted {
                    attributes.extend([
                        ("GSI1PK", s(keys::endpoints_of(w.customer_id.as_deref()))),
                        ("GSI1SK", s(&w.id)),
                    ]);
                }
                let it = keyed(keys::webhook_endpoint(&w.id), attributes);
                vec![self.versioned(it, w.version)]
            }
            Write::PutEndpointRoster(roster) => {
                let it = keyed(
                    keys::endpoint_roster(roster.owner.as_deref()),
                    vec![
                        ("entity", s("endpoint_roster")),
                        ("doc", doc(roster)),
                        ("version", n(roster.version)),
                    ],
                );
                vec![self.versioned(it, roster.version)]
            }
            Write::PutEndpointHealth(health) => {
                let it = keyed(
                    keys::endpoint_health(&health.endpoint_id),
                    vec![
                        ("entity", s("endpoint_health")),
                        ("doc", doc(health)),
                        ("version", n(health.version)),
                    ],
                );
                vec![self.versioned(it, health.version)]
            }
            Write::PutDeliveryLine(line) => {
                let it = keyed(
                    keys::delivery_line(&line.endpoint_id, &line.operation_id),
                    vec![
                        ("entity", s("delivery_line")),
                        ("doc", doc(line)),
                        ("version", n(line.version)),
                    ],
                );
                vec![self.versioned(it, line.version)]
            }
            Write::InsertDelivery(d) | Write::UpdateDelivery(d) => {
                // Its operation's list holds its event's deliveries too (by the event's prefix).
                let (list, order) = match &d.operation_id {
                    Some(operation) => (
                        keys::deliveries_of_operation(operation),
                        keys::failed_delivery_order(&d.event_id, &d.id),
                    ),
                    None => (keys::deliveries_of(&d.event_id), d.id.to_string()),
                };
                let mut attributes = vec![
                    ("entity", s("delivery")),
                    ("doc", doc(d)),
                    ("version", n(d.version)),
                    ("GSI1PK", s(list)),
                    ("GSI1SK", s(order)),
                ];
                // Sparse: only a failure awaiting its follow-up is indexed, so a delivered
                // webhook writes no second index entry.
                if d.awaits_follow_up() {
                    attributes.extend([
                        ("GSI2PK", s(keys::failed_deliveries_of(&d.endpoint_id))),
                        ("GSI2SK", s(keys::failed_delivery_order(&d.event_id, &d.id))),
                    ]);
                }
                vec![self.versioned(keyed(keys::delivery(&d.id), attributes), d.version)]
            }
            Write::PutSchedule(schedule) => vec![self.versioned(Self::schedule_item(schedule), schedule.version)],
            Write::InsertOccurrence(occurrence) => {
                vec![self.put(
                    Self::occurrence_item(occurrence),
                    Some("attribute_not_exists(PK)"),
                    vec![],
                )]
            }
            // `made` is kept from when backfills began; a record older than it is never replaced.
            Write::BackfillOccurrence(occurrence) => vec![self.put(
                Self::occurrence_item(occurrence),
                Some("attribute_not_exists(PK) OR made = :nothing_made"),
                vec![(":nothing_made", AttributeValue::Bool(false))],
            )],
            Write::Audit(entry) => vec![self.put(self.audit_item(entry), Some("attribute_not_exists(PK)"), vec![])],
            Write::InsertFile { file, unique_bytes } => {
                let digest = keyed(
                    keys::file_digest(&file.customer_id, &file.duplicate_key()),
                    vec![("entity", s("file_digest")), ("file_id", s(&file.id))],
                );
                let digest_condition = unique_bytes.then_some("attribute_not_exists(PK)");
                vec![
                    self.versioned(Self::file_item(file), file.version),
                    self.put(digest, digest_condition, vec![]),
                ]
            }
            Write::UpdateFile(file) => vec![self.versioned(Self::file_item(file), file.version)],
            Write::InsertReconciliation(reconciliation) => {
                let sort = keys::reconciliation_sort(reconciliation.created_at, reconciliation.id.as_str());
                let it = keyed(
                    keys::reconciliation(&reconciliation.id),
                    vec![
                        ("entity", s("reconciliation")),
                        ("doc", doc(reconciliation)),
                        ("version", n(reconciliation.version)),
                        ("GSI1PK", s(keys::reconciliations_of(&reconciliation.rail))),
                        ("GSI1SK", s(&sort)),
                        ("GSI3PK", s(keys::ALL_RECONCILIATIONS)),
                        ("GSI3SK", s(&sort)),
                    ],
                );
                vec![self.put(it, Some("attribute_not_exists(PK)"), vec![])]
            }
            Write::PutPayoutLimits(limits) => vec![self.put_limits(limits)],
            Write::UseLimit(used) => vec![self.use_limit(used)],
            Write::RememberPayee(payee) => vec![self.remember_payee(payee)],
            Write::PutCalendar(calendar) => {
                let it = keyed(
                    keys::calendar(&calendar.id),
                    vec![
                        ("entity", s("calendar")),
                        ("doc", doc(calendar)),
                        ("version", n(calendar.version)),
                    ],
                );
                vec![self.versioned(it, calendar.version)]
            }
            Write::PutBankFile(file) => {
                let it = keyed(
                    keys::bank_file(&file.id),
                    vec![
                        ("entity", s("bank_file")),
                        ("doc", doc(file)),
                        ("version", n(file.version)),
                    ],
                );
                vec![self.versioned(it, file.version)]
            }
            Write::PutRailCutoffs(cutoffs) => {
                let it = keyed(
                    keys::rail_cutoffs(&cutoffs.rail, cutoffs.environment.as_str()),
                    vec![
                        ("entity", s("rail_cutoffs")),
                        ("doc", doc(cutoffs)),
                        ("version", n(cutoffs.version)),
                    ],
                );
                vec![self.versioned(it, cutoffs.version)]
            }
            Write::PutReconciliationRules(rules) => {
                let it = keyed(
                    keys::reconciliation_rules(&rules.rail, rules.environment.as_str()),
                    vec![
                        ("entity", s("reconciliation_rules")),
                        ("doc", doc(rules)),
                        ("version", n(rules.version)),
                    ],
                );
                vec![self.versioned(it, rules.version)]
            }
            Write::Tally(tally) => vec![self.tally_update(tally)],
            Write::PutReturnSweep(sweep) => {
                let it = keyed(
                    keys::return_sweep(&sweep.rail, sweep.check),
                    vec![("entity", s("return_sweep")), ("doc", doc(sweep))],
                );
                vec![self.put(it, None, vec![])]
            }
            Write::InsertAccount(account) => {
                let owner = account.customer_id.as_deref();
                let currency = account.currency.code();
                let mut attributes = vec![
                    ("entity", s("account")),
                    ("doc", doc(account)),
                    ("available", n(0)),
                    ("GSI1PK", s(keys::accounts_of(owner))),
                    ("GSI1SK", s(&account.id)),
                    ("GSI2PK", s(keys::accounts_of_in(owner, currency))),
                    ("GSI2SK", s(&account.id)),
                    ("GSI3PK", s(keys::all_accounts_shard(&account.id))),
                    ("GSI3SK", s(&account.id)),
                    ("GSI4PK", s(keys::all_accounts_in_shard(currency, &account.id))),
                    ("GSI4SK", s(&account.id)),
                ];
                attributes.extend(BALANCES.map(|name| (name, n(0))));
                let holder = keyed(
                    keys::account_holder(&account.holder(), currency),
                    vec![("entity", s("account_holder")), ("account_id", s(&account.id))],
                );
                vec![
                    self.put(
                        keyed(keys::account(&account.id), attributes),
                        Some("attribute_not_exists(PK)"),
                        vec![],
                    ),
                    self.put(holder, Some("attribute_not_exists(PK)"), vec![]),
                ]
            }
            Write::InsertWorkItem(work_item) => {
                let marker = keyed(
                    keys::open_work_item(work_item.queue.as_str(), &work_item.subject.id),
                    vec![("entity", s("work_item_open")), ("work_item_id", s(&work_item.id))],
                );
                vec![
                    self.put(
                        Self::work_item_item(work_item),
                        Some("attribute_not_exists(PK)"),
                        vec![],
                    ),
                    self.put(marker, Some("attribute_not_exists(PK)"), vec![]),
                ]
            }
            Write::MoveOnBoard(moved) => {
                let entry = &moved.entry;
                let it = keyed(
                    keys::board_entry(&entry.operation_id),
                    vec![
                        ("entity", s("board_entry")),
                        ("doc", doc(entry)),
                        ("version", n(entry.version)),
                    ],
                );
                // Its counters are changed with the changeset's others ([`Self::board_counters`]).
                vec![self.versioned(it, entry.version)]
            }
            Write::UpdateWorkItem(work_item) => {
                let mut writes = vec![self.versioned(Self::work_item_item(work_item), work_item.version)];
                if work_item.status == WorkItemStatus::Done {
                    // Done: the subject may open a new item.
                    let marker = keys::open_work_item(work_item.queue.as_str(), &work_item.subject.id);
                    let delete = Delete::builder()
                        .table_name(&self.table)
                        .set_key(Some(item(key_item(marker))))
                        .condition_expression("work_item_id = :id")
                        .expression_attribute_values(":id", s(&work_item.id))
                        .build()
                        .expect("table and key set");
                    writes.push(TransactWriteItem::builder().delete(delete).build());
                }
                writes
            }
            Write::InsertMovement(movement) => {
                vec![self.put(Self::movement_item(movement), Some("attribute_not_exists(PK)"), vec![])]
            }
            Write::UpdateMovement(movement) => vec![self.versioned(Self::movement_item(movement), movement.version)],
            Write::ChangeBalances(account) => {
                let change = &account.change;
                let mut update = Update::builder()
                    .table_name(&self.table)
                    .set_key(Some(item(key_item(keys::account(&account.account_id)))))
                    .update_expression(
                        "ADD posted :posted, pending_debits :debits, pending_credits :credits, available :available",
                    )
                    .expression_attribute_values(":posted", n(change.posted))
                    .expression_attribute_values(":debits", n(change.pending_debits))
                    .expression_attribute_values(":credits", n(change.pending_credits))
                    .expression_attribute_values(":available", n(change.available()));
                // What the account posted each day, beside its balance (one item, so the
                // transaction takes no more writes): `posted_on_<day>`.
                if change.posted != 0 {
                    update = update
                        .update_expression(
                            "ADD posted :posted, pending_debits :debits, pending_credits :credits, available :available, #day :posted",
                        )
                        .expression_attribute_names("#day", keys::posted_on(account.on));
                }
                update = if account.guard_available {
                    update
                        .condition_expression("attribute_exists(PK) AND available >= :needed")
                        .expression_attribute_values(":needed", n(-change.available()))
                } else {
                    update.condition_expression("attribute_exists(PK)")
                };
                vec![TransactWriteItem::builder()
                    .update(update.build().expect("balance change"))
                    .build()]
            }
            Write::TakeIdempotency { claim, response } => vec![self.take_idempotency(claim, response, vec![])],
            Write::CompleteIdempotency { scope, key, response } => {
                let (name, body) = stored_response(&response.body);
                let update = Update::builder()
                    .table_name(&self.table)
                    .set_key(Some(item(key_item(keys::idempotency(scope, key)))))
                    .update_expression("SET #status = :status, #response = :response")
                    .condition_expression("attribute_exists(PK) AND attribute_not_exists(#status)")
                    .expression_attribute_names("#status", "status")
                    .expression_attribute_names("#response", name)
                    .expression_attribute_values(":status", n(response.status))
                    .expression_attribute_values(":response", body)
                    .build()
                    .expect("complete");
                vec![TransactWriteItem::builder().update(update).build()]
            }
        }
    }
}

/// A change of one board counter: customer, currency, bucket, count, amount.
pub(super) type BoardChange<'a> = (&'a str, &'a str, String, i64, i128);

/// An entry of the operations' lookup: its key and the operation it leads to.
pub(super) fn finding_item(finding: &ops_domain::operations::Finding) -> Item {
    keyed(
        keys::finding(
            finding.by.as_str(),
            &finding.value,
            &finding.customer_id,
            &finding.operation_id,
        ),
        vec![("entity", s("finding")), ("operation_id", s(&finding.operation_id))],
    )
}
