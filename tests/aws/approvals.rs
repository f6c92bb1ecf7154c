//! Approval chains on DynamoDB: each step's approval and the approvals item's next role in
//! one transaction.

use crate::spawn_aws_app;

#[tokio::test]
async fn a_tiered_chain_is_signed_in_order_by_the_roles_and_users_it_names() {
    let app = spawn_aws_app().await;
    ops_tests::scenarios::a_tiered_chain_is_signed_in_order_by_the_roles_and_users_it_names(&app.api, &app.driver)
        .await;
}

#[tokio::test]
async fn approvals_not_given_in_time_expire() {
    let app = spawn_aws_app().await;
    ops_tests::scenarios::approvals_not_given_in_time_expire(&app.api, &app.driver, &app.clock).await;
}

#[tokio::test]
async fn a_named_signer_delegates_their_place_for_a_period() {
    ops_tests::scenarios::a_named_signer_delegates_their_place_for_a_period(&spawn_aws_app().await.api).await;
}
