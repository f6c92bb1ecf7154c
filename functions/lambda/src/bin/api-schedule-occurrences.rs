//! `GET /v1/schedules/{id}/occurrences`
#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    ops_lambda::serve_endpoint(ops_api::Endpoint::ScheduleOccurrences).await
}
