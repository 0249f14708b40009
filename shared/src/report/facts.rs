//! Folding the history into the facts the report needs.
//!
//! [`RunFacts`] consumes events one at a time ([`RunFacts::push`]), so the
//! reader can stream a 25,000-event history page by page and keep only one
//! page in memory. It records every state visit (entered, exited, attempts,
//! errors), the execution's start and terminal event, the input, and the
//! latest value of every step output key (`diagnosis`, `approval`, …) seen in
//! a state's output. Failed runs keep the outputs of the steps that ran.

use super::history::HistoryEvent;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// Keys of the execution input; everything else in a state output is a step's.
pub const INPUT_KEYS: [&str; 8] = [
    "incident_id",
    "drill",
    "t0",
    "detected_at",
    "primary",
    "standby",
    "evidence",
    "plan",
];

/// One error seen on a state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StateError {
    /// Error name, e.g. `Handover.Transient` or `States.Timeout`.
    pub error: String,
    /// Cause text.
    pub cause: Option<String>,
    /// When.
    pub at: DateTime<Utc>,
    /// The event type that carried it, e.g. `TaskFailed`.
    pub event: String,
}

/// One visit of one state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StateRun {
    /// State name.
    pub name: String,
    /// State type: `Task`, `Choice`, `Wait`, `Pass`, `Succeed`, `Fail`, …
    pub kind: String,
    /// Entered.
    pub entered_at: DateTime<Utc>,
    /// Exited (`None`: the run ended inside it).
    pub exited_at: Option<DateTime<Utc>>,
    /// exited − entered, seconds.
    pub duration_s: Option<f64>,
    /// Task attempts scheduled.
    pub attempts: u32,
    /// attempts − 1, when positive.
    pub retries: u32,
    /// Errors of failed attempts, in order.
    pub errors: Vec<StateError>,
    /// Did the last attempt fail (no success after the last error)?
    pub failed: bool,
}

/// How the execution ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Terminal {
    /// `ExecutionSucceeded`, `ExecutionFailed`, `ExecutionAborted` or `ExecutionTimedOut`.
    pub kind: String,
    /// When.
    pub at: DateTime<Utc>,
    /// Error name (failed, aborted, timed out).
    pub error: Option<String>,
    /// Cause.
    pub cause: Option<String>,
}

/// Everything the report takes from the history.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunFacts {
    /// Events seen.
    pub event_count: usize,
    /// Highest event id seen.
    pub last_event_id: i64,
    /// `ExecutionStarted` time.
    pub started_at: Option<DateTime<Utc>>,
    /// The execution input (raw JSON text).
    pub input: Option<String>,
    /// Terminal event, if the run has ended.
    pub terminal: Option<Terminal>,
    /// Every state visit, in order of entry.
    pub states: Vec<StateRun>,
    /// Latest value of every step key seen in a state's output.
    pub steps: Map<String, Value>,
    /// When each step key first appeared in an output (the exit of the state that wrote it).
    pub first_seen: BTreeMap<String, DateTime<Utc>>,
    /// Events out of order or outputs that could not be read (kept, not fatal).
    pub warnings: Vec<String>,
    /// Observations of the public name kept outside the history: detect's
    /// ticks after the run started (from the probe run, read by audit), or
    /// the ones the first report stored (read by the re-audit).
    pub observations: Vec<crate::public::PublicObservation>,
    /// The data S never got, measured on both databases after the run
    /// (`handover rpo`, kept in the table; read by audit).
    pub measured_rpo: Option<crate::failover::rpo::MeasuredRpo>,
    /// The last readiness result (read by audit from the table).
    pub readiness: Option<crate::readiness::Readiness>,
    /// The readiness line of the first report (a re-audit keeps it).
    pub last_readiness_line: Option<String>,
    /// Index into `states` of visits not yet exited.
    open: Vec<usize>,
    /// Task attempts scheduled and not yet answered.
    tasks_open: i64,
    /// A task ended in a way that does not say its invocation stopped.
    tasks_unsure: bool,
}

impl RunFacts {
    /// Facts from a complete list of events.
    pub fn from_events<'a>(events: impl IntoIterator<Item = &'a HistoryEvent>) -> Self {
        let mut facts = RunFacts::default();
        for e in events {
            facts.push(e);
        }
        facts
    }

    /// Take one event into account. Events must come in history order.
    pub fn push(&mut self, e: &HistoryEvent) {
        self.event_count += 1;
        if e.id <= self.last_event_id {
            self.warnings.push(format!(
                "event {} ({}) came after event {}",
                e.id, e.kind, self.last_event_id
            ));
        }
        self.last_event_id = self.last_event_id.max(e.id);
        self.count_task(e);
        match e.kind.as_str() {
            "ExecutionStarted" => {
                self.started_at = Some(e.timestamp);
                self.input.clone_from(&e.input);
            }
            "ExecutionSucceeded" => {
                if let Some(out) = &e.output {
                    self.take_outputs(out, e.timestamp, "execution output");
                }
                self.end(e);
            }
            _ if e.is_terminal() => self.end(e),
            _ if e.is_state_entered() => {
                self.open.push(self.states.len());
                self.states.push(StateRun {
                    name: e.state.clone().unwrap_or_default(),
                    kind: e.state_type().unwrap_or("State").to_owned(),
                    entered_at: e.timestamp,
                    exited_at: None,
                    duration_s: None,
                    attempts: 0,
                    retries: 0,
                    errors: Vec::new(),
                    failed: false,
                });
            }
            _ if e.is_state_exited() => {
                let name = e.state.as_deref().unwrap_or_default();
                let pos = self.open.iter().rposition(|&i| self.states[i].name == name);
                match pos {
                    Some(p) => {
                        let i = self.open.remove(p);
                        let run = &mut self.states[i];
                        run.exited_at = Some(e.timestamp);
                        run.duration_s = Some(seconds(run.entered_at, e.timestamp));
                    }
                    None => self.warnings.push(format!(
                        "event {}: {name} exited without being entered",
                        e.id
                    )),
                }
                if let Some(out) = &e.output {
                    self.take_outputs(out, e.timestamp, name);
                }
            }
            _ => {
                let Some(&i) = self.open.last() else { return };
                let run = &mut self.states[i];
                if e.is_attempt() {
                    run.attempts += 1;
                    run.retries = run.attempts.saturating_sub(1);
                } else if e.is_task_failure() {
                    run.failed = true;
                    run.errors.push(StateError {
                        error: e.error.clone().unwrap_or_else(|| e.kind.clone()),
                        cause: e.cause.clone(),
                        at: e.timestamp,
                        event: e.kind.clone(),
                    });
                } else if matches!(
                    e.kind.as_str(),
                    "TaskSucceeded" | "LambdaFunctionSucceeded" | "ActivitySucceeded"
                ) {
                    run.failed = false;
                }
            }
        }
    }

    /// Keep count of the task attempts still open, and of those whose end
    /// leaves the invocation's fate unknown. Only an error the function
    /// itself answered (`Handover.*`, or the runtime's own `Runtime.*` /
    /// `Sandbox.*` when the process exited or Lambda timed it out) says the
    /// invocation stopped. `Lambda.*` (a client timeout, a service
    /// exception) and `States.*` (the task's own timeout) can come back
    /// while it still runs; a timed-out, unstarted or unsubmitted task is
    /// unknown too.
    fn count_task(&mut self, e: &HistoryEvent) {
        match e.kind.as_str() {
            "TaskScheduled" | "LambdaFunctionScheduled" => self.tasks_open += 1,
            "TaskSucceeded" | "LambdaFunctionSucceeded" => self.tasks_open -= 1,
            "TaskFailed" | "LambdaFunctionFailed" => {
                self.tasks_open -= 1;
                let answered = e.error.as_deref().is_some_and(|x| {
                    ["Handover.", "Runtime.", "Sandbox."]
                        .iter()
                        .any(|p| x.starts_with(p))
                });
                self.tasks_unsure |= !answered;
            }
            "TaskTimedOut"
            | "LambdaFunctionTimedOut"
            | "TaskStartFailed"
            | "TaskSubmitFailed"
            | "LambdaFunctionStartFailed"
            | "LambdaFunctionScheduleFailed" => {
                self.tasks_open -= 1;
                self.tasks_unsure = true;
            }
            _ => {}
        }
    }

    /// May a task this run started still be acting? Step Functions closing
    /// a run (StopExecution, the run's timeout) or a task's timeout does
    /// not stop a Lambda invocation already running. Only a run that ended
    /// by itself (SUCCEEDED or FAILED) with every task answered has nothing
    /// in flight. A history without its terminal event may too.
    pub fn tasks_may_act(&self) -> bool {
        let by_itself = self
            .terminal
            .as_ref()
            .is_some_and(|t| matches!(t.kind.as_str(), "ExecutionSucceeded" | "ExecutionFailed"));
        !by_itself || self.tasks_open != 0 || self.tasks_unsure
    }

    fn end(&mut self, e: &HistoryEvent) {
        self.terminal = Some(Terminal {
            kind: e.kind.clone(),
            at: e.timestamp,
            error: e.error.clone(),
            cause: e.cause.clone(),
        });
    }

    fn take_outputs(&mut self, output: &str, at: DateTime<Utc>, from: &str) {
        match serde_json::from_str::<Value>(output) {
            Ok(Value::Object(map)) => {
                for (k, v) in map {
                    if INPUT_KEYS.contains(&k.as_str()) || v.is_null() {
                        continue;
                    }
                    self.first_seen.entry(k.clone()).or_insert(at);
                    self.steps.insert(k, v);
                }
            }
            Ok(_) => {}
            Err(e) => self.warnings.push(format!(
                "output of {from} is not readable JSON ({e}); it may be truncated"
            )),
        }
    }

    /// The state the run stopped in: the last visit whose last attempt
    /// failed, else the last visit never exited, else the last visit.
    pub fn stopped_in(&self) -> Option<&StateRun> {
        self.states
            .iter()
            .rev()
            .find(|s| s.failed)
            .or_else(|| self.states.iter().rev().find(|s| s.exited_at.is_none()))
            .or_else(|| self.states.last())
    }
}

/// b − a in seconds (millisecond precision).
pub fn seconds(a: DateTime<Utc>, b: DateTime<Utc>) -> f64 {
    (b - a).num_milliseconds() as f64 / 1000.0
}
