//! The report model: what `report.json` holds (schema `handover.report/v1`).
//!
//! | field | what |
//! |---|---|
//! | `schema` | `handover.report/v1`; a breaking change bumps the version |
//! | `generated_at` | when the report was built (decides pass/miss/pending of points not yet reached) |
//! | `summary` | outcome, mode, Regions, incident, execution, approver, plan version |
//! | `numbers` | read RTO, write RTO, conservative RTO and RPO, each a [`Measure`] against its target |
//! | `durations` | further [`Span`]s: detection delay, time to ask, human decision, approval → promotion call, promotion, write-unavailable window, automation overhead, total |
//! | `milestones` | T0 … ended, in the expected order, each with `t_plus_s` and whether it is in order |
//! | `order_problems` | milestones earlier than one that should precede them, in words |
//! | `states` | every state visit: entered, exited, duration, attempts, retries, errors |
//! | `stopped` | for failed, aborted and timed-out runs: the state, error and cause |
//! | `hypotheses` | diagnose's hypotheses (the re-check's when it ran), with evidence for and against |
//! | `explanation` | the advisory AI explanation the approver saw, or why there was none (absent when not configured) |
//! | `trigger_vs_root_cause` | what triggered the run, candidate causes, co-symptoms; the verdict is left to people |
//! | `findings` | post-check results, each with severity and evidence |
//! | `action_items` | one per missed target and per finding of severity warning or above |
//! | `failback` | the failback checklist |
//! | `failback_run` | a failback's switch back: the run it undoes, re-protection, the data check |
//! | `warnings` | problems reading the history (kept so nothing is silently lost) |
//!
//! Times are RFC 3339 UTC; durations are seconds (`_s`), `null` when unknown.

use super::facts::StateRun;
use crate::execution::{Explanation, Hypothesis};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// The schema id written into every report.
pub const SCHEMA: &str = "handover.report/v1";

/// The after-action report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// [`SCHEMA`].
    pub schema: String,
    /// When the report was built.
    pub generated_at: DateTime<Utc>,
    /// Who, what, where, how it ended.
    pub summary: Summary,
    /// The four numbers.
    pub numbers: Numbers,
    /// Further durations.
    pub durations: Vec<Span>,
    /// Milestones in the expected order.
    pub milestones: Vec<Milestone>,
    /// Milestones out of order, in words.
    pub order_problems: Vec<String>,
    /// Every state visit.
    pub states: Vec<StateRun>,
    /// Where a run that did not succeed stopped.
    pub stopped: Option<StopPoint>,
    /// Hypotheses with evidence.
    pub hypotheses: Vec<Hypothesis>,
    /// The advisory AI explanation shown with the approval request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub explanation: Option<Explanation>,
    /// Trigger vs root cause.
    pub trigger_vs_root_cause: TriggerAnalysis,
    /// Post-check findings.
    pub findings: Vec<Finding>,
    /// Action items.
    pub action_items: Vec<ActionItem>,
    /// Failback checklist.
    pub failback: Vec<String>,
    /// The public name as users met it, from T0 on: detect's ticks, the
    /// diagnosis, the re-check and verify's read, in time order.
    #[serde(default)]
    pub observations: Vec<crate::public::PublicObservation>,
    /// The data S never got, measured on both databases after the run
    /// (`handover rpo`); `numbers.rpo` then gives it next to the estimate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rpo_measured: Option<crate::failover::rpo::MeasuredRpo>,
    /// A failback's switch back: the failover it undoes, re-protection and
    /// the data check `handover failback` ran before it started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failback_run: Option<FailbackSummary>,
    /// Problems reading the history.
    pub warnings: Vec<String>,
}

/// What a failback did before its switch back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FailbackSummary {
    /// The failover (or switchover) it undoes.
    pub undoes: Option<String>,
    /// The epoch that run left.
    pub from_epoch: i64,
    /// P's new replica, the old P kept under its new name, and the time
    /// re-protection took (`None`: the replica existed already).
    pub reprotect: crate::execution::Reprotection,
    /// Seconds from re-protection's start to the replica caught up.
    pub reprotect_s: Option<f64>,
    /// Row counts and checksums on both sides.
    pub data_check: crate::execution::DataCheck,
}

/// Execution outcome (the terminal status).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Outcome {
    /// ExecutionSucceeded.
    Succeeded,
    /// ExecutionFailed.
    Failed,
    /// ExecutionAborted.
    Aborted,
    /// ExecutionTimedOut.
    TimedOut,
    /// No terminal event yet.
    Running,
}

impl Outcome {
    /// `SUCCEEDED`, `FAILED`, …
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Succeeded => "SUCCEEDED",
            Outcome::Failed => "FAILED",
            Outcome::Aborted => "ABORTED",
            Outcome::TimedOut => "TIMED_OUT",
            Outcome::Running => "RUNNING",
        }
    }
}

/// Summary section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Protected service.
    pub service: String,
    /// Incident id.
    pub incident_id: String,
    /// Execution ARN.
    pub execution_arn: String,
    /// Terminal status.
    pub outcome: Outcome,
    /// What the run achieved, in words (`failed over`, `rejected by …`, `P recovered`, …).
    pub result: String,
    /// `failover`, `drill`, `switchover` or `drill switchover`.
    pub mode: String,
    /// Region P.
    pub primary_region: String,
    /// Region S.
    pub standby_region: String,
    /// P's database.
    pub primary_db: String,
    /// S's database.
    pub standby_db: String,
    /// Who approved, if anyone (`name (user id)`).
    pub approved_by: Option<String>,
    /// The approval acknowledged data loss over the RPO target.
    pub data_loss_acknowledged: bool,
    /// T0: first failing probe.
    pub t0: DateTime<Utc>,
    /// Execution start.
    pub started_at: Option<DateTime<Utc>>,
    /// Execution end.
    pub ended_at: Option<DateTime<Utc>>,
    /// Plan version that ran.
    pub plan_version: String,
    /// History events read.
    pub history_events: usize,
    /// The last readiness result when the report was written, with its
    /// time against T0 (None: readiness never ran).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_readiness: Option<String>,
}

/// pass / miss / pending.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Within the target.
    Pass,
    /// Over the target (or not reached while the target already passed).
    Miss,
    /// Not reached yet, and the target has not passed yet: it will still happen.
    Pending,
    /// The run ended without reaching it (the measure says why).
    NotReached,
    /// Does not apply to this run (e.g. RPO when nothing was promoted).
    NotApplicable,
}

impl Status {
    /// `pass`, `miss`, `pending`, `n/a`.
    pub fn label(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Miss => "miss",
            Status::Pending => "pending",
            Status::NotReached => "not reached",
            Status::NotApplicable => "n/a",
        }
    }
}

/// One of the four numbers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measure {
    /// `read_rto`, `write_rto`, `conservative_rto`, `rpo`.
    pub key: String,
    /// Display name.
    pub label: String,
    /// The value, seconds (`None` when not reached).
    pub value_s: Option<f64>,
    /// The target, seconds.
    pub target_s: u64,
    /// Verdict.
    pub status: Status,
    /// How it was computed, in words, with the source of each end.
    pub how: String,
    /// Start point (T0 for the RTOs).
    pub from_at: Option<DateTime<Utc>>,
    /// End point.
    pub to_at: Option<DateTime<Utc>>,
}

/// The four numbers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Numbers {
    /// T0 → first 200 from S.
    pub read_rto: Measure,
    /// T0 → first successful write.
    pub write_rto: Measure,
    /// T0 → first completed backup of the new primary.
    pub conservative_rto: Measure,
    /// Replica lag at promotion.
    pub rpo: Measure,
}

impl Numbers {
    /// The four, in display order.
    pub fn all(&self) -> [&Measure; 4] {
        [
            &self.read_rto,
            &self.write_rto,
            &self.conservative_rto,
            &self.rpo,
        ]
    }
}

/// A further duration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Span {
    /// Stable key, e.g. `write_unavailable`.
    pub key: String,
    /// Display name.
    pub label: String,
    /// Seconds (`None` when an end is unknown).
    pub value_s: Option<f64>,
    /// How it was computed.
    pub how: String,
}

/// Milestone keys, in the order they are expected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MilestoneKey {
    /// First failing probe.
    T0,
    /// detect decided to fail over.
    Detected,
    /// Execution started.
    ExecutionStarted,
    /// diagnose's snapshot.
    Diagnosed,
    /// The Slack question went out.
    ApprovalRequested,
    /// A person decided.
    Decided,
    /// Old primary fenced.
    Fenced,
    /// Promotion call accepted.
    PromotionStarted,
    /// Promotion seen complete.
    Promoted,
    /// Traffic and writers point at S.
    Switched,
    /// First 200 from S.
    FirstRead,
    /// First successful write.
    FirstWrite,
    /// First backup of the new primary done.
    BackupDone,
    /// Execution ended.
    Ended,
}

/// One milestone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Milestone {
    /// Which.
    pub key: MilestoneKey,
    /// Display name.
    pub label: String,
    /// When (`None`: not reached).
    pub at: Option<DateTime<Utc>>,
    /// Seconds after T0.
    pub t_plus_s: Option<f64>,
    /// Where the time comes from, e.g. `$.verify.write.first_success_at`.
    pub source: String,
    /// Not earlier than every milestone that should precede it.
    pub in_order: bool,
}

/// Where a run stopped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StopPoint {
    /// The state that failed (or was running at the end).
    pub state: Option<String>,
    /// The terminal status.
    pub outcome: Outcome,
    /// Error name.
    pub error: Option<String>,
    /// Cause.
    pub cause: Option<String>,
    /// When the run ended.
    pub at: Option<DateTime<Utc>>,
    /// In words.
    pub summary: String,
}

/// Trigger vs root cause.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TriggerAnalysis {
    /// What triggered the run (detect's failing signals at the threshold).
    pub trigger: Vec<String>,
    /// Candidate structural causes (hypotheses not ruled out), strongest first.
    pub candidates: Vec<String>,
    /// Observations that came with the failure (co-symptoms, not causes).
    pub co_symptoms: Vec<String>,
    /// The verdict: always left to people.
    pub verdict: String,
}

/// Finding severity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// Checked, nothing wrong.
    Ok,
    /// Worth knowing.
    Info,
    /// Needs attention.
    Warning,
    /// Act now (data at risk, no backups, split-brain).
    Critical,
}

/// One post-check result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// Check id: `split_brain`, `backups`, `replication`, `dependency`, `secret_username`, `alarm_region`.
    pub check: String,
    /// Severity.
    pub severity: Severity,
    /// One line.
    pub title: String,
    /// What was observed.
    pub evidence: Vec<String>,
    /// What to do (for warning and critical).
    pub action: Option<String>,
}

/// One action item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ActionItem {
    /// What to do.
    pub title: String,
    /// Why: the missed target or finding.
    pub because: String,
    /// `target:<key>` or `finding:<check>`.
    pub source: String,
}

/// A finding of `check`, with its evidence and what to do.
pub(crate) fn finding(
    check: &str,
    severity: Severity,
    title: impl Into<String>,
    evidence: Vec<String>,
    action: Option<&str>,
) -> Finding {
    Finding {
        check: check.into(),
        severity,
        title: title.into(),
        evidence,
        action: action.map(str::to_owned),
    }
}
