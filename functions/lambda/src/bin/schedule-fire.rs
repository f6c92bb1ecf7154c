//! EventBridge Scheduler (one schedule per schedule) → record the occurrence it names.
use lambda_runtime::{service_fn, LambdaEvent};

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    let service = ops_lambda::start().await?;
    lambda_runtime::run(service_fn(|event: LambdaEvent<serde_json::Value>| {
        let service = service.clone();
        async move {
            ops_runtime::triggers::schedule_fire(&service, event.payload)
                .await
                .map_err(lambda_runtime::Error::from)
        }
    }))
    .await
}
