//! `POST /v1/rail_reports`
#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    ops_lambda::serve_endpoint(ops_api::Endpoint::RailReport).await
}
