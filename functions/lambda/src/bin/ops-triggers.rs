//! The `bootstrap` of every trigger function: runs the stream, queue or timer consumer its
//! `Handler` names (`stream-transition`), the replay of failed stream batches, or a new
//! stack's first platform key. Holds no endpoint's code.
#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    match ops_lambda::started_function()? {
        ops_lambda::Function::Trigger(trigger) => ops_lambda::serve_trigger(trigger).await,
        ops_lambda::Function::StreamReplay => ops_lambda::serve_stream_replay().await,
        ops_lambda::Function::FirstPlatformKey => ops_lambda::serve_first_platform_key().await,
        endpoint => Err(format!("{} runs in {}", endpoint.handler(), endpoint.binary()).into()),
    }
}
