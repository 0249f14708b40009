//! Backups of the new primary (rds:DescribeEvents, rds:DescribeDBSnapshots).

use crate::adapters::{AwsError, Rds, call_error};
use crate::report::observed::BackupSeen;
use chrono::{DateTime, Utc};
use tracing::instrument;

/// Completed backups of a DB instance (rds:DescribeEvents, rds:DescribeDBSnapshots).
pub trait BackupHistory {
    /// Completed backups of `id` at or after `since`, oldest first.
    fn backups_since(
        &self,
        id: &str,
        since: DateTime<Utc>,
    ) -> impl std::future::Future<Output = Result<Vec<BackupSeen>, AwsError>> + Send;
}

fn rds_time(t: Option<&aws_smithy_types::DateTime>) -> Option<DateTime<Utc>> {
    t.and_then(|t| t.to_millis().ok())
        .and_then(DateTime::<Utc>::from_timestamp_millis)
}

impl BackupHistory for Rds {
    #[instrument(skip(self), fields(region = %self.region()))]
    async fn backups_since(
        &self,
        id: &str,
        since: DateTime<Utc>,
    ) -> Result<Vec<BackupSeen>, AwsError> {
        let region = self.region().to_owned();
        let events = self
            .client()
            .describe_events()
            .source_type(aws_sdk_rds::types::SourceType::DbInstance)
            .source_identifier(id)
            .start_time(aws_smithy_types::DateTime::from_millis(
                since.timestamp_millis(),
            ))
            .send()
            .await
            .map_err(|e| call_error("rds", "DescribeEvents", &region, e))?;
        let mut out: Vec<BackupSeen> = events
            .events()
            .iter()
            .filter(|e| {
                let m = e.message().unwrap_or_default().to_ascii_lowercase();
                m.contains("finished") && m.contains("backup")
            })
            .filter_map(|e| {
                let at = rds_time(e.date())?;
                (at >= since).then(|| BackupSeen {
                    at,
                    source: format!("rds:DescribeEvents {:?}", e.message().unwrap_or_default()),
                })
            })
            .collect();
        let snaps = self
            .client()
            .describe_db_snapshots()
            .db_instance_identifier(id)
            .snapshot_type("automated")
            .send()
            .await
            .map_err(|e| call_error("rds", "DescribeDBSnapshots", &region, e))?;
        out.extend(snaps.db_snapshots().iter().filter_map(|s| {
            let at = rds_time(s.snapshot_create_time())?;
            (s.status() == Some("available") && at >= since).then(|| BackupSeen {
                at,
                source: format!(
                    "rds:DescribeDBSnapshots automated snapshot {} (create time)",
                    s.db_snapshot_identifier().unwrap_or_default()
                ),
            })
        }));
        out.sort_by_key(|b| b.at);
        Ok(out)
    }
}
