//! `approval`: Step Functions `lambda:invoke.waitForTaskToken` → a short key
//! for the task token, and the question in Slack. The task keeps waiting
//! until the `slack` function sends the decision.
//!
//! The handler is a library, as in every function crate. `main.rs` runs it
//! under the Lambda runtime, and tests in `tests/` can build it.

pub mod handler;
