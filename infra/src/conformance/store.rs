//! The store port's behaviour: each implementation's tests call [`run_all`] with a fresh store.

mod access;
mod calendars;
mod commits;
mod idempotency;
mod ledger;
mod limits;
mod lists;
mod schedules;
mod tallies;
mod webhooks;

use ops_domain::access::Environment;
use ops_domain::cause::{Actor, Cause};
use ops_domain::money::Currency;
use ops_domain::operations::{Operation, OperationStatus, OperationType};
use ops_domain::ports::{AuditEntry, Changeset, Store, Write};
use std::collections::BTreeMap;
use std::sync::Arc;
use time::OffsetDateTime;

fn cause(code: &str) -> Cause {
    Cause::new(code, code, Actor::system(), OffsetDateTime::UNIX_EPOCH)
}

/// A minimal operation for store tests.
pub fn operation(id: &str, customer: &str, status: OperationStatus) -> Operation {
    Operation {
        id: id.into(),
        customer_id: customer.into(),
        kind: OperationType::Payout,
        currency: Currency::parse("CLP").unwrap(),
        items: vec![],
        workflow: "auto".into(),
        status,
        cause: cause("created"),
        total_amount: 1,
        approval_chain: vec![],
        approval_expires_at: None,
        approvals: vec![],
        created_by: "usr_1".into(),
        created_at: OffsetDateTime::UNIX_EPOCH,
        updated_at: OffsetDateTime::UNIX_EPOCH,
        metadata: BTreeMap::new(),
        environment: Environment::Test,
        source_account_id: None,
        destination_account_id: None,
        file_id: None,
        schedule_id: None,
        occurrence_at: None,
        hold_ttl: None,
        reversal_of: None,
        reversals: vec![],
        decided_by_rule: None,
        limit_hold: None,
        version: 1,
    }
}

fn audit(operation_id: &str, to: &str) -> Write {
    Write::Audit(AuditEntry {
        entity_type: "operation".into(),
        entity_id: operation_id.into(),
        operation_id: Some(operation_id.into()),
        action: "status_changed".into(),
        from: None,
        to: Some(to.into()),
        cause: cause(to),
        at: OffsetDateTime::UNIX_EPOCH,
        details: None,
    })
}

fn changes(writes: Vec<Write>) -> Changeset {
    Changeset { writes }
}

pub use access::{legacy_keys_and_users_change_from_version_one, LEGACY_API_KEY, LEGACY_USER};
pub use lists::{
    collections_after, page_through, statuses_sharing_a_list_are_listed_apart,
    type_filters_read_a_bounded_stretch_a_page,
};

pub async fn run_all(store: Arc<dyn Store>) {
    commits::entity_and_audit_land_together(store.as_ref()).await;
    lists::lists_are_newest_first_filtered_and_paged(store.as_ref()).await;
    lists::an_owners_workflows_are_listed_by_name(store.as_ref()).await;
    statuses_sharing_a_list_are_listed_apart(store.as_ref()).await;
    webhooks::events_are_listed_by_customer_and_type(store.as_ref()).await;
    commits::concurrent_conflicting_updates_have_one_winner(store.clone()).await;
    commits::concurrent_changesets_each_get_their_own_outcome(store.clone()).await;
    idempotency::idempotency_claims(store.as_ref()).await;
    idempotency::idempotency_taken_in_the_changeset(store.as_ref()).await;
    idempotency::idempotency_replays_long_answers_byte_for_byte(store.as_ref()).await;
    commits::the_largest_operation_the_api_accepts_is_stored(store.as_ref()).await;
    lists::an_operations_transactions_are_found_from_it(store.as_ref()).await;
    lists::operations_are_found_by_the_values_they_carry(store.as_ref()).await;
    lists::watched_transactions_are_listed_by_status(store.as_ref()).await;
    lists::operations_are_listed_within_a_window_and_an_amount_range(store.as_ref()).await;
    lists::operations_pending_approval_are_found_by_their_expiry(store.as_ref()).await;
    access::api_keys_are_listed_by_owner(store.as_ref()).await;
    access::users_are_listed_by_customer_and_changed_in_place(store.as_ref()).await;
    access::a_customers_users_hold_distinct_emails(store.as_ref()).await;
    access::customers_are_listed_newest_first_a_page_at_a_time(store.as_ref()).await;
    schedules::schedules_are_found_by_due_time_and_occurrences_are_recorded_once(store.as_ref()).await;
    ledger::accounts_keep_their_balances_and_movements(store.as_ref()).await;
    ledger::an_accounts_balance_at_the_end_of_a_day_is_read_back(store.as_ref()).await;
    calendars::calendars_and_cutoffs_are_kept_version_by_version(store.as_ref()).await;
    calendars::a_transaction_joins_a_bank_file_together_with_it_or_not_at_all(store.as_ref()).await;
    tallies::tallies_count_what_committed_within_the_window(store.as_ref()).await;
    limits::payout_limits_are_kept_version_by_version(store.as_ref()).await;
    limits::a_limit_counter_moves_only_from_what_its_writer_read(store.clone()).await;
    limits::a_known_payee_is_where_it_was_paid_last(store.as_ref()).await;
    ledger::a_hot_account_is_never_overdrawn_by_concurrent_holds(store.clone(), 8).await;
    ledger::a_hot_account_is_never_overdrawn_by_concurrent_holds(store.clone(), 64).await;
    commits::changesets_committed_together_stay_whole_each(store.as_ref()).await;
    commits::an_entitys_history_is_its_own_newest_entries_oldest_first(store.as_ref()).await;
    webhooks::an_endpoints_failed_deliveries_are_those_awaiting_a_follow_up(store.as_ref()).await;
    webhooks::an_events_endpoints_are_its_customers_and_the_platforms_live_ones(store.as_ref()).await;
    webhooks::an_owners_endpoint_count_moves_one_version_at_a_time(store.as_ref()).await;
    webhooks::an_endpoints_health_moves_one_version_at_a_time(store.as_ref()).await;
    webhooks::a_delivery_line_moves_one_version_at_a_time(store.as_ref()).await;
    webhooks::an_operations_deliveries_are_listed_by_event(store.as_ref()).await;
    super::files::run_all(store.as_ref()).await;
    super::reconciliations::run_all(store.as_ref()).await;
    super::desk::run_all(store).await;
}
