//! The harness's own tests: the emulated world, the ASL and the template.
//! One test binary, one module per concern (each binary would link the AWS
//! SDK again). The path tests (`paths.rs`) stay apart: `scripts/paths.sh`
//! runs them outside `cargo test`.

mod asl;
mod readiness_alarm;
mod template;
mod world;
