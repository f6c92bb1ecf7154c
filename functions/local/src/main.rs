use clap::Parser;
use tracing_subscriber::EnvFilter;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()))
        .init();
    let config = ops_local::Config::parse();
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
