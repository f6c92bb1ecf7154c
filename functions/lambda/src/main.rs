//! Every Lambda function's `bootstrap`: one binary, built once and shared by all the functions
//! of `template.yaml`; each runs what its `Handler` property names (Lambda passes it as
//! `_HANDLER`).
#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    let handler =
        std::env::var("_HANDLER").map_err(|_| "_HANDLER is not set: a function's Handler names what it runs")?;
    let function = ops_lambda::Function::named(&handler).ok_or_else(|| format!("no function is named {handler:?}"))?;
    ops_lambda::serve(function).await
}
