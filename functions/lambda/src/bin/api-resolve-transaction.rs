//! `POST /v1/transactions/{id}/resolve`
#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    ops_lambda::serve_endpoint(ops_api::Endpoint::ResolveTransaction).await
}
