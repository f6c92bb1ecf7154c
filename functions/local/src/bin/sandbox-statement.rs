//! Prints the sandbox rail's statement (CSV): what a PSP's rail would send to be reconciled
//! (`POST /v1/reconciliations`). From the ledger a local server keeps in its data directory,
//! or, with `--table`, from a stack's table (a deployed test stack, or local mode on AWS).

use clap::Parser;
use ops_infra::rails::{statement_of, SandboxLedger};
use std::path::PathBuf;

#[derive(Parser)]
#[command(
    name = "sandbox-statement",
    about = "Print the psp-local:sandbox rail's statement as CSV"
)]
struct Args {
    /// The local server's data directory.
    #[arg(long, env = "OPS_DATA_DIR", default_value = "./data")]
    data_dir: PathBuf,
    /// The environment whose sandbox ledger to read.
    #[arg(long, default_value = "test")]
    environment: String,
    /// Read the ledger from this DynamoDB table instead (the standard AWS configuration;
    /// `AWS_ENDPOINT_URL` for an emulator).
    #[arg(long, env = "TABLE_NAME")]
    table: Option<String>,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let entries = match &args.table {
        Some(table) => {
            let config = ops_infra::aws::load_config().await;
            let client = aws_sdk_dynamodb::Client::new(&config);
            ops_infra::aws::DynamoSandboxLedger::new(client, table)
                .entries()
                .await?
        }
        None => {
            let ledger = args.data_dir.join(format!("rail-sandbox-{}.sqlite", args.environment));
            if !ledger.exists() {
                return Err(format!("no sandbox ledger at {}: start the server first", ledger.display()).into());
            }
            ops_infra::embedded::SqliteSandboxLedger::open(&ledger)?.read()?
        }
    };
    print!("{}", statement_of(&entries));
    Ok(())
}
