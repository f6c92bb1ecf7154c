//! Schedules that keep banking days, backfill and pause on failure: a month-end payroll moved
//! off weekends and holidays by its calendar, keeping its own date; the occurrences a pause or
//! an outage left unmade made on request, each once; a schedule that stops when what it made
//! fails.

use ops_tests::{scheduled_payout, spawn_app, TestApp, ADMIN_KEY};
use serde_json::{json, Value};
use time::macros::datetime;
use time::{Duration, OffsetDateTime};

fn jump_to(app: &TestApp, target: OffsetDateTime) {
    let now = ops_domain::ports::Clock::now(&*app.clock);
    assert!(target > now, "the clock only moves forward: {target} is before {now}");
    app.clock.advance(target - now);
}

async fn list(app: &TestApp, key: &str, path: &str) -> Vec<Value> {
    let page = app.get(path, key).await;
    assert_eq!(page.status, 200, "{}", page.json());
    page.json()["data"].as_array().unwrap().clone()
}

/// Chile's banks: Monday to Friday, closed on New Year's Eve and New Year's Day.
async fn chilean_banks(app: &TestApp) -> String {
    let made = app
        .post(
            "/v1/calendars",
            ADMIN_KEY,
            json!({"name": "Chilean banks", "timezone": "America/Santiago",
                   "holidays": [{"date": "2031-12-31", "name": "Feriado bancario"},
                                {"date": "2032-01-01", "name": "Año Nuevo"}]}),
        )
        .await;
    assert_eq!(made.status, 201, "{}", made.json());
    made.id()
}

#[tokio::test]
async fn a_month_end_payroll_runs_on_the_banking_day_its_rule_names_and_keeps_its_own_date() {
    let app = spawn_app().await;
    let acme = app.create_customer().await;
    let calendar = chilean_banks(&app).await;
    jump_to(&app, datetime!(2031-11-20 00:00 UTC));
    let body = |extra: Value| {
        let mut body = json!({"expression": "cron(0 9 L * ? *)", "timezone": "America/Santiago",
                              "operation": scheduled_payout("auto", &[900_000])});
        body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        body
    };
    // A rule needs the calendar it reads; a calendar must exist.
    let no_calendar = app
        .post("/v1/schedules", &acme.key, body(json!({"business_day": "following"})))
        .await;
    assert_eq!(no_calendar.status, 400, "{}", no_calendar.json());
    assert_eq!(no_calendar.json()["error"]["param"], "calendar_id");
    let unknown = app
        .post(
            "/v1/schedules",
            &acme.key,
            body(json!({"business_day": "following", "calendar_id": "cal_01nosuchcalendar0000000000"})),
        )
        .await;
    assert_eq!(unknown.status, 404, "{}", unknown.json());
    assert_eq!(unknown.json()["error"]["param"], "calendar_id");
    let bad_rule = app
        .post(
            "/v1/schedules",
            &acme.key,
            body(json!({"business_day": "nearest", "calendar_id": calendar})),
        )
        .await;
    assert_eq!(bad_rule.status, 400, "{}", bad_rule.json());
    assert_eq!(bad_rule.json()["error"]["param"], "business_day");

    let created = app
        .post(
            "/v1/schedules",
            &acme.key,
            body(json!({"business_day": "modified_following", "calendar_id": calendar})),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.json());
    let schedule = created.json();
    let id = schedule["id"].as_str().unwrap().to_owned();
    assert_eq!(
        (schedule["business_day"].as_str(), schedule["calendar_id"].as_str()),
        (Some("modified_following"), Some(calendar.as_str()))
    );
    // Santiago is UTC−3 in its summer. Sunday 30 November's following banking day is in
    // December, so Friday the 28th; New Year's Eve is a bank holiday and the 1st and 2nd of
    // January are in the next month, so Tuesday the 30th; the 31st of January is a Saturday;
    // the 29th of February 2032 a Sunday.
    assert_eq!(schedule["next_occurrence_at"], "2031-11-30T12:00:00Z");
    assert_eq!(schedule["next_run_at"], "2031-11-28T12:00:00Z");
    let upcoming = list(&app, &acme.key, &format!("/v1/schedules/{id}/occurrences?upcoming=4")).await;
    let dates: Vec<(&str, &str)> = upcoming
        .iter()
        .map(|o| (o["scheduled_at"].as_str().unwrap(), o["runs_at"].as_str().unwrap()))
        .collect();
    assert_eq!(
        dates,
        [
            ("2031-11-30T12:00:00Z", "2031-11-28T12:00:00Z"),
            ("2031-12-31T12:00:00Z", "2031-12-30T12:00:00Z"),
            ("2032-01-31T12:00:00Z", "2032-01-30T12:00:00Z"),
            ("2032-02-29T12:00:00Z", "2032-02-27T12:00:00Z"),
        ]
    );

    // Nothing before its run; at it, the occurrence of the 30th is made, on the 28th.
    jump_to(&app, datetime!(2031-11-28 11:59 UTC));
    app.drain().await;
    let occurrences = format!("/v1/schedules/{id}/occurrences");
    assert!(list(&app, &acme.key, &occurrences).await.is_empty());
    jump_to(&app, datetime!(2031-11-28 12:00:20 UTC));
    app.drain().await;
    let made = list(&app, &acme.key, &occurrences).await;
    assert_eq!(made.len(), 1, "{made:?}");
    assert_eq!(
        (
            made[0]["scheduled_at"].as_str(),
            made[0]["runs_at"].as_str(),
            made[0]["status"].as_str()
        ),
        (
            Some("2031-11-30T12:00:00Z"),
            Some("2031-11-28T12:00:00Z"),
            Some("created")
        )
    );
    let moved = app.get(&format!("/v1/schedules/{id}"), &acme.key).await.json();
    assert_eq!(
        (moved["next_occurrence_at"].as_str(), moved["next_run_at"].as_str()),
        (Some("2031-12-31T12:00:00Z"), Some("2031-12-30T12:00:00Z"))
    );
    // Its own date passes without a second one.
    jump_to(&app, datetime!(2031-11-30 12:00:30 UTC));
    app.drain().await;
    assert_eq!(list(&app, &acme.key, &occurrences).await.len(), 1);
    let operations = list(&app, &acme.key, "/v1/operations").await;
    assert_eq!(operations.len(), 1);
    assert_eq!(operations[0]["schedule_id"], id.as_str());
    assert_eq!(operations[0]["occurrence_at"], "2031-11-30T12:00:00Z");
}

#[tokio::test]
async fn a_backfill_makes_what_a_pause_or_an_outage_left_unmade_each_once() {
    let app = spawn_app().await;
    let acme = app.create_customer().await;
    jump_to(&app, datetime!(2031-03-01 00:00 UTC));
    let created = app
        .post(
            "/v1/schedules",
            &acme.key,
            json!({"expression": "cron(0 9 * * ? *)", "catch_up_window_hours": 1,
                   "operation": scheduled_payout("auto", &[10_000])}),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.json());
    let id = created.id();
    let path = format!("/v1/schedules/{id}");
    // Down over two mornings: both are missed (a window of an hour), the third made.
    jump_to(&app, datetime!(2031-03-03 09:00:30 UTC));
    app.drain().await;
    let recorded = list(&app, &acme.key, &format!("{path}/occurrences")).await;
    let statuses: Vec<&str> = recorded.iter().map(|o| o["status"].as_str().unwrap()).collect();
    assert_eq!(statuses, ["created", "missed", "missed"]);
    assert_eq!(list(&app, &acme.key, "/v1/operations").await.len(), 1);

    let backfill = |body: Value| {
        let (app, path, key) = (&app, format!("{path}/backfill"), acme.key.clone());
        async move { app.post(&path, &key, body).await }
    };
    let future = backfill(json!({"from": "2031-03-01T00:00:00Z", "to": "2031-03-09T00:00:00Z"})).await;
    assert_eq!(future.status, 400, "{}", future.json());
    assert_eq!(future.json()["error"]["param"], "to");
    let wide = backfill(json!({"from": "2030-01-01T00:00:00Z", "to": "2031-03-03T00:00:00Z"})).await;
    assert_eq!(wide.status, 400, "{}", wide.json());
    assert_eq!(wide.json()["error"]["code"], "backfill_too_wide");
    let missing = backfill(json!({"to": "2031-03-03T00:00:00Z"})).await;
    assert_eq!(missing.json()["error"]["param"], "from");

    // The two missed mornings are made; the third, the timer's, is left as it is.
    let range = json!({"from": "2031-03-01T00:00:00Z", "to": "2031-03-03T09:00:00Z"});
    let first = backfill(range.clone()).await;
    assert_eq!(first.status, 200, "{}", first.json());
    let answer = first.json();
    let made: Vec<&str> = answer["created"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["scheduled_at"].as_str().unwrap())
        .collect();
    assert_eq!(made, ["2031-03-01T09:00:00Z", "2031-03-02T09:00:00Z"]);
    assert_eq!(first.json()["already_created"], 1);
    let again = backfill(range).await;
    assert_eq!(again.status, 200);
    assert_eq!(
        (
            again.json()["created"].as_array().unwrap().len(),
            &again.json()["already_created"]
        ),
        (0, &json!(3)),
        "a backfill again makes nothing"
    );
    let recorded = list(&app, &acme.key, &format!("{path}/occurrences")).await;
    assert!(recorded.iter().all(|o| o["status"] == "created"), "{recorded:?}");
    assert_eq!(recorded.iter().filter(|o| o["backfilled"] == true).count(), 2);
    assert_eq!(list(&app, &acme.key, "/v1/operations").await.len(), 3);
    // Each is audited with who asked, in its operation's history.
    let operation = first.json()["created"][0]["operation_id"].as_str().unwrap().to_owned();
    let history = list(&app, &acme.key, &format!("/v1/operations/{operation}/history")).await;
    let backfilled = history
        .iter()
        .find(|entry| entry["action"] == "occurrence_backfilled")
        .unwrap_or_else(|| panic!("{history:#?}"));
    assert_eq!(backfilled["cause"]["actor"]["type"], "api_key", "{backfilled}");

    // Paused for two mornings, resumed: those are not made until asked for.
    assert_eq!(
        app.post(&format!("{path}/pause"), &acme.key, json!({})).await.status,
        200
    );
    jump_to(&app, datetime!(2031-03-05 10:00 UTC));
    app.drain().await;
    assert_eq!(
        app.post(&format!("{path}/resume"), &acme.key, json!({})).await.status,
        200
    );
    let paused_range = json!({"from": "2031-03-04T00:00:00Z", "to": "2031-03-05T10:00:00Z"});
    let filled = backfill(paused_range).await;
    assert_eq!(
        filled.json()["created"].as_array().unwrap().len(),
        2,
        "{}",
        filled.json()
    );
    assert_eq!(list(&app, &acme.key, "/v1/operations").await.len(), 5);
}

#[tokio::test]
async fn a_schedule_that_pauses_on_failure_stops_when_its_operation_is_rejected() {
    let app = spawn_app().await;
    let acme = app.create_customer().await;
    app.put_workflow(
        &acme.key,
        "refuse_all",
        json!({"rules": [{"then": {"action": "reject", "reason": "Payroll frozen"}}]}),
    )
    .await;
    let created = app
        .post(
            "/v1/schedules",
            &acme.key,
            json!({"expression": "rate(1 hour)", "pause_on_failure": true,
                   "operation": scheduled_payout("refuse_all", &[10_000])}),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.json());
    assert_eq!(created.json()["pause_on_failure"], true);
    let id = created.id();
    app.clock.advance(Duration::minutes(1));
    app.drain().await;
    let schedule = app.get(&format!("/v1/schedules/{id}"), &acme.key).await.json();
    assert_eq!(schedule["status"], "paused", "{schedule}");
    assert_eq!(schedule["cause"]["code"], "paused_on_failure");
    let operations = list(&app, &acme.key, "/v1/operations").await;
    assert_eq!(operations.len(), 1);
    assert_eq!(operations[0]["status"], "rejected");
    let items = app.open_exceptions().await;
    let item = items
        .iter()
        .find(|item| item["kind"] == "occurrence_operation_failed")
        .unwrap_or_else(|| panic!("{items:#?}"));
    assert_eq!(item["subject"]["type"], "occurrence");
    assert!(item["subject"]["id"].as_str().unwrap().starts_with(&format!("{id}@")));
    // Paused, it makes nothing more.
    app.clock.advance(Duration::hours(3));
    app.drain().await;
    assert_eq!(list(&app, &acme.key, "/v1/operations").await.len(), 1);
}
