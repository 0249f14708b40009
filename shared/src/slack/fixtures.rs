//! Sample execution documents for unit tests of the Slack and approval code.

use crate::execution::{
    Action, Diagnosis, Evidence, ExecutionInput, ExecutionState, Hypothesis, RiskLevel, Side,
};
use crate::plan::Plan;
use chrono::{DateTime, TimeZone, Utc};

/// 2026-11-30 14:11:55 UTC: T0 of the sample incident.
pub(crate) fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 30, 14, 11, 55).unwrap()
}

pub(crate) fn plan() -> Plan {
    Plan::from_json(include_str!("../../../infra/plan.example.jsonc")).unwrap()
}

/// The execution document at RequestApproval, with a diagnosis of `lag_s`.
pub(crate) fn state(lag_s: Option<f64>) -> ExecutionState {
    let plan = plan();
    let input = ExecutionInput {
        incident_id: "shop-ap-northeast-2-20261130T141155Z".into(),
        drill: false,
        mode: crate::execution::Mode::Failover,
        t0: t0(),
        detected_at: t0() + chrono::Duration::minutes(2),
        primary: Side {
            region: plan.regions.primary.region.clone(),
            db_instance_id: plan.regions.primary.db_instance_id.clone(),
            epoch: Some(1),
        },
        standby: Side {
            region: plan.regions.standby.region.clone(),
            db_instance_id: plan.regions.standby.db_instance_id.clone(),
            epoch: None,
        },
        evidence: vec![],
        plan,
        failback: None,
    };
    let mut steps = serde_json::Map::new();
    steps.insert(
        "diagnosis".into(),
        serde_json::to_value(diagnosis(lag_s)).unwrap(),
    );
    ExecutionState { input, steps }
}

pub(crate) fn diagnosis(lag_s: Option<f64>) -> Diagnosis {
    let at = t0() + chrono::Duration::minutes(3);
    let over = lag_s.is_none_or(|l| !(0.0..=60.0).contains(&l));
    Diagnosis {
        observed_at: at,
        evidence: vec![
            Evidence {
                source: "rds:ap-northeast-1:DescribeDBInstances".into(),
                observation: "replica shop-db-replica status=available".into(),
                at,
                supports_p_down: None,
            },
            Evidence {
                source: "https:p.shop.example.com".into(),
                observation: "timed out after 3000 ms".into(),
                at,
                supports_p_down: Some(true),
            },
            Evidence {
                source: "rds:ap-northeast-2:DescribeDBInstances".into(),
                observation: "timed out after 5000 ms".into(),
                at,
                supports_p_down: Some(true),
            },
        ],
        hypotheses: vec![Hypothesis {
            id: "regional_outage".into(),
            title: "Regional outage in P".into(),
            evidence_for: vec!["timed out".into()],
            evidence_against: vec![],
            standing: "likely".into(),
        }],
        risk: if over {
            RiskLevel::High
        } else {
            RiskLevel::Low
        },
        risk_rule: if over {
            "replica lag over the RPO target".into()
        } else {
            "replica healthy, lag within target".into()
        },
        rpo_estimate_s: lag_s,
        rpo_target_s: 60,
        rpo_over_target: over,
        action: Action::FailOver,
        reasons: vec!["P's endpoint and database API time out".into()],
        summary: "P (ap-northeast-2) does not answer; the replica in ap-northeast-1 is healthy."
            .into(),
        explanation: None,
        public: None,
    }
}
