use crate::spawn_aws_app;
use ops_tests::receiver::{signature_is_valid, Receiver};
use ops_tests::ADMIN_KEY;
use serde_json::json;

#[tokio::test]
async fn a_keys_history_is_read_from_dynamodb() {
    ops_tests::scenarios::a_keys_history_names_each_change_and_its_actor(&spawn_aws_app().await.api).await;
}

#[tokio::test]
async fn a_users_roles_and_status_apply_from_their_next_request_and_are_in_their_history() {
    ops_tests::scenarios::a_users_roles_and_status_apply_from_their_next_request(&spawn_aws_app().await.api).await;
}

#[tokio::test]
async fn customers_are_listed_for_the_platform_and_each_reads_its_own() {
    ops_tests::scenarios::customers_are_listed_for_the_platform_and_each_reads_its_own(&spawn_aws_app().await.api)
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_endpoints_event_types_are_kept_once_each() {
    ops_tests::scenarios::an_endpoints_event_types_are_kept_once_each(&spawn_aws_app().await.api).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn creates_at_once_never_take_a_customer_past_its_endpoint_limit() {
    ops_tests::scenarios::creates_at_once_never_take_a_customer_past_its_endpoint_limit(&spawn_aws_app().await.api)
        .await;
}

#[tokio::test]
async fn a_suspended_customers_keys_are_refused_until_it_is_reactivated() {
    ops_tests::scenarios::a_suspended_customers_keys_are_refused_until_it_is_reactivated(&spawn_aws_app().await.api)
        .await;
}

/// A suspension is an event the DynamoDB stream carries to webhooks: the platform's endpoint and
/// the customer's own receive it, signed, without the reason given (which stays in the
/// platform's history). The customer's making reached the platform's endpoint before.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_suspension_reaches_the_platforms_endpoints_and_the_customers_signed() {
    let app = spawn_aws_app().await;
    let (platform, own) = (Receiver::start(0).await, Receiver::start(0).await);
    let platform_endpoint = app
        .subscribe(ADMIN_KEY, &platform.url, &["customer.created", "customer.suspended"])
        .await;
    let customer = app.create_customer().await;
    let own_endpoint = app.subscribe(&customer.key, &own.url, &["*"]).await;
    let suspension = json!({"status": "suspended", "reason": "Unpaid fees"});
    let suspended = app
        .post(&format!("/v1/customers/{}", customer.id), ADMIN_KEY, suspension)
        .await;
    assert_eq!(suspended.status, 200, "{}", suspended.json());
    app.settle(time::Duration::seconds(30), 3).await;

    for (receiver, endpoint) in [(&platform, &platform_endpoint), (&own, &own_endpoint)] {
        let received = receiver.received();
        let secret = endpoint["secret"].as_str().unwrap();
        let told: Vec<_> = received
            .iter()
            .filter(|r| r.json()["type"] == "customer.suspended")
            .collect();
        assert_eq!(
            told.len(),
            1,
            "{:?}",
            received.iter().map(|r| r.json()["type"].clone()).collect::<Vec<_>>()
        );
        assert!(signature_is_valid(&told[0].signature, &told[0].body, secret));
        let event = told[0].json();
        assert_eq!(
            (
                &event["data"]["customer_id"],
                &event["data"]["status"],
                &event["data"]["object"]["status"]
            ),
            (&json!(customer.id), &json!("suspended"), &json!("suspended"))
        );
        assert!(!String::from_utf8_lossy(&told[0].body).contains("Unpaid"), "{event}");
    }
    let made: Vec<_> = platform
        .received()
        .into_iter()
        .filter(|r| r.json()["type"] == "customer.created")
        .collect();
    assert_eq!(made.len(), 1, "the customer's making, told once");
    let secret = platform_endpoint["secret"].as_str().unwrap();
    assert!(signature_is_valid(&made[0].signature, &made[0].body, secret));
    assert_eq!(
        (
            &made[0].json()["data"]["customer_id"],
            &made[0].json()["data"]["status"]
        ),
        (&json!(customer.id), &json!("active"))
    );
}

#[tokio::test]
async fn a_customers_metadata_is_kept_and_merged() {
    ops_tests::scenarios::a_customers_metadata_is_kept_and_merged(&spawn_aws_app().await.api).await;
}

/// How many signing secrets of an endpoint Secrets Manager itself holds, past the service's cache.
fn stored_secrets(app: &crate::AwsApp) -> impl Fn(String) -> futures_util::future::BoxFuture<'static, usize> {
    let secrets_manager = aws_sdk_secretsmanager::Client::new(&app.config);
    let prefix = app.settings.secrets_prefix.clone();
    move |endpoint_id: String| {
        let (client, prefix) = (secrets_manager.clone(), prefix.clone());
        Box::pin(async move {
            // Counted from Secrets Manager itself, past the service's cache.
            let names = format!("{prefix}webhook/{endpoint_id}/");
            let mut pages = client.list_secrets().into_paginator().send();
            let mut count = 0;
            while let Some(page) = pages.next().await {
                let page = page.expect("secrets listed");
                count += page
                    .secret_list()
                    .iter()
                    .filter(|s| s.name().is_some_and(|n| n.starts_with(&names)))
                    .count();
            }
            count
        })
    }
}

#[tokio::test]
async fn each_rotation_keeps_the_secret_it_retires_and_deletes_what_no_longer_signs() {
    let app = spawn_aws_app().await;
    ops_tests::scenarios::each_rotation_keeps_the_secret_it_retires_and_deletes_what_no_longer_signs(
        &app,
        || app.settle(time::Duration::seconds(30), 3),
        stored_secrets(&app),
    )
    .await;
}

#[tokio::test]
async fn rotations_in_a_row_keep_the_three_newest_secrets_signing() {
    let app = spawn_aws_app().await;
    ops_tests::scenarios::rotations_in_a_row_keep_the_three_newest_secrets_signing(
        &app,
        || app.settle(time::Duration::seconds(30), 3),
        stored_secrets(&app),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn changes_of_an_endpoint_at_once_conflict_and_keep_no_stray_secret() {
    let app = spawn_aws_app().await;
    ops_tests::scenarios::changes_of_an_endpoint_at_once_conflict_and_keep_no_stray_secret(&app, stored_secrets(&app))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_deactivation_racing_a_role_change_is_never_undone() {
    ops_tests::scenarios::a_deactivation_racing_a_role_change_is_never_undone(&spawn_aws_app().await.api).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rotations_and_revocations_at_once_leave_no_successor_live() {
    ops_tests::scenarios::rotations_and_revocations_at_once_leave_no_successor_live(&spawn_aws_app().await.api).await;
}

#[tokio::test]
async fn old_signing_secrets_no_endpoint_names_are_swept() {
    let app = spawn_aws_app().await;
    ops_tests::scenarios::old_signing_secrets_no_endpoint_names_are_swept(&app.api, &app.driver, &app.clock).await;
}

#[tokio::test]
async fn a_delivery_follows_its_endpoints_retry_policy_and_a_range_is_recovered_once() {
    let app = spawn_aws_app().await;
    ops_tests::scenarios::a_delivery_follows_its_endpoints_retry_policy_and_a_range_is_recovered_once(
        &app.api,
        &app.driver,
        &app.clock,
        |id| send_now(app.parts.queue.clone(), id),
    )
    .await;
}

#[tokio::test]
async fn an_endpoint_that_keeps_failing_is_disabled_and_enabled_again_sends_what_waited() {
    let app = spawn_aws_app().await;
    ops_tests::scenarios::an_endpoint_that_keeps_failing_is_disabled_and_enabled_again_sends_what_waited(
        &app.api,
        &app.driver,
        &app.clock,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoints_rate_limit_spreads_its_deliveries_over_the_seconds() {
    let app = spawn_aws_app().await;
    ops_tests::scenarios::an_endpoints_rate_limit_spreads_its_deliveries_over_the_seconds(&app.api, &app.driver).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ordered_endpoint_gets_each_operations_events_in_order() {
    let app = spawn_aws_app().await;
    ops_tests::scenarios::an_ordered_endpoint_gets_each_operations_events_in_order(
        &app.api,
        &app.driver,
        &app.clock,
        |id| send_now(app.parts.queue.clone(), id),
    )
    .await;
}

/// Queues a delivery's send at once: SQS's delays are real time, where the scenarios move a
/// test clock past a retry's wait.
async fn send_now(queue: std::sync::Arc<dyn ops_domain::ports::Queue>, delivery_id: String) {
    let task = ops_domain::ports::QueueTask::SendWebhook {
        delivery_id: delivery_id.as_str().into(),
    };
    ops_domain::ports::Queue::send(
        &*queue,
        ops_domain::ports::QueueName::Webhooks,
        "",
        task.to_body(),
        time::Duration::ZERO,
    )
    .await
    .unwrap();
}
