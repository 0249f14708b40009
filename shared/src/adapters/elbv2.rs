//! Load-balancer target health (elasticloadbalancing:DescribeTargetHealth).

use super::{AwsError, bounded, call_error};
use crate::aws::Aws;
use serde::{Deserialize, Serialize};
use std::time::Duration;
use tracing::instrument;

/// How many of a target group's registered targets the load balancer
/// considers healthy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetCounts {
    /// Targets in state `healthy`.
    pub healthy: usize,
    /// All registered targets (any state).
    pub total: usize,
}

/// Read target health.
pub trait TargetHealth {
    /// Count the healthy targets of `target_group_arn`.
    fn counts(
        &self,
        target_group_arn: &str,
        budget: Duration,
    ) -> impl std::future::Future<Output = Result<TargetCounts, AwsError>> + Send;
}

/// ELBv2 over the SDK, in one Region.
#[derive(Debug, Clone)]
pub struct Elbv2 {
    client: aws_sdk_elasticloadbalancingv2::Client,
    region: String,
}

impl Elbv2 {
    /// ELBv2 in `region`.
    pub async fn new(aws: &Aws, region: &str) -> Self {
        Self {
            client: aws.elbv2(region).await,
            region: region.to_owned(),
        }
    }
}

impl TargetHealth for Elbv2 {
    #[instrument(skip(self))]
    async fn counts(
        &self,
        target_group_arn: &str,
        budget: Duration,
    ) -> Result<TargetCounts, AwsError> {
        const OP: &str = "DescribeTargetHealth";
        bounded("elasticloadbalancing", OP, &self.region, budget, async {
            let out = self
                .client
                .describe_target_health()
                .target_group_arn(target_group_arn)
                .send()
                .await
                .map_err(|e| call_error("elasticloadbalancing", OP, &self.region, e))?;
            let states = out.target_health_descriptions();
            let healthy = states
                .iter()
                .filter(|d| {
                    d.target_health()
                        .and_then(|h| h.state())
                        .is_some_and(|s| s.as_str() == "healthy")
                })
                .count();
            Ok(TargetCounts {
                healthy,
                total: states.len(),
            })
        })
        .await
    }
}
