//! Local mode's sweep of idempotency records past their retention.

use crate::measure::{ms, percentile};
use std::time::{Duration, Instant};

/// Local mode's sweep of idempotency records past their retention (its housekeeping beside
/// the pipeline): 100,000 records of a 1 KiB response each under scattered keys, as clients'
/// random keys are, written more than a day before, then swept as local mode sweeps. Meanwhile
/// a small write every millisecond (a stream checkpoint moved, which takes the one writer as a
/// create does) times how long a write waits while the sweep runs, next to the same writes
/// just before it, with no sweep.
pub(crate) async fn idempotency_sweep() {
    use ops_domain::idempotency::{IdempotencyClaim, StoredResponse, RETENTION};
    use ops_domain::ports::{Changeset, Commit, Write};
    use std::sync::atomic::{AtomicBool, Ordering};
    const RECORDS: u64 = 100_000;
    let dir = tempfile::tempdir().unwrap();
    let store = ops_infra::embedded::SqliteStore::open(&dir.path().join("sweep.sqlite")).unwrap();
    let now = time::OffsetDateTime::now_utc();
    let then = now - RETENTION - time::Duration::hours(1);
    let response = StoredResponse {
        status: 201,
        body: vec![b'x'; 1024],
    };
    for chunk in (0..RECORDS).collect::<Vec<_>>().chunks(1_000) {
        let mut changes = Changeset::default();
        for n in chunk {
            changes.push(Write::TakeIdempotency {
                claim: IdempotencyClaim {
                    scope: "cus_bench".into(),
                    key: format!("{:016x}", n.wrapping_mul(0x9e37_79b9_7f4a_7c15)),
                    fingerprint: "f".into(),
                    now: then,
                },
                response: response.clone(),
            });
        }
        store.commit(changes).await.expect("records written");
    }
    // Writes one at a time until `done`, each a millisecond after the last: how long each took.
    async fn probe(store: ops_infra::embedded::SqliteStore, done: &AtomicBool) -> Vec<Duration> {
        let mut waits = vec![];
        for seq in 1.. {
            if done.load(Ordering::Relaxed) {
                break;
            }
            let t = Instant::now();
            store.advance_checkpoint("bench-probe", seq).await.expect("probe write");
            waits.push(t.elapsed());
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        waits
    }
    let quiet = AtomicBool::new(false);
    let (mut before, ()) = tokio::join!(probe(store.clone(), &quiet), async {
        tokio::time::sleep(Duration::from_secs(2)).await;
        quiet.store(true, Ordering::Relaxed);
    });
    let swept = AtomicBool::new(false);
    let started = Instant::now();
    let (mut during, (forgotten, took)) = tokio::join!(probe(store.clone(), &swept), async {
        let forgotten = ops_local::housekeeping::forget_expired(&store, now).await;
        swept.store(true, Ordering::Relaxed);
        (forgotten, started.elapsed())
    });
    assert_eq!(forgotten as u64, RECORDS, "every expired record deleted");
    println!();
    // A write's wait: p50, p99 and max, in ms to two places (most are tens of microseconds).
    let waits = |waits: &mut Vec<Duration>| {
        let ms2 = |d: Duration| format!("{:.2}", d.as_secs_f64() * 1e3);
        let max = *waits.iter().max().expect("probe writes");
        format!(
            "{} | {} | {}",
            ms2(percentile(waits, 0.5)),
            ms2(percentile(waits, 0.99)),
            ms2(max)
        )
    };
    println!("| idempotency sweep (local mode) | records | ms | records/s | a write's wait p50 ms | p99 ms | max ms |");
    println!("|---|---|---|---|---|---|---|");
    println!("| no sweep (2 s of writes) | | | | {} |", waits(&mut before));
    println!(
        "| sweep of records expired a day ago, 1 KiB responses | {RECORDS} | {} | {:.0} | {} |",
        ms(took),
        RECORDS as f64 / took.as_secs_f64(),
        waits(&mut during),
    );
}
