//! Payout limits on DynamoDB: each counter moved in the approval's `TransactWriteItems`, only
//! from the value its check read.

use crate::{spawn_aws_app, spawn_aws_app_with};

#[tokio::test]
async fn payout_limits_refuse_or_escalate_what_would_pass_them() {
    let app = spawn_aws_app().await;
    ops_tests::scenarios::payout_limits_refuse_or_escalate_what_would_pass_them(&app.api, &app.driver).await;
}

#[tokio::test]
async fn approvals_racing_on_one_day_never_pass_its_limit() {
    let app = spawn_aws_app_with(|settings| settings.rate_limit = 0).await;
    ops_tests::scenarios::approvals_racing_on_one_day_never_pass_its_limit(&app.api, &app.driver, 6).await;
}

#[tokio::test]
async fn a_new_payee_or_a_changed_account_waits_for_one_more_approval() {
    ops_tests::scenarios::a_new_payee_or_a_changed_account_waits_for_one_more_approval(&spawn_aws_app().await.api)
        .await;
}
