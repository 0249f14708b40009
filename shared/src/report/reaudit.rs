//! The report again, once the new primary's first backup has finished.
//!
//! The conservative RTO runs from T0 to the first completed backup of the
//! new primary: until then a restore could only go back to the old Region's
//! backups. RDS takes that backup minutes to hours after the promotion, so
//! the report written when the run ends says `pending`. An EventBridge rule
//! sends RDS's "Finished DB Instance backup" (RDS-EVENT-0002) here. When the
//! instance is the current primary and the last failover's report still says
//! pending, the audit runs again on the same history and rewrites the report
//! (and posts the updated summary). Every other backup, such as the daily
//! ones afterwards, changes nothing.

use super::ReportError;
use super::audit::{AuditDeps, AuditError, AuditOutcome, Trigger, audit_for};
use super::model::{Report, Status};
use super::sources::{ExecutionHistory, ExecutionLookup, ReportReader, S3Reports};
use crate::execution::ExecutionInput;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tracing::info;

/// The `detail-type` of RDS's instance events in EventBridge.
pub const RDS_DETAIL_TYPE: &str = "RDS DB Instance Event";
/// "Finished DB Instance backup."
pub const BACKUP_FINISHED: &str = "RDS-EVENT-0002";

/// `detail` of an EventBridge "RDS DB Instance Event".
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct RdsInstanceEvent {
    /// E.g. `["backup"]`.
    #[serde(default)]
    pub event_categories: Vec<String>,
    /// `DB_INSTANCE`.
    #[serde(default)]
    pub source_type: String,
    /// The instance's ARN.
    #[serde(default)]
    pub source_arn: String,
    /// The instance identifier.
    pub source_identifier: String,
    /// E.g. `Finished DB Instance backup`.
    #[serde(default)]
    pub message: String,
    /// E.g. `RDS-EVENT-0002`.
    #[serde(rename = "EventID", default)]
    pub event_id: String,
}

/// Re-audit the last failover if this backup completes its report.
pub async fn after_backup<H: ExecutionHistory + ExecutionLookup + Sync>(
    deps: &AuditDeps,
    history: &H,
    event: &RdsInstanceEvent,
    now: DateTime<Utc>,
) -> Result<AuditOutcome, AuditError> {
    let skip = |why: String| {
        info!(instance = %event.source_identifier, event_id = %event.event_id, reason = %why, "backup event: nothing to re-audit");
        Ok(AuditOutcome::Skipped { status: why })
    };
    if event.event_id != BACKUP_FINISHED {
        return skip(format!(
            "{} ({}) is not a finished backup",
            event.event_id, event.message
        ));
    }
    let Some(primary) = deps.store.primary().await? else {
        return skip("no primary record".into());
    };
    if primary.db_instance_id != event.source_identifier {
        return skip(format!(
            "{} is not the primary ({} in {})",
            event.source_identifier, primary.db_instance_id, primary.region
        ));
    }
    let Some(execution) = primary.last_execution.as_deref() else {
        return skip(format!(
            "{} has never been promoted by Handover",
            event.source_identifier
        ));
    };
    let (status, input) = history.describe(execution).await?;
    let input: ExecutionInput = serde_json::from_str(&input).map_err(ReportError::Input)?;
    let plan = &input.plan;
    let key = format!("{}{}/report.json", plan.report.prefix, input.incident_id);
    let stored = S3Reports::new(&deps.aws, &plan.regions.standby.region)
        .await
        .get(&plan.report.bucket, &key)
        .await?;
    match stored.map(|bytes| serde_json::from_slice::<Report>(&bytes)) {
        Some(Ok(r)) if r.numbers.conservative_rto.status != Status::Pending => {
            return skip(format!(
                "the report of {} already has its conservative RTO ({})",
                input.incident_id,
                r.numbers.conservative_rto.status.label()
            ));
        }
        // No report yet. The run's own audit writes the first one, with
        // what only it reads: the public name as detect saw it, and
        // readiness. It reads backups since the promotion itself.
        None if !status.is_terminal() => {
            return skip(format!(
                "{} is still running: its own audit reads this backup",
                input.incident_id
            ));
        }
        // Its audit may be running now, side by side with this one (audit's
        // concurrency is not reserved). Leave the report to it. If it read
        // RDS before this backup finished, the next backup's re-audit finds
        // this one in RDS's events and fills the number in. An error here
        // would fire the audit Errors alarm.
        None if ended_within(&status, now, OWN_AUDIT_WINDOW) => {
            return skip(format!(
                "the report of {} is not written yet, and its run ended moments ago: its own audit writes it",
                input.incident_id
            ));
        }
        // Pending, unreadable, or never written (the sweep's late audit
        // would write it): write it now.
        _ => {}
    }
    info!(incident = %input.incident_id, execution, instance = %event.source_identifier, "first backup of the new primary: re-auditing");
    let (outcome, _) = audit_for(deps, history, &status, now, Trigger::FirstBackup).await?;
    Ok(outcome)
}

/// How long after its run ended a report may still be on its way from the
/// run's own audit (audit's Lambda timeout is 300 s).
const OWN_AUDIT_WINDOW: chrono::Duration = chrono::Duration::minutes(5);

/// Did the execution of `status` end less than `window` before `now`?
fn ended_within(
    status: &super::audit::ExecutionStatusChange,
    now: DateTime<Utc>,
    window: chrono::Duration,
) -> bool {
    status
        .stopped_at()
        .is_some_and(|stopped| now - stopped < window)
}
