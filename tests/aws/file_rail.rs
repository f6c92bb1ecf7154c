//! A file rail on the AWS adapters (its files kept in S3), its bank's connectivity layer
//! served over real HTTP.

use crate::{spawn_aws_app_with, AwsApp};
use ops_domain::transactions::BankFile;
use ops_tests::bank::Bank;
use ops_tests::scenarios::{self, bank_rail};

async fn served_by(bank: &Bank) -> AwsApp {
    spawn_aws_app_with(|settings| settings.http_rails = vec![bank_rail(bank).parse().unwrap()]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_rails_payouts_go_to_the_bank_in_one_file_at_its_cutoff() {
    let bank = Bank::start().await;
    let app = served_by(&bank).await;
    scenarios::a_file_rails_payouts_go_to_the_bank_in_one_file_at_its_cutoff(&app.api, &app.driver, &app.clock, &bank)
        .await;
    let (file_id, sent) = bank.handovers().remove(0);
    let kept = app.stored_object(&BankFile::blob_key(&file_id.as_str().into())).await;
    assert_eq!(kept, sent, "the file sent is kept in the stack's bucket");
}

/// The round dies after each of its first polls in turn, then at every twelfth: each round
/// against the emulator takes a while, and the embedded store's run dies at every poll.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_is_in_one_file_the_bank_gets_however_the_worker_dies() {
    let bank = Bank::start().await;
    let app = served_by(&bank).await;
    let points = (1..10).chain((10..400).step_by(12));
    scenarios::a_transaction_is_in_one_file_the_bank_gets_however_the_worker_dies(
        &app.api,
        &app.driver,
        &app.clock,
        &bank,
        points,
    )
    .await;
}
