//! A rail adapter that speaks JSON over HTTP to a PSP's own connectivity layer, so a PSP plugs
//! in a rail without writing Rust. Every request is signed like a webhook
//! (`X-Service-Signature`) with the rail secret.
//!
//! | call | request body | answer |
//! |---|---|---|
//! | `POST {base}/submit` | the instruction (its `transaction_id` is the payment's end-to-end id, which the rail carries and its statements give back; `end_to_end_id`, when there, is the customer's own, to carry beside it) | `{"result":"accepted","rail_reference"}` or `{"result":"rejected","code","reason"}` |
//! | `POST {base}/status` | `{"transaction_id","rail_reference"}` | `{"state":"pending"}`, `{"state":"confirmed","rail_reference"}`, `{"state":"failed"\|"returned","code","reason"}` or `{"state":"not_found"}` |
//! | `POST {base}/files?file_id=…` (a file rail, at each cut-off) | the cut-off's pain.001 (`application/xml`); its `file_id` is its `MsgId`, the same bytes at every handover of it | as for a submit |
//! | `POST {base}/files/status` (a file rail, when a handover's outcome was lost) | `{"file_id"}` | `{"state":"received","rail_reference"}` or `{"state":"not_found"}` |
//! | `POST {base}/statements?format=csv\|camt053\|camt052\|camt054` (a file rail's bank files, `pain002` and camt, are read by the service itself) | the statement file's bytes (`text/csv` or `application/xml`) | `{"period":{"from","to"}?,"lines":[{"rail_reference"?,"transaction_id"?,"amount","currency","status","direction","reversal"?,"booked_on"?}]}` (`direction`: `debit` for money that left the service's account, `credit` for money that arrived); a 4xx if it cannot be read |
//!
//! A 429 or 503 answer, or a connection that could not be opened, is transient (nothing was
//! sent, or the layer refused it); another 4xx is permanent; no answer within the timeout is
//! a timeout, so the transaction becomes `unknown` and is asked about, never resent. Another
//! 5xx (500, 502, 504) is transient for a status inquiry or a statement, which are safe to
//! ask again, but not for a submit: the layer, or a proxy in front of it, may have passed the
//! instruction on before failing, so the transaction becomes `unknown` as after a timeout.

use async_trait::async_trait;
use ops_domain::rail::{
    Ack, FileHandover, Instruction, RailAdapter, RailError, RailKind, RailState, Statement, StatementFormat,
};
use ops_domain::webhooks::signature;
use serde::de::DeserializeOwned;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// What a call does, which decides what a 5xx answer means.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Call {
    /// A submit: the layer may have passed it on before failing, so a 5xx leaves it unknown.
    Instruction,
    /// A status or a statement: safe to ask again, so a 5xx is transient.
    Inquiry,
}

pub struct HttpRail {
    id: String,
    kind: RailKind,
    base_url: String,
    secret: String,
    client: reqwest::Client,
}

impl HttpRail {
    pub fn new(id: &str, kind: RailKind, base_url: &str, secret: &str, timeout: Duration) -> HttpRail {
        HttpRail {
            id: id.to_owned(),
            kind,
            base_url: base_url.trim_end_matches('/').to_owned(),
            secret: secret.to_owned(),
            client: reqwest::Client::builder()
                .timeout(timeout)
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .expect("HTTP client builds"),
        }
    }

    /// Posts `body` to `path`.
    async fn call<T: DeserializeOwned>(
        &self,
        path: &str,
        content_type: &str,
        body: Vec<u8>,
        call: Call,
    ) -> Result<T, RailError> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        let header = signature::header(&[&self.secret], now, &body);
        let response = self
            .client
            .post(format!("{}{path}", self.base_url))
            .header("Content-Type", content_type)
            .header(signature::HEADER, header)
            .body(body)
            .send()
            .await
            .map_err(|e| match e.is_connect() {
                true => RailError::Transient(format!("cannot reach {}: {e}", self.base_url)),
                false => RailError::Timeout,
            })?;
        let status = response.status();
        let refused = matches!(status.as_u16(), 429 | 503);
        if refused || (status.is_server_error() && call == Call::Inquiry) {
            return Err(RailError::Transient(format!("{path} answered {status}")));
        }
        if status.is_server_error() {
            return Err(RailError::Unknown(format!("{path} answered {status}")));
        }
        if !status.is_success() {
            let text = response.text().await.unwrap_or_default();
            return Err(RailError::Permanent(format!(
                "{path} answered {status}: {}",
                text.chars().take(200).collect::<String>()
            )));
        }
        let bytes = response.bytes().await.map_err(|_| RailError::Timeout)?;
        serde_json::from_slice(&bytes)
            .map_err(|e| RailError::Permanent(format!("{path} answered with an unreadable body: {e}")))
    }
}

#[async_trait]
impl RailAdapter for HttpRail {
    fn id(&self) -> &str {
        &self.id
    }

    fn kind(&self) -> RailKind {
        self.kind
    }

    async fn submit(&self, instruction: &Instruction) -> Result<Ack, RailError> {
        self.call(
            "/submit",
            "application/json",
            serde_json::to_vec(instruction).expect("serializes"),
            Call::Instruction,
        )
        .await
    }

    async fn status(
        &self,
        transaction_id: &ops_domain::ids::TransactionId,
        rail_reference: Option<&str>,
    ) -> Result<RailState, RailError> {
        let body = serde_json::json!({"transaction_id": transaction_id, "rail_reference": rail_reference});
        self.call(
            "/status",
            "application/json",
            body.to_string().into_bytes(),
            Call::Inquiry,
        )
        .await
    }

    async fn hand_over_file(&self, file: &FileHandover<'_>) -> Result<Ack, RailError> {
        let path = format!("/files?file_id={}", file.file_id);
        self.call(&path, "application/xml", file.pain001.to_vec(), Call::Instruction)
            .await
    }

    async fn file_received(&self, file_id: &str) -> Result<Option<String>, RailError> {
        #[derive(serde::Deserialize)]
        #[serde(tag = "state", rename_all = "snake_case")]
        enum Received {
            Received { rail_reference: String },
            NotFound,
        }
        let body = serde_json::json!({ "file_id": file_id });
        let received: Received = self
            .call(
                "/files/status",
                "application/json",
                body.to_string().into_bytes(),
                Call::Inquiry,
            )
            .await?;
        Ok(match received {
            Received::Received { rail_reference } => Some(rail_reference),
            Received::NotFound => None,
        })
    }

    async fn import_statement(&self, format: StatementFormat, statement: &[u8]) -> Result<Statement, RailError> {
        // A file rail's bank answers in ISO 20022 files (pain.002, camt.054), read here as
        // every bank's are; its connectivity layer only carries them.
        if self.kind == RailKind::Files && format != StatementFormat::Csv {
            return ops_domain::reconciliations::read_bank_statement(format, statement).map_err(RailError::Permanent);
        }
        let path = format!("/statements?format={}", format.as_str());
        self.call(&path, format.content_type(), statement.to_vec(), Call::Inquiry)
            .await
    }
}
