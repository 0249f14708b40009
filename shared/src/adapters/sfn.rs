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
    /// An execution with this name exists already (a retried tick).
    AlreadyExists,
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
                if err.code() == Some("ExecutionAlreadyExists") {
                    Ok(StartOutcome::AlreadyExists)
                } else {
                    Err(err)
                }
            }
        }
    }
}
