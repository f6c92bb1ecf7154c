//! SQS dead-letter queues → exceptions work items.
#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    ops_lambda::serve_dead_letters().await
}
