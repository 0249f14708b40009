//! One adapter per AWS capability, each behind a small trait named for what
//! it grants. A function's signature then documents its IAM policy, and the
//! domain code never sees an SDK builder.
//!
//! | trait | IAM action(s) |
//! |---|---|
//! | [`HealthChecks`] | route53:GetHealthCheckStatus |
//! | [`Alarms`] | cloudwatch:DescribeAlarms |
//! | [`ReplicaLag`] | cloudwatch:GetMetricData |
//! | [`DbInspector`] | rds:DescribeDBInstances |
//! | [`ExecutionStarter`] | states:StartExecution |
//! | [`TargetHealth`] | elasticloadbalancing:DescribeTargetHealth |
//! | [`TextModel`] | bedrock:InvokeModel (the Converse API) |
//! | [`EndpointProbe`] | none (HTTPS from the function) |
//! | [`BusPublisher`] | events:PutEvents (feature `events`) |
//! | [`ParameterReader`] | ssm:GetParameter |
//! | [`SecretUsernames`] | secretsmanager:GetSecretValue (only the username is kept) |

#[cfg(feature = "bedrock")]
pub mod bedrock;
pub mod cloudwatch;
pub mod config;
#[cfg(feature = "elbv2")]
pub mod elbv2;
pub mod events;
pub mod http;
#[cfg(feature = "rds")]
pub mod rds;
pub mod route53;
pub mod sfn;
#[cfg(feature = "sns")]
pub mod sns;
pub mod traffic;

#[cfg(feature = "bedrock")]
pub use bedrock::{Ask, Bedrock, TextModel};
pub use cloudwatch::{Alarms, CloudWatch, LagSample, ReplicaLag};
#[cfg(feature = "secrets")]
pub use config::SecretsManagerUsernames;
pub use config::{ParameterReader, SecretUsernames, SsmParameters};
#[cfg(feature = "elbv2")]
pub use elbv2::{Elbv2, TargetCounts, TargetHealth};
pub use events::BusPublisher;
#[cfg(feature = "events")]
pub use events::DefaultBus;
pub use http::{EndpointProbe, HttpProbe, ProbeResult};
#[cfg(feature = "rds")]
pub use rds::{DbInspector, DbInstance, MaintenanceReader, PendingMaintenance, Rds};
pub use route53::{HealthChecks, Route53};
pub use sfn::{ExecutionStarter, Sfn, StartOutcome};
#[cfg(feature = "sns")]
pub use sns::{OperatorNotice, Sns};

use crate::aws::{SdkError, is_transient};
use crate::error::{Classify, ErrorName};
use aws_smithy_types::error::metadata::ProvideErrorMetadata;
use std::time::Duration;

/// An AWS call failed or took too long.
#[derive(Debug, thiserror::Error)]
pub enum AwsError {
    /// The call returned an error.
    #[error("{service}:{op} in {region} failed: {code}")]
    Call {
        /// Service prefix, e.g. `rds`.
        service: &'static str,
        /// Operation, e.g. `DescribeDBInstances`.
        op: &'static str,
        /// Region called.
        region: String,
        /// AWS error code (or the kind of transport failure).
        code: String,
        /// Worth retrying?
        transient: bool,
        /// The SDK error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The call did not answer within its budget.
    #[error("{service}:{op} in {region} timed out after {ms} ms")]
    Timeout {
        /// Service prefix.
        service: &'static str,
        /// Operation.
        op: &'static str,
        /// Region called.
        region: String,
        /// The budget.
        ms: u128,
    },
    /// The answer lacked something we need.
    #[error("{service}:{op} in {region}: {problem}")]
    Shape {
        /// Service prefix.
        service: &'static str,
        /// Operation.
        op: &'static str,
        /// Region called.
        region: String,
        /// What was missing.
        problem: String,
    },
}

impl AwsError {
    /// The AWS error code, when the service answered with one.
    pub fn code(&self) -> Option<&str> {
        match self {
            AwsError::Call { code, .. } => Some(code),
            _ => None,
        }
    }

    /// Worth retrying: a timeout, throttling, a 5xx or a transport failure.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            AwsError::Timeout { .. }
                | AwsError::Call {
                    transient: true,
                    ..
                }
        )
    }

    /// Did the call perhaps act? A timeout, a transport failure or a 5xx
    /// answer leaves the outcome unknown (the server may have acted before
    /// the answer was lost); a 4xx answer (throttling, validation, access)
    /// means the request was refused and nothing happened.
    pub fn outcome_unknown(&self) -> bool {
        match self {
            AwsError::Timeout { .. } => true,
            AwsError::Call { code, .. } => matches!(
                code.as_str(),
                "timeout"
                    | "dispatch failure"
                    | "response error"
                    | "construction failure"
                    | "InternalFailure"
                    | "InternalServerError"
                    | "InternalError"
                    | "ServiceUnavailable"
                    | "ServiceUnavailableException"
                    | "unknown"
            ),
            AwsError::Shape { .. } => true,
        }
    }

    /// Timed out or could not connect: the API is unreachable from here.
    pub fn is_unreachable(&self) -> bool {
        match self {
            AwsError::Timeout { .. } => true,
            AwsError::Call { code, .. } => {
                code == "dispatch failure" || code == "timeout" || code == "response error"
            }
            AwsError::Shape { .. } => false,
        }
    }
}

impl Classify for AwsError {
    fn error_name(&self) -> ErrorName {
        match self {
            AwsError::Timeout { .. }
            | AwsError::Call {
                transient: true, ..
            } => ErrorName::Transient,
            _ => ErrorName::Fatal,
        }
    }
}

pub(crate) fn call_error<E>(
    service: &'static str,
    op: &'static str,
    region: &str,
    err: SdkError<E, aws_smithy_runtime_api::http::Response>,
) -> AwsError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let code = match &err {
        SdkError::ServiceError(se) => se.err().code().unwrap_or("unknown").to_owned(),
        SdkError::TimeoutError(_) => "timeout".into(),
        SdkError::DispatchFailure(_) => "dispatch failure".into(),
        SdkError::ResponseError(_) => "response error".into(),
        _ => "construction failure".into(),
    };
    AwsError::Call {
        service,
        op,
        region: region.to_owned(),
        transient: is_transient(&err),
        code,
        source: Box::new(err),
    }
}

/// Run `fut` with a time budget; a miss is [`AwsError::Timeout`].
pub(crate) async fn bounded<T>(
    service: &'static str,
    op: &'static str,
    region: &str,
    budget: Duration,
    fut: impl std::future::Future<Output = Result<T, AwsError>>,
) -> Result<T, AwsError> {
    match tokio::time::timeout(budget, fut).await {
        Ok(r) => r,
        Err(_) => Err(AwsError::Timeout {
            service,
            op,
            region: region.to_owned(),
            ms: budget.as_millis(),
        }),
    }
}
