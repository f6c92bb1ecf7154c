//! The blob port on S3: uploaded files' bytes and oversized answers, one object each, in the
//! stack's bucket (encrypted at rest, private, expired by lifecycle rules), read back by the
//! service or through a short-lived presigned link.
//!
//! Three REST calls (PutObject, GetObject, a presigned GetObject), signed by AWS's own SigV4
//! signer (`aws-sigv4`) and sent with the service's HTTP client. The S3 SDK would add about a
//! megabyte to every function's bootstrap for them: its client code, its endpoint rules and
//! the CRC tables of its checksums (BENCHMARKS.md, issue 17).

use async_trait::async_trait;
use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use aws_sigv4::http_request::{
    sign, PayloadChecksumKind, PercentEncodingMode, SignableBody, SignableRequest, SignatureLocation, SigningSettings,
    UriPathNormalizationMode,
};
use aws_sigv4::sign::v4;
use bytes::Bytes;
use ops_domain::files::Blobs;
use ops_domain::ports::BlobError;
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use std::sync::OnceLock;
use std::time::{Duration, SystemTime};

/// What S3 leaves unescaped in an object key's path: RFC 3986's unreserved characters and `/`.
const KEY_PATH: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~')
    .remove(b'/');
/// Attempts of a call S3 answered with a server error or never answered (both calls are
/// idempotent: a second PUT of the same bytes leaves the same object).
const ATTEMPTS: u32 = 3;

pub struct S3Blobs {
    /// Made at the first call: most functions never touch a blob, and need not make its
    /// client (TLS configuration, root certificates) when they start.
    http: OnceLock<reqwest::Client>,
    credentials: SharedCredentialsProvider,
    region: String,
    /// `https://{bucket}.s3.{region}.amazonaws.com`, or `{endpoint}/{bucket}` for an emulator
    /// (path-style: an emulator on localhost has no per-bucket host names).
    bucket_url: String,
}

impl S3Blobs {
    /// The blobs in `bucket`, with `config`'s region, credentials and endpoint.
    pub fn new(config: &aws_types::SdkConfig, bucket: &str) -> Result<S3Blobs, BlobError> {
        let region = config
            .region()
            .ok_or_else(|| BlobError::new("no AWS region is configured"))?
            .to_string();
        let credentials = config
            .credentials_provider()
            .ok_or_else(|| BlobError::new("no AWS credentials are configured"))?;
        let bucket_url = match config.endpoint_url() {
            Some(endpoint) => format!("{}/{bucket}", endpoint.trim_end_matches('/')),
            None => {
                let domain = if region.starts_with("cn-") {
                    "amazonaws.com.cn"
                } else {
                    "amazonaws.com"
                };
                format!("https://{bucket}.s3.{region}.{domain}")
            }
        };
        Ok(S3Blobs {
            http: OnceLock::new(),
            credentials,
            region,
            bucket_url,
        })
    }

    /// Creates the bucket the way `template.yaml` declares it (for emulators and tests).
    pub async fn create_bucket(&self) -> Result<(), BlobError> {
        let body = match self.region.as_str() {
            "us-east-1" => vec![],
            region => format!(
                "<CreateBucketConfiguration xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">\
                 <LocationConstraint>{region}</LocationConstraint></CreateBucketConfiguration>"
            )
            .into_bytes(),
        };
        let answer = self
            .send(reqwest::Method::PUT, &self.bucket_url, &[], body.into())
            .await?;
        match answer.status() {
            reqwest::StatusCode::NOT_FOUND => Err(BlobError::new(answer.text().await.unwrap_or_default())),
            _ => Ok(()),
        }
    }

    fn http(&self) -> Result<&reqwest::Client, BlobError> {
        if let Some(client) = self.http.get() {
            return Ok(client);
        }
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(25))
            .build()
            .map_err(BlobError::new)?;
        Ok(self.http.get_or_init(|| client))
    }

    fn object_url(&self, key: &str) -> String {
        format!("{}/{}", self.bucket_url, utf8_percent_encode(key, KEY_PATH))
    }

    /// Signs and sends one call, again after a server error or no answer; any other answer
    /// that is neither a success nor 404 (which the caller reads) is the call's error.
    async fn send(
        &self,
        method: reqwest::Method,
        url: &str,
        headers: &[(&str, &str)],
        body: Bytes,
    ) -> Result<reqwest::Response, BlobError> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let signed = self
                .signature(
                    method.as_str(),
                    url,
                    headers,
                    SignableBody::Bytes(&body),
                    SystemTime::now(),
                    None,
                )
                .await?;
            // Cloning `Bytes` counts a reference; a retry does not copy the object.
            let mut request = self.http()?.request(method.clone(), url).body(body.clone());
            for (name, value) in headers.iter().copied().chain(signed.headers()) {
                request = request.header(name, value);
            }
            let retry = match request.send().await {
                Ok(answer) if answer.status().is_success() || answer.status() == reqwest::StatusCode::NOT_FOUND => {
                    return Ok(answer)
                }
                Ok(answer) if answer.status().is_server_error() => format!("S3 answered {}", answer.status()),
                Ok(answer) => {
                    let status = answer.status();
                    let text = answer.text().await.unwrap_or_default();
                    return Err(BlobError::new(format!("S3 answered {status}: {text}")));
                }
                Err(error) => error.to_string(),
            };
            if attempt == ATTEMPTS {
                return Err(BlobError::new(retry));
            }
            tokio::time::sleep(Duration::from_millis(50 << attempt)).await;
        }
    }

    /// SigV4 for S3: the path escaped once and not normalised, the payload's hash signed in a
    /// header, or for a presigned link (`expires_in`) left unsigned and the signature put in
    /// the query.
    async fn signature(
        &self,
        method: &str,
        url: &str,
        headers: &[(&str, &str)],
        body: SignableBody<'_>,
        at: SystemTime,
        expires_in: Option<Duration>,
    ) -> Result<aws_sigv4::http_request::SigningInstructions, BlobError> {
        let identity = self
            .credentials
            .provide_credentials()
            .await
            .map_err(BlobError::new)?
            .into();
        let mut settings = SigningSettings::default();
        settings.percent_encoding_mode = PercentEncodingMode::Single;
        settings.uri_path_normalization_mode = UriPathNormalizationMode::Disabled;
        match expires_in {
            Some(expires_in) => {
                settings.signature_location = SignatureLocation::QueryParams;
                settings.expires_in = Some(expires_in);
            }
            None => settings.payload_checksum_kind = PayloadChecksumKind::XAmzSha256,
        }
        let params = v4::SigningParams::builder()
            .identity(&identity)
            .region(&self.region)
            .name("s3")
            .time(at)
            .settings(settings)
            .build()
            .map_err(BlobError::new)?
            .into();
        let request = SignableRequest::new(method, url, headers.iter().copied(), body).map_err(BlobError::new)?;
        let (instructions, _signature) = sign(request, &params).map_err(BlobError::new)?.into_parts();
        Ok(instructions)
    }

    /// A link that reads `key` until `valid_for` from `at`, without credentials: the link the
    /// S3 SDK presigns, `x-id` included.
    pub async fn presigned_link(&self, key: &str, at: SystemTime, valid_for: Duration) -> Result<String, BlobError> {
        let url = format!("{}?x-id=GetObject", self.object_url(key));
        let signed = self
            .signature("GET", &url, &[], SignableBody::UnsignedPayload, at, Some(valid_for))
            .await?;
        let mut link = reqwest::Url::parse(&url).map_err(BlobError::new)?;
        for (name, value) in signed.params() {
            link.query_pairs_mut().append_pair(name, value);
        }
        Ok(link.into())
    }
}

#[async_trait]
impl Blobs for S3Blobs {
    async fn put(&self, key: &str, content_type: &str, bytes: Vec<u8>) -> Result<(), BlobError> {
        let url = self.object_url(key);
        let answer = self
            .send(
                reqwest::Method::PUT,
                &url,
                &[("content-type", content_type)],
                bytes.into(),
            )
            .await?;
        match answer.status() {
            reqwest::StatusCode::NOT_FOUND => Err(BlobError::new(answer.text().await.unwrap_or_default())),
            _ => Ok(()),
        }
    }

    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, BlobError> {
        let answer = self
            .send(reqwest::Method::GET, &self.object_url(key), &[], Bytes::new())
            .await?;
        if answer.status() == reqwest::StatusCode::NOT_FOUND {
            // No such key is no blob; no such bucket is a deployment's error.
            let text = answer.text().await.unwrap_or_default();
            return match text.contains("<Code>NoSuchKey</Code>") {
                true => Ok(None),
                false => Err(BlobError::new(format!("S3 answered 404: {text}"))),
            };
        }
        Ok(Some(answer.bytes().await.map_err(BlobError::new)?.to_vec()))
    }

    async fn link(&self, key: &str, valid_for: time::Duration) -> Result<Option<String>, BlobError> {
        let valid_for = Duration::try_from(valid_for).map_err(BlobError::new)?;
        Ok(Some(self.presigned_link(key, SystemTime::now(), valid_for).await?))
    }
}
