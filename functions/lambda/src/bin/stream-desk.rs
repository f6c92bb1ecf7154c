//! DynamoDB stream (new events) → work items opened and closed on the desk.
#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    ops_lambda::serve_stream(ops_runtime::driver::StreamConsumer::Desk).await
}
