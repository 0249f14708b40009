//! `diagnose`: a Step Functions task (Diagnose, and Recheck after approval).

mod handler;

use handover::telemetry;
use lambda_runtime::{LambdaEvent, run, service_fn};

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    telemetry::init_logging();
    let deps = handler::Deps::new()?;
    let deps = &deps;
    run(service_fn(
        move |event: LambdaEvent<serde_json::Value>| async move {
            handler::handler(event.payload, deps).await
        },
    ))
    .await
}
