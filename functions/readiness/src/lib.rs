//! `readiness`: every 30 minutes (EventBridge Scheduler), would a failover
//! work now? See `handover::readiness`.
//!
//! The handler is a library, as in every function crate. `main.rs` runs it
//! under the Lambda runtime, and tests in `tests/` can build it.

pub mod handler;
