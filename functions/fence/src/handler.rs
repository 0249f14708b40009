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

#[cfg(test)]
mod tests {
    use handover::execution::{ApprovalResult, Diagnosis};
    use handover_testkit::fixtures::{refused_without, task};

    /// The payload this task received in a drill (from its execution history).
    const EVENT: &str = include_str!("../events/fence.json");

    #[test]
    fn the_recorded_event_parses_with_the_step_outputs_it_reads() {
        let t = task(EVENT);
        t.state.require::<Diagnosis>("recheck").unwrap();
        t.state.require::<ApprovalResult>("approval").unwrap();
    }

    #[test]
    fn a_missing_field_is_invalid_input_naming_it() {
        refused_without(
            EVENT,
            "/state/plan/regions/primary/fence_security_group_id",
            "plan.regions.primary.fence_security_group_id",
        );
        refused_without(EVENT, "/execution", "execution");
    }
}
