//! `GET /v1/webhook_endpoints/{id}`
#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    ops_lambda::serve_endpoint(ops_api::Endpoint::GetWebhookEndpoint).await
}
