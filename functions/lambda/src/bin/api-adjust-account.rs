//! `POST /v1/accounts/{id}/adjustments`
#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    ops_lambda::serve_endpoint(ops_api::Endpoint::AdjustAccount).await
}
