//! `POST /v1/transactions/{id}/retry`
#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    ops_lambda::serve_endpoint(ops_api::Endpoint::RetryTransaction).await
}
