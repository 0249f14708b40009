//! Parse the task payload, fence P, report the outcome.

use chrono::Utc;
use handover::adapters::Rds;
use handover::aws::Aws;
use handover::error::FunctionError;
use handover::execution::{FenceResult, TaskInput};
use handover::failover::fence::fence;
use handover::store::Store;

/// Built once per container.
pub struct Deps {
    aws: Aws,
    store: Store,
}

impl Deps {
    /// `TABLE_NAME` and `AWS_REGION` (the table lives in the function's Region).
    pub async fn from_env() -> Result<Self, FunctionError> {
        let aws = Aws::new();
        let store = Store::from_env(&aws).await?;
        Ok(Deps { aws, store })
    }
}

/// Fence P's database for this execution.
pub async fn handler(event: serde_json::Value, deps: &Deps) -> Result<FenceResult, FunctionError> {
    let task = TaskInput::from_event(event)?;
    let p_rds = Rds::new(&deps.aws, &task.state.input.plan.regions.primary.region).await;
    Ok(fence(&task.state, &task.execution, &deps.store, &p_rds, Utc::now).await?)
}
