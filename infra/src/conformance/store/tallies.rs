//! Tallies: added in the changeset of what they count (not at all when it fails), summed per
//! period and series, a customer's alone or every customer's, within the window asked.

use super::cause;
use ops_domain::access::Environment;
use ops_domain::calendars::Calendar;
use ops_domain::ids::CustomerId;
use ops_domain::ports::{Changeset, Store, StoreError, Write};
use ops_domain::tallies::{Period, Series, Tally, TallyCount};
use time::macros::datetime;
use time::{Duration, OffsetDateTime};

fn settled(rail: &str) -> Series {
    Series::Transactions {
        direction: "credit".into(),
        rail: rail.into(),
        status: "confirmed".into(),
    }
}

fn tally(customer: &CustomerId, period: Period, at: OffsetDateTime, series: Series, spread_by: &str) -> Write {
    Write::Tally(Tally::new(customer, period, at, series, spread_by))
}

/// The counts read, in a stable order.
fn sorted(mut counts: Vec<TallyCount>) -> Vec<(OffsetDateTime, String, i64)> {
    counts.sort_by_key(|c| (c.starts_at, c.series.key()));
    counts
        .into_iter()
        .map(|c| (c.starts_at, c.series.key(), c.count))
        .collect()
}

pub(super) async fn tallies_count_what_committed_within_the_window(store: &dyn Store) {
    let (a, b) = (CustomerId::from("cus_tally_a"), CustomerId::from("cus_tally_b"));
    // Midnight, so the window's hours lie in two days (two partitions on DynamoDB).
    let midnight = datetime!(2031-03-01 0:00 UTC);
    let before = midnight - Duration::minutes(30);
    let (rail, other_rail) = ("psp-local:tally", "bank:tally");

    let mut first = Changeset::default();
    first.push(tally(
        &a,
        Period::Hour,
        midnight + Duration::minutes(5),
        settled(rail),
        "txn_1",
    ));
    first.push(tally(
        &a,
        Period::Hour,
        midnight + Duration::minutes(50),
        settled(rail),
        "txn_2",
    ));
    first.push(tally(&b, Period::Hour, midnight, settled(rail), "txn_3"));
    first.push(tally(&a, Period::Hour, before, settled(other_rail), "txn_4"));
    first.push(tally(
        &a,
        Period::Hour,
        midnight + Duration::HOUR,
        settled(rail),
        "txn_5",
    ));
    store.commit(first).await.unwrap();
    // Other changesets add to the same counters (spread over others on DynamoDB).
    for spread_by in ["txn_6", "txn_7"] {
        let mut more = Changeset::default();
        more.push(tally(&b, Period::Hour, midnight, settled(rail), spread_by));
        store.commit(more).await.unwrap();
    }

    // A changeset that fails counts nothing.
    let calendar = Calendar {
        id: "cal_tally".into(),
        name: "Tally".into(),
        timezone: "UTC".into(),
        working_days: vec!["mon".into()],
        holidays: vec![],
        cause: cause("calendar_created"),
        created_at: OffsetDateTime::UNIX_EPOCH,
        updated_at: OffsetDateTime::UNIX_EPOCH,
        environment: Environment::Test,
        version: 1,
    };
    store
        .commit(Changeset {
            writes: vec![Write::PutCalendar(calendar.clone())],
        })
        .await
        .unwrap();
    let mut failing = Changeset::default();
    failing.push(tally(&a, Period::Hour, midnight, settled(rail), "txn_8"));
    failing.push(Write::PutCalendar(calendar));
    assert!(matches!(store.commit(failing).await, Err(StoreError::Conflict)));

    let window = (midnight - Duration::HOUR, midnight + Duration::HOUR);
    let key = |rail: &str| settled(rail).key();
    assert_eq!(
        sorted(store.tallies(Some(&a), Period::Hour, window.0, window.1).await.unwrap()),
        [
            (midnight - Duration::HOUR, key(other_rail), 1),
            (midnight, key(rail), 2),
        ],
        "a customer's own counts, the hour after the window left out"
    );
    assert_eq!(
        sorted(store.tallies(None, Period::Hour, window.0, window.1).await.unwrap()),
        [
            (midnight - Duration::HOUR, key(other_rail), 1),
            (midnight, key(rail), 5),
        ],
        "every customer's, summed"
    );
    assert_eq!(
        sorted(
            store
                .tallies(
                    Some(&a),
                    Period::Hour,
                    midnight + Duration::HOUR,
                    midnight + Duration::HOUR * 2
                )
                .await
                .unwrap()
        ),
        [(midnight + Duration::HOUR, key(rail), 1)]
    );
    assert!(
        store
            .tallies(None, Period::Day, window.0, window.1)
            .await
            .unwrap()
            .is_empty(),
        "hours are not days"
    );

    let closed = Series::WorkItems {
        queue: "exceptions".into(),
        opened: false,
    };
    let mut days = Changeset::default();
    days.push(tally(
        &a,
        Period::Day,
        midnight + Duration::HOUR * 23,
        closed.clone(),
        "wi_1",
    ));
    days.push(tally(&a, Period::Day, before, closed.clone(), "wi_2"));
    store.commit(days).await.unwrap();
    assert_eq!(
        sorted(
            store
                .tallies(
                    None,
                    Period::Day,
                    midnight - Duration::DAY * 13,
                    midnight + Duration::DAY
                )
                .await
                .unwrap()
        ),
        [(midnight - Duration::DAY, closed.key(), 1), (midnight, closed.key(), 1)],
        "days of two months"
    );
}
