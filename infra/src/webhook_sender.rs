//! Webhook delivery over real HTTP.

use async_trait::async_trait;
use ops_domain::ports::WebhookSender;
use ops_domain::signature;
use ops_domain::webhook::DELIVERY_TIMEOUT;

pub struct HttpWebhookSender {
    client: reqwest::Client,
}

impl Default for HttpWebhookSender {
    fn default() -> Self {
        HttpWebhookSender::with_timeout(DELIVERY_TIMEOUT)
    }
}

impl HttpWebhookSender {
    /// A receiver that has not answered within `timeout` counts as a failed attempt.
    pub fn with_timeout(timeout: std::time::Duration) -> Self {
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .user_agent(concat!("payment-operations-service/", env!("CARGO_PKG_VERSION")))
            // A receiver's redirect is not followed: the signed body goes where it was registered.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("HTTP client builds");
        HttpWebhookSender { client }
    }
}

#[async_trait]
impl WebhookSender for HttpWebhookSender {
    async fn post(&self, url: &str, signature: &str, body: Vec<u8>) -> Result<u16, String> {
        let response = self
            .client
            .post(url)
            .header("Content-Type", "application/json")
            .header(signature::HEADER, signature)
            .body(body)
            .send()
            .await
            .map_err(|e| {
                if e.is_timeout() {
                    "no answer within the delivery timeout".to_string()
                } else {
                    format!("request failed: {e}")
                }
            })?;
        Ok(response.status().as_u16())
    }
}
