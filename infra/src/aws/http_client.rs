//! The AWS SDK's clients send through `reqwest`, the HTTP client the service already has for
//! webhooks, rails and S3, instead of the SDK's own hyper client: one HTTP stack in every
//! function's binary instead of two (the SDK's brings HTTP/2 and a second connection pool and
//! TLS setup). What the SDK needs of a client is small: send a request it signed, hand back the
//! answer, and say what kind of failure a failure was, because that decides its retries.

use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpConnector,
};
use aws_smithy_runtime_api::client::orchestrator::{HttpRequest, HttpResponse};
use aws_smithy_runtime_api::client::result::ConnectorError;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::body::SdkBody;
use aws_smithy_types::retry::ErrorKind;
use std::error::Error as StdError;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// The SDK's HTTP client: one `reqwest` client (and connection pool) per pair of timeouts the
/// SDK asks for, made at the first request that asks for it.
#[derive(Debug, Clone, Default)]
pub struct ReqwestHttpClient {
    connectors: Arc<Mutex<Vec<(Timeouts, SharedHttpConnector)>>>,
}

/// Connect and read timeouts, as the SDK's settings give them.
type Timeouts = (Option<Duration>, Option<Duration>);

impl HttpClient for ReqwestHttpClient {
    fn http_connector(&self, settings: &HttpConnectorSettings, _: &RuntimeComponents) -> SharedHttpConnector {
        let timeouts = (settings.connect_timeout(), settings.read_timeout());
        let mut connectors = self.connectors.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, connector)) = connectors.iter().find(|(made_for, _)| *made_for == timeouts) {
            return connector.clone();
        }
        let mut builder = reqwest::Client::builder();
        if let Some(timeout) = timeouts.0 {
            builder = builder.connect_timeout(timeout);
        }
        if let Some(timeout) = timeouts.1 {
            builder = builder.read_timeout(timeout);
        }
        let connector = SharedHttpConnector::new(ReqwestConnector {
            client: builder.build().map_err(|error| error.to_string()),
        });
        connectors.push((timeouts, connector.clone()));
        connector
    }
}

#[derive(Debug)]
struct ReqwestConnector {
    /// Or why it could not be made (its TLS set-up failed): every call fails with that.
    client: Result<reqwest::Client, String>,
}

impl HttpConnector for ReqwestConnector {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let client = self.client.clone();
        HttpConnectorFuture::new(async move {
            let client = client.map_err(|reason| ConnectorError::user(reason.into()))?;
            let request = to_reqwest(request)?;
            let mut answer = client.execute(request).await.map_err(connector_error)?;
            let status = answer.status();
            let headers = std::mem::take(answer.headers_mut());
            let body = answer.bytes().await.map_err(connector_error)?;
            let mut response = http::Response::new(SdkBody::from(body));
            *response.status_mut() = status;
            *response.headers_mut() = headers;
            HttpResponse::try_from(response).map_err(|error| ConnectorError::other(error.into(), None))
        })
    }
}

/// The SDK's request as `reqwest`'s. Every call the service makes has its body in memory.
fn to_reqwest(request: HttpRequest) -> Result<reqwest::Request, ConnectorError> {
    let request = request
        .try_into_http1x()
        .map_err(|error| ConnectorError::user(error.into()))?;
    let (parts, body) = request.into_parts();
    let body = body
        .bytes()
        .map(bytes::Bytes::copy_from_slice)
        .ok_or_else(|| ConnectorError::user("a streaming request body is not supported".into()))?;
    reqwest::Request::try_from(http::Request::from_parts(parts, body))
        .map_err(|error| ConnectorError::user(error.into()))
}

/// What kind of failure a failed exchange was, as the SDK's own client tells it: a timeout, or
/// the connection failing (refused, reset, closed before the answer) are worth another attempt
/// on a new connection; a request that cannot be built is not.
fn connector_error(error: reqwest::Error) -> ConnectorError {
    if error.is_timeout() {
        return ConnectorError::timeout(error.into());
    }
    if error.is_builder() {
        return ConnectorError::user(error.into());
    }
    if error.is_connect() || has_source::<std::io::Error>(&error) {
        return ConnectorError::io(error.into());
    }
    if error.is_request() || error.is_body() {
        // The connection ended mid-exchange without an I/O error of its own (an incomplete
        // message): the SDK's client retries it too.
        return ConnectorError::other(error.into(), Some(ErrorKind::TransientError));
    }
    ConnectorError::other(error.into(), None)
}

fn has_source<E: StdError + 'static>(error: &(dyn StdError + 'static)) -> bool {
    let mut next = Some(error);
    while let Some(error) = next {
        if error.is::<E>() {
            return true;
        }
        next = error.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_config::BehaviorVersion;
    use aws_credential_types::provider::SharedCredentialsProvider;
    use aws_credential_types::Credentials;
    use aws_sdk_dynamodb::config::retry::RetryConfig;
    use aws_sdk_dynamodb::config::timeout::TimeoutConfig;
    use aws_sdk_dynamodb::error::SdkError;
    use aws_sdk_dynamodb::operation::describe_table::DescribeTableError;
    use aws_smithy_runtime_api::client::result::DispatchFailure;
    use aws_types::region::Region;
    use aws_types::SdkConfig;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// What the stand-in for AWS does with each connection, in order (the last one repeats).
    #[derive(Clone, Copy)]
    enum Answer {
        /// Reads the request and closes the connection without a word.
        Drop,
        /// Reads the request and never answers.
        Hang,
        /// Answers with this status and a `DescribeTable` body.
        Status(u16),
    }

    /// An HTTP server on a random port that answers each connection as `answers` say, and
    /// counts the connections.
    async fn stand_in(answers: &'static [Answer]) -> (String, Arc<AtomicUsize>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let connections = Arc::new(AtomicUsize::new(0));
        let counted = connections.clone();
        tokio::spawn(async move {
            loop {
                let (mut socket, _) = listener.accept().await.unwrap();
                let nth = counted.fetch_add(1, Ordering::SeqCst);
                let answer = answers[nth.min(answers.len() - 1)];
                tokio::spawn(async move {
                    let mut request = Vec::new();
                    let mut buffer = [0u8; 4096];
                    while !String::from_utf8_lossy(&request).contains("\r\n\r\n") {
                        let read = socket.read(&mut buffer).await.unwrap();
                        request.extend_from_slice(&buffer[..read]);
                    }
                    match answer {
                        Answer::Drop => {}
                        Answer::Hang => std::future::pending::<()>().await,
                        Answer::Status(status) => {
                            let body = r#"{"Table":{"TableName":"payments","ItemCount":7}}"#;
                            let head = format!(
                                "HTTP/1.1 {status} Whatever\r\ncontent-type: application/x-amz-json-1.0\r\n\
                                 x-amzn-requestid: request-{nth}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                                body.len()
                            );
                            socket.write_all(head.as_bytes()).await.unwrap();
                            socket.write_all(body.as_bytes()).await.unwrap();
                        }
                    }
                });
            }
        });
        (endpoint, connections)
    }

    /// A DynamoDB client on `ReqwestHttpClient`, three attempts a call, with no wait between.
    fn dynamodb(endpoint: &str, timeouts: TimeoutConfig) -> aws_sdk_dynamodb::Client {
        let config = SdkConfig::builder()
            .behavior_version(BehaviorVersion::latest())
            .http_client(ReqwestHttpClient::default())
            .region(Region::new("us-east-1"))
            .credentials_provider(SharedCredentialsProvider::new(Credentials::new(
                "test", "test", None, None, "tests",
            )))
            .endpoint_url(endpoint)
            .retry_config(
                RetryConfig::standard()
                    .with_max_attempts(3)
                    .with_initial_backoff(Duration::from_millis(1)),
            )
            .timeout_config(timeouts)
            .build();
        aws_sdk_dynamodb::Client::new(&config)
    }

    /// How a `DescribeTable` sent to `endpoint` failed, every attempt made.
    async fn dispatch_failure(endpoint: &str, timeouts: TimeoutConfig) -> DispatchFailure {
        let error: SdkError<DescribeTableError> = dynamodb(endpoint, timeouts)
            .describe_table()
            .table_name("payments")
            .send()
            .await
            .unwrap_err();
        match error {
            SdkError::DispatchFailure(failure) => failure,
            other => panic!("not a dispatch failure: {other:?}"),
        }
    }

    #[tokio::test]
    async fn the_answer_reaches_the_sdk_whole_and_a_server_error_is_tried_again() {
        let (endpoint, connections) = stand_in(&[Answer::Status(500), Answer::Status(200)]).await;
        let described = dynamodb(&endpoint, TimeoutConfig::disabled())
            .describe_table()
            .table_name("payments")
            .send()
            .await
            .unwrap();
        let table = described.table.unwrap();
        assert_eq!(
            (table.table_name.as_deref(), table.item_count),
            (Some("payments"), Some(7))
        );
        assert_eq!(connections.load(Ordering::SeqCst), 2, "the 500 was tried again, once");
    }

    #[tokio::test]
    async fn a_connection_closed_before_the_answer_is_a_transient_failure_tried_again() {
        let (endpoint, connections) = stand_in(&[Answer::Drop]).await;
        let failure = dispatch_failure(&endpoint, TimeoutConfig::disabled()).await;
        assert_eq!(failure.as_other(), Some(ErrorKind::TransientError), "{failure:?}");
        assert_eq!(connections.load(Ordering::SeqCst), 3, "every attempt was made");
    }

    #[tokio::test]
    async fn a_refused_connection_is_an_io_failure() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        drop(listener);
        let failure = dispatch_failure(&endpoint, TimeoutConfig::disabled()).await;
        assert!(failure.is_io(), "{failure:?}");
    }

    #[tokio::test]
    async fn the_sdks_read_timeout_ends_a_silent_answer_and_is_tried_again() {
        let (endpoint, connections) = stand_in(&[Answer::Hang]).await;
        let timeouts = TimeoutConfig::builder()
            .read_timeout(Duration::from_millis(100))
            .build();
        let failure = dispatch_failure(&endpoint, timeouts).await;
        assert!(failure.is_timeout(), "{failure:?}");
        assert_eq!(connections.load(Ordering::SeqCst), 3, "every attempt was made");
    }
}
