//! The blob port on S3: uploaded files' bytes and oversized answers, one object each, in the
//! stack's bucket (encrypted at rest, private, expired by lifecycle rules), read back by the
//! service or through a short-lived presigned link.
//!
//! Three REST calls (PutObject, GetObject, a presigned GetObject), signed by AWS's own SigV4
//! signer (`aws-sigv4`) and sent with the service's HTTP client. The S3 SDK would add about a
//! megabyte to every function's bootstrap for them: its client code, its endpoint rules and
//! the CRC tables of its checksums.

use super::signed_calls::SignedCalls;
use async_trait::async_trait;
use aws_sigv4::http_request::{
    PayloadChecksumKind, PercentEncodingMode, SignableBody, SignatureLocation, SigningSettings,
    UriPathNormalizationMode,
};
use bytes::Bytes;
use ops_domain::files::Blobs;
use ops_domain::ports::BlobError;
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use std::time::{Duration, SystemTime};

/// What S3 leaves unescaped in an object key's path: RFC 3986's unreserved characters and `/`.
const KEY_PATH: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~')
    .remove(b'/');

pub struct S3Blobs {
    calls: SignedCalls,
    /// `https://{bucket}.s3.{region}.amazonaws.com`, or `{endpoint}/{bucket}` for an emulator
    /// (path-style: an emulator on localhost has no per-bucket host names).
    bucket_url: String,
}

impl S3Blobs {
    /// The blobs in `bucket`, with `config`'s region, credentials and endpoint.
    pub fn new(config: &aws_types::SdkConfig, bucket: &str) -> Result<S3Blobs, BlobError> {
        let calls = SignedCalls::new(config, "s3").map_err(BlobError::new)?;
        let bucket_url = match calls.emulator() {
            Some(endpoint) => format!("{endpoint}/{bucket}"),
            None => calls.endpoint(&format!("{bucket}.s3")),
        };
        Ok(S3Blobs { calls, bucket_url })
    }

    /// Creates the bucket the way `template.yaml` declares it (for emulators and tests).
    pub async fn create_bucket(&self) -> Result<(), BlobError> {
        let body = match self.calls.region() {
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

    fn object_url(&self, key: &str) -> String {
        format!("{}/{}", self.bucket_url, utf8_percent_encode(key, KEY_PATH))
    }

    /// Sends one call; an answer that is neither a success nor 404 (which the caller reads) is
    /// the call's error.
    async fn send(
        &self,
        method: reqwest::Method,
        url: &str,
        headers: &[(&str, &str)],
        body: Bytes,
    ) -> Result<reqwest::Response, BlobError> {
        let mut settings = s3_signing();
        settings.payload_checksum_kind = PayloadChecksumKind::XAmzSha256;
        let answer = self
            .calls
            .send(&settings, method, url, headers, body)
            .await
            .map_err(BlobError::new)?;
        let status = answer.status();
        if status.is_success() || status == reqwest::StatusCode::NOT_FOUND {
            return Ok(answer);
        }
        let text = answer.text().await.unwrap_or_default();
        Err(BlobError::new(format!("S3 answered {status}: {text}")))
    }

    /// A link that reads `key` until `valid_for` from `at`, without credentials: the link the
    /// S3 SDK presigns, `x-id` included.
    pub async fn presigned_link(&self, key: &str, at: SystemTime, valid_for: Duration) -> Result<String, BlobError> {
        let url = format!("{}?x-id=GetObject", self.object_url(key));
        let mut settings = s3_signing();
        settings.signature_location = SignatureLocation::QueryParams;
        settings.expires_in = Some(valid_for);
        let signed = self
            .calls
            .signature(settings, "GET", &url, &[], SignableBody::UnsignedPayload, at)
            .await
            .map_err(BlobError::new)?;
        let mut link = reqwest::Url::parse(&url).map_err(BlobError::new)?;
        for (name, value) in signed.params() {
            link.query_pairs_mut().append_pair(name, value);
        }
        Ok(link.into())
    }
}

/// SigV4 as S3 takes it: the path escaped once and not normalised.
fn s3_signing() -> SigningSettings {
    let mut settings = SigningSettings::default();
    settings.percent_encoding_mode = PercentEncodingMode::Single;
    settings.uri_path_normalization_mode = UriPathNormalizationMode::Disabled;
    settings
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
