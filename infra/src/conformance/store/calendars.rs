//! Calendars and rails' cut-offs, each kept version by version.

use super::cause;
use ops_domain::access::Environment;
use ops_domain::calendars::{AfterLastCutoff, Calendar, Holiday, RailCutoffs};
use ops_domain::ports::{Changeset, Store, StoreError, Write};
use time::macros::{date, time};
use time::OffsetDateTime;

pub(super) async fn calendars_and_cutoffs_are_kept_version_by_version(store: &dyn Store) {
    let mut calendar = Calendar {
        id: "cal_conformance".into(),
        name: "Chile".into(),
        timezone: "America/Santiago".into(),
        working_days: vec!["mon".into(), "fri".into()],
        holidays: vec![Holiday {
            date: date!(2026 - 12 - 25),
            name: "Navidad".into(),
        }],
        cause: cause("calendar_created"),
        created_at: OffsetDateTime::UNIX_EPOCH,
        updated_at: OffsetDateTime::UNIX_EPOCH,
        environment: Environment::Test,
        version: 1,
    };
    let put = |write: Write| Changeset { writes: vec![write] };
    assert_eq!(store.calendar(&calendar.id).await.unwrap(), None);
    store.commit(put(Write::PutCalendar(calendar.clone()))).await.unwrap();
    assert_eq!(store.calendar(&calendar.id).await.unwrap(), Some(calendar.clone()));
    assert!(matches!(
        store.commit(put(Write::PutCalendar(calendar.clone()))).await,
        Err(StoreError::Conflict)
    ));
    calendar.version = 2;
    calendar.holidays.clear();
    store.commit(put(Write::PutCalendar(calendar.clone()))).await.unwrap();
    assert_eq!(store.calendar(&calendar.id).await.unwrap(), Some(calendar.clone()));

    let mut cutoffs = RailCutoffs {
        rail: "psp-local:cut".into(),
        environment: Environment::Test,
        calendar_id: calendar.id.clone(),
        cutoffs: vec![time!(14:00), time!(17:30)],
        after_last_cutoff: AfterLastCutoff::SendNow,
        cause: cause("rail_cutoffs_saved"),
        version: 1,
    };
    store.commit(put(Write::PutRailCutoffs(cutoffs.clone()))).await.unwrap();
    assert_eq!(
        store.rail_cutoffs(&cutoffs.rail, Environment::Test).await.unwrap(),
        Some(cutoffs.clone())
    );
    assert_eq!(
        store
            .rail_cutoffs(&cutoffs.rail, Environment::Production)
            .await
            .unwrap(),
        None
    );
    cutoffs.version = 3;
    assert!(matches!(
        store.commit(put(Write::PutRailCutoffs(cutoffs.clone()))).await,
        Err(StoreError::Conflict)
    ));
}
