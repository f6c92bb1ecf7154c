//! Banking calendars and rails' cut-offs: a calendar made and its holidays imported year by
//! year, a rail naming it with its cut-offs, and the next cut-off answered in the calendar's
//! time zone, skipping weekends and holidays.

use ops_tests::{spawn_app, TestApp, ADMIN_KEY};
use serde_json::{json, Value};

async fn send(app: &TestApp, method: reqwest::Method, path: &str, key: &str, body: Value) -> ops_tests::Reply {
    app.send(method, path, Some(key), Some(&format!("k-{path}-{body}")), Some(&body))
        .await
}

#[tokio::test]
async fn a_rails_next_cutoff_skips_the_days_its_calendar_is_closed() {
    let app = spawn_app().await;
    let acme = app.create_customer().await;
    let made = send(
        &app,
        reqwest::Method::POST,
        "/v1/calendars",
        ADMIN_KEY,
        json!({"name": "Chilean banks", "timezone": "America/Santiago",
               "holidays": [{"date": "2026-09-18", "name": "Fiestas Patrias"}]}),
    )
    .await;
    assert_eq!(made.status, 201, "{}", made.json());
    let calendar = made.json();
    let id = calendar["id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("cal_"));
    assert_eq!(calendar["working_days"], json!(["mon", "tue", "wed", "thu", "fri"]));
    // A customer may not make one; a bad weekday is named.
    let refused = send(
        &app,
        reqwest::Method::POST,
        "/v1/calendars",
        &acme.key,
        json!({"name": "x", "timezone": "UTC"}),
    )
    .await;
    assert_eq!(refused.status, 403);
    let bad = send(
        &app,
        reqwest::Method::POST,
        "/v1/calendars",
        ADMIN_KEY,
        json!({"name": "x", "timezone": "UTC", "working_days": ["mon", "funday"]}),
    )
    .await;
    assert_eq!(bad.status, 400);
    assert_eq!(bad.json()["error"]["param"], "working_days[1]");

    // December's holidays from a published iCalendar file; the CSV form for another year.
    let ical = "BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\nDTSTART;VALUE=DATE:20261208\r\nSUMMARY:Inmaculada Concepción\r\nEND:VEVENT\r\n\
                BEGIN:VEVENT\r\nDTSTART;VALUE=DATE:20261225\r\nSUMMARY:Navidad\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n";
    let path = format!("/v1/calendars/{id}/holidays");
    let imported = send(
        &app,
        reqwest::Method::POST,
        &path,
        ADMIN_KEY,
        json!({"year": 2026, "format": "ical", "file": ical}),
    )
    .await;
    assert_eq!(imported.status, 200, "{}", imported.json());
    let dates: Vec<Value> = imported.json()["holidays"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["date"].clone())
        .collect();
    assert_eq!(
        dates,
        ["2026-12-08", "2026-12-25"],
        "the year's list replaces the year's holidays"
    );
    let wrong_year = send(
        &app,
        reqwest::Method::POST,
        &path,
        ADMIN_KEY,
        json!({"year": 2027, "format": "csv", "file": "date,name\n2027-01-01,Año Nuevo\n2026-12-31,Fin\n"}),
    )
    .await;
    assert_eq!(wrong_year.status, 400);
    assert_eq!(
        wrong_year.json()["error"]["message"],
        "Line 3, column 1: 2026-12-31 is not in 2027"
    );
    assert_eq!(
        app.get(&format!("/v1/calendars/{id}"), ADMIN_KEY).await.json()["version"],
        2
    );

    let rail = "psp-local:sandbox";
    let cutoffs = format!("/v1/rails/{rail}/cutoffs");
    let none_yet = app.get(&format!("/v1/rails/{rail}/next_cutoff"), &acme.key).await;
    assert_eq!(none_yet.status, 409, "{}", none_yet.json());
    let saved = app
        .send(
            reqwest::Method::PUT,
            &cutoffs,
            Some(ADMIN_KEY),
            None,
            Some(&json!({"calendar_id": id, "cutoffs": ["17:30", "14:00"], "after_last_cutoff": "send_now"})),
        )
        .await;
    assert_eq!(saved.status, 200, "{}", saved.json());
    assert_eq!(saved.json()["cutoffs"], json!(["14:00", "17:30"]));
    let next = |at: &str| {
        let path = format!("/v1/rails/{rail}/next_cutoff?at={}", at.replace('+', "%2B"));
        let app = &app;
        let key = acme.key.clone();
        async move {
            let answer = app.get(&path, &key).await;
            assert_eq!(answer.status, 200, "{}", answer.json());
            let json = answer.json();
            (
                json["cutoff_at"].as_str().unwrap().to_owned(),
                json["settlement_day"].as_str().unwrap().to_owned(),
                json["sends_now"].as_bool().unwrap(),
            )
        }
    };
    // Monday 7 December, 12:00 in Santiago (UTC−3): the 14:00 cut-off, settling that day.
    assert_eq!(
        next("2026-12-07T15:00:00Z").await,
        ("2026-12-07T17:00:00Z".into(), "2026-12-07".into(), false)
    );
    // After Monday's last: Tuesday the 8th is a holiday, so Wednesday's first, sent now.
    assert_eq!(
        next("2026-12-07T21:00:00-00:00").await,
        ("2026-12-09T17:00:00Z".into(), "2026-12-09".into(), true)
    );
    // Christmas Eve after hours: Christmas, then the weekend, then Monday the 28th.
    assert_eq!(next("2026-12-24T23:00:00Z").await.1, "2026-12-28");
    let unknown_calendar = app
        .send(
            reqwest::Method::PUT,
            &cutoffs,
            Some(ADMIN_KEY),
            None,
            Some(&json!({"calendar_id": "cal_01nosuchcalendar0000000000", "cutoffs": ["14:00"]})),
        )
        .await;
    assert_eq!(unknown_calendar.status, 404);
    assert_eq!(unknown_calendar.json()["error"]["param"], "calendar_id");
}

/// A payout approved after the rail's last cut-off of a Friday waits for Monday's window when
/// the rail waits (the rail is told nothing before), and goes at once settling on Monday when
/// it sends now; each transaction shows the cut-off and the settlement day it is for.
#[tokio::test]
async fn a_transaction_after_the_last_cutoff_waits_for_the_next_banking_day_or_goes_now() {
    use ops_domain::ports::Clock;
    let app = spawn_app().await;
    let acme = app.create_customer().await;
    let calendar = send(
        &app,
        reqwest::Method::POST,
        "/v1/calendars",
        ADMIN_KEY,
        json!({"name": "Chilean banks", "timezone": "America/Santiago"}),
    )
    .await
    .id();
    let rail = "psp-local:sandbox";
    let set_cutoffs = |after: &'static str| {
        let (app, calendar) = (&app, calendar.clone());
        async move {
            let body = json!({"calendar_id": calendar, "cutoffs": ["14:00", "17:30"], "after_last_cutoff": after});
            let path = format!("/v1/rails/{rail}/cutoffs");
            let saved = app
                .send(reqwest::Method::PUT, &path, Some(ADMIN_KEY), None, Some(&body))
                .await;
            assert_eq!(saved.status, 200, "{}", saved.json());
        }
    };
    set_cutoffs("wait").await;
    // Friday 4 December 2026 at 19:00 in Santiago (UTC−3): after its last cut-off.
    let friday_evening = time::macros::datetime!(2026-12-04 22:00 UTC);
    app.clock.advance(friday_evening - app.clock.now());
    let payout = |amount: i64| {
        let (app, acme) = (&app, &acme);
        async move {
            let made = app
                .post(
                    "/v1/operations",
                    &acme.key,
                    ops_tests::payout(&acme.id, "auto", &[amount]),
                )
                .await;
            assert_eq!(made.status, 201, "{}", made.json());
            made.id()
        }
    };
    let transaction_of = |operation: String| {
        let (app, key) = (&app, acme.key.clone());
        async move {
            let list = app
                .get(&format!("/v1/transactions?operation_id={operation}"), &key)
                .await
                .json();
            list["data"][0].clone()
        }
    };
    let waiting = payout(41_000).await;
    app.drain().await;
    let held = transaction_of(waiting.clone()).await;
    assert_eq!(held["status"], "pending", "{held}");
    assert_eq!(
        (
            held["cutoff_at"].as_str(),
            held["settlement_day"].as_str(),
            held["submit_after"].as_str()
        ),
        (
            Some("2026-12-07T17:00:00Z"),
            Some("2026-12-07"),
            Some("2026-12-07T03:00:00Z")
        ),
        "Monday's 14:00 cut-off, its window opening at Monday's midnight"
    );
    assert!(
        app.sandbox().await.is_empty(),
        "the rail is told nothing over the weekend"
    );
    // Saturday: still nothing.
    app.clock.advance(time::Duration::hours(20));
    app.drain().await;
    assert!(app.sandbox().await.is_empty());
    // Monday's window opens: it goes, once, for Monday.
    let monday = time::macros::datetime!(2026-12-07 03:00:30 UTC);
    app.clock.advance(monday - app.clock.now());
    app.settle(time::Duration::minutes(1), 3).await;
    assert_eq!(app.sandbox().await.len(), 1);
    let sent = transaction_of(waiting).await;
    assert_ne!(sent["status"], "pending", "{sent}");
    assert_eq!(
        (sent["settlement_day"].as_str(), sent["submit_after"].is_null()),
        (Some("2026-12-07"), true)
    );

    // Monday after hours with a rail that sends now: it goes at once, settling on Tuesday.
    set_cutoffs("send_now").await;
    let monday_evening = time::macros::datetime!(2026-12-07 22:00 UTC);
    app.clock.advance(monday_evening - app.clock.now());
    let late = payout(42_000).await;
    app.drain().await;
    assert_eq!(app.sandbox().await.len(), 2, "sent at once");
    let sent_now = transaction_of(late).await;
    assert_eq!(
        (sent_now["cutoff_at"].as_str(), sent_now["settlement_day"].as_str()),
        (Some("2026-12-08T17:00:00Z"), Some("2026-12-08"))
    );
}
