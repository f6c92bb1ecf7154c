//! The domain's store ports (one per area) on the table.

use super::keys;
use super::*;
use crate::page_start;
use async_trait::async_trait;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue};
use ops_domain::access::Environment;
use ops_domain::access::{AccessStore, ApiKey, Customer, CustomerStatus, User};
use ops_domain::approvals::{Workflow, WorkflowOwner, WorkflowStore};
use ops_domain::calendars::{Calendar, CalendarStore, RailCutoffs};
use ops_domain::event::Event;
use ops_domain::files::{File, FileQuery, FileStore};
use ops_domain::history::{HistoryStore, MAX_ENTITY_HISTORY};
use ops_domain::ids::{AccountId, FileId, MovementId, ReconciliationId};
use ops_domain::ids::{
    ApiKeyId, CustomerId, DeliveryId, EventId, OperationId, ScheduleId, TransactionId, UserId, WebhookEndpointId,
};
use ops_domain::ids::{BankFileId, CalendarId};
use ops_domain::ledger::{Account, AccountQuery, LedgerStore, Movement};
use ops_domain::money::Currency;
use ops_domain::operations::{Operation, OperationFind, OperationQuery, OperationStatus, OperationStore};
use ops_domain::ports::{Admission, AuditEntry, Limits, Listed, RateLimiter, StoreError};
use ops_domain::reconciliations::{Reconciliation, ReconciliationQuery, ReconciliationRules, ReconciliationStore};
use ops_domain::schedules::{Occurrence, Schedule, ScheduleQuery, ScheduleStore};
use ops_domain::transactions::{BankFile, BankFileStore};
use ops_domain::transactions::{ReturnSweep, Transaction, TransactionStatus, TransactionStore};
use ops_domain::webhooks::{
    Delivery, DeliveryLine, EndpointHealth, EndpointRoster, EventQuery, WebhookEndpoint, WebhookStore,
};
use time::{Date, OffsetDateTime};

#[async_trait]
impl AccessStore for DynamoStore {
    async fn customer(&self, id: &CustomerId) -> Result<Option<Customer>, StoreError> {
        self.get(keys::customer(id)).await
    }

    async fn customers(
        &self,
        status: Option<CustomerStatus>,
        starting_after: Option<&CustomerId>,
        limit: usize,
    ) -> Result<Vec<Customer>, StoreError> {
        let after = page_start(starting_after.map(|id| id.as_str()));
        match status {
            Some(status) => {
                let partition = Partition::One(keys::customers_in(status.as_str()));
                self.newest_first("GSI2", partition, after, None, limit).await
            }
            None => {
                let partition = Partition::One(keys::CUSTOMERS.to_owned());
                self.newest_first("GSI1", partition, after, None, limit).await
            }
        }
    }

    async fn user(&self, id: &UserId) -> Result<Option<User>, StoreError> {
        self.get(keys::user(id)).await
    }

    async fn api_key(&self, id: &ApiKeyId) -> Result<Option<ApiKey>, StoreError> {
        self.get(keys::api_key(id)).await
    }

    async fn api_key_by_hash(&self, secret_hash: &str) -> Result<Option<ApiKey>, StoreError> {
        self.get(keys::api_key_by_hash(secret_hash)).await
    }

    async fn users_of(
        &self,
        customer_id: &CustomerId,
        starting_after: Option<&UserId>,
        limit: usize,
    ) -> Result<Vec<User>, StoreError> {
        let after = page_start(starting_after.map(|id| id.as_str()));
        let partition = Partition::One(keys::users_of(customer_id));
        self.newest_first("GSI1", partition, after, None, limit).await
    }

    async fn api_keys_of(
        &self,
        customer_id: Option<&CustomerId>,
        starting_after: Option<&ApiKeyId>,
        limit: usize,
    ) -> Result<Vec<ApiKey>, StoreError> {
        let after = page_start(starting_after.map(|id| id.as_str()));
        let partition = Partition::One(keys::keys_of(customer_id.map(|id| id.as_str())));
        self.newest_first("GSI1", partition, after, None, limit).await
    }
}

#[async_trait]
impl OperationStore for DynamoStore {
    async fn operation(&self, id: &OperationId) -> Result<Option<Operation>, StoreError> {
        self.get(keys::operation(id)).await
    }

    async fn operations(&self, query: &OperationQuery) -> Result<Listed<Operation>, StoreError> {
        let after = page_start(query.starting_after.as_deref());
        let (index, partition) = match (&query.customer_id, query.status) {
            // Approved's own list and processing's, for approved: read as shards are.
            (Some(customer), Some(status)) => (
                "GSI2",
                Partition::Sharded(keys::operations_of_in_lists(customer, status)),
            ),
            (Some(customer), None) => ("GSI1", Partition::One(keys::operations_of(customer))),
            (None, Some(status)) => ("GSI4", Partition::Sharded(keys::operations_in(status))),
            (None, None) => ("GSI3", Partition::Sharded(keys::all_operations())),
        };
        let filter = Filter::default()
            .with("ty", "type", query.kind.map(|k| k.as_str()))
            .into_option();
        let from = query.created_from.as_ref().map(|id| id.to_string());
        let shared = query.status.filter(|status| keys::shares_its_list(*status));
        // The amount is in the document only: an amount range is kept from the items read, as
        // a shared status list's own status is.
        let amount_range = query.min_amount.is_some() || query.max_amount.is_some();
        if shared.is_some() || amount_range {
            let keep = |op: &Operation| shared.is_none_or(|status| op.status == status) && query.amount_fits(op);
            return self
                .newest_first_kept(index, partition, after, from, filter, query.limit, keep)
                .await;
        }
        self.newest_first_listed_from(index, partition, after, from, filter, query.limit)
            .await
    }

    async fn approvals_expiring(&self, now: OffsetDateTime, limit: usize) -> Result<Vec<Operation>, StoreError> {
        // The timer's queries of its shards, a constant each round, as the poll's are.
        self.meter.polled(u64::from(SHARDS));
        let due = self.due_entries(keys::approval_expiry_partitions(), now, limit).await?;
        // `<due>#<operation id>`: their operations in one read. One its marker outlived (a
        // write that failed after) is left out.
        let sort_key = |entry: &Item| entry.get("GSI2SK").and_then(|k| k.as_s().ok()).cloned();
        let ids: Vec<OperationId> = due
            .iter()
            .filter_map(|entry| sort_key(entry)?.split_once('#').map(|(_, id)| OperationId::from(id)))
            .collect();
        let keys: Vec<keys::Primary> = ids.iter().map(|id| keys::operation(id)).collect();
        let found = self.items_by_key(&keys).await?;
        let operations: Vec<Operation> = keys
            .iter()
            .filter_map(|key| found.get(key))
            .map(read_doc)
            .collect::<Result<_, _>>()?;
        Ok(operations
            .into_iter()
            .filter(|op| op.status == OperationStatus::PendingApproval)
            .collect())
    }

    async fn find_operations(&self, find: &OperationFind) -> Result<Vec<Operation>, StoreError> {
        let partition = s(keys::findings_of(find.by.as_str(), &find.value));
        let (condition, mut values) = match (&find.customer_id, &find.after) {
            (None, None) => ("PK = :pk", vec![]),
            (Some(customer), None) => (
                "PK = :pk AND begins_with(SK, :customer)",
                vec![(":customer", s(keys::finding_order(customer, "")))],
            ),
            (None, Some((customer, operation))) => (
                "PK = :pk AND SK < :before",
                vec![(":before", s(keys::finding_order(customer, operation)))],
            ),
            // Within the customer's stretch, short of the page's start (left out below).
            (Some(customer), Some((_, operation))) => (
                "PK = :pk AND SK BETWEEN :customer AND :before",
                vec![
                    (":customer", s(keys::finding_order(customer, ""))),
                    (":before", s(keys::finding_order(customer, operation))),
                ],
            ),
        };
        values.push((":pk", partition));
        let entries = self
            .query_entries(None, condition, values, None, true, find.limit + 1)
            .await?;
        let start = find.after.as_ref().map(|(_, operation)| operation.as_str());
        let keys: Vec<keys::Primary> = entries
            .iter()
            .filter_map(|entry| entry.get("operation_id").and_then(|id| id.as_s().ok()))
            .filter(|id| Some(id.as_str()) != start)
            .take(find.limit)
            .map(|id| keys::operation(id))
            .collect();
        let found = self.items_by_key(&keys).await?;
        keys.iter().filter_map(|key| found.get(key)).map(read_doc).collect()
    }

    async fn operation_history(&self, operation_id: &OperationId) -> Result<Vec<AuditEntry>, StoreError> {
        let (partition, entries) = keys::operation_history(operation_id);
        self.query(
            None,
            "PK = :pk AND begins_with(SK, :audit)",
            vec![(":pk", s(partition)), (":audit", s(entries))],
            None,
            false,
            10_000,
        )
        .await
    }
}

#[async_trait]
impl WorkflowStore for DynamoStore {
    async fn workflow(&self, owner: &WorkflowOwner, name: &str) -> Result<Option<Workflow>, StoreError> {
        self.get(keys::workflow(owner, name)).await
    }

    /// One partition per owner, its sort keys the names: a query from after `after`.
    async fn workflows_after(
        &self,
        owner: &WorkflowOwner,
        after: &str,
        limit: usize,
    ) -> Result<Vec<Workflow>, StoreError> {
        let start = keys::workflow(owner, after);
        self.query(
            None,
            "PK = :pk AND SK > :after",
            vec![(":pk", s(start.pk)), (":after", s(start.sk))],
            None,
            false,
            limit,
        )
        .await
    }

    /// One `BatchGetItem` for them all (creating an operation reads the customer's and the
    /// platform's definition of its workflow and the customer's floor).
    async fn workflows(&self, wanted: &[(WorkflowOwner, String)]) -> Result<Vec<Option<Workflow>>, StoreError> {
        let keys: Vec<keys::Primary> = wanted.iter().map(|(owner, name)| keys::workflow(owner, name)).collect();
        let found = self.items_by_key(&keys).await?;
        wanted
            .iter()
            .map(|(owner, name)| found.get(&keys::workflow(owner, name)).map(read_doc).transpose())
            .collect()
    }
}

#[async_trait]
impl TransactionStore for DynamoStore {
    async fn transaction(&self, id: &TransactionId) -> Result<Option<Transaction>, StoreError> {
        self.get(keys::transaction(id)).await
    }

    /// Read by the ids its items name (one `BatchGetItem` per hundred): a transaction is in
    /// no list of its operation's, which would cost an index entry a transaction.
    async fn transactions_of_operation(&self, operation: &Operation) -> Result<Vec<Transaction>, StoreError> {
        let mut ids: Vec<&TransactionId> = operation
            .items
            .iter()
            .filter_map(|i| i.transaction_id.as_ref())
            .collect();
        ids.sort();
        let keys: Vec<keys::Primary> = ids.iter().map(|id| keys::transaction(id)).collect();
        let mut found = self.items_by_key(&keys).await?;
        keys.iter()
            .filter_map(|key| found.remove(key))
            .map(|item| read_doc(&item))
            .collect()
    }

    async fn transactions_in(
        &self,
        status: TransactionStatus,
        customer_id: Option<&CustomerId>,
        starting_after: Option<&TransactionId>,
        limit: usize,
    ) -> Result<Vec<Transaction>, StoreError> {
        let after = page_start(starting_after.map(|id| id.as_str()));
        let (index, partition) = match customer_id {
            Some(customer) => (
                "GSI1",
                Partition::One(keys::transactions_of_in(customer, status.as_str())),
            ),
            None => ("GSI4", Partition::Sharded(keys::transactions_in(status.as_str()))),
        };
        let listed = self.newest_first_listed(index, partition, after, None, limit).await?;
        // An entry the index still held as the transaction moved on is left out.
        Ok(listed
            .items
            .into_iter()
            .filter(|t: &Transaction| t.status == status)
            .collect())
    }

    async fn transactions_due(&self, now: OffsetDateTime, limit: usize) -> Result<Vec<Transaction>, StoreError> {
        self.meter.polled(u64::from(SHARDS));
        self.due(keys::poll_partitions(), now, limit).await
    }

    async fn confirmed_on_rail(&self, rail: &str, from: Date, to: Date) -> Result<Vec<Transaction>, StoreError> {
        let mut found = vec![];
        let mut day = from;
        while day <= to {
            let partition = keys::confirmed_on(rail, day);
            found.extend(
                self.query::<Transaction>(
                    Some("GSI3"),
                    "GSI3PK = :pk",
                    vec![(":pk", s(partition))],
                    None,
                    false,
                    usize::MAX,
                )
                .await?,
            );
            day = day.next_day().unwrap_or(Date::MAX);
            if day == Date::MAX {
                break;
            }
        }
        found.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(found)
    }

    async fn confirmed_between(
        &self,
        rail: &str,
        after: (OffsetDateTime, &TransactionId),
        until: OffsetDateTime,
        limit: usize,
    ) -> Result<Vec<Transaction>, StoreError> {
        let after_sort = keys::confirmed_sort(after.0, after.1);
        let until_sort = keys::confirmed_until(until);
        // A sweep's queries are the poll schedule's, made every round whatever the traffic;
        // reading the items it found is the found transactions'.
        let before = self.meter.requests();
        let mut found = vec![];
        let mut day = after.0.date();
        while day <= until.date() && found.len() < limit {
            // Inclusive bounds: the transaction the sweep stopped at comes back, and is dropped.
            let entries = self
                .query_entries(
                    Some("GSI3"),
                    "GSI3PK = :pk AND GSI3SK BETWEEN :after AND :until",
                    vec![
                        (":pk", s(keys::confirmed_on(rail, day))),
                        (":after", s(after_sort.clone())),
                        (":until", s(until_sort.clone())),
                    ],
                    None,
                    false,
                    limit - found.len() + 1,
                )
                .await?;
            found.extend(
                entries
                    .into_iter()
                    .filter(|entry| entry.get("GSI3SK").and_then(|k| k.as_s().ok()) != Some(&after_sort)),
            );
            let Some(next) = day.next_day() else { break };
            day = next;
        }
        found.truncate(limit);
        self.meter.polled(self.meter.requests() - before);
        self.items_of(&found).await
    }

    async fn return_sweep(&self, rail: &str, check: usize) -> Result<Option<ReturnSweep>, StoreError> {
        self.meter.polled(1);
        self.get(keys::return_sweep(rail, check)).await
    }
}

#[async_trait]
impl ReconciliationStore for DynamoStore {
    async fn reconciliation(&self, id: &ReconciliationId) -> Result<Option<Reconciliation>, StoreError> {
        self.get(keys::reconciliation(id)).await
    }

    async fn reconciliations(&self, query: &ReconciliationQuery) -> Result<Vec<Reconciliation>, StoreError> {
        let after = match &query.starting_after {
            Some(last) => keys::reconciliation_sort(last.created_at, last.id.as_str()),
            None => page_start(None),
        };
        let (index, partition) = match &query.rail {
            Some(rail) => ("GSI1", keys::reconciliations_of(rail)),
            None => ("GSI3", keys::ALL_RECONCILIATIONS.to_owned()),
        };
        self.newest_first(index, Partition::One(partition), after, None, query.limit)
            .await
    }

    async fn reconciliation_rules(
        &self,
        rail: &str,
        environment: Environment,
    ) -> Result<Option<ReconciliationRules>, StoreError> {
        self.get(keys::reconciliation_rules(rail, environment.as_str())).await
    }
}

#[async_trait]
impl LedgerStore for DynamoStore {
    async fn account(&self, id: &AccountId) -> Result<Option<Account>, StoreError> {
        self.get(keys::account(id)).await
    }

    /// One consistent read of the account's item: its `posted` and what each later day posted.
    async fn posted_at_end_of(&self, account: &AccountId, day: Date) -> Result<Option<i64>, StoreError> {
        self.meter.request();
        let found = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(item(key_item(keys::account(account)))))
            .consistent_read(true)
            .send()
            .await
            .map_err(sdk_error)?;
        let Some(attributes) = found.item() else {
            return Ok(None);
        };
        let number = |value: &AttributeValue| match value {
            AttributeValue::N(n) => n
                .parse::<i64>()
                .map_err(|e| StoreError::unavailable(format!("a balance: {e}"))),
            _ => Err(StoreError::unavailable("a balance that is not a number")),
        };
        let mut posted = attributes.get("posted").map(number).transpose()?.unwrap_or(0);
        let after = keys::posted_on(day);
        for (name, value) in attributes {
            if name.starts_with(keys::POSTED_ON) && name.as_str() > after.as_str() {
                posted -= number(value)?;
            }
        }
        Ok(Some(posted))
    }

    async fn account_of(&self, holder: &str, currency: &Currency) -> Result<Option<Account>, StoreError> {
        self.meter.request();
        let found = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(item(key_item(keys::account_holder(holder, currency.code())))))
            .consistent_read(true)
            .send()
            .await
            .map_err(sdk_error)?;
        match found.item().and_then(|i| i.get("account_id")) {
            Some(AttributeValue::S(id)) => self.account(&AccountId::from(id.as_str())).await,
            _ => Ok(None),
        }
    }

    async fn accounts(&self, query: &AccountQuery) -> Result<Vec<Account>, StoreError> {
        let after = page_start(query.starting_after.as_deref());
        let (index, partition) = match (&query.customer_id, &query.currency) {
            (Some(customer), None) => ("GSI1", Partition::One(keys::accounts_of(Some(customer)))),
            (Some(customer), Some(currency)) => (
                "GSI2",
                Partition::One(keys::accounts_of_in(Some(customer), currency.code())),
            ),
            (None, Some(currency)) => ("GSI4", Partition::Sharded(keys::all_accounts_in(currency.code()))),
            (None, None) => ("GSI3", Partition::Sharded(keys::all_accounts())),
        };
        self.newest_first(index, partition, after, None, query.limit).await
    }

    async fn movement(&self, id: &MovementId) -> Result<Option<Movement>, StoreError> {
        self.get(keys::movement(id)).await
    }

    async fn movements_of(
        &self,
        account: &AccountId,
        starting_after: Option<&MovementId>,
        limit: usize,
    ) -> Result<Vec<Movement>, StoreError> {
        let after = page_start(starting_after.map(|id| id.as_str()));
        let key = keys::movements_of(account);
        let (debits, credits) = futures_util::try_join!(
            self.newest_first("GSI1", Partition::One(key.clone()), after.clone(), None, limit),
            self.newest_first("GSI2", Partition::One(key), after, None, limit),
        )?;
        let mut movements: Vec<Movement> = debits.into_iter().chain(credits).collect();
        movements.sort_by(|a, b| b.id.cmp(&a.id));
        movements.truncate(limit);
        Ok(movements)
    }
}

#[async_trait]
impl FileStore for DynamoStore {
    async fn file(&self, id: &FileId) -> Result<Option<File>, StoreError> {
        self.get(keys::file(id)).await
    }

    async fn files(&self, query: &FileQuery) -> Result<Vec<File>, StoreError> {
        let after = page_start(query.starting_after.as_deref());
        let (index, partition) = match &query.customer_id {
            Some(customer) => ("GSI1", Partition::One(keys::files_of(customer))),
            None => ("GSI3", Partition::Sharded(keys::all_files())),
        };
        self.newest_first(index, partition, after, None, query.limit).await
    }

    async fn file_with_digest(&self, customer: &CustomerId, sha256: &str) -> Result<Option<FileId>, StoreError> {
        self.meter.request();
        let found = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(item(key_item(keys::file_digest(customer, sha256)))))
            .consistent_read(true)
            .send()
            .await
            .map_err(sdk_error)?;
        match found.item().and_then(|i| i.get("file_id")) {
            Some(AttributeValue::S(id)) => Ok(Some(FileId::from(id.as_str()))),
            _ => Ok(None),
        }
    }
}

#[async_trait]
impl ScheduleStore for DynamoStore {
    async fn schedule(&self, id: &ScheduleId) -> Result<Option<Schedule>, StoreError> {
        self.get(keys::schedule(id)).await
    }

    async fn schedules(&self, query: &ScheduleQuery) -> Result<Vec<Schedule>, StoreError> {
        let after = page_start(query.starting_after.as_deref());
        let (index, partition) = match &query.customer_id {
            Some(customer) => ("GSI1", Partition::One(keys::schedules_of(customer))),
            None => ("GSI3", Partition::Sharded(keys::all_schedules())),
        };
        self.newest_first(index, partition, after, None, query.limit).await
    }

    async fn schedules_due(&self, now: OffsetDateTime, limit: usize) -> Result<Vec<Schedule>, StoreError> {
        self.due(keys::schedules_due_partitions(), now, limit).await
    }

    async fn occurrence(&self, id: &ScheduleId, at: OffsetDateTime) -> Result<Option<Occurrence>, StoreError> {
        self.get(keys::occurrence(id, at)).await
    }

    async fn occurrences(
        &self,
        id: &ScheduleId,
        before: Option<OffsetDateTime>,
        limit: usize,
    ) -> Result<Vec<Occurrence>, StoreError> {
        let (partition, low, high) = keys::occurrences_before(id, before);
        self.query(
            None,
            "PK = :pk AND SK BETWEEN :low AND :high",
            vec![(":pk", s(partition)), (":low", s(low)), (":high", s(high))],
            None,
            true,
            limit,
        )
        .await
    }
}

#[async_trait]
impl WebhookStore for DynamoStore {
    async fn event(&self, id: &EventId) -> Result<Option<Event>, StoreError> {
        self.stored_event(id).await?.as_ref().map(read_doc).transpose()
    }

    async fn events(&self, query: &EventQuery) -> Result<Listed<Event>, StoreError> {
        let after = page_start(query.starting_after.as_deref());
        // An event sits in two lists: its customer's (GSI1) and the platform's (the table's
        // own shards). One of a type is the list read through a filter on the `type` its
        // entries carry (the filter reads on until the page is full), where an index per type
        // would cost each event two more write units.
        let filter = Filter::default()
            .with("ty", "type", query.kind.as_deref())
            .into_option();
        match &query.customer_id {
            Some(customer) => {
                let partition = Partition::One(keys::events_of(customer));
                self.newest_first_listed("GSI1", partition, after, filter, query.limit)
                    .await
            }
            None => self.every_event_newest_first(after, filter, query.limit).await,
        }
    }

    async fn webhook_endpoint(&self, id: &WebhookEndpointId) -> Result<Option<WebhookEndpoint>, StoreError> {
        self.get(keys::webhook_endpoint(id)).await
    }

    async fn endpoint_health(&self, endpoint_id: &WebhookEndpointId) -> Result<Option<EndpointHealth>, StoreError> {
        self.get(keys::endpoint_health(endpoint_id)).await
    }

    async fn delivery_line(
        &self,
        endpoint_id: &WebhookEndpointId,
        operation_id: &OperationId,
    ) -> Result<Option<DeliveryLine>, StoreError> {
        self.get(keys::delivery_line(endpoint_id, operation_id)).await
    }

    async fn endpoint_roster(&self, owner: Option<&CustomerId>) -> Result<Option<EndpointRoster>, StoreError> {
        self.get(keys::endpoint_roster(owner.map(|id| id.as_str()))).await
    }

    async fn webhook_endpoints_for(
        &self,
        customer_id: Option<&CustomerId>,
    ) -> Result<Vec<WebhookEndpoint>, StoreError> {
        let mut endpoints: Vec<WebhookEndpoint> = self
            .query(
                Some("GSI1"),
                "GSI1PK = :pk",
                vec![(":pk", s(keys::endpoints_of(None)))],
                None,
                false,
                1000,
            )
            .await?;
        if let Some(customer) = customer_id {
            endpoints.extend(
                self.query::<WebhookEndpoint>(
                    Some("GSI1"),
                    "GSI1PK = :pk",
                    vec![(":pk", s(keys::endpoints_of(Some(customer))))],
                    None,
                    false,
                    1000,
                )
                .await?,
            );
        }
        endpoints.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(endpoints)
    }

    async fn delivery(&self, id: &DeliveryId) -> Result<Option<Delivery>, StoreError> {
        self.get(keys::delivery(id)).await
    }

    /// Two `BatchGetItem`s a batch (up to a hundred): its deliveries, then their events, each
    /// read once however many of the batch's endpoints it goes to. An event written before
    /// 2026-11-26 is not at its key; it is read at its former one.
    async fn deliveries_to_send(&self, ids: &[DeliveryId]) -> Result<Vec<(Delivery, Option<String>)>, StoreError> {
        let keys: Vec<keys::Primary> = ids.iter().map(|id| keys::delivery(id)).collect();
        let items = self.items_by_key(&keys).await?;
        let deliveries = keys
            .iter()
            .filter_map(|key| items.get(key))
            .map(read_doc::<Delivery>)
            .collect::<Result<Vec<_>, _>>()?;
        let event_keys: Vec<keys::Primary> = deliveries.iter().map(|d| keys::event(&d.event_id)).collect();
        let events = self.items_by_key(&event_keys).await?;
        let mut found = Vec::with_capacity(deliveries.len());
        for delivery in deliveries {
            let body = match events.get(&keys::event(&delivery.event_id)) {
                Some(event) => Some(doc_json(event)?.into_owned()),
                None => self
                    .stored_event(&delivery.event_id)
                    .await?
                    .map(|event| doc_json(&event).map(std::borrow::Cow::into_owned))
                    .transpose()?,
            };
            found.push((delivery, body));
        }
        Ok(found)
    }

    async fn deliveries_of_event(
        &self,
        event_id: &EventId,
        operation_id: Option<&OperationId>,
    ) -> Result<Vec<Delivery>, StoreError> {
        let alone = self.query(
            Some("GSI1"),
            "GSI1PK = :pk",
            vec![(":pk", s(keys::deliveries_of(event_id)))],
            None,
            false,
            1000,
        );
        let Some(operation_id) = operation_id else {
            return alone.await;
        };
        // In its operation's list; or, made before deliveries were kept by operation, alone.
        let in_list = self.query(
            Some("GSI1"),
            "GSI1PK = :pk AND begins_with(GSI1SK, :event)",
            vec![
                (":pk", s(keys::deliveries_of_operation(operation_id))),
                (":event", s(keys::failed_delivery_order(event_id, ""))),
            ],
            None,
            false,
            1000,
        );
        let (alone, in_list): (Vec<Delivery>, Vec<Delivery>) = futures_util::try_join!(alone, in_list)?;
        let mut all: Vec<Delivery> = alone.into_iter().chain(in_list).collect();
        all.sort_by(|a, b| a.id.cmp(&b.id));
        all.dedup_by(|a, b| a.id == b.id);
        Ok(all)
    }

    async fn deliveries_of_operation(
        &self,
        operation_id: &OperationId,
        after: Option<&Delivery>,
        limit: usize,
    ) -> Result<Vec<Delivery>, StoreError> {
        let mut values = vec![(":pk", s(keys::deliveries_of_operation(operation_id)))];
        let condition = match after {
            Some(after) => {
                values.push((":after", s(keys::failed_delivery_order(&after.event_id, &after.id))));
                "GSI1PK = :pk AND GSI1SK > :after"
            }
            None => "GSI1PK = :pk",
        };
        self.query(Some("GSI1"), condition, values, None, false, limit).await
    }

    async fn failed_deliveries_of(
        &self,
        endpoint_id: &WebhookEndpointId,
        after: Option<&Delivery>,
        limit: usize,
    ) -> Result<Vec<Delivery>, StoreError> {
        let mut values = vec![(":pk", s(keys::failed_deliveries_of(endpoint_id)))];
        let condition = match after {
            Some(after) => {
                values.push((":after", s(keys::failed_delivery_order(&after.event_id, &after.id))));
                "GSI2PK = :pk AND GSI2SK > :after"
            }
            None => "GSI2PK = :pk",
        };
        self.query(Some("GSI2"), condition, values, None, false, limit).await
    }
}

#[async_trait]
impl HistoryStore for DynamoStore {
    async fn entity_history(&self, entity_id: &str) -> Result<Vec<AuditEntry>, StoreError> {
        let (partition, entries) = keys::entity_history(entity_id);
        let mut newest: Vec<AuditEntry> = self
            .query(
                None,
                "PK = :pk AND begins_with(SK, :audit)",
                vec![(":pk", s(partition)), (":audit", s(entries))],
                None,
                true,
                MAX_ENTITY_HISTORY,
            )
            .await?;
        newest.reverse();
        Ok(newest)
    }
}

/// Every container counts into the same item, so the limit holds however many run: one item
/// per group (customer) and second, holding the group's total and each member's (key's)
/// count, so one conditional update checks and counts both.
#[async_trait]
impl RateLimiter for DynamoStore {
    async fn admit(&self, group: &str, member: &str, window: i64, limits: Limits) -> Result<Admission, StoreError> {
        self.meter.small_write("rate_limit");
        let counted = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(item(key_item(keys::rate_window(group, window)))))
            .update_expression("ADD #count :one, #member :one SET #entity = :entity, #ttl = :ttl")
            .condition_expression(
                "(attribute_not_exists(#count) OR #count < :group_limit) AND (attribute_not_exists(#member) OR #member < :member_limit)",
            )
            .expression_attribute_names("#count", "count")
            .expression_attribute_names("#member", format!("member:{member}"))
            .expression_attribute_names("#entity", "entity")
            .expression_attribute_names("#ttl", "ttl")
            .expression_attribute_values(":one", n(1))
            .expression_attribute_values(":group_limit", n(i64::from(limits.group)))
            .expression_attribute_values(":member_limit", n(i64::from(limits.member)))
            .expression_attribute_values(":entity", s("rate_window"))
            .expression_attribute_values(":ttl", n(window + 60))
            .return_values(ReturnValue::UpdatedNew)
            .send()
            .await;
        match counted {
            Ok(output) => {
                let counts = output.attributes.unwrap_or_default();
                let count = |name: &str| {
                    counts
                        .get(name)
                        .and_then(|value| value.as_n().ok())
                        .and_then(|value| value.parse::<u32>().ok())
                        .ok_or_else(|| unavailable(format!("the rate window's {name} was not returned")))
                };
                Ok(Admission::counted(
                    count(&format!("member:{member}"))?,
                    count("count")?,
                    limits,
                ))
            }
            Err(error) => match error.into_service_error() {
                UpdateItemError::ConditionalCheckFailedException(_) => Ok(Admission::REFUSED),
                other => Err(unavailable(other)),
            },
        }
    }
}

#[async_trait]
impl BankFileStore for DynamoStore {
    async fn bank_file(&self, id: &BankFileId) -> Result<Option<BankFile>, StoreError> {
        self.get(keys::bank_file(id)).await
    }
}

#[async_trait]
impl CalendarStore for DynamoStore {
    async fn calendar(&self, id: &CalendarId) -> Result<Option<Calendar>, StoreError> {
        self.get(keys::calendar(id)).await
    }

    async fn rail_cutoffs(&self, rail: &str, environment: Environment) -> Result<Option<RailCutoffs>, StoreError> {
        self.get(keys::rail_cutoffs(rail, environment.as_str())).await
    }
}
