//! `spawn_app()`: the real local server on a random port with a fresh data directory, and a
//! small client for driving it over HTTP; `harness::Harness`: the service in process, for
//! testing a use case without either.

pub mod bank;
pub mod harness;
pub mod receiver;
pub mod requests;
pub mod scenarios;

use ops_domain::ports::Clock;
use ops_local::{Config, Embedded, Server};
use ops_runtime::driver::Driver;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::Mutex;
use time::{Duration, OffsetDateTime};

pub const ADMIN_KEY: &str = "sk_test_platform_admin_for_tests_0000000000";
pub const RAIL_SECRET: &str = "rail-secret-for-tests";

/// Speaks HTTP to a running service.
pub struct Api {
    pub base: String,
    pub client: reqwest::Client,
}

pub struct TestApp {
    pub api: Api,
    pub data_dir: Arc<tempfile::TempDir>,
    pub clock: Arc<TestClock>,
    config: Config,
    server: Server,
}

/// Real time plus an offset the test moves forward, so retries due in hours happen now.
#[derive(Default)]
pub struct TestClock {
    offset: Mutex<Duration>,
}

impl TestClock {
    pub fn advance(&self, by: Duration) {
        *self.offset.lock().unwrap() += by;
    }
}

impl Clock for TestClock {
    fn now(&self) -> OffsetDateTime {
        OffsetDateTime::now_utc() + *self.offset.lock().unwrap()
    }
}

/// What the server answered.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: reqwest::header::HeaderMap,
    pub bytes: Vec<u8>,
}

/// The one resource a burst of creates under one idempotency key made: each reply is it (201)
/// or says the key is in use (409), and at least one is it.
pub fn the_one_created(replies: &[Reply]) -> String {
    let mut created = vec![];
    for reply in replies {
        match reply.status.as_u16() {
            201 => created.push(reply.id()),
            409 => assert_eq!(reply.error(409)["code"], "idempotency_key_in_use"),
            other => panic!("unexpected {other}: {}", reply.json()),
        }
    }
    assert!(!created.is_empty());
    assert!(
        created.iter().all(|id| *id == created[0]),
        "every success names one: {created:?}"
    );
    created.swap_remove(0)
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.bytes)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.bytes)))
    }

    pub fn id(&self) -> String {
        self.json()["id"]
            .as_str()
            .unwrap_or_else(|| panic!("no id in {}", self.json()))
            .to_owned()
    }

    /// Asserts an error of the API's shape and returns its `error` object.
    pub fn error(&self, status: u16) -> Value {
        let body = self.json();
        assert_eq!(self.status.as_u16(), status, "unexpected status; body: {body}");
        let error = body["error"].clone();
        for field in ["type", "code", "message", "request_id"] {
            assert!(error[field].is_string(), "error without {field}: {body}");
        }
        error
    }
}

pub fn config(data_dir: PathBuf) -> Config {
    Config {
        listen: "127.0.0.1:0".parse().unwrap(),
        data_dir,
        environment: ops_local::Stage::Test,
        bootstrap_admin_key: Some(ADMIN_KEY.into()),
        api_key_pepper: None,
        secrets_key: None,
        sandbox_rail: None,
        http_rails: vec![],
        http_rail_timeout_ms: 10_000,
        webhook_timeout_ms: 10_000,
        webhook_allow_local: None,
        backend: ops_local::Backend::Embedded,
        aws_provision: None,
        rail_secret: Some(RAIL_SECRET.into()),
        rate_limit: ops_domain::access::DEFAULT_RATE_LIMIT,
        approvals_sla_minutes: 240,
        exceptions_sla_minutes: 60,
        max_connections: 1024,
        max_connections_per_address: 128,
        write_timeout_ms: 30_000,
        body_read_timeout_ms: 30_000,
        trusted_proxies: vec![],
        // Tests drive the pipeline themselves (see `TestApp::settle`).
        worker: false,
        log_format: ops_local::LogFormat::Text,
        command: None,
    }
}

pub async fn spawn_app() -> TestApp {
    spawn_app_with(|_| {}).await
}

/// `spawn_app` with a changed configuration.
pub async fn spawn_app_with(customize: impl FnOnce(&mut Config)) -> TestApp {
    // `RUST_LOG=debug cargo nextest run …` shows what the service logs during a test.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let data_dir = Arc::new(tempfile::tempdir().expect("temp dir"));
    let mut config = config(data_dir.path().to_path_buf());
    customize(&mut config);
    start(data_dir, config, Arc::new(TestClock::default())).await
}

async fn start(data_dir: Arc<tempfile::TempDir>, config: Config, clock: Arc<TestClock>) -> TestApp {
    let server = ops_local::start_with_clock(config.clone(), clock.clone())
        .await
        .expect("server starts");
    TestApp {
        api: Api {
            base: format!("http://{}", server.address),
            client: reqwest::Client::new(),
        },
        data_dir,
        clock,
        config,
        server,
    }
}

/// A customer with one user per role set, each with a key bound to that user.
pub struct Customer {
    pub id: String,
    /// Key with every customer scope but no user.
    pub key: String,
}

pub struct Member {
    pub user_id: String,
    pub key: String,
}

pub const CUSTOMER_SCOPES: [&str; 6] = [
    "webhooks:manage",
    "operations:read",
    "operations:write",
    "operations:approve",
    "workflows:manage",
    "users:manage",
];

impl TestApp {
    /// Stops the server (as a crash would: no shutdown hook runs) and starts a new one on the
    /// same data directory.
    pub async fn restart(self) -> TestApp {
        self.restart_with(|_| {}).await
    }

    /// Restarts the server on the same data with a changed configuration.
    pub async fn restart_with(mut self, customize: impl FnOnce(&mut Config)) -> TestApp {
        self.server.task.abort();
        let _ = self.server.task.await;
        customize(&mut self.config);
        start(self.data_dir, self.config, self.clock).await
    }

    /// The trigger driver: the stream consumers, the queues and the status poll.
    pub fn driver(&self) -> &Driver {
        &self.server.driver
    }

    /// The embedded store and queues, for tests that act as a crashing or doubling consumer.
    pub fn embedded(&self) -> &Embedded {
        &self.server.embedded
    }

    pub async fn sandbox(&self) -> Vec<ops_infra::rails::SandboxEntry> {
        self.server.sandbox.as_ref().expect("sandbox rail").entries().await
    }

    /// The sandbox rail's statement (CSV): what it accepted, with the outcome it reports.
    pub async fn sandbox_statement(&self) -> String {
        self.server.sandbox.as_ref().expect("sandbox rail").statement().await
    }

    /// Runs the pipeline until it has nothing left to do now.
    pub async fn drain(&self) {
        drain(self.driver()).await;
    }

    /// Runs the pipeline, moving the clock forward by `step` between rounds, `rounds` times:
    /// retries, polls and backoffs due within that span all happen.
    pub async fn settle(&self, step: Duration, rounds: usize) {
        settle(self.driver(), &self.clock, step, rounds).await;
    }
}

/// Runs `driver`'s pipeline until it has nothing left to do now.
pub async fn drain(driver: &Driver) {
    for _ in 0..1000 {
        if driver.tick().await.expect("pipeline tick") == 0 {
            return;
        }
    }
    panic!("the pipeline never went idle");
}

/// Runs `driver`'s pipeline, moving `clock` forward by `step` between rounds, `rounds` times.
pub async fn settle(driver: &Driver, clock: &TestClock, step: Duration, rounds: usize) {
    for _ in 0..rounds {
        drain(driver).await;
        clock.advance(step);
    }
    drain(driver).await;
}

impl std::ops::Deref for TestApp {
    type Target = Api;
    fn deref(&self) -> &Api {
        &self.api
    }
}

impl Api {
    pub async fn send(
        &self,
        method: Method,
        path: &str,
        key: Option<&str>,
        idempotency_key: Option<&str>,
        body: Option<&Value>,
    ) -> Reply {
        let mut request = self.client.request(method, format!("{}{path}", self.base));
        if let Some(key) = key {
            request = request.bearer_auth(key);
        }
        if let Some(idempotency_key) = idempotency_key {
            request = request.header("Idempotency-Key", idempotency_key);
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request.send().await.expect("request sent");
        Reply {
            status: response.status(),
            headers: response.headers().clone(),
            bytes: response.bytes().await.expect("body").to_vec(),
        }
    }

    /// POST `bytes` as `content_type` (a file upload) under `idempotency_key`.
    pub async fn upload(
        &self,
        path: &str,
        key: &str,
        idempotency_key: &str,
        content_type: &str,
        bytes: Vec<u8>,
    ) -> Reply {
        let response = self
            .client
            .post(format!("{}{path}", self.base))
            .bearer_auth(key)
            .header("Idempotency-Key", idempotency_key)
            .header("Content-Type", content_type)
            .body(bytes)
            .send()
            .await
            .expect("request sent");
        Reply {
            status: response.status(),
            headers: response.headers().clone(),
            bytes: response.bytes().await.expect("body").to_vec(),
        }
    }

    pub async fn get(&self, path: &str, key: &str) -> Reply {
        self.send(Method::GET, path, Some(key), None, None).await
    }

    /// POST under `idempotency_key`: a retry, a replay or a race of one request.
    pub async fn post_keyed(&self, path: &str, key: &str, idempotency_key: &str, body: &Value) -> Reply {
        self.send(Method::POST, path, Some(key), Some(idempotency_key), Some(body))
            .await
    }

    pub async fn delete(&self, path: &str, key: &str) -> Reply {
        self.send(Method::DELETE, path, Some(key), None, None).await
    }

    /// POST with a fresh idempotency key.
    pub async fn post(&self, path: &str, key: &str, body: Value) -> Reply {
        let idempotency_key = format!("test-{}", rand_suffix());
        self.send(Method::POST, path, Some(key), Some(&idempotency_key), Some(&body))
            .await
    }

    /// Gives the sandbox rail a calendar (`calendar`, its create body) and cut-offs (`cutoffs`,
    /// the rest of the rail's cut-offs body), asserting both saved.
    pub async fn set_sandbox_cutoffs(&self, calendar: Value, mut cutoffs: Value) {
        let calendar = self.post("/v1/calendars", ADMIN_KEY, calendar).await;
        assert_eq!(calendar.status, 201, "{}", calendar.json());
        cutoffs["calendar_id"] = json!(calendar.id());
        let path = "/v1/rails/psp-local:sandbox/cutoffs";
        let saved = self
            .send(Method::PUT, path, Some(ADMIN_KEY), None, Some(&cutoffs))
            .await;
        assert_eq!(saved.status, 200, "{}", saved.json());
    }

    /// Opens the customer's account in `currency`, credited with `funds` (none if 0); its id.
    pub async fn open_account(&self, customer: &Customer, currency: &str, funds: i64) -> String {
        let opened = self
            .post(
                "/v1/accounts",
                ADMIN_KEY,
                json!({"customer_id": customer.id, "currency": currency}),
            )
            .await;
        assert_eq!(opened.status, 201, "{}", opened.json());
        let account = opened.id();
        if funds > 0 {
            let funded = self
                .post(
                    &format!("/v1/accounts/{account}/adjustments"),
                    ADMIN_KEY,
                    json!({"amount": funds, "direction": "credit", "reason": "wire received"}),
                )
                .await;
            assert_eq!(funded.status, 201, "{}", funded.json());
        }
        account
    }

    /// Defines the workflow `name` for the key's customer (or the platform's), asserting it saved.
    pub async fn put_workflow(&self, key: &str, name: &str, definition: Value) {
        let path = format!("/v1/workflows/{name}");
        let put = self.send(Method::PUT, &path, Some(key), None, Some(&definition)).await;
        assert_eq!(put.status, 200, "{}", put.json());
    }

    /// Sets the endpoint's breaker so that no test's run of failures opens it (a thousand in a
    /// row over a week): for tests of what happens to deliveries whose retries run out.
    pub async fn never_disable(&self, key: &str, endpoint: &Value) {
        let path = format!("/v1/webhook_endpoints/{}", endpoint["id"].as_str().unwrap());
        let body = json!({"breaker": {"failures": 1000, "over_hours": 168}});
        let updated = self.post(&path, key, body).await;
        assert_eq!(updated.status, 200, "{}", updated.json());
    }

    /// A webhook endpoint for `url` receiving `events`; returns it as created (secret included).
    pub async fn subscribe(&self, key: &str, url: &str, events: &[&str]) -> Value {
        let created = self
            .post("/v1/webhook_endpoints", key, json!({"url": url, "events": events}))
            .await;
        assert_eq!(created.status, 201, "{}", created.json());
        created.json()
    }

    /// The platform's open exceptions items (the first hundred).
    pub async fn open_exceptions(&self) -> Vec<Value> {
        let page = self
            .get("/v1/work_items?queue=exceptions&status=open&limit=100", ADMIN_KEY)
            .await;
        assert_eq!(page.status, 200, "{}", page.json());
        page.json()["data"].as_array().unwrap().clone()
    }

    /// An event's deliveries, one per endpoint it was sent to.
    pub async fn deliveries(&self, key: &str, event_id: &str) -> Vec<Value> {
        let deliveries = self.get(&format!("/v1/events/{event_id}/deliveries"), key).await.json();
        deliveries["data"]
            .as_array()
            .unwrap_or_else(|| panic!("{deliveries}"))
            .clone()
    }

    /// The audit entries of what is at `resource` (`/v1/operations/op_…`), oldest first.
    pub async fn history(&self, resource: &str, key: &str) -> Vec<Value> {
        let history = self.get(&format!("{resource}/history"), key).await.json();
        history["data"]
            .as_array()
            .unwrap_or_else(|| panic!("{history}"))
            .clone()
    }

    /// The statuses an operation or one of its transactions went through, oldest first, from
    /// the operation's history.
    pub async fn path_of(&self, key: &str, operation_id: &str, entity_id: &str) -> Vec<String> {
        self.history(&format!("/v1/operations/{operation_id}"), key)
            .await
            .iter()
            .filter(|entry| entry["entity_id"] == entity_id)
            .map(|entry| entry["to"].as_str().unwrap().to_owned())
            .collect()
    }

    pub async fn create_customer(&self) -> Customer {
        self.create_customer_named("Acme Payroll").await
    }

    /// A customer called `name` and a key of its own with [`CUSTOMER_SCOPES`].
    pub async fn create_customer_named(&self, name: &str) -> Customer {
        let customer = self.post("/v1/customers", ADMIN_KEY, json!({"name": name})).await;
        assert_eq!(customer.status, 201, "{}", customer.json());
        let id = customer.id();
        let key = self
            .post(
                "/v1/api_keys",
                ADMIN_KEY,
                json!({"customer_id": id, "scopes": CUSTOMER_SCOPES}),
            )
            .await;
        assert_eq!(key.status, 201, "{}", key.json());
        Customer {
            id,
            key: key.json()["secret"].as_str().unwrap().to_owned(),
        }
    }

    /// One-item `two_step` payouts of `customer`, one per amount, made in order: their ids.
    pub async fn two_step_payouts(&self, customer: &Customer, amounts: impl IntoIterator<Item = i64>) -> Vec<String> {
        let mut made = vec![];
        for amount in amounts {
            let created = self
                .post(
                    "/v1/operations",
                    &customer.key,
                    payout(&customer.id, "two_step", &[amount]),
                )
                .await;
            assert_eq!(created.status, 201, "{}", created.json());
            made.push(created.id());
        }
        made
    }

    /// Deactivates a user of `customer`, with the customer's key.
    pub async fn deactivate(&self, customer: &Customer, user_id: &str) {
        let path = format!("/v1/customers/{}/users/{user_id}", customer.id);
        let deactivated = self.post(&path, &customer.key, json!({"status": "deactivated"})).await;
        assert_eq!(deactivated.status, 200, "{}", deactivated.json());
    }

    /// A user of `customer` with `roles`, and a key bound to it with `scopes`.
    pub async fn add_member(&self, customer: &Customer, roles: &[&str], scopes: &[&str]) -> Member {
        let user = self
            .post(
                &format!("/v1/customers/{}/users", customer.id),
                &customer.key,
                json!({"name": "Member", "email": format!("member-{}@acme.example", rand_suffix()), "roles": roles}),
            )
            .await;
        assert_eq!(user.status, 201, "{}", user.json());
        let user_id = user.id();
        // Minted by the platform, not by the customer's key: many tests create operations
        // with the customer's key, and a key minted by an operation's creator cannot decide on it.
        let key = self
            .post(
                "/v1/api_keys",
                ADMIN_KEY,
                json!({"customer_id": customer.id, "user_id": user_id, "scopes": scopes}),
            )
            .await;
        assert_eq!(key.status, 201, "{}", key.json());
        Member {
            user_id,
            key: key.json()["secret"].as_str().unwrap().to_owned(),
        }
    }
}

/// `X-Service-Signature` for a rail report body, signed as the connectivity layer signs it
/// (with [`RAIL_SECRET`], at the service's current time).
pub fn sign_rail_report(clock: &TestClock, body: &[u8]) -> String {
    use hmac::{Hmac, KeyInit, Mac};
    let t = clock.now().unix_timestamp();
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(RAIL_SECRET.as_bytes()).expect("any key");
    mac.update(format!("{t}.").as_bytes());
    mac.update(body);
    format!("t={t},v1={}", hex::encode(mac.finalize().into_bytes()))
}

pub fn rand_suffix() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    format!("{}-{}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed))
}

/// A valid payout for `customer_id` through `workflow`.
pub fn payout(customer_id: &str, workflow: &str, amounts: &[i64]) -> Value {
    let items: Vec<Value> = amounts
        .iter()
        .enumerate()
        .map(|(i, amount)| {
            json!({"beneficiary": {"id_type": "RUT", "id": format!("7654321-{i}")},
                   "destination": {"rail": "psp-local:sandbox", "account": format!("00012345{i}")},
                   "amount": amount, "reference": format!("salary {i}")})
        })
        .collect();
    json!({"customer_id": customer_id, "type": "payout", "currency": "CLP", "workflow": workflow, "items": items})
}

/// The operation of a schedule (`POST /v1/schedules`'s `operation`): [`payout`] without the
/// customer, which the schedule names.
pub fn scheduled_payout(workflow: &str, amounts: &[i64]) -> Value {
    let mut body = payout("cus_unused", workflow, amounts);
    body.as_object_mut().unwrap().remove("customer_id");
    body
}

/// The body of `POST /v1/reconciliations` for `statement` on the sandbox rail.
pub fn statement_body(format: &str, statement: &[u8]) -> Value {
    use base64::Engine;
    json!({
        "rail": "psp-local:sandbox",
        "format": format,
        "statement": base64::engine::general_purpose::STANDARD.encode(statement),
    })
}

/// A payroll file with one line per `(amount, currency)`.
pub fn payroll_csv(lines: &[(i64, &str)]) -> Vec<u8> {
    let mut csv = String::from("beneficiary_id_type,beneficiary_id,rail,account,amount,currency,reference\n");
    for (i, (amount, currency)) in lines.iter().enumerate() {
        csv += &format!("RUT,{i}-K,psp-local:sandbox,{i:08},{amount},{currency},payroll line {i}\n");
    }
    csv.into_bytes()
}

/// A pain.001's payment information: its id and transactions, each `(end-to-end id, amount as
/// written, currency)`.
pub type PaymentInformation<'a> = (&'a str, &'a [(&'a str, &'a str, &'a str)]);

/// A pain.001.001.03 with `message_id` and a payment information per block, each transaction
/// `(end-to-end id, amount as written, currency)`, its sums declared as they add up. Each
/// beneficiary is a person identified by a RUT; its account is the transaction's position.
pub fn pain001(message_id: &str, blocks: &[PaymentInformation]) -> Vec<u8> {
    // Sums kept exact, in 10⁻⁵ units (the most decimals an amount has), written as decimals.
    let units = |amount: &str| -> i64 {
        let (whole, fraction) = amount.split_once('.').unwrap_or((amount, ""));
        format!("{whole}{fraction:0<5}").parse::<i64>().unwrap()
    };
    let decimal = |units: i64| format!("{}.{:05}", units / 100_000, units % 100_000);
    let units_of = |transactions: &[(&str, &str, &str)]| -> i64 { transactions.iter().map(|(_, a, _)| units(a)).sum() };
    let sum = |transactions: &[(&str, &str, &str)]| decimal(units_of(transactions));
    let count: usize = blocks.iter().map(|(_, t)| t.len()).sum();
    let total = decimal(blocks.iter().map(|(_, t)| units_of(t)).sum());
    let mut xml = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Document xmlns=\"urn:iso:std:iso:20022:tech:xsd:pain.001.001.03\">\n\
         <CstmrCdtTrfInitn>\n<GrpHdr><MsgId>{message_id}</MsgId><CreDtTm>2026-12-07T09:30:00</CreDtTm>\
         <NbOfTxs>{count}</NbOfTxs><CtrlSum>{total}</CtrlSum><InitgPty><Nm>ACME</Nm></InitgPty></GrpHdr>\n"
    );
    let mut position = 0;
    for (id, transactions) in blocks {
        xml += &format!(
            "<PmtInf><PmtInfId>{id}</PmtInfId><PmtMtd>TRF</PmtMtd><NbOfTxs>{}</NbOfTxs><CtrlSum>{}</CtrlSum>\
             <ReqdExctnDt>2026-12-10</ReqdExctnDt><Dbtr><Nm>ACME</Nm></Dbtr>\
             <DbtrAcct><Id><Othr><Id>ACME-1</Id></Othr></Id></DbtrAcct><DbtrAgt><FinInstnId><BIC>BCHICLRM</BIC></FinInstnId></DbtrAgt>\n",
            transactions.len(),
            sum(transactions)
        );
        for (end_to_end_id, amount, currency) in transactions.iter() {
            position += 1;
            xml += &format!(
                "<CdtTrfTxInf><PmtId><InstrId>I-{position}</InstrId><EndToEndId>{end_to_end_id}</EndToEndId></PmtId>\
                 <Amt><InstdAmt Ccy=\"{currency}\">{amount}</InstdAmt></Amt>\
                 <Cdtr><Nm>Payee {position}</Nm><Id><PrvtId><Othr><Id>{position}-K</Id><SchmeNm><Prtry>RUT</Prtry></SchmeNm></Othr></PrvtId></Id></Cdtr>\
                 <CdtrAcct><Id><Othr><Id>{position:08}</Id></Othr></Id></CdtrAcct><RmtInf><Ustrd>Payment {position}</Ustrd></RmtInf></CdtTrfTxInf>\n"
            );
        }
        xml += "</PmtInf>\n";
    }
    xml += "</CstmrCdtTrfInitn>\n</Document>\n";
    xml.into_bytes()
}

/// The RFC 3339 time `after` past `at` (an RFC 3339 string in a response), written as the
/// service writes times.
pub fn rfc3339_after(at: &Value, after: time::Duration) -> String {
    use time::format_description::well_known::Rfc3339;
    let at = time::OffsetDateTime::parse(at.as_str().expect("a time"), &Rfc3339).expect("an RFC 3339 time");
    (at + after).format(&Rfc3339).expect("formats")
}
