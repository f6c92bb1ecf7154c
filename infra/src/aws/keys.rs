//! Every key of the single table, in one place: each prefix is spelled once, here, and no
//! other file builds a key (a test below reads them to keep it so). The access paths they
//! serve are listed at the top of `dynamo_store.rs`.

use ops_domain::approvals::WorkflowOwner;
use ops_domain::operations::OperationStatus;
use time::OffsetDateTime;

/// Partitions a key every write of its kind would share (the platform's lists, the poll
/// schedule) is spread over.
pub const SHARDS: u32 = 8;

/// An item's primary key.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Primary {
    pub pk: String,
    pub sk: String,
}

fn primary(pk: String, sk: &str) -> Primary {
    Primary { pk, sk: sk.into() }
}

/// The shard of an id: FNV-1a, stable across processes and releases.
fn shard(id: &str) -> u32 {
    let hash = id.bytes().fold(0x811c_9dc5u32, |hash, byte| {
        (hash ^ u32::from(byte)).wrapping_mul(0x0100_0193)
    });
    hash % SHARDS
}

/// The partition of `prefix` that `id` falls in.
fn sharded(prefix: &str, id: &str) -> String {
    format!("{prefix}#{}", shard(id))
}

/// Every partition of `prefix`: `<prefix>#0` … `<prefix>#7`.
fn shards(prefix: &str) -> Vec<String> {
    (0..SHARDS).map(|shard| format!("{prefix}#{shard}")).collect()
}

/// Customers, or the platform, in keys that list what each owns.
fn owner(customer: Option<&str>) -> &str {
    customer.unwrap_or("PLATFORM")
}

// ---- items by id ------------------------------------------------------------------------

pub fn customer(id: &str) -> Primary {
    primary(format!("CUS#{id}"), "CUSTOMER")
}

pub fn user(id: &str) -> Primary {
    primary(format!("USR#{id}"), "USER")
}

/// A customer's claim on a user's email ([`ops_domain::access::User::email_key`]): one user each.
pub fn user_email(customer: &str, email_key: &str) -> Primary {
    primary(format!("USREMAIL#{customer}#{email_key}"), "USREMAIL")
}

pub fn api_key(id: &str) -> Primary {
    primary(format!("KEY#{id}"), "KEY")
}

/// The second item of a key, by its secret's hash (authentication's lookup).
pub fn api_key_by_hash(secret_hash: &str) -> Primary {
    primary(format!("KEYHASH#{secret_hash}"), "KEY")
}

pub fn operation(id: &str) -> Primary {
    primary(format!("OP#{id}"), "OP")
}

pub fn transaction(id: &str) -> Primary {
    primary(format!("TXN#{id}"), "TXN")
}

/// An event is an item of the platform's list of every event: its shard's partition, sorted
/// by its id (ids sort in the order they were made). So that list needs no index entry, and
/// the id alone still finds the event.
pub fn event(id: &str) -> Primary {
    Primary {
        pk: all_events_shard(id),
        sk: id.into(),
    }
}

/// Where an event written before 2026-11-26 sits (the platform's list was then its GSI3 entry).
pub fn event_written_before(id: &str) -> Primary {
    primary(format!("EVT#{id}"), "EVT")
}

pub fn webhook_endpoint(id: &str) -> Primary {
    primary(format!("WHE#{id}"), "WHE")
}

/// An owner's count of live webhook endpoints (the platform's under `PLATFORM`).
pub fn endpoint_roster(owner_id: Option<&str>) -> Primary {
    primary(format!("WHEROSTER#{}", owner(owner_id)), "WHEROSTER")
}

/// An endpoint's health.
pub fn endpoint_health(endpoint_id: &str) -> Primary {
    primary(format!("WHEHEALTH#{endpoint_id}"), "WHEHEALTH")
}

/// The line of an endpoint's deliveries of one operation's events.
pub fn delivery_line(endpoint_id: &str, operation_id: &str) -> Primary {
    primary(format!("WHLINE#{endpoint_id}#{operation_id}"), "WHLINE")
}

pub fn delivery(id: &str) -> Primary {
    primary(format!("WHD#{id}"), "WHD")
}

pub fn schedule(id: &str) -> Primary {
    primary(format!("SCH#{id}"), "SCH")
}

pub fn account(id: &str) -> Primary {
    primary(format!("ACC#{id}"), "ACC")
}

/// The item that makes a holder's account in a currency unique, naming the account.
pub fn account_holder(holder: &str, currency: &str) -> Primary {
    primary(format!("ACCHOLDER#{holder}#{currency}"), "ACC")
}

pub fn file(id: &str) -> Primary {
    primary(format!("FILE#{id}"), "FILE")
}

/// The item that names the file a customer's bytes were uploaded as.
pub fn file_digest(customer: &str, sha256: &str) -> Primary {
    primary(format!("FILESHA#{customer}#{sha256}"), "FILE")
}

pub fn movement(id: &str) -> Primary {
    primary(format!("MOV#{id}"), "MOV")
}

const OCCURRENCE: &str = "OCC#";

/// An occurrence, in its schedule's partition, sorted by its time.
pub fn occurrence(schedule_id: &str, at: OffsetDateTime) -> Primary {
    Primary {
        pk: schedule(schedule_id).pk,
        sk: occurrence_sort(at),
    }
}

fn occurrence_sort(at: OffsetDateTime) -> String {
    format!("{OCCURRENCE}{:012}", at.unix_timestamp().max(0))
}

/// A schedule's occurrences before `before`: its partition and the range of their sort keys.
pub fn occurrences_before(schedule_id: &str, before: Option<OffsetDateTime>) -> (String, String, String) {
    let high = before.map_or_else(
        || format!("{OCCURRENCE}~"),
        |at| occurrence_sort(at - time::Duration::SECOND),
    );
    (schedule(schedule_id).pk, OCCURRENCE.to_string(), high)
}

/// A workflow definition (or an approval floor, stored beside its owner's workflows).
pub fn workflow(owner: &WorkflowOwner, name: &str) -> Primary {
    let owner = match owner {
        WorkflowOwner::Builtin => "builtin".to_string(),
        WorkflowOwner::Platform => "platform".to_string(),
        WorkflowOwner::Customer(id) => format!("customer:{id}"),
    };
    Primary {
        pk: format!("WF#{owner}"),
        sk: format!("WF#{name}"),
    }
}

pub fn idempotency(scope: &str, key: &str) -> Primary {
    primary(format!("IDEM#{scope}#{key}"), "IDEM")
}

/// A group's (customer's) request counts in one second.
pub fn rate_window(group: &str, second: i64) -> Primary {
    primary(format!("RATE#{group}#{second}"), "RATE")
}

/// The sandbox rail's ledger: one partition (a test rail's traffic is small), one item per
/// transaction it was asked about.
pub const SANDBOX_LEDGER: &str = "SANDBOX";

pub fn sandbox_entry(transaction_id: &str) -> Primary {
    primary(SANDBOX_LEDGER.into(), &format!("TXN#{transaction_id}"))
}

const AUDIT: &str = "AUDIT#";

/// An audit entry: in its operation's partition (so the history is one query), else in its
/// entity's own; `sequence` orders entries within the partition.
pub fn audit(operation_id: Option<&str>, entity_id: &str, sequence: &str) -> Primary {
    Primary {
        pk: match operation_id {
            Some(operation) => operation_history(operation).0,
            None => format!("{AUDIT}{entity_id}"),
        },
        sk: format!("{AUDIT}{sequence}"),
    }
}

/// The history of an entity outside any operation: its partition and the sort-key prefix of
/// its audit entries.
pub fn entity_history(entity_id: &str) -> (String, &'static str) {
    (audit(None, entity_id, "").pk, AUDIT)
}

/// An entry of the operations' lookup by value: one partition per value, its customers' operations
/// sorted by customer, then id ([`finding_order`]).
pub fn finding(by: &str, value: &str, customer: &str, operation: &str) -> Primary {
    Primary {
        pk: findings_of(by, value),
        sk: finding_order(customer, operation),
    }
}

/// The lookup's partition of one value.
pub fn findings_of(by: &str, value: &str) -> String {
    format!("FIND#{by}#{value}")
}

/// Where an operation sorts in its value's partition; a customer's are those beginning
/// `<customer>#`.
pub fn finding_order(customer: &str, operation: &str) -> String {
    format!("{customer}#{operation}")
}

/// An operation's history: its partition and the sort-key prefix of its audit entries.
pub fn operation_history(operation_id: &str) -> (String, &'static str) {
    (operation(operation_id).pk, AUDIT)
}

// ---- index keys -------------------------------------------------------------------------

/// A customer's users (GSI1; on users written from 2026-11-27).
pub fn users_of(customer: &str) -> String {
    format!("CUSUSERS#{customer}")
}

/// Every customer (GSI1): one partition, as customers are few and made seldom.
pub const CUSTOMERS: &str = "CUSTOMERS";

/// The customers in one status (GSI2), moved by a suspension or a reactivation.
pub fn customers_in(status: &str) -> String {
    format!("CUSTOMERS#{status}")
}

/// A customer's (or the platform's) API keys (GSI1).
pub fn keys_of(customer: Option<&str>) -> String {
    format!("CUSKEYS#{}", owner(customer))
}

/// A customer's operations (GSI1).
pub fn operations_of(customer: &str) -> String {
    format!("CUSOPS#{customer}")
}

/// The status list an operation is kept in (GSI2, GSI4): its status's, but an approved one is
/// kept with those processing. `approved` lasts until the pipeline's next step, moments later,
/// so a list of its own would take two moves of two entries a lifecycle (four write units) for a
/// list nearly always empty. The two statuses' lists read their shared list and keep the
/// operations in their own status: what they read past is work in flight, not history.
pub fn status_list(status: OperationStatus) -> OperationStatus {
    match status {
        OperationStatus::Approved => OperationStatus::Processing,
        other => other,
    }
}

/// Whether the list `status` is kept in holds another status too, so its readers must filter.
pub fn shares_its_list(status: OperationStatus) -> bool {
    OperationStatus::ALL
        .into_iter()
        .any(|other| other != status && status_list(other) == status_list(status))
}

/// The status lists that may hold operations in `status`: the one it is kept in, and for
/// `approved` its own, where operations approved before they shared one were kept (each
/// leaves it on its next move).
fn status_lists(status: OperationStatus) -> Vec<OperationStatus> {
    let kept_in = status_list(status);
    if kept_in == status {
        vec![status]
    } else {
        vec![kept_in, status]
    }
}

/// A customer's operations in one status list (GSI2).
pub fn operations_of_in(customer: &str, status: OperationStatus) -> String {
    format!("CUSOPST#{customer}#{}", status_list(status).as_str())
}

/// The partitions of a customer's status lists that may hold its operations in `status`.
pub fn operations_of_in_lists(customer: &str, status: OperationStatus) -> Vec<String> {
    status_lists(status)
        .into_iter()
        .map(|list| format!("CUSOPST#{customer}#{}", list.as_str()))
        .collect()
}

const OPERATIONS: &str = "OPS";

/// Every operation, the partition of one (GSI3).
pub fn all_operations_shard(operation_id: &str) -> String {
    sharded(OPERATIONS, operation_id)
}

pub fn all_operations() -> Vec<String> {
    shards(OPERATIONS)
}

fn operations_in_prefix(status: &str) -> String {
    format!("OPSTATUS#{status}")
}

/// Every operation in one status list, the partition of one (GSI4).
pub fn operations_in_shard(status: OperationStatus, operation_id: &str) -> String {
    sharded(&operations_in_prefix(status_list(status).as_str()), operation_id)
}

/// The partitions of the platform's status lists that may hold operations in `status`.
pub fn operations_in(status: OperationStatus) -> Vec<String> {
    status_lists(status)
        .into_iter()
        .flat_map(|list| shards(&operations_in_prefix(list.as_str())))
        .collect()
}

/// A customer's transactions in a watched status (GSI1, sparse: only while in it).
pub fn transactions_of_in(customer: &str, status: &str) -> String {
    format!("CUSTXNST#{customer}#{status}")
}

fn transactions_in_prefix(status: &str) -> String {
    format!("TXNST#{status}")
}

/// Every transaction in a watched status (GSI4, sparse), the partition of one.
pub fn transactions_in_shard(status: &str, transaction_id: &str) -> String {
    sharded(&transactions_in_prefix(status), transaction_id)
}

pub fn transactions_in(status: &str) -> Vec<String> {
    shards(&transactions_in_prefix(status))
}

const POLL: &str = "POLL";

/// The status-poll schedule (GSI2, sparse): the partition of a transaction due a poll.
pub fn poll_shard(transaction_id: &str) -> String {
    sharded(POLL, transaction_id)
}

pub fn poll_partitions() -> Vec<String> {
    shards(POLL)
}

/// A due transaction's place in the schedule: its due second, padded, then its id.
pub fn poll_sort(due: OffsetDateTime, transaction_id: &str) -> String {
    format!("{:012}#{transaction_id}", due.unix_timestamp().max(0))
}

/// Sorts after every entry due at or before `now`.
pub fn poll_due_until(now: OffsetDateTime) -> String {
    format!("{:012}#~", now.unix_timestamp().max(0))
}

const APPROVALS_DUE: &str = "APPRDUE";

/// The marker of an operation waiting for approvals that expire: its own item, listed in the
/// expiry timer's index (GSI2, sparse) by its expiry, sorted as the poll schedule is.
pub fn approval_expiry(operation_id: &str) -> Primary {
    primary(format!("{APPROVALS_DUE}#{operation_id}"), APPROVALS_DUE)
}

pub fn approval_expiry_shard(operation_id: &str) -> String {
    sharded(APPROVALS_DUE, operation_id)
}

pub fn approval_expiry_partitions() -> Vec<String> {
    shards(APPROVALS_DUE)
}

// ---- the desk ----------------------------------------------------------------------------

pub fn work_item(id: &str) -> Primary {
    primary(format!("WI#{id}"), "WI")
}

/// The marker of a queue's item not done about a subject (names the item): there is one at most.
pub fn open_work_item(queue: &str, subject_id: &str) -> Primary {
    primary(format!("WIOPEN#{queue}#{subject_id}"), "WI")
}

fn work_items_prefix(queue: &str, status: &str) -> String {
    format!("WIQ#{queue}#{status}")
}

/// A queue's items in one status (GSI1, sorted by due time): the partition of one, and all.
pub fn work_items_shard(queue: &str, status: &str, id: &str) -> String {
    sharded(&work_items_prefix(queue, status), id)
}

pub fn work_items_in(queue: &str, status: &str) -> Vec<String> {
    shards(&work_items_prefix(queue, status))
}

/// A customer's items of a queue in one status (GSI2, sorted by due time).
pub fn work_items_of(customer: &str, queue: &str, status: &str) -> String {
    format!("CUSWI#{customer}#{queue}#{status}")
}

/// The items someone holds (GSI3, sparse, sorted by due time).
pub fn work_items_held_by(assignee: &str) -> String {
    format!("WIASG#{assignee}")
}

/// Where an operation is counted on the board.
pub fn board_entry(operation_id: &str) -> Primary {
    primary(format!("BOARDOP#{operation_id}"), "BOARD")
}

const BOARDS: &str = "BOARDS";

/// A customer's board counters in one currency (`""` for the queues'): one small item holding
/// a count and an amount per bucket, so a move between columns is one update. Every
/// customer's items sit in [`SHARDS`] partitions (by a hash of the customer), so the
/// platform's board reads them all and adds them up, and no change writes a platform-wide
/// counter as well.
pub fn board_counters_item(customer: &str, currency: &str) -> Primary {
    primary(sharded(BOARDS, customer), &format!("{customer}#{currency}"))
}

/// Where a customer's board counters are: its partition and the sort keys' prefix.
pub fn board_counters_of(customer: &str) -> (String, String) {
    (sharded(BOARDS, customer), format!("{customer}#"))
}

/// The partitions holding every customer's board counters.
pub fn every_board_counter() -> Vec<String> {
    shards(BOARDS)
}

/// Where board counters were kept before 2026-11-26: a customer's own partition, and the
/// platform's counters (each move added to both) in shards of their own. No write reaches
/// them now; a board adds what they hold to what has been counted since.
pub fn board_counters_before(customer: Option<&str>) -> Vec<String> {
    match customer {
        Some(customer) => vec![format!("BOARD#{customer}")],
        None => shards("BOARD#PLATFORM"),
    }
}

/// A rail's transactions confirmed on one day (GSI3, sparse): one partition per rail and day,
/// which a statement of that day reads whole.
pub fn confirmed_on(rail: &str, day: time::Date) -> String {
    format!("RAILDAY#{rail}#{day}")
}

/// A confirmed transaction's place in its day (GSI3SK): by confirmation time to the
/// millisecond, then id, as the return sweeps read it.
pub fn confirmed_sort(confirmed_at: OffsetDateTime, transaction_id: &str) -> String {
    format!("{:015}#{transaction_id}", unix_millis(confirmed_at))
}

/// Sorts after every transaction confirmed at or before `at`.
pub fn confirmed_until(at: OffsetDateTime) -> String {
    format!("{:015}#~", unix_millis(at))
}

fn unix_millis(at: OffsetDateTime) -> i128 {
    (at.unix_timestamp_nanos() / 1_000_000).max(0)
}

/// A tally's counter ([`ops_domain::tallies::Period::key`] names its period): an hour's
/// counters partitioned by their day, a day's by their month, so a chart's window is one or
/// two partitions read by a range of sort keys; a series spread over [`SHARDS`] counters by
/// what it counts, so concurrent changes rarely update one item.
pub fn tally(period: &str, customer: &str, series: &str, spread_by: &str) -> Primary {
    primary(
        tally_partition(period),
        &format!("{period}#{customer}#{series}#{}", shard(spread_by)),
    )
}

/// The partition holding the counters of `period`.
pub fn tally_partition(period: &str) -> String {
    // `h2026-12-07T13` → its day, `d2026-12-07` → its month.
    let container = match period.split_once('T') {
        Some((day, _)) => day,
        None => period.get(..8).unwrap_or(period),
    };
    format!("TALLY#{container}")
}

/// The sort keys of the counters of the periods from `first` to `last`, both included.
pub fn tallies_from_to(first: &str, last: &str) -> (String, String) {
    (first.to_owned(), format!("{last}#~"))
}

/// How far a rail's sweep for one return check has got.
pub fn return_sweep(rail: &str, check: usize) -> Primary {
    primary(format!("RETSWEEP#{rail}#{check}"), "RETSWEEP")
}

pub fn reconciliation(id: &str) -> Primary {
    primary(format!("REC#{id}"), "REC")
}

/// The account item's attribute for what it posted on `day` (UTC).
pub fn posted_on(day: time::Date) -> String {
    format!("{POSTED_ON}{day}")
}

pub const POSTED_ON: &str = "posted_on_";

pub fn calendar(id: &str) -> Primary {
    primary(format!("CAL#{id}"), "CAL")
}

/// A customer's payout limits.
pub fn payout_limits(customer_id: &str) -> Primary {
    primary(format!("LIMITS#{customer_id}"), "LIMITS")
}

/// A payout limit's counter (`LimitUse::key`): what was approved against it.
pub fn limit_counter(counter: &str) -> Primary {
    primary(format!("LIMITUSE#{counter}"), "LIMITUSE")
}

/// Where a customer paid a beneficiary last.
pub fn known_payee(customer_id: &str, payee: &str) -> Primary {
    primary(format!("PAYEE#{customer_id}#{payee}"), "PAYEE")
}

/// A file rail's bank file.
pub fn bank_file(id: &str) -> Primary {
    primary(format!("BANKFILE#{id}"), "BANKFILE")
}

/// A rail's cut-offs in one environment.
pub fn rail_cutoffs(rail: &str, environment: &str) -> Primary {
    primary(format!("RAILCUT#{environment}#{rail}"), "RAILCUT")
}

/// A rail's reconciliation rules in one environment.
pub fn reconciliation_rules(rail: &str, environment: &str) -> Primary {
    primary(format!("RECRULES#{environment}#{rail}"), "RECRULES")
}

/// A rail's reconciliations (GSI1).
pub fn reconciliations_of(rail: &str) -> String {
    format!("RAILRECS#{rail}")
}

/// Every reconciliation (GSI3): a few a day, one partition.
pub const ALL_RECONCILIATIONS: &str = "RECS";

/// A reconciliation's place in its lists (GSI1SK, GSI3SK): by import time to the
/// millisecond (as SQLite's index keeps it), then id.
pub fn reconciliation_sort(created_at: OffsetDateTime, id: &str) -> String {
    format!("{:015}#{id}", unix_millis(created_at))
}

/// A customer's files (GSI1).
pub fn files_of(customer: &str) -> String {
    format!("CUSFILES#{customer}")
}

const FILES: &str = "FILES";

/// Every file (GSI3): the partition of one, and all of them.
pub fn all_files_shard(file_id: &str) -> String {
    sharded(FILES, file_id)
}

pub fn all_files() -> Vec<String> {
    shards(FILES)
}

/// A customer's schedules (GSI1).
pub fn schedules_of(customer: &str) -> String {
    format!("CUSSCH#{customer}")
}

const SCHEDULES: &str = "SCHS";

/// Every schedule (GSI3): the partition of one, and all of them.
pub fn all_schedules_shard(schedule_id: &str) -> String {
    sharded(SCHEDULES, schedule_id)
}

pub fn all_schedules() -> Vec<String> {
    shards(SCHEDULES)
}

const SCHEDULES_DUE: &str = "SCHDUE";

/// The embedded timer's index on the table (GSI2, sparse): the partition of an active
/// schedule's next run, and all of them. Sorted as the poll schedule is.
pub fn schedule_due_shard(schedule_id: &str) -> String {
    sharded(SCHEDULES_DUE, schedule_id)
}

pub fn schedules_due_partitions() -> Vec<String> {
    shards(SCHEDULES_DUE)
}

/// A customer's events (GSI1).
pub fn events_of(customer: &str) -> String {
    format!("CUSEVTS#{customer}")
}

const EVENTS: &str = "EVTS";

/// Every event (the table's own partitions; GSI3 for events written before 2026-11-26): the
/// partition of one, and all of them.
pub fn all_events_shard(event_id: &str) -> String {
    sharded(EVENTS, event_id)
}

pub fn all_events() -> Vec<String> {
    shards(EVENTS)
}

/// A customer's (or the platform's) accounts (GSI1), and in one currency (GSI2).
pub fn accounts_of(customer: Option<&str>) -> String {
    format!("CUSACC#{}", owner(customer))
}

pub fn accounts_of_in(customer: Option<&str>, currency: &str) -> String {
    format!("CUSACCCUR#{}#{currency}", owner(customer))
}

const ACCOUNTS: &str = "ACCS";

/// Every account (GSI3), and in one currency (GSI4): the partition of one, and all of them.
pub fn all_accounts_shard(account_id: &str) -> String {
    sharded(ACCOUNTS, account_id)
}

pub fn all_accounts() -> Vec<String> {
    shards(ACCOUNTS)
}

fn accounts_in_prefix(currency: &str) -> String {
    format!("ACCCUR#{currency}")
}

pub fn all_accounts_in_shard(currency: &str, account_id: &str) -> String {
    sharded(&accounts_in_prefix(currency), account_id)
}

pub fn all_accounts_in(currency: &str) -> Vec<String> {
    shards(&accounts_in_prefix(currency))
}

/// An account's movements: those debiting it (GSI1) and crediting it (GSI2) share the key.
pub fn movements_of(account_id: &str) -> String {
    format!("ACCMOV#{account_id}")
}

/// A customer's (or the platform's) webhook endpoints (GSI1).
pub fn endpoints_of(customer: Option<&str>) -> String {
    format!("CUSWHE#{}", owner(customer))
}

/// An event's deliveries (GSI1), where the event is of no operation or the delivery was made
/// before deliveries were kept by operation.
pub fn deliveries_of(event_id: &str) -> String {
    format!("EVTWHD#{event_id}")
}

/// An operation's deliveries (GSI1), sorted as [`failed_delivery_order`]: by event, then id.
pub fn deliveries_of_operation(operation_id: &str) -> String {
    format!("OPWHD#{operation_id}")
}

/// An endpoint's failed deliveries awaiting a follow-up (GSI2, sparse).
pub fn failed_deliveries_of(endpoint_id: &str) -> String {
    format!("WHEFAIL#{endpoint_id}")
}

/// Where a failed delivery sorts among its endpoint's: by event, then id.
pub fn failed_delivery_order(event_id: &str, delivery_id: &str) -> String {
    format!("{event_id}#{delivery_id}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// No file of the AWS adapters but this one spells a key prefix (`"OP#…`, `"CUSOPS#…`),
    /// so every key is built here and each prefix has one spelling.
    #[test]
    fn no_key_is_built_outside_this_module() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/aws");
        let mut read = 0;
        let mut paths: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
        while let Some(path) = paths.pop() {
            if path.is_dir() {
                paths.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
                continue;
            }
            if path.file_name().is_some_and(|name| name == "keys.rs") {
                continue;
            }
            let source = std::fs::read_to_string(&path).unwrap();
            for (number, line) in source.lines().enumerate() {
                if line.trim_start().starts_with("//") {
                    continue;
                }
                let spelled = line.match_indices('"').any(|(at, _)| {
                    let rest = &line[at + 1..];
                    let prefix: String = rest.chars().take_while(|c| c.is_ascii_uppercase()).collect();
                    prefix.len() >= 2 && rest[prefix.len()..].starts_with('#')
                });
                assert!(!spelled, "{}:{} builds a key: {line}", path.display(), number + 1);
            }
            read += 1;
        }
        assert!(read >= 10, "read only {read} files of {}", dir.display());
    }

    #[test]
    fn shards_are_stable_and_every_id_falls_in_one_of_them() {
        assert_eq!(all_operations_shard("op_01"), all_operations_shard("op_01"));
        assert!(all_operations().contains(&all_operations_shard("op_01")));
        assert!(poll_partitions().contains(&poll_shard("txn_01")));
        assert_eq!(all_operations().len(), SHARDS as usize);
        assert!(poll_sort(OffsetDateTime::UNIX_EPOCH, "txn_1") < poll_due_until(OffsetDateTime::UNIX_EPOCH));
    }

    /// Only approved and processing share a status list (so only theirs filter), and each
    /// status's lists hold where its operations are written, and approved's where they were.
    #[test]
    fn approved_operations_are_kept_in_processings_lists_and_found_in_both() {
        use OperationStatus::*;
        let shared: Vec<OperationStatus> = OperationStatus::ALL
            .into_iter()
            .filter(|s| shares_its_list(*s))
            .collect();
        assert_eq!(shared, [Approved, Processing]);
        for status in OperationStatus::ALL {
            assert!(
                operations_in(status).contains(&operations_in_shard(status, "op_01")),
                "{status:?}"
            );
            let lists = operations_of_in_lists("cus_1", status);
            assert!(lists.contains(&operations_of_in("cus_1", status)), "{status:?}");
            assert_eq!(lists.len(), if status == Approved { 2 } else { 1 }, "{status:?}");
        }
        assert_eq!(
            operations_of_in("cus_1", Approved),
            operations_of_in("cus_1", Processing)
        );
        // The board's oldest age reads a column's lists whole: a list holds one column's.
        for status in OperationStatus::ALL {
            assert_eq!(
                ops_domain::desk::board::Column::of(status),
                ops_domain::desk::board::Column::of(status_list(status)),
                "{status:?}"
            );
        }
        assert!(operations_of_in_lists("cus_1", Approved).contains(&"CUSOPST#cus_1#approved".to_owned()));
    }
}
