//! SQS webhooks queue → webhook send.
#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    ops_lambda::serve_queue(ops_domain::ports::QueueName::Webhooks).await
}
