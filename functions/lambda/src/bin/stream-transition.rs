//! DynamoDB stream (new events) → transition: transactions, submissions, settlement.
use lambda_runtime::{service_fn, LambdaEvent};

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    let service = ops_lambda::start().await?;
    lambda_runtime::run(service_fn(
        |event: LambdaEvent<aws_lambda_events::event::dynamodb::Event>| {
            let service = service.clone();
            async move {
                Ok::<_, lambda_runtime::Error>(
                    ops_runtime::triggers::stream(
                        &service,
                        ops_runtime::driver::StreamConsumer::Transition,
                        event.payload,
                    )
                    .await,
                )
            }
        },
    ))
    .await
}
