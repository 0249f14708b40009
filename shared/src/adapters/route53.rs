//! Route 53 health-check status (route53:GetHealthCheckStatus).

use super::{AwsError, bounded, call_error};
use crate::aws::{Aws, GLOBAL_METRICS_REGION};
use std::time::Duration;
use tracing::instrument;

/// Read the status of a health check: the share of Route 53 checkers that
/// report it healthy.
pub trait HealthChecks {
    /// Healthy share in 0..=1 and the number of checkers that reported.
    fn healthy_share(
        &self,
        health_check_id: &str,
        budget: Duration,
    ) -> impl std::future::Future<Output = Result<(f64, usize), AwsError>> + Send;
}

/// Route 53 over the SDK.
#[derive(Debug, Clone)]
pub struct Route53 {
    client: aws_sdk_route53::Client,
}

impl Route53 {
    /// Route 53's client (its API lives in us-east-1).
    pub async fn new(aws: &Aws) -> Self {
        Self {
            client: aws.route53().await,
        }
    }

    /// The SDK client, for the other Route 53 adapters.
    pub fn client(&self) -> &aws_sdk_route53::Client {
        &self.client
    }
}

impl HealthChecks for Route53 {
    #[instrument(skip(self))]
    async fn healthy_share(
        &self,
        health_check_id: &str,
        budget: Duration,
    ) -> Result<(f64, usize), AwsError> {
        bounded(
            "route53",
            "GetHealthCheckStatus",
            GLOBAL_METRICS_REGION,
            budget,
            async {
                let out = self
                    .client
                    .get_health_check_status()
                    .health_check_id(health_check_id)
                    .send()
                    .await
                    .map_err(|e| {
                        call_error("route53", "GetHealthCheckStatus", GLOBAL_METRICS_REGION, e)
                    })?;
                let obs = out.health_check_observations();
                if obs.is_empty() {
                    return Err(AwsError::Shape {
                        service: "route53",
                        op: "GetHealthCheckStatus",
                        region: GLOBAL_METRICS_REGION.into(),
                        problem: "no checker reported".into(),
                    });
                }
                let healthy = obs
                    .iter()
                    .filter(|o| {
                        o.status_report()
                            .and_then(|r| r.status())
                            .is_some_and(|s| s.starts_with("Success"))
                    })
                    .count();
                Ok((healthy as f64 / obs.len() as f64, obs.len()))
            },
        )
        .await
    }
}
