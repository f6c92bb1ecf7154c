//! The blob port on S3: uploaded files' bytes and oversized answers, one object each, in the
//! stack's bucket (encrypted at rest, private, expired by lifecycle rules), read back by the
//! service or through a short-lived presigned link.

use async_trait::async_trait;
use aws_sdk_s3::operation::get_object::GetObjectError;
use aws_sdk_s3::presigning::PresigningConfig;
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::Client;
use ops_domain::files::Blobs;
use ops_domain::ports::BlobError;

pub struct S3Blobs {
    client: Client,
    bucket: String,
}

impl S3Blobs {
    pub fn new(client: Client, bucket: impl Into<String>) -> S3Blobs {
        S3Blobs {
            client,
            bucket: bucket.into(),
        }
    }

    /// An S3 client for `config`; path-style addressing when an endpoint is set (an emulator
    /// on localhost has no per-bucket host names).
    pub fn client(config: &aws_config::SdkConfig) -> Client {
        let path_style = config.endpoint_url().is_some();
        Client::from_conf(
            aws_sdk_s3::config::Builder::from(config)
                .force_path_style(path_style)
                .build(),
        )
    }

    /// Creates the bucket the way `template.yaml` declares it (for emulators and tests).
    pub async fn create_bucket(client: &Client, bucket: &str) -> Result<(), BlobError> {
        client
            .create_bucket()
            .bucket(bucket)
            .send()
            .await
            .map_err(BlobError::new)?;
        Ok(())
    }
}

#[async_trait]
impl Blobs for S3Blobs {
    async fn put(&self, key: &str, content_type: &str, bytes: Vec<u8>) -> Result<(), BlobError> {
        self.client
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .content_type(content_type)
            .body(ByteStream::from(bytes))
            .send()
            .await
            .map_err(BlobError::new)?;
        Ok(())
    }

    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, BlobError> {
        let object = match self.client.get_object().bucket(&self.bucket).key(key).send().await {
            Ok(object) => object,
            Err(e) => {
                return match e.into_service_error() {
                    GetObjectError::NoSuchKey(_) => Ok(None),
                    other => Err(BlobError::new(other)),
                }
            }
        };
        let bytes = object.body.collect().await.map_err(BlobError::new)?;
        Ok(Some(bytes.into_bytes().to_vec()))
    }

    async fn link(&self, key: &str, valid_for: time::Duration) -> Result<Option<String>, BlobError> {
        let valid_for = std::time::Duration::try_from(valid_for).map_err(BlobError::new)?;
        let presigned = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .presigned(PresigningConfig::expires_in(valid_for).map_err(BlobError::new)?)
            .await
            .map_err(BlobError::new)?;
        Ok(Some(presigned.uri().to_owned()))
    }
}
