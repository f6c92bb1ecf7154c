//! The store port's behaviour: each implementation's tests call [`run_all`] with a fresh store.

use ops_domain::access::{ApiKey, Customer, CustomerStatus, Environment, Role, Scope, User, UserStatus};
use ops_domain::cause::{Actor, Cause};
use ops_domain::event::Event;
use ops_domain::idempotency::{ClaimOutcome, IdempotencyClaim, StoredResponse};
use ops_domain::ids::AccountId;
use ops_domain::ledger::{
    Account, AccountKind, AccountQuery, Balances, Movement, MovementOf, MovementStatus, MovementTransition, Posting,
};
use ops_domain::money::Amount;
use ops_domain::money::Currency;
use ops_domain::operations::OperationQuery;
use ops_domain::operations::{Beneficiary, Destination, Item, Operation, OperationStatus, OperationType};
use ops_domain::ports::{AuditEntry, Changeset, Store, StoreError, Write};
use ops_domain::schedules::{Occurrence, OccurrenceStatus, Schedule, ScheduleQuery, ScheduleStatus};
use ops_domain::validate::check_operation_size;
use ops_domain::webhooks::EventQuery;
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
        approval_requirement: None,
        approvals: vec![],
        created_by: "usr_1".into(),
        created_at: OffsetDateTime::UNIX_EPOCH,
        updated_at: OffsetDateTime::UNIX_EPOCH,
        metadata: BTreeMap::new(),
        environment: Environment::Test,
        source_account_id: None,
        destination_account_id: None,
        file_id: None,
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

/// An entity's history holds its own entries only (not another entity's, nor one filed under
/// an operation), oldest first; past its bound, the newest of them.
async fn an_entitys_history_is_its_own_newest_entries_oldest_first(store: &dyn Store) {
    use ops_domain::history::MAX_ENTITY_HISTORY;
    let entry = |entity: &str, operation: Option<&str>, action: String| {
        Write::Audit(AuditEntry {
            entity_type: "webhook_endpoint".into(),
            entity_id: entity.into(),
            operation_id: operation.map(Into::into),
            action: action.clone(),
            from: None,
            to: None,
            cause: cause(&action),
            at: OffsetDateTime::UNIX_EPOCH,
            details: None,
        })
    };
    let endpoint = "whe_history";
    assert!(store.entity_history(endpoint).await.unwrap().is_empty());
    store
        .commit(changes(vec![
            entry(endpoint, None, "created".into()),
            entry("whe_other", None, "created".into()),
            entry(endpoint, Some("op_history"), "filed_under_an_operation".into()),
        ]))
        .await
        .unwrap();
    store
        .commit(changes(vec![entry(endpoint, None, "updated".into())]))
        .await
        .unwrap();
    let actions = |history: Vec<AuditEntry>| history.into_iter().map(|e| e.action).collect::<Vec<_>>();
    let history = store.entity_history(endpoint).await.unwrap();
    assert_eq!(actions(history), ["created", "updated"]);

    // A hundred changes a commit (DynamoDB's most in a transaction) until past the bound.
    let mut made = 2;
    while made <= MAX_ENTITY_HISTORY {
        let writes = (made..(made + 100).min(MAX_ENTITY_HISTORY + 1))
            .map(|i| entry(endpoint, None, format!("change_{i:04}")))
            .collect::<Vec<_>>();
        made += writes.len();
        store.commit(changes(writes)).await.unwrap();
    }
    let history = actions(store.entity_history(endpoint).await.unwrap());
    assert_eq!(history.len(), MAX_ENTITY_HISTORY);
    assert_eq!(history[0], "updated", "the oldest one left out");
    assert_eq!(history.last().unwrap(), &format!("change_{MAX_ENTITY_HISTORY:04}"));
}

/// What a customer's event is dispatched to: its customer's endpoints and the platform's, not
/// another customer's, and not one deleted since.
async fn an_events_endpoints_are_its_customers_and_the_platforms_live_ones(store: &dyn Store) {
    use ops_domain::webhooks::{EndpointStatus, WebhookEndpoint};
    let endpoint = |id: &str, customer: Option<&str>| WebhookEndpoint {
        id: id.into(),
        customer_id: customer.map(Into::into),
        url: "https://receiver.example/hook".into(),
        events: vec!["*".into()],
        status: EndpointStatus::Enabled,
        secrets: vec![],
        created_at: OffsetDateTime::UNIX_EPOCH,
        environment: Environment::Test,
        version: 1,
    };
    let made = [
        endpoint("whe_live_a1", Some("cus_live_a")),
        endpoint("whe_live_a2", Some("cus_live_a")),
        endpoint("whe_live_b1", Some("cus_live_b")),
        endpoint("whe_live_p1", None),
    ];
    let writes = made.iter().cloned().map(Write::PutWebhookEndpoint).collect();
    store.commit(changes(writes)).await.unwrap();
    let mut deleted = made[0].clone();
    deleted.status = EndpointStatus::Deleted;
    deleted.version = 2;
    store
        .commit(changes(vec![Write::PutWebhookEndpoint(deleted.clone())]))
        .await
        .unwrap();
    let ids = |endpoints: Vec<WebhookEndpoint>| {
        let mut ids: Vec<String> = endpoints.into_iter().map(|e| e.id.to_string()).collect();
        ids.retain(|id| id.starts_with("whe_live_"));
        ids.sort();
        ids
    };
    let for_a = store.webhook_endpoints_for(Some(&"cus_live_a".into())).await.unwrap();
    assert_eq!(ids(for_a), ["whe_live_a2", "whe_live_p1"]);
    assert_eq!(ids(store.webhook_endpoints_for(None).await.unwrap()), ["whe_live_p1"]);
    assert_eq!(
        store.webhook_endpoint(&"whe_live_a1".into()).await.unwrap(),
        Some(deleted),
        "read by its id still"
    );
}

/// An owner's count of endpoints is its own (the platform's apart from a customer's), and each
/// write of it must follow the version read: of two that read the same, the second is refused,
/// as is a first count over one already written.
async fn an_owners_endpoint_count_moves_one_version_at_a_time(store: &dyn Store) {
    use ops_domain::webhooks::EndpointRoster;
    let customer: ops_domain::ids::CustomerId = "cus_roster".into();
    assert_eq!(store.endpoint_roster(Some(&customer)).await.unwrap(), None);
    let first = EndpointRoster {
        owner: Some(customer.clone()),
        live: 3,
        version: 0,
    };
    let put = |roster: EndpointRoster| store.commit(changes(vec![Write::PutEndpointRoster(roster)]));
    put(first.moved_by(1)).await.unwrap();
    assert!(
        matches!(put(first.moved_by(1)).await, Err(StoreError::Conflict)),
        "a second first count"
    );
    let read = store.endpoint_roster(Some(&customer)).await.unwrap().unwrap();
    assert_eq!((read.live, read.version), (4, 1));
    put(read.moved_by(-1)).await.unwrap();
    assert!(
        matches!(put(read.moved_by(1)).await, Err(StoreError::Conflict)),
        "a count moved from a version already moved on"
    );
    let now = store.endpoint_roster(Some(&customer)).await.unwrap().unwrap();
    assert_eq!((now.live, now.version), (3, 2));
    assert_eq!(
        store.endpoint_roster(None).await.unwrap(),
        None,
        "the platform's is its own"
    );
}

/// An endpoint's failed deliveries awaiting a follow-up are listed by event, bounded: not
/// another endpoint's, not a pending or delivered one, and one leaves the list when its
/// follow-up is recorded.
async fn an_endpoints_failed_deliveries_are_those_awaiting_a_follow_up(store: &dyn Store) {
    use ops_domain::webhooks::{Delivery, DeliveryStatus, FollowUp};
    let delivery = |id: &str, event: &str, endpoint: &str, status: DeliveryStatus| Delivery {
        id: id.into(),
        event_id: event.into(),
        endpoint_id: endpoint.into(),
        url: "https://receiver.example/hook".into(),
        status,
        attempts: vec![],
        next_attempt_at: None,
        created_at: OffsetDateTime::UNIX_EPOCH,
        follow_up: None,
        version: 1,
    };
    let endpoint = "whe_failing";
    let mut writes = vec![];
    for (id, event, status) in [
        ("whd_f3", "evt_f3", DeliveryStatus::Failed),
        ("whd_f1", "evt_f1", DeliveryStatus::Failed),
        ("whd_f2", "evt_f2", DeliveryStatus::Pending),
        ("whd_f4", "evt_f4", DeliveryStatus::Delivered),
        ("whd_f5", "evt_f5", DeliveryStatus::Failed),
    ] {
        writes.push(Write::InsertDelivery(delivery(id, event, endpoint, status)));
    }
    writes.push(Write::InsertDelivery(delivery(
        "whd_f6",
        "evt_f1",
        "whe_elsewhere",
        DeliveryStatus::Failed,
    )));
    store.commit(changes(writes)).await.unwrap();
    let listed_after = |after: Option<Delivery>, limit: usize| async move {
        let found = store
            .failed_deliveries_of(&endpoint.into(), after.as_ref(), limit)
            .await
            .unwrap();
        found.into_iter().map(|d| d.id.to_string()).collect::<Vec<_>>()
    };
    let listed = |limit: usize| listed_after(None, limit);
    assert_eq!(listed(10).await, ["whd_f1", "whd_f3", "whd_f5"]);
    assert_eq!(listed(2).await, ["whd_f1", "whd_f3"]);
    let third = delivery("whd_f3", "evt_f3", endpoint, DeliveryStatus::Failed);
    assert_eq!(listed_after(Some(third), 10).await, ["whd_f5"], "after a place");

    // The pending one fails; the first is resent; the failure of an endpoint not listed stays
    // its own.
    let mut failing = delivery("whd_f2", "evt_f2", endpoint, DeliveryStatus::Failed);
    failing.version = 2;
    let mut resent = delivery("whd_f1", "evt_f1", endpoint, DeliveryStatus::Failed);
    resent.follow_up = Some(FollowUp::Resent {
        delivery_id: "whd_f7".into(),
    });
    resent.version = 2;
    store
        .commit(changes(vec![
            Write::UpdateDelivery(failing),
            Write::UpdateDelivery(resent),
        ]))
        .await
        .unwrap();
    assert_eq!(listed(10).await, ["whd_f2", "whd_f3", "whd_f5"]);
    // A delivery resent keeps its place as a page's start.
    let resent = store.delivery(&"whd_f1".into()).await.unwrap();
    assert_eq!(listed_after(resent, 2).await, ["whd_f2", "whd_f3"]);
    let elsewhere = store
        .failed_deliveries_of(&"whe_elsewhere".into(), None, 10)
        .await
        .unwrap();
    assert_eq!(elsewhere.len(), 1);
}

pub async fn run_all(store: Arc<dyn Store>) {
    entity_and_audit_land_together(store.as_ref()).await;
    lists_are_newest_first_filtered_and_paged(store.as_ref()).await;
    statuses_sharing_a_list_are_listed_apart(store.as_ref()).await;
    events_are_listed_by_customer_and_type(store.as_ref()).await;
    concurrent_conflicting_updates_have_one_winner(store.clone()).await;
    concurrent_changesets_each_get_their_own_outcome(store.clone()).await;
    idempotency_claims(store.as_ref()).await;
    idempotency_taken_in_the_changeset(store.as_ref()).await;
    idempotency_replays_long_answers_byte_for_byte(store.as_ref()).await;
    the_largest_operation_the_api_accepts_is_stored(store.as_ref()).await;
    an_operations_transactions_are_found_from_it(store.as_ref()).await;
    api_keys_are_listed_by_owner(store.as_ref()).await;
    users_are_listed_by_customer_and_changed_in_place(store.as_ref()).await;
    customers_are_listed_newest_first_a_page_at_a_time(store.as_ref()).await;
    schedules_are_found_by_due_time_and_occurrences_are_recorded_once(store.as_ref()).await;
    accounts_keep_their_balances_and_movements(store.as_ref()).await;
    a_hot_account_is_never_overdrawn_by_concurrent_holds(store.clone(), 8).await;
    a_hot_account_is_never_overdrawn_by_concurrent_holds(store.clone(), 64).await;
    changesets_committed_together_stay_whole_each(store.as_ref()).await;
    an_entitys_history_is_its_own_newest_entries_oldest_first(store.as_ref()).await;
    an_endpoints_failed_deliveries_are_those_awaiting_a_follow_up(store.as_ref()).await;
    an_events_endpoints_are_its_customers_and_the_platforms_live_ones(store.as_ref()).await;
    an_owners_endpoint_count_moves_one_version_at_a_time(store.as_ref()).await;
    super::files::run_all(store.as_ref()).await;
    super::reconciliations::run_all(store.as_ref()).await;
    super::desk::run_all(store).await;
}

fn account(id: &str, customer: Option<&str>, kind: AccountKind) -> Account {
    Account {
        id: id.into(),
        customer_id: customer.map(Into::into),
        currency: Currency::parse("CLP").unwrap(),
        name: id.into(),
        kind,
        rail: (kind == AccountKind::Settlement).then(|| format!("psp-local:{id}")),
        balances: Balances::default(),
        environment: Environment::Test,
        created_at: OffsetDateTime::UNIX_EPOCH,
    }
}

fn movement(id: &str, debit: &Account, credit: &Account, amount: i64, status: MovementStatus) -> Movement {
    Movement::between(
        id.into(),
        debit,
        credit,
        Amount::new(amount).unwrap(),
        status,
        MovementOf::default(),
        cause("test"),
    )
}

/// The writes of a posting, as the use cases make them.
fn posting(place: Vec<(Movement, Option<&AccountId>)>, settle: Vec<Movement>) -> Changeset {
    let mut posting = Posting::default();
    for (movement, guarded) in place {
        posting.place(movement, &guarded.into_iter().collect::<Vec<_>>());
    }
    for movement in settle {
        posting.settle(movement);
    }
    let mut changes = Changeset::default();
    posting.write_to(
        &mut changes,
        &ops_domain::ids::UlidGenerator::default(),
        Environment::Test,
    );
    changes
}

async fn accounts_keep_their_balances_and_movements(store: &dyn Store) {
    let customer = account("acc_l1", Some("cus_l"), AccountKind::Customer);
    let settlement = account("acc_l2", None, AccountKind::Settlement);
    let funding = account("acc_l3", None, AccountKind::Adjustments);
    for a in [&customer, &settlement, &funding] {
        store
            .commit(changes(vec![Write::InsertAccount(a.clone())]))
            .await
            .unwrap();
    }
    let second = account("acc_l4", Some("cus_l"), AccountKind::Customer);
    assert!(
        matches!(
            store.commit(changes(vec![Write::InsertAccount(second)])).await,
            Err(StoreError::Conflict)
        ),
        "one account per holder and currency"
    );
    let clp = Currency::parse("CLP").unwrap();
    assert_eq!(store.account_of("cus_l", &clp).await.unwrap().unwrap().id, customer.id);
    assert!(store
        .account_of("cus_l", &Currency::parse("USD").unwrap())
        .await
        .unwrap()
        .is_none());

    let fund = movement("mov_l1", &funding, &customer, 1_000, MovementStatus::Posted);
    store.commit(posting(vec![(fund, None)], vec![])).await.unwrap();
    let hold = movement("mov_l2", &customer, &settlement, 700, MovementStatus::Pending);
    store
        .commit(posting(vec![(hold.clone(), Some(&customer.id))], vec![]))
        .await
        .unwrap();
    let balances = |a: Account| (a.balances.posted, a.balances.pending(), a.balances.available());
    assert_eq!(
        balances(store.account(&customer.id).await.unwrap().unwrap()),
        (1_000, 300, 300)
    );
    // A second hold beyond what is available is refused whole: no movement, no balance.
    let greedy = movement("mov_l3", &customer, &settlement, 301, MovementStatus::Pending);
    assert!(matches!(
        store.commit(posting(vec![(greedy, Some(&customer.id))], vec![])).await,
        Err(StoreError::Conflict)
    ));
    assert!(store.movement(&"mov_l3".into()).await.unwrap().is_none());
    assert_eq!(
        balances(store.account(&customer.id).await.unwrap().unwrap()),
        (1_000, 300, 300)
    );
    // The same movement twice is a conflict, not a second hold.
    assert!(matches!(
        store
            .commit(posting(vec![(hold.clone(), Some(&customer.id))], vec![]))
            .await,
        Err(StoreError::Conflict)
    ));
    let mut posted = hold.clone();
    posted.apply(MovementTransition::Post(cause("confirmed"))).unwrap();
    store.commit(posting(vec![], vec![posted.clone()])).await.unwrap();
    assert!(
        matches!(
            store.commit(posting(vec![], vec![posted])).await,
            Err(StoreError::Conflict)
        ),
        "a movement settles once"
    );
    assert_eq!(
        balances(store.account(&customer.id).await.unwrap().unwrap()),
        (300, 300, 300)
    );
    assert_eq!(
        balances(store.account(&settlement.id).await.unwrap().unwrap()),
        (700, 700, 700)
    );
    assert_eq!(
        balances(store.account(&funding.id).await.unwrap().unwrap()),
        (-1_000, -1_000, -1_000)
    );
    let lists = store
        .accounts(&AccountQuery {
            customer_id: Some("cus_l".into()),
            limit: 10,
            ..AccountQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(lists.len(), 1);
    assert_eq!(lists[0].balances.available(), 300, "lists carry the current balances");
    let in_clp = store
        .accounts(&AccountQuery {
            currency: Some(clp.clone()),
            limit: 10,
            ..AccountQuery::default()
        })
        .await
        .unwrap();
    assert!(in_clp.len() >= 3);
    let of_customer: Vec<String> = store
        .movements_of(&customer.id, None, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.id.to_string())
        .collect();
    assert_eq!(of_customer, ["mov_l2", "mov_l1"], "debits and credits, newest first");
    let page = store
        .movements_of(&customer.id, Some(&"mov_l2".into()), 10)
        .await
        .unwrap();
    assert_eq!(page.len(), 1);
    assert_eq!(
        store.movement(&"mov_l2".into()).await.unwrap().unwrap().status,
        MovementStatus::Posted
    );
}

/// Many holds racing for one account's last funds: exactly as many win as the funds cover,
/// and the balance ends exactly at what the winners left.
async fn a_hot_account_is_never_overdrawn_by_concurrent_holds(store: Arc<dyn Store>, racers: usize) {
    let mut customer = account(
        &format!("acc_hot{racers}"),
        Some(&format!("cus_hot{racers}")),
        AccountKind::Customer,
    );
    let mut settlement = account(&format!("acc_hots{racers}"), None, AccountKind::Settlement);
    let mut funding = account(&format!("acc_hotf{racers}"), None, AccountKind::Adjustments);
    // The platform holds one account per currency: each race has its own.
    let currency = Currency::parse(if racers < 10 { "USD" } else { "EUR" }).unwrap();
    for a in [&mut customer, &mut settlement, &mut funding] {
        a.currency = currency.clone();
    }
    for a in [&customer, &settlement, &funding] {
        store
            .commit(changes(vec![Write::InsertAccount(a.clone())]))
            .await
            .unwrap();
    }
    let funds = (racers as i64 / 2) * 100 + 50;
    let fund = movement(
        &format!("mov_hotf{racers}"),
        &funding,
        &customer,
        funds,
        MovementStatus::Posted,
    );
    store.commit(posting(vec![(fund, None)], vec![])).await.unwrap();
    let tasks: Vec<_> = (0..racers)
        .map(|n| {
            let store = store.clone();
            let hold = movement(
                &format!("mov_hot{racers}x{n}"),
                &customer,
                &settlement,
                100,
                MovementStatus::Pending,
            );
            let guarded = customer.id.clone();
            tokio::spawn(async move {
                loop {
                    match store
                        .commit(posting(vec![(hold.clone(), Some(&guarded))], vec![]))
                        .await
                    {
                        Ok(()) => return true,
                        Err(StoreError::Conflict) => {
                            // Lost to the guard or to a concurrent transaction: look again.
                            let now = store.account(&guarded).await.unwrap().unwrap();
                            if now.balances.available() < 100 {
                                return false;
                            }
                        }
                        Err(other) => panic!("{other}"),
                    }
                }
            })
        })
        .collect();
    let mut won = 0;
    for task in tasks {
        won += usize::from(task.await.unwrap());
    }
    assert_eq!(won, racers / 2, "{racers} racers");
    let account = store.account(&customer.id).await.unwrap().unwrap();
    assert_eq!(account.balances.available(), 50);
    assert_eq!(account.balances.pending_debits, won as i64 * 100);
}

fn schedule(id: &str, customer: &str, next_run_at: Option<OffsetDateTime>) -> Schedule {
    Schedule {
        id: id.into(),
        customer_id: customer.into(),
        expression: "rate(1 hour)".into(),
        timezone: "UTC".into(),
        operation: serde_json::json!({"type": "payout"}),
        status: ScheduleStatus::Active,
        start_at: None,
        end_at: None,
        next_run_at,
        anchor: OffsetDateTime::UNIX_EPOCH,
        api_key_id: "key_sched".into(),
        created_by: "key_sched".into(),
        cause: cause("schedule_created"),
        created_at: OffsetDateTime::UNIX_EPOCH,
        updated_at: OffsetDateTime::UNIX_EPOCH,
        environment: Environment::Test,
        version: 1,
    }
}

/// The due index holds active schedules by their next run only; lists leave deleted ones
/// out; an occurrence is recorded once, and a schedule changes only from the version read.
async fn schedules_are_found_by_due_time_and_occurrences_are_recorded_once(store: &dyn Store) {
    let at = |hours: i64| OffsetDateTime::UNIX_EPOCH + time::Duration::hours(1000 + hours);
    let writes = vec![
        Write::PutSchedule(schedule("sch_01a", "cus_sch", Some(at(1)))),
        Write::PutSchedule(schedule("sch_01b", "cus_sch", Some(at(3)))),
        Write::PutSchedule(schedule("sch_01c", "cus_sch_other", Some(at(2)))),
    ];
    store.commit(changes(writes)).await.unwrap();
    let due: Vec<String> = store
        .schedules_due(at(2), 10)
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.id.to_string())
        .collect();
    assert_eq!(due, ["sch_01a", "sch_01c"], "due by now, soonest first");

    let mut paused = schedule("sch_01a", "cus_sch", None);
    paused.status = ScheduleStatus::Paused;
    paused.version = 2;
    let mut deleted = schedule("sch_01c", "cus_sch_other", None);
    deleted.status = ScheduleStatus::Deleted;
    deleted.version = 2;
    store
        .commit(changes(vec![
            Write::PutSchedule(paused.clone()),
            Write::PutSchedule(deleted),
        ]))
        .await
        .unwrap();
    assert!(store.schedules_due(at(2), 10).await.unwrap().is_empty());
    assert_eq!(store.schedules_due(at(5), 10).await.unwrap()[0].id, "sch_01b");
    let stale = store.commit(changes(vec![Write::PutSchedule(paused)])).await;
    assert!(matches!(stale, Err(StoreError::Conflict)), "{stale:?}");

    let query = |customer: Option<&str>| ScheduleQuery {
        customer_id: customer.map(Into::into),
        starting_after: None,
        limit: 10,
    };
    let listed: Vec<String> = store
        .schedules(&query(Some("cus_sch")))
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.id.to_string())
        .collect();
    assert_eq!(listed, ["sch_01b", "sch_01a"]);
    assert!(store.schedules(&query(Some("cus_sch_other"))).await.unwrap().is_empty());
    assert!(store
        .schedules(&query(None))
        .await
        .unwrap()
        .iter()
        .all(|s| s.id != "sch_01c"));
    assert_eq!(
        store.schedule(&"sch_01c".into()).await.unwrap().unwrap().status,
        ScheduleStatus::Deleted
    );

    let occurrence = |hours: i64| Occurrence {
        schedule_id: "sch_01b".into(),
        scheduled_at: at(hours),
        status: OccurrenceStatus::Missed,
        operation_id: None,
        reason: Some("late".into()),
        recorded_at: at(hours),
    };
    for hours in [1, 2, 3] {
        store
            .commit(changes(vec![Write::InsertOccurrence(occurrence(hours))]))
            .await
            .unwrap();
    }
    let again = store
        .commit(changes(vec![
            Write::InsertOccurrence(occurrence(2)),
            audit("op_never", "x"),
        ]))
        .await;
    assert!(matches!(again, Err(StoreError::Conflict)), "{again:?}");
    assert!(store.operation_history(&"op_never".into()).await.unwrap().is_empty());
    let id = "sch_01b".into();
    let times = |list: Vec<Occurrence>| list.into_iter().map(|o| o.scheduled_at).collect::<Vec<_>>();
    assert_eq!(
        times(store.occurrences(&id, None, 10).await.unwrap()),
        [at(3), at(2), at(1)]
    );
    assert_eq!(times(store.occurrences(&id, Some(at(3)), 1).await.unwrap()), [at(2)]);
    assert_eq!(store.occurrence(&id, at(2)).await.unwrap(), Some(occurrence(2)));
    assert_eq!(store.occurrence(&id, at(9)).await.unwrap(), None);
}

fn api_key(id: &str, customer: Option<&str>) -> ApiKey {
    ApiKey {
        id: id.into(),
        customer_id: customer.map(Into::into),
        user_id: None,
        environment: Environment::Test,
        scopes: vec![Scope::OperationsRead],
        created_at: OffsetDateTime::UNIX_EPOCH,
        expires_at: None,
        revoked_at: None,
        created_by: Some("key_minter".into()),
        rotated_to: None,
        secret_hash: format!("hash-of-{id}"),
        version: 1,
    }
}

fn user(id: &str, customer: &str) -> User {
    User {
        id: id.into(),
        customer_id: customer.into(),
        name: id.into(),
        email: format!("{id}@example.com"),
        roles: vec![Role::Approver],
        status: UserStatus::Active,
        created_at: OffsetDateTime::UNIX_EPOCH,
        version: 1,
    }
}

/// Customers are listed newest first (by id), a page at a time, and changed in place.
async fn customers_are_listed_newest_first_a_page_at_a_time(store: &dyn Store) {
    let customer = |id: &str| Customer {
        id: id.into(),
        name: format!("Customer {id}"),
        status: CustomerStatus::Active,
        metadata: Default::default(),
        created_at: OffsetDateTime::UNIX_EPOCH,
        version: 1,
    };
    // Ids after every other case's, so they head the list.
    let writes = ["cus_zzzz1", "cus_zzzz2", "cus_zzzz3"]
        .map(|id| Write::InsertCustomer(customer(id)))
        .to_vec();
    store.commit(changes(writes)).await.unwrap();
    let ids = |customers: Vec<Customer>| customers.into_iter().map(|c| c.id.to_string()).collect::<Vec<_>>();
    assert_eq!(
        ids(store.customers(None, None, 2).await.unwrap()),
        ["cus_zzzz3", "cus_zzzz2"]
    );
    let next = store.customers(None, Some(&"cus_zzzz2".into()), 1).await.unwrap();
    assert_eq!(next, [customer("cus_zzzz1")], "as stored, after the page's start");

    // A change is in place, from the version it read: read and listed once, as the customer
    // now stands; a change from a version since replaced, or of no stored customer, is a
    // conflict and writes nothing.
    let suspended = Customer {
        status: CustomerStatus::Suspended,
        version: 2,
        ..customer("cus_zzzz2")
    };
    store
        .commit(changes(vec![Write::UpdateCustomer(suspended.clone())]))
        .await
        .unwrap();
    assert_eq!(store.customer(&suspended.id).await.unwrap(), Some(suspended.clone()));
    let listed = store.customers(None, None, 3).await.unwrap();
    assert_eq!(
        listed,
        [customer("cus_zzzz3"), suspended.clone(), customer("cus_zzzz1")]
    );
    // Each status is a list of its own, paged the same way, which a change moves it between
    // (other cases' customers, listed after these, are left out).
    let in_status = |status, after: Option<&str>, limit| {
        let after = after.map(ops_domain::ids::CustomerId::from);
        async move {
            let mut listed = ids(store.customers(Some(status), after.as_ref(), limit).await.unwrap());
            listed.retain(|id| id.starts_with("cus_zzzz"));
            listed
        }
    };
    assert_eq!(in_status(CustomerStatus::Suspended, None, 10).await, ["cus_zzzz2"]);
    assert_eq!(in_status(CustomerStatus::Active, None, 1).await, ["cus_zzzz3"]);
    assert_eq!(
        in_status(CustomerStatus::Active, Some("cus_zzzz3"), 1).await,
        ["cus_zzzz1"],
        "a status's page starts after the one named, past the others' customers"
    );
    let renamed_from_before = Customer {
        name: "Renamed".into(),
        version: 2,
        ..customer("cus_zzzz2")
    };
    for refused in [
        renamed_from_before,
        Customer {
            version: 2,
            ..customer("cus_zzzz0")
        },
    ] {
        let conflict = store.commit(changes(vec![Write::UpdateCustomer(refused)])).await;
        assert!(matches!(conflict, Err(StoreError::Conflict)), "{conflict:?}");
    }
    assert_eq!(store.customer(&suspended.id).await.unwrap(), Some(suspended));
    assert_eq!(store.customer(&"cus_zzzz0".into()).await.unwrap(), None);
}

/// A customer's users are listed newest first, a page at a time, another customer's apart; a
/// user changed in place is listed once, as they now stand; a user is made once, and only a
/// stored one changes.
async fn users_are_listed_by_customer_and_changed_in_place(store: &dyn Store) {
    let writes = vec![
        Write::InsertUser(user("usr_01a", "cus_users")),
        Write::InsertUser(user("usr_01b", "cus_users")),
        Write::InsertUser(user("usr_01c", "cus_users_other")),
    ];
    store.commit(changes(writes)).await.unwrap();
    let mut deactivated = user("usr_01a", "cus_users");
    deactivated.status = UserStatus::Deactivated;
    deactivated.version = 2;
    store
        .commit(changes(vec![Write::UpdateUser(deactivated.clone())]))
        .await
        .unwrap();
    // A change made from the user as they were before that one is refused: it would bring
    // them back.
    let mut stale = user("usr_01a", "cus_users");
    stale.roles = vec![Role::Maker, Role::Viewer];
    stale.version = 2;
    assert!(matches!(
        store.commit(changes(vec![Write::UpdateUser(stale)])).await,
        Err(StoreError::Conflict)
    ));
    deactivated.roles = vec![Role::Maker, Role::Viewer];
    deactivated.version = 3;
    store
        .commit(changes(vec![Write::UpdateUser(deactivated.clone())]))
        .await
        .unwrap();
    let listed = store.users_of(&"cus_users".into(), None, 10).await.unwrap();
    assert_eq!(listed, [user("usr_01b", "cus_users"), deactivated.clone()]);
    let first = store.users_of(&"cus_users".into(), None, 1).await.unwrap();
    assert_eq!(first, [user("usr_01b", "cus_users")]);
    let next = store
        .users_of(&"cus_users".into(), Some(&first[0].id), 10)
        .await
        .unwrap();
    assert_eq!(next, [deactivated.clone()]);
    assert_eq!(store.user(&"usr_01a".into()).await.unwrap(), Some(deactivated));
    let others = store.users_of(&"cus_users_other".into(), None, 10).await.unwrap();
    assert_eq!(others, [user("usr_01c", "cus_users_other")]);
    assert_eq!(store.users_of(&"cus_users_none".into(), None, 10).await.unwrap(), []);
    assert!(matches!(
        store
            .commit(changes(vec![Write::InsertUser(user("usr_01b", "cus_users"))]))
            .await,
        Err(StoreError::Conflict)
    ));
    assert!(matches!(
        store
            .commit(changes(vec![Write::UpdateUser(User {
                version: 2,
                ..user("usr_01z", "cus_users")
            })]))
            .await,
        Err(StoreError::Conflict)
    ));
    assert_eq!(store.user(&"usr_01z".into()).await.unwrap(), None);
}

/// A customer's keys are listed newest first, a page at a time, the platform's apart, and a key
/// changed in place (rotated, revoked) is listed once, as it now stands.
async fn api_keys_are_listed_by_owner(store: &dyn Store) {
    let writes = vec![
        Write::PutApiKey(api_key("key_01a", Some("cus_keys"))),
        Write::PutApiKey(api_key("key_01b", Some("cus_keys"))),
        Write::PutApiKey(api_key("key_01c", Some("cus_other"))),
        Write::PutApiKey(api_key("key_01d", None)),
    ];
    store.commit(changes(writes)).await.unwrap();
    let mut rotated = api_key("key_01a", Some("cus_keys"));
    rotated.rotated_to = Some("key_01b".into());
    rotated.version = 2;
    store
        .commit(changes(vec![Write::PutApiKey(rotated.clone())]))
        .await
        .unwrap();
    // A change made from the key as it was before that one (a second rotation, a revocation
    // that read it first) is refused, as is a new key under a taken id.
    let mut raced = api_key("key_01a", Some("cus_keys"));
    raced.rotated_to = Some("key_01c".into());
    raced.version = 2;
    for stale in [raced, api_key("key_01a", Some("cus_keys"))] {
        assert!(matches!(
            store.commit(changes(vec![Write::PutApiKey(stale)])).await,
            Err(StoreError::Conflict)
        ));
    }
    assert_eq!(store.api_key(&"key_01a".into()).await.unwrap(), Some(rotated));
    let ids = |keys: Vec<ApiKey>| keys.into_iter().map(|k| k.id).collect::<Vec<_>>();
    let customer = Some(&"cus_keys".into());
    let listed = store.api_keys_of(customer, None, 10).await.unwrap();
    assert_eq!(listed[1].rotated_to.as_deref(), Some("key_01b"));
    assert_eq!(ids(listed), ["key_01b", "key_01a"]);
    assert_eq!(ids(store.api_keys_of(customer, None, 1).await.unwrap()), ["key_01b"]);
    let next = store.api_keys_of(customer, Some(&"key_01b".into()), 10).await.unwrap();
    assert_eq!(ids(next), ["key_01a"]);
    assert_eq!(ids(store.api_keys_of(None, None, 10).await.unwrap()), ["key_01d"]);
    assert_eq!(
        ids(store.api_keys_of(Some(&"cus_none".into()), None, 10).await.unwrap()),
        Vec::<String>::new()
    );
    let found = store.api_key_by_hash("hash-of-key_01a").await.unwrap().unwrap();
    assert_eq!(
        (found.secret_hash.as_str(), found.created_by.as_deref()),
        ("hash-of-key_01a", Some("key_minter"))
    );
    // A secret's hash stands for one key: another key under it is refused, nothing written.
    let mut impostor = api_key("key_01e", Some("cus_keys"));
    impostor.secret_hash = "hash-of-key_01a".into();
    assert!(matches!(
        store.commit(changes(vec![Write::PutApiKey(impostor)])).await,
        Err(StoreError::Conflict)
    ));
    assert_eq!(
        store.api_key_by_hash("hash-of-key_01a").await.unwrap().unwrap().id,
        "key_01a"
    );
    assert_eq!(store.api_key(&"key_01e".into()).await.unwrap(), None);
}

async fn changesets_committed_together_stay_whole_each(store: &dyn Store) {
    let first = operation("op_each1", "cus_each", OperationStatus::Approved);
    let second = operation("op_each2", "cus_each", OperationStatus::Approved);
    let third = operation("op_each3", "cus_each", OperationStatus::Approved);
    store
        .commit(changes(vec![Write::InsertOperation(first.clone())]))
        .await
        .unwrap();
    // The second changeset inserts, then fails a condition: it alone writes nothing.
    let outcomes = store
        .commit_each(vec![
            changes(vec![audit("op_each1", "processing")]),
            changes(vec![
                Write::InsertOperation(second.clone()),
                Write::InsertOperation(first.clone()),
            ]),
            changes(vec![
                Write::InsertOperation(third.clone()),
                audit("op_each3", "approved"),
            ]),
        ])
        .await;
    assert!(matches!(
        outcomes.as_slice(),
        [Ok(()), Err(StoreError::Conflict), Ok(())]
    ));
    assert_eq!(store.operation(&second.id).await.unwrap(), None);
    assert_eq!(store.operation(&third.id).await.unwrap(), Some(third));
    let history = store.operation_history(&first.id).await.unwrap();
    assert_eq!(history.len(), 1);
    assert!(store.commit_each(vec![]).await.is_empty());
}

async fn entity_and_audit_land_together(store: &dyn Store) {
    let op = operation("op_a1", "cus_a", OperationStatus::Approved);
    store
        .commit(changes(vec![
            Write::InsertOperation(op.clone()),
            audit("op_a1", "approved"),
        ]))
        .await
        .unwrap();
    assert_eq!(store.operation(&"op_a1".into()).await.unwrap(), Some(op.clone()));

    // A failing condition anywhere in the changeset writes nothing at all.
    let mut stale = op.clone();
    stale.status = OperationStatus::Cancelled; // version 1 again: the stored one is already 1
    let result = store
        .commit(changes(vec![
            audit("op_a1", "cancelled"),
            Write::UpdateOperation(stale),
        ]))
        .await;
    assert!(matches!(result, Err(StoreError::Conflict)));
    assert_eq!(store.operation(&"op_a1".into()).await.unwrap(), Some(op.clone()));
    let history = store.operation_history(&"op_a1".into()).await.unwrap();
    assert_eq!(history.len(), 1, "the refused changeset left no audit entry");

    // A lone write is held to its condition as well: an update made from a stale read loses.
    let mut skipped = op.clone();
    skipped.version = 3;
    let lone = store.commit(changes(vec![Write::UpdateOperation(skipped)])).await;
    assert!(matches!(lone, Err(StoreError::Conflict)));
    assert_eq!(store.operation(&"op_a1".into()).await.unwrap(), Some(op.clone()));

    // Inserting an id twice is a conflict, not an overwrite.
    let again = store.commit(changes(vec![Write::InsertOperation(op)])).await;
    assert!(matches!(again, Err(StoreError::Conflict)));
}

async fn lists_are_newest_first_filtered_and_paged(store: &dyn Store) {
    for i in 0..5 {
        let status = if i % 2 == 0 {
            OperationStatus::PendingApproval
        } else {
            OperationStatus::Rejected
        };
        let op = operation(&format!("op_l{i}"), "cus_l", status);
        store.commit(changes(vec![Write::InsertOperation(op)])).await.unwrap();
    }
    let listed = |query: OperationQuery| async move {
        let found = store.operations(&query).await.unwrap();
        found.items.into_iter().map(|o| o.id).collect::<Vec<_>>()
    };
    let query = OperationQuery {
        customer_id: Some("cus_l".into()),
        limit: 3,
        ..Default::default()
    };
    assert_eq!(listed(query.clone()).await, ["op_l4", "op_l3", "op_l2"]);
    let next = OperationQuery {
        starting_after: Some("op_l2".into()),
        ..query.clone()
    };
    assert_eq!(listed(next).await, ["op_l1", "op_l0"]);
    let pending = OperationQuery {
        status: Some(OperationStatus::PendingApproval),
        ..query.clone()
    };
    assert_eq!(listed(pending).await, ["op_l4", "op_l2", "op_l0"]);
    let other = OperationQuery {
        customer_id: Some("cus_other".into()),
        ..query
    };
    assert!(listed(other).await.is_empty());

    // The platform's lists span every customer (op_a1 is cus_a's, from the first test).
    let platform = OperationQuery {
        limit: 3,
        ..Default::default()
    };
    assert_eq!(listed(platform.clone()).await, ["op_l4", "op_l3", "op_l2"]);
    let next = OperationQuery {
        starting_after: Some("op_l2".into()),
        ..platform.clone()
    };
    assert_eq!(listed(next).await, ["op_l1", "op_l0", "op_a1"]);
    let approved = OperationQuery {
        status: Some(OperationStatus::Approved),
        ..platform.clone()
    };
    assert_eq!(listed(approved).await, ["op_a1"]);
    let rejected_after = OperationQuery {
        status: Some(OperationStatus::Rejected),
        starting_after: Some("op_l3".into()),
        ..platform
    };
    assert_eq!(listed(rejected_after).await, ["op_l1"]);
}

/// Approved and processing operations may share a list in a store ([`crate::aws`] keeps them
/// in one): each status's list still finds exactly its own, newest first, page after page, for
/// a customer and for the platform, including an operation that moved from one to the other.
/// Answers how many pages stopped short of their limit (at a store's read budget).
pub async fn statuses_sharing_a_list_are_listed_apart(store: &dyn Store) -> usize {
    let approved_at = [3, 8];
    let mut writes = vec![];
    for i in 0..12 {
        let status = if approved_at.contains(&i) {
            OperationStatus::Approved
        } else {
            OperationStatus::Processing
        };
        writes.push(Write::InsertOperation(operation(
            &format!("op_sh{i:02}"),
            "cus_sh",
            status,
        )));
    }
    let mut moved = operation("op_sh12", "cus_sh", OperationStatus::Approved);
    writes.push(Write::InsertOperation(moved.clone()));
    store.commit(changes(writes)).await.unwrap();
    moved.status = OperationStatus::Processing;
    moved.version = 2;
    store
        .commit(changes(vec![Write::UpdateOperation(moved)]))
        .await
        .unwrap();

    let newest_first = |statuses: &[OperationStatus]| {
        let mut ids: Vec<String> = (0..13)
            .filter(|i| {
                let approved = approved_at.contains(i);
                statuses.contains(&if approved {
                    OperationStatus::Approved
                } else {
                    OperationStatus::Processing
                })
            })
            .map(|i| format!("op_sh{i:02}"))
            .collect();
        ids.reverse();
        ids
    };
    let mut stopped_short = 0;
    for customer in [Some("cus_sh"), None] {
        for status in [OperationStatus::Approved, OperationStatus::Processing] {
            let (mut found, mut after) = (Vec::<String>::new(), None::<String>);
            for page in 0.. {
                assert!(page < 60, "paging does not end");
                let query = OperationQuery {
                    customer_id: customer.map(Into::into),
                    status: Some(status),
                    starting_after: after.take().map(|id| id.as_str().into()),
                    limit: 3,
                    ..Default::default()
                };
                let listed = store.operations(&query).await.unwrap();
                assert!(listed.items.iter().all(|op| op.status == status), "{status:?}");
                let full = listed.items.len() == query.limit;
                let last = listed.items.last().map(|op| op.id.to_string());
                found.extend(listed.items.iter().map(|op| op.id.to_string()));
                after = match (listed.read_up_to, full) {
                    (Some(read_up_to), false) => {
                        stopped_short += 1;
                        Some(read_up_to)
                    }
                    (_, true) => last,
                    (None, false) => break,
                };
            }
            found.retain(|id| id.starts_with("op_sh"));
            assert_eq!(found, newest_first(&[status]), "{status:?} of {customer:?}");
        }
    }
    stopped_short
}

async fn events_are_listed_by_customer_and_type(store: &dyn Store) {
    let event = |id: &str, customer: &str, kind: &str| {
        let kind = kind.trim_start_matches("operation.");
        Write::Event(Event::of_operation(
            id.into(),
            kind,
            &operation("op_e", customer, OperationStatus::Approved),
        ))
    };
    store
        .commit(changes(vec![
            event("evt_1", "cus_e", "operation.created"),
            event("evt_2", "cus_e", "operation.approved"),
            event("evt_3", "cus_f", "operation.created"),
            event("evt_4", "cus_e", "operation.created"),
        ]))
        .await
        .unwrap();
    let ids = |events: Vec<Event>| events.into_iter().map(|e| e.id).collect::<Vec<_>>();
    let list = |customer: Option<&str>, kind: Option<&str>, after: Option<&str>| EventQuery {
        customer_id: customer.map(Into::into),
        kind: kind.map(Into::into),
        starting_after: after.map(Into::into),
        limit: 10,
    };
    let listed = |query| async move { ids(store.events(&query).await.unwrap().items) };
    assert_eq!(
        listed(list(Some("cus_e"), None, None)).await,
        ["evt_4", "evt_2", "evt_1"]
    );
    assert_eq!(
        listed(list(Some("cus_e"), Some("operation.created"), None)).await,
        ["evt_4", "evt_1"]
    );
    assert_eq!(
        listed(list(None, Some("operation.created"), Some("evt_4"))).await,
        ["evt_3", "evt_1"]
    );
    // A page of one event of a type reads past the others to find it.
    let one_created = EventQuery {
        limit: 1,
        ..list(Some("cus_e"), Some("operation.created"), Some("evt_4"))
    };
    assert_eq!(listed(one_created).await, ["evt_1"]);
    assert_eq!(
        listed(list(None, None, None)).await,
        ["evt_4", "evt_3", "evt_2", "evt_1"]
    );

    // A batch of sends reads its deliveries with their events' JSON as stored (the event
    // itself, written out once); an unknown id is left out, and a delivery whose event is gone
    // comes without one.
    let stored = store.event(&"evt_2".into()).await.unwrap().unwrap();
    let json = serde_json::to_string(&stored).unwrap();
    let delivery = |id: &str, event: &str| ops_domain::webhooks::Delivery {
        id: id.into(),
        event_id: event.into(),
        endpoint_id: "we_e".into(),
        url: "https://receiver.example/hook".into(),
        status: ops_domain::webhooks::DeliveryStatus::Pending,
        attempts: vec![],
        next_attempt_at: None,
        created_at: OffsetDateTime::UNIX_EPOCH,
        follow_up: None,
        version: 1,
    };
    let (sent, orphan) = (delivery("whd_e1", "evt_2"), delivery("whd_e2", "evt_9"));
    store
        .commit(changes(vec![
            Write::InsertDelivery(sent.clone()),
            Write::InsertDelivery(orphan.clone()),
        ]))
        .await
        .unwrap();
    let ids = ["whd_e2".into(), "whd_e0".into(), "whd_e1".into()];
    let mut found = store.deliveries_to_send(&ids).await.unwrap();
    found.sort_by(|a, b| a.0.id.cmp(&b.0.id));
    assert_eq!(found, [(sent, Some(json)), (orphan, None)]);
}

/// Run on a store that reads at most three rows or entries a request for a filter that is no
/// key (its test sets that): a `type` filter pages through a history longer than that, and
/// finds every match once, newest first, some pages stopping short and saying where they read
/// up to; for the customer's lists and the platform's, of operations and of events.
/// A key's document as stored before keys had versions (`key_legacy`, its hash `hash-legacy`).
pub const LEGACY_API_KEY: &str = r#"{"id":"key_legacy","customer_id":"cus_legacy","user_id":null,"environment":"test","scopes":["operations:read"],"created_at":"2025-01-01T00:00:00Z","expires_at":null,"revoked_at":null,"secret_hash":"hash-legacy"}"#;

/// A user's document as stored before users had versions (`usr_legacy`).
pub const LEGACY_USER: &str = r#"{"id":"usr_legacy","customer_id":"cus_legacy","name":"Old","email":"old@example.com","roles":["approver"],"status":"active","created_at":"2025-01-01T00:00:00Z"}"#;

/// The key [`LEGACY_API_KEY`] and the user [`LEGACY_USER`], stored as they were, read as version
/// 1: a first change is taken and a second made from the same read (a rotation racing a
/// revocation, two admins' changes) is a conflict.
pub async fn legacy_keys_and_users_change_from_version_one(store: &dyn Store) {
    let stored = store.user(&"usr_legacy".into()).await.unwrap().unwrap();
    assert_eq!(stored.version, 1);
    let deactivated = User {
        status: UserStatus::Deactivated,
        version: 2,
        ..stored.clone()
    };
    let promoted = User {
        roles: vec![Role::Admin],
        version: 2,
        ..stored
    };
    store
        .commit(changes(vec![Write::UpdateUser(deactivated.clone())]))
        .await
        .unwrap();
    assert!(matches!(
        store.commit(changes(vec![Write::UpdateUser(promoted)])).await,
        Err(StoreError::Conflict)
    ));
    assert_eq!(store.user(&"usr_legacy".into()).await.unwrap(), Some(deactivated));

    let stored = store.api_key(&"key_legacy".into()).await.unwrap().unwrap();
    assert_eq!(stored.version, 1);
    let revoked = ApiKey {
        revoked_at: Some(OffsetDateTime::UNIX_EPOCH),
        version: 2,
        ..stored.clone()
    };
    let rotated = ApiKey {
        rotated_to: Some("key_successor".into()),
        version: 2,
        ..stored
    };
    store
        .commit(changes(vec![Write::PutApiKey(revoked.clone())]))
        .await
        .unwrap();
    assert!(matches!(
        store.commit(changes(vec![Write::PutApiKey(rotated)])).await,
        Err(StoreError::Conflict)
    ));
    assert_eq!(store.api_key(&"key_legacy".into()).await.unwrap(), Some(revoked));
}

pub async fn type_filters_read_a_bounded_stretch_a_page(store: &dyn Store) {
    let (mut writes, mut collections, mut approvals) = (vec![], vec![], vec![]);
    for i in 0..30 {
        let mut op = operation(&format!("op_t{i:02}"), "cus_t", OperationStatus::Completed);
        if i % 10 == 3 {
            op.kind = OperationType::Collection;
            collections.push(op.id.to_string());
        }
        let event_id = format!("evt_t{i:02}");
        let kind = if i % 10 == 7 { "approved" } else { "created" };
        if kind == "approved" {
            approvals.push(event_id.clone());
        }
        writes.push(Write::Event(Event::of_operation(event_id.as_str().into(), kind, &op)));
        writes.push(Write::InsertOperation(op));
    }
    for chunk in writes.chunks(24) {
        store.commit(changes(chunk.to_vec())).await.unwrap();
    }
    collections.reverse();
    approvals.reverse();
    for customer in [Some("cus_t"), None] {
        let operations = page_through(|after| collections_after(store, customer, after)).await;
        assert_eq!(operations, collections, "{customer:?}");
        let events = page_through(|after| async move {
            let query = EventQuery {
                customer_id: customer.map(Into::into),
                kind: Some("operation.approved".into()),
                starting_after: after.map(|id| id.as_str().into()),
                limit: 11,
            };
            let listed = store.events(&query).await.unwrap();
            (
                listed.items.iter().map(|e| e.id.to_string()).collect(),
                listed.read_up_to,
            )
        })
        .await;
        assert_eq!(events, approvals, "{customer:?}");
    }
}

/// One page of the collections among `customer`'s operations (the platform's: `None`) after
/// `after`: their ids, and where the read stopped short, if it did.
pub async fn collections_after(
    store: &dyn Store,
    customer: Option<&str>,
    after: Option<String>,
) -> (Vec<String>, Option<String>) {
    let query = OperationQuery {
        customer_id: customer.map(Into::into),
        kind: Some(OperationType::Collection),
        starting_after: after.map(|id| id.as_str().into()),
        limit: 11,
        ..Default::default()
    };
    let listed = store.operations(&query).await.unwrap();
    (
        listed.items.iter().map(|o| o.id.to_string()).collect(),
        listed.read_up_to,
    )
}

/// Every id a list finds, page after page (`read` gets where the last page read up to, and
/// returns a page's ids and where it stopped short, if it did); at least one page must have.
pub async fn page_through<F, Fut>(read: F) -> Vec<String>
where
    F: Fn(Option<String>) -> Fut,
    Fut: std::future::Future<Output = (Vec<String>, Option<String>)>,
{
    let (mut found, mut after, mut stopped_short) = (vec![], None, 0);
    for _ in 0..60 {
        let (ids, read_up_to) = read(after.take()).await;
        found.extend(ids);
        match read_up_to {
            Some(id) => {
                stopped_short += 1;
                after = Some(id);
            }
            None => {
                assert!(stopped_short > 0, "no page stopped at the read budget");
                return found;
            }
        }
    }
    panic!("paging does not end");
}

async fn concurrent_conflicting_updates_have_one_winner(store: Arc<dyn Store>) {
    let op = operation("op_c1", "cus_c", OperationStatus::PendingApproval);
    store
        .commit(changes(vec![Write::InsertOperation(op.clone())]))
        .await
        .unwrap();
    let contenders = [
        OperationStatus::Approved,
        OperationStatus::Cancelled,
        OperationStatus::Rejected,
    ]
    .into_iter()
    .cycle()
    .take(12)
    .map(|status| {
        let store = store.clone();
        let mut next = op.clone();
        next.status = status;
        next.version = 2;
        tokio::spawn(async move {
            let result = store
                .commit(changes(vec![
                    Write::UpdateOperation(next),
                    audit("op_c1", status.as_str()),
                ]))
                .await;
            (status, result)
        })
    })
    .collect::<Vec<_>>();
    let mut winners = vec![];
    for contender in contenders {
        let (status, result) = contender.await.unwrap();
        match result {
            Ok(()) => winners.push(status),
            Err(e) => assert!(matches!(e, StoreError::Conflict), "{e}"),
        }
    }
    assert_eq!(winners.len(), 1, "exactly one concurrent update wins");
    let stored = store.operation(&"op_c1".into()).await.unwrap().unwrap();
    assert_eq!(stored.status, winners[0]);
    assert_eq!(
        store.operation_history(&"op_c1".into()).await.unwrap().len(),
        1,
        "only the winner's audit entry"
    );
}

/// Changesets committed at once (which a store may group into one transaction to share a
/// sync to disk) are each whole or absent on their own: a failed condition in one takes
/// nothing of the others with it, and each caller hears its own outcome.
async fn concurrent_changesets_each_get_their_own_outcome(store: Arc<dyn Store>) {
    let taken = operation("op_g_taken", "cus_g", OperationStatus::Approved);
    store
        .commit(changes(vec![Write::InsertOperation(taken.clone())]))
        .await
        .unwrap();
    let racers = (0..32)
        .map(|n| {
            let store = store.clone();
            let taken = taken.clone();
            tokio::spawn(async move {
                let id = format!("op_g{n:02}");
                let mut writes = vec![
                    Write::InsertOperation(operation(&id, "cus_g", OperationStatus::Approved)),
                    audit(&id, "approved"),
                ];
                if n % 3 == 0 {
                    writes.push(Write::InsertOperation(taken));
                }
                (n, id, store.commit(changes(writes)).await)
            })
        })
        .collect::<Vec<_>>();
    for racer in racers {
        let (n, id, outcome) = racer.await.unwrap();
        let stored = store.operation(&id.as_str().into()).await.unwrap();
        let history = store.operation_history(&id.as_str().into()).await.unwrap();
        if n % 3 == 0 {
            assert!(matches!(outcome, Err(StoreError::Conflict)), "{id}: {outcome:?}");
            assert_eq!((stored, history.len()), (None, 0), "{id} wrote nothing");
        } else {
            assert!(outcome.is_ok(), "{id}: {outcome:?}");
            assert!(
                stored.is_some() && history.len() == 1,
                "{id} wrote its operation and audit entry"
            );
        }
    }
}

async fn idempotency_claims(store: &dyn Store) {
    let now = OffsetDateTime::UNIX_EPOCH + time::Duration::days(10_000);
    let claim = |fingerprint: &str, at: OffsetDateTime| IdempotencyClaim {
        scope: "test:cus_i".into(),
        key: "k1".into(),
        fingerprint: fingerprint.into(),
        now: at,
    };
    assert_eq!(
        store.claim_idempotency_key(&claim("f1", now)).await.unwrap(),
        ClaimOutcome::Claimed
    );
    assert_eq!(
        store.claim_idempotency_key(&claim("f1", now)).await.unwrap(),
        ClaimOutcome::InFlight
    );
    assert_eq!(
        store.claim_idempotency_key(&claim("f2", now)).await.unwrap(),
        ClaimOutcome::Mismatch
    );

    let response = StoredResponse {
        status: 201,
        body: b"{\"id\":\"op_1\"}".to_vec(),
    };
    let complete = Write::CompleteIdempotency {
        scope: "test:cus_i".into(),
        key: "k1".into(),
        response: response.clone(),
    };
    store.commit(changes(vec![complete.clone()])).await.unwrap();
    assert_eq!(
        store.claim_idempotency_key(&claim("f1", now)).await.unwrap(),
        ClaimOutcome::Replay(response.clone())
    );
    // Completing twice is refused: one key, one effect.
    assert!(matches!(
        store.commit(changes(vec![complete])).await,
        Err(StoreError::Conflict)
    ));
    // Still remembered after 23 hours, forgotten after the retention period.
    let later = now + time::Duration::hours(23);
    assert_eq!(
        store.claim_idempotency_key(&claim("f1", later)).await.unwrap(),
        ClaimOutcome::Replay(response)
    );
    let much_later = now + time::Duration::hours(25);
    assert_eq!(
        store.claim_idempotency_key(&claim("f2", much_later)).await.unwrap(),
        ClaimOutcome::Claimed
    );

    // A released claim (its request failed before any effect) can be claimed afresh, and a
    // claim abandoned by a dead process is taken over after its timeout.
    let other = |at: OffsetDateTime| IdempotencyClaim {
        scope: "test:cus_i".into(),
        key: "k2".into(),
        fingerprint: "f".into(),
        now: at,
    };
    assert_eq!(
        store.claim_idempotency_key(&other(now)).await.unwrap(),
        ClaimOutcome::Claimed
    );
    store.release_idempotency_key("test:cus_i", "k2").await.unwrap();
    assert_eq!(
        store.claim_idempotency_key(&other(now)).await.unwrap(),
        ClaimOutcome::Claimed
    );
    assert_eq!(
        store
            .claim_idempotency_key(&other(now + time::Duration::seconds(61)))
            .await
            .unwrap(),
        ClaimOutcome::Claimed
    );
}

/// An answer of a few kilobytes (a created operation's body), taken in the changeset or
/// completing a claim, is replayed byte for byte (a store may keep it deflated).
async fn idempotency_replays_long_answers_byte_for_byte(store: &dyn Store) {
    let now = OffsetDateTime::UNIX_EPOCH + time::Duration::days(10_000);
    let claim = |key: &str| IdempotencyClaim {
        scope: "test:cus_long".into(),
        key: key.into(),
        fingerprint: "f".into(),
        now,
    };
    let items: Vec<String> = (0..80)
        .map(|i| format!("{{\"id\":\"itm_{i:04}\",\"amount\":{i}}}"))
        .collect();
    let response = StoredResponse {
        status: 201,
        body: format!("{{\"id\":\"op_long\",\"items\":[{}]}}\n", items.join(",")).into_bytes(),
    };
    assert!(response.body.len() > 2048);
    let taken = Write::TakeIdempotency {
        claim: claim("taken"),
        response: response.clone(),
    };
    store.commit(changes(vec![taken])).await.unwrap();
    assert_eq!(
        store.idempotency_record(&claim("taken")).await.unwrap(),
        ClaimOutcome::Replay(response.clone())
    );
    assert_eq!(
        store.claim_idempotency_key(&claim("claimed")).await.unwrap(),
        ClaimOutcome::Claimed
    );
    let complete = Write::CompleteIdempotency {
        scope: "test:cus_long".into(),
        key: "claimed".into(),
        response: response.clone(),
    };
    store.commit(changes(vec![complete])).await.unwrap();
    assert_eq!(
        store.claim_idempotency_key(&claim("claimed")).await.unwrap(),
        ClaimOutcome::Replay(response)
    );
}

/// A key taken in the effect's own changeset: free until a changeset takes it, then the
/// stored answer; a second take (a racing request with the same key) is a conflict, as is a
/// take over another request's live claim; a key past its retention, or a claim abandoned by a
/// dead process, can be taken.
async fn idempotency_taken_in_the_changeset(store: &dyn Store) {
    let now = OffsetDateTime::UNIX_EPOCH + time::Duration::days(10_000);
    let claim = |key: &str, fingerprint: &str, at: OffsetDateTime| IdempotencyClaim {
        scope: "test:cus_t".into(),
        key: key.into(),
        fingerprint: fingerprint.into(),
        now: at,
    };
    let response = StoredResponse {
        status: 201,
        body: b"{\"id\":\"op_t\"}".to_vec(),
    };
    let take = |claim: IdempotencyClaim| Write::TakeIdempotency {
        claim,
        response: response.clone(),
    };
    assert_eq!(
        store.idempotency_record(&claim("t1", "f1", now)).await.unwrap(),
        ClaimOutcome::Claimed,
        "an unused key is free, and reading it writes nothing"
    );
    assert_eq!(
        store.idempotency_record(&claim("t1", "f1", now)).await.unwrap(),
        ClaimOutcome::Claimed
    );
    store.commit(changes(vec![take(claim("t1", "f1", now))])).await.unwrap();
    assert_eq!(
        store.idempotency_record(&claim("t1", "f1", now)).await.unwrap(),
        ClaimOutcome::Replay(response.clone())
    );
    assert_eq!(
        store.idempotency_record(&claim("t1", "f2", now)).await.unwrap(),
        ClaimOutcome::Mismatch
    );
    assert!(matches!(
        store.commit(changes(vec![take(claim("t1", "f1", now))])).await,
        Err(StoreError::Conflict)
    ));
    // The same as any claim: a replay for 24 hours, then the key is free again.
    assert_eq!(
        store.claim_idempotency_key(&claim("t1", "f1", now)).await.unwrap(),
        ClaimOutcome::Replay(response.clone())
    );
    let much_later = now + time::Duration::hours(25);
    assert_eq!(
        store.idempotency_record(&claim("t1", "f2", much_later)).await.unwrap(),
        ClaimOutcome::Claimed
    );
    store
        .commit(changes(vec![take(claim("t1", "f2", much_later))]))
        .await
        .unwrap();

    // A live claim by a request that claimed first holds the key; a dead one's does not.
    assert_eq!(
        store.claim_idempotency_key(&claim("t2", "f1", now)).await.unwrap(),
        ClaimOutcome::Claimed
    );
    assert_eq!(
        store.idempotency_record(&claim("t2", "f1", now)).await.unwrap(),
        ClaimOutcome::InFlight
    );
    assert!(matches!(
        store.commit(changes(vec![take(claim("t2", "f1", now))])).await,
        Err(StoreError::Conflict)
    ));
    let after_timeout = now + time::Duration::seconds(61);
    assert_eq!(
        store
            .idempotency_record(&claim("t2", "f1", after_timeout))
            .await
            .unwrap(),
        ClaimOutcome::Claimed
    );
    store
        .commit(changes(vec![take(claim("t2", "f1", after_timeout))]))
        .await
        .unwrap();
    assert_eq!(
        store
            .idempotency_record(&claim("t2", "f1", after_timeout))
            .await
            .unwrap(),
        ClaimOutcome::Replay(response)
    );
}

/// An operation's transactions are found from it, in the order of their ids: those made so far
/// of the ones its items name, and no other operation's.
async fn an_operations_transactions_are_found_from_it(store: &dyn Store) {
    let mut op = operation("op_txs", "cus_txs", OperationStatus::Processing);
    op.items = ["itm_txs_b", "itm_txs_a", "itm_txs_c"]
        .into_iter()
        .map(|id| Item {
            id: id.into(),
            beneficiary: Beneficiary {
                id_type: "RUT".into(),
                id: "1".into(),
            },
            destination: Destination {
                rail: "psp-local:sandbox".into(),
                account: "1".into(),
                account_id: None,
            },
            amount: Amount::new(100).unwrap(),
            reference: None,
            transaction_id: Some(id.replace("itm_", "txn_").into()),
        })
        .collect();
    let made = |id: &str, operation: &str| {
        let mut transaction = super::reconciliations::transaction(id, "psp-local:sandbox", None);
        transaction.operation_id = operation.into();
        Write::InsertTransaction(transaction)
    };
    store
        .commit(changes(vec![
            Write::InsertOperation(op.clone()),
            made("txn_txs_b", "op_txs"),
            made("txn_txs_a", "op_txs"),
            made("txn_txs_other", "op_txs_other"),
        ]))
        .await
        .unwrap();
    let found: Vec<String> = store
        .transactions_of_operation(&op)
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.id.to_string())
        .collect();
    assert_eq!(found, ["txn_txs_a", "txn_txs_b"], "the third is not made yet");
}

/// The API refuses an operation whose stored form exceeds its cap; one just under it, with
/// the longest fields, is stored with its events, and still fits once it has gained its
/// transaction ids (DynamoDB holds at most 400 KB in an item).
async fn the_largest_operation_the_api_accepts_is_stored(store: &dyn Store) {
    let mut op = operation("op_big", "cus_big", OperationStatus::Approved);
    let item = |n: usize| Item {
        id: format!("itm_{n:026}").into(),
        beneficiary: Beneficiary {
            id_type: "RUT".into(),
            id: "9".repeat(64),
        },
        destination: Destination {
            rail: "psp-local:sandbox".into(),
            account: "0".repeat(64),
            account_id: None,
        },
        amount: Amount::new(999_999_999_999).unwrap(),
        reference: Some("r".repeat(140)),
        transaction_id: None,
    };
    // Every item serializes to the same length (plus a comma between two).
    let bare = serde_json::to_vec(&op).unwrap().len();
    let per_item = serde_json::to_vec(&item(0)).unwrap().len() + 1;
    let fitting = (1..)
        .take_while(|n| check_operation_size(bare + n * per_item, *n).is_ok())
        .last();
    op.items = (0..fitting.unwrap()).map(item).collect();
    assert!(check_operation_size(serde_json::to_vec(&op).unwrap().len(), op.items.len()).is_ok());
    let event = |id: &str, kind: &str, op: &Operation| Write::Event(Event::of_operation(id.into(), kind, op));
    store
        .commit(changes(vec![
            Write::InsertOperation(op.clone()),
            audit("op_big", "approved"),
            event("evt_big1", "created", &op),
            event("evt_big2", "approved", &op),
        ]))
        .await
        .unwrap();
    for item in op.items.iter_mut() {
        item.transaction_id = Some(item.id.replacen("itm_", "txn_", 1).into());
    }
    op.status = OperationStatus::Processing;
    op.version = 2;
    store
        .commit(changes(vec![
            Write::UpdateOperation(op.clone()),
            audit("op_big", "processing"),
            event("evt_big3", "processing", &op),
        ]))
        .await
        .unwrap();
    assert_eq!(store.operation(&"op_big".into()).await.unwrap(), Some(op));
}
