//! Switch: make clients and writers use S.
//!
//! Traffic moves by the plan's mode, preferring data-plane mechanisms:
//! Route 53 health-check failover (confirm P's check fails; if it does not,
//! invert it), ARC routing controls, or a record UPSERT as the fallback. Then
//! the writer endpoint moves: a private CNAME or an SSM parameter. Every
//! change is reported with its previous value, for failback.

use super::StepError;
use crate::adapters::{AwsError, HealthChecks, bounded, call_error};
use crate::aws::Aws;
use crate::execution::{Change, ExecutionState, SwitchResult};
use crate::plan::{SwitchMode, WriterEndpoint};
use chrono::{DateTime, Utc};
use std::time::Duration;
use tracing::{info, instrument};

/// Invert a health check (route53:GetHealthCheck, route53:UpdateHealthCheck).
pub trait HealthCheckControl {
    /// Current `Inverted` flag and version.
    fn inverted(
        &self,
        id: &str,
    ) -> impl std::future::Future<Output = Result<(bool, i64), AwsError>> + Send;
    /// Set `Inverted`, conditional on `version` (Route 53 refuses a stale version).
    fn set_inverted(
        &self,
        id: &str,
        version: i64,
        inverted: bool,
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
    /// UPSERT a simple record and wait until the change is INSYNC (bounded).
    fn upsert(
        &self,
        zone: &str,
        name: &str,
        rtype: &str,
        value: &str,
        budget: Duration,
    ) -> impl std::future::Future<Output = Result<String, AwsError>> + Send;
}

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
    async fn inverted(&self, id: &str) -> Result<(bool, i64), AwsError> {
        let out = self
            .client
            .get_health_check()
            .health_check_id(id)
            .send()
            .await
            .map_err(|e| call_error("route53", "GetHealthCheck", R53, e))?;
        let hc = out.health_check.ok_or_else(|| AwsError::Shape {
            service: "route53",
            op: "GetHealthCheck",
            region: R53.into(),
            problem: format!("health check {id} missing"),
        })?;
        let inverted = hc
            .health_check_config()
            .and_then(|c| c.inverted())
            .unwrap_or(false);
        Ok((inverted, hc.health_check_version))
    }

    #[instrument(skip(self))]
    async fn set_inverted(&self, id: &str, version: i64, inverted: bool) -> Result<(), AwsError> {
        self.client
            .update_health_check()
            .health_check_id(id)
            .health_check_version(version)
            .inverted(inverted)
            .send()
            .await
            .map_err(|e| call_error("route53", "UpdateHealthCheck", R53, e))?;
        Ok(())
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
    ) -> Result<String, AwsError> {
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
        let out = self
            .client
            .change_resource_record_sets()
            .hosted_zone_id(zone)
            .change_batch(batch)
            .send()
            .await
            .map_err(|e| call_error("route53", "ChangeResourceRecordSets", R53, e))?;
        let info = out
            .change_info
            .ok_or_else(|| shape("no ChangeInfo".into()))?;
        let id = info.id.clone();
        if info.status == ChangeStatus::Insync {
            return Ok(id);
        }
        bounded("route53", "GetChange", R53, budget, async {
            loop {
                let c = self
                    .client
                    .get_change()
                    .id(&id)
                    .send()
                    .await
                    .map_err(|e| call_error("route53", "GetChange", R53, e))?;
                if c.change_info
                    .is_some_and(|i| i.status == ChangeStatus::Insync)
                {
                    return Ok(id.clone());
                }
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
        })
        .await
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
pub struct ArcClusters {
    clients: Vec<(String, aws_sdk_route53recoverycluster::Client)>,
}

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

/// The capabilities switch uses.
pub struct SwitchDeps<'a, H, C, R, A, P> {
    /// Health-check status (to confirm P's check is failing).
    pub health: &'a H,
    /// Health-check inversion.
    pub checks: &'a C,
    /// Record sets (public and private zones).
    pub records: &'a R,
    /// ARC routing controls.
    pub arc: &'a A,
    /// SSM parameters in S.
    pub params: &'a P,
}

/// Switch traffic and writers to S.
pub async fn switch<H, C, R, A, P>(
    state: &ExecutionState,
    deps: &SwitchDeps<'_, H, C, R, A, P>,
    now: impl Fn() -> DateTime<Utc>,
) -> Result<SwitchResult, StepError>
where
    H: HealthChecks,
    C: HealthCheckControl,
    R: RecordSets,
    A: RoutingControls,
    P: Parameters,
{
    let plan = &state.input.plan;
    let dns = &plan.dns;
    let budget = Duration::from_millis(plan.timings.call_timeout_ms);
    let mut changes = Vec::new();
    match dns.switch_mode {
        SwitchMode::HealthCheckFailover => {
            let id = &plan.regions.primary.health_check_id;
            let share = deps
                .health
                .healthy_share(id, budget)
                .await
                .ok()
                .map(|(s, _)| s);
            let failing = share.is_some_and(|s| s < plan.detection.healthy_share_below);
            let (inverted, version) = deps.checks.inverted(id).await?;
            if !failing && !inverted {
                // P's check is green (e.g. app dead, check shallow): force failover.
                deps.checks.set_inverted(id, version, true).await?;
                changes.push(Change {
                    what: format!("route53:health_check:{id}:inverted"),
                    previous: Some("false".into()),
                    now: "true".into(),
                });
            } else {
                info!(health_check = %id, ?share, inverted, "P's health check already fails: Route 53 answers with S");
            }
        }
        SwitchMode::RecordUpsert => {
            let previous = deps
                .records
                .value(&dns.hosted_zone_id, &dns.record_name, "CNAME")
                .await?;
            if previous.as_deref().map(|v| v.trim_end_matches('.'))
                != Some(dns.standby_target.trim_end_matches('.'))
            {
                deps.records
                    .upsert(
                        &dns.hosted_zone_id,
                        &dns.record_name,
                        "CNAME",
                        &dns.standby_target,
                        budget * 6,
                    )
                    .await?;
                changes.push(Change {
                    what: format!("route53:{}:{} CNAME", dns.hosted_zone_id, dns.record_name),
                    previous,
                    now: dns.standby_target.clone(),
                });
            }
        }
        SwitchMode::RoutingControl => {
            let (p, s) = (&plan.regions.primary, &plan.regions.standby);
            let (Some(p_arn), Some(s_arn)) = (&p.routing_control_arn, &s.routing_control_arn)
            else {
                return Err(StepError::Precondition(
                    "routing control ARNs missing from the plan".into(),
                ));
            };
            // S on before P off: never both off.
            deps.arc.set(s_arn, true).await?;
            changes.push(Change {
                what: format!("arc:{s_arn}"),
                previous: None,
                now: "On".into(),
            });
            deps.arc.set(p_arn, false).await?;
            changes.push(Change {
                what: format!("arc:{p_arn}"),
                previous: None,
                now: "Off".into(),
            });
        }
    }
    match &dns.writer {
        WriterEndpoint::Cname {
            hosted_zone_id,
            name,
            standby_target,
        } => {
            let previous = deps.records.value(hosted_zone_id, name, "CNAME").await?;
            if previous.as_deref().map(|v| v.trim_end_matches('.'))
                != Some(standby_target.trim_end_matches('.'))
            {
                deps.records
                    .upsert(hosted_zone_id, name, "CNAME", standby_target, budget * 6)
                    .await?;
                changes.push(Change {
                    what: format!("route53:{hosted_zone_id}:{name} CNAME (writer)"),
                    previous,
                    now: standby_target.clone(),
                });
            }
        }
        WriterEndpoint::SsmParameter {
            name,
            standby_value,
        } => {
            let previous = deps.params.get(name).await?;
            if previous.as_deref() != Some(standby_value.as_str()) {
                deps.params.put(name, standby_value).await?;
                changes.push(Change {
                    what: format!("ssm:{name} (writer)"),
                    previous,
                    now: standby_value.clone(),
                });
            }
        }
    }
    let switched_at = now();
    info!(incident = %state.input.incident_id, mode = ?dns.switch_mode, changes = changes.len(), "traffic and writers point at S");
    Ok(SwitchResult {
        mode: dns.switch_mode,
        switched_at,
        changes,
    })
}
