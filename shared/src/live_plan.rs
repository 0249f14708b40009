//! The stack's plan in a warm function, re-read as it changes in SSM.
//!
//! A function reads the plan at cold start. Lambda keeps a warm container
//! for hours when it is called every minute (detect) or often (slack). A
//! plan held that long would keep a removed approver an approver. So a warm
//! function reads the plan again when its copy is older than
//! [`REFRESH`]: a change in SSM takes effect within a minute.
//!
//! When the plan cannot be read again (SSM throttled or unreachable), the
//! copy still serves until it is [`STALE_LIMIT`] old, with a warning. After
//! that the function refuses: it acts on no plan older than that. A plan
//! changed into one that fails validation is refused at once.

use crate::aws::Aws;
use crate::clock::Clock;
use crate::config::{ConfigError, PlanSource};
use crate::plan::Plan;
use crate::stack::StackBinding;
use chrono::{DateTime, Utc};
use std::sync::Arc;
use std::time::Duration;
use tracing::{info, warn};

/// How old a warm function's copy of the plan may be before it is read again.
pub const REFRESH: Duration = Duration::from_secs(60);
/// How old a copy may serve while the plan cannot be read again.
pub const STALE_LIMIT: Duration = Duration::from_secs(300);
/// The most a re-read may take: the slack function answers Slack within 3 s.
pub const READ_BUDGET: Duration = Duration::from_secs(1);

/// Reads the plan (ssm:GetParameter, or the file).
pub trait PlanReader: Send + Sync {
    /// The plan as it is now, validated and bound to the stack.
    fn read(&self) -> impl std::future::Future<Output = Result<Plan, ConfigError>> + Send;
}

/// The stack's plan: `PLAN_PARAMETER` (or `PLAN_FILE`), bound to the stack
/// the function runs in.
pub struct StackPlan {
    source: PlanSource,
    aws: Arc<Aws>,
    stack: StackBinding,
}

impl StackPlan {
    /// From the function's environment.
    pub fn from_env(aws: Arc<Aws>) -> Result<Self, ConfigError> {
        Ok(Self::new(
            PlanSource::from_env()?,
            aws,
            StackBinding::from_env()?,
        ))
    }

    /// From `source`, bound to `stack`.
    pub fn new(source: PlanSource, aws: Arc<Aws>, stack: StackBinding) -> Self {
        Self { source, aws, stack }
    }
}

impl PlanReader for StackPlan {
    async fn read(&self) -> Result<Plan, ConfigError> {
        let mut plan = self.source.load(&self.aws).await?;
        self.stack.bind(&mut plan)?;
        Ok(plan)
    }
}

/// The plan a warm function acts on: read again when [`REFRESH`] old.
pub struct LivePlan<R = StackPlan> {
    reader: Option<R>,
    held: tokio::sync::Mutex<Held>,
}

struct Held {
    plan: Arc<Plan>,
    read_at: DateTime<Utc>,
    failed: Option<Failed>,
}

impl Held {
    fn new(plan: Plan, read_at: DateTime<Utc>) -> Self {
        Held {
            plan: Arc::new(plan),
            read_at,
            failed: None,
        }
    }
}

impl<R: PlanReader> LivePlan<R> {
    /// Read the plan now (cold start). An error here fails the cold start.
    pub async fn load(reader: R, clock: &dyn Clock) -> Result<Self, ConfigError> {
        let plan = reader.read().await?;
        Ok(Self {
            reader: Some(reader),
            held: tokio::sync::Mutex::new(Held::new(plan, clock.now())),
        })
    }

    /// A plan that is never read again (tests).
    pub fn fixed(plan: Plan) -> Self {
        Self {
            reader: None,
            held: tokio::sync::Mutex::new(Held::new(plan, DateTime::<Utc>::MAX_UTC)),
        }
    }

    /// The held copy, to change in place (a test's world).
    pub fn plan_mut(&mut self) -> &mut Plan {
        Arc::make_mut(&mut self.held.get_mut().plan)
    }

    /// The plan to act on now: the copy while it is younger than
    /// [`REFRESH`], else the plan read again.
    /// - A plan that cannot be read (SSM throttled or unreachable) keeps the
    ///   copy until it is [`STALE_LIMIT`] old; then it is the error.
    /// - A plan that was changed and fails validation is the error at once:
    ///   the operators changed it, so the copy is no longer theirs.
    /// - After a failed read, none is tried for [`RETRY_AFTER`].
    pub async fn current(&self, clock: &dyn Clock) -> Result<Arc<Plan>, ConfigError> {
        let mut held = self.held.lock().await;
        let Some(reader) = &self.reader else {
            return Ok(held.plan.clone());
        };
        let now = clock.now();
        let age = (now - held.read_at).to_std().unwrap_or_default();
        if age < REFRESH {
            return Ok(held.plan.clone());
        }
        let error = match &held.failed {
            Some(f) if now < f.at + RETRY_AFTER => f.again(),
            _ => {
                let read = tokio::time::timeout(READ_BUDGET, reader.read())
                    .await
                    .unwrap_or_else(|_| Err(ConfigError::Timeout("the plan", READ_BUDGET)));
                match read {
                    Ok(plan) => {
                        if plan != *held.plan {
                            info!("the plan changed in its store: acting on the new one");
                        }
                        *held = Held::new(plan, now);
                        return Ok(held.plan.clone());
                    }
                    Err(e) => {
                        held.failed = Some(Failed::of(&e, now));
                        e
                    }
                }
            }
        };
        let invalid = matches!(
            error,
            ConfigError::Plan(_) | ConfigError::Stack(_) | ConfigError::InvalidPlan(_)
        );
        if invalid {
            tracing::error!(error = %crate::error::chain(&error), "the plan in its store is not valid: nothing is decided until it is fixed");
            return Err(error);
        }
        if age < STALE_LIMIT {
            warn!(error = %crate::error::chain(&error), age_s = age.as_secs(), "the plan could not be read again: the copy serves until it is 5 minutes old");
            return Ok(held.plan.clone());
        }
        Err(ConfigError::StalePlan {
            age_s: age.as_secs(),
            source: Box::new(error),
        })
    }
}

/// How long after a failed read the plan is not read again: a store that
/// does not answer is not asked on every request.
pub const RETRY_AFTER: chrono::Duration = chrono::Duration::seconds(5);

/// The last failed read: when, what it said, and whether the plan read was
/// invalid (a validation or stack error) rather than unreadable.
struct Failed {
    at: DateTime<Utc>,
    what: String,
    invalid: bool,
}

impl Failed {
    fn of(e: &ConfigError, at: DateTime<Utc>) -> Self {
        Failed {
            at,
            what: crate::error::chain(e),
            invalid: matches!(e, ConfigError::Plan(_) | ConfigError::Stack(_)),
        }
    }

    /// The same failure, reported again without a read.
    fn again(&self) -> ConfigError {
        if self.invalid {
            ConfigError::InvalidPlan(self.what.clone())
        } else {
            ConfigError::Unreadable(self.what.clone())
        }
    }
}

#[cfg(test)]
#[path = "live_plan_tests.rs"]
mod tests;
