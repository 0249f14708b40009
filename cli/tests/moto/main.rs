//! The real `handover` binary against moto, one module per command group.
//! One test binary, not eight: each would link the whole AWS SDK again.

mod decide;
mod failback;
mod init;
mod ops;
mod readiness;
mod readiness_last;
mod state;
mod switchover;
