//! `audit`: EventBridge "Step Functions Execution Status Change" → the
//! after-action report, post-checks, metrics and the lock release.
//!
//! The handler is a library, as in every function crate. `main.rs` runs it
//! under the Lambda runtime, and tests in `tests/` can build it.

pub mod handler;
