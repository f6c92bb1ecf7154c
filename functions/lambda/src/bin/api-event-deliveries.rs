//! `GET /v1/events/{id}/deliveries`
#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    ops_lambda::serve_endpoint(ops_api::Endpoint::EventDeliveries).await
}
