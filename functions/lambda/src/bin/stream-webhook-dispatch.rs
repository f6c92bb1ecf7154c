//! DynamoDB stream (new events) → webhook deliveries and the event bus.
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
                        ops_runtime::driver::StreamConsumer::WebhookDispatch,
                        event.payload,
                    )
                    .await,
                )
            }
        },
    ))
    .await
}
