//! `sandbox-statement` prints the sandbox rail's statement from a local server's ledger file,
//! and with `--table` from a stack's table (where a deployed test stack keeps it).

use ops_infra::aws::{DynamoSandboxLedger, DynamoStore};
use ops_infra::conformance::sandbox::instruction_for;
use ops_infra::embedded::SqliteSandboxLedger;
use ops_infra::rails::SandboxLedger;
use std::process::Command;

async fn take(ledger: &dyn SandboxLedger, id: &str) {
    ledger.count_submit(&instruction_for(id, 42_000)).await.unwrap();
    ledger.accept(id, time::macros::date!(2026 - 11 - 24)).await.unwrap();
}

fn statement(args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_sandbox-statement"))
        .args(args)
        .output()
        .expect("sandbox-statement runs");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_statement_is_read_from_a_data_directory_or_from_a_stacks_table() {
    let data = tempfile::tempdir().unwrap();
    let file = SqliteSandboxLedger::open(&data.path().join("rail-sandbox-test.sqlite")).unwrap();
    take(&file, "txn_local").await;
    let local = statement(&["--data-dir", data.path().to_str().unwrap()]);
    assert!(
        local.contains("sbx_local,txn_local,42000,CLP,confirmed,2026-11-24"),
        "{local}"
    );

    assert!(
        std::env::var("AWS_ENDPOINT_URL").is_ok(),
        "AWS_ENDPOINT_URL is not set: run the suite with ./scripts/test, which starts the emulator"
    );
    let config = ops_infra::aws::load_config().await;
    let table = format!("statement-{}", std::process::id());
    DynamoStore::new(aws_sdk_dynamodb::Client::new(&config), &table)
        .create_table()
        .await
        .unwrap();
    let stack = DynamoSandboxLedger::new(aws_sdk_dynamodb::Client::new(&config), &table);
    take(&stack, "txn_stack").await;
    let from_table = statement(&["--table", &table]);
    assert!(
        from_table.contains("sbx_stack,txn_stack,42000,CLP,confirmed,2026-11-24") && !from_table.contains("txn_local"),
        "{from_table}"
    );
}
