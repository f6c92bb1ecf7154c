//! `GET /v1/openapi.json`
#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    ops_lambda::serve_endpoint(ops_api::Endpoint::OpenApi).await
}
