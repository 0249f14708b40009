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
    asked: Option<&Diagnosis>,
) -> Option<String> {
    if d.action != Action::FailOver {
        return None; // the choice stops the run anyway, with its own reason
    }
    let Some(approval) = approval else {
        return Some("the re-check found no approval in the run".into());
    };
    loss_blocker(plan, d.rpo_estimate_s, approval, asked, d.observed_at)
        .map(|r| format!("{r}: promote would refuse after the fence"))
}

/// What a lag of `lag` seconds (None: no sample) at `now` needs from the
/// approval, given the estimate the approval request showed (`asked`):
/// None when promotion may go ahead.
///
/// - Within the RPO target: nothing.
/// - Unknown (no sample): an approval that accepted an unknown loss. An
///   approver who accepted "up to 120 s" did not accept an unknown one.
/// - Over the target: an approval that accepted data loss, and no more than
///   what it was shown, grown by the time since (a stalled replica's lag
///   grows with the clock) plus a minute. An approval of an unknown loss
///   accepts any.
/// - ReplicaLag -1 (replication stopped): never.
pub fn loss_blocker(
    plan: &Plan,
    lag: Option<f64>,
    approval: &ApprovalResult,
    asked: Option<&Diagnosis>,
    now: chrono::DateTime<chrono::Utc>,
) -> Option<String> {
    let target = plan.targets.rpo_s as f64;
    let ack = approval.data_loss_acknowledged;
    let shown = asked.and_then(|d| d.rpo_estimate_s).filter(|s| *s >= 0.0);
    match lag {
        Some(l) if l < 0.0 => Some("ReplicaLag is -1: replication has stopped".into()),
        Some(l) if l <= target => None,
        None if !ack => Some(format!(
            "no ReplicaLag sample for {} in the last 5 minutes and the approval did not accept an unknown data loss",
            plan.regions.standby.db_instance_id
        )),
        // None shown: an unknown loss was accepted.
        None => shown.map(|s| {
            format!(
                "no ReplicaLag sample for {} in the last 5 minutes, and the approval accepted up to {s:.0} s, not an unknown loss: ask again",
                plan.regions.standby.db_instance_id
            )
        }),
        Some(l) if !ack => Some(format!(
            "replica lag is now {l:.0} s, over the RPO target {target:.0} s, and the approval did not accept data loss: ask again"
        )),
        Some(l) => {
            let Some(s) = shown else {
                return None; // an unknown loss was accepted
            };
            let since = asked.map_or(0.0, |d| {
                ((now - d.observed_at).num_milliseconds() as f64 / 1000.0).max(0.0)
            });
            let bound = s.max(target) + since + 60.0;
            (l > bound).then(|| {
                format!(
                    "replica lag is now {l:.0} s; the approval accepted up to {s:.0} s when it was asked {since:.0} s ago (at most {bound:.0} s now): ask again"
                )
            })
        }
    }
}

/// Apply the gate: a blocked re-check becomes an escalation whose summary
/// (the Aborted state's cause) says what stopped it before the fence.
pub fn gate_before_fence(
    plan: &Plan,
    d: &mut Diagnosis,
    approval: Option<&ApprovalResult>,
    asked: Option<&Diagnosis>,
) {
    if let Some(reason) = promote_blocker(plan, d, approval, asked) {
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
        let asked = d.clone();
        gate_before_fence(&plan, &mut d, Some(&a), Some(&asked));
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
            let asked = d.clone();
            gate_before_fence(&plan, &mut d, Some(&a), Some(&asked));
            assert_eq!(d.action, Action::Escalate, "{says}");
            assert_eq!(d.risk, RiskLevel::Blocked);
            assert!(
                d.summary.contains("Stopped before the fence"),
                "{}",
                d.summary
            );
            assert!(d.summary.contains(says), "{}", d.summary);
        }
        // Accepted data loss lets through what the approver was shown, and
        // an accepted unknown loss lets anything through (the "accept
        // unknown data loss" button).
        let acked = ApprovalResult {
            data_loss_acknowledged: true,
            ..a.clone()
        };
        for (shown, now) in [
            (Some(over), Some(over)),
            (None, None),
            (None, Some(3.0 * over)),
        ] {
            let mut asked = d.clone();
            asked.rpo_estimate_s = shown;
            let mut d = d.clone();
            d.rpo_estimate_s = now;
            gate_before_fence(&plan, &mut d, Some(&acked), Some(&asked));
            assert_eq!(d.action, Action::FailOver, "shown {shown:?}, now {now:?}");
        }
        // What the approver accepted bounds it (issue 12, review): 120 s
        // shown, 500 s now, or no sample now, is asked again.
        for (now, says) in [
            (Some(500.0), "accepted up to 120 s"),
            (None, "not an unknown loss"),
        ] {
            let mut asked = d.clone();
            asked.rpo_estimate_s = Some(120.0);
            let mut d = d.clone();
            d.rpo_estimate_s = now;
            gate_before_fence(&plan, &mut d, Some(&acked), Some(&asked));
            assert_eq!(d.action, Action::Escalate, "{says}");
            assert!(d.summary.contains(says), "{}", d.summary);
        }
        // The shown estimate grows with the time since it was asked: a
        // stalled replica's lag grows with the clock, its loss does not.
        let mut asked = d.clone();
        asked.rpo_estimate_s = Some(120.0);
        let mut later = d.clone();
        later.observed_at = asked.observed_at + chrono::Duration::seconds(600);
        later.rpo_estimate_s = Some(700.0);
        gate_before_fence(&plan, &mut later, Some(&acked), Some(&asked));
        assert_eq!(later.action, Action::FailOver, "{}", later.summary);
        // No approval at all: stop.
        let (plan, mut d, _) = recorded();
        gate_before_fence(&plan, &mut d, None, None);
        assert_eq!(d.action, Action::Escalate);
    }
}
