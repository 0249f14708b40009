//! The execution document: what `detect` starts a run with, and what each
//! step adds under its own key (`ResultPath`). Every task receives the whole
//! document and returns only its own part.
//!
//! ```text
//! { incident_id, drill, t0, detected_at, primary, standby, evidence, plan,   <- detect
//!   diagnosis,                                                               <- Diagnose
//!   approval,                                                                <- RequestApproval (task token)
//!   recheck,                                                                 <- Recheck (diagnose again)
//!   fence, promotion, switch, verify }                                       <- the failover steps
//! ```

use crate::plan::Plan;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The execution input `detect` builds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExecutionInput {
    /// Incident id; also the execution name.
    pub incident_id: String,
    /// A drill (exercise) rather than a real failover.
    #[serde(default)]
    pub drill: bool,
    /// What the run does: a failover (detect's) or a planned switchover
    /// (an operator's, `handover switchover`).
    #[serde(default)]
    pub mode: Mode,
    /// First failing probe of the run.
    pub t0: DateTime<Utc>,
    /// When detect decided to fail over.
    pub detected_at: DateTime<Utc>,
    /// The side that is down, as the primary record named it.
    pub primary: Side,
    /// The side to fail over to.
    pub standby: Side,
    /// Evidence of every failing tick (JSON documents from detect).
    #[serde(default)]
    pub evidence: Vec<Value>,
    /// The plan that runs, snapshotted at detection.
    pub plan: Plan,
    /// Set when this run is a failback's switch back (`handover failback`):
    /// a planned switchover in the reversed plan (S is `primary`, P
    /// `standby`), after re-protection and the data check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failback: Option<FailbackRun>,
}

/// What `handover failback` did before it started the switch back, and
/// what the switch back must restore.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FailbackRun {
    /// The run that moved the primary to S (the record's last execution).
    pub undoes: Option<String>,
    /// The epoch the failover left (the switch back moves it one on).
    pub from_epoch: i64,
    /// Re-protection: P's new replica of S.
    pub reprotect: Reprotection,
    /// The data check between S and P's new replica.
    pub data_check: DataCheck,
    /// What switch replaced at the failover (`what` -> the value before):
    /// the switch back puts these back.
    pub restore: std::collections::BTreeMap<String, Option<String>>,
}

/// P's new replica of S (CreateDBInstanceReadReplica in P's Region).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reprotection {
    /// The replica (P's identifier).
    pub replica_id: String,
    /// The old P, renamed and kept (never deleted by Handover); `None`
    /// when P's identifier was free.
    pub retired_id: Option<String>,
    /// When re-protection began (`None`: the replica already existed).
    pub started_at: Option<DateTime<Utc>>,
    /// When the replica was available and caught up.
    pub ready_at: DateTime<Utc>,
    /// ReplicaLag then, seconds.
    pub lag_s: Option<f64>,
}

/// Row counts and checksums of the compared tables on both sides.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DataCheck {
    /// One entry per table.
    pub tables: Vec<TableCheck>,
    /// When it was taken.
    pub checked_at: DateTime<Utc>,
    /// How each side was reached.
    pub read_from: String,
}

impl DataCheck {
    /// Every table matched.
    pub fn matches(&self) -> bool {
        !self.tables.is_empty() && self.tables.iter().all(|t| t.matches())
    }
}

/// One table on both sides, up to the same key bound.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableCheck {
    /// `database.table`.
    pub table: String,
    /// Rows compared: those whose key is at most this (the replica's
    /// highest when read; `None`: the table is empty there).
    pub key_bound: Option<String>,
    /// Rows on S up to the bound.
    pub s_rows: i64,
    /// Rows on P's replica up to the bound.
    pub p_rows: i64,
    /// Checksum of those rows on S: the sum of each row's md5 (its first
    /// 64 bits), so it streams in constant memory whatever the table's size.
    pub s_checksum: String,
    /// The same on P's replica.
    pub p_checksum: String,
}

impl TableCheck {
    /// Same rows, same checksum.
    pub fn matches(&self) -> bool {
        self.s_rows == self.p_rows && self.s_checksum == self.p_checksum
    }
}

/// What a run does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// P is failing: move to S, accepting the loss the approver accepted.
    #[default]
    Failover,
    /// P is healthy: stop its writes, wait until S has replayed all of
    /// them, then move (RPO 0, or no move at all).
    Switchover,
}

impl Mode {
    /// `failover` / `switchover`.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Failover => "failover",
            Mode::Switchover => "switchover",
        }
    }
    /// "Failover" / "Planned switchover", for people.
    pub fn title(self) -> &'static str {
        match self {
            Mode::Failover => "Failover",
            Mode::Switchover => "Planned switchover",
        }
    }
}

/// One side of the failover.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Side {
    /// AWS Region.
    pub region: String,
    /// Database identifier.
    pub db_instance_id: String,
    /// Epoch of the primary record when the run started (primary side only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epoch: Option<i64>,
}

/// The execution document as a task receives it: the input plus what
/// earlier steps added. Unknown keys are kept, so a step never drops another's output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExecutionState {
    /// What detect started the run with.
    #[serde(flatten)]
    pub input: ExecutionInput,
    /// Step outputs, by key.
    #[serde(flatten)]
    pub steps: serde_json::Map<String, Value>,
}

impl ExecutionState {
    /// Parse a task's event. The plan is validated first, so a bad plan
    /// names its field (`plan.regions.standby.db_instance_id: missing`).
    pub fn from_event(event: Value) -> Result<Self, crate::error::FunctionError> {
        match event.get("plan") {
            Some(plan) => {
                Plan::from_value(plan.clone())?;
            }
            None if event.is_object() => {
                return Err(crate::error::FunctionError::invalid_input(
                    "execution document: missing field `plan`",
                ));
            }
            None => {}
        }
        crate::error::parse_event("execution document", event)
    }

    /// The output a step stored under `key`, typed.
    pub fn step<T: serde::de::DeserializeOwned>(
        &self,
        key: &str,
    ) -> Result<Option<T>, crate::error::FunctionError> {
        match self.steps.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => crate::error::parse_event(&format!("$.{key}"), v.clone()).map(Some),
        }
    }

    /// Like [`Self::step`], but the step must have run.
    pub fn require<T: serde::de::DeserializeOwned>(
        &self,
        key: &str,
    ) -> Result<T, crate::error::FunctionError> {
        self.step(key)?.ok_or_else(|| {
            crate::error::FunctionError::invalid_input(format!(
                "$.{key}: missing (the step that writes it has not run)"
            ))
        })
    }
}

/// The Payload of the failover tasks: `{"execution.$": "$$.Execution.Id", "state.$": "$"}`
/// (plus `"mode"` for promote's start / status).
#[derive(Debug, Clone, PartialEq)]
pub struct TaskInput {
    /// Execution ARN: the identity that holds the transition.
    pub execution: String,
    /// The execution document.
    pub state: ExecutionState,
    /// Optional mode (`start` / `status`).
    pub mode: Option<String>,
}

impl TaskInput {
    /// Parse a task Payload; every problem is `Handover.InvalidInput` naming the field.
    pub fn from_event(mut event: Value) -> Result<Self, crate::error::FunctionError> {
        let invalid = crate::error::FunctionError::invalid_input;
        let obj = event.as_object_mut().ok_or_else(|| {
            invalid("task payload: expected an object with `execution` and `state`")
        })?;
        let execution = match obj.remove("execution") {
            Some(Value::String(s)) if !s.is_empty() => s,
            Some(_) => {
                return Err(invalid(
                    "task payload: `execution` must be a non-empty string",
                ));
            }
            None => return Err(invalid("task payload: missing field `execution`")),
        };
        let mode = match obj.remove("mode") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s),
            Some(_) => return Err(invalid("task payload: `mode` must be a string")),
        };
        let state = obj
            .remove("state")
            .ok_or_else(|| invalid("task payload: missing field `state`"))?;
        Ok(TaskInput {
            execution,
            state: ExecutionState::from_event(state)?,
            mode,
        })
    }
}

/// The decision the `slack` function sends back with SendTaskSuccess; it
/// lands at `$.approval`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalResult {
    /// `approve` (a reject is sent as SendTaskFailure `Handover.Rejected`).
    pub decision: crate::store::approval::Decision,
    /// Slack user id of the approver.
    pub approver_id: String,
    /// Their name from the plan's allow-list.
    pub approver_name: String,
    /// When they clicked.
    pub decided_at: DateTime<Utc>,
    /// When the question was asked.
    pub requested_at: DateTime<Utc>,
    /// The button they clicked acknowledged possible data loss (RPO over target).
    pub data_loss_acknowledged: bool,
}

/// One observation, from diagnose or detect.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    /// Where it came from, e.g. `rds:ap-northeast-2:DescribeDBInstances`.
    pub source: String,
    /// What was seen, in words, e.g. `status=available` or `timed out after 5000 ms`.
    pub observation: String,
    /// When.
    pub at: DateTime<Utc>,
    /// Does it support "P is down"? `None` when it says nothing either way.
    pub supports_p_down: Option<bool>,
}

/// A hypothesis with evidence for and against (indices into `evidence` are
/// avoided: moto's JSONPath mishandles arrays, so the texts are copied).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hypothesis {
    /// Stable id, e.g. `regional_outage`.
    pub id: String,
    /// Title, e.g. "Regional outage in P".
    pub title: String,
    /// Evidence that supports it.
    pub evidence_for: Vec<String>,
    /// Evidence that speaks against it.
    pub evidence_against: Vec<String>,
    /// `likely`, `possible` or `unlikely`, from the counts.
    pub standing: String,
}

/// Risk levels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RiskLevel {
    /// Healthy replica, small lag.
    Low,
    /// Something is off but failover is sound.
    Medium,
    /// Failover will lose data over the target or has unknowns.
    High,
    /// Failover is impossible (no usable replica).
    Blocked,
}

/// What the deterministic rules recommend. The state machine's Choice reads
/// only `action` (never any AI text).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// P is down and S can take over: ask a person.
    FailOver,
    /// P answers again (or never was down): do nothing.
    Recovered,
    /// No usable replica: a person must act.
    Escalate,
    /// A planned switchover may go ahead: P is healthy and S replicates it.
    SwitchOver,
}

/// diagnose's output, at `$.diagnosis` (and `$.recheck` after approval).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Diagnosis {
    /// When the snapshot was taken.
    pub observed_at: DateTime<Utc>,
    /// Everything observed.
    pub evidence: Vec<Evidence>,
    /// Hypotheses with evidence for and against.
    pub hypotheses: Vec<Hypothesis>,
    /// Risk level.
    pub risk: RiskLevel,
    /// The rule that set the risk, in words.
    pub risk_rule: String,
    /// Replica lag now, seconds (`None` when unknown; -1 means replication stopped).
    pub rpo_estimate_s: Option<f64>,
    /// The RPO target from the plan.
    pub rpo_target_s: u64,
    /// Estimated RPO exceeds the target: approval must acknowledge data loss.
    pub rpo_over_target: bool,
    /// What the rules recommend (the only field a Choice state reads).
    pub action: Action,
    /// Why.
    pub reasons: Vec<String>,
    /// Short plain-language summary for Slack.
    pub summary: String,
    /// Optional AI explanation: advisory text, never read by the state machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub explanation: Option<Explanation>,
    /// The public name as users met it when this diagnosis ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public: Option<crate::public::PublicObservation>,
}

/// What the model said about a diagnosis, or why it said nothing. Advisory:
/// shown to the approver and kept in the report, never decided on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Explanation {
    /// The model asked.
    pub model_id: String,
    /// Its text, or why there is none.
    #[serde(flatten)]
    pub outcome: ExplanationOutcome,
    /// How long the call took, milliseconds.
    pub latency_ms: u64,
}

/// The model's answer or its absence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExplanationOutcome {
    /// Cleaned, bounded plain text.
    Text(String),
    /// The call failed, timed out or answered nothing usable.
    Unavailable(String),
}

impl Explanation {
    /// The text, when there is one.
    pub fn text(&self) -> Option<&str> {
        match &self.outcome {
            ExplanationOutcome::Text(t) => Some(t),
            ExplanationOutcome::Unavailable(_) => None,
        }
    }
}

/// Fence outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FenceOutcome {
    /// The deny-all group is attached (seen in a describe).
    Confirmed,
    /// P's API was unreachable or timed out.
    Unconfirmed,
}

/// fence's output, at `$.fence`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FenceResult {
    /// Confirmed or unconfirmed.
    pub outcome: FenceOutcome,
    /// The plan's policy for unconfirmed fences.
    pub policy: crate::plan::OnUnconfirmed,
    /// May the run go on? (confirmed, or unconfirmed with policy `proceed`)
    pub may_proceed: bool,
    /// Security groups P's DB had before, for failback.
    pub previous_security_groups: Vec<String>,
    /// The fence group attached.
    pub fence_security_group: String,
    /// When the transition was claimed.
    pub started_at: DateTime<Utc>,
    /// When the fence was confirmed (or given up on).
    pub fenced_at: DateTime<Utc>,
    /// The epoch the run holds.
    pub epoch: i64,
    /// Details (errors when unconfirmed).
    pub detail: String,
}

/// Where a planned switchover's catch-up is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CatchUpStatus {
    /// Not caught up yet (or not for `settle_s`): read again.
    Waiting,
    /// S has replayed all of P's WAL, and it held for `settle_s`: promote.
    CaughtUp,
    /// The plan's bound passed first: stop (audit unfences P).
    TimedOut,
}

/// The catch-up's output, at `$.catch_up` (each reading replaces the last).
///
/// The condition, read on S through the canary's connection: S's WAL
/// receiver has heard from P since the fence was confirmed (so since the
/// restart that ended P's sessions), the WAL end P's last message carried
/// is replayed on S, and both held, on one receiver, for the settle time
/// (see `failover::catch_up`). Positions are PostgreSQL LSNs (`0/3015FD0`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CatchUpResult {
    /// Where it is (the only field a Choice state reads, with `poll_s`).
    pub status: CatchUpStatus,
    /// Seconds until the next reading (the Wait state reads it).
    pub poll_s: u64,
    /// When the first reading was taken.
    pub started_at: DateTime<Utc>,
    /// Since when the condition has held, if it holds now.
    pub held_since: Option<DateTime<Utc>>,
    /// When it held for `settle_s` (status `caught_up`).
    pub caught_up_at: Option<DateTime<Utc>>,
    /// P's WAL end as P's last message to S carried it.
    pub p_wal_end: Option<String>,
    /// When P sent that message (P's clock).
    pub p_reported_at: Option<DateTime<Utc>>,
    /// S's WAL receiver process (a restarted receiver starts the settle again).
    #[serde(default)]
    pub receiver_pid: Option<i32>,
    /// Readings in a row the condition held (at least two to promote).
    #[serde(default)]
    pub held_readings: u32,
    /// S's last replayed position.
    pub s_replayed: Option<String>,
    /// Bytes of P's WAL S has not replayed (`None`: unknown).
    pub gap_bytes: Option<u64>,
    /// Readings taken.
    pub readings: u32,
    /// What the last reading saw, in words.
    pub detail: String,
}

/// Promotion status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PromotionStatus {
    /// Modifying / rebooting: poll again.
    Promoting,
    /// Standalone, available, and the primary record names S.
    Promoted,
}

/// promote's output, at `$.promotion` (the start call and every status poll).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PromotionResult {
    /// Where it is.
    pub status: PromotionStatus,
    /// Replica lag recorded just before the promotion call: the RPO, seconds.
    pub rpo_s: f64,
    /// When that lag sample was taken.
    pub lag_sampled_at: DateTime<Utc>,
    /// When the promotion call was accepted.
    pub promote_started_at: DateTime<Utc>,
    /// When it was seen complete.
    #[serde(default)]
    pub promoted_at: Option<DateTime<Utc>>,
    /// promoted_at - promote_started_at, seconds.
    #[serde(default)]
    pub duration_s: Option<f64>,
    /// Epoch of the primary record after promotion (start epoch + 1).
    #[serde(default)]
    pub epoch: Option<i64>,
    /// Status polls so far.
    #[serde(default)]
    pub polls: u32,
    /// The promotion was still under way when its budget
    /// (`promotion_poll_s x promotion_max_polls` from the call) had passed.
    /// The state machine then stops polling, however few polls ran: slow
    /// polls and their retries never stretch the run past what the lock's
    /// lease counts.
    #[serde(default)]
    pub past_budget: bool,
    /// Instance status seen last.
    pub db_status: String,
}

/// One change `switch` made, with the value before (for failback).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    /// What changed, e.g. `route53:health_check:<id>:inverted`.
    pub what: String,
    /// Value before.
    pub previous: Option<String>,
    /// Value after.
    pub now: String,
}

/// switch's output, at `$.switch`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SwitchResult {
    /// The mode used.
    pub mode: crate::plan::SwitchMode,
    /// When traffic and writers point at S.
    pub switched_at: DateTime<Utc>,
    /// Every change, with previous values.
    pub changes: Vec<Change>,
    /// Route 53 changes switch did not see INSYNC (`timings.dns_sync_s`),
    /// each with why: applied, and maybe not yet on every name server.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unsynced: Vec<String>,
}

/// One verify check.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Check {
    /// Passed before the deadline?
    pub ok: bool,
    /// Attempts made.
    pub attempts: u32,
    /// First success.
    pub first_success_at: Option<DateTime<Utc>>,
    /// Last failure seen, if any.
    pub last_error: Option<String>,
    /// What was checked, e.g. the answer or the row written.
    pub detail: String,
}

/// verify's output, at `$.verify`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VerifyResult {
    /// The public name answers with S.
    pub dns: Check,
    /// GET on the public name returns 200: first success is the read-RTO point.
    pub read: Check,
    /// The write canary: first success is the write-RTO point.
    pub write: Check,
    /// The writer endpoint (private CNAME or SSM parameter) names S: the
    /// canary connects to S's instance endpoint, so it cannot see an app
    /// still sent to P's name. Absent in runs recorded before this check.
    #[serde(default)]
    pub writer: Option<Check>,
    /// When verification started.
    pub started_at: DateTime<Utc>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc() -> Value {
        let plan: Value = serde_json::to_value(
            Plan::from_json(include_str!("../../infra/plan.example.jsonc")).unwrap(),
        )
        .unwrap();
        json!({
            "incident_id": "inc", "drill": true, "t0": "2026-11-30T14:11:55Z",
            "detected_at": "2026-11-30T14:14:00Z",
            "primary": {"region": "ap-northeast-2", "db_instance_id": "shop-db", "epoch": 1},
            "standby": {"region": "ap-northeast-1", "db_instance_id": "shop-db-replica"},
            "evidence": [], "plan": plan,
            "diagnosis": {"anything": 1},
            "fence": {"outcome": "confirmed"}
        })
    }

    #[test]
    fn step_outputs_survive_a_round_trip() {
        let state = ExecutionState::from_event(doc()).unwrap();
        assert_eq!(state.input.incident_id, "inc");
        assert_eq!(state.steps["diagnosis"], json!({"anything": 1}));
        let back = serde_json::to_value(&state).unwrap();
        assert_eq!(back["fence"]["outcome"], "confirmed");
        assert_eq!(back["primary"]["epoch"], 1);
        assert!(
            state.steps.get("plan").is_none(),
            "input fields are not duplicated as steps"
        );
    }

    #[test]
    fn a_missing_step_is_named() {
        let state = ExecutionState::from_event(doc()).unwrap();
        let err = state.require::<FenceResult>("promotion").unwrap_err();
        assert!(
            err.message.contains("$.promotion: missing"),
            "{}",
            err.message
        );
        let err = state.require::<FenceResult>("fence").unwrap_err();
        assert!(err.message.contains("$.fence"), "{}", err.message);
    }
}
