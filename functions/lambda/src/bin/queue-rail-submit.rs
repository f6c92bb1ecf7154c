//! SQS submissions queue → rail submit.
use lambda_runtime::{service_fn, LambdaEvent};

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    let service = ops_lambda::start().await?;
    lambda_runtime::run(service_fn(
        |event: LambdaEvent<aws_lambda_events::event::sqs::SqsEvent>| {
            let service = service.clone();
            async move {
                Ok::<_, lambda_runtime::Error>(
                    ops_runtime::triggers::queue(&service, ops_domain::ports::QueueName::Submissions, event.payload)
                        .await,
                )
            }
        },
    ))
    .await
}
