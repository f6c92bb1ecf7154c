//! DynamoDB stream (new events) → transition: transactions, submissions, settlement.
#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    ops_lambda::serve_stream(ops_runtime::driver::StreamConsumer::Transition).await
}
