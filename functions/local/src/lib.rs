//! Local mode: the whole API on one HTTP server, state in a SQLite file. It mounts the same
//! handlers as the Lambda functions.

use clap::Parser;
use ops_api::App;
use ops_domain::auth::{Environment, KeyHasher};
use ops_domain::ids::UlidGenerator;
use ops_domain::ports::SystemClock;
use ops_domain::service::Service;
use ops_infra::embedded::SqliteStore;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::task::JoinHandle;

#[derive(Debug, Clone, Parser)]
#[command(
    name = "ops-local",
    about = "Run the payment operations service locally on an embedded SQLite store"
)]
pub struct Config {
    /// Address to serve the HTTP API on.
    #[arg(long, env = "OPS_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Directory for the SQLite database (one file per environment).
    #[arg(long, env = "OPS_DATA_DIR", default_value = "./data")]
    pub data_dir: PathBuf,
    /// `test` or `production`; keys of the other environment are refused.
    #[arg(long, env = "OPS_ENVIRONMENT", default_value = "test", value_parser = ["test", "production"])]
    pub environment: String,
    /// A platform admin key to create at start-up if it does not exist yet.
    #[arg(long, env = "OPS_BOOTSTRAP_ADMIN_KEY", hide_env_values = true)]
    pub bootstrap_admin_key: Option<String>,
    /// Secret mixed into API-key hashes; generated into the data directory when unset.
    #[arg(long, env = "OPS_API_KEY_PEPPER", hide_env_values = true)]
    pub api_key_pepper: Option<String>,
    /// Rail ids operations may use, comma-separated.
    #[arg(
        long,
        env = "OPS_RAILS",
        default_value = "psp-local:sandbox",
        value_delimiter = ','
    )]
    pub rails: Vec<String>,
}

/// A running server.
pub struct Server {
    pub address: SocketAddr,
    pub task: JoinHandle<std::io::Result<()>>,
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("cannot open the data directory: {0}")]
    Io(#[from] std::io::Error),
}

/// Reads the pepper from the data directory, creating it on first start, so keys keep
/// working across restarts.
fn local_pepper(data_dir: &Path) -> std::io::Result<String> {
    let path = data_dir.join("api-key-pepper");
    match std::fs::read_to_string(&path) {
        Ok(pepper) => Ok(pepper.trim().to_owned()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let mut random = [0u8; 32];
            rand::fill(&mut random);
            let pepper = hex::encode(random);
            std::fs::write(&path, &pepper)?;
            Ok(pepper)
        }
        Err(e) => Err(e),
    }
}

pub async fn build_app(config: &Config) -> Result<App, StartError> {
    let environment = Environment::parse(&config.environment)
        .ok_or_else(|| StartError::Config("OPS_ENVIRONMENT must be test or production".into()))?;
    if let Some(bad) = config
        .rails
        .iter()
        .find(|r| !ops_domain::validate::valid_rail_id(r))
    {
        return Err(StartError::Config(format!(
            "OPS_RAILS: '{bad}' is not of the form psp-local:<rail_name>"
        )));
    }
    std::fs::create_dir_all(&config.data_dir)?;
    let pepper = match &config.api_key_pepper {
        Some(pepper) => pepper.clone(),
        None => local_pepper(&config.data_dir)?,
    };
    let database = config
        .data_dir
        .join(format!("ops-{}.sqlite", environment.as_str()));
    let store = SqliteStore::open(&database)
        .map_err(|e| StartError::Config(format!("{}: {e}", database.display())))?;
    let service = Service {
        store: Arc::new(store),
        clock: Arc::new(SystemClock),
        ids: Arc::new(UlidGenerator::default()),
        hasher: KeyHasher::new(pepper),
        environment,
        rails: config.rails.iter().cloned().collect(),
    };
    if let Some(secret) = &config.bootstrap_admin_key {
        service
            .bootstrap_admin_key(secret)
            .await
            .map_err(|e| StartError::Config(format!("OPS_BOOTSTRAP_ADMIN_KEY: {e}")))?;
    }
    Ok(App {
        service: Arc::new(service),
    })
}

/// Opens the store and starts serving; returns once the listener is bound.
pub async fn start(config: Config) -> Result<Server, StartError> {
    let app = build_app(&config).await?;
    let listener = tokio::net::TcpListener::bind(config.listen).await?;
    let address = listener.local_addr()?;
    let task = tokio::spawn(async move {
        axum::serve(listener, ops_api::router(app))
            .with_graceful_shutdown(async {
                let _ = tokio::signal::ctrl_c().await;
            })
            .await
    });
    Ok(Server { address, task })
}
