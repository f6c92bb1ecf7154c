//! Use cases called directly on the service in process (`ops_tests::harness`): no server, no
//! HTTP, the pipeline turned by hand.

use ops_domain::access::{Customer, Principal};
use ops_domain::error::DomainError;
use ops_domain::ids::OperationId;
use ops_domain::operations::OperationStatus;
use ops_tests::harness::{command, Harness};
use ops_tests::payout;
use serde_json::json;
use time::Duration;

/// A harness, its platform's admin, and a customer the admin made.
async fn acme() -> (Harness, Principal, Customer) {
    let harness = Harness::new().await;
    let platform = harness.platform().await;
    let customer = harness
        .service
        .create_customer(&platform, command(json!({"name": "Acme"})), None)
        .await
        .unwrap();
    (harness, platform, customer)
}

#[tokio::test]
async fn a_payout_made_by_the_use_cases_alone_runs_to_completed() {
    let (harness, platform, customer) = acme().await;
    let service = &harness.service;
    let made = service
        .create_operation(
            &platform,
            command(payout(customer.id.as_str(), "auto", &[150_000])),
            None,
        )
        .await
        .unwrap();
    assert_eq!(made.status, OperationStatus::Approved);
    // The status poll is due two seconds after the submission.
    harness.settle(Duration::seconds(3), 3).await;
    let done = service.get_operation(&platform, &made.id).await.unwrap();
    assert_eq!(done.status, OperationStatus::Completed, "{:?}", done.cause);
    assert!(done.items[0].transaction_id.is_some());
}

/// Two cancels of one operation at once: the one that loses the race reads the operation
/// again and is refused by its state, so exactly one cancel is recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_cancels_at_once_record_one_and_refuse_the_other_by_state() {
    let (harness, platform, customer) = acme().await;
    let service = &harness.service;
    for _ in 0..10 {
        let made = service
            .create_operation(
                &platform,
                command(payout(customer.id.as_str(), "two_step", &[1_000])),
                None,
            )
            .await
            .unwrap();
        assert_eq!(made.status, OperationStatus::PendingApproval);
        let cancel = |id: OperationId| {
            let service = service.clone();
            let platform = platform.clone();
            tokio::spawn(async move {
                service
                    .cancel_operation(&platform, &id, command(json!({"reason": "duplicate"})))
                    .await
            })
        };
        let (first, second) = tokio::join!(cancel(made.id.clone()), cancel(made.id.clone()));
        let answers = [first.unwrap(), second.unwrap()];
        let cancelled = answers.iter().filter(|a| a.is_ok()).count();
        assert_eq!(cancelled, 1, "{answers:?}");
        for answer in &answers {
            if let Err(refused) = answer {
                assert!(
                    matches!(
                        refused,
                        DomainError::InvalidState {
                            code: "invalid_transition",
                            ..
                        }
                    ),
                    "the loser is refused by the state it finds, not told to retry: {refused:?}"
                );
            }
        }
        let history = service.operation_history(&platform, &made.id).await.unwrap();
        let cancels = history
            .data
            .iter()
            .filter(|entry| entry.to.as_deref() == Some("cancelled"))
            .count();
        assert_eq!(cancels, 1);
    }
}
