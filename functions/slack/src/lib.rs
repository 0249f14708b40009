//! `slack`: API Gateway `POST /slack/interactions` → verify Slack's
//! signature, check the approver, consume the key once, resume the run.
//! `POST /decisions` (AWS_IAM) → the same for `handover approve` / `reject`,
//! as the IAM principal API Gateway authenticated.
//!
//! The handler is a library, as in every function crate. `main.rs` runs it
//! under the Lambda runtime, and tests in `tests/` can build it.

pub mod handler;
