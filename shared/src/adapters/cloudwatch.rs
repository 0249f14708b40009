//! CloudWatch: alarm state (cloudwatch:DescribeAlarms) and replica lag
//! (cloudwatch:GetMetricData). Pinned to aws-sdk-cloudwatch 1.99 (awsQuery),
//! which both moto and AWS serve.

use super::{AwsError, bounded, call_error};
use crate::aws::Aws;
use chrono::{DateTime, Utc};
use std::time::Duration;
use tracing::instrument;

/// Read an alarm's state.
pub trait Alarms {
    /// `OK`, `ALARM` or `INSUFFICIENT_DATA`.
    fn alarm_state(
        &self,
        name: &str,
        budget: Duration,
    ) -> impl std::future::Future<Output = Result<String, AwsError>> + Send;
}

/// One ReplicaLag sample.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LagSample {
    /// Seconds behind the source; -1 means replication stopped.
    pub seconds: f64,
    /// When the sample was taken.
    pub at: DateTime<Utc>,
}

/// Read a replica's lag.
pub trait ReplicaLag {
    /// The newest ReplicaLag sample of `db_instance_id` in the last `window`
    /// (`None` when there is none).
    fn latest_lag(
        &self,
        db_instance_id: &str,
        now: DateTime<Utc>,
        window: chrono::Duration,
        budget: Duration,
    ) -> impl std::future::Future<Output = Result<Option<LagSample>, AwsError>> + Send;
}

/// CloudWatch in one Region.
#[derive(Debug, Clone)]
pub struct CloudWatch {
    client: aws_sdk_cloudwatch::Client,
    region: String,
}

impl CloudWatch {
    /// CloudWatch in `region`.
    pub async fn new(aws: &Aws, region: &str) -> Self {
        Self {
            client: aws.cloudwatch(region).await,
            region: region.to_owned(),
        }
    }
}

impl Alarms for CloudWatch {
    #[instrument(skip(self))]
    async fn alarm_state(&self, name: &str, budget: Duration) -> Result<String, AwsError> {
        bounded(
            "cloudwatch",
            "DescribeAlarms",
            &self.region,
            budget,
            async {
                let out = self
                    .client
                    .describe_alarms()
                    .alarm_names(name)
                    .send()
                    .await
                    .map_err(|e| call_error("cloudwatch", "DescribeAlarms", &self.region, e))?;
                out.metric_alarms()
                    .first()
                    .and_then(|a| a.state_value())
                    .map(|s| s.as_str().to_owned())
                    .ok_or_else(|| AwsError::Shape {
                        service: "cloudwatch",
                        op: "DescribeAlarms",
                        region: self.region.clone(),
                        problem: format!("alarm {name} not found"),
                    })
            },
        )
        .await
    }
}

impl ReplicaLag for CloudWatch {
    #[instrument(skip(self))]
    async fn latest_lag(
        &self,
        db_instance_id: &str,
        now: DateTime<Utc>,
        window: chrono::Duration,
        budget: Duration,
    ) -> Result<Option<LagSample>, AwsError> {
        use aws_sdk_cloudwatch::primitives::DateTime as AwsTime;
        use aws_sdk_cloudwatch::types::{Dimension, Metric, MetricDataQuery, MetricStat, ScanBy};
        bounded("cloudwatch", "GetMetricData", &self.region, budget, async {
            let metric = Metric::builder()
                .namespace("AWS/RDS")
                .metric_name("ReplicaLag")
                .dimensions(
                    Dimension::builder()
                        .name("DBInstanceIdentifier")
                        .value(db_instance_id)
                        .build(),
                )
                .build();
            // The worst lag of each minute, and its lowest: RDS publishes -1
            // when replication has stopped, which a minute's Maximum hides
            // behind the samples taken before it stopped.
            let query = |id: &str, stat: &str| {
                MetricDataQuery::builder()
                    .id(id)
                    .metric_stat(
                        MetricStat::builder()
                            .metric(metric.clone())
                            .period(60)
                            .stat(stat)
                            .build(),
                    )
                    .return_data(true)
                    .build()
            };
            let out = self
                .client
                .get_metric_data()
                .metric_data_queries(query("lag", "Maximum"))
                .metric_data_queries(query("stopped", "Minimum"))
                .start_time(AwsTime::from_millis((now - window).timestamp_millis()))
                .end_time(AwsTime::from_millis(
                    (now + chrono::Duration::minutes(1)).timestamp_millis(),
                ))
                .scan_by(ScanBy::TimestampDescending)
                .send()
                .await
                .map_err(|e| call_error("cloudwatch", "GetMetricData", &self.region, e))?;
            let newest = |id: &str| {
                out.metric_data_results()
                    .iter()
                    .find(|r| r.id() == Some(id))
                    .and_then(|r| {
                        r.timestamps()
                            .iter()
                            .zip(r.values())
                            .filter_map(|(t, v)| {
                                DateTime::<Utc>::from_timestamp_millis(t.to_millis().ok()?)
                                    .map(|at| (at, *v))
                            })
                            .max_by_key(|(at, _)| *at)
                    })
            };
            Ok(match (newest("lag"), newest("stopped")) {
                (Some((at, _)), Some((stopped_at, min))) if min < 0.0 && stopped_at >= at => {
                    Some(LagSample {
                        seconds: -1.0,
                        at: stopped_at,
                    })
                }
                (Some((at, seconds)), _) => Some(LagSample { seconds, at }),
                (None, _) => None,
            })
        })
        .await
    }
}
