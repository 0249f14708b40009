//! `readiness`: every 30 minutes (EventBridge Scheduler), would a failover
//! work now? See `handover::readiness`.

// The handler's future comes from the library crate. rustc computes its
// layout across the crate boundary, deeper than the default limit of 128
// for some functions.
#![recursion_limit = "256"]

use handover::telemetry;
use lambda_runtime::{LambdaEvent, run, service_fn};
use readiness::handler;

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
