//! `GET /v1/reports/transactions`
#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    ops_lambda::serve_endpoint(ops_api::Endpoint::TransactionsReport).await
}
