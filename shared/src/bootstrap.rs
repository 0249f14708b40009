//! Bootstrapping the primary record from RDS reality (`handover init`).
//!
//! detect needs the record of who is primary before its first tick. It is
//! written once, at deploy time, from what RDS says: the writer is the
//! instance that is not a replica and is the replication source of the
//! other. Anything else (both writers, neither, a replica of a third
//! instance, a record that already names the other side) is refused with
//! what was seen. Nothing is guessed, and an existing record is never
//! overwritten.

use crate::adapters::{AwsError, DbInspector};
use crate::plan::{Plan, Site};
use crate::store::primary::{InitOutcome, PrimaryRecord};
use crate::store::{Store, StoreError};
use chrono::{DateTime, Utc};
use std::time::Duration;

/// What `init` did.
#[derive(Debug, Clone, PartialEq)]
pub enum Initialised {
    /// The record was written at epoch 1.
    Created(PrimaryRecord),
    /// The record existed and already names the writer RDS reports.
    AlreadyThere(PrimaryRecord),
}

/// Why `init` refused or failed. Every refusal says what RDS showed.
#[derive(Debug, thiserror::Error)]
pub enum InitError {
    /// An instance the plan names does not exist.
    #[error(
        "{which} instance {id} does not exist in {region} (check plan.regions.{which}.db_instance_id)"
    )]
    NotFound {
        /// `primary` or `standby`.
        which: &'static str,
        /// Identifier.
        id: String,
        /// Region.
        region: String,
    },
    /// RDS shows no single writer with the other as its replica.
    #[error(
        "cannot tell the writer from RDS: {0}. Handover does not guess; fix replication or the plan, then run init again"
    )]
    Ambiguous(String),
    /// The record exists and names another instance than RDS's writer.
    #[error(
        "the primary record names {record_db} in {record_region} (epoch {epoch}), but RDS shows {writer} as the writer: \
         not overwritten. Find out which is right; `handover release` never rewrites the record either"
    )]
    Conflict {
        /// What the record says.
        record_db: String,
        /// Its Region.
        record_region: String,
        /// Its epoch.
        epoch: i64,
        /// What RDS says.
        writer: String,
    },
    /// A describe failed.
    #[error(transparent)]
    Aws(#[from] AwsError),
    /// The table failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Budget of each DescribeDBInstances call.
const DESCRIBE_BUDGET: Duration = Duration::from_secs(10);

/// Write the primary record for `plan` from RDS reality: `p` describes in
/// P's Region, `s` in S's.
pub async fn init_primary_record<P: DbInspector, S: DbInspector>(
    plan: &Plan,
    p: &P,
    s: &S,
    store: &Store,
    now: DateTime<Utc>,
) -> Result<Initialised, InitError> {
    if plan.database.kind == crate::plan::DatabaseKind::AuroraGlobal {
        return Err(InitError::Ambiguous(
            "database.kind aurora_global: Aurora members have no replication source to read the writer from, and init does not support global clusters yet".into(),
        ));
    }
    let (ps, ss) = (&plan.regions.primary, &plan.regions.standby);
    let found = |which: &'static str, site: &Site| InitError::NotFound {
        which,
        id: site.db_instance_id.clone(),
        region: site.region.clone(),
    };
    let pi = p
        .describe(&ps.db_instance_id, DESCRIBE_BUDGET)
        .await?
        .ok_or_else(|| found("primary", ps))?;
    let si = s
        .describe(&ss.db_instance_id, DESCRIBE_BUDGET)
        .await?
        .ok_or_else(|| found("standby", ss))?;
    // A cross-Region replica names its source by ARN; a same-Region one by id.
    let replica_of = |replica: &crate::adapters::DbInstance,
                      source: &crate::adapters::DbInstance| {
        replica
            .replication_source
            .as_deref()
            .is_some_and(|src| src == source.arn || src == source.id)
    };
    let describe = |d: &crate::adapters::DbInstance| match &d.replication_source {
        Some(src) => format!("{} is a replica of {src}", d.id),
        None => format!("{} is a writer (no replication source)", d.id),
    };
    let writer = if pi.replication_source.is_none() && replica_of(&si, &pi) {
        ps
    } else if si.replication_source.is_none() && replica_of(&pi, &si) {
        // After a failover S writes and P (re-protected) replicates from it.
        ss
    } else {
        return Err(InitError::Ambiguous(format!(
            "{}; {}",
            describe(&pi),
            describe(&si)
        )));
    };
    match store
        .init_primary(&writer.region, &writer.db_instance_id, now)
        .await?
    {
        InitOutcome::Created(r) => Ok(Initialised::Created(r)),
        InitOutcome::Exists(r)
            if r.region == writer.region && r.db_instance_id == writer.db_instance_id =>
        {
            Ok(Initialised::AlreadyThere(r))
        }
        InitOutcome::Exists(r) => Err(InitError::Conflict {
            record_db: r.db_instance_id,
            record_region: r.region,
            epoch: r.epoch,
            writer: format!("{} in {}", writer.db_instance_id, writer.region),
        }),
    }
}
