//! Execution history events: our own typed shape of what
//! `states:GetExecutionHistory` returns.
//!
//! [`HistoryEvent`] keeps only what the report reads: the event type, time,
//! the state name, and the input, output, error and cause of the details
//! object. `sources.rs` maps the SDK type into it; [`parse_history_json`]
//! reads the API's JSON (one page `{"events": [...]}`, several pages as an
//! array, or the AWS CLI's output), so tests use the real wire shapes as
//! fixtures.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One history event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryEvent {
    /// Event id (1-based, in order).
    pub id: i64,
    /// Id of the event this one follows (0 for the first).
    pub previous_event_id: i64,
    /// When it happened.
    pub timestamp: DateTime<Utc>,
    /// The event type as AWS names it, e.g. `TaskStateEntered`.
    pub kind: String,
    /// State name (`stateEnteredEventDetails` / `stateExitedEventDetails`).
    pub state: Option<String>,
    /// Execution input (`ExecutionStarted` only; state inputs are not kept).
    pub input: Option<String>,
    /// Output of a state exit or of the execution.
    pub output: Option<String>,
    /// Error name of a failure event.
    pub error: Option<String>,
    /// Cause of a failure event.
    pub cause: Option<String>,
    /// Task resource (a Lambda ARN, `invoke.waitForTaskToken`, …).
    pub resource: Option<String>,
}

/// Fixture or CLI JSON that is not a history.
#[derive(Debug, thiserror::Error)]
pub enum HistoryParseError {
    /// Not JSON.
    #[error("history is not JSON")]
    Json(#[source] serde_json::Error),
    /// JSON of another shape.
    #[error("history event {index}: {problem}")]
    Shape {
        /// Position of the event in the input.
        index: usize,
        /// What is wrong.
        problem: String,
    },
}

impl HistoryEvent {
    /// Does this event enter a state (`TaskStateEntered`, `ChoiceStateEntered`, …)?
    pub fn is_state_entered(&self) -> bool {
        self.kind.ends_with("StateEntered")
    }

    /// Does this event exit a state?
    pub fn is_state_exited(&self) -> bool {
        self.kind.ends_with("StateExited")
    }

    /// The state type of an entered/exited event: `Task`, `Choice`, `Wait`, …
    pub fn state_type(&self) -> Option<&str> {
        self.kind
            .strip_suffix("StateEntered")
            .or_else(|| self.kind.strip_suffix("StateExited"))
    }

    /// A task attempt was scheduled (each one after the first is a retry).
    pub fn is_attempt(&self) -> bool {
        matches!(
            self.kind.as_str(),
            "TaskScheduled" | "LambdaFunctionScheduled" | "ActivityScheduled"
        )
    }

    /// A failure of a task attempt.
    pub fn is_task_failure(&self) -> bool {
        matches!(
            self.kind.as_str(),
            "TaskFailed"
                | "TaskTimedOut"
                | "TaskStartFailed"
                | "TaskSubmitFailed"
                | "LambdaFunctionFailed"
                | "LambdaFunctionTimedOut"
                | "LambdaFunctionStartFailed"
                | "LambdaFunctionScheduleFailed"
                | "ActivityFailed"
                | "ActivityTimedOut"
                | "ActivityScheduleFailed"
        )
    }

    /// Terminal event of the execution.
    pub fn is_terminal(&self) -> bool {
        matches!(
            self.kind.as_str(),
            "ExecutionSucceeded" | "ExecutionFailed" | "ExecutionAborted" | "ExecutionTimedOut"
        )
    }
}

/// Parse GetExecutionHistory JSON: a page `{"events": [...]}`, an array of
/// pages, or a bare array of events. Timestamps may be epoch seconds (the
/// wire format) or RFC 3339 strings (the AWS CLI).
pub fn parse_history_json(text: &str) -> Result<Vec<HistoryEvent>, HistoryParseError> {
    let value: Value = serde_json::from_str(text).map_err(HistoryParseError::Json)?;
    let mut raw = Vec::new();
    collect_events(&value, &mut raw);
    raw.iter()
        .enumerate()
        .map(|(index, v)| {
            from_json_event(v).map_err(|problem| HistoryParseError::Shape { index, problem })
        })
        .collect()
}

fn collect_events<'a>(value: &'a Value, out: &mut Vec<&'a Value>) {
    match value {
        Value::Object(o) => {
            if let Some(Value::Array(events)) = o.get("events") {
                out.extend(events.iter());
            }
        }
        Value::Array(items) => {
            for item in items {
                if item.get("events").is_some() {
                    collect_events(item, out);
                } else {
                    out.push(item);
                }
            }
        }
        _ => {}
    }
}

fn from_json_event(v: &Value) -> Result<HistoryEvent, String> {
    let kind = v["type"].as_str().ok_or("missing `type`")?.to_owned();
    let id = v["id"].as_i64().ok_or("missing `id`")?;
    let timestamp = match &v["timestamp"] {
        Value::Number(n) => n
            .as_f64()
            .and_then(|s| DateTime::<Utc>::from_timestamp_millis((s * 1000.0).round() as i64)),
        Value::String(s) => DateTime::parse_from_rfc3339(s)
            .ok()
            .map(|t| t.with_timezone(&Utc)),
        _ => None,
    }
    .ok_or("missing or bad `timestamp`")?;
    let mut event = HistoryEvent {
        id,
        previous_event_id: v["previousEventId"].as_i64().unwrap_or(0),
        timestamp,
        kind,
        state: None,
        input: None,
        output: None,
        error: None,
        cause: None,
        resource: None,
    };
    let details = v
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| k.ends_with("EventDetails"))
        .map(|(_, d)| d);
    let text = |d: &Value, k: &str| d.get(k).and_then(Value::as_str).map(str::to_owned);
    for d in details {
        event.state = event.state.or_else(|| text(d, "name"));
        if event.kind == "ExecutionStarted" {
            event.input = text(d, "input");
        }
        if event.is_state_exited() || event.kind == "ExecutionSucceeded" {
            event.output = text(d, "output");
        }
        event.error = event.error.or_else(|| text(d, "error"));
        event.cause = event.cause.or_else(|| text(d, "cause"));
        event.resource = event.resource.or_else(|| text(d, "resource"));
    }
    Ok(event)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_and_cli_shapes_parse_alike() {
        let wire = r#"{"events":[{"timestamp":1796220715.5,"type":"TaskStateEntered","id":2,"previousEventId":1,
            "stateEnteredEventDetails":{"name":"Diagnose","input":"{}"}}]}"#;
        let cli = r#"[{"events":[{"timestamp":"2026-12-02T14:11:55.500000+00:00","type":"TaskStateEntered","id":2,
            "previousEventId":1,"stateEnteredEventDetails":{"name":"Diagnose","input":"{}"}}]}]"#;
        let a = parse_history_json(wire).unwrap();
        let b = parse_history_json(cli).unwrap();
        assert_eq!(a, b);
        assert_eq!(a[0].state.as_deref(), Some("Diagnose"));
        assert_eq!(a[0].state_type(), Some("Task"));
        assert!(a[0].input.is_none(), "state inputs are not kept");
    }

    #[test]
    fn a_failure_keeps_error_and_cause() {
        let page = r#"{"events":[{"timestamp":1796220715,"type":"TaskFailed","id":9,"previousEventId":8,
            "taskFailedEventDetails":{"resourceType":"lambda","resource":"invoke","error":"Handover.VerifyFailed","cause":"no write"}}]}"#;
        let e = &parse_history_json(page).unwrap()[0];
        assert!(e.is_task_failure());
        assert_eq!(e.error.as_deref(), Some("Handover.VerifyFailed"));
        assert_eq!(e.cause.as_deref(), Some("no write"));
        assert_eq!(e.resource.as_deref(), Some("invoke"));
    }

    #[test]
    fn a_bad_event_is_named() {
        let err = parse_history_json(r#"{"events":[{"type":"X"}]}"#).unwrap_err();
        assert!(err.to_string().contains("event 0"), "{err}");
    }
}
