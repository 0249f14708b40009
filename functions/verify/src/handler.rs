//! Parse the task payload, run the three checks until the plan's deadline.

use handover::adapters::Rds;
use handover::aws::Aws;
use handover::error::{ErrorName, FunctionError};
use handover::execution::{TaskInput, VerifyResult};
use handover::failover::canary::SecretsManager;
use handover::failover::switch::Route53Control;
use handover::failover::verify::{Backoff, VerifyDeps, verify};

/// Built once per container.
pub struct Deps {
    aws: Aws,
    control: Route53Control,
    http: reqwest::Client,
}

impl Deps {
    /// Nothing but the SDK's own settings.
    pub async fn from_env() -> Result<Self, FunctionError> {
        let aws = Aws::new();
        let control = Route53Control::new(&aws).await;
        let http = reqwest::Client::builder()
            .user_agent("handover-verify/1")
            .build()
            .map_err(|e| FunctionError::new(ErrorName::Fatal, e.to_string()))?;
        Ok(Deps { aws, control, http })
    }
}

/// Verify this execution's failover.
pub async fn handler(event: serde_json::Value, deps: &Deps) -> Result<VerifyResult, FunctionError> {
    let task = TaskInput::from_event(event)?;
    let standby = &task.state.input.plan.regions.standby.region;
    let secrets = SecretsManager::new(&deps.aws, standby).await;
    let rds = Rds::new(&deps.aws, standby).await;
    let ssm = handover::failover::switch::Ssm::new(&deps.aws, standby).await;
    let writer = handover::failover::verify::WriterLookup {
        records: &deps.control,
        params: &ssm,
    };
    let vd = VerifyDeps {
        dns: &deps.control,
        rds: &rds,
        secrets: &secrets,
        http: &deps.http,
        writer: &writer,
    };
    Ok(verify(&task.state, &vd, Backoff::default()).await?)
}

#[cfg(test)]
mod tests {
    use handover::execution::{PromotionResult, SwitchResult};
    use handover_testkit::fixtures::{refused_without, task};

    /// The payload this task received in a drill (from its execution history).
    const EVENT: &str = include_str!("../events/verify.json");

    #[test]
    fn the_recorded_event_parses_with_the_step_outputs_it_reads() {
        let t = task(EVENT);
        t.state.require::<SwitchResult>("switch").unwrap();
        t.state.require::<PromotionResult>("promotion").unwrap();
    }

    #[test]
    fn a_missing_field_is_invalid_input_naming_it() {
        refused_without(EVENT, "/state/plan/canary", "plan.canary");
        refused_without(EVENT, "/execution", "execution");
    }
}
