//! Parse the execution document, snapshot both sides, assess.

use chrono::Utc;
use handover::adapters::{CloudWatch, HttpProbe, Rds, Route53};
use handover::aws::Aws;
use handover::diagnose::{Sources, diagnose};
use handover::error::{ErrorName, FunctionError};
use handover::execution::{Diagnosis, ExecutionState};
use tracing::info;

/// Built once per container. Regions come from the plan in each input, so
/// clients are made per call from the cached per-Region configs.
pub struct Deps {
    aws: Aws,
    probe: HttpProbe,
}

impl Deps {
    /// Nothing to read from the environment but the SDK's own settings.
    pub fn new() -> Result<Self, FunctionError> {
        Ok(Deps {
            aws: Aws::new(),
            probe: HttpProbe::new()
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
    let sources = Sources {
        probe: &deps.probe,
        health: &route53,
        p_rds: &p_rds,
        s_rds: &s_rds,
        s_lag: &s_cw,
    };
    let diagnosis = diagnose(plan, &sources, Utc::now()).await;
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

#[cfg(test)]
mod tests {
    use super::*;
    use handover::execution::{Action, RiskLevel};
    use handover::plan::Plan;
    use handover_testkit::app::App;
    use handover_testkit::world::{provision_databases, put_replica_lag, run_input, unique_plan};
    use handover_testkit::{aws, control};
    use serde_json::json;

    struct World {
        plan: Plan,
        _p: App,
        _s: App,
    }

    /// P's app answers `p_status`; both databases exist; S's lag is `lag`.
    async fn world(p_status: u16, p_health: bool, lag: Option<f64>) -> World {
        let aws = aws();
        let p = App::start(p_status).await;
        let s = App::start(200).await;
        let mut plan = unique_plan();
        plan.regions.primary.endpoint = format!("{}/health", p.url);
        plan.regions.standby.endpoint = format!("{}/health", s.url);
        control(
            "health",
            json!({ &plan.regions.primary.health_check_id: p_health, &plan.regions.standby.health_check_id: true }),
        )
        .await;
        provision_databases(&aws, &plan).await;
        if let Some(lag) = lag {
            put_replica_lag(
                &aws,
                &plan.regions.standby.region,
                &plan.regions.standby.db_instance_id,
                lag,
                Utc::now(),
            )
            .await;
        }
        World { plan, _p: p, _s: s }
    }

    fn input(plan: &Plan) -> serde_json::Value {
        serde_json::to_value(run_input(plan, "shop-ap-northeast-2-20261130T141155Z")).unwrap()
    }

    async fn run(w: &World) -> Diagnosis {
        handler(input(&w.plan), &Deps::new().unwrap())
            .await
            .unwrap()
    }

    async fn p_rds_unreachable(w: &World) {
        // P's RDS API times out: the router holds the request past the budget.
        control("faults", json!({ format!("rds:{}", w.plan.regions.primary.region): {"mode": "timeout", "seconds": 3} }))
            .await;
    }

    async fn clear_faults(w: &World) {
        control(
            "faults",
            json!({ format!("rds:{}", w.plan.regions.primary.region): null }),
        )
        .await;
    }

    #[tokio::test]
    async fn diagnose_scenarios_against_moto() {
        // Scenarios share the router's fault table, so they run in sequence.
        // 1. Healthy replica with lag 5 s → fail over, low risk.
        let w = world(503, false, Some(5.0)).await;
        p_rds_unreachable(&w).await;
        let d = run(&w).await;
        clear_faults(&w).await;
        assert_eq!(d.action, Action::FailOver, "{d:#?}");
        assert_eq!(d.risk, RiskLevel::Low, "{}", d.risk_rule);
        assert_eq!(d.rpo_estimate_s, Some(5.0));
        assert!(!d.rpo_over_target);
        let p_db = d
            .evidence
            .iter()
            .find(|e| e.source.starts_with("rds:ap-northeast-2"))
            .unwrap();
        assert!(
            p_db.observation.contains("timed out"),
            "{}",
            p_db.observation
        );

        // 2. Lag 300 s → RPO over target, acknowledgement required.
        let w = world(503, false, Some(300.0)).await;
        p_rds_unreachable(&w).await;
        let d = run(&w).await;
        clear_faults(&w).await;
        assert_eq!(d.action, Action::FailOver);
        assert_eq!(d.risk, RiskLevel::High);
        assert!(d.rpo_over_target);
        assert!(
            d.reasons.iter().any(|r| r.contains("acknowledge")),
            "{:?}",
            d.reasons
        );

        // 3. Lag -1 → blocked.
        let w = world(503, false, Some(-1.0)).await;
        let d = run(&w).await;
        assert_eq!(d.action, Action::Escalate);
        assert_eq!(d.risk, RiskLevel::Blocked);

        // 4. P's database API answering and healthy, only the app down.
        let w = world(503, false, Some(5.0)).await;
        let d = run(&w).await;
        let app = d
            .hypotheses
            .iter()
            .find(|h| h.id == "application_failure")
            .unwrap();
        let region = d
            .hypotheses
            .iter()
            .find(|h| h.id == "regional_outage")
            .unwrap();
        assert_eq!(app.standing, "likely", "{app:?}");
        assert_ne!(region.standing, "likely", "{region:?}");
        assert_eq!(d.risk, RiskLevel::Medium, "{}", d.risk_rule);

        // 5. P answers again → recovered.
        let w = world(200, true, Some(5.0)).await;
        let d = run(&w).await;
        assert_eq!(d.action, Action::Recovered);
    }

    #[tokio::test]
    async fn a_missing_replica_is_blocked() {
        let aws = aws();
        let mut plan = unique_plan();
        let p = App::start(503).await;
        plan.regions.primary.endpoint = format!("{}/health", p.url);
        plan.regions.standby.endpoint = format!("{}/health", p.url);
        control(
            "health",
            json!({ &plan.regions.primary.health_check_id: false }),
        )
        .await;
        let _ = aws; // nothing provisioned: neither DB exists
        let d = handler(input(&plan), &Deps::new().unwrap()).await.unwrap();
        assert_eq!(d.action, Action::Escalate);
        assert!(d.risk_rule.contains("no replica"), "{}", d.risk_rule);
    }

    #[tokio::test]
    async fn malformed_input_is_invalid_input() {
        let deps = Deps::new().unwrap();
        for bad in [json!({}), json!({"incident_id": 5}), json!("x")] {
            let err = handler(bad, &deps).await.unwrap_err();
            assert_eq!(err.name, ErrorName::InvalidInput);
        }
        let mut doc = input(&unique_plan());
        doc["plan"]["regions"]["standby"]
            .as_object_mut()
            .unwrap()
            .remove("db_instance_id");
        let err = handler(doc, &deps).await.unwrap_err();
        assert_eq!(err.name, ErrorName::InvalidInput);
        assert!(
            err.message.contains("plan.regions.standby"),
            "{}",
            err.message
        );
    }
}
