//! `POST /v1/webhook_endpoints/{id}/rotate_secret`
#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    ops_lambda::serve_endpoint(ops_api::Endpoint::RotateWebhookSecret).await
}
