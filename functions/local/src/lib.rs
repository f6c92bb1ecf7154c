//! Local mode: the whole API on one HTTP server, state in a SQLite file. It mounts the same
//! handlers as the Lambda functions.

use clap::Parser;
use ops_api::App;
use ops_domain::access::Environment;
use ops_domain::desk::DeskSla;
use ops_domain::ports::{Clock, QueueName, Secrets, SystemClock};
use ops_domain::transactions::RailSecret;
use ops_domain::transactions::RAIL_SECRET;
use ops_domain::webhooks::TargetPolicy;
use ops_infra::embedded::{BlobDirectory, LogMetrics, SealedSecrets, SqliteQueue, SqliteSandboxLedger, SqliteStore};
use ops_infra::rails::SandboxRail;
use ops_infra::InMemoryRateLimiter;
use ops_runtime::compose::{self, Adapters, HttpRailSpec, Options};
use ops_runtime::driver::{Driver, Pace};
use ops_runtime::streams::EmbeddedStream;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;

mod aws;
mod background;
pub mod backup;
mod data_dir;
pub mod housekeeping;
mod http_server;
pub mod proxies;

pub use aws::{start_on_aws, AwsServer};

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
    #[arg(long, env = "OPS_DATA_DIR", default_value = "./data", global = true)]
    pub data_dir: PathBuf,
    /// `test` or `production`; keys of the other environment are refused.
    #[arg(long, env = "OPS_ENVIRONMENT", value_name = "OPS_ENVIRONMENT", value_enum, default_value_t = Stage::Test, global = true)]
    pub environment: Stage,
    /// A platform admin key to create at start-up if it does not exist yet.
    #[arg(long, env = "OPS_BOOTSTRAP_ADMIN_KEY", hide_env_values = true)]
    pub bootstrap_admin_key: Option<String>,
    /// Secret mixed into API-key hashes; generated into the data directory when unset.
    #[arg(long, env = "OPS_API_KEY_PEPPER", hide_env_values = true)]
    pub api_key_pepper: Option<String>,
    /// Key material that seals webhook signing secrets in the database (default: the API-key
    /// pepper). Keep it outside the data directory to keep a copy of that directory useless.
    #[arg(long, env = "OPS_SECRETS_KEY", hide_env_values = true)]
    pub secrets_key: Option<String>,
    /// Serve the `psp-local:sandbox` simulator rail (default: in the test environment only).
    #[arg(long, env = "OPS_SANDBOX_RAIL")]
    pub sandbox_rail: Option<bool>,
    /// Secret shared with the connectivity layer: signs rail reports and HTTP rail requests.
    #[arg(long, env = "OPS_RAIL_SECRET", hide_env_values = true)]
    pub rail_secret: Option<String>,
    /// Allow webhook endpoints on plain http and on loopback or private addresses (local
    /// receivers). Default: allowed in the test environment; production refuses to start with it.
    #[arg(long, env = "OPS_WEBHOOK_ALLOW_LOCAL")]
    pub webhook_allow_local: Option<bool>,
    /// How long a webhook receiver has to answer before the attempt counts as failed.
    #[arg(long, env = "OPS_WEBHOOK_TIMEOUT_MS", default_value_t = 10_000)]
    pub webhook_timeout_ms: u64,
    /// Rails served by the PSP's connectivity layer over HTTP: `rail_id=base_url`,
    /// comma-separated (e.g. `psp-local:spei=https://connect.example/spei`).
    #[arg(long, env = "OPS_HTTP_RAILS", value_name = "OPS_HTTP_RAILS", value_delimiter = ',')]
    pub http_rails: Vec<HttpRailSpec>,
    /// How long the HTTP rail adapter waits for an answer before the outcome counts as
    /// unknown (and is asked about, never resent).
    #[arg(long, env = "OPS_HTTP_RAIL_TIMEOUT_MS", default_value_t = 10_000)]
    pub http_rail_timeout_ms: u64,
    /// `embedded` (SQLite) or `aws` (DynamoDB, SQS, Secrets Manager, EventBridge at
    /// `AWS_ENDPOINT_URL`, or real AWS; resources named by TABLE_NAME, SUBMISSIONS_QUEUE_URL,
    /// WEBHOOKS_QUEUE_URL, EVENT_BUS_NAME, SECRETS_PREFIX unless OPS_AWS_PROVISION is set).
    #[arg(long, env = "OPS_BACKEND", value_name = "OPS_BACKEND", value_enum, default_value_t = Backend::Embedded, global = true)]
    pub backend: Backend,
    /// With the aws backend: create a stack of this name at start (for emulators).
    #[arg(long, env = "OPS_AWS_PROVISION")]
    pub aws_provision: Option<String>,
    /// Connections served at once; more wait until one closes.
    #[arg(long, env = "OPS_MAX_CONNECTIONS", default_value_t = 1024)]
    pub max_connections: usize,
    /// Of them, connections from one address (a trusted proxy's are not counted); more are
    /// closed at once.
    #[arg(long, env = "OPS_MAX_CONNECTIONS_PER_ADDRESS", default_value_t = 128)]
    pub max_connections_per_address: usize,
    /// Milliseconds a client has to take what it is sent: a write of an answer that makes no
    /// progress for this long closes the connection.
    #[arg(long, env = "OPS_WRITE_TIMEOUT_MS", default_value_t = 30_000)]
    pub write_timeout_ms: u64,
    /// Milliseconds a request's body has, from its headers, to arrive whole; later it is
    /// answered 408 and the connection closes.
    #[arg(long, env = "OPS_BODY_READ_TIMEOUT_MS", default_value_t = 30_000)]
    pub body_read_timeout_ms: u64,
    /// Reverse proxies in front of the server (addresses or networks, comma-separated): for a
    /// request from one, the client is the address `X-Forwarded-For` names.
    #[arg(
        long,
        env = "OPS_TRUSTED_PROXIES",
        value_name = "OPS_TRUSTED_PROXIES",
        value_delimiter = ','
    )]
    pub trusted_proxies: Vec<proxies::TrustedProxy>,
    /// Requests per second each API key may make; more are answered 429 (0: unlimited).
    #[arg(long, env = "OPS_RATE_LIMIT", default_value_t = ops_domain::access::DEFAULT_RATE_LIMIT)]
    pub rate_limit: u32,
    /// Minutes an approval may wait before the board counts it past due.
    #[arg(long, env = "OPS_APPROVALS_SLA_MINUTES", default_value_t = 240)]
    pub approvals_sla_minutes: u32,
    /// Minutes an exception may wait before the board counts it past due.
    #[arg(long, env = "OPS_EXCEPTIONS_SLA_MINUTES", default_value_t = 60)]
    pub exceptions_sla_minutes: u32,
    /// Run the pipeline (stream, queues, status polls) and the sweep of expired idempotency
    /// records in the background; tests turn it off and drive the pipeline themselves.
    #[arg(long, env = "OPS_WORKER", default_value_t = true, action = clap::ArgAction::Set)]
    pub worker: bool,
    /// How the log's lines are written to standard output: `text`, or `json` (one object a
    /// line, as the Lambda functions write them, for a log collector).
    #[arg(long, env = "OPS_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text, global = true)]
    pub log_format: LogFormat,
    /// Without a command, serve.
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Clone, clap::Subcommand)]
pub enum Command {
    /// Copy this environment's data (database, files, pepper) to a new directory while the
    /// server runs; `--data-dir` that directory to run on the copy.
    Backup {
        /// A directory that is missing or empty.
        #[arg(long)]
        to: PathBuf,
    },
}

/// The environment a stack runs (`OPS_ENVIRONMENT`), as configuration reads it: a bad value is
/// refused at start with the variable's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Stage {
    Test,
    Production,
}

impl From<Stage> for Environment {
    fn from(stage: Stage) -> Environment {
        match stage {
            Stage::Test => Environment::Test,
            Stage::Production => Environment::Production,
        }
    }
}

/// How the log is written (`OPS_LOG_FORMAT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// Where state lives (`OPS_BACKEND`): the SQLite file, or AWS (or an emulator of it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Backend {
    Embedded,
    Aws,
}

/// A running server and the parts tests reach into.
pub struct Server {
    pub address: SocketAddr,
    pub task: JoinHandle<std::io::Result<()>>,
    pub driver: Driver,
    pub embedded: Embedded,
    pub sandbox: Option<Arc<SandboxRail>>,
}

/// The embedded adapters local mode runs on.
#[derive(Clone)]
pub struct Embedded {
    pub store: SqliteStore,
    pub queue: SqliteQueue,
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("cannot open the data directory: {0}")]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Held(#[from] data_dir::HoldError),
}

/// Reads the pepper from the data directory, creating it on first start, so keys keep
/// working across restarts.
fn local_pepper(data_dir: &Path) -> std::io::Result<String> {
    let path = data_dir.join(data_dir::PEPPER_FILE);
    match std::fs::read_to_string(&path) {
        Ok(pepper) => Ok(pepper.trim().to_owned()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let mut random = [0u8; 32];
            rand::fill(&mut random);
            let pepper = hex::encode(random);
            data_dir::write_private_file(&path, &pepper)?;
            Ok(pepper)
        }
        Err(e) => Err(e),
    }
}

/// Everything local mode runs on.
pub struct Local {
    pub app: App,
    pub driver: Driver,
    pub embedded: Embedded,
    pub sandbox: Option<Arc<SandboxRail>>,
    /// This environment's data, held while local mode runs on it.
    held: data_dir::Held,
}

/// Opens the data directory's adapters and assembles the service over them.
pub async fn build(config: &Config, clock: Arc<dyn Clock>) -> Result<Local, StartError> {
    let environment = Environment::from(config.environment);
    let webhook_targets = TargetPolicy::for_environment(environment, config.webhook_allow_local)
        .map_err(|e| StartError::Config(format!("OPS_WEBHOOK_ALLOW_LOCAL: {e}")))?;
    data_dir::create(&config.data_dir)?;
    let held = data_dir::hold(&config.data_dir.join(format!("ops-{}.lock", environment.as_str())))?;
    let pepper = match &config.api_key_pepper {
        Some(pepper) => pepper.clone(),
        None => local_pepper(&config.data_dir)?,
    };
    let database = data_dir::database(&config.data_dir, environment);
    data_dir::create_private_file(&database)?;
    for path in data_dir::too_open(&config.data_dir)? {
        tracing::warn!(path = %path.display(), "others may read this part of the data directory (API-key pepper, sealed secrets, every payout); make it owner-only: chmod go-rwx");
    }
    let store = SqliteStore::open(&database).map_err(|e| StartError::Config(format!("{}: {e}", database.display())))?;
    let queue = SqliteQueue::new(store.clone(), clock.clone());
    let released = queue
        .release_in_flight(QueueName::Files)
        .await
        .map_err(|e| StartError::Config(e.to_string()))?;
    if released > 0 {
        tracing::info!(released, "file splits a stopped process was making are delivered again");
    }
    let sandbox = match config.sandbox_rail.unwrap_or(environment == Environment::Test) {
        true => {
            let ledger = data_dir::sandbox_ledger(&config.data_dir, environment);
            data_dir::create_private_file(&ledger)?;
            let ledger = SqliteSandboxLedger::open(&ledger)
                .map_err(|e| StartError::Config(format!("{}: {e}", ledger.display())))?;
            Some(Arc::new(SandboxRail::new(Arc::new(ledger))))
        }
        false => None,
    };
    let rails = compose::rails(
        sandbox.clone(),
        &config.http_rails,
        config.rail_secret.as_deref(),
        Duration::from_millis(config.http_rail_timeout_ms),
    )
    .map_err(StartError::Config)?;
    let secrets = SealedSecrets::new(store.clone(), config.secrets_key.as_deref().unwrap_or(&pepper));
    // Older versions copied the rail secret into the database; it lives only in the environment.
    secrets
        .delete_secret(RAIL_SECRET)
        .await
        .map_err(|e| StartError::Config(e.to_string()))?;
    let counts: Arc<dyn ops_domain::ports::RateLimiter> = Arc::new(InMemoryRateLimiter::default());
    let adapters = Adapters {
        store: Arc::new(store.clone()),
        queue: Arc::new(queue.clone()),
        secrets: Arc::new(secrets),
        // One process sees every request: reads and changes share one count.
        rate_limiter: counts.clone(),
        read_rate_limiter: counts,
        bus: None,
        timers: None,
        metrics: Arc::new(LogMetrics),
        blobs: Arc::new(BlobDirectory::new(data_dir::blobs(&config.data_dir, environment))),
    };
    let options = Options {
        environment,
        pepper,
        rails,
        webhook_targets,
        webhook_timeout: Duration::from_millis(config.webhook_timeout_ms),
        rail_secret: RailSecret::Configured(config.rail_secret.clone()),
        rate_limit: config.rate_limit,
        desk_sla: DeskSla::from_minutes(config.approvals_sla_minutes, config.exceptions_sla_minutes)
            .map_err(StartError::Config)?,
    };
    let service = Arc::new(compose::service(adapters, options, clock));
    if let Some(secret) = &config.bootstrap_admin_key {
        service
            .bootstrap_admin_key(secret)
            .await
            .map_err(|e| StartError::Config(format!("OPS_BOOTSTRAP_ADMIN_KEY: {e}")))?;
    }
    let stream = Arc::new(EmbeddedStream::new(store.clone()));
    let driver = Driver::new(service.clone(), stream, Arc::new(queue.clone()), Pace::EMBEDDED);
    Ok(Local {
        app: App { service },
        driver,
        embedded: Embedded { store, queue },
        sandbox,
        held,
    })
}

/// Opens the store and starts serving; returns once the listener is bound.
pub async fn start(config: Config) -> Result<Server, StartError> {
    start_with_clock(config, Arc::new(SystemClock)).await
}

/// Serves the API until Ctrl-C or SIGTERM, with the pipeline (if any) running beside it on a
/// thread of its own at a lower priority ([`background`]). The pipeline belongs to the serving
/// task: it stops when serving ends or the task is aborted.
pub(crate) async fn serve(
    listener: tokio::net::TcpListener,
    router: axum::Router,
    limits: http_server::ConnectionLimits,
    pipeline: Option<impl std::future::Future<Output = ()> + Send + 'static>,
) -> std::io::Result<()> {
    let _background = pipeline.map(background::spawn).transpose()?;
    http_server::serve(listener, router, limits, stop_asked()).await;
    Ok(())
}

/// The connection limits `config` sets.
pub(crate) fn connection_limits(config: &Config) -> http_server::ConnectionLimits {
    http_server::ConnectionLimits {
        max: config.max_connections,
        per_address: config.max_connections_per_address,
        write_timeout: std::time::Duration::from_millis(config.write_timeout_ms),
        trusted_proxies: config.trusted_proxies.clone().into(),
    }
}

/// The API's routes, each request's body under the deadline `OPS_BODY_READ_TIMEOUT_MS` sets.
/// Behind trusted proxies, each request's client is the one they forwarded for.
pub(crate) fn router(app: App, config: &Config) -> axum::Router {
    use axum::middleware::map_request_with_state;
    let within = std::time::Duration::from_millis(config.body_read_timeout_ms);
    let router = ops_api::router(app).layer(map_request_with_state(within, ops_api::deadline::body_deadline));
    if config.trusted_proxies.is_empty() {
        return router;
    }
    let trusted: Arc<[proxies::TrustedProxy]> = config.trusted_proxies.clone().into();
    router.layer(map_request_with_state(trusted, proxies::forwarded_client))
}

/// Ctrl-C, or SIGTERM (what service managers and container runtimes send to stop a process).
async fn stop_asked() {
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut terminate) => {
                terminate.recv().await;
            }
            Err(error) => {
                tracing::warn!(%error, "SIGTERM is not handled; Ctrl-C still stops the server");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = terminate => {}
    }
    tracing::info!("stopping: answering the requests being served, then the pipeline stops");
}

pub async fn start_with_clock(config: Config, clock: Arc<dyn Clock>) -> Result<Server, StartError> {
    let local = build(&config, clock.clone()).await?;
    let listener = tokio::net::TcpListener::bind(config.listen).await?;
    let address = listener.local_addr()?;
    let router = router(local.app, &config);
    let pipeline = config.worker.then(|| {
        let (driver, store) = (local.driver.clone(), local.embedded.store.clone());
        async move {
            tokio::join!(driver.run(), housekeeping::run(store, clock));
        }
    });
    let (held, limits) = (local.held, connection_limits(&config));
    // The data stays held while serving runs: until the process ends or the task is aborted.
    let task = tokio::spawn(async move {
        let _held = held;
        serve(listener, router, limits, pipeline).await
    });
    Ok(Server {
        address,
        task,
        driver: local.driver,
        embedded: local.embedded,
        sandbox: local.sandbox,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_setting_is_refused_at_start_naming_its_variable() {
        for (flag, value, variable) in [
            ("--environment", "prod", "OPS_ENVIRONMENT"),
            ("--backend", "dynamo", "OPS_BACKEND"),
            ("--http-rails", "spei=http://x", "OPS_HTTP_RAILS"),
            ("--trusted-proxies", "proxy.internal", "OPS_TRUSTED_PROXIES"),
        ] {
            let refused = Config::try_parse_from(["ops-local", flag, value])
                .unwrap_err()
                .to_string();
            assert!(refused.contains(variable) && refused.contains(value), "{refused}");
        }
        let parsed = Config::try_parse_from(["ops-local", "--environment", "production", "--backend", "aws"]).unwrap();
        assert_eq!((parsed.environment, parsed.backend), (Stage::Production, Backend::Aws));
        assert_eq!(Environment::from(parsed.environment), Environment::Production);
    }
}
