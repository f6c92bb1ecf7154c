//! Schedules on AWS: each schedule's EventBridge Scheduler schedule is created, paused,
//! resumed and deleted on the emulator as the schedule changes (by the transition function,
//! from the change stream), and `schedule-fire` records an occurrence once however often the
//! Scheduler delivers it.

use crate::spawn_aws_app;
use aws_sdk_scheduler::error::ProvideErrorMetadata;
use aws_sdk_scheduler::types::ScheduleState;
use ops_domain::ports::Clock;
use ops_tests::{scheduled_payout, Customer, Reply};
use serde_json::{json, Value};

/// `customer`'s schedule of `operation` at `expression` in `timezone`, made.
async fn schedule(
    app: &crate::AwsApp,
    customer: &Customer,
    expression: &str,
    timezone: &str,
    operation: Value,
) -> Reply {
    let body = json!({"expression": expression, "timezone": timezone, "operation": operation});
    let created = app.post("/v1/schedules", &customer.key, body).await;
    assert_eq!(created.status, 201, "{}", created.json());
    created
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_is_mirrored_on_eventbridge_scheduler_and_fired_once() {
    let app = spawn_aws_app().await;
    let acme = app.create_customer().await;
    let operation = scheduled_payout("two_step", &[120_000]);
    let created = schedule(&app, &acme, "cron(0 9 1 * ? *)", "America/Santiago", operation).await;
    let id = created.id();
    let path = format!("/v1/schedules/{id}");
    let target = app.settings.timers.clone().expect("the stack has a schedule group");
    let scheduler = aws_sdk_scheduler::Client::new(&app.config);
    let mirrored = || async {
        scheduler
            .get_schedule()
            .name(&id)
            .group_name(&target.group)
            .send()
            .await
    };
    app.settle(time::Duration::ZERO, 1).await;
    let timer = mirrored().await.expect("the schedule's timer exists");
    assert_eq!(timer.schedule_expression(), Some("cron(0 9 1 * ? *)"));
    assert_eq!(timer.schedule_expression_timezone(), Some("America/Santiago"));
    assert_eq!(timer.state(), Some(&ScheduleState::Enabled));
    let invoked = timer.target().expect("a target");
    assert_eq!(
        (invoked.arn(), invoked.role_arn()),
        (target.function_arn.as_str(), target.role_arn.as_str())
    );
    let input: serde_json::Value = serde_json::from_str(invoked.input().unwrap()).unwrap();
    assert_eq!(
        input,
        json!({"schedule_id": id, "scheduled_at": "<aws.scheduler.scheduled-time>"}),
        "what schedule-fire reads"
    );

    assert_eq!(
        app.post(&format!("{path}/pause"), &acme.key, json!({})).await.status,
        200
    );
    app.settle(time::Duration::ZERO, 1).await;
    assert_eq!(mirrored().await.unwrap().state(), Some(&ScheduleState::Disabled));
    assert_eq!(
        app.post(&format!("{path}/resume"), &acme.key, json!({})).await.status,
        200
    );
    app.settle(time::Duration::ZERO, 1).await;
    assert_eq!(mirrored().await.unwrap().state(), Some(&ScheduleState::Enabled));

    // The Scheduler fires the next occurrence, twice (at-least-once): one operation.
    let next = created.json()["next_run_at"].as_str().unwrap().to_owned();
    let due = time::OffsetDateTime::parse(&next, &time::format_description::well_known::Rfc3339).unwrap();
    app.clock.advance(due - app.clock.now() + time::Duration::seconds(20));
    let mut payload: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(format!("{}/../events/schedule-fire.json", env!("CARGO_MANIFEST_DIR"))).unwrap(),
    )
    .unwrap();
    payload["schedule_id"] = id.clone().into();
    payload["scheduled_at"] = next.clone().into();
    let first = ops_runtime::triggers::schedule_fire(&app.service, payload.clone())
        .await
        .unwrap();
    let again = ops_runtime::triggers::schedule_fire(&app.service, payload)
        .await
        .unwrap();
    assert_eq!(
        (first["recorded"].as_u64(), again["recorded"].as_u64()),
        (Some(1), Some(0))
    );
    let occurrences = app.get(&format!("{path}/occurrences"), &acme.key).await.json();
    assert_eq!(occurrences["data"].as_array().unwrap().len(), 1);
    assert_eq!(occurrences["data"][0]["scheduled_at"], next.as_str());
    let operations = app.get("/v1/operations", &acme.key).await.json();
    let operations = operations["data"].as_array().unwrap();
    assert_eq!(operations.len(), 1);
    assert_eq!(operations[0]["status"], "pending_approval", "through its workflow");
    // Made by the schedule; the person who set it up is its creator for four-eyes.
    assert_eq!(operations[0]["created_by"], created.json()["created_by"]);
    assert!(
        ops_runtime::triggers::schedule_fire(&app.service, json!({"schedule_id": id}))
            .await
            .is_err(),
        "a payload without its time is refused"
    );

    let deleted = app.delete(&path, &acme.key).await;
    assert_eq!(deleted.status, 200);
    app.settle(time::Duration::ZERO, 1).await;
    let gone = mirrored().await.expect_err("the timer is deleted with its schedule");
    assert_eq!(gone.code(), Some("ResourceNotFoundException"));
}

/// A firing whose function failed every attempt reaches `schedule-fire`'s dead-letter queue,
/// whose consumer records the occurrence `missed` with an exceptions work item at once (not a
/// month later, when the next occurrence of a monthly payroll would find it missed); the same
/// dead letter delivered again records nothing more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_firing_that_failed_every_attempt_opens_its_work_item_at_once() {
    use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
    let app = spawn_aws_app().await;
    let acme = app.create_customer().await;
    let operation = scheduled_payout("auto", &[50_000]);
    let created = schedule(&app, &acme, "cron(0 9 28 * ? *)", "UTC", operation).await;
    let id = created.id();
    let next = created.json()["next_run_at"].as_str().unwrap().to_owned();
    let due = time::OffsetDateTime::parse(&next, &time::format_description::well_known::Rfc3339).unwrap();
    app.clock.advance(due - app.clock.now() + time::Duration::seconds(5));

    // What Lambda puts on a function's dead-letter queue: the event it could not handle.
    let mut message = SqsMessage::default();
    message.message_id = Some("dead-firing-1".into());
    message.body = Some(json!({"schedule_id": id, "scheduled_at": next}).to_string());
    let mut event = SqsEvent::default();
    event.records = vec![message];
    for _ in 0..2 {
        let answer = ops_runtime::triggers::dead_letters(&app.service, event.clone()).await;
        assert!(answer.batch_item_failures.is_empty(), "{answer:?}");
    }
    let occurrences = app
        .get(&format!("/v1/schedules/{id}/occurrences"), &acme.key)
        .await
        .json();
    let occurrences = occurrences["data"].as_array().unwrap();
    assert_eq!(occurrences.len(), 1, "{occurrences:?}");
    assert_eq!(occurrences[0]["status"], "missed");
    assert_eq!(occurrences[0]["scheduled_at"], next.as_str());
    app.settle(time::Duration::ZERO, 1).await;
    let items = app
        .get("/v1/work_items?queue=exceptions", ops_tests::ADMIN_KEY)
        .await
        .json();
    let opened: Vec<_> = items["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|item| item["customer_id"] == acme.id.as_str())
        .collect();
    assert_eq!(opened.len(), 1, "{items}");
    assert_eq!(opened[0]["subject"]["type"], "occurrence", "{}", opened[0]);
    assert_eq!(opened[0]["kind"], "occurrence_missed", "{}", opened[0]);
}

/// A schedule that keeps banking days is, on the Scheduler, a one-off `at()` of its next run
/// (the Scheduler has no calendar), which `schedule-fire` sets again after each firing; a
/// backfill on DynamoDB makes the past occurrences once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_that_keeps_banking_days_sets_its_timer_to_each_next_run() {
    use time::format_description::well_known::Rfc3339;
    use time::OffsetDateTime;
    let app = spawn_aws_app().await;
    let acme = app.create_customer().await;
    let calendar = app
        .post(
            "/v1/calendars",
            ops_tests::ADMIN_KEY,
            json!({"name": "Weekdays", "timezone": "UTC"}),
        )
        .await;
    assert_eq!(calendar.status, 201, "{}", calendar.json());
    // Each Saturday's payout runs on the Monday after.
    let body = json!({"expression": "cron(0 9 ? * SAT *)", "timezone": "UTC",
                      "business_day": "following", "calendar_id": calendar.id(),
                      "operation": scheduled_payout("auto", &[75_000])});
    let created = app.post("/v1/schedules", &acme.key, body).await;
    assert_eq!(created.status, 201, "{}", created.json());
    let id = created.id();
    let time = |value: &Value| OffsetDateTime::parse(value.as_str().unwrap(), &Rfc3339).unwrap();
    let (key, runs) = (
        time(&created.json()["next_occurrence_at"]),
        time(&created.json()["next_run_at"]),
    );
    assert_eq!(
        (key.weekday(), runs.weekday(), runs - key),
        (time::Weekday::Saturday, time::Weekday::Monday, time::Duration::days(2))
    );
    let target = app.settings.timers.clone().expect("the stack has a schedule group");
    let scheduler = aws_sdk_scheduler::Client::new(&app.config);
    let timer = || async {
        let timer = scheduler
            .get_schedule()
            .name(&id)
            .group_name(&target.group)
            .send()
            .await
            .expect("the schedule's timer exists");
        (
            timer.schedule_expression().unwrap_or_default().to_owned(),
            timer.schedule_expression_timezone().unwrap_or_default().to_owned(),
        )
    };
    let at = |runs: OffsetDateTime| {
        format!(
            "at({:04}-{:02}-{:02}T09:00:00)",
            runs.year(),
            u8::from(runs.month()),
            runs.day()
        )
    };
    app.settle(time::Duration::ZERO, 1).await;
    assert_eq!(timer().await, (at(runs), "UTC".to_owned()));

    app.clock.advance(runs - app.clock.now() + time::Duration::seconds(20));
    let fire = json!({"schedule_id": id, "scheduled_at": runs.format(&Rfc3339).unwrap()});
    let fired = ops_runtime::triggers::schedule_fire(&app.service, fire).await.unwrap();
    assert_eq!(fired["recorded"].as_u64(), Some(1));
    let next = runs + time::Duration::days(7);
    assert_eq!(timer().await.0, at(next), "set to the next Monday by the firing");
    let path = format!("/v1/schedules/{id}");
    let recorded = app.get(&format!("{path}/occurrences"), &acme.key).await.json();
    assert_eq!(recorded["data"][0]["scheduled_at"], key.format(&Rfc3339).unwrap());
    assert_eq!(recorded["data"][0]["runs_at"], runs.format(&Rfc3339).unwrap());

    // The two Saturdays of the fortnight before it was made, made on request, once.
    let made_at = time(&created.json()["created_at"]);
    let range = json!({"from": (made_at - time::Duration::days(14)).format(&Rfc3339).unwrap(),
                       "to": app.clock.now().format(&Rfc3339).unwrap()});
    let first = app.post(&format!("{path}/backfill"), &acme.key, range.clone()).await;
    assert_eq!(first.status, 200, "{}", first.json());
    assert_eq!(
        (
            first.json()["created"].as_array().unwrap().len(),
            &first.json()["already_created"]
        ),
        (2, &json!(1))
    );
    let again = app.post(&format!("{path}/backfill"), &acme.key, range).await;
    assert_eq!(
        (
            again.json()["created"].as_array().unwrap().len(),
            &again.json()["already_created"]
        ),
        (0, &json!(3))
    );
    let operations = app.get("/v1/operations", &acme.key).await.json();
    assert_eq!(operations["data"].as_array().unwrap().len(), 3);
}

/// On DynamoDB a payout after the rail's last cut-off waits in the transactions' due index
/// for its settlement day's window, then goes once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_after_the_last_cutoff_waits_in_the_due_index_for_its_window() {
    let app = spawn_aws_app().await;
    let acme = app.create_customer().await;
    app.set_sandbox_cutoffs(
        json!({"name": "Weekdays", "timezone": "UTC"}),
        json!({"cutoffs": ["15:00"], "after_last_cutoff": "wait"}),
    )
    .await;
    // The next Friday at 16:00 UTC: after its only cut-off.
    let now = app.clock.now();
    let days_to_friday = (5 + 7 - i64::from(now.weekday().number_from_monday())) % 7 + 7;
    let friday = (now.date() + time::Duration::days(days_to_friday))
        .with_hms(16, 0, 0)
        .unwrap()
        .assume_utc();
    app.clock.advance(friday - now);
    let made = app
        .post(
            "/v1/operations",
            &acme.key,
            ops_tests::payout(&acme.id, "auto", &[33_000]),
        )
        .await;
    assert_eq!(made.status, 201, "{}", made.json());
    let transaction = || async {
        let list = app
            .get(&format!("/v1/transactions?operation_id={}", made.id()), &acme.key)
            .await
            .json();
        list["data"][0].clone()
    };
    app.settle(time::Duration::ZERO, 1).await;
    let held = transaction().await;
    let monday = friday.date() + time::Duration::days(3);
    assert_eq!(held["status"], "pending", "{held}");
    assert_eq!(held["settlement_day"], monday.to_string());
    assert_eq!(held["submit_after"], format!("{monday}T00:00:00Z"));
    app.settle(time::Duration::hours(12), 4).await;
    assert_eq!(transaction().await["status"], "pending", "nothing over the weekend");
    app.clock
        .advance(monday.midnight().assume_utc() - app.clock.now() + time::Duration::seconds(30));
    app.settle(time::Duration::minutes(1), 3).await;
    let sent = transaction().await;
    assert_ne!(sent["status"], "pending", "{sent}");
    assert!(sent["submit_after"].is_null() && sent["submit_attempts"] == 1, "{sent}");
}
