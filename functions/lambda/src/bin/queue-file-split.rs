//! SQS files queue → a file's chunks made into operations.
#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    ops_lambda::serve_queue(ops_domain::ports::QueueName::Files).await
}
