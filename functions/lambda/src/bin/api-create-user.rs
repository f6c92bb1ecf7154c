//! `POST /v1/customers/{id}/users`
#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    ops_lambda::serve_endpoint(ops_api::Endpoint::CreateUser).await
}
