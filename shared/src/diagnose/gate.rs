//! The re-check's gate before the fence.
//!
//! Fencing P is cheap to do and expensive to leave in place: a fence that
//! promote then refuses leaves the service with no writer at all. So after
//! approval, the re-check applies every precondition promote will apply, to
//! what it sees now, and stops the run before the fence when one fails.
//! promote keeps its own checks (defence in depth).

use crate::execution::{Action, ApprovalResult, Diagnosis, RiskLevel};
use crate::plan::Plan;

/// The first promote precondition `d` (the re-check) shows failing, given
/// the approval the person gave; None when promotion would go ahead.
pub fn promote_blocker(
    plan: &Plan,
    d: &Diagnosis,
    approval: Option<&ApprovalResult>,
) -> Option<String> {
    if d.action != Action::FailOver {
        return None; // the choice stops the run anyway, with its own reason
    }
    let Some(approval) = approval else {
        return Some("the re-check found no approval in the run".into());
    };
    match d.rpo_estimate_s {
        None if !approval.data_loss_acknowledged => Some(format!(
            "no ReplicaLag sample for {} in the last 5 minutes and the approval did not accept an unknown data loss: promote would refuse after the fence",
            plan.regions.standby.db_instance_id
        )),
        None => None, // the approver accepted an unknown loss; promote records it as unknown
        Some(lag) if lag < 0.0 => Some("ReplicaLag is -1: replication has stopped".into()),
        Some(lag) if lag > plan.targets.rpo_s as f64 && !approval.data_loss_acknowledged => {
            Some(format!(
                "replica lag is now {lag:.0} s, over the RPO target {} s, and the approval did not accept data loss: ask again",
                plan.targets.rpo_s
            ))
        }
        _ => None,
    }
}

/// Apply the gate: a blocked re-check becomes an escalation whose summary
/// (the Aborted state's cause) says what stopped it before the fence.
pub fn gate_before_fence(plan: &Plan, d: &mut Diagnosis, approval: Option<&ApprovalResult>) {
    if let Some(reason) = promote_blocker(plan, d, approval) {
        d.action = Action::Escalate;
        d.risk = RiskLevel::Blocked;
        d.risk_rule = format!("promote_precondition: {reason}");
        d.reasons.push(reason.clone());
        d.summary = format!("{} Stopped before the fence: {reason}.", d.summary);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::execution::ExecutionState;

    /// A re-check's input as a drill recorded it: a fail-over diagnosis and
    /// an approval that accepted no data loss.
    fn recorded() -> (Plan, Diagnosis, ApprovalResult) {
        let v: serde_json::Value = serde_json::from_str(include_str!(
            "../../../functions/diagnose/events/recheck.json"
        ))
        .unwrap();
        let state = ExecutionState::from_event(v).unwrap();
        let d: Diagnosis = state.require("diagnosis").unwrap();
        let a: ApprovalResult = state.require("approval").unwrap();
        (state.input.plan, d, a)
    }

    #[test]
    fn a_healthy_recheck_goes_on_to_the_fence() {
        let (plan, mut d, a) = recorded();
        assert_eq!(d.action, Action::FailOver);
        gate_before_fence(&plan, &mut d, Some(&a));
        assert_eq!(d.action, Action::FailOver);
    }

    #[test]
    fn each_promote_precondition_stops_the_run_before_the_fence() {
        let (plan, d, a) = recorded();
        let over = plan.targets.rpo_s as f64 + 240.0;
        for (lag, ack, says) in [
            (None, false, "did not accept an unknown data loss"),
            (Some(-1.0), true, "replication has stopped"),
            (Some(over), false, "did not accept data loss"),
        ] {
            let mut d = d.clone();
            d.rpo_estimate_s = lag;
            let a = ApprovalResult {
                data_loss_acknowledged: ack,
                ..a.clone()
            };
            gate_before_fence(&plan, &mut d, Some(&a));
            assert_eq!(d.action, Action::Escalate, "{says}");
            assert_eq!(d.risk, RiskLevel::Blocked);
            assert!(
                d.summary.contains("Stopped before the fence"),
                "{}",
                d.summary
            );
            assert!(d.summary.contains(says), "{}", d.summary);
        }
        // Accepted data loss lets the same lag through, as promote would,
        // and an unknown lag too (the "accept unknown data loss" button).
        for lag in [Some(over), None] {
            let mut d = d.clone();
            d.rpo_estimate_s = lag;
            let a = ApprovalResult {
                data_loss_acknowledged: true,
                ..a.clone()
            };
            gate_before_fence(&plan, &mut d, Some(&a));
            assert_eq!(d.action, Action::FailOver, "{lag:?}");
        }
        // No approval at all: stop.
        let (plan, mut d, _) = recorded();
        gate_before_fence(&plan, &mut d, None);
        assert_eq!(d.action, Action::Escalate);
    }
}
