//! The after-action report, built from the Step Functions execution history.
//!
//! Layout:
//!
//! - [`history`]: our typed [`HistoryEvent`] and the GetExecutionHistory JSON reader (fixtures).
//! - [`facts`]: folds events one at a time into [`RunFacts`]: state visits, the input, the step outputs.
//! - [`numbers`]: the four numbers, the further durations and the milestones.
//! - [`postcheck`]: split-brain, backups, replication and cross-Region dependency checks.
//! - [`milestones`]: milestones in expected order, out-of-order ones flagged.
//! - [`dependencies`]: the cross-Region dependency checks.
//! - [`analysis`]: trigger vs root cause, action items.
//! - [`output`]: the three report files and the EMF metric lines.
//! - [`build`]: joins everything into the [`Report`] ([`model`] documents its schema).
//! - [`render`]: `report.json`, `report.md` (Mermaid gantt), `report.html` (inline SVG), the Slack summary.
//! - [`sources`]: the AWS adapters (history pages, S3, RDS, SSM, Secrets Manager).
//! - [`audit`]: the audit step: read, check, build, store, emit metrics, release the lock.
//!
//! Everything except `sources` and `audit` is pure, so fixtures in the real
//! AWS shapes drive the tests.

pub mod analysis;
pub mod audit;
pub mod build;
pub mod dependencies;
pub mod facts;
pub mod history;
pub mod milestones;
pub mod model;
pub mod numbers;
pub mod observed;
pub mod output;
pub mod postcheck;
pub mod reaudit;
pub mod render;
pub mod sources;
pub mod sweep;

#[cfg(test)]
mod tests;

pub use build::build;
pub use facts::{RunFacts, StateRun};
pub use history::{HistoryEvent, parse_history_json};
pub use model::*;
pub use postcheck::{BackupSeen, Observed, PostChecks, RunContext};

use crate::error::{Classify, ErrorName};

/// The report cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The history has no ExecutionStarted input.
    #[error("the execution history has no ExecutionStarted input")]
    NoInput,
    /// The input is not a Handover execution document.
    #[error("the execution input is not a Handover execution document")]
    Input(#[source] serde_json::Error),
}

impl Classify for ReportError {
    fn error_name(&self) -> ErrorName {
        ErrorName::InvalidInput
    }
}
