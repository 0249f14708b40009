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
            let query = MetricDataQuery::builder()
                .id("lag")
                .metric_stat(
                    MetricStat::builder()
                        .metric(metric)
                        .period(60)
                        .stat("Maximum")
                        .build(),
                )
                .return_data(true)
                .build();
            let out = self
                .client
                .get_metric_data()
                .metric_data_queries(query)
                .start_time(AwsTime::from_millis((now - window).timestamp_millis()))
                .end_time(AwsTime::from_millis(
                    (now + chrono::Duration::minutes(1)).timestamp_millis(),
                ))
                .scan_by(ScanBy::TimestampDescending)
                .send()
                .await
                .map_err(|e| call_error("cloudwatch", "GetMetricData", &self.region, e))?;
            let Some(result) = out.metric_data_results().first() else {
                return Ok(None);
            };
            let newest = result
                .timestamps()
                .iter()
                .zip(result.values())
                .filter_map(|(t, v)| {
                    DateTime::<Utc>::from_timestamp_millis(t.to_millis().ok()?).map(|at| (at, *v))
                })
                .max_by_key(|(at, _)| *at);
            Ok(newest.map(|(at, seconds)| LagSample { seconds, at }))
        })
        .await
    }
}
