//! Parse the task payload, run the three checks until the plan's deadline.

use handover::adapters::traffic::{Route53Control, Ssm, WriterLookup};
use handover::adapters::{DbInspector, Rds};
use handover::aws::Aws;
use handover::error::{ErrorName, FunctionError};
use handover::execution::{CatchUpResult, Check, TaskInput, VerifyResult};
use handover::failover::canary::SecretsManager;
use handover::failover::catch_up::{self, CanaryWal};
use handover::failover::verify::{Backoff, VerifyDeps, first_write, verify};

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

/// What one invocation answers: the full verification, or the first write.
#[derive(Debug, serde::Serialize)]
#[serde(untagged)]
pub enum Verified {
    /// `$.verify`.
    Verify(Box<VerifyResult>),
    /// `$.first_write` (mode `first_write`).
    FirstWrite(Check),
    /// `$.catch_up` (mode `catch_up`: a planned switchover, before promotion).
    CatchUp(CatchUpResult),
}

/// Verify this execution's failover; with mode `first_write` (right after
/// promotion, before the switch), only the write canary; with mode
/// `catch_up` (a planned switchover, after the fence), read through the
/// canary's connection whether S has replayed all of P's WAL. verify is
/// the function that reaches S's database (in S's VPC when the plan's is
/// private), so the catch-up reads from here.
pub async fn handler(event: serde_json::Value, deps: &Deps) -> Result<Verified, FunctionError> {
    let task = TaskInput::from_event(event)?;
    let (only_first_write, catch_up) = match task.mode.as_deref() {
        None => (false, false),
        Some("first_write") => (true, false),
        Some("catch_up") => (false, true),
        Some(other) => {
            return Err(FunctionError::invalid_input(format!(
                "task payload: mode {other:?} is not one verify knows (none, \"first_write\" or \"catch_up\")"
            )));
        }
    };
    let standby = &task.state.input.plan.regions.standby.region;
    let secrets = SecretsManager::new(&deps.aws, standby).await;
    let rds = Rds::new(&deps.aws, standby).await;
    if catch_up {
        let plan = &task.state.input.plan;
        let budget = std::time::Duration::from_millis(plan.timings.call_timeout_ms);
        // S's endpoint as RDS reports it, for a canary that names no host
        // (and the name its certificate must carry); a failed describe
        // leaves the reading to say what it could not reach.
        let endpoint = rds
            .describe(&plan.regions.standby.db_instance_id, budget)
            .await
            .ok()
            .flatten()
            .and_then(|d| d.endpoint);
        let wal = CanaryWal {
            canary: &plan.canary,
            standby_endpoint: endpoint,
            secrets: &secrets,
        };
        return Ok(Verified::CatchUp(
            catch_up::read(&task.state, &wal, chrono::Utc::now).await?,
        ));
    }
    if only_first_write {
        return Ok(Verified::FirstWrite(
            first_write(&task.state, &rds, &secrets, &deps.http, Backoff::default()).await,
        ));
    }
    let ssm = Ssm::new(&deps.aws, standby).await;
    let writer = WriterLookup {
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
    Ok(Verified::Verify(Box::new(
        verify(&task.state, &vd, Backoff::default()).await?,
    )))
}

#[cfg(test)]
mod tests {
    use handover::execution::{PromotionResult, SwitchResult};
    use handover_testkit::fixtures::{refused_without, task};

    /// The payload this task received in a drill (from its execution history).
    const EVENT: &str = include_str!("../events/verify.json");
    /// The FirstWrite task's payload, right after promotion (from a drill's history).
    const FIRST_WRITE: &str = include_str!("../events/first_write.json");

    #[test]
    fn the_first_write_event_carries_its_mode_and_the_promotion_but_no_switch() {
        let t = task(FIRST_WRITE);
        assert_eq!(t.mode.as_deref(), Some("first_write"));
        t.state.require::<PromotionResult>("promotion").unwrap();
        assert!(
            t.state.require::<SwitchResult>("switch").is_err(),
            "the first write runs before the switch"
        );
    }

    #[tokio::test]
    async fn an_unknown_mode_is_invalid_input_and_touches_nothing() {
        let mut event: serde_json::Value = serde_json::from_str(EVENT).unwrap();
        event["mode"] = serde_json::json!("promote");
        // No endpoint is reachable here: a refusal must come before any call.
        let deps = super::Deps::from_env().await.unwrap();
        let e = super::handler(event, &deps).await.unwrap_err();
        assert_eq!(e.name, handover::error::ErrorName::InvalidInput);
        assert!(e.to_string().contains("\"promote\""), "{e}");
    }

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
