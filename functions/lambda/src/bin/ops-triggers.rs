//! The `bootstrap` of every trigger function: runs the stream, queue or timer consumer its
//! `Handler` names (`stream-transition`). Holds no endpoint's code.
#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    match ops_lambda::started_function()? {
        ops_lambda::Function::Trigger(trigger) => ops_lambda::serve_trigger(trigger).await,
        endpoint => Err(format!("{} runs in {}", endpoint.handler(), endpoint.binary()).into()),
    }
}
