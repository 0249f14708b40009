//! The traffic levers and what reads them back: Route 53 health checks,
//! record sets and TestDNSAnswer; ARC routing controls; SSM parameters.
//!
//! Switch pulls these levers; verify, detect, diagnose and readiness read
//! them. Each capability is a trait; the structs here are the AWS calls.

use super::{AwsError, bounded, call_error};
use crate::aws::Aws;
use std::time::Duration;
use tracing::instrument;

/// A health check's `Inverted` and `Disabled` settings
/// (route53:GetHealthCheck, route53:UpdateHealthCheck).
pub trait HealthCheckControl {
    /// Current (`Inverted`, `Disabled`).
    fn flags(
        &self,
        id: &str,
        budget: Duration,
    ) -> impl std::future::Future<Output = Result<(bool, bool), AwsError>> + Send;
    /// Set both. Absolute values, so no version condition is needed.
    fn set_flags(
        &self,
        id: &str,
        inverted: bool,
        disabled: bool,
        budget: Duration,
    ) -> impl std::future::Future<Output = Result<(), AwsError>> + Send;
}

/// Read and UPSERT records (route53:ListResourceRecordSets,
/// route53:ChangeResourceRecordSets, route53:GetChange).
pub trait RecordSets {
    /// The value of a simple record, if any.
    fn value(
        &self,
        zone: &str,
        name: &str,
        rtype: &str,
    ) -> impl std::future::Future<Output = Result<Option<String>, AwsError>> + Send;
    /// UPSERT a simple record within `budget`, or [`CHANGE_BUDGET_FLOOR`]
    /// when that is longer: the change's ID, and whether Route 53 already
    /// says INSYNC. It does not wait for INSYNC.
    fn upsert(
        &self,
        zone: &str,
        name: &str,
        rtype: &str,
        value: &str,
        budget: Duration,
    ) -> impl std::future::Future<Output = Result<(String, bool), AwsError>> + Send;
    /// Whether the change `id` is INSYNC now (one GetChange within `budget`).
    fn synced(
        &self,
        id: &str,
        budget: Duration,
    ) -> impl std::future::Future<Output = Result<bool, AwsError>> + Send;
}

/// The least time a record change gets: two of the SDK's 10 s attempts.
/// Route 53's control plane is in us-east-1, and a slow change that
/// succeeds is better than a step retried without knowing.
pub const CHANGE_BUDGET_FLOOR: Duration = Duration::from_secs(20);

/// Set ARC routing controls (route53-recovery-cluster:UpdateRoutingControlState).
pub trait RoutingControls {
    /// Turn `arn` on or off, trying each cluster endpoint in turn.
    fn set(
        &self,
        arn: &str,
        on: bool,
    ) -> impl std::future::Future<Output = Result<(), AwsError>> + Send;
}

/// Read and write SSM parameters (ssm:GetParameter, ssm:PutParameter).
pub trait Parameters {
    /// Current value.
    fn get(
        &self,
        name: &str,
    ) -> impl std::future::Future<Output = Result<Option<String>, AwsError>> + Send;
    /// Overwrite.
    fn put(
        &self,
        name: &str,
        value: &str,
    ) -> impl std::future::Future<Output = Result<(), AwsError>> + Send;
}

const R53: &str = "us-east-1";

/// Route 53's control plane over the SDK.
pub struct Route53Control {
    client: aws_sdk_route53::Client,
}

impl Route53Control {
    /// Route 53 (its control plane is in us-east-1).
    pub async fn new(aws: &Aws) -> Self {
        Self {
            client: aws.route53().await,
        }
    }

    /// The SDK client.
    pub fn client(&self) -> &aws_sdk_route53::Client {
        &self.client
    }
}

impl HealthCheckControl for Route53Control {
    #[instrument(skip(self))]
    async fn flags(&self, id: &str, budget: Duration) -> Result<(bool, bool), AwsError> {
        bounded("route53", "GetHealthCheck", R53, budget, async {
            let out = self
                .client
                .get_health_check()
                .health_check_id(id)
                .send()
                .await
                .map_err(|e| call_error("route53", "GetHealthCheck", R53, e))?;
            let config = out
                .health_check
                .and_then(|hc| hc.health_check_config)
                .ok_or_else(|| AwsError::Shape {
                    service: "route53",
                    op: "GetHealthCheck",
                    region: R53.into(),
                    problem: format!("health check {id} missing"),
                })?;
            Ok((
                config.inverted().unwrap_or(false),
                config.disabled().unwrap_or(false),
            ))
        })
        .await
    }

    #[instrument(skip(self))]
    async fn set_flags(
        &self,
        id: &str,
        inverted: bool,
        disabled: bool,
        budget: Duration,
    ) -> Result<(), AwsError> {
        bounded("route53", "UpdateHealthCheck", R53, budget, async {
            self.client
                .update_health_check()
                .health_check_id(id)
                .inverted(inverted)
                .disabled(disabled)
                .send()
                .await
                .map_err(|e| call_error("route53", "UpdateHealthCheck", R53, e))?;
            Ok(())
        })
        .await
    }
}

impl RecordSets for Route53Control {
    #[instrument(skip(self))]
    async fn value(&self, zone: &str, name: &str, rtype: &str) -> Result<Option<String>, AwsError> {
        let want = format!("{}.", name.trim_end_matches('.'));
        let out = self
            .client
            .list_resource_record_sets()
            .hosted_zone_id(zone)
            .start_record_name(&want)
            .start_record_type(rtype.into())
            .max_items(10)
            .send()
            .await
            .map_err(|e| call_error("route53", "ListResourceRecordSets", R53, e))?;
        Ok(out
            .resource_record_sets()
            .iter()
            .find(|r| {
                r.name() == want && r.r#type().as_str() == rtype && r.set_identifier().is_none()
            })
            .and_then(|r| r.resource_records().first().map(|v| v.value().to_owned())))
    }

    #[instrument(skip(self))]
    async fn upsert(
        &self,
        zone: &str,
        name: &str,
        rtype: &str,
        value: &str,
        budget: Duration,
    ) -> Result<(String, bool), AwsError> {
        use aws_sdk_route53::types::{
            Change, ChangeAction, ChangeBatch, ChangeStatus, ResourceRecord, ResourceRecordSet,
        };
        let shape = |problem: String| AwsError::Shape {
            service: "route53",
            op: "ChangeResourceRecordSets",
            region: R53.into(),
            problem,
        };
        let rrset = ResourceRecordSet::builder()
            .name(name)
            .r#type(rtype.into())
            .ttl(60)
            .resource_records(
                ResourceRecord::builder()
                    .value(value)
                    .build()
                    .map_err(|e| shape(e.to_string()))?,
            )
            .build()
            .map_err(|e| shape(e.to_string()))?;
        let batch = ChangeBatch::builder()
            .comment("Handover failover")
            .changes(
                Change::builder()
                    .action(ChangeAction::Upsert)
                    .resource_record_set(rrset)
                    .build()
                    .map_err(|e| shape(e.to_string()))?,
            )
            .build()
            .map_err(|e| shape(e.to_string()))?;
        let limit = budget.max(CHANGE_BUDGET_FLOOR);
        let out = bounded("route53", "ChangeResourceRecordSets", R53, limit, async {
            self.client
                .change_resource_record_sets()
                .hosted_zone_id(zone)
                .change_batch(batch)
                .send()
                .await
                .map_err(|e| call_error("route53", "ChangeResourceRecordSets", R53, e))
        })
        .await?;
        let info = out
            .change_info
            .ok_or_else(|| shape("no ChangeInfo".into()))?;
        Ok((info.id, info.status == ChangeStatus::Insync))
    }

    #[instrument(skip(self))]
    async fn synced(&self, id: &str, budget: Duration) -> Result<bool, AwsError> {
        let c = bounded("route53", "GetChange", R53, budget, async {
            self.client
                .get_change()
                .id(id)
                .send()
                .await
                .map_err(|e| call_error("route53", "GetChange", R53, e))
        })
        .await?;
        Ok(c.change_info
            .is_some_and(|i| i.status == aws_sdk_route53::types::ChangeStatus::Insync))
    }
}

/// SSM Parameter Store in one Region.
pub struct Ssm {
    client: aws_sdk_ssm::Client,
    region: String,
}

impl Ssm {
    /// SSM in `region`.
    pub async fn new(aws: &Aws, region: &str) -> Self {
        Self {
            client: aws.ssm(region).await,
            region: region.to_owned(),
        }
    }
}

impl Parameters for Ssm {
    async fn get(&self, name: &str) -> Result<Option<String>, AwsError> {
        match self.client.get_parameter().name(name).send().await {
            Ok(out) => Ok(out.parameter.and_then(|p| p.value)),
            Err(e) => {
                let err = call_error("ssm", "GetParameter", &self.region, e);
                if err.code() == Some("ParameterNotFound") {
                    Ok(None)
                } else {
                    Err(err)
                }
            }
        }
    }
    async fn put(&self, name: &str, value: &str) -> Result<(), AwsError> {
        self.client
            .put_parameter()
            .name(name)
            .value(value)
            .overwrite(true)
            .r#type(aws_sdk_ssm::types::ParameterType::String)
            .send()
            .await
            .map_err(|e| call_error("ssm", "PutParameter", &self.region, e))?;
        Ok(())
    }
}

/// ARC's data plane: one client per cluster endpoint, tried in turn.
#[cfg(feature = "arc")]
pub struct ArcClusters {
    clients: Vec<(String, aws_sdk_route53recoverycluster::Client)>,
}

#[cfg(feature = "arc")]
impl ArcClusters {
    /// Clients for the plan's cluster endpoints.
    pub async fn new(aws: &Aws, endpoints: &[crate::plan::ArcEndpoint]) -> Self {
        let mut clients = Vec::new();
        for e in endpoints {
            let conf =
                aws_sdk_route53recoverycluster::config::Builder::from(&aws.config(&e.region).await)
                    .endpoint_url(&e.endpoint)
                    .build();
            clients.push((
                e.endpoint.clone(),
                aws_sdk_route53recoverycluster::Client::from_conf(conf),
            ));
        }
        Self { clients }
    }
}

#[cfg(feature = "arc")]
impl RoutingControls for ArcClusters {
    #[instrument(skip(self))]
    async fn set(&self, arn: &str, on: bool) -> Result<(), AwsError> {
        use aws_sdk_route53recoverycluster::types::RoutingControlState;
        let state = if on {
            RoutingControlState::On
        } else {
            RoutingControlState::Off
        };
        let mut last = None;
        for (endpoint, client) in &self.clients {
            match client
                .update_routing_control_state()
                .routing_control_arn(arn)
                .routing_control_state(state.clone())
                .send()
                .await
            {
                Ok(_) => return Ok(()),
                Err(e) => {
                    tracing::warn!(endpoint, "ARC endpoint failed; trying the next");
                    last = Some(call_error(
                        "route53-recovery-cluster",
                        "UpdateRoutingControlState",
                        endpoint,
                        e,
                    ));
                }
            }
        }
        Err(last.unwrap_or(AwsError::Shape {
            service: "route53-recovery-cluster",
            op: "UpdateRoutingControlState",
            region: String::new(),
            problem: "no cluster endpoints in the plan".into(),
        }))
    }
}

/// Ask Route 53 what a name resolves to (route53:TestDNSAnswer).
pub trait DnsAnswers {
    /// The record data Route 53 answers with.
    fn answer(
        &self,
        zone: &str,
        name: &str,
        rtype: &str,
    ) -> impl std::future::Future<Output = Result<Vec<String>, AwsError>> + Send;

    /// The record sets named `name` in `zone` (route53:ListResourceRecordSets):
    /// (set identifier, TTL; None for an alias, which has its target's).
    /// TestDNSAnswer carries no TTL; this is how long a client may keep an
    /// answer after Route 53 changed it.
    fn record_ttls(
        &self,
        zone: &str,
        name: &str,
    ) -> impl std::future::Future<Output = Result<Vec<(String, Option<i64>)>, AwsError>> + Send;
}

impl DnsAnswers for Route53Control {
    #[instrument(skip(self))]
    async fn record_ttls(
        &self,
        zone: &str,
        name: &str,
    ) -> Result<Vec<(String, Option<i64>)>, AwsError> {
        let out = self
            .client()
            .list_resource_record_sets()
            .hosted_zone_id(zone)
            .start_record_name(name)
            .max_items(10)
            .send()
            .await
            .map_err(|e| call_error("route53", "ListResourceRecordSets", "us-east-1", e))?;
        let want = name.trim_end_matches('.');
        Ok(out
            .resource_record_sets()
            .iter()
            .filter(|r| r.name().trim_end_matches('.').eq_ignore_ascii_case(want))
            .map(|r| {
                (
                    r.set_identifier()
                        .unwrap_or("(no set identifier)")
                        .to_owned(),
                    r.ttl(),
                )
            })
            .collect())
    }

    #[instrument(skip(self))]
    async fn answer(&self, zone: &str, name: &str, rtype: &str) -> Result<Vec<String>, AwsError> {
        let out = self
            .client()
            .test_dns_answer()
            .hosted_zone_id(zone)
            .record_name(name)
            .record_type(rtype.into())
            .send()
            .await
            .map_err(|e| call_error("route53", "TestDNSAnswer", "us-east-1", e))?;
        Ok(out.record_data().to_vec())
    }
}

/// Where the writer endpoint points now.
pub trait WriterEndpointLookup {
    /// The private CNAME's value or the SSM parameter's (None: absent).
    fn current(
        &self,
        writer: &crate::plan::WriterEndpoint,
    ) -> impl std::future::Future<Output = Result<Option<String>, AwsError>> + Send;
}

/// The writer endpoint read where switch writes it (route53:ListResourceRecordSets
/// on the writer zone, or ssm:GetParameter in S).
pub struct WriterLookup<'a> {
    /// The writer zone's records.
    pub records: &'a Route53Control,
    /// S's SSM parameters.
    pub params: &'a Ssm,
}

impl WriterEndpointLookup for WriterLookup<'_> {
    async fn current(
        &self,
        writer: &crate::plan::WriterEndpoint,
    ) -> Result<Option<String>, AwsError> {
        match writer {
            crate::plan::WriterEndpoint::Cname {
                hosted_zone_id,
                name,
                ..
            } => self.records.value(hosted_zone_id, name, "CNAME").await,
            crate::plan::WriterEndpoint::SsmParameter { name, .. } => self.params.get(name).await,
        }
    }
}
