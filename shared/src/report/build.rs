//! Building the [`Report`] from the history facts and the post-checks.

use super::ReportError;
use super::analysis::{action_items, trigger_analysis};
use super::facts::RunFacts;
use super::milestones::milestones;
use super::model::*;
use super::numbers::{Basis, Steps, durations, numbers};
use super::postcheck::PostChecks;
use crate::execution::ExecutionInput;
use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use serde_json::Value;

/// The failback checklist, in order.
pub const FAILBACK: [&str; 6] = [
    "Keep P's own health check green (P-only endpoint, not the failover name) for a sustained period.",
    "Rebuild replication S → P (a new cross-Region read replica of the new primary in P).",
    "Wait until ReplicaLag ≈ 0.",
    "Verify rows and checksums between S and P (the writes made on S during the incident included).",
    "Switch back (promote P's replica with approval, repoint the writer, then release Handover's traffic lever: put back each value the switch recorded, e.g. P's health check to its recorded Inverted/Disabled settings, or the routing controls).",
    "Scale S back down to warm standby and restore S → P roles in the plan.",
];

/// What is left after a failback's switch back, in order.
pub const AFTER_FAILBACK: [&str; 4] = [
    "Run `handover reprotect`: S (the primary before) is fenced and standalone; until a new replica of P holds S's identifier, a failover has nowhere to go and detect can only page.",
    "Reconcile the writes the old P kept that S never got in the failover (its report's measured RPO, `handover rpo`), then delete the retired instance by hand: Handover never deletes one.",
    "Keep P's own health check green (P-only endpoint) and watch detect report P healthy.",
    "Scale S back down to warm standby.",
];

/// Parse the execution input from the history.
pub fn execution_input(facts: &RunFacts) -> Result<ExecutionInput, ReportError> {
    let text = facts.input.as_deref().ok_or(ReportError::NoInput)?;
    serde_json::from_str(text).map_err(ReportError::Input)
}

fn typed<T: DeserializeOwned>(
    facts: &RunFacts,
    key: &str,
    warnings: &mut Vec<String>,
) -> Option<T> {
    let v = facts.steps.get(key)?;
    match serde_json::from_value(v.clone()) {
        Ok(t) => Some(t),
        Err(e) => {
            warnings.push(format!(
                "$.{key} could not be read as the step's output: {e}"
            ));
            None
        }
    }
}

/// The typed step outputs (unreadable ones become warnings).
pub fn steps(facts: &RunFacts, warnings: &mut Vec<String>) -> Steps {
    Steps {
        diagnosis: typed(facts, "diagnosis", warnings),
        approval: typed(facts, "approval", warnings),
        recheck: typed(facts, "recheck", warnings),
        fence: typed(facts, "fence", warnings),
        promotion: typed(facts, "promotion", warnings),
        catch_up: typed(facts, "catch_up", warnings),
        first_write: typed(facts, "first_write", warnings),
        switch: typed(facts, "switch", warnings),
        verify: typed(facts, "verify", warnings),
    }
}

fn outcome(facts: &RunFacts) -> Outcome {
    match facts.terminal.as_ref().map(|t| t.kind.as_str()) {
        Some("ExecutionSucceeded") => Outcome::Succeeded,
        Some("ExecutionFailed") => Outcome::Failed,
        Some("ExecutionAborted") => Outcome::Aborted,
        Some("ExecutionTimedOut") => Outcome::TimedOut,
        _ => Outcome::Running,
    }
}

/// Build the report. `execution_arn` names the run; `now` decides pending vs miss.
pub fn build(
    execution_arn: &str,
    facts: &RunFacts,
    checks: &PostChecks,
    now: DateTime<Utc>,
) -> Result<Report, ReportError> {
    let input = execution_input(facts)?;
    let mut warnings = facts.warnings.clone();
    let steps = steps(facts, &mut warnings);
    let basis = Basis {
        input: &input,
        steps: &steps,
        facts,
        backup: checks
            .first_backup
            .as_ref()
            .map(|b| (b.at, b.source.clone())),
        now,
    };
    let numbers = numbers(&basis);
    let durations = durations(&basis);
    let (milestones, order_problems) = milestones(&basis);
    let outcome = outcome(facts);
    let stopped = stop_point(facts, outcome);
    let summary = summary(
        execution_arn,
        &input,
        &steps,
        facts,
        outcome,
        stopped.as_ref(),
    );
    let diagnosis = steps.recheck.as_ref().or(steps.diagnosis.as_ref());
    let action_items = action_items(&numbers, &durations, &checks.findings, stopped.as_ref());
    Ok(Report {
        schema: SCHEMA.into(),
        generated_at: now,
        summary,
        numbers,
        durations,
        milestones,
        order_problems,
        states: facts.states.clone(),
        stopped,
        hypotheses: diagnosis.map(|d| d.hypotheses.clone()).unwrap_or_default(),
        // The re-check asks no model: the explanation is the one the approver saw.
        explanation: steps.diagnosis.as_ref().and_then(|d| d.explanation.clone()),
        trigger_vs_root_cause: trigger_analysis(&input, diagnosis),
        findings: checks.findings.clone(),
        action_items,
        failback: if input.failback.is_some() {
            AFTER_FAILBACK.iter().map(|s| (*s).to_owned()).collect()
        } else {
            FAILBACK.iter().map(|s| (*s).to_owned()).collect()
        },
        observations: super::numbers::observations(&basis),
        rpo_measured: facts.measured_rpo.clone(),
        failback_run: input.failback.as_ref().map(|fb| FailbackSummary {
            undoes: fb.undoes.clone(),
            from_epoch: fb.from_epoch,
            reprotect: fb.reprotect.clone(),
            reprotect_s: fb
                .reprotect
                .started_at
                .map(|s| (fb.reprotect.ready_at - s).num_milliseconds() as f64 / 1000.0),
            data_check: fb.data_check.clone(),
        }),
        warnings,
    })
}

fn summary(
    arn: &str,
    input: &ExecutionInput,
    steps: &Steps,
    facts: &RunFacts,
    outcome: Outcome,
    stopped: Option<&StopPoint>,
) -> Summary {
    let result = match (outcome, stopped) {
        (_, Some(stop)) => stop.summary.clone(),
        (Outcome::Succeeded, None) => match facts.steps.get("outcome").and_then(Value::as_str) {
            // The FailedOver state ends both kinds of run.
            Some("failed_over") if input.failback.is_some() => format!(
                "failed back to {} with RPO 0: reads and writes verified",
                input.standby.region
            ),
            Some("failed_over") if input.mode == crate::execution::Mode::Switchover => format!(
                "switched over to {} with RPO 0: reads and writes verified",
                input.standby.region
            ),
            Some(o) => o.replace('_', " "),
            None if steps.first_write().is_some() => match input.mode {
                crate::execution::Mode::Failover => format!(
                    "failed over to {}: reads and writes verified",
                    input.standby.region
                ),
                crate::execution::Mode::Switchover => format!(
                    "switched over to {} with RPO 0: reads and writes verified",
                    input.standby.region
                ),
            },
            None => match steps
                .recheck
                .as_ref()
                .or(steps.diagnosis.as_ref())
                .map(|d| d.action)
            {
                Some(crate::execution::Action::Recovered) => {
                    "no failover: P recovered or was never down".into()
                }
                Some(crate::execution::Action::Escalate) => {
                    "no failover: escalated to people (no usable replica)".into()
                }
                _ => "ended without a failover".into(),
            },
        },
        (_, None) => "still running".into(),
    };
    Summary {
        service: input.plan.service.clone(),
        incident_id: input.incident_id.clone(),
        execution_arn: arn.to_owned(),
        outcome,
        result,
        mode: match (input.drill, input.mode, input.failback.is_some()) {
            (false, _, true) => "failback",
            (true, _, true) => "drill failback",
            (false, crate::execution::Mode::Failover, _) => "failover",
            (true, crate::execution::Mode::Failover, _) => "drill",
            (false, crate::execution::Mode::Switchover, _) => "switchover",
            (true, crate::execution::Mode::Switchover, _) => "drill switchover",
        }
        .into(),
        primary_region: input.primary.region.clone(),
        standby_region: input.standby.region.clone(),
        primary_db: input.primary.db_instance_id.clone(),
        standby_db: input.standby.db_instance_id.clone(),
        approved_by: steps
            .approval
            .as_ref()
            .map(|a| format!("{} ({})", a.approver_name, a.approver_id)),
        data_loss_acknowledged: steps
            .approval
            .as_ref()
            .is_some_and(|a| a.data_loss_acknowledged),
        t0: input.t0,
        started_at: facts.started_at,
        ended_at: facts.terminal.as_ref().map(|t| t.at),
        plan_version: input.plan.version.clone(),
        history_events: facts.event_count,
        last_readiness: facts.last_readiness_line.clone().or_else(|| {
            facts.readiness.as_ref().map(|r| {
                let m = (input.t0 - r.at).num_minutes();
                format!(
                    "{} ({}): {}",
                    r.at.format("%Y-%m-%d %H:%M:%S UTC"),
                    if m >= 0 {
                        format!("{m} min before T0")
                    } else {
                        format!("{} min after T0", -m)
                    },
                    r.age_line(r.at).trim_start_matches("0 min ago: ")
                )
            })
        }),
    }
}

fn stop_point(facts: &RunFacts, outcome: Outcome) -> Option<StopPoint> {
    if matches!(outcome, Outcome::Succeeded | Outcome::Running) {
        return None;
    }
    let terminal = facts.terminal.as_ref();
    let state = facts.stopped_in();
    let last_error = state.and_then(|s| s.errors.last());
    let error = terminal
        .and_then(|t| t.error.clone())
        .or_else(|| last_error.map(|e| e.error.clone()));
    let cause = terminal
        .and_then(|t| t.cause.clone())
        .or_else(|| last_error.and_then(|e| e.cause.clone()));
    let verb = match outcome {
        Outcome::Failed => "failed",
        Outcome::Aborted => "was aborted",
        _ => "timed out",
    };
    let name = state.map(|s| s.name.clone());
    let mut summary = format!("the run {verb}");
    if let Some(n) = &name {
        summary.push_str(&format!(" in state {n}"));
    }
    if let Some(e) = &error {
        summary.push_str(&format!(" with {e}"));
    }
    if let Some(c) = &cause {
        let short: String = c.chars().take(300).collect();
        summary.push_str(&format!(": {short}"));
    }
    Some(StopPoint {
        state: name,
        outcome,
        error,
        cause,
        at: terminal.map(|t| t.at),
        summary,
    })
}
