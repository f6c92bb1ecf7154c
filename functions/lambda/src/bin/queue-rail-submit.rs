//! SQS submissions queue → rail submit.
#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    ops_lambda::serve_queue(ops_domain::ports::QueueName::Submissions).await
}
