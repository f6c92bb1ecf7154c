//! `GET /v1/reconciliations/{id}`
#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    ops_lambda::serve_endpoint(ops_api::Endpoint::GetReconciliation).await
}
