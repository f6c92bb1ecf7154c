//! Calls to an AWS service's REST API without its SDK: signed by AWS's own SigV4 signer
//! (`aws-sigv4`) and sent with the service's HTTP client, tried again after a server error,
//! throttling or no answer. For services the functions make a handful of calls to (S3,
//! EventBridge Scheduler), where the SDK's client would add its whole model to every
//! function's bootstrap.

use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use aws_sigv4::http_request::{sign, SignableBody, SignableRequest, SigningInstructions, SigningSettings};
use aws_sigv4::sign::v4;
use aws_types::SdkConfig;
use bytes::Bytes;
use std::sync::OnceLock;
use std::time::{Duration, SystemTime};

/// Attempts of a call the service answered with a server error or throttling, or never
/// answered. Only for idempotent calls: a retried PUT leaves the same object, a retried
/// schedule change carries its client token.
const ATTEMPTS: u32 = 3;

/// One AWS service in one region, with the configuration's credentials.
pub(super) struct SignedCalls {
    /// Made at the first call: most functions never make one, and need not make a client
    /// (TLS configuration, root certificates) when they start.
    http: OnceLock<reqwest::Client>,
    credentials: SharedCredentialsProvider,
    region: String,
    /// The configuration's endpoint (an emulator), without a trailing `/`.
    emulator: Option<String>,
    /// The name the service signs under (`s3`, `scheduler`).
    service: &'static str,
}

impl SignedCalls {
    pub(super) fn new(config: &SdkConfig, service: &'static str) -> Result<SignedCalls, String> {
        let region = config.region().ok_or("no AWS region is configured")?.to_string();
        let credentials = config
            .credentials_provider()
            .ok_or("no AWS credentials are configured")?;
        Ok(SignedCalls {
            http: OnceLock::new(),
            credentials,
            region,
            emulator: config.endpoint_url().map(|url| url.trim_end_matches('/').to_owned()),
            service,
        })
    }

    pub(super) fn region(&self) -> &str {
        &self.region
    }

    /// The configuration's endpoint, when it names one (an emulator).
    pub(super) fn emulator(&self) -> Option<&str> {
        self.emulator.as_deref()
    }

    /// `https://{host}.{region}.amazonaws.com`, or the emulator's endpoint.
    pub(super) fn endpoint(&self, host: &str) -> String {
        match &self.emulator {
            Some(endpoint) => endpoint.clone(),
            None => {
                let domain = match self.region.starts_with("cn-") {
                    true => "amazonaws.com.cn",
                    false => "amazonaws.com",
                };
                format!("https://{host}.{}.{domain}", self.region)
            }
        }
    }

    /// Signs and sends one call, again after a server error, throttling or no answer; every
    /// other answer is the caller's to read.
    pub(super) async fn send(
        &self,
        settings: &SigningSettings,
        method: reqwest::Method,
        url: &str,
        headers: &[(&str, &str)],
        body: Bytes,
    ) -> Result<reqwest::Response, String> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let signed = self
                .signature(
                    settings.clone(),
                    method.as_str(),
                    url,
                    headers,
                    SignableBody::Bytes(&body),
                    SystemTime::now(),
                )
                .await?;
            // Cloning `Bytes` counts a reference; a retry does not copy the body.
            let mut request = self.http()?.request(method.clone(), url).body(body.clone());
            for (name, value) in headers.iter().copied().chain(signed.headers()) {
                request = request.header(name, value);
            }
            let retry = match request.send().await {
                Ok(answer)
                    if answer.status().is_server_error()
                        || answer.status() == reqwest::StatusCode::TOO_MANY_REQUESTS =>
                {
                    format!("{} answered {}", self.service, answer.status())
                }
                Ok(answer) => return Ok(answer),
                Err(error) => error.to_string(),
            };
            if attempt == ATTEMPTS {
                return Err(retry);
            }
            tokio::time::sleep(Duration::from_millis(50 << attempt)).await;
        }
    }

    /// What SigV4 adds to a request made at `at`: headers, or query parameters for a
    /// presigned link, as `settings` say.
    pub(super) async fn signature(
        &self,
        settings: SigningSettings,
        method: &str,
        url: &str,
        headers: &[(&str, &str)],
        body: SignableBody<'_>,
        at: SystemTime,
    ) -> Result<SigningInstructions, String> {
        let identity = self
            .credentials
            .provide_credentials()
            .await
            .map_err(|error| error.to_string())?
            .into();
        let params = v4::SigningParams::builder()
            .identity(&identity)
            .region(&self.region)
            .name(self.service)
            .time(at)
            .settings(settings)
            .build()
            .map_err(|error| error.to_string())?
            .into();
        let request =
            SignableRequest::new(method, url, headers.iter().copied(), body).map_err(|error| error.to_string())?;
        let (instructions, _signature) = sign(request, &params).map_err(|error| error.to_string())?.into_parts();
        Ok(instructions)
    }

    fn http(&self) -> Result<&reqwest::Client, String> {
        if let Some(client) = self.http.get() {
            return Ok(client);
        }
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(25))
            .build()
            .map_err(|error| error.to_string())?;
        Ok(self.http.get_or_init(|| client))
    }
}
