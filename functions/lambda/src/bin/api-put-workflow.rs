//! `PUT /v1/workflows/{name}`
#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    ops_lambda::serve_endpoint(ops_api::Endpoint::PutWorkflow).await
}
