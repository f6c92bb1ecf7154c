//! `GET /v1/customers/{id}/approval_floors/{type}`
#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    ops_lambda::serve_endpoint(ops_api::Endpoint::GetApprovalFloor).await
}
