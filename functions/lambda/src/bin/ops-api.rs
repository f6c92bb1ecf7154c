//! The `bootstrap` of the API's functions (`ops_api::Bootstrap::Api`): runs the endpoint its
//! `Handler` names (`api-create-operation`). Holds no schedule endpoint's or trigger's code.
#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    match ops_lambda::started_function()? {
        ops_lambda::Function::Endpoint(endpoint) => {
            ops_lambda::serve_endpoint(endpoint, ops_api::api_lambda_router).await
        }
        trigger => Err(format!("{} runs in {}", trigger.handler(), trigger.binary()).into()),
    }
}
