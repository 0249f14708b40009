//! Parse the execution document, snapshot both sides, assess.

use chrono::Utc;
use handover::adapters::{Bedrock, CloudWatch, Elbv2, HttpProbe, Rds, Route53};
use handover::aws::Aws;
use handover::diagnose::gate::gate_before_fence;
use handover::diagnose::{Sources, diagnose, explain::explain};
use handover::error::{ErrorName, FunctionError};
use handover::execution::{ApprovalResult, Diagnosis, ExecutionState};
use tracing::info;

/// Built once per container. Regions come from the plan in each input, so
/// clients are made per call from the cached per-Region configs.
pub struct Deps {
    pub aws: Aws,
    pub probe: HttpProbe,
    pub http: reqwest::Client,
}

impl Deps {
    /// Nothing to read from the environment but the SDK's own settings.
    pub fn new() -> Result<Self, FunctionError> {
        Ok(Deps {
            aws: Aws::new(),
            probe: HttpProbe::new()
                .map_err(|e| FunctionError::new(ErrorName::Fatal, e.to_string()))?,
            http: reqwest::Client::builder()
                .user_agent("handover-diagnose/1")
                .build()
                .map_err(|e| FunctionError::new(ErrorName::Fatal, e.to_string()))?,
        })
    }
}

/// Diagnose the run described by the execution document.
pub async fn handler(event: serde_json::Value, deps: &Deps) -> Result<Diagnosis, FunctionError> {
    let state = ExecutionState::from_event(event)?;
    let plan = &state.input.plan;
    let p_rds = Rds::new(&deps.aws, &plan.regions.primary.region).await;
    let s_rds = Rds::new(&deps.aws, &plan.regions.standby.region).await;
    let s_cw = CloudWatch::new(&deps.aws, &plan.regions.standby.region).await;
    let route53 = Route53::new(&deps.aws).await;
    let p_elb = Elbv2::new(&deps.aws, &plan.regions.primary.region).await;
    let s_elb = Elbv2::new(&deps.aws, &plan.regions.standby.region).await;
    let sources = Sources {
        probe: &deps.probe,
        health: &route53,
        p_rds: &p_rds,
        s_rds: &s_rds,
        s_lag: &s_cw,
        p_elb: &p_elb,
        s_elb: &s_elb,
    };
    let recheck = state.steps.contains_key("diagnosis");
    // How users meet the public name now, beside the diagnosis (the
    // report's read RTO is the first 200 from S among these observations).
    let control = handover::adapters::traffic::Route53Control::new(&deps.aws).await;
    let public = handover::public::PublicName {
        dns: &control,
        http: &deps.http,
    };
    let budget = std::time::Duration::from_millis(plan.detection.probe_timeout_ms);
    let by = if recheck { "re-check" } else { "diagnose" };
    let (mut diagnosis, seen) = tokio::join!(
        diagnose(plan, state.input.mode, &sources, Utc::now()),
        public.observe(plan, by, budget, Utc::now)
    );
    // Advisory text, after the rules have decided; it cannot fail the step.
    // The re-check after approval asks no model: nobody reads it then, and
    // every second there counts toward the RTO.
    if recheck {
        // After approval: every promote precondition, before the fence.
        let approval = state.require::<ApprovalResult>("approval").ok();
        let asked = state.require::<Diagnosis>("diagnosis").ok();
        gate_before_fence(plan, &mut diagnosis, approval.as_ref(), asked.as_ref());
    }
    if let Some(cfg) = plan.explain.as_ref().filter(|_| !recheck) {
        let model = Bedrock::new(&deps.aws, cfg.region(plan)).await;
        diagnosis.explanation = Some(explain(plan, cfg, &diagnosis, &model).await);
    }
    diagnosis.public = Some(seen);
    info!(
        incident = %state.input.incident_id,
        action = ?diagnosis.action,
        risk = ?diagnosis.risk,
        rule = %diagnosis.risk_rule,
        rpo_estimate_s = ?diagnosis.rpo_estimate_s,
        "diagnosed"
    );
    Ok(diagnosis)
}
