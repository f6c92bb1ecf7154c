//! EventBridge schedule (every minute) → ask the rails about transactions whose poll is due.
use lambda_runtime::{service_fn, LambdaEvent};

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    let service = ops_lambda::start().await?;
    lambda_runtime::run(service_fn(|_: LambdaEvent<serde_json::Value>| {
        let service = service.clone();
        async move {
            ops_runtime::triggers::status_poll(&service)
                .await
                .map_err(lambda_runtime::Error::from)
        }
    }))
    .await
}
