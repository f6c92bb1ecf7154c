//! DynamoDB stream (new events) → webhook deliveries and the event bus.
#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    ops_lambda::serve_stream(ops_runtime::driver::StreamConsumer::WebhookDispatch).await
}
