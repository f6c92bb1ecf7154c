//! Webhook endpoints: the per-customer limit under creates at once, secret rotation and what
//! it deletes, and changes at once that conflict rather than leave a stray secret.

use crate::Api;
use ops_runtime::driver::{Driver, Trigger};
use serde_json::json;

/// Creates at once cannot take a customer past its sixteen endpoints: each counts itself in
/// the customer's count in its own commit, and of two that read the same count one is refused
/// and reads again. Deletes at once each count themselves out, so the room they make is exact.
pub async fn creates_at_once_never_take_a_customer_past_its_endpoint_limit(app: &Api) {
    let customer = app.create_customer().await;
    let url = "http://127.0.0.1:9/hook";
    let create = || {
        app.post(
            "/v1/webhook_endpoints",
            &customer.key,
            json!({"url": url, "events": ["operation.created"]}),
        )
    };
    let mut made = vec![];
    for _ in 0..12 {
        let created = create().await;
        assert_eq!(created.status, 201, "{}", created.json());
        made.push(created.id());
    }
    let live = || async {
        let listed = app.get("/v1/webhook_endpoints", &customer.key).await.json();
        listed["data"].as_array().unwrap().len()
    };

    let at_once = futures_util::future::join_all((0..8).map(|_| create())).await;
    let statuses: Vec<u16> = at_once.iter().map(|r| r.status.as_u16()).collect();
    assert_eq!(statuses.iter().filter(|s| **s == 201).count(), 4, "{statuses:?}");
    // A create that lost a race reads again: it loses only to a create that counted itself
    // in, so it is at most four times refused a commit before the count is full.
    for refused in at_once.iter().filter(|r| r.status != 201) {
        assert_eq!(refused.error(409)["code"], "endpoint_limit_reached");
    }
    assert_eq!(live().await, 16);

    let paths: Vec<String> = made[..3]
        .iter()
        .map(|id| format!("/v1/webhook_endpoints/{id}"))
        .collect();
    let deleted = futures_util::future::join_all(paths.iter().map(|path| app.delete(path, &customer.key))).await;
    assert!(deleted.iter().all(|r| r.status == 200), "deletes at once all land");
    let refill = futures_util::future::join_all((0..5).map(|_| create())).await;
    assert_eq!(refill.iter().filter(|r| r.status == 201).count(), 3);
    assert_eq!(live().await, 16);
}

/// A new customer with a receiver answering at once, and its endpoint there for
/// `operation.created` (as created: its secret included).
async fn subscribed_customer(app: &Api) -> (crate::Customer, crate::receiver::Receiver, serde_json::Value) {
    let customer = app.create_customer().await;
    let receiver = crate::receiver::Receiver::start(0).await;
    let endpoint = app
        .subscribe(&customer.key, &receiver.url, &["operation.created"])
        .await;
    (customer, receiver, endpoint)
}

/// Rotates the endpoint's signing secret, the one before signing on for `expires_in` seconds;
/// the new secret.
async fn rotate_secret(app: &Api, customer: &crate::Customer, id: &str, expires_in: i64) -> String {
    let path = format!("/v1/webhook_endpoints/{id}/rotate_secret");
    let rotated = app
        .post(&path, &customer.key, json!({ "expires_in": expires_in }))
        .await;
    assert_eq!(rotated.status, 200, "{}", rotated.json());
    // The endpoint's history says how long the secrets before it go on signing.
    let history = app.history(&format!("/v1/webhook_endpoints/{id}"), &customer.key).await;
    let entry = history.iter().rev().find(|e| e["action"] == "secret_rotated").unwrap();
    let expected = match expires_in {
        0 => "Signing secret rotated; earlier secrets stop signing now".to_owned(),
        _ => format!(
            "Signing secret rotated; earlier secrets sign beside it until {} at the latest",
            crate::rfc3339_after(&entry["cause"]["at"], time::Duration::seconds(expires_in))
        ),
    };
    assert_eq!(entry["cause"]["message"], expected.as_str(), "{entry}");
    rotated.json()["secret"].as_str().unwrap().to_owned()
}

/// Creates one payout of the customer's and sends what is due (`deliver`): its
/// `operation.created`, the one delivery the receiver then holds.
async fn one_delivery<D: std::future::Future<Output = ()>>(
    app: &Api,
    customer: &crate::Customer,
    receiver: &crate::receiver::Receiver,
    deliver: impl Fn() -> D,
) -> crate::receiver::Received {
    let operation = crate::payout(&customer.id, "two_step", &[5]);
    assert_eq!(app.post("/v1/operations", &customer.key, operation).await.status, 201);
    deliver().await;
    let mut received = receiver.received();
    assert_eq!(received.len(), 1);
    received.remove(0)
}

/// Rotations that once stored a new secret under a name an older one had left free, writing
/// over a secret still signing through its overlap: the first secret ends at once, the second
/// signs on for an hour beside the third. A secret no endpoint signs with is deleted from the
/// backend's secret store (`stored` counts the endpoint's there); `deliver` sends what is due.
pub async fn each_rotation_keeps_the_secret_it_retires_and_deletes_what_no_longer_signs<D, S>(
    app: &Api,
    deliver: impl Fn() -> D,
    stored: impl Fn(String) -> S,
) where
    D: std::future::Future<Output = ()>,
    S: std::future::Future<Output = usize>,
{
    let (customer, receiver, endpoint) = subscribed_customer(app).await;
    let id = endpoint["id"].as_str().unwrap().to_owned();
    assert_eq!(stored(id.clone()).await, 1);
    let second = rotate_secret(app, &customer, &id, 0).await;
    assert_eq!(stored(id.clone()).await, 1, "the secret ended at once is deleted");
    let third = rotate_secret(app, &customer, &id, 3600).await;
    assert_eq!(stored(id.clone()).await, 2, "the second signs on beside the third");

    let received = one_delivery(app, &customer, &receiver, deliver).await;
    assert_eq!(received.signature.matches("v1=").count(), 2);
    for secret in [&second, &third] {
        assert!(
            crate::receiver::signature_is_valid(&received.signature, &received.body, secret),
            "each live secret signs"
        );
    }

    let deleted = app.delete(&format!("/v1/webhook_endpoints/{id}"), &customer.key).await;
    assert_eq!(deleted.status, 200, "{}", deleted.json());
    assert_eq!(stored(id).await, 0, "a deleted endpoint's secrets are deleted");
}

/// Rotations in a row, each with a day's overlap: at most three secrets sign at once, the
/// newest ones, and each older one stops signing and is deleted from the secret store as the
/// next rotation lands. Without the cap every rotation would add a signature to each delivery
/// and a secret to the endpoint, which is stored whole, for as long as the overlaps last.
pub async fn rotations_in_a_row_keep_the_three_newest_secrets_signing<D, S>(
    app: &Api,
    deliver: impl Fn() -> D,
    stored: impl Fn(String) -> S,
) where
    D: std::future::Future<Output = ()>,
    S: std::future::Future<Output = usize>,
{
    let (customer, receiver, endpoint) = subscribed_customer(app).await;
    let id = endpoint["id"].as_str().unwrap().to_owned();
    let mut secrets = vec![endpoint["secret"].as_str().unwrap().to_owned()];
    for rotation in 1..=5 {
        secrets.push(rotate_secret(app, &customer, &id, 86_400).await);
        assert_eq!(
            stored(id.clone()).await,
            (rotation + 1).min(3),
            "after rotation {rotation}"
        );
    }

    let received = one_delivery(app, &customer, &receiver, deliver).await;
    let signature = &received.signature;
    assert_eq!(signature.matches("v1=").count(), 3, "{signature}");
    let signs: Vec<bool> = secrets
        .iter()
        .map(|secret| crate::receiver::signature_is_valid(signature, &received.body, secret))
        .collect();
    assert_eq!(signs, [false, false, false, true, true, true], "the three newest sign");
}

/// Rotations and changes of one webhook endpoint at once: each lands or is refused as a
/// conflict to retry (never a server error), and a rotation that lost keeps no secret stored:
/// the endpoint's secrets in the store (`stored` counts them) are the first and one for each
/// rotation that landed.
pub async fn changes_of_an_endpoint_at_once_conflict_and_keep_no_stray_secret<S>(
    app: &Api,
    stored: impl Fn(String) -> S,
) where
    S: std::future::Future<Output = usize>,
{
    let customer = app.create_customer().await;
    let endpoint = app
        .subscribe(&customer.key, "http://127.0.0.1:9/hook", &["operation.created"])
        .await;
    let path = format!("/v1/webhook_endpoints/{}", endpoint["id"].as_str().unwrap());
    let (mut landed, mut lost) = (0, 0);
    // Rounds until one rotation has lost a race (the first round nearly always has one).
    for _ in 0..5 {
        let rotate = format!("{path}/rotate_secret");
        let rotations = (0..6).map(|_| app.post(&rotate, &customer.key, json!({"expires_in": 3600})));
        for answer in futures_util::future::join_all(rotations).await {
            match answer.status.as_u16() {
                200 => landed += 1,
                _ => {
                    assert_eq!(answer.error(409)["code"], "conflict");
                    lost += 1;
                }
            }
        }
        if lost > 0 {
            break;
        }
    }
    assert!(lost > 0 && landed > 0, "{landed} landed, {lost} lost");
    assert_eq!(
        stored(endpoint["id"].as_str().unwrap().to_owned()).await,
        (1 + landed).min(ops_domain::webhooks::MAX_SIGNING_SECRETS)
    );

    let urls: Vec<String> = (0..6).map(|n| format!("http://127.0.0.1:9/hook-{n}")).collect();
    let updates = urls
        .iter()
        .map(|url| app.post(&path, &customer.key, json!({"url": url})));
    let mut updated = vec![];
    for (url, answer) in urls.iter().zip(futures_util::future::join_all(updates).await) {
        match answer.status.as_u16() {
            200 => updated.push(url.clone()),
            _ => assert_eq!(answer.error(409)["code"], "conflict"),
        }
    }
    let now = app.get(&path, &customer.key).await.json();
    assert!(
        updated.contains(&now["url"].as_str().unwrap().to_owned()),
        "{now} of {updated:?}"
    );
}

/// The daily sweep deletes the signing secrets no endpoint names once they are an hour old: one
/// a rotation stored and died before saving, one a deletion failed to delete, one a create
/// stored for an endpoint it never saved. An endpoint's own secret stays, and so does every
/// secret younger than an hour (a create or rotation under way).
pub async fn old_signing_secrets_no_endpoint_names_are_swept(app: &Api, driver: &Driver, clock: &crate::TestClock) {
    let customer = app.create_customer().await;
    let subscribe = |url: &'static str| app.subscribe(&customer.key, url, &["operation.created"]);
    let kept = subscribe("http://127.0.0.1:9/kept").await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let gone = subscribe("http://127.0.0.1:9/gone").await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let secrets = &driver.service().secrets;
    let named = |id: String| async move {
        let stored = secrets.secrets_named(&format!("webhook/{id}/")).await.unwrap();
        assert_eq!(stored.len(), 1, "{stored:?}");
        stored[0].name.clone()
    };
    // The deleted endpoint's document still names the secret its deletion failed to delete.
    let failed_delete = named(gone.clone()).await;
    let deleted = app
        .delete(&format!("/v1/webhook_endpoints/{gone}"), &customer.key)
        .await;
    assert_eq!(deleted.status, 200, "{}", deleted.json());
    let orphans = [
        format!("webhook/{kept}/a-rotation-that-died"),
        failed_delete,
        "webhook/whe_never_saved/a-create-that-died".to_owned(),
    ];
    for orphan in &orphans {
        secrets.put_secret(orphan, "whsec_orphan").await.unwrap();
    }
    let names = || async {
        let mut names: Vec<String> = secrets
            .secrets_named("webhook/")
            .await
            .unwrap()
            .into_iter()
            .map(|s| s.name)
            .filter(|name| {
                [kept.as_str(), gone.as_str(), "whe_never_saved"]
                    .iter()
                    .any(|id| name.contains(id))
            })
            .collect();
        names.sort();
        names
    };
    let sweep = || async { driver.round(Trigger::SecretSweep).await.expect("sweep") };
    assert_eq!(names().await.len(), 4, "the endpoint's own secret and three orphans");

    assert_eq!(sweep().await, 0, "every secret is younger than an hour");
    assert_eq!(names().await.len(), 4);

    clock.advance(time::Duration::minutes(61));
    assert_eq!(sweep().await, 3);
    let left = names().await;
    assert_eq!(left.len(), 1, "{left:?}");
    assert!(
        left[0].starts_with(&format!("webhook/{kept}/")) && !orphans.contains(&left[0]),
        "{left:?}"
    );
    assert!(
        secrets.secret(&left[0]).await.unwrap().is_some(),
        "the endpoint's secret still opens"
    );
    assert_eq!(sweep().await, 0, "nothing more to delete");
}

/// An endpoint keeps each event type it subscribes to once, made or changed, however often the
/// request names it: the endpoint is stored whole (in its owner's roster too, and DynamoDB
/// holds at most 400 KB in an item), so a long list of repeats must not reach the store.
pub async fn an_endpoints_event_types_are_kept_once_each(app: &Api) {
    let customer = app.create_customer().await;
    let mut events = vec!["operation.created"; 20_000];
    events.push("transaction.confirmed");
    events.push("operation.created");
    let url = "http://127.0.0.1:9/hook";
    let created = app
        .post(
            "/v1/webhook_endpoints",
            &customer.key,
            json!({"url": url, "events": events}),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.json());
    assert_eq!(
        created.json()["events"],
        json!(["operation.created", "transaction.confirmed"])
    );
    let path = format!("/v1/webhook_endpoints/{}", created.id());
    let changed = app
        .post(&path, &customer.key, json!({"events": vec!["*"; 20_000]}))
        .await;
    assert_eq!(changed.status, 200, "{}", changed.json());
    assert_eq!(app.get(&path, &customer.key).await.json()["events"], json!(["*"]));
}

/// An endpoint's own retry policy (ten-minute waits for an hour) is what its deliveries
/// follow: the delivery has failed, with its work item, after an hour, where the default
/// schedule would still be trying. A recover of the hour its receiver was away resends it once,
/// however often it is asked, and says so in the endpoint's history. `redeliver` hands the
/// webhooks queue a delivery's task again each minute, for a queue whose delays run on real
/// time rather than the test's clock (SQS).
pub async fn a_delivery_follows_its_endpoints_retry_policy_and_a_range_is_recovered_once<R, F>(
    app: &Api,
    driver: &Driver,
    clock: &crate::TestClock,
    redeliver: R,
) where
    R: Fn(String) -> F,
    F: std::future::Future<Output = ()>,
{
    use ops_domain::ports::Clock;
    use time::format_description::well_known::Rfc3339;
    let customer = app.create_customer().await;
    let receiver = crate::receiver::Receiver::start(usize::MAX).await;
    let endpoint = |policy: serde_json::Value| json!({"url": receiver.url, "events": ["operation.created"], "retry_policy": policy});
    let too_eager = app
        .post(
            "/v1/webhook_endpoints",
            &customer.key,
            endpoint(json!({"kind": "linear", "wait_seconds": 5, "max_age_hours": 1})),
        )
        .await;
    assert_eq!(too_eager.status, 400, "{}", too_eager.json());
    assert_eq!(too_eager.json()["error"]["param"], "retry_policy.wait_seconds");
    let policy = json!({"kind": "linear", "wait_seconds": 600, "max_age_hours": 1});
    let made = app
        .post("/v1/webhook_endpoints", &customer.key, endpoint(policy.clone()))
        .await;
    assert_eq!(made.status, 201, "{}", made.json());
    assert_eq!(made.json()["retry_policy"], policy);
    let endpoint_id = made.id();
    let started = clock.now();
    let operation = app
        .post(
            "/v1/operations",
            &customer.key,
            crate::payout(&customer.id, "two_step", &[1_000]),
        )
        .await;
    assert_eq!(operation.status, 201, "{}", operation.json());
    let delivery = |event: String| {
        let (key, endpoint_id) = (customer.key.clone(), endpoint_id.clone());
        async move {
            let deliveries = app.get(&format!("/v1/events/{event}/deliveries"), &key).await.json();
            deliveries["data"]
                .as_array()
                .unwrap()
                .iter()
                .find(|d| d["endpoint_id"] == endpoint_id.as_str())
                .cloned()
                .expect("its delivery")
        }
    };
    let run = |minutes: usize, delivery_id: Option<String>| {
        let redeliver = &redeliver;
        async move {
            for _ in 0..minutes {
                if let Some(id) = &delivery_id {
                    redeliver(id.clone()).await;
                }
                while driver.tick().await.expect("a round") > 0 {}
                clock.advance(time::Duration::minutes(1));
            }
        }
    };
    run(1, None).await;
    let events = app.get("/v1/events?type=operation.created", &customer.key).await.json();
    let event = events["data"][0]["id"].as_str().unwrap().to_owned();
    let delivery_id = delivery(event.clone()).await["id"].as_str().unwrap().to_owned();
    run(80, Some(delivery_id)).await;
    let failed = delivery(event.clone()).await;
    assert_eq!(failed["status"], "failed", "{failed}");
    let times: Vec<time::OffsetDateTime> = failed["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| time::OffsetDateTime::parse(a["at"].as_str().unwrap(), &Rfc3339).unwrap())
        .collect();
    assert!((6..=7).contains(&times.len()), "{failed}");
    for pair in times.windows(2) {
        let gap = (pair[1] - pair[0]).whole_seconds();
        assert!(
            (600..=720).contains(&gap),
            "ten minutes and their jitter apart: {gap} s"
        );
    }
    assert!(times[times.len() - 1] - times[0] <= time::Duration::minutes(61));
    let items = app
        .get("/v1/work_items?queue=exceptions&status=open", crate::ADMIN_KEY)
        .await
        .json();
    assert!(
        items["data"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["kind"] == "webhook_delivery_failed" && i["customer_id"] == customer.id.as_str()),
        "{items}"
    );

    receiver.answer_all();
    let recover = |range: serde_json::Value| {
        let path = format!("/v1/webhook_endpoints/{endpoint_id}/recover");
        let key = customer.key.clone();
        async move {
            let answer = app.post(&path, &key, range).await;
            assert_eq!(answer.status, 200, "{}", answer.json());
            answer.json()["data"].as_array().unwrap().len()
        }
    };
    let at = |t: time::OffsetDateTime| t.format(&Rfc3339).unwrap();
    let earlier = json!({"to": at(started - time::Duration::hours(1))});
    assert_eq!(recover(earlier).await, 0, "no failure of that range");
    let away = json!({"from": at(started - time::Duration::minutes(1)), "to": at(clock.now())});
    assert_eq!(recover(away.clone()).await, 1);
    assert_eq!(recover(away).await, 0, "resent once");
    run(2, None).await;
    assert_eq!(receiver.received().len(), 1, "the event arrived once");
    let history = app
        .get(&format!("/v1/webhook_endpoints/{endpoint_id}/history"), &customer.key)
        .await
        .json();
    let recovered = history["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|entry| entry["action"] == "recovered")
        .count();
    assert_eq!(recovered, 3, "each recover of a range audited: {history}");
}

/// An endpoint whose receiver keeps failing: the platform is warned as its failures in a row
/// pass 50 and 70 % of its breaker's, then the endpoint is disabled (an event, an exceptions
/// item each) and what comes for it waits, unattempted. Enabled again, what waited goes in its
/// events' order, paced, and the items close. A receiver that answers `410 Gone` disables its
/// endpoint at its first answer.
pub async fn an_endpoint_that_keeps_failing_is_disabled_and_enabled_again_sends_what_waited(
    app: &Api,
    driver: &Driver,
    clock: &crate::TestClock,
) {
    use time::format_description::well_known::Rfc3339;
    let customer = app.create_customer().await;
    let platform = crate::receiver::Receiver::start(0).await;
    app.subscribe(
        crate::ADMIN_KEY,
        &platform.url,
        &[
            "webhook_endpoint.failing",
            "webhook_endpoint.disabled",
            "webhook_endpoint.enabled",
        ],
    )
    .await;
    let receiver = crate::receiver::Receiver::start(usize::MAX).await;
    // An hour between tries: the test's attempts are each delivery's first.
    let body = json!({"url": receiver.url, "events": ["operation.created"],
                      "retry_policy": {"kind": "linear", "wait_seconds": 3600, "max_age_hours": 24},
                      "breaker": {"failures": 4, "over_hours": 0}});
    let made = app.post("/v1/webhook_endpoints", &customer.key, body).await;
    assert_eq!(made.status, 201, "{}", made.json());
    assert_eq!(made.json()["breaker"], json!({"failures": 4, "over_hours": 0}));
    let endpoint = made.id();
    let settle = || async {
        for _ in 0..3 {
            while driver.tick().await.expect("a round") > 0 {}
        }
    };
    let pay = || async {
        let made = app
            .post(
                "/v1/operations",
                &customer.key,
                crate::payout(&customer.id, "two_step", &[1_000]),
            )
            .await;
        assert_eq!(made.status, 201, "{}", made.json());
        settle().await;
    };
    let platform_told = || {
        platform
            .received()
            .iter()
            .map(|r| serde_json::from_slice::<serde_json::Value>(&r.body).unwrap())
            .filter(|event| event["data"]["webhook_endpoint_id"] == endpoint.as_str())
            .map(|event| event["type"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    for _ in 0..4 {
        pay().await;
    }
    assert_eq!(receiver.requests(), 4, "each delivery tried once");
    assert_eq!(
        platform_told(),
        [
            "webhook_endpoint.failing",
            "webhook_endpoint.failing",
            "webhook_endpoint.disabled"
        ],
        "at two and three failures in a row of four, then the breaker opened"
    );
    let shown = app
        .get(&format!("/v1/webhook_endpoints/{endpoint}"), &customer.key)
        .await
        .json();
    assert_eq!(shown["status"], "disabled", "{shown}");
    let health = app
        .get(&format!("/v1/webhook_endpoints/{endpoint}/health"), &customer.key)
        .await
        .json();
    assert_eq!(
        (health["consecutive_failures"].as_u64(), health["success_rate"].as_f64()),
        (Some(4), Some(0.0)),
        "{health}"
    );
    let open_items = || async {
        let items = app
            .get(
                "/v1/work_items?queue=exceptions&status=open&limit=100",
                crate::ADMIN_KEY,
            )
            .await
            .json();
        let mut kinds: Vec<String> = items["data"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|i| i["subject"]["id"].as_str().unwrap_or_default().starts_with(&endpoint))
            .map(|i| i["kind"].as_str().unwrap().to_owned())
            .collect();
        kinds.sort();
        kinds
    };
    assert_eq!(
        open_items().await,
        ["webhook_endpoint_disabled", "webhook_endpoint_failing"]
    );

    // Three more payouts while it is disabled: their deliveries wait, unattempted.
    for _ in 0..3 {
        pay().await;
    }
    assert_eq!(receiver.requests(), 4, "nothing sent to a disabled endpoint");
    let waiting = app
        .get(
            &format!("/v1/webhook_endpoints/{endpoint}/failed_deliveries"),
            &customer.key,
        )
        .await
        .json();
    assert_eq!(
        waiting["data"].as_array().unwrap().len(),
        0,
        "waiting is not failed: {waiting}"
    );

    // Enabled again: the three go in their events' order, a tenth of a second apart.
    receiver.answer_all();
    let enabled = app
        .post(
            &format!("/v1/webhook_endpoints/{endpoint}/enable"),
            &customer.key,
            json!({}),
        )
        .await;
    assert_eq!(enabled.status, 200, "{}", enabled.json());
    assert_eq!(enabled.json()["status"], "enabled");
    settle().await;
    let events = app
        .get("/v1/events?type=operation.created&limit=10", &customer.key)
        .await
        .json();
    let mut released = vec![];
    for event in events["data"].as_array().unwrap().iter().take(3) {
        let id = event["id"].as_str().unwrap();
        let deliveries = app
            .get(&format!("/v1/events/{id}/deliveries"), &customer.key)
            .await
            .json();
        let delivery = deliveries["data"][0].clone();
        released.push(delivery);
    }
    released.reverse();
    let due: Vec<time::OffsetDateTime> = released
        .iter()
        .map(|d| {
            let at = d["next_attempt_at"]
                .as_str()
                .or_else(|| d["attempts"][0]["at"].as_str())
                .unwrap_or_else(|| panic!("sent or due: {d}"));
            time::OffsetDateTime::parse(at, &Rfc3339).unwrap()
        })
        .collect();
    assert!(
        due.windows(2).all(|pair| pair[0] <= pair[1]),
        "in their events' order: {due:?}"
    );
    clock.advance(time::Duration::seconds(2));
    settle().await;
    assert_eq!(receiver.received().len(), 3, "the three that waited, once each");
    assert!(open_items().await.is_empty(), "enabling closed its items");
    assert_eq!(
        platform_told().last().map(String::as_str),
        Some("webhook_endpoint.enabled")
    );

    // A receiver that says it is gone disables its endpoint at its first answer.
    let gone = crate::receiver::Receiver::start(0).await;
    gone.answer_gone();
    let made = app
        .post(
            "/v1/webhook_endpoints",
            &customer.key,
            json!({"url": gone.url, "events": ["operation.created"]}),
        )
        .await;
    let gone_endpoint = made.id();
    pay().await;
    let shown = app
        .get(&format!("/v1/webhook_endpoints/{gone_endpoint}"), &customer.key)
        .await
        .json();
    assert_eq!(shown["status"], "disabled", "{shown}");
    let history = app
        .get(&format!("/v1/webhook_endpoints/{gone_endpoint}/history"), &customer.key)
        .await
        .json();
    assert!(
        history["data"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["action"] == "disabled" && e["cause"]["code"] == "webhook_endpoint_gone"),
        "{history}"
    );
}

/// An endpoint's rate limit, counted across every sender: six deliveries to an endpoint that
/// takes two a second arrive once each over at least two seconds, never more than two in a
/// second but for one a post's transit carries over a second's edge; the rest wait their turn
/// unattempted.
pub async fn an_endpoints_rate_limit_spreads_its_deliveries_over_the_seconds(app: &Api, driver: &Driver) {
    let customer = app.create_customer().await;
    let receiver = crate::receiver::Receiver::start(0).await;
    let endpoint = |limit: u32| json!({"url": receiver.url, "events": ["operation.created"], "rate_limit": limit});
    let refused = app.post("/v1/webhook_endpoints", &customer.key, endpoint(0)).await;
    assert_eq!(refused.status, 400, "{}", refused.json());
    assert_eq!(refused.json()["error"]["param"], "rate_limit");
    let made = app.post("/v1/webhook_endpoints", &customer.key, endpoint(2)).await;
    assert_eq!(made.status, 201, "{}", made.json());
    assert_eq!(made.json()["rate_limit"], 2);
    for amount in 1..=6 {
        let made = app
            .post(
                "/v1/operations",
                &customer.key,
                crate::payout(&customer.id, "two_step", &[amount]),
            )
            .await;
        assert_eq!(made.status, 201, "{}", made.json());
    }
    let started = std::time::Instant::now();
    while receiver.received().len() < 6 && started.elapsed() < std::time::Duration::from_secs(30) {
        while driver.tick().await.expect("a round") > 0 {}
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let received = receiver.received();
    assert_eq!(received.len(), 6, "each delivered");
    let events: std::collections::BTreeSet<String> = received
        .iter()
        .map(|r| r.json()["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(events.len(), 6, "once each");
    let seconds: Vec<u64> = received
        .iter()
        .map(|r| r.at.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs())
        .collect();
    let (first, last) = (seconds.iter().min().unwrap(), seconds.iter().max().unwrap());
    assert!(last - first >= 2, "six at two a second take three seconds: {seconds:?}");
    for second in *first..=*last {
        let in_it = seconds.iter().filter(|s| **s == second).count();
        assert!(in_it <= 3, "{in_it} in one second: {seconds:?}");
    }
    assert_eq!(receiver.requests(), 6, "none posted over the limit");
}

/// An endpoint that takes each operation's events in order: while the first delivery of one
/// operation waits for its retry, that operation's later events wait too, unsent, and other
/// operations' events still arrive, each operation's in the order its events were made (the
/// sends of a batch run side by side, several batches at once). Once the retry delivers, the
/// waiting events follow, in order. `redeliver` queues a delivery's message at once where the
/// queue's delays are real time.
pub async fn an_ordered_endpoint_gets_each_operations_events_in_order<R, F>(
    app: &Api,
    driver: &Driver,
    clock: &crate::TestClock,
    redeliver: R,
) where
    R: Fn(String) -> F,
    F: std::future::Future<Output = ()>,
{
    use ops_domain::ports::QueueName;
    use ops_runtime::driver::Trigger;
    let customer = app.create_customer().await;
    let receiver = crate::receiver::Receiver::start(1).await;
    let events = ["operation.created", "operation.pending_approval", "operation.cancelled"];
    let endpoint = |ordering: &str| json!({"url": receiver.url, "events": events, "ordering": ordering});
    let refused = app
        .post("/v1/webhook_endpoints", &customer.key, endpoint("by_customer"))
        .await;
    assert_eq!(refused.status, 400, "{}", refused.json());
    assert_eq!(refused.json()["error"]["param"], "ordering", "{}", refused.json());
    let made = app
        .post("/v1/webhook_endpoints", &customer.key, endpoint("per_operation"))
        .await;
    assert_eq!(made.status, 201, "{}", made.json());
    assert_eq!(made.json()["ordering"], "per_operation");
    let mut operations = vec![];
    for amount in 1..=3 {
        let made = app
            .post(
                "/v1/operations",
                &customer.key,
                crate::payout(&customer.id, "two_step", &[amount]),
            )
            .await;
        assert_eq!(made.status, 201, "{}", made.json());
        operations.push(made.id());
    }
    let drain = || async {
        loop {
            // Several send rounds at once, as local mode's senders and Lambda's instances run.
            let webhooks = Trigger::Queue(QueueName::Webhooks);
            let (ticked, sent, more) = tokio::join!(driver.tick(), driver.round(webhooks), driver.round(webhooks));
            if ticked.expect("a tick") + sent.expect("a round") + more.expect("a round") == 0 {
                break;
            }
        }
    };
    drain().await;
    for operation in &operations {
        let cancelled = app
            .post(&format!("/v1/operations/{operation}/cancel"), &customer.key, json!({}))
            .await;
        assert_eq!(cancelled.status, 200, "{}", cancelled.json());
    }
    drain().await;

    // Each operation's events as made, oldest first.
    let events = app.get("/v1/events?limit=100", &customer.key).await.json();
    let made_of = |operation: &str| -> Vec<String> {
        let mut ids: Vec<String> = events["data"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["data"]["operation_id"] == operation)
            .map(|e| e["id"].as_str().unwrap().to_owned())
            .collect();
        ids.sort();
        ids
    };
    let received_of = |operation: &str| -> Vec<String> {
        receiver
            .received()
            .iter()
            .map(|r| r.json())
            .filter(|e| e["data"]["operation_id"] == operation)
            .map(|e| e["id"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(receiver.requests(), receiver.received().len() + 1, "one refused");
    let held: Vec<&String> = operations.iter().filter(|op| received_of(op).is_empty()).collect();
    assert_eq!(held.len(), 1, "only the refused delivery's operation waits");
    for operation in operations.iter().filter(|op| !held.contains(op)) {
        assert_eq!(made_of(operation).len(), 3, "created, pending approval, cancelled");
        assert_eq!(received_of(operation), made_of(operation), "in the order made");
    }

    let held = held[0];
    let first = made_of(held)[0].clone();
    let deliveries = app
        .get(&format!("/v1/events/{first}/deliveries"), &customer.key)
        .await
        .json();
    let waiting = &deliveries["data"][0];
    assert_eq!(waiting["status"], "pending", "{deliveries}");
    assert_eq!(waiting["attempts"].as_array().unwrap().len(), 1, "{deliveries}");
    clock.advance(time::Duration::minutes(2));
    redeliver(waiting["id"].as_str().unwrap().to_owned()).await;
    drain().await;
    assert_eq!(
        received_of(held),
        made_of(held),
        "the retry, then what waited behind it, in order"
    );
    assert_eq!(receiver.requests(), 10, "nine events, one of them twice");
}
