//! The Lambda bootstraps: their sizes as `sam build` ships them, and API functions' cold starts.

use crate::measure::{ms, percentile};
use crate::{mib, target_dir};
use ops_tests::ADMIN_KEY;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// The Lambda bootstraps as `sam build` ships them (`cargo lambda build --release --arm64`,
/// which `scripts/bench` runs through `sam build`): each binary, and the zip Lambda is given
/// (deflated as `sam package` does; `gzip -6` here, within a few bytes of it).
pub(crate) fn lambda_binary_sizes() {
    println!();
    println!("| Lambda artifact (arm64 release `bootstrap`) | functions sharing it | MiB | bytes | deflated (the zip uploaded), MiB |");
    println!("|---|---:|---:|---:|---:|");
    let binaries: std::collections::BTreeSet<&str> = ops_lambda::Function::all().map(|f| f.binary()).collect();
    for binary in binaries {
        let functions = ops_lambda::Function::all().filter(|f| f.binary() == binary).count();
        let bootstrap = target_dir().join("lambda").join(binary).join("bootstrap");
        let Ok(metadata) = bootstrap.metadata() else {
            println!("| {binary} | {functions} | not built | | |");
            continue;
        };
        let zipped = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("gzip -6 -c {} | wc -c", bootstrap.display()))
            .output()
            .ok()
            .and_then(|out| String::from_utf8_lossy(&out.stdout).trim().parse::<u64>().ok());
        println!(
            "| {binary} | {functions} | {} | {} | {} |",
            mib(metadata.len()),
            metadata.len(),
            zipped.map(mib).unwrap_or_default()
        );
    }
}

/// A fresh stack on the emulator holding the bench's admin key, for the cold starts alone.
pub(crate) async fn cold_start_stack() -> ops_runtime::deployment::Settings {
    let config = ops_infra::aws::load_config().await;
    let stack = format!("bench-cold-{}", std::process::id());
    let settings = ops_runtime::provision::provision(&config, &stack, ops_domain::access::Environment::Test, None)
        .await
        .expect("stack");
    let clock = std::sync::Arc::new(ops_tests::TestClock::default());
    let (service, _) = settings.service_with(&config, clock).await.expect("service");
    service.bootstrap_admin_key(ADMIN_KEY).await.unwrap();
    settings
}

async fn answered(client: &reqwest::Client, url: &str, key: Option<&str>) {
    let mut request = client.get(url);
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    let response = request.send().await.expect("invocation");
    assert_eq!(
        response.status(),
        200,
        "{url}: {}",
        response.text().await.unwrap_or_default()
    );
}

/// Time from starting an API function's process to its first answered request, with
/// `cargo lambda watch --only-lambda-apis` as the Lambda runtime API and the emulator stack
/// behind it; then one more request on the warm process. The API functions' bootstraps
/// (`ops-api`, and `ops-schedules` for the schedules'), built in release for this machine
/// (`scripts/bench` builds them), told which function they are by `_HANDLER`.
pub(crate) async fn cold_starts(stack: &ops_runtime::deployment::Settings) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let mut watch = tokio::process::Command::new("cargo")
        .args([
            "lambda",
            "watch",
            "--only-lambda-apis",
            "--invoke-port",
            &port.to_string(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("cargo lambda watch (pip install cargo-lambda)");
    let deadline = Instant::now() + Duration::from_secs(60);
    while tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_err() {
        assert!(Instant::now() < deadline, "cargo lambda watch did not start");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let client = reqwest::Client::new();
    // In --only-lambda-apis mode the runtime serves one function, named `_`.
    let invoke = format!("http://127.0.0.1:{port}/lambda-url/_");
    println!();
    println!("| API function (bootstrap) under `cargo lambda watch` | profile | binary MiB (x86_64) | process start → first answer p50 ms | max ms | warm request p50 ms |");
    println!("|---|---|---|---|---|---|");
    // The release profile is what Lambda runs (optimised for size); the fast profile, built
    // for speed, is beside it to show what the size costs at start.
    for profile in ["release", "fast"] {
        for (bootstrap, function, path, key) in [
            ("ops-api", "api-health", "/health", None),
            (
                "ops-api",
                "api-list-operations",
                "/v1/operations?limit=10",
                Some(ADMIN_KEY),
            ),
            (
                "ops-schedules",
                "api-list-schedules",
                "/v1/schedules?limit=10",
                Some(ADMIN_KEY),
            ),
        ] {
            let binary = target_dir().join(profile).join(bootstrap);
            let Ok(metadata) = binary.metadata() else {
                println!("| {function} ({bootstrap}) | {profile} | not built | | | |");
                continue;
            };
            let (mut cold, mut warm) = (vec![], vec![]);
            for _ in 0..5 {
                let started = Instant::now();
                let mut process = tokio::process::Command::new(&binary)
                    .envs(stack.to_vars())
                    .env("_HANDLER", function)
                    .env("AWS_LAMBDA_FUNCTION_NAME", "_")
                    .env("AWS_LAMBDA_FUNCTION_VERSION", "1")
                    .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128")
                    .env("AWS_LAMBDA_RUNTIME_API", format!("http://127.0.0.1:{port}/.rt"))
                    .stdout(Stdio::null())
                    .kill_on_drop(true)
                    .spawn()
                    .expect("function starts");
                answered(&client, &format!("{invoke}{path}"), key).await;
                cold.push(started.elapsed());
                let t = Instant::now();
                answered(&client, &format!("{invoke}{path}"), key).await;
                warm.push(t.elapsed());
                process.kill().await.expect("function stops");
            }
            let max = cold.iter().max().copied().unwrap_or_default();
            println!(
                "| {function} ({bootstrap}) | {profile} | {} | {} | {} | {} |",
                mib(metadata.len()),
                ms(percentile(&mut cold, 0.5)),
                ms(max),
                ms(percentile(&mut warm, 0.5))
            );
        }
    }
    watch.kill().await.expect("cargo lambda watch stops");
}
