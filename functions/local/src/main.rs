use clap::Parser;
use std::io::IsTerminal;
use tracing_subscriber::EnvFilter;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let config = ops_local::Config::parse();
    let logs =
        tracing_subscriber::fmt().with_env_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()));
    match config.log_format {
        // Colours for a terminal; a file or a log collector gets plain text.
        ops_local::LogFormat::Text => logs.with_ansi(std::io::stdout().is_terminal()).init(),
        ops_local::LogFormat::Json => logs.json().init(),
    }
    let done = match &config.command {
        Some(ops_local::Command::Backup { to }) => backup(&config, to),
        None => serve(config).await,
    };
    match done {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            // Said as a sentence (what to fix), not as the error's debug form.
            eprintln!("ops-local: {error}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn backup(config: &ops_local::Config, to: &std::path::Path) -> Result<(), Box<dyn std::error::Error>> {
    if config.backend == ops_local::Backend::Aws {
        return Err("the AWS backend is backed up by DynamoDB's point-in-time recovery, not by ops-local".into());
    }
    let copied = ops_local::backup::backup(&config.data_dir, config.environment.into(), to)?;
    println!("ops-local: {copied}");
    Ok(())
}

async fn serve(config: ops_local::Config) -> Result<(), Box<dyn std::error::Error>> {
    let (address, task) = match config.backend {
        ops_local::Backend::Aws => {
            let server =
                ops_local::start_on_aws(config.clone(), std::sync::Arc::new(ops_domain::ports::SystemClock)).await?;
            (server.address, server.task)
        }
        ops_local::Backend::Embedded => {
            let server = ops_local::start(config.clone()).await?;
            (server.address, server.task)
        }
    };
    tracing::info!(%address, backend = ?config.backend, environment = ?config.environment, "serving the operations API");
    task.await??;
    Ok(())
}
