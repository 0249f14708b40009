//! Parse the task payload; `mode: start` promotes, `mode: status` polls.

use chrono::Utc;
use handover::adapters::{CloudWatch, Rds};
use handover::aws::Aws;
use handover::error::FunctionError;
use handover::execution::{PromotionResult, TaskInput};
use handover::failover::promote::{Promoter, start, status};
use handover::store::Store;

/// Built once per container.
pub struct Deps {
    aws: Aws,
    store: Store,
}

impl Deps {
    /// `TABLE_NAME` and `AWS_REGION`.
    pub async fn from_env() -> Result<Self, FunctionError> {
        let aws = Aws::new();
        let store = Store::from_env(&aws).await?;
        Ok(Deps { aws, store })
    }
}

/// Start the promotion, or poll it.
pub async fn handler(
    event: serde_json::Value,
    deps: &Deps,
) -> Result<PromotionResult, FunctionError> {
    let task = TaskInput::from_event(event)?;
    let s_region = &task.state.input.plan.regions.standby.region;
    let s_rds = Rds::new(&deps.aws, s_region).await;
    let promoter = Promoter::for_plan(&task.state, &s_rds);
    match task.mode.as_deref() {
        Some("start") => {
            let lag = CloudWatch::new(&deps.aws, s_region).await;
            Ok(start(
                &task.state,
                &task.execution,
                &deps.store,
                &promoter,
                &lag,
                Utc::now,
            )
            .await?)
        }
        Some("status") => Ok(status(
            &task.state,
            &task.execution,
            &deps.store,
            &promoter,
            Utc::now,
        )
        .await?),
        other => Err(FunctionError::invalid_input(format!(
            "task payload: `mode` must be \"start\" or \"status\", got {other:?}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use handover::execution::{FenceResult, PromotionResult};
    use handover_testkit::fixtures::{refused_without, task};

    /// The payloads this task received in a drill (from its execution history).
    const START: &str = include_str!("../events/start.json");
    const STATUS: &str = include_str!("../events/status.json");

    #[test]
    fn the_recorded_events_parse_with_the_step_outputs_they_read() {
        let start = task(START);
        assert_eq!(start.mode.as_deref(), Some("start"));
        start.state.require::<FenceResult>("fence").unwrap();
        let status = task(STATUS);
        assert_eq!(status.mode.as_deref(), Some("status"));
        status
            .state
            .require::<PromotionResult>("promotion")
            .unwrap();
        assert_eq!(start.execution, status.execution);
    }

    #[test]
    fn a_missing_field_is_invalid_input_naming_it() {
        refused_without(
            START,
            "/state/plan/regions/standby/db_instance_id",
            "plan.regions.standby.db_instance_id",
        );
        refused_without(STATUS, "/execution", "execution");
    }
}
