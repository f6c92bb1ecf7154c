//! Recurring operations: schedules fired by the embedded timer as the tests' clock moves.

use chrono::{Datelike, Offset, Timelike};
use ops_domain::ids::ScheduleId;
use ops_domain::ports::Clock;
use ops_domain::schedules::FireSchedule;
use ops_tests::{scheduled_payout, spawn_app, TestApp, ADMIN_KEY};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use time::format_description::well_known::Rfc3339;
use time::macros::datetime;
use time::{Duration, OffsetDateTime};

/// Moves the service's clock to `target` (which must be ahead of it).
fn jump_to(app: &TestApp, target: OffsetDateTime) {
    let now = app.clock.now();
    assert!(target > now, "the clock only moves forward: {target} is before {now}");
    app.clock.advance(target - now);
}

fn time_of(value: &Value) -> OffsetDateTime {
    OffsetDateTime::parse(value.as_str().expect("a time"), &Rfc3339).unwrap()
}

/// The body of a one-item payout for a schedule (the schedule names the customer).
fn operation(workflow: &str) -> Value {
    scheduled_payout(workflow, &[250_000])
}

async fn occurrences(app: &TestApp, key: &str, id: &str) -> Vec<Value> {
    let page = app.get(&format!("/v1/schedules/{id}/occurrences?limit=100"), key).await;
    assert_eq!(page.status, 200, "{}", page.json());
    page.json()["data"].as_array().unwrap().clone()
}

async fn operations_of(app: &TestApp, key: &str) -> Vec<Value> {
    app.get("/v1/operations?limit=100", key).await.json()["data"]
        .as_array()
        .unwrap()
        .clone()
}

#[tokio::test]
async fn a_monthly_payroll_runs_at_nine_in_santiago_across_daylight_saving_and_each_occurrence_once() {
    let app = spawn_app().await;
    let acme = app.create_customer().await;
    jump_to(&app, datetime!(2031-01-15 00:00 UTC));
    let created = app
        .post(
            "/v1/schedules",
            &acme.key,
            json!({"expression": "cron(0 9 1 * ? *)", "timezone": "America/Santiago", "operation": operation("auto")}),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.json());
    let schedule = created.json();
    assert_eq!(
        (schedule["object"].as_str(), schedule["status"].as_str()),
        (Some("schedule"), Some("active"))
    );
    let id = schedule["id"].as_str().unwrap().to_owned();

    let santiago = chrono_tz::America::Santiago;
    let mut offsets = BTreeSet::new();
    for _ in 0..12 {
        let next = app.get(&format!("/v1/schedules/{id}"), &acme.key).await.json()["next_run_at"].clone();
        let next = time_of(&next);
        let local = chrono::DateTime::from_timestamp(next.unix_timestamp(), 0)
            .unwrap()
            .with_timezone(&santiago);
        assert_eq!((local.day(), local.hour(), local.minute()), (1, 9, 0), "{local}");
        offsets.insert(local.offset().fix().local_minus_utc() / 3600);
        jump_to(&app, next + Duration::seconds(30));
        app.drain().await;
    }
    assert_eq!(offsets, BTreeSet::from([-4, -3]), "summer and winter time both seen");

    let recorded = occurrences(&app, &acme.key, &id).await;
    assert_eq!(recorded.len(), 12);
    assert!(recorded
        .iter()
        .all(|o| o["status"] == "created" && o["object"] == "schedule_occurrence"));
    let made = operations_of(&app, &acme.key).await;
    assert_eq!(made.len(), 12, "one operation per occurrence");
    let operation = made.last().unwrap();
    // The schedule makes it; the person who set the schedule up is its creator.
    assert_eq!(operation["created_by"], schedule["created_by"]);
    let history = app
        .get(
            &format!("/v1/operations/{}/history", operation["id"].as_str().unwrap()),
            &acme.key,
        )
        .await
        .json();
    let made_by = &history["data"][0];
    assert_eq!(
        (made_by["action"].as_str(), made_by["to"].as_str()),
        (Some("created"), Some("approved"))
    );
    assert_eq!(made_by["cause"]["actor"], json!({"type": "schedule", "id": id}));
    assert_eq!(
        operation["status"], "completed",
        "the payroll went through its workflow and paid"
    );

    // The timer fires at least once: again for a recorded occurrence changes nothing, and two
    // firings of the next one at the same moment make one operation.
    let service = app.driver().service().clone();
    let fire = |at: OffsetDateTime| FireSchedule {
        schedule_id: ScheduleId::parse(&id).unwrap(),
        scheduled_at: at,
    };
    let last = time_of(&recorded[0]["scheduled_at"]);
    assert_eq!(service.fire_schedule(&fire(last)).await.unwrap(), 0);
    let next = time_of(&app.get(&format!("/v1/schedules/{id}"), &acme.key).await.json()["next_run_at"]);
    jump_to(&app, next + Duration::seconds(5));
    let (first, second) = (fire(next), fire(next));
    let (one, other) = tokio::join!(service.fire_schedule(&first), service.fire_schedule(&second));
    let outcomes = format!("{one:?} {other:?}");
    assert_eq!(one.unwrap_or(0) + other.unwrap_or(0), 1, "{outcomes}");
    app.drain().await;
    assert_eq!(occurrences(&app, &acme.key, &id).await.len(), 13);
    assert_eq!(operations_of(&app, &acme.key).await.len(), 13);
}

#[tokio::test]
async fn a_stopped_service_makes_what_is_less_than_a_day_late_and_records_the_rest_missed() {
    let mut app = spawn_app().await;
    let acme = app.create_customer().await;
    let created = app
        .post(
            "/v1/schedules",
            &acme.key,
            json!({"expression": "rate(1 hour)", "operation": operation("two_step")}),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.json());
    let id = created.id();
    let anchor = time_of(&created.json()["anchor"]);
    assert_eq!(
        created.json()["next_run_at"],
        created.json()["anchor"],
        "a rate starts at once"
    );
    // At once to the Scheduler's minute: the next whole one, never before it was made.
    let made_at = time_of(&created.json()["created_at"]);
    assert!(
        anchor >= made_at && anchor - made_at < Duration::minutes(1),
        "{anchor} {made_at}"
    );
    app.clock.advance(anchor - made_at);
    app.drain().await;
    let first = operations_of(&app, &acme.key).await;
    assert_eq!(first.len(), 1);
    assert_eq!(
        first[0]["status"], "pending_approval",
        "a two-step payroll waits for its approver"
    );

    // Down for two hours: both occurrences are made, each with its own time.
    app.clock.advance(Duration::hours(2) + Duration::minutes(1));
    app = app.restart().await;
    app.drain().await;
    let recorded = occurrences(&app, &acme.key, &id).await;
    let times: Vec<OffsetDateTime> = recorded.iter().map(|o| time_of(&o["scheduled_at"])).collect();
    assert_eq!(
        times,
        [anchor + Duration::hours(2), anchor + Duration::hours(1), anchor]
    );
    assert!(recorded.iter().all(|o| o["status"] == "created"));

    // Down for two days: what is more than a day late is missed, the rest made.
    app.clock.advance(Duration::days(2));
    app = app.restart().await;
    app.drain().await;
    let recorded = occurrences(&app, &acme.key, &id).await;
    assert_eq!(recorded.len(), 3 + 48);
    let (mut missed, mut made) = (0, 0);
    for occurrence in &recorded {
        let late = time_of(&occurrence["recorded_at"]) - time_of(&occurrence["scheduled_at"]);
        if late > Duration::hours(24) {
            assert_eq!(occurrence["status"], "missed", "{occurrence}");
            assert!(occurrence["operation_id"].is_null() && occurrence["reason"].is_string());
            missed += 1;
        } else {
            assert_eq!(occurrence["status"], "created", "{occurrence}");
            made += 1;
        }
    }
    assert!(
        (23..=25).contains(&missed) && missed + made == 51,
        "{missed} missed, {made} made"
    );
    assert_eq!(operations_of(&app, &acme.key).await.len(), made);
    let events = app
        .get("/v1/events?type=schedule.occurrence_missed&limit=100", &acme.key)
        .await
        .json();
    assert_eq!(events["data"].as_array().unwrap().len(), missed);
    // Each missed occurrence is an exception for the platform's operators.
    let items = app.open_exceptions().await;
    assert_eq!(items.len(), missed, "{items:#?}");
    assert!(items.iter().all(|item| item["kind"] == "occurrence_missed"
        && item["subject"]["type"] == "occurrence"
        && item["subject"]["id"].as_str().unwrap().starts_with(&format!("{id}@"))));
}

/// A schedule that must not lose a run over a weekend's outage says so: with a window of
/// three days, every daily occurrence of a two-day outage is made, in order, each once.
#[tokio::test]
async fn a_wider_catch_up_window_makes_what_a_days_window_would_miss() {
    let mut app = spawn_app().await;
    let acme = app.create_customer().await;
    let too_wide = app
        .post(
            "/v1/schedules",
            &acme.key,
            json!({"expression": "rate(1 day)", "operation": operation("two_step"), "catch_up_window_hours": 169}),
        )
        .await;
    assert_eq!(too_wide.status, 400);
    assert_eq!(too_wide.json()["error"]["param"], "catch_up_window_hours");
    let created = app
        .post(
            "/v1/schedules",
            &acme.key,
            json!({"expression": "rate(1 day)", "operation": operation("two_step"), "catch_up_window_hours": 72}),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.json());
    assert_eq!(created.json()["catch_up_window_hours"], 72);
    let id = created.id();
    let anchor = time_of(&created.json()["anchor"]);
    // The next three runs, before any is made.
    let upcoming = app
        .get(&format!("/v1/schedules/{id}/occurrences?upcoming=3"), &acme.key)
        .await
        .json();
    let times: Vec<OffsetDateTime> = upcoming["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| time_of(&o["scheduled_at"]))
        .collect();
    assert_eq!(times, [anchor, anchor + Duration::days(1), anchor + Duration::days(2)]);
    assert_eq!(upcoming["data"][0]["object"], "schedule_upcoming_occurrence");
    let refused = app
        .get(&format!("/v1/schedules/{id}/occurrences?upcoming=51"), &acme.key)
        .await;
    assert_eq!(refused.status, 400);

    // Down from before the first run until two and a half days after it.
    app.clock
        .advance(anchor - time_of(&created.json()["created_at"]) + Duration::hours(60));
    app = app.restart().await;
    app.drain().await;
    let recorded = occurrences(&app, &acme.key, &id).await;
    let made: Vec<(OffsetDateTime, &str)> = recorded
        .iter()
        .map(|o| (time_of(&o["scheduled_at"]), o["status"].as_str().unwrap()))
        .collect();
    assert_eq!(
        made,
        [
            (anchor + Duration::days(2), "created"),
            (anchor + Duration::days(1), "created"),
            (anchor, "created")
        ],
        "sixty hours late is inside a three-day window"
    );
    assert_eq!(operations_of(&app, &acme.key).await.len(), 3);
    assert!(app.open_exceptions().await.is_empty());
}

#[tokio::test]
async fn a_schedule_made_by_a_user_since_deactivated_makes_nothing() {
    let app = spawn_app().await;
    let acme = app.create_customer().await;
    let maker = app
        .add_member(&acme, &["maker"], &["operations:read", "operations:write"])
        .await;
    let daily =
        json!({"expression": "rate(1 day)", "start_at": "2031-02-01T12:00:00Z", "operation": operation("auto")});
    let id = app.post("/v1/schedules", &maker.key, daily).await.id();
    app.deactivate(&acme, &maker.user_id).await;
    jump_to(&app, datetime!(2031-02-01 12:01 UTC));
    app.drain().await;
    let recorded = occurrences(&app, &acme.key, &id).await;
    assert_eq!(recorded.len(), 1);
    assert_eq!(recorded[0]["status"], "skipped");
    assert!(
        recorded[0]["reason"].as_str().unwrap().contains("deactivated"),
        "{}",
        recorded[0]
    );
    assert!(operations_of(&app, &acme.key).await.is_empty());
}

#[tokio::test]
async fn a_suspended_customers_schedule_makes_nothing_until_it_is_reactivated() {
    let app = spawn_app().await;
    let acme = app.create_customer().await;
    let daily =
        json!({"expression": "rate(1 day)", "start_at": "2031-02-01T12:00:00Z", "operation": operation("auto")});
    let id = app.post("/v1/schedules", &acme.key, daily).await.id();
    let customer = format!("/v1/customers/{}", acme.id);
    let suspended = app.post(&customer, ADMIN_KEY, json!({"status": "suspended"})).await;
    assert_eq!(suspended.status, 200, "{}", suspended.json());
    jump_to(&app, datetime!(2031-02-01 12:01 UTC));
    app.drain().await;

    let reactivated = app.post(&customer, ADMIN_KEY, json!({"status": "active"})).await;
    assert_eq!(reactivated.status, 200, "{}", reactivated.json());
    let recorded = occurrences(&app, &acme.key, &id).await;
    assert_eq!(recorded.len(), 1);
    assert_eq!(recorded[0]["status"], "skipped");
    assert!(
        recorded[0]["reason"].as_str().unwrap().contains("suspended"),
        "{}",
        recorded[0]
    );
    assert!(operations_of(&app, &acme.key).await.is_empty());

    // Reactivated, the next occurrence makes its operation.
    jump_to(&app, datetime!(2031-02-02 12:01 UTC));
    app.drain().await;
    let recorded = occurrences(&app, &acme.key, &id).await;
    assert_eq!(
        recorded
            .iter()
            .map(|o| o["status"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["created", "skipped"],
        "newest first"
    );
    assert_eq!(operations_of(&app, &acme.key).await.len(), 1);
}

#[tokio::test]
async fn pause_resume_delete_and_a_revoked_key_make_nothing() {
    let app = spawn_app().await;
    let acme = app.create_customer().await;
    let globex = app.create_customer().await;
    let key = app
        .post(
            "/v1/api_keys",
            ADMIN_KEY,
            json!({"customer_id": acme.id, "scopes": ["operations:read", "operations:write"]}),
        )
        .await
        .json();
    let secret = key["secret"].as_str().unwrap().to_owned();
    let daily =
        json!({"expression": "rate(1 day)", "start_at": "2031-02-01T12:00:00Z", "operation": operation("auto")});
    let id = app.post("/v1/schedules", &secret, daily).await.id();
    let path = format!("/v1/schedules/{id}");

    // Another customer sees nothing of it.
    assert_eq!(app.get(&path, &globex.key).await.status, 404);
    assert_eq!(
        app.post(&format!("{path}/pause"), &globex.key, json!({})).await.status,
        404
    );
    let theirs = app.get("/v1/schedules", &globex.key).await.json();
    assert!(theirs["data"].as_array().unwrap().is_empty());
    assert_eq!(
        app.get("/v1/schedules", &acme.key).await.json()["data"][0]["id"],
        id.as_str()
    );

    let paused = app.post(&format!("{path}/pause"), &acme.key, json!({})).await;
    assert_eq!(paused.json()["status"], "paused");
    assert!(paused.json()["next_run_at"].is_null());
    assert_eq!(
        app.post(&format!("{path}/pause"), &acme.key, json!({})).await.status,
        409
    );
    jump_to(&app, datetime!(2031-02-03 12:30 UTC));
    app.drain().await;
    assert!(
        occurrences(&app, &acme.key, &id).await.is_empty(),
        "a paused schedule makes nothing"
    );
    let resumed = app.post(&format!("{path}/resume"), &acme.key, json!({})).await.json();
    assert_eq!(
        (resumed["status"].as_str(), time_of(&resumed["next_run_at"])),
        (Some("active"), datetime!(2031-02-04 12:00 UTC)),
        "runs from the next occurrence after now; those in the pause are not made up"
    );

    // The key the schedule acts with is revoked: the occurrence is recorded, nothing made.
    let revoked = app
        .delete(&format!("/v1/api_keys/{}", key["id"].as_str().unwrap()), ADMIN_KEY)
        .await;
    assert_eq!(revoked.status, 200, "{}", revoked.json());
    jump_to(&app, datetime!(2031-02-04 12:01 UTC));
    app.drain().await;
    let recorded = occurrences(&app, &acme.key, &id).await;
    assert_eq!(recorded.len(), 1);
    assert_eq!(recorded[0]["status"], "skipped");
    assert!(
        recorded[0]["reason"].as_str().unwrap().contains("revoked"),
        "{}",
        recorded[0]
    );
    assert!(operations_of(&app, &acme.key).await.is_empty());

    // It is an exception until an operator acknowledges it, with a reason.
    let open = app
        .get("/v1/work_items?queue=exceptions&status=open", ADMIN_KEY)
        .await
        .json();
    let item = &open["data"][0];
    assert_eq!(
        (item["kind"].as_str(), item["cause"]["code"].as_str()),
        (Some("occurrence_skipped"), Some("occurrence_skipped")),
        "{open:#}"
    );
    let resolve = format!("/v1/work_items/{}/resolve", item["id"].as_str().unwrap());
    for unexplained in [json!({}), json!({"reason": "  "})] {
        assert_eq!(
            app.post(&resolve, ADMIN_KEY, unexplained).await.error(400)["param"],
            "reason"
        );
    }
    let acknowledged = app
        .post(
            &resolve,
            ADMIN_KEY,
            json!({"reason": "The customer rotated keys; told them to recreate it."}),
        )
        .await;
    assert_eq!(
        (
            acknowledged.json()["status"].as_str(),
            acknowledged.json()["resolution"]["cause"]["code"].as_str()
        ),
        (Some("done"), Some("acknowledged")),
        "{}",
        acknowledged.json()
    );

    let deleted = app.delete(&path, &acme.key).await;
    assert_eq!(deleted.status, 200);
    assert_eq!(app.get(&path, &acme.key).await.status, 404);
    assert!(app.get("/v1/schedules", &acme.key).await.json()["data"]
        .as_array()
        .unwrap()
        .is_empty());
    let history = app.get("/v1/events?type=schedule.deleted", &acme.key).await.json();
    assert_eq!(history["data"][0]["data"]["schedule_id"], id.as_str());
}

/// Times given with an offset are kept and answered in UTC, as every time the API shows is.
#[tokio::test]
async fn times_given_with_an_offset_are_answered_in_utc() {
    let app = spawn_app().await;
    let acme = app.create_customer().await;
    let body = json!({"expression": "rate(1 day)", "start_at": "2031-01-01T09:00:00-03:00",
                      "end_at": "2031-06-01T00:00:00+02:00", "operation": operation("auto")});
    let created = app.post("/v1/schedules", &acme.key, body).await;
    assert_eq!(created.status, 201, "{}", created.json());
    let id = created.id();
    let read = app.get(&format!("/v1/schedules/{id}"), &acme.key).await.json();
    for schedule in [created.json(), read] {
        assert_eq!(
            (&schedule["start_at"], &schedule["end_at"], &schedule["next_run_at"]),
            (
                &json!("2031-01-01T12:00:00Z"),
                &json!("2031-05-31T22:00:00Z"),
                &json!("2031-01-01T12:00:00Z")
            ),
            "{schedule}"
        );
    }
}

#[tokio::test]
async fn bounds_between_minutes_are_kept_within_what_was_given() {
    let app = spawn_app().await;
    let acme = app.create_customer().await;
    let body = json!({"expression": "rate(1 day)", "start_at": "2031-01-01T09:00:30Z",
                      "end_at": "2031-01-05T09:00:59.9Z", "operation": operation("auto")});
    let created = app.post("/v1/schedules", &acme.key, body).await;
    assert_eq!(created.status, 201, "{}", created.json());
    let schedule = created.json();
    assert_eq!(
        (&schedule["start_at"], &schedule["end_at"], &schedule["next_run_at"]),
        (
            &json!("2031-01-01T09:01:00Z"),
            &json!("2031-01-05T09:00:00Z"),
            &json!("2031-01-01T09:01:00Z")
        ),
        "the first run not before start_at, none after end_at: {schedule}"
    );
    let on_the_minute = json!({"expression": "rate(1 day)", "start_at": "2031-01-01T09:00:00Z",
                               "operation": operation("auto")});
    let created = app.post("/v1/schedules", &acme.key, on_the_minute).await.json();
    assert_eq!(created["start_at"], "2031-01-01T09:00:00Z", "{created}");
    let no_minute_between = json!({"expression": "rate(1 day)", "start_at": "2031-01-01T09:00:10Z",
                                   "end_at": "2031-01-01T09:00:50Z", "operation": operation("auto")});
    let refused = app.post("/v1/schedules", &acme.key, no_minute_between).await.error(400);
    assert_eq!(
        (&refused["param"], &refused["code"]),
        (&json!("end_at"), &json!("end_before_start"))
    );
    let last_minute = json!({"expression": "rate(1 day)", "start_at": "9999-12-31T23:59:30Z",
                             "operation": operation("auto")});
    let refused = app.post("/v1/schedules", &acme.key, last_minute).await.error(400);
    assert_eq!(
        (&refused["param"], &refused["code"]),
        (&json!("start_at"), &json!("invalid_time"))
    );
}

/// A schedule made within the minute its cron or at() names does not run that minute's time
/// late (the Scheduler would not): its first run is the next one. A rate runs at once, at the
/// next whole minute.
#[tokio::test]
async fn a_time_already_past_when_the_schedule_is_made_is_not_run_late() {
    let app = spawn_app().await;
    let acme = app.create_customer().await;
    let now = app.clock.now();
    let minute_start = now.replace_second(0).unwrap().replace_nanosecond(0).unwrap();
    jump_to(&app, minute_start + Duration::minutes(1) + Duration::seconds(30));
    let made_at = app.clock.now();
    let this_minute = made_at.replace_second(0).unwrap().replace_nanosecond(0).unwrap();
    let schedule = |expression: String| json!({"expression": expression, "operation": operation("auto")});
    let cron = format!("cron({} {} * * ? *)", this_minute.minute(), this_minute.hour());
    let daily = app.post("/v1/schedules", &acme.key, schedule(cron)).await;
    assert_eq!(daily.status, 201, "{}", daily.json());
    assert_eq!(
        time_of(&daily.json()["next_run_at"]),
        this_minute + Duration::days(1),
        "tomorrow's, not today's half a minute late"
    );
    let at = format!(
        "at({})",
        this_minute
            .format(time::macros::format_description!(
                "[year]-[month]-[day]T[hour]:[minute]:[second]"
            ))
            .unwrap()
    );
    let once = app.post("/v1/schedules", &acme.key, schedule(at)).await.error(400);
    assert_eq!(once["code"], "at_in_past");
    let rate = app
        .post("/v1/schedules", &acme.key, schedule("rate(1 hour)".into()))
        .await
        .json();
    assert_eq!(
        time_of(&rate["next_run_at"]),
        this_minute + Duration::minutes(1),
        "a rate starts at once: at the next whole minute, never before it was made"
    );
    app.clock.advance(Duration::seconds(30));
    app.drain().await;
    assert_eq!(operations_of(&app, &acme.key).await.len(), 1, "the rate's first, alone");
}

#[tokio::test]
async fn bad_schedules_are_refused_by_field_and_nothing_is_written() {
    let app = spawn_app().await;
    let acme = app.create_customer().await;
    let with = |changes: Value| {
        let mut body =
            json!({"expression": "cron(0 9 1 * ? *)", "timezone": "America/Santiago", "operation": operation("auto")});
        for (name, value) in changes.as_object().unwrap() {
            body[name] = value.clone();
        }
        body
    };
    let mut bad_operation = operation("auto");
    bad_operation["items"][0]["amount"] = json!(-5);
    let mut unknown_workflow = operation("auto");
    unknown_workflow["workflow"] = json!("nobody_knows");
    // What the operation's body cannot even be read as is named as a create names it.
    let mut unknown_item_field = operation("auto");
    unknown_item_field["items"][0]["account"] = json!("123");
    let mut amount_as_text = operation("auto");
    amount_as_text["items"][0]["amount"] = json!("100");
    let mut unknown_field = operation("auto");
    unknown_field["bogus"] = json!(1);
    let mut no_items = operation("auto");
    no_items.as_object_mut().unwrap().remove("items");
    for (body, param, code) in [
        (
            with(json!({"expression": "every day"})),
            "expression",
            "invalid_expression",
        ),
        (
            with(json!({"expression": "rate(0 minutes)"})),
            "expression",
            "rate_too_short",
        ),
        (
            with(json!({"expression": "cron(0 9 1 * 2 *)"})),
            "expression",
            "invalid_expression",
        ),
        (
            with(json!({"timezone": "Mars/Olympus"})),
            "timezone",
            "invalid_timezone",
        ),
        (
            with(json!({"expression": "at(2020-01-01T09:00:00)"})),
            "expression",
            "at_in_past",
        ),
        (
            with(json!({"start_at": "2031-02-01T00:00:00Z", "end_at": "2031-01-01T00:00:00Z"})),
            "end_at",
            "end_before_start",
        ),
        (with(json!({"start_at": "tomorrow"})), "start_at", "invalid_time"),
        // The year 10000 in UTC, which RFC 3339 cannot write.
        (
            with(json!({"start_at": "9999-12-31T23:00:00-05:00"})),
            "start_at",
            "invalid_time",
        ),
        // Its first run would be in the year 10000.
        (
            with(json!({"start_at": "9999-12-31T23:00:00Z"})),
            "start_at",
            "never_runs",
        ),
        (
            with(json!({"operation": bad_operation})),
            "operation.items[0].amount",
            "",
        ),
        (
            with(json!({"operation": unknown_workflow})),
            "operation.workflow",
            "unknown_workflow",
        ),
        (
            with(json!({"operation": {"customer_id": acme.id}})),
            "operation.customer_id",
            "parameter_unknown",
        ),
        (
            with(json!({"operation": unknown_item_field})),
            "operation.items[0].account",
            "parameter_unknown",
        ),
        (
            with(json!({"operation": amount_as_text})),
            "operation.items[0].amount",
            "parameter_invalid",
        ),
        (
            with(json!({"operation": unknown_field})),
            "operation.bogus",
            "parameter_unknown",
        ),
        (
            with(json!({"operation": no_items})),
            "operation.items",
            "parameter_missing",
        ),
    ] {
        let refused = app.post("/v1/schedules", &acme.key, body.clone()).await;
        assert_eq!(refused.status, 400, "{body}: {}", refused.json());
        let error = &refused.json()["error"];
        assert_eq!(error["param"], param, "{body}: {error}");
        if !code.is_empty() {
            assert_eq!(error["code"], code, "{body}: {error}");
        }
    }
    assert!(app.get("/v1/schedules", &acme.key).await.json()["data"]
        .as_array()
        .unwrap()
        .is_empty());
    assert!(
        app.get("/v1/events?type=schedule.created", &acme.key).await.json()["data"]
            .as_array()
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn a_customer_has_at_most_a_hundred_live_schedules() {
    let app = ops_tests::spawn_app_with(|config| config.rate_limit = 0).await;
    let acme = app.create_customer().await;
    let other = app.create_customer().await;
    let body = json!({"expression": "rate(1 minute)", "operation": operation("auto")});
    let mut made = vec![];
    for _ in 0..ops_domain::schedules::MAX_LIVE_SCHEDULES {
        let created = app.post("/v1/schedules", &acme.key, body.clone()).await;
        assert_eq!(created.status, 201, "{}", created.json());
        made.push(created.id());
    }
    // Paused ones count: resuming would bring them back.
    let paused = app
        .post(&format!("/v1/schedules/{}/pause", made[0]), &acme.key, json!({}))
        .await;
    assert_eq!(paused.status, 200);
    let refused = app.post("/v1/schedules", &acme.key, body.clone()).await;
    assert_eq!(refused.error(409)["code"], "schedule_limit_reached");
    // Another customer is not held back; a deleted schedule makes room.
    assert_eq!(app.post("/v1/schedules", &other.key, body.clone()).await.status, 201);
    assert_eq!(
        app.delete(&format!("/v1/schedules/{}", made[1]), &acme.key)
            .await
            .status,
        200
    );
    assert_eq!(app.post("/v1/schedules", &acme.key, body).await.status, 201);
}
