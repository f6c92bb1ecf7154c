//! The real `ops-local` binary, killed with SIGKILL in the middle of a burst of operations and
//! started again on the same data directory: every acknowledged operation finishes, and the
//! rail never sees a transaction twice. A second process on the same data is refused, and a
//! backup taken while it serves starts as it was.

use futures_util::{stream, StreamExt};
use ops_infra::embedded::SqliteSandboxLedger;
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod common;

use common::{free_port, get, wait_healthy, ADMIN};

fn start(data_dir: &Path, port: u16) -> Child {
    common::ops_local(data_dir, port)
        // One key sends the whole batch as fast as the server takes it.
        .env("OPS_RATE_LIMIT", "0")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("ops-local starts")
}

fn payout(customer: &str, i: usize) -> Value {
    json!({"customer_id": customer, "type": "payout", "currency": "CLP", "workflow": "auto",
           "items": [{"beneficiary": {"id_type": "RUT", "id": format!("{i}-K")},
                      "destination": {"rail": "psp-local:sandbox", "account": format!("{i:08}")},
                      "amount": 1_000 + (i as i64) * 100, "reference": format!("kill test {i}")}]})
}

/// SIGTERM (how a service manager stops a process) lets a request already being served finish:
/// the client that was halfway through sending its body gets its answer, and the process exits
/// cleanly, where the signal's default would have cut the connection and killed it.
#[tokio::test]
async fn sigterm_answers_the_request_being_served_then_exits_cleanly() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut server = start(dir.path(), port);
    wait_healthy(&reqwest::Client::new(), &format!("http://127.0.0.1:{port}")).await;

    let body = br#"{"name": "Half-sent Ltd"}"#;
    let mut connection = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let head = format!(
        "POST /v1/customers HTTP/1.1\r\nHost: local\r\nAuthorization: Bearer {ADMIN}\r\n\
         Content-Type: application/json\r\nIdempotency-Key: half-sent\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    connection.write_all(head.as_bytes()).await.unwrap();
    connection.write_all(&body[..10]).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;

    // SAFETY: a signal sent to the child this test started.
    assert_eq!(unsafe { libc::kill(server.id() as libc::pid_t, libc::SIGTERM) }, 0);
    tokio::time::sleep(Duration::from_millis(300)).await;
    connection.write_all(&body[10..]).await.unwrap();
    let mut answer = String::new();
    tokio::time::timeout(Duration::from_secs(10), connection.read_to_string(&mut answer))
        .await
        .expect("the answer comes, then the connection closes")
        .unwrap();
    assert!(answer.starts_with("HTTP/1.1 201"), "{answer}");
    assert!(answer.contains("Half-sent Ltd"), "{answer}");

    let deadline = Instant::now() + Duration::from_secs(15);
    let status = loop {
        if let Some(status) = server.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "ops-local did not stop after SIGTERM");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(status.success(), "{status:?}");
    // It took no new connection while stopping, and none after.
    assert!(tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_err());
}

/// Local mode's pipeline assumes it is the only process on its data (at start it takes back
/// what a dead process left in flight): a second process on the same data directory is
/// refused, naming the first, and the data is free again once the first is killed.
#[tokio::test]
async fn a_second_process_on_the_same_data_is_refused_until_the_first_is_gone() {
    let dir = tempfile::tempdir().unwrap();
    let client = reqwest::Client::new();
    let port = free_port();
    let mut first = start(dir.path(), port);
    wait_healthy(&client, &format!("http://127.0.0.1:{port}")).await;

    let mut second = common::ops_local(dir.path(), free_port())
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ops-local runs");
    let deadline = Instant::now() + Duration::from_secs(15);
    while second.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            second.kill().unwrap();
            first.kill().unwrap();
            panic!("a second ops-local started on data another one runs on");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let second = second.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&second.stderr);
    assert!(!second.status.success(), "{said}");
    assert!(
        said.contains(&format!("held by another running ops-local (pid {})", first.id()))
            && said.contains("ops-test.lock"),
        "{said}"
    );

    first.kill().unwrap();
    first.wait().unwrap();
    let port = free_port();
    let mut again = start(dir.path(), port);
    wait_healthy(&client, &format!("http://127.0.0.1:{port}")).await;
    again.kill().unwrap();
    again.wait().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigkill_in_the_middle_of_a_batch_loses_nothing_acknowledged_and_sends_nothing_twice() {
    let data_dir = tempfile::tempdir().unwrap();
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let child = Arc::new(Mutex::new(start(data_dir.path(), port)));
    wait_healthy(&client, &base).await;

    let customer = create_customer(&client, &base, "Kill").await;

    // 200 creates, 8 at a time; the server is killed once 100 have been acknowledged.
    let acknowledged = Arc::new(Mutex::new(Vec::<String>::new()));
    let count = Arc::new(AtomicUsize::new(0));
    stream::iter(0..200)
        .for_each_concurrent(8, |i| {
            let (client, base, customer, acknowledged, count, child) = (
                client.clone(),
                base.clone(),
                customer.clone(),
                acknowledged.clone(),
                count.clone(),
                child.clone(),
            );
            async move {
                let sent = client
                    .post(format!("{base}/v1/operations"))
                    .bearer_auth(ADMIN)
                    .header("Idempotency-Key", format!("kill-{i}"))
                    .json(&payout(&customer, i))
                    .send()
                    .await;
                if let Ok(response) = sent {
                    if response.status() == 201 {
                        if let Ok(body) = response.json::<Value>().await {
                            acknowledged
                                .lock()
                                .unwrap()
                                .push(body["id"].as_str().unwrap().to_owned());
                            if count.fetch_add(1, Ordering::SeqCst) + 1 == 100 {
                                child.lock().unwrap().kill().expect("SIGKILL");
                            }
                        }
                    }
                }
            }
        })
        .await;
    {
        let mut child = child.lock().unwrap();
        // Killed at the hundredth acknowledgement; if that never came, now (the checks below fail).
        let _ = child.kill();
        child.wait().unwrap();
    }
    let acknowledged = acknowledged.lock().unwrap().clone();
    assert!(acknowledged.len() >= 100, "{} acknowledged", acknowledged.len());
    assert!(acknowledged.len() < 200, "the kill landed mid-batch");

    // Start again on the same data; the pipeline picks up where it was cut off.
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let mut restarted = start(data_dir.path(), port);
    wait_healthy(&client, &base).await;
    let deadline = Instant::now() + Duration::from_secs(240);
    let mut pending = acknowledged.clone();
    while !pending.is_empty() && Instant::now() < deadline {
        let mut still = vec![];
        for id in pending {
            let op = get(&client, &format!("{base}/v1/operations/{id}")).await;
            let settled = matches!(
                op["status"].as_str(),
                Some("completed" | "failed" | "partially_completed" | "needs_attention")
            );
            if !settled {
                still.push(id);
            }
        }
        pending = still;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(
        pending.is_empty(),
        "{} acknowledged operations never finished: {:?}",
        pending.len(),
        &pending[..pending.len().min(5)]
    );

    let ledger = SqliteSandboxLedger::open(&data_dir.path().join("rail-sandbox-test.sqlite"))
        .unwrap()
        .read()
        .unwrap();
    assert!(
        ledger.iter().all(|e| e.duplicate_submits == 0 && e.submit_calls == 1),
        "a transaction reached the rail twice"
    );
    for id in &acknowledged {
        let op = get(&client, &format!("{base}/v1/operations/{id}")).await;
        let txn_id = op["items"][0]["transaction_id"]
            .as_str()
            .expect("a transaction was made");
        let on_rail = ledger.iter().find(|e| e.transaction_id == txn_id);
        match op["status"].as_str() {
            Some("completed") => assert!(on_rail.is_some_and(|e| e.accepted), "{id} completed without the rail"),
            // Killed between recording the attempt and calling the rail: the rail never got
            // it, and the operator is told instead of the service guessing.
            Some("needs_attention") => assert!(on_rail.is_none(), "{id}: {op}"),
            other => panic!("{id} ended {other:?}"),
        }
    }

    // The kill split no change from its records: each audited change of an acknowledged
    // operation (its transactions' included) has exactly one event, and no event lacks it.
    let mut audited = HashSet::new();
    for id in &acknowledged {
        audited.insert((id.clone(), "operation.created".to_owned()));
        let history = get(&client, &format!("{base}/v1/operations/{id}/history")).await;
        for entry in history["data"].as_array().unwrap() {
            if entry["action"] != "approval_recorded" {
                audited.insert((
                    entry["entity_id"].as_str().unwrap().to_owned(),
                    format!(
                        "{}.{}",
                        entry["entity_type"].as_str().unwrap(),
                        entry["to"].as_str().unwrap()
                    ),
                ));
            }
        }
    }
    let mut evented: HashMap<(String, String), usize> = HashMap::new();
    for event in every_page(&client, &format!("{base}/v1/events?customer_id={customer}")).await {
        // Work item events belong to the desk, not to the operation's lifecycle.
        let Some(operation) = event["data"]["operation_id"].as_str() else {
            continue;
        };
        if acknowledged.iter().any(|id| id == operation) {
            let entity = event["data"]["transaction_id"].as_str().unwrap_or(operation);
            *evented
                .entry((entity.to_owned(), event["type"].as_str().unwrap().to_owned()))
                .or_default() += 1;
        }
    }
    assert!(evented.values().all(|n| *n == 1), "a change was announced twice");
    assert_eq!(evented.keys().cloned().collect::<HashSet<_>>(), audited);

    restarted.kill().unwrap();
    restarted.wait().unwrap();
}

/// Every item of a list (`url` has a query already), page after page.
async fn every_page(client: &reqwest::Client, url: &str) -> Vec<Value> {
    let (mut items, mut after) = (vec![], String::new());
    loop {
        let page = get(client, &format!("{url}&limit=100{after}")).await;
        let data = page["data"].as_array().unwrap();
        items.extend(data.iter().cloned());
        if page["has_more"] != true {
            return items;
        }
        after = format!("&starting_after={}", data.last().unwrap()["id"].as_str().unwrap());
    }
}

/// A customer made by the platform's admin: its id.
async fn create_customer(client: &reqwest::Client, base: &str, name: &str) -> String {
    let customer: Value = client
        .post(format!("{base}/v1/customers"))
        .bearer_auth(ADMIN)
        .header("Idempotency-Key", format!("customer-{name}"))
        .json(&json!({ "name": name }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    customer["id"].as_str().unwrap().to_owned()
}

/// A payroll file split by the worker is cut off by SIGKILL mid-file: after the restart every
/// chunk has its one operation, and no operation exists that the file does not record.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigkill_in_the_middle_of_a_file_loses_no_chunk_and_makes_none_twice() {
    const CHUNKS: usize = 12;
    let data_dir = tempfile::tempdir().unwrap();
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let mut child = start(data_dir.path(), port);
    wait_healthy(&client, &base).await;
    let customer = create_customer(&client, &base, "Payroll").await;
    let mut csv = String::from("beneficiary_id_type,beneficiary_id,rail,account,amount,currency,reference\n");
    for i in 0..CHUNKS * 1000 {
        csv += &format!("RUT,{i}-K,psp-local:sandbox,{i:08},{},CLP,line {i}\n", 1_000 + i * 100);
    }
    let uploaded = client
        .post(format!("{base}/v1/files?workflow=two_step&customer_id={customer}"))
        .bearer_auth(ADMIN)
        .header("Idempotency-Key", "kill-file")
        .header("Content-Type", "text/csv")
        .body(csv)
        .send()
        .await
        .unwrap();
    assert_eq!(uploaded.status(), 202);
    let file_id = uploaded.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let done = |file: &Value| {
        file["chunks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["operation_id"].is_string())
            .count()
    };

    // Killed once the worker is a few chunks in.
    let deadline = Instant::now() + Duration::from_secs(60);
    let seen = loop {
        let file = get(&client, &format!("{base}/v1/files/{file_id}")).await;
        if done(&file) >= 3 || Instant::now() > deadline {
            child.kill().expect("SIGKILL");
            break file;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    child.wait().unwrap();
    assert_eq!(
        seen["status"],
        "processing",
        "the kill landed mid-file: {}",
        done(&seen)
    );

    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let mut restarted = start(data_dir.path(), port);
    wait_healthy(&client, &base).await;
    let deadline = Instant::now() + Duration::from_secs(240);
    let file = loop {
        let file = get(&client, &format!("{base}/v1/files/{file_id}")).await;
        if file["status"] == "completed" || Instant::now() > deadline {
            break file;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(file["status"], "completed", "{} chunks made", done(&file));
    let recorded: HashSet<String> = file["chunks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["operation_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(recorded.len(), CHUNKS);

    let mut made = HashSet::new();
    let mut items = 0;
    for operation in every_page(&client, &format!("{base}/v1/operations?customer_id={customer}")).await {
        assert_eq!(operation["file_id"].as_str(), Some(file_id.as_str()));
        items += operation["items"].as_array().unwrap().len();
        made.insert(operation["id"].as_str().unwrap().to_owned());
    }
    assert_eq!(made, recorded, "an operation was made that the file does not record");
    assert_eq!(items, CHUNKS * 1000, "every line once");

    restarted.kill().unwrap();
    restarted.wait().unwrap();
}

/// `ops-local backup` beside a server taking creates: the copy starts as a server of its own
/// on which the customer's key authenticates (the pepper came along), every operation
/// acknowledged before the backup began is there with its history, the one made after it is
/// not, and the file's bytes came along. A second backup into the same directory is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_backup_taken_while_serving_starts_as_it_was() {
    let data_dir = tempfile::tempdir().unwrap();
    let copies = tempfile::tempdir().unwrap();
    let copy = copies.path().join("copy");
    let client = reqwest::Client::new();
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let mut server = start(data_dir.path(), port);
    wait_healthy(&client, &base).await;
    let post = |path: &str, key: &str, idempotency: &str, body: Value| {
        client
            .post(format!("{base}{path}"))
            .bearer_auth(key)
            .header("Idempotency-Key", idempotency)
            .json(&body)
            .send()
    };
    let customer = create_customer(&client, &base, "Backup").await;
    let scopes = json!(["operations:read", "operations:write"]);
    let key: Value = post(
        "/v1/api_keys",
        ADMIN,
        "backup-key",
        json!({"customer_id": customer, "scopes": scopes}),
    )
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    let key = key["secret"].as_str().unwrap().to_owned();
    let csv = "beneficiary_id_type,beneficiary_id,rail,account,amount,currency,reference\n\
               RUT,1-9,psp-local:sandbox,00000001,1000,CLP,backup\n";
    let file: Value = client
        .post(format!("{base}/v1/files?workflow=two_step"))
        .bearer_auth(&key)
        .header("Idempotency-Key", "backup-file")
        .header("Content-Type", "text/csv")
        .body(csv)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let file = file["id"].as_str().unwrap().to_owned();

    // Creates keep coming while the backup runs.
    let acknowledged = Arc::new(Mutex::new(Vec::<String>::new()));
    let burst = {
        let (client, base, key, customer, acknowledged) = (
            client.clone(),
            base.clone(),
            key.clone(),
            customer.clone(),
            acknowledged.clone(),
        );
        tokio::spawn(async move {
            for i in 0..60 {
                let created = client
                    .post(format!("{base}/v1/operations"))
                    .bearer_auth(&key)
                    .header("Idempotency-Key", format!("backup-{i}"))
                    .json(&payout(&customer, i))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(created.status(), 201);
                let id = created.json::<Value>().await.unwrap()["id"]
                    .as_str()
                    .unwrap()
                    .to_owned();
                acknowledged.lock().unwrap().push(id);
            }
        })
    };
    while acknowledged.lock().unwrap().len() < 20 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let before_backup = acknowledged.lock().unwrap().clone();
    let backup = |to: std::path::PathBuf| {
        let data_dir = data_dir.path().to_path_buf();
        tokio::task::spawn_blocking(move || {
            Command::new(env!("CARGO_BIN_EXE_ops-local"))
                .args(["backup", "--to"])
                .arg(to)
                .env("OPS_DATA_DIR", data_dir)
                .output()
                .unwrap()
        })
    };
    let backed_up = backup(copy.clone()).await.unwrap();
    let said = String::from_utf8_lossy(&backed_up.stdout);
    assert!(
        backed_up.status.success(),
        "{said} {}",
        String::from_utf8_lossy(&backed_up.stderr)
    );
    assert!(said.contains(&copy.display().to_string()), "{said}");
    burst.await.unwrap();
    let after = post("/v1/operations", &key, "after-backup", payout(&customer, 999))
        .await
        .unwrap();
    let after = after.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned();
    let again = backup(copy.clone()).await.unwrap();
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("not empty"));
    server.kill().unwrap();
    server.wait().unwrap();

    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let mut restored = start(&copy, port);
    wait_healthy(&client, &base).await;
    let get = |path: String| {
        let request = client.get(format!("{base}{path}")).bearer_auth(&key);
        async move {
            let response = request.send().await.unwrap();
            (response.status().as_u16(), response.json::<Value>().await.unwrap())
        }
    };
    let (status, listed) = get("/v1/operations?limit=100".into()).await;
    assert_eq!(
        status, 200,
        "the customer's key does not authenticate on the copy: {listed}"
    );
    let listed: HashSet<String> = listed["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|operation| operation["id"].as_str().unwrap().to_owned())
        .collect();
    assert!(
        before_backup.iter().all(|id| listed.contains(id)),
        "an acknowledged operation is missing"
    );
    assert!(!listed.contains(&after), "the copy holds an operation made after it");
    for id in &listed {
        let (status, history) = get(format!("/v1/operations/{id}/history")).await;
        assert_eq!(status, 200);
        assert!(!history["data"].as_array().unwrap().is_empty(), "{id} has no history");
    }
    assert_eq!(get(format!("/v1/files/{file}")).await.0, 200);
    let blob = |dir: &Path| std::fs::read(dir.join(format!("blobs-test/files/{file}.csv"))).unwrap();
    assert_eq!(blob(&copy), blob(data_dir.path()));
    assert_owner_only(&copy);
    restored.kill().unwrap();
    restored.wait().unwrap();
}

/// Only the service's user may read anything under `path`.
fn assert_owner_only(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path).unwrap().permissions().mode();
    assert_eq!(mode & 0o077, 0, "{} is {mode:o}", path.display());
    if path.is_dir() {
        for entry in std::fs::read_dir(path).unwrap() {
            assert_owner_only(&entry.unwrap().path());
        }
    }
}
