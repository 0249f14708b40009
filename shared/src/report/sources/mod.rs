//! The report's AWS adapters, each behind a trait named for what it grants.
//!
//! | trait | IAM action(s) |
//! |---|---|
//! | [`ExecutionHistory`] | states:GetExecutionHistory |
//! | [`ExecutionLookup`] | states:DescribeExecution |
//! | [`ReportStore`] | s3:PutObject |
//! | [`ReportReader`] | s3:GetObject |
//! | [`BackupHistory`] | rds:DescribeEvents, rds:DescribeDBSnapshots |
//! | [`ParameterReader`] | ssm:GetParameter |
//! | [`SecretUsernames`] | secretsmanager:GetSecretValue (only the username is kept) |
//!
//! P's and S's instances are described with [`crate::adapters::DbInspector`]
//! (rds:DescribeDBInstances).
mod config;
mod history;
mod rds;
mod s3;

pub use config::{ParameterReader, SecretUsernames, SecretsManagerUsernames, SsmParameters};
pub use history::{
    ExecutionHistory, ExecutionLookup, HistoryPage, PAGE_SIZE, SfnHistory, fold_history, from_sdk,
};
pub use rds::BackupHistory;
pub use s3::{ReportReader, ReportStore, S3Reports};

use super::postcheck::{Observed, RunContext};
use crate::adapters::AwsError;
use crate::adapters::rds::DbInspector;
use crate::plan::{Canary, Dependency, Plan};
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

/// DB secrets for S named in the plan (S's own, the canary's), deduplicated.
pub fn standby_db_secrets(plan: &Plan) -> Vec<String> {
    let mut out: Vec<String> = plan.regions.standby.db_secret_arn.iter().cloned().collect();
    if let Canary::Postgres { secret_arn, .. } = &plan.canary
        && !out.contains(secret_arn)
    {
        out.push(secret_arn.clone());
    }
    out
}

/// The plan's declared SSM parameters in S, each with its value (errors as text).
pub async fn dependency_parameters<P: ParameterReader>(
    plan: &Plan,
    reader: &P,
) -> Vec<(String, Result<Option<String>, String>)> {
    let mut out = Vec::new();
    for dep in &plan.dependencies {
        if let Dependency::SsmParameter { name } = dep {
            let value = reader
                .parameter(name)
                .await
                .map_err(|e| crate::error::chain(&e));
            out.push((name.clone(), value));
        }
    }
    out
}

/// Each DB secret for S with the username it names (errors as text).
pub async fn standby_secret_usernames<S: SecretUsernames>(
    plan: &Plan,
    reader: &S,
) -> Vec<(String, Result<Option<String>, String>)> {
    let mut out = Vec::new();
    for arn in standby_db_secrets(plan) {
        let user = reader
            .username(&arn)
            .await
            .map_err(|e| crate::error::chain(&e));
        out.push((arn, user));
    }
    out
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
