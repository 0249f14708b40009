//! Step Functions: starting one execution (states:StartExecution).

use super::{AwsError, call_error};
use crate::aws::Aws;
use tracing::instrument;

/// Result of starting an execution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartOutcome {
    /// Started now.
    Started {
        /// Execution ARN.
        execution_arn: String,
    },
    /// An execution with this name exists already: a retried tick while it
    /// runs, or one that has ended (names stay taken for 90 days).
    AlreadyExists {
        /// Its status (`RUNNING`, `SUCCEEDED`, …), or None when it could not be read.
        status: Option<String>,
        /// When it stopped, if it has.
        stopped_at: Option<chrono::DateTime<chrono::Utc>>,
    },
}

/// Start executions of the Handover state machine.
pub trait ExecutionStarter {
    /// Start `name` with `input` (JSON). Names are required: moto names an
    /// unnamed execution "None", and a derived name makes retries idempotent.
    fn start(
        &self,
        name: &str,
        input: &str,
    ) -> impl std::future::Future<Output = Result<StartOutcome, AwsError>> + Send;
    /// The ARN the execution `name` has (or will have).
    fn execution_arn(&self, name: &str) -> String;
}

/// Step Functions over the SDK, bound to one state machine.
#[derive(Debug, Clone)]
pub struct Sfn {
    client: aws_sdk_sfn::Client,
    region: String,
    state_machine_arn: String,
}

impl Sfn {
    /// Step Functions in `region` for `state_machine_arn`.
    pub async fn new(aws: &Aws, region: &str, state_machine_arn: &str) -> Self {
        Self {
            client: aws.sfn(region).await,
            region: region.to_owned(),
            state_machine_arn: state_machine_arn.to_owned(),
        }
    }
}

impl ExecutionStarter for Sfn {
    fn execution_arn(&self, name: &str) -> String {
        execution_arn(&self.state_machine_arn, name)
    }

    #[instrument(skip(self, input))]
    async fn start(&self, name: &str, input: &str) -> Result<StartOutcome, AwsError> {
        match self
            .client
            .start_execution()
            .state_machine_arn(&self.state_machine_arn)
            .name(name)
            .input(input)
            .send()
            .await
        {
            Ok(out) => Ok(StartOutcome::Started {
                execution_arn: out.execution_arn,
            }),
            Err(e) => {
                let err = call_error("states", "StartExecution", &self.region, e);
                if err.code() != Some("ExecutionAlreadyExists") {
                    return Err(err);
                }
                // Which one: still running (a retried tick), or closed?
                let arn = execution_arn(&self.state_machine_arn, name);
                let (status, stopped_at) = match self
                    .client
                    .describe_execution()
                    .execution_arn(&arn)
                    .send()
                    .await
                {
                    Ok(d) => (
                        Some(d.status().as_str().to_owned()),
                        d.stop_date().and_then(|t| {
                            chrono::DateTime::from_timestamp_millis(t.to_millis().ok()?)
                        }),
                    ),
                    Err(e) => {
                        let e = call_error("states", "DescribeExecution", &self.region, e);
                        tracing::warn!(execution = %arn, error = %crate::error::chain(&e), "could not read the existing execution");
                        (None, None)
                    }
                };
                Ok(StartOutcome::AlreadyExists { status, stopped_at })
            }
        }
    }
}

/// The ARN of the execution `name` of a state machine:
/// `arn:aws:states:<r>:<a>:stateMachine:<sm>[:<version or alias>]` ->
/// `arn:aws:states:<r>:<a>:execution:<sm>:<name>`.
pub fn execution_arn(state_machine_arn: &str, name: &str) -> String {
    let unqualified: Vec<&str> = state_machine_arn.splitn(8, ':').take(7).collect();
    format!(
        "{}:{name}",
        unqualified
            .join(":")
            .replacen(":stateMachine:", ":execution:", 1)
    )
}
