//! `POST /v1/events/{id}/resend`
#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    ops_lambda::serve_endpoint(ops_api::Endpoint::ResendEvent).await
}
