use clap::Parser;
use tracing_subscriber::EnvFilter;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()))
        .init();
    let config = ops_local::Config::parse();
    let server = ops_local::start(config.clone()).await?;
    tracing::info!(address = %server.address, environment = %config.environment, data_dir = %config.data_dir.display(), "serving the operations API");
    server.task.await??;
    Ok(())
}
