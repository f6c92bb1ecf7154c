//! Schedules by due time and their occurrences.

use super::{audit, cause, changes};
use ops_domain::access::Environment;
use ops_domain::ports::{Store, StoreError, Write};
use ops_domain::schedules::{Occurrence, OccurrenceStatus, Schedule, ScheduleQuery, ScheduleStatus};
use time::OffsetDateTime;

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
        next_occurrence_at: next_run_at,
        business_day: Default::default(),
        calendar_id: None,
        pause_on_failure: false,
        catch_up_window_hours: 24,
        anchor: OffsetDateTime::UNIX_EPOCH,
        api_key_id: "key_sched".into(),
        created_by: "key_sched".into(),
        set_up_by: None,
        cause: cause("schedule_created"),
        created_at: OffsetDateTime::UNIX_EPOCH,
        updated_at: OffsetDateTime::UNIX_EPOCH,
        environment: Environment::Test,
        version: 1,
    }
}

/// The due index holds active schedules by their next run only; lists leave deleted ones
/// out; an occurrence is recorded once, and a schedule changes only from the version read.
pub(super) async fn schedules_are_found_by_due_time_and_occurrences_are_recorded_once(store: &dyn Store) {
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
        runs_at: Some(at(hours)),
        backfilled: false,
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

    // A backfill replaces a record of an occurrence that made nothing, or adds one; never
    // one that made its operation.
    let made = |hours: i64| Occurrence {
        status: OccurrenceStatus::Created,
        operation_id: Some(format!("op_backfilled_{hours}").as_str().into()),
        reason: None,
        backfilled: true,
        ..occurrence(hours)
    };
    for hours in [2, 5] {
        store
            .commit(changes(vec![Write::BackfillOccurrence(made(hours))]))
            .await
            .unwrap();
        assert_eq!(store.occurrence(&id, at(hours)).await.unwrap(), Some(made(hours)));
    }
    let twice = store
        .commit(changes(vec![
            Write::BackfillOccurrence(made(2)),
            audit("op_never", "x"),
        ]))
        .await;
    assert!(matches!(twice, Err(StoreError::Conflict)), "{twice:?}");
    let over_made = store
        .commit(changes(vec![Write::InsertOccurrence(occurrence(5))]))
        .await;
    assert!(matches!(over_made, Err(StoreError::Conflict)), "{over_made:?}");
    assert_eq!(store.occurrences(&id, None, 10).await.unwrap().len(), 4);
}
