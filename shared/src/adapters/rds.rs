//! RDS: describing instances (rds:DescribeDBInstances). The fence and
//! promotion traits live with their steps and reuse [`Rds`].

use super::{AwsError, bounded, call_error};
use crate::aws::Aws;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::time::Duration;
use tracing::instrument;

/// What Handover needs to know about a DB instance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DbInstance {
    /// Identifier.
    pub id: String,
    /// ARN.
    pub arn: String,
    /// `available`, `modifying`, `backing-up`, …
    pub status: String,
    /// Source of replication, if this is a read replica (identifier or ARN).
    pub replication_source: Option<String>,
    /// Replicas of this instance (identifiers or ARNs).
    pub replicas: Vec<String>,
    /// VPC security groups attached, whatever their membership status.
    pub security_groups: Vec<String>,
    /// Memberships RDS has not applied yet, as `<group>:<status>` (`adding`,
    /// `removing`, …): a change is in effect only when this is empty.
    #[serde(default)]
    pub unsettled_security_groups: Vec<String>,
    /// Master user name.
    pub master_username: Option<String>,
    /// Automated backup retention, days.
    pub backup_retention_days: i32,
    /// Latest restorable time: set once an automated backup exists.
    pub latest_restorable_time: Option<DateTime<Utc>>,
    /// Endpoint address.
    pub endpoint: Option<String>,
    /// The VPC of its DB subnet group (`None` outside a VPC, or not said).
    #[serde(default)]
    pub vpc_id: Option<String>,
    /// A replica's read replication status, as RDS shows it (`None` for an
    /// instance that is not a replica, or when RDS does not say).
    #[serde(default)]
    pub read_replication: Option<ReadReplication>,
}

/// A replica's replication as DescribeDBInstances shows it: the
/// `StatusInfos` entry whose `StatusType` is "read replication" (RDS API
/// Reference, DBInstanceStatusInfo).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadReplication {
    /// `replicating`, `replication stop point set`, `replication stop
    /// point reached`, `error`, `stopped` or `terminated`.
    pub status: String,
    /// RDS's details of an error (blank otherwise).
    pub message: Option<String>,
}

impl DbInstance {
    /// Why RDS says replication to this replica has stopped, if it does:
    /// its read replication status is `error`, `stopped` or `terminated`.
    /// For PostgreSQL this is how RDS says so. Its ReplicaLag has no -1:
    /// that value is MySQL's and MariaDB's (RDS User Guide, read replicas).
    pub fn replication_stopped(&self) -> Option<String> {
        let r = self.read_replication.as_ref()?;
        matches!(r.status.as_str(), "error" | "stopped" | "terminated").then(|| {
            match r.message.as_deref().filter(|m| !m.trim().is_empty()) {
                Some(m) => format!("RDS shows {}'s read replication {}: {m}", self.id, r.status),
                None => format!("RDS shows {}'s read replication {}", self.id, r.status),
            }
        })
    }
}

/// One maintenance action RDS has pending for an instance
/// (DescribePendingMaintenanceActions, `PendingMaintenanceAction`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingMaintenance {
    /// `system-update`, `db-upgrade`, `os-upgrade`, `hardware-maintenance`, …
    pub action: String,
    /// RDS's description.
    pub description: Option<String>,
    /// When RDS will apply it, all opt-ins and forced dates considered
    /// (blank when nothing is scheduled yet).
    pub current_apply: Option<DateTime<Utc>>,
    /// The date after which RDS applies it regardless.
    pub forced_apply: Option<DateTime<Utc>>,
}

/// Read the maintenance RDS has pending for an instance
/// (rds:DescribePendingMaintenanceActions).
pub trait MaintenanceReader {
    /// The pending actions of instance `id` (empty: none).
    fn pending_maintenance(
        &self,
        id: &str,
        budget: Duration,
    ) -> impl std::future::Future<Output = Result<Vec<PendingMaintenance>, AwsError>> + Send;
}

/// Describe DB instances.
pub trait DbInspector {
    /// Describe `id`; `Ok(None)` when it does not exist.
    fn describe(
        &self,
        id: &str,
        budget: Duration,
    ) -> impl std::future::Future<Output = Result<Option<DbInstance>, AwsError>> + Send;
}

/// RDS in one Region.
#[derive(Debug, Clone)]
pub struct Rds {
    client: aws_sdk_rds::Client,
    region: String,
}

impl Rds {
    /// RDS in `region`.
    pub async fn new(aws: &Aws, region: &str) -> Self {
        Self {
            client: aws.rds(region).await,
            region: region.to_owned(),
        }
    }

    /// RDS over an existing client (the wire tests: `handover_testkit::wire`).
    pub fn from_client(client: aws_sdk_rds::Client, region: &str) -> Self {
        Self {
            client,
            region: region.to_owned(),
        }
    }

    /// The Region.
    pub fn region(&self) -> &str {
        &self.region
    }

    /// The SDK client, for the RDS adapters of other steps.
    pub fn client(&self) -> &aws_sdk_rds::Client {
        &self.client
    }
}

fn to_time(t: Option<&aws_sdk_rds::primitives::DateTime>) -> Option<DateTime<Utc>> {
    t.and_then(|t| DateTime::<Utc>::from_timestamp_millis(t.to_millis().ok()?))
}

impl From<&aws_sdk_rds::types::DbInstance> for DbInstance {
    fn from(d: &aws_sdk_rds::types::DbInstance) -> Self {
        DbInstance {
            id: d.db_instance_identifier().unwrap_or_default().to_owned(),
            arn: d.db_instance_arn().unwrap_or_default().to_owned(),
            status: d.db_instance_status().unwrap_or("unknown").to_owned(),
            replication_source: d
                .read_replica_source_db_instance_identifier()
                .map(str::to_owned),
            replicas: d.read_replica_db_instance_identifiers().to_vec(),
            security_groups: d
                .vpc_security_groups()
                .iter()
                .filter_map(|g| g.vpc_security_group_id().map(str::to_owned))
                .collect(),
            unsettled_security_groups: d
                .vpc_security_groups()
                .iter()
                .filter(|g| g.status() != Some("active"))
                .map(|g| {
                    format!(
                        "{}:{}",
                        g.vpc_security_group_id().unwrap_or("?"),
                        g.status().unwrap_or("unknown")
                    )
                })
                .collect(),
            master_username: d.master_username().map(str::to_owned),
            backup_retention_days: d.backup_retention_period().unwrap_or(0),
            latest_restorable_time: to_time(d.latest_restorable_time()),
            endpoint: d.endpoint().and_then(|e| e.address()).map(str::to_owned),
            vpc_id: d
                .db_subnet_group()
                .and_then(|g| g.vpc_id())
                .map(str::to_owned),
            read_replication: d
                .status_infos()
                .iter()
                .find(|i| i.status_type() == Some("read replication"))
                .map(|i| ReadReplication {
                    status: i.status().unwrap_or("unknown").to_owned(),
                    message: i.message().map(str::to_owned),
                }),
        }
    }
}

impl MaintenanceReader for Rds {
    #[instrument(skip(self), fields(region = %self.region))]
    async fn pending_maintenance(
        &self,
        id: &str,
        budget: Duration,
    ) -> Result<Vec<PendingMaintenance>, AwsError> {
        bounded(
            "rds",
            "DescribePendingMaintenanceActions",
            &self.region,
            budget,
            async {
                // The filter takes an identifier or an ARN (RDS API Reference).
                let filter = aws_sdk_rds::types::Filter::builder()
                    .name("db-instance-id")
                    .values(id)
                    .build();
                let out = self
                    .client
                    .describe_pending_maintenance_actions()
                    .filters(filter)
                    .send()
                    .await
                    .map_err(|e| {
                        call_error("rds", "DescribePendingMaintenanceActions", &self.region, e)
                    })?;
                Ok(out
                    .pending_maintenance_actions()
                    .iter()
                    .filter(|r| {
                        r.resource_identifier()
                            .is_none_or(|arn| names_instance(arn, id))
                    })
                    .flat_map(|r| r.pending_maintenance_action_details())
                    .map(|a| PendingMaintenance {
                        action: a.action().unwrap_or("unknown").to_owned(),
                        description: a.description().map(str::to_owned),
                        current_apply: to_time(a.current_apply_date()),
                        forced_apply: to_time(a.forced_apply_date()),
                    })
                    .collect())
            },
        )
        .await
    }
}

impl DbInspector for Rds {
    #[instrument(skip(self), fields(region = %self.region))]
    async fn describe(&self, id: &str, budget: Duration) -> Result<Option<DbInstance>, AwsError> {
        bounded("rds", "DescribeDBInstances", &self.region, budget, async {
            match self
                .client
                .describe_db_instances()
                .db_instance_identifier(id)
                .send()
                .await
            {
                Ok(out) => Ok(out.db_instances().first().map(DbInstance::from)),
                Err(e) => {
                    let err = call_error("rds", "DescribeDBInstances", &self.region, e);
                    if err.code() == Some("DBInstanceNotFound")
                        || err.code() == Some("DBInstanceNotFoundFault")
                    {
                        Ok(None)
                    } else {
                        Err(err)
                    }
                }
            }
        })
        .await
    }
}

/// Is `source` (identifier or ARN) the instance `id`?
pub fn names_instance(source: &str, id: &str) -> bool {
    source == id || source.ends_with(&format!(":db:{id}"))
}
