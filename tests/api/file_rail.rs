//! A file rail on the embedded store, its bank's connectivity layer served over real HTTP.

use ops_tests::bank::Bank;
use ops_tests::scenarios::{self, bank_rail};
use ops_tests::{spawn_app_with, TestApp};

async fn served_by(bank: &Bank) -> TestApp {
    spawn_app_with(|config| config.http_rails = vec![bank_rail(bank).parse().unwrap()]).await
}

#[tokio::test]
async fn a_file_rails_payouts_go_to_the_bank_in_one_file_at_its_cutoff() {
    let bank = Bank::start().await;
    let app = served_by(&bank).await;
    scenarios::a_file_rails_payouts_go_to_the_bank_in_one_file_at_its_cutoff(&app, app.driver(), &app.clock, &bank)
        .await;
}

/// Every step: the round dies after each of its first hundred and fifty polls in turn.
#[tokio::test]
async fn a_transaction_is_in_one_file_the_bank_gets_however_the_worker_dies() {
    let bank = Bank::start().await;
    let app = served_by(&bank).await;
    scenarios::a_transaction_is_in_one_file_the_bank_gets_however_the_worker_dies(
        &app,
        app.driver(),
        &app.clock,
        &bank,
        1..400,
    )
    .await;
}
