//! The per-key rate limit on AWS: a request that changes something is counted in the table,
//! which every function shares; a read is counted in the memory of the function that serves
//! it, so it costs no write and read functions hold no write right (`template.rs`).

use crate::spawn_aws_app;
use ops_domain::access::RequestKind;
use ops_domain::service::Service;
use ops_domain::DomainError;
use ops_runtime::deployment::Parts;

/// Two functions of one stack (two instances of the service on its table), limited to three
/// requests a key a second.
async fn two_functions(app: &crate::AwsApp) -> [(Service, Parts); 2] {
    let mut settings = app.settings.clone();
    settings.rate_limit = 3;
    let first = settings.service_with(&app.config, app.clock.clone()).await.unwrap();
    let second = settings.service_with(&app.config, app.clock.clone()).await.unwrap();
    [first, second]
}

/// Waits for the start of a wall-clock second, so a burst falls in one counting window.
async fn start_of_a_second() {
    let into = time::OffsetDateTime::now_utc().nanosecond();
    tokio::time::sleep(std::time::Duration::from_nanos(
        u64::from(1_000_000_000 - into) + 20_000_000,
    ))
    .await;
}

async fn admitted(function: &Service, key: &str, request: RequestKind, times: usize) -> usize {
    let answers =
        futures_util::future::join_all((0..times).map(|_| function.authenticate(Some(key), None, request))).await;
    answers
        .iter()
        .map(|answer| match answer {
            Ok(_) => 1,
            Err(DomainError::RateLimited { .. }) => 0,
            Err(other) => panic!("{other:?}"),
        })
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_read_writes_nothing_and_is_limited_where_it_runs_while_changes_share_the_tables_count() {
    let app = spawn_aws_app().await;
    let customer = app.create_customer().await;
    let [(reader, reader_parts), (other, other_parts)] = two_functions(&app).await;

    start_of_a_second().await;
    assert_eq!(admitted(&reader, &customer.key, RequestKind::Read, 5).await, 3);
    assert_eq!(reader_parts.store.meter().write_units(), 0, "a read wrote");
    assert_eq!(
        admitted(&other, &customer.key, RequestKind::Read, 2).await,
        2,
        "another function counts its own reads"
    );

    start_of_a_second().await;
    let changes = admitted(&reader, &customer.key, RequestKind::Change, 2).await
        + admitted(&other, &customer.key, RequestKind::Change, 2).await;
    assert_eq!(changes, 3, "the functions' changes share one count");
    assert!(reader_parts.store.meter().write_units() > 0 && other_parts.store.meter().write_units() > 0);
}
