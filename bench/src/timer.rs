//! The embedded schedule timer: its cost per round, and how late an occurrence runs.

use crate::measure::{ms, percentile};
use ops_tests::{payout, Api};
use std::time::{Duration, Instant};

/// The embedded timer's cost per round with 100, 1,000 and 10,000 active schedules none of
/// which is due (the due index is read, not the schedules), and how soon after its time an
/// occurrence's operation exists with the local server's pipeline running.
pub(crate) async fn schedule_timer() {
    use ops_domain::ports::{Changeset, Commit, Write};
    use ops_domain::schedules::{Schedule, ScheduleStatus, ScheduleStore};
    println!();
    println!("### Schedule timer (local mode, SQLite)");
    println!();
    println!("| active schedules | due-index read per round, p50 (ms) | p99 (ms) |");
    println!("|---:|---:|---:|");
    let data_dir = tempfile::tempdir().unwrap();
    let store = ops_infra::embedded::SqliteStore::open(&data_dir.path().join("timer.sqlite")).unwrap();
    let now = time::OffsetDateTime::now_utc();
    let cause = ops_domain::cause::Cause::new("schedule_created", "bench", ops_domain::cause::Actor::system(), now);
    let mut stored = 0;
    for target in [100, 1_000, 10_000] {
        while stored < target {
            let writes = (stored..(stored + 500).min(target))
                .map(|i| {
                    Write::PutSchedule(Schedule {
                        id: format!("sch_bench{i:06}").into(),
                        customer_id: "cus_bench".into(),
                        expression: "rate(1 day)".into(),
                        timezone: "UTC".into(),
                        operation: serde_json::json!({}),
                        status: ScheduleStatus::Active,
                        start_at: None,
                        end_at: None,
                        // Spread over the next day: none due now.
                        next_run_at: Some(now + time::Duration::seconds(60 + i as i64 % 86_000)),
                        next_occurrence_at: None,
                        business_day: Default::default(),
                        calendar_id: None,
                        pause_on_failure: false,
                        catch_up_window_hours: 24,
                        anchor: now,
                        api_key_id: "key_bench".into(),
                        created_by: "key_bench".into(),
                        set_up_by: None,
                        cause: cause.clone(),
                        created_at: now,
                        updated_at: now,
                        environment: ops_domain::access::Environment::Test,
                        version: 1,
                    })
                })
                .collect::<Vec<_>>();
            stored += writes.len();
            store.commit(Changeset { writes }).await.unwrap();
        }
        let mut rounds = vec![];
        for _ in 0..500 {
            let started = Instant::now();
            let due = store.schedules_due(now, 100).await.unwrap();
            rounds.push(started.elapsed());
            assert!(due.is_empty());
        }
        println!(
            "| {target} | {} | {} |",
            ms(percentile(&mut rounds, 0.5)),
            ms(percentile(&mut rounds, 0.99))
        );
    }

    let server_dir = tempfile::tempdir().unwrap();
    let mut config = ops_tests::config(server_dir.path().to_path_buf());
    config.worker = true;
    config.rate_limit = 0;
    let server = ops_local::start(config).await.expect("server starts");
    let api = Api {
        base: format!("http://{}", server.address),
        client: reqwest::Client::new(),
    };
    let customer = api.create_customer().await;
    let mut body = payout(&customer.id, "two_step", &[1_000]);
    body.as_object_mut().unwrap().remove("customer_id");
    let mut waits = vec![];
    for _ in 0..10 {
        let created = api
            .post(
                "/v1/schedules",
                &customer.key,
                serde_json::json!({"expression": "rate(1 day)", "operation": body}),
            )
            .await;
        let path = format!("/v1/schedules/{}/occurrences", created.id());
        loop {
            if !api.get(&path, &customer.key).await.json()["data"]
                .as_array()
                .unwrap()
                .is_empty()
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        // A rate schedule without a start runs at once: count from when it was made.
        waits.push(Duration::from_secs_f64(
            (time::OffsetDateTime::now_utc() - created_at(&created)).as_seconds_f64(),
        ));
    }
    println!();
    println!(
        "Occurrence due at creation → its operation stored, with the pipeline running (10 schedules): p50 {} ms, max {} ms",
        ms(percentile(&mut waits, 0.5)),
        ms(percentile(&mut waits, 1.0))
    );
}

fn created_at(reply: &ops_tests::Reply) -> time::OffsetDateTime {
    time::OffsetDateTime::parse(
        reply.json()["created_at"].as_str().unwrap(),
        &time::format_description::well_known::Rfc3339,
    )
    .unwrap()
}
