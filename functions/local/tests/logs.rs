//! What the real `ops-local` binary writes to its log, as an operator reads it.

mod common;

use common::{free_port, get, wait_healthy, ADMIN};
use std::io::Read;
use std::process::{Child, Stdio};

/// The binary logging at `info` in `format` to a pipe the test reads, on a fresh data
/// directory, serving; and its base URL.
async fn logging_server(dir: &std::path::Path, format: &str) -> (Child, String) {
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let server = common::ops_local(dir, port)
        .env("RUST_LOG", "info")
        .env("OPS_LOG_FORMAT", format)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("ops-local starts");
    wait_healthy(&reqwest::Client::new(), &base).await;
    (server, base)
}

/// Everything the server logged, once it is killed.
fn log_of(mut server: Child) -> String {
    server.kill().unwrap();
    server.wait().unwrap();
    let mut log = String::new();
    server.stdout.take().unwrap().read_to_string(&mut log).unwrap();
    log
}

/// A customer's support ticket quotes a `Request-Id`: the log has one line for it, saying what
/// was asked, how it was answered, and by whose key (its id, never its secret); a request
/// that failed before it had a caller still has its line. Written as plain text when the log
/// is not a terminal.
#[tokio::test]
async fn every_request_leaves_a_line_with_its_id_its_answer_and_its_callers_key() {
    let dir = tempfile::tempdir().unwrap();
    let (server, base) = logging_server(dir.path(), "text").await;
    let client = reqwest::Client::new();

    let created = client
        .post(format!("{base}/v1/customers"))
        .bearer_auth(ADMIN)
        .header("Idempotency-Key", "logged-customer")
        .json(&serde_json::json!({"name": "Logged Ltd"}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let keys = get(&client, &format!("{base}/v1/api_keys")).await;
    let admin_key_id = keys["data"][0]["id"].as_str().unwrap().to_owned();
    let wrong_secret = "sk_test_not_a_key_of_this_service_000000000";
    let refused = client
        .get(format!("{base}/v1/customers"))
        .bearer_auth(wrong_secret)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);
    let unknown = client.get(format!("{base}/v1/nothing_here")).send().await.unwrap();
    assert_eq!(unknown.status(), 404);

    let log = log_of(server);
    let line_of = |answer: &reqwest::Response| {
        let id = answer.headers()["request-id"].to_str().unwrap().to_owned();
        let lines: Vec<&str> = log.lines().filter(|line| line.contains(&id)).collect();
        assert_eq!(lines.len(), 1, "one line for {id} in:\n{log}");
        lines[0].to_owned()
    };

    let line = line_of(&created);
    for said in [
        "ops_api::access",
        "method=POST",
        "path=/v1/customers",
        "status=201",
        "client=127.0.0.1",
    ] {
        assert!(line.contains(said), "{said} in {line}");
    }
    assert!(line.contains(&format!("key={admin_key_id}")), "{line}");
    let line = line_of(&refused);
    assert!(line.contains("status=401") && !line.contains("key="), "{line}");
    let line = line_of(&unknown);
    assert!(
        line.contains("path=/v1/nothing_here") && line.contains("status=404"),
        "{line}"
    );

    assert!(
        !log.contains(ADMIN) && !log.contains(wrong_secret),
        "a secret in the log:\n{log}"
    );
    assert!(!log.contains('\u{1b}'), "terminal colours in a piped log:\n{log}");
}

/// `OPS_LOG_FORMAT=json` writes one JSON object a line, as the Lambda functions do, for a log
/// collector: the access line's request id and key are fields of its span.
#[tokio::test]
async fn json_logs_are_one_object_a_line_with_the_request_in_its_span() {
    let dir = tempfile::tempdir().unwrap();
    let (server, base) = logging_server(dir.path(), "json").await;
    let client = reqwest::Client::new();
    let listed = client
        .get(format!("{base}/v1/customers"))
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap();
    assert_eq!(listed.status(), 200);
    let request_id = listed.headers()["request-id"].to_str().unwrap().to_owned();

    let log = log_of(server);
    let lines: Vec<serde_json::Value> = log
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}")))
        .collect();
    let access = lines
        .iter()
        .find(|line| line["target"] == "ops_api::access" && line["span"]["id"] == request_id.as_str())
        .unwrap_or_else(|| panic!("no access line for {request_id} in {log}"));
    assert_eq!(access["fields"]["status"], 200);
    assert_eq!(access["fields"]["path"], "/v1/customers");
    assert!(
        access["span"]["key"]
            .as_str()
            .is_some_and(|key| key.starts_with("key_")),
        "{access}"
    );
}
