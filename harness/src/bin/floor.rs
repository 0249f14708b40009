//! The floor of the Lambda bench: a hello-world `lambda_runtime` function,
//! built with the functions' release profile. What Handover's functions
//! spend at init beyond this is their own work (the plan, secrets, the SDK
//! clients).

use lambda_runtime::{LambdaEvent, run, service_fn};

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    run(service_fn(
        |event: LambdaEvent<serde_json::Value>| async move {
            Ok::<_, lambda_runtime::Error>(serde_json::json!({ "hello": event.payload["time"] }))
        },
    ))
    .await
}
