//! The `bootstrap` of every API function: runs the endpoint its `Handler` names
//! (`api-create-operation`). Holds no trigger's code.
#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    match ops_lambda::started_function()? {
        ops_lambda::Function::Endpoint(endpoint) => ops_lambda::serve_endpoint(endpoint).await,
        trigger => Err(format!("{} runs in ops-triggers", trigger.handler()).into()),
    }
}
