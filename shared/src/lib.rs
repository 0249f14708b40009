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
//! - [`aws`]: the one place SDK clients are built from the environment.
//! - [`error`]: stable error names (`Handover.Transient`, …) for Step Functions.
//! - [`telemetry`]: JSON logs and CloudWatch Embedded Metric Format lines.
//! - [`config`]: environment variables and where the plan comes from.
//! - [`clock`]: injectable time.

pub mod aws;
pub mod clock;
pub mod config;
pub mod error;
pub mod plan;
pub mod store;
pub mod telemetry;
