//! The shared crate's tests that need the emulator, PostgreSQL, Chromium or
//! a wire replay: one test binary, one module per concern. One binary, not
//! eleven: each would link the whole AWS SDK again.
//! `approval_round_trip.rs` stays a binary of its own: it starts a private
//! emulator and points the process's SDK environment at it.

#[path = "../support/synthetic_history.rs"]
mod synthetic;

mod aurora_wire;
mod bedrock_wire;
mod failover_moto;
mod plan_source;
mod readiness_outputs_moto;
mod report_html_chromium;
mod report_pagination;
mod report_postchecks_moto;
mod s3_wire;
mod store_moto;
mod switch_verify_moto;
