//! `approval`: Step Functions `lambda:invoke.waitForTaskToken` → a short key
//! for the task token, and the question in Slack. The task keeps waiting
//! until the `slack` function sends the decision.

// The handler's future comes from the library crate. rustc computes its
// layout across the crate boundary, deeper than the default limit of 128
// for some functions.
#![recursion_limit = "256"]

use approval::handler;
use handover::telemetry;
use lambda_runtime::{LambdaEvent, run, service_fn};

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    telemetry::init_logging();
    let deps = handler::Deps::from_env().await?;
    let deps = &deps;
    run(service_fn(
        move |event: LambdaEvent<serde_json::Value>| async move {
            handler::handler(event.payload, deps).await
        },
    ))
    .await
}
