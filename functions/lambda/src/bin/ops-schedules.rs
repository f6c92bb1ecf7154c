//! The `bootstrap` of the schedules' functions (`ops_api::Bootstrap::Schedules`): runs the
//! endpoint its `Handler` names (`api-create-schedule`). Holds the time-zone database, and no
//! other endpoint's or trigger's code.
#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    match ops_lambda::started_function()? {
        ops_lambda::Function::Endpoint(endpoint) => {
            ops_lambda::serve_endpoint(endpoint, ops_api::schedules_lambda_router).await
        }
        trigger => Err(format!("{} runs in {}", trigger.handler(), trigger.binary()).into()),
    }
}
