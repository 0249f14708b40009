//! Handover's library: everything the functions share.
//!
//! Handover fails a web service over from Region P to Region S with a person
//! in the loop. The functions in `functions/` are thin: they parse their
//! event, call one domain function here, and map the result to a stable error
//! name. Layout:
//!
//! - [`plan`]: the failover plan, a validated JSON document.
//! - [`store`]: the DynamoDB state store (primary record and epoch, lock,
//!   probe counters, approval keys, pause flag), conditional writes only.
//! - [`detect`]: one detection tick: signals, rule, hysteresis, lock, StartExecution.
//! - [`diagnose`]: a bounded snapshot of both sides and the deterministic rules.
//! - [`failover`]: fence, promote, switch, verify — idempotent and safe under races.
//! - [`approval`]: human approval: ask in Slack, turn a signed click into one decision.
//! - [`slack`]: Slack request signing, interactions, Block Kit, the Web API.
//! - [`report`]: the after-action report from the execution history.
//! - [`adapters`]: one adapter per AWS capability, behind traits named for the permission.
//! - [`aws`]: the one place SDK clients are built from the environment.
//! - [`bootstrap`]: the primary record written once from RDS reality (`handover init`).
//! - [`execution`]: the execution document each step reads and adds to.
//! - [`error`]: stable error names (`Handover.Transient`, …) for Step Functions.
//! - [`telemetry`]: JSON logs and CloudWatch Embedded Metric Format lines.
//! - [`config`]: environment variables and where the plan comes from.
//! - [`stack`]: the plan checked against the stack it runs in (one source of truth).
//! - [`clock`]: injectable time.

pub mod adapters;
#[cfg(feature = "respond")]
pub mod approval;
pub mod aws;
#[cfg(feature = "respond")]
pub mod bootstrap;
pub mod clock;
pub mod config;
#[cfg(feature = "respond")]
pub mod dependencies;
pub mod detect;
#[cfg(feature = "respond")]
pub mod diagnose;
pub mod error;
pub mod execution;
#[cfg(feature = "respond")]
pub mod failback;
#[cfg(feature = "respond")]
pub mod failover;
pub mod live_plan;
pub mod plan;
pub mod public;
#[cfg(feature = "respond")]
pub mod readiness;
#[cfg(feature = "respond")]
pub mod report;
pub mod scheduler;
#[cfg(feature = "respond")]
pub mod slack;
pub mod stack;
pub mod store;
pub mod telemetry;
pub mod units;
