//! Parse the task payload, move traffic and writers to S.

use chrono::Utc;
use handover::adapters::traffic::{ArcClusters, Route53Control, Ssm};
use handover::aws::Aws;
use handover::error::FunctionError;
use handover::execution::{SwitchResult, TaskInput};
use handover::failover::switch::{SwitchDeps, switch};

/// Built once per container.
pub struct Deps {
    aws: Aws,
    control: Route53Control,
    store: handover::store::Store,
}

impl Deps {
    /// `TABLE_NAME` and `AWS_REGION` (the table lives in the function's Region).
    pub async fn from_env() -> Result<Self, FunctionError> {
        let aws = Aws::new();
        let control = Route53Control::new(&aws).await;
        let store = handover::store::Store::from_env(&aws).await?;
        Ok(Deps {
            aws,
            control,
            store,
        })
    }
}

/// Switch for this execution.
pub async fn handler(event: serde_json::Value, deps: &Deps) -> Result<SwitchResult, FunctionError> {
    let task = TaskInput::from_event(event)?;
    let plan = &task.state.input.plan;
    let arc = ArcClusters::new(&deps.aws, &plan.dns.arc_cluster_endpoints).await;
    // The writer parameter lives in S's Region, where the failover set it:
    // a failback's switch back (the reversed plan, S as `primary`) puts
    // S's parameter back, and leaves P's alone.
    let ssm_region = if task.state.input.failback.is_some() {
        &plan.regions.primary.region
    } else {
        &plan.regions.standby.region
    };
    let ssm = Ssm::new(&deps.aws, ssm_region).await;
    let sd = SwitchDeps {
        checks: &deps.control,
        records: &deps.control,
        arc: &arc,
        params: &ssm,
        store: &deps.store,
    };
    Ok(switch(&task.state, &task.execution, &sd, Utc::now).await?)
}

#[cfg(test)]
mod tests {
    use handover::execution::{FenceResult, PromotionResult};
    use handover_testkit::fixtures::{refused_without, task};

    /// The payload this task received in a drill (from its execution history).
    const EVENT: &str = include_str!("../events/switch.json");

    #[test]
    fn the_recorded_event_parses_with_the_step_outputs_it_reads() {
        let t = task(EVENT);
        t.state.require::<FenceResult>("fence").unwrap();
        t.state.require::<PromotionResult>("promotion").unwrap();
    }

    #[test]
    fn a_missing_field_is_invalid_input_naming_it() {
        refused_without(EVENT, "/state/plan/dns/record_name", "plan.dns.record_name");
        refused_without(EVENT, "/state", "state");
    }
}
