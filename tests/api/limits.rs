//! Payout limits on the embedded store.

use ops_tests::{spawn_app, spawn_app_with};

#[tokio::test]
async fn payout_limits_refuse_or_escalate_what_would_pass_them() {
    let app = spawn_app().await;
    ops_tests::scenarios::payout_limits_refuse_or_escalate_what_would_pass_them(&app, app.driver()).await;
}

#[tokio::test]
async fn approvals_racing_on_one_day_never_pass_its_limit() {
    // As many requests a second as the machine makes: every approval is checked.
    let app = spawn_app_with(|config| config.rate_limit = 0).await;
    ops_tests::scenarios::approvals_racing_on_one_day_never_pass_its_limit(&app, app.driver(), 24).await;
}

#[tokio::test]
async fn a_new_payee_or_a_changed_account_waits_for_one_more_approval() {
    ops_tests::scenarios::a_new_payee_or_a_changed_account_waits_for_one_more_approval(&spawn_app().await.api).await;
}
