//! `detect`: EventBridge `rate(1 minute)` → one detection tick.
//!
//! The handler is a library, as in every function crate. `main.rs` runs it
//! under the Lambda runtime, and tests in `tests/` can build it.

pub mod handler;
