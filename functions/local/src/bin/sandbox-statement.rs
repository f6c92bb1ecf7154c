//! Prints the sandbox rail's statement (CSV) from the ledger a local server keeps in its data
//! directory: what a PSP's rail would send to be reconciled (`POST /v1/reconciliations`).

use clap::Parser;
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
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let ledger = args.data_dir.join(format!("rail-sandbox-{}.sqlite", args.environment));
    if !ledger.exists() {
        return Err(format!("no sandbox ledger at {}: start the server first", ledger.display()).into());
    }
    let entries = ops_infra::embedded::SqliteSandboxLedger::open(&ledger)?.read()?;
    print!("{}", ops_infra::rails::statement_of(&entries));
    Ok(())
}
