//! Events, webhook endpoints and their deliveries.

use super::{changes, operation};
use ops_domain::access::Environment;
use ops_domain::event::Event;
use ops_domain::operations::OperationStatus;
use ops_domain::ports::{Store, StoreError, Write};
use ops_domain::webhooks::EventQuery;
use time::OffsetDateTime;

/// What a customer's event is dispatched to: its customer's endpoints and the platform's, not
/// another customer's, and not one deleted since.
pub(super) async fn an_events_endpoints_are_its_customers_and_the_platforms_live_ones(store: &dyn Store) {
    use ops_domain::webhooks::{EndpointStatus, WebhookEndpoint};
    let endpoint = |id: &str, customer: Option<&str>| WebhookEndpoint {
        id: id.into(),
        customer_id: customer.map(Into::into),
        url: "https://receiver.example/hook".into(),
        description: Some(format!("{id}'s receiver")),
        events: vec!["*".into()],
        retry_policy: Default::default(),
        breaker: Default::default(),
        rate_limit: None,
        ordering: Default::default(),
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
pub(super) async fn an_owners_endpoint_count_moves_one_version_at_a_time(store: &dyn Store) {
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
pub(super) async fn an_endpoints_failed_deliveries_are_those_awaiting_a_follow_up(store: &dyn Store) {
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
        in_line_of: None,
        operation_id: None,
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

    // A delivery waiting for its disabled endpoint is listed in its event's place, and leaves
    // the list once it is sent on.
    let mut waiting = delivery("whd_f8", "evt_f4a", endpoint, DeliveryStatus::Waiting);
    store
        .commit(changes(vec![Write::InsertDelivery(waiting.clone())]))
        .await
        .unwrap();
    assert_eq!(listed(10).await, ["whd_f2", "whd_f3", "whd_f8", "whd_f5"]);
    waiting.status = DeliveryStatus::Pending;
    waiting.version = 2;
    store
        .commit(changes(vec![Write::UpdateDelivery(waiting)]))
        .await
        .unwrap();
    assert_eq!(listed(10).await, ["whd_f2", "whd_f3", "whd_f5"]);
}

/// An endpoint's health is stored one version at a time.
pub(super) async fn an_endpoints_health_moves_one_version_at_a_time(store: &dyn Store) {
    use ops_domain::webhooks::EndpointHealth;
    let endpoint = "whe_health".into();
    assert_eq!(store.endpoint_health(&endpoint).await.unwrap(), None);
    let mut health = EndpointHealth::new("whe_health".into(), OffsetDateTime::UNIX_EPOCH);
    health.version = 1;
    health.consecutive_failures = 3;
    store
        .commit(changes(vec![Write::PutEndpointHealth(health.clone())]))
        .await
        .unwrap();
    assert_eq!(store.endpoint_health(&endpoint).await.unwrap(), Some(health.clone()));
    let again = store
        .commit(changes(vec![Write::PutEndpointHealth(health.clone())]))
        .await;
    assert!(matches!(again, Err(StoreError::Conflict)), "{again:?}");
    health.version = 2;
    health.consecutive_failures = 0;
    store
        .commit(changes(vec![Write::PutEndpointHealth(health.clone())]))
        .await
        .unwrap();
    assert_eq!(store.endpoint_health(&endpoint).await.unwrap(), Some(health));
}

/// A delivery line is kept per endpoint and operation, one version at a time.
pub(super) async fn a_delivery_line_moves_one_version_at_a_time(store: &dyn Store) {
    use ops_domain::webhooks::{DeliveryLine, InLine};
    let (endpoint, operation, other) = ("whe_line".into(), "op_line".into(), "op_other".into());
    assert_eq!(store.delivery_line(&endpoint, &operation).await.unwrap(), None);
    let mut line = DeliveryLine {
        endpoint_id: "whe_line".into(),
        operation_id: "op_line".into(),
        waiting: vec![InLine {
            event_id: "evt_1".into(),
            delivery_id: "whd_1".into(),
        }],
        version: 1,
    };
    store
        .commit(changes(vec![Write::PutDeliveryLine(line.clone())]))
        .await
        .unwrap();
    assert_eq!(
        store.delivery_line(&endpoint, &operation).await.unwrap(),
        Some(line.clone())
    );
    assert_eq!(
        store.delivery_line(&endpoint, &other).await.unwrap(),
        None,
        "one line an operation"
    );
    let again = store.commit(changes(vec![Write::PutDeliveryLine(line.clone())])).await;
    assert!(matches!(again, Err(StoreError::Conflict)), "{again:?}");
    line.version = 2;
    line.waiting.clear();
    store
        .commit(changes(vec![Write::PutDeliveryLine(line.clone())]))
        .await
        .unwrap();
    assert_eq!(store.delivery_line(&endpoint, &operation).await.unwrap(), Some(line));
}

pub(super) async fn events_are_listed_by_customer_and_type(store: &dyn Store) {
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
        in_line_of: None,
        operation_id: None,
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

/// An operation's deliveries are listed by event, then id, a page at a time, and each event's
/// are found from it, whether kept by operation or (made before that) by event alone.
pub(super) async fn an_operations_deliveries_are_listed_by_event(store: &dyn Store) {
    use ops_domain::webhooks::{Delivery, DeliveryStatus};
    let delivery = |id: &str, event: &str, operation: Option<&str>| Delivery {
        id: id.into(),
        event_id: event.into(),
        endpoint_id: "whe_ops".into(),
        url: "https://receiver.example/hook".into(),
        status: DeliveryStatus::Pending,
        attempts: vec![],
        next_attempt_at: None,
        created_at: OffsetDateTime::UNIX_EPOCH,
        follow_up: None,
        in_line_of: None,
        operation_id: operation.map(Into::into),
        version: 1,
    };
    let mut writes = vec![];
    for (id, event, operation) in [
        ("whd_o3", "evt_o2", Some("op_od")),
        ("whd_o1", "evt_o1", Some("op_od")),
        ("whd_o2", "evt_o1", Some("op_od")),
        ("whd_o4", "evt_o3", Some("op_other")),
        ("whd_o0", "evt_o1", None),
    ] {
        writes.push(Write::InsertDelivery(delivery(id, event, operation)));
    }
    store.commit(changes(writes)).await.unwrap();
    let ids = |found: Vec<Delivery>| found.into_iter().map(|d| d.id.to_string()).collect::<Vec<_>>();
    let operation = "op_od".into();
    let all = store.deliveries_of_operation(&operation, None, 10).await.unwrap();
    assert_eq!(ids(all.clone()), ["whd_o1", "whd_o2", "whd_o3"]);
    let first = store.deliveries_of_operation(&operation, None, 2).await.unwrap();
    assert_eq!(ids(first.clone()), ["whd_o1", "whd_o2"]);
    let rest = store
        .deliveries_of_operation(&operation, first.last(), 2)
        .await
        .unwrap();
    assert_eq!(ids(rest), ["whd_o3"]);
    assert!(store
        .deliveries_of_operation(&"op_none".into(), None, 10)
        .await
        .unwrap()
        .is_empty());

    // An event's, found with its operation: those kept by operation and the older one alone.
    let of_event = store
        .deliveries_of_event(&"evt_o1".into(), Some(&operation))
        .await
        .unwrap();
    assert_eq!(ids(of_event), ["whd_o0", "whd_o1", "whd_o2"]);
    let other = store
        .deliveries_of_event(&"evt_o3".into(), Some(&"op_other".into()))
        .await
        .unwrap();
    assert_eq!(ids(other), ["whd_o4"]);
    // And once updated, a delivery stays where it is listed.
    let mut moved = all[0].clone();
    moved.status = DeliveryStatus::Delivered;
    moved.version = 2;
    store.commit(changes(vec![Write::UpdateDelivery(moved)])).await.unwrap();
    let again = store.deliveries_of_operation(&operation, None, 10).await.unwrap();
    assert_eq!(ids(again), ["whd_o1", "whd_o2", "whd_o3"]);
}
