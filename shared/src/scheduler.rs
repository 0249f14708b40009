//! EventBridge Scheduler's payload: the template's `ScheduleV2` triggers
//! (detect's tick, audit's sweep).

use crate::error::{FunctionError, parse_event};
use chrono::{DateTime, Utc};

/// The payload EventBridge Scheduler sends a templated Lambda target that has
/// no `Input` (the template's `ScheduleV2`): `detail` is the JSON *string*
/// `"{}"`, not an object. Shape: aws/aws-lambda-dotnet#1864 (a recorded
/// event), aws-powertools/powertools-lambda-python#6134.
#[derive(Debug, serde::Deserialize)]
pub struct SchedulerEvent {
    source: String,
    #[serde(rename = "detail-type")]
    detail_type: String,
    /// When the schedule fired.
    pub time: DateTime<Utc>,
    #[serde(default)]
    detail: serde_json::Value,
}

/// The trigger the template deploys.
pub const SCHEDULER_SOURCE: &str = "aws.scheduler";

impl SchedulerEvent {
    /// Parse and check a Scheduler payload; anything else is
    /// `Handover.InvalidInput` naming what arrived. `what` names the schedule
    /// ("detect", "audit's sweep") in the hint for an EventBridge rule's payload.
    pub fn parse(event: serde_json::Value, what: &str) -> Result<SchedulerEvent, FunctionError> {
        let event: SchedulerEvent = parse_event("EventBridge Scheduler event", event)?;
        if event.source != SCHEDULER_SOURCE || event.detail_type != "Scheduled Event" {
            let hint = if event.source == "aws.events" {
                format!(
                    " (an EventBridge rule's payload: the stack schedules {what} with EventBridge Scheduler)"
                )
            } else {
                String::new()
            };
            return Err(FunctionError::invalid_input(format!(
                "expected an EventBridge Scheduler event (source {SCHEDULER_SOURCE}, detail-type \"Scheduled Event\"), got source {:?}, detail-type {:?}{hint}",
                event.source, event.detail_type
            )));
        }
        if !matches!(&event.detail, serde_json::Value::String(s) if s.trim() == "{}") {
            return Err(FunctionError::invalid_input(format!(
                "EventBridge Scheduler event: detail should be the string \"{{}}\" (the schedule has no Input), got {}",
                event.detail
            )));
        }
        Ok(event)
    }
}
