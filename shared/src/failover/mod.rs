//! The failover actions, each idempotent and safe under races:
//! [`fence`] the old primary, [`promote`] the replica (at most once per
//! epoch), [`switch`] traffic and writers, [`verify`] reads and a real write.

pub mod canary;
pub mod catch_up;
pub mod compensate;
pub mod fence;
pub mod pg_tls;
pub mod promote;
pub mod rpo;
pub mod switch;
pub mod verify;

use crate::adapters::AwsError;
use crate::error::{Classify, ErrorName};
use crate::store::StoreError;
use crate::store::primary::TransitionOutcome;
use tracing::warn;

/// Why a failover step stopped.
#[derive(Debug, thiserror::Error)]
pub enum StepError {
    /// Another execution moved the epoch or holds the transition: this run
    /// lost the race and touches nothing more.
    #[error("refused: {0}")]
    Refused(String),
    /// The world is not as this step needs it.
    #[error("precondition failed: {0}")]
    Precondition(String),
    /// A short hold by someone else (audit's sweep restoring P's groups):
    /// the state machine retries.
    #[error("held: {0}")]
    Held(String),
    /// Verification missed its deadline.
    #[error("verification failed: {0}")]
    VerifyFailed(String),
    /// The state store failed.
    #[error("state store")]
    Store(#[from] StoreError),
    /// An AWS call failed.
    #[error(transparent)]
    Aws(#[from] AwsError),
}

impl Classify for StepError {
    fn error_name(&self) -> ErrorName {
        match self {
            StepError::Refused(_) => ErrorName::Refused,
            StepError::Precondition(_) => ErrorName::Precondition,
            StepError::Held(_) => ErrorName::Transient,
            StepError::VerifyFailed(_) => ErrorName::VerifyFailed,
            StepError::Store(e) => e.error_name(),
            StepError::Aws(e) => e.error_name(),
        }
    }
}

/// Turn a refused transition into [`StepError::Refused`]; pass a claim through.
pub(crate) fn claimed(
    out: TransitionOutcome,
    what: &str,
) -> Result<crate::store::primary::PrimaryRecord, StepError> {
    match out {
        TransitionOutcome::Claimed(rec) => Ok(rec),
        TransitionOutcome::EpochMoved { now } => Err(StepError::Refused(format!(
            "{what}: the epoch moved to {now}; another execution completed a failover"
        ))),
        TransitionOutcome::Busy { execution } => Err(StepError::Refused(format!(
            "{what}: execution {execution} holds the failover on this epoch"
        ))),
        TransitionOutcome::Missing => Err(StepError::Precondition(format!(
            "{what}: the primary record is missing"
        ))),
        TransitionOutcome::Unfencing { since } => Err(StepError::Held(format!(
            "{what}: an unfence of P (audit's sweep, or a run's compensation) has held its claim since {since}"
        ))),
    }
}

/// The approval the irreversible steps act on: present, an `approve`, by a
/// person on the plan's allow-list, and the decision the run's single-use
/// approval key records. A `send-task-success` carrying a reject, one from
/// someone the plan does not name, or one that did not come through the key
/// (a task token can be read from the execution history, and
/// SendTaskSuccess has no resource-level permission: anyone allowed to call
/// it anywhere in the account could resume the run with any approver)
/// fences and promotes nothing. Only the approval and slack functions write
/// approval keys.
pub(crate) async fn approved(
    state: &crate::execution::ExecutionState,
    execution: &str,
    store: &crate::store::Store,
) -> Result<crate::execution::ApprovalResult, StepError> {
    use crate::store::approval::{ApprovalSelector, Decision};
    let a: crate::execution::ApprovalResult = state
        .require("approval")
        .map_err(|e| StepError::Precondition(e.message))?;
    if a.decision != Decision::Approve {
        return Err(StepError::Precondition(format!(
            "the approval says {:?}, not approve: nothing is fenced or promoted",
            a.decision
        )));
    }
    if state.input.plan.decider_name(&a.approver_id).is_none() {
        return Err(StepError::Precondition(format!(
            "the approval was given as {:?}, who is not on the plan's approver list: nothing is fenced or promoted",
            a.approver_id
        )));
    }
    let key = store
        .approval(&ApprovalSelector::Execution(execution.to_owned()))
        .await?;
    let Some(key) = key else {
        return Err(StepError::Precondition(format!(
            "no approval key was asked for {execution}: an approval that did not come through one is not acted on, so nothing is fenced or promoted"
        )));
    };
    match &key.decided {
        Some((Decision::Approve, by, _)) if *by == a.approver_id => {}
        recorded => {
            let recorded = match recorded {
                Some((d, by, at)) => format!("{d} by {by} at {}", at.to_rfc3339()),
                None => "no decision".to_owned(),
            };
            warn!(execution, key = %key.key, approver = %a.approver_id, %recorded, "the run's approval is not the one its key records");
            return Err(StepError::Precondition(format!(
                "the run's approval (approve by {}) is not what its approval key records ({recorded}): it did not come through Slack or handover approve, so nothing is fenced or promoted",
                a.approver_id
            )));
        }
    }
    if a.data_loss_acknowledged && !key.data_loss {
        return Err(StepError::Precondition(
            "the run's approval acknowledges a data loss its question never asked about: nothing is fenced or promoted".into(),
        ));
    }
    Ok(a)
}

/// The epoch the run started with (from detect's input).
pub(crate) fn start_epoch(state: &crate::execution::ExecutionState) -> Result<i64, StepError> {
    state.input.primary.epoch.ok_or_else(|| {
        StepError::Precondition("$.primary.epoch is missing from the execution input".into())
    })
}

/// `now` at millisecond precision: what the state store keeps, so a first
/// call and its retry report identical times.
pub(crate) fn millis(
    now: impl Fn() -> chrono::DateTime<chrono::Utc>,
) -> impl Fn() -> chrono::DateTime<chrono::Utc> {
    move || {
        let t = now();
        chrono::DateTime::from_timestamp_millis(t.timestamp_millis()).unwrap_or(t)
    }
}
