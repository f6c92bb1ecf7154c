//! What the tests of the real `ops-local` binary share: a port, the command, its readiness.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

pub const ADMIN: &str = "sk_test_kill_test_platform_admin_key_000000";

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The binary serving `data_dir` on `port`, with the platform's key `ADMIN`.
pub fn ops_local(data_dir: &Path, port: u16) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_ops-local"));
    command
        .env("OPS_LISTEN", format!("127.0.0.1:{port}"))
        .env("OPS_DATA_DIR", data_dir)
        .env("OPS_BOOTSTRAP_ADMIN_KEY", ADMIN);
    command
}

pub async fn wait_healthy(client: &reqwest::Client, base: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if client
            .get(format!("{base}/health"))
            .send()
            .await
            .is_ok_and(|r| r.status() == 200)
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("ops-local did not come up");
}

/// A GET as the platform's admin, answered 200: its body.
pub async fn get(client: &reqwest::Client, url: &str) -> serde_json::Value {
    let response = client.get(url).bearer_auth(ADMIN).send().await.unwrap();
    assert_eq!(response.status(), 200, "{url}");
    response.json().await.unwrap()
}
