//! Configuration from the environment, read once at cold start.
//!
//! A missing or bad variable fails with a message that names it.

use crate::aws::Aws;
use crate::error::{Classify, ErrorName};
use crate::plan::{Plan, PlanError};

/// A configuration problem.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A required variable is not set.
    #[error("environment variable {0} is not set")]
    Missing(&'static str),
    /// A variable has a value we cannot use.
    #[error("environment variable {name}: {problem}")]
    Invalid {
        /// Variable name.
        name: &'static str,
        /// What is wrong.
        problem: String,
    },
    /// The plan file could not be read.
    #[error("plan file {path}")]
    PlanFile {
        /// Path.
        path: String,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// The SSM parameter could not be read.
    #[error("plan parameter {name} in {region}")]
    PlanParameter {
        /// Parameter name.
        name: String,
        /// Region.
        region: String,
        /// Transient?
        transient: bool,
        /// Cause.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The plan is invalid.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// The plan disagrees with the stack.
    #[error(transparent)]
    Stack(#[from] crate::stack::Mismatch),
    /// A read that did not answer within its budget.
    #[error("{0} did not arrive within {1:?}")]
    Timeout(&'static str, std::time::Duration),
    /// The plan could not be read a moment ago, and is not read again yet.
    #[error("the plan could not be read moments ago: {0}")]
    Unreadable(String),
    /// The plan in its store failed validation a moment ago.
    #[error("the plan in its store is not valid: {0}")]
    InvalidPlan(String),
    /// A warm function's plan is too old to act on, and it cannot be read
    /// again ([`crate::live_plan`]).
    #[error(
        "the plan was last read {age_s} s ago and cannot be read again: nothing is decided on it"
    )]
    StalePlan {
        /// How old the copy is.
        age_s: u64,
        /// Why it cannot be read.
        #[source]
        source: Box<ConfigError>,
    },
}

impl From<crate::stack::Unset> for ConfigError {
    fn from(unset: crate::stack::Unset) -> Self {
        ConfigError::Missing(unset.0)
    }
}

impl Classify for ConfigError {
    fn error_name(&self) -> ErrorName {
        match self {
            ConfigError::PlanParameter {
                transient: true, ..
            }
            | ConfigError::Timeout(..)
            | ConfigError::Unreadable(_) => ErrorName::Transient,
            ConfigError::InvalidPlan(_) => ErrorName::InvalidInput,
            ConfigError::StalePlan { source, .. } => source.error_name(),
            ConfigError::Plan(_) | ConfigError::Stack(_) => ErrorName::InvalidInput,
            _ => ErrorName::Fatal,
        }
    }
}

/// Read a required variable.
pub fn required(name: &'static str) -> Result<String, ConfigError> {
    match std::env::var(name) {
        Ok(v) if !v.trim().is_empty() => Ok(v),
        _ => Err(ConfigError::Missing(name)),
    }
}

/// Read an optional variable (empty counts as unset).
pub fn optional(name: &'static str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// Where the plan comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlanSource {
    /// An SSM parameter (name, Region).
    Parameter {
        /// Parameter name.
        name: String,
        /// Region of the parameter (the function's own Region by default).
        region: String,
    },
    /// A file (drills, tests).
    File(String),
}

impl PlanSource {
    /// `PLAN_PARAMETER` (+ `PLAN_PARAMETER_REGION` or `AWS_REGION`), else `PLAN_FILE`.
    pub fn from_env() -> Result<Self, ConfigError> {
        if let Some(name) = optional("PLAN_PARAMETER") {
            let region = optional("PLAN_PARAMETER_REGION")
                .or_else(|| optional("AWS_REGION"))
                .ok_or(ConfigError::Missing("AWS_REGION"))?;
            return Ok(PlanSource::Parameter { name, region });
        }
        if let Some(path) = optional("PLAN_FILE") {
            return Ok(PlanSource::File(path));
        }
        Err(ConfigError::Missing("PLAN_PARAMETER (or PLAN_FILE)"))
    }

    /// Read and validate the plan.
    pub async fn load(&self, aws: &Aws) -> Result<Plan, ConfigError> {
        let text = match self {
            PlanSource::File(path) => {
                std::fs::read_to_string(path).map_err(|source| ConfigError::PlanFile {
                    path: path.clone(),
                    source,
                })?
            }
            PlanSource::Parameter { name, region } => {
                let out = aws
                    .ssm(region)
                    .await
                    .get_parameter()
                    .name(name)
                    .with_decryption(true)
                    .send()
                    .await
                    .map_err(|e| ConfigError::PlanParameter {
                        name: name.clone(),
                        region: region.clone(),
                        transient: crate::aws::is_transient(&e),
                        source: Box::new(e),
                    })?;
                out.parameter
                    .and_then(|p| p.value)
                    .ok_or_else(|| ConfigError::PlanParameter {
                        name: name.clone(),
                        region: region.clone(),
                        transient: false,
                        source: "parameter has no value".into(),
                    })?
            }
        };
        Ok(Plan::from_json(&text)?)
    }

    /// Read and validate the plan, then bind it to the stack this function
    /// runs in ([`crate::stack::StackBinding`]): what every function that
    /// loads the plan at cold start calls.
    pub async fn load_bound(&self, aws: &Aws) -> Result<Plan, ConfigError> {
        let stack = crate::stack::StackBinding::from_env()?;
        let mut plan = self.load(aws).await?;
        stack.bind(&mut plan)?;
        Ok(plan)
    }
}
