//! Parse the status-change event, run the audit, report what it did.

use aws_lambda_events::eventbridge::EventBridgeEvent;
use chrono::Utc;
use handover::aws::Aws;
use handover::config::required;
use handover::error::{ErrorName, FunctionError, parse_event};
use handover::report::audit::{AuditDeps, AuditOutcome, ExecutionStatusChange, audit};
use handover::report::reaudit::{RDS_DETAIL_TYPE, RdsInstanceEvent, after_backup};
use handover::report::sources::SfnHistory;
use handover::slack::api::SlackApi;
use handover::slack::secrets::SecretsManager;
use handover::store::Store;
use std::sync::Arc;

/// The event's `detail-type`.
pub const DETAIL_TYPE: &str = "Step Functions Execution Status Change";

/// Built once per container.
pub struct Deps {
    pub audit: AuditDeps,
    pub region: String,
    /// The workflow: names the lock holder's execution for the sweep.
    pub state_machine_arn: String,
}

impl Deps {
    /// From `AWS_REGION`, `TABLE_NAME` and `SLACK_API_BASE` (optional).
    pub async fn from_env() -> Result<Self, FunctionError> {
        let aws = Arc::new(Aws::new());
        let region = required("AWS_REGION")?;
        let slack = SlackApi::from_env()
            .map_err(|e| FunctionError::new(ErrorName::Fatal, handover::error::chain(&e)))?;
        Ok(Deps {
            audit: AuditDeps {
                store: Store::new(aws.dynamodb(&region).await, required("TABLE_NAME")?),
                slack: Some((slack, SecretsManager::new(aws.clone(), region.clone()))),
                aws,
            },
            region,
            state_machine_arn: required("STATE_MACHINE_ARN")?,
        })
    }
}

/// A Step Functions status change (the audit), RDS's "backup finished"
/// for the new primary (the re-audit that fills in the conservative RTO), or
/// the sweep's schedule (a run whose audit never completed; see
/// [`handover::report::sweep`]). Any other event is `Handover.InvalidInput`;
/// a non-terminal status is skipped.
pub async fn handler(event: serde_json::Value, deps: &Deps) -> Result<AuditOutcome, FunctionError> {
    let field = |k: &str| event.get(k).and_then(serde_json::Value::as_str);
    let scheduled = field("detail-type") == Some("Scheduled Event");
    match field("source") {
        Some("aws.rds") => return backup_finished(event, deps).await,
        Some(handover::scheduler::SCHEDULER_SOURCE) | Some(_) if scheduled => {
            handover::scheduler::SchedulerEvent::parse(event, "audit's sweep")?;
            let sfn = SfnHistory::new(&deps.audit.aws, &deps.region).await;
            return Ok(handover::report::sweep::sweep(
                &deps.audit,
                &sfn,
                &deps.state_machine_arn,
                Utc::now(),
            )
            .await?);
        }
        _ => {}
    }
    let event: EventBridgeEvent<ExecutionStatusChange> =
        parse_event("execution status change event", event)?;
    if event.source != "aws.states" || event.detail_type != DETAIL_TYPE {
        return Err(FunctionError::invalid_input(format!(
            "expected source aws.states, detail-type {DETAIL_TYPE:?}; got source {:?}, detail-type {:?}",
            event.source, event.detail_type
        )));
    }
    let region = event.detail.region().unwrap_or(&deps.region).to_owned();
    let history = SfnHistory::new(&deps.audit.aws, &region).await;
    let (outcome, _report) = audit(&deps.audit, &history, &event.detail, Utc::now()).await?;
    Ok(outcome)
}

async fn backup_finished(
    event: serde_json::Value,
    deps: &Deps,
) -> Result<AuditOutcome, FunctionError> {
    let event: EventBridgeEvent<RdsInstanceEvent> = parse_event("RDS instance event", event)?;
    if event.detail_type != RDS_DETAIL_TYPE {
        return Err(FunctionError::invalid_input(format!(
            "expected detail-type {RDS_DETAIL_TYPE:?} from aws.rds; got {:?}",
            event.detail_type
        )));
    }
    let history = SfnHistory::new(&deps.audit.aws, &deps.region).await;
    Ok(after_backup(&deps.audit, &history, &event.detail, Utc::now()).await?)
}
