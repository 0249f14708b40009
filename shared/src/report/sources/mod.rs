//! The report's AWS adapters, each behind a trait named for what it grants.
//!
//! | trait | IAM action(s) |
//! |---|---|
//! | [`ExecutionHistory`] | states:GetExecutionHistory |
//! | [`ExecutionLookup`] | states:DescribeExecution |
//! | [`ReportStore`] | s3:PutObject |
//! | [`ReportReader`] | s3:GetObject |
//! | [`BackupHistory`] | rds:DescribeEvents, rds:DescribeDBSnapshots |
//!
//! P's and S's instances are described with [`crate::adapters::DbInspector`]
//! (rds:DescribeDBInstances). SSM parameters and secret usernames are read
//! through [`crate::adapters::config`].
mod history;
mod rds;
mod s3;

pub use history::{
    ExecutionHistory, ExecutionLookup, HistoryPage, PAGE_SIZE, SfnHistory, fold_history, from_sdk,
};
pub use rds::BackupHistory;
pub use s3::{ReportReader, ReportStore, S3Reports};

use super::observed::{Observed, RunContext};
use crate::adapters::rds::DbInspector;
use crate::adapters::{AwsError, ParameterReader, SecretUsernames};
use crate::dependencies::{dependency_parameters, standby_secret_usernames};
use crate::plan::Plan;
use chrono::{DateTime, Utc};
use std::time::Duration;

/// The post-checks' sources.
pub struct CheckSources<'a, D, B, P, S> {
    /// RDS in P.
    pub p_rds: &'a D,
    /// RDS in S (also its backups).
    pub s_rds: &'a B,
    /// SSM in S.
    pub parameters: &'a P,
    /// Secrets.
    pub secrets: &'a S,
}

/// Observe everything the post-checks need. Errors are kept as text.
pub async fn observe<D, B, P, S>(
    plan: &Plan,
    run: RunContext,
    src: &CheckSources<'_, D, B, P, S>,
) -> Observed
where
    D: DbInspector,
    B: DbInspector + BackupHistory,
    P: ParameterReader,
    S: SecretUsernames,
{
    let budget = Duration::from_millis(plan.timings.call_timeout_ms);
    let text = |e: AwsError| crate::error::chain(&e);
    let since = run.promote_started_at.unwrap_or(DateTime::<Utc>::MIN_UTC);
    let (p_db, s_db, backups) = tokio::join!(
        src.p_rds
            .describe(&plan.regions.primary.db_instance_id, budget),
        src.s_rds
            .describe(&plan.regions.standby.db_instance_id, budget),
        src.s_rds
            .backups_since(&plan.regions.standby.db_instance_id, since),
    );
    let parameters = dependency_parameters(plan, src.parameters).await;
    let secret_usernames = standby_secret_usernames(plan, src.secrets).await;
    Observed {
        p_db: p_db.map_err(text),
        s_db: s_db.map_err(text),
        backups: if run.promoted {
            backups.map_err(text)
        } else {
            Ok(Vec::new())
        },
        parameters,
        secret_usernames,
    }
}
