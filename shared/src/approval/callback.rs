//! Resuming the waiting task (states:SendTaskSuccess, states:SendTaskFailure).

use super::TaskToken;
use crate::adapters::{AwsError, call_error};
use crate::aws::Aws;
use crate::error::{Classify, ErrorName};
use std::sync::Arc;
use tracing::instrument;

/// Codes Step Functions answers when the task no longer waits.
const CLOSED: [&str; 3] = ["TaskTimedOut", "TaskDoesNotExist", "InvalidToken"];

/// Sending the decision failed.
#[derive(Debug, thiserror::Error)]
pub enum CallbackError {
    /// The task is gone: it timed out, the run ended, or the token is unknown.
    #[error("step functions no longer waits for this task ({code})")]
    TaskClosed {
        /// `TaskTimedOut`, `TaskDoesNotExist` or `InvalidToken`.
        code: String,
    },
    /// The call failed.
    #[error(transparent)]
    Call(AwsError),
}

impl Classify for CallbackError {
    fn error_name(&self) -> ErrorName {
        match self {
            CallbackError::TaskClosed { .. } => ErrorName::Precondition,
            CallbackError::Call(e) => e.error_name(),
        }
    }
}

/// How a callback task ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskEnd {
    /// SendTaskSuccess reached it, with this output.
    Succeeded(String),
    /// SendTaskFailure reached it, with this error and cause.
    Failed {
        /// The error name.
        error: String,
        /// The cause (a decision's JSON for a reject).
        cause: String,
    },
    /// It timed out (nobody's decision arrived).
    TimedOut,
}

/// Send a waiting task its result.
pub trait TaskCallback {
    /// Resume the task of `execution` with `output` (JSON).
    fn succeed(
        &self,
        execution: &str,
        token: &TaskToken,
        output: &str,
    ) -> impl Future<Output = Result<(), CallbackError>> + Send;
    /// Fail the task of `execution` with `error` (a stable name) and `cause`.
    fn fail(
        &self,
        execution: &str,
        token: &TaskToken,
        error: &str,
        cause: &str,
    ) -> impl Future<Output = Result<(), CallbackError>> + Send;
    /// How the task that handed out `token` ended, read from the execution's
    /// history (states:GetExecutionHistory): `None` while it waits or when
    /// the token is not found.
    fn task_end(
        &self,
        execution: &str,
        token: &TaskToken,
    ) -> impl Future<Output = Result<Option<TaskEnd>, CallbackError>> + Send;
}

/// Step Functions over the SDK. The Region is the execution's own.
#[derive(Debug, Clone)]
pub struct SfnCallback {
    aws: Arc<Aws>,
    default_region: String,
}

impl SfnCallback {
    /// Callbacks through `aws`; `default_region` when an execution ARN names none.
    pub fn new(aws: Arc<Aws>, default_region: impl Into<String>) -> Self {
        Self {
            aws,
            default_region: default_region.into(),
        }
    }

    fn region<'a>(&'a self, execution: &'a str) -> &'a str {
        // arn:aws:states:<region>:<account>:execution:<state machine>:<name>
        match execution.split(':').collect::<Vec<_>>().as_slice() {
            ["arn", _, "states", region, ..] if !region.is_empty() => region,
            _ => &self.default_region,
        }
    }
}

fn classify(err: AwsError) -> CallbackError {
    match err.code() {
        Some(code) if CLOSED.contains(&code) => CallbackError::TaskClosed {
            code: code.to_owned(),
        },
        _ => CallbackError::Call(err),
    }
}

impl TaskCallback for SfnCallback {
    #[instrument(skip(self, token, output))]
    async fn succeed(
        &self,
        execution: &str,
        token: &TaskToken,
        output: &str,
    ) -> Result<(), CallbackError> {
        let region = self.region(execution);
        self.aws
            .sfn(region)
            .await
            .send_task_success()
            .task_token(token.expose())
            .output(output)
            .send()
            .await
            .map(|_| ())
            .map_err(|e| classify(call_error("states", "SendTaskSuccess", region, e)))
    }

    #[instrument(skip(self, token, cause))]
    async fn fail(
        &self,
        execution: &str,
        token: &TaskToken,
        error: &str,
        cause: &str,
    ) -> Result<(), CallbackError> {
        let region = self.region(execution);
        self.aws
            .sfn(region)
            .await
            .send_task_failure()
            .task_token(token.expose())
            .error(error)
            .cause(cause)
            .send()
            .await
            .map(|_| ())
            .map_err(|e| classify(call_error("states", "SendTaskFailure", region, e)))
    }

    #[instrument(skip(self, token))]
    async fn task_end(
        &self,
        execution: &str,
        token: &TaskToken,
    ) -> Result<Option<TaskEnd>, CallbackError> {
        use aws_sdk_sfn::types::HistoryEventType as T;
        let region = self.region(execution);
        let out = self
            .aws
            .sfn(region)
            .await
            .get_execution_history()
            .execution_arn(execution)
            .max_results(1000)
            .send()
            .await
            .map_err(|e| {
                CallbackError::Call(call_error("states", "GetExecutionHistory", region, e))
            })?;
        // The task that handed out this token is the one scheduled with it
        // in its parameters; its end is the next task end before another
        // task is scheduled.
        let events = out.events();
        let Some(start) = events.iter().position(|e| {
            e.task_scheduled_event_details()
                .is_some_and(|d| d.parameters().contains(token.expose()))
        }) else {
            return Ok(None);
        };
        for e in &events[start + 1..] {
            match e.r#type() {
                T::TaskSucceeded => {
                    let output = e
                        .task_succeeded_event_details()
                        .and_then(|d| d.output())
                        .unwrap_or_default()
                        .to_owned();
                    return Ok(Some(TaskEnd::Succeeded(output)));
                }
                T::TaskFailed => {
                    let d = e.task_failed_event_details();
                    return Ok(Some(TaskEnd::Failed {
                        error: d.and_then(|d| d.error()).unwrap_or_default().to_owned(),
                        cause: d.and_then(|d| d.cause()).unwrap_or_default().to_owned(),
                    }));
                }
                T::TaskTimedOut => return Ok(Some(TaskEnd::TimedOut)),
                T::TaskScheduled => return Ok(None),
                _ => {}
            }
        }
        Ok(None)
    }
}
