//! `POST /v1/work_items/{id}/resolve`
#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    ops_lambda::serve_endpoint(ops_api::Endpoint::ResolveWorkItem).await
}
