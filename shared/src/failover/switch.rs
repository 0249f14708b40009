//! Switch: make clients and writers use S.
//!
//! The writer endpoint moves first (a private CNAME or an SSM parameter),
//! then traffic, by the plan's mode. Each mode is a lever Handover holds
//! until failback, so traffic cannot drift back to a fenced P:
//! - `routing_control`: ARC routing controls, S on then P off. The cluster
//!   endpoints are ARC's data plane: AWS's recommended failover lever.
//! - `health_check_failover`: P's failover-record health check is set
//!   `Disabled` + `Inverted`, which Route 53 reads as unhealthy whatever P's
//!   endpoint does (Route 53 API Reference, HealthCheckConfig). This is one
//!   control-plane call (UpdateHealthCheck, us-east-1). Route 53 may already
//!   answer S on its own, since P's check fails; the pin keeps it there once
//!   P's endpoint answers again. Reading the settings first is only for the
//!   record; if that read fails, the pin still goes ahead.
//! - `record_upsert`: the public record is UPSERTed to S (control plane).
//!
//! Every value is recorded in the state store before it is replaced
//! (`switch_previous`), for failback and the report, and a re-run reports it.

use super::StepError;
use crate::adapters::{AwsError, bounded, call_error};
use crate::aws::Aws;
use crate::execution::{Change, ExecutionState, SwitchResult};
use crate::plan::{SwitchMode, WriterEndpoint};
use crate::store::Store;
use chrono::{DateTime, Utc};
use std::time::Duration;
use tracing::{info, instrument};

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
pub struct SwitchDeps<'a, C, R, A, P> {
    /// Health-check settings (the traffic lever of `health_check_failover`).
    pub checks: &'a C,
    /// Record sets (public and private zones).
    pub records: &'a R,
    /// ARC routing controls.
    pub arc: &'a A,
    /// SSM parameters in S.
    pub params: &'a P,
    /// The state store: each value is recorded there before it is replaced.
    pub store: &'a Store,
}

/// The settings that pin failover routing to S: a `Disabled` check is
/// always healthy and `Inverted` flips that, so P's check is unhealthy
/// whatever P's endpoint does, until failback puts them back.
const PINNED: (bool, bool) = (true, true);

/// Switch traffic and writers to S: the writer first (every second it points
/// at a read-only replica is a second of failed writes), then traffic. Both
/// moves are attempted whatever happens to the other; each value is recorded
/// in the state store before it is replaced, so a re-run (after a timeout
/// waiting for INSYNC, or a crash) reports what failback must restore.
pub async fn switch<C, R, A, P>(
    state: &ExecutionState,
    execution: &str,
    deps: &SwitchDeps<'_, C, R, A, P>,
    now: impl Fn() -> DateTime<Utc>,
) -> Result<SwitchResult, StepError>
where
    C: HealthCheckControl,
    R: RecordSets,
    A: RoutingControls,
    P: Parameters,
{
    let plan = &state.input.plan;
    let promotion: crate::execution::PromotionResult = state
        .require("promotion")
        .map_err(|e| StepError::Precondition(e.message))?;
    let epoch = promotion.epoch.ok_or_else(|| {
        StepError::Precondition("switch runs only after the promotion completed".into())
    })?;
    let ledger = Ledger {
        store: deps.store,
        epoch,
        execution,
        now: &now,
    };
    let mut changes = Vec::new();
    let writer = move_writer(plan, deps, &ledger, &mut changes).await;
    let traffic = match &state.input.failback {
        // The switch back: P's check gets the settings it had before the
        // failover pinned it (the plan is reversed: P is `standby`).
        Some(fb) if plan.dns.switch_mode == SwitchMode::HealthCheckFailover => {
            unpin(plan, fb, deps, &ledger, &mut changes).await
        }
        _ => move_traffic(plan, deps, &ledger, &mut changes).await,
    };
    match (writer, traffic) {
        (Ok(()), Ok(())) => {}
        (w, t) => {
            for (what, r) in [("the writer endpoint", &w), ("traffic", &t)] {
                if let Err(e) = r {
                    tracing::warn!(error = %crate::error::chain(e), "switch: {what} did not move");
                }
            }
            return Err(w.err().or(t.err()).expect("one of them failed"));
        }
    }
    let switched_at = now();
    info!(incident = %state.input.incident_id, mode = ?plan.dns.switch_mode, changes = changes.len(), "traffic and writers point at S");
    Ok(SwitchResult {
        mode: plan.dns.switch_mode,
        switched_at,
        changes,
    })
}

/// Where switch records each value before replacing it.
struct Ledger<'a, N> {
    store: &'a Store,
    epoch: i64,
    execution: &'a str,
    now: &'a N,
}

impl<N: Fn() -> DateTime<Utc>> Ledger<'_, N> {
    /// Record `current` as what `what` was before the switch (first value
    /// kept) and return the value on record.
    ///
    /// Best effort: S is promoted, and a store that cannot write must not
    /// keep the writer on P. The value is still in the step's result.
    async fn before(&self, what: &str, current: Option<&str>) -> Result<Option<String>, StepError> {
        match self
            .store
            .record_switch_previous(self.epoch, self.execution, what, current, (self.now)())
            .await
        {
            Ok(Some(on_record)) => Ok(on_record),
            Ok(None) => Err(StepError::Refused(format!(
                "the primary record is no longer epoch {} of this execution: another run moved it",
                self.epoch
            ))),
            Err(e) => {
                tracing::warn!(what, error = %crate::error::chain(&e), "could not record the value before the switch; it is in the step's result only");
                Ok(current.map(str::to_owned))
            }
        }
    }

    /// `what` is already at `target`: report the change with the value on
    /// record, if an earlier attempt of this run made it.
    async fn already(
        &self,
        what: &str,
        target: &str,
        changes: &mut Vec<Change>,
    ) -> Result<(), StepError> {
        let rec = match self.store.primary().await {
            Ok(rec) => rec,
            Err(e) => {
                tracing::warn!(what, error = %crate::error::chain(&e), "could not read the value on record; the change is made");
                return Ok(());
            }
        };
        if let Some(previous) = rec
            .filter(|r| {
                r.epoch == self.epoch && r.last_execution.as_deref() == Some(self.execution)
            })
            .and_then(|r| r.switch_previous.get(what).cloned())
        {
            changes.push(Change {
                what: what.to_owned(),
                previous,
                now: target.to_owned(),
            });
        }
        Ok(())
    }
}

async fn move_writer<C, R, A, P, N>(
    plan: &crate::plan::Plan,
    deps: &SwitchDeps<'_, C, R, A, P>,
    ledger: &Ledger<'_, N>,
    changes: &mut Vec<Change>,
) -> Result<(), StepError>
where
    R: RecordSets,
    P: Parameters,
    N: Fn() -> DateTime<Utc>,
{
    let budget = Duration::from_millis(plan.timings.call_timeout_ms);
    match &plan.dns.writer {
        WriterEndpoint::Cname {
            hosted_zone_id,
            name,
            standby_target,
        } => {
            let what = format!("route53:{hosted_zone_id}:{name} CNAME (writer)");
            let cname = (
                hosted_zone_id.as_str(),
                name.as_str(),
                standby_target.as_str(),
            );
            move_cname(deps.records, ledger, what, cname, budget * 6, changes).await?;
        }
        WriterEndpoint::SsmParameter {
            name,
            standby_value,
        } => {
            let what = format!("ssm:{name} (writer)");
            let current = deps.params.get(name).await?;
            if current.as_deref() == Some(standby_value.as_str()) {
                return ledger.already(&what, standby_value, changes).await;
            }
            let previous = ledger.before(&what, current.as_deref()).await?;
            deps.params.put(name, standby_value).await?;
            changes.push(Change {
                what,
                previous,
                now: standby_value.clone(),
            });
        }
    }
    Ok(())
}

async fn move_traffic<C, R, A, P, N>(
    plan: &crate::plan::Plan,
    deps: &SwitchDeps<'_, C, R, A, P>,
    ledger: &Ledger<'_, N>,
    changes: &mut Vec<Change>,
) -> Result<(), StepError>
where
    C: HealthCheckControl,
    R: RecordSets,
    A: RoutingControls,
    N: Fn() -> DateTime<Utc>,
{
    let dns = &plan.dns;
    let budget = Duration::from_millis(plan.timings.call_timeout_ms);
    match dns.switch_mode {
        SwitchMode::HealthCheckFailover => {
            // Route 53 may already answer S (P's check failing), but only for
            // as long as P's endpoint stays down: when it answers again,
            // failover routing would send users back to a fenced P. So
            // Handover always pins: P's check Disabled + Inverted.
            let id = &plan.regions.primary.health_check_id;
            let what = check_lever(id);
            let shown = |(i, d): (bool, bool)| format!("inverted={i}, disabled={d}");
            // Reading the settings is for the record only: when it fails,
            // pin anyway and record them as unknown.
            let current = match deps.checks.flags(id, budget).await {
                Ok(f) => Some(f),
                Err(e) => {
                    tracing::warn!(error = %crate::error::chain(&e), "P's health-check settings unreadable; pinning anyway");
                    None
                }
            };
            let target = shown(PINNED);
            if current == Some(PINNED) {
                return ledger.already(&what, &target, changes).await;
            }
            // Unread settings are not recorded (a re-run that reads them
            // records the real ones); failback puts the defaults back.
            let previous = match current {
                Some(c) => ledger.before(&what, Some(&shown(c))).await?,
                None => Some("unknown (GetHealthCheck failed)".to_owned()),
            };
            // Route 53 answers S already while P's check fails; the pin is
            // what keeps it there once P answers again. A pin that cannot be
            // set (us-east-1's control plane failing) is reported and
            // alerted, not fatal: verify's DNS check decides whether users
            // are on S now.
            let now = match deps.checks.set_flags(id, PINNED.0, PINNED.1, budget).await {
                Ok(()) => target,
                Err(e) => {
                    tracing::error!(health_check = %id, alert = true, error = %crate::error::chain(&e), "P's health check could not be pinned: Route 53 answers by P's check alone");
                    format!(
                        "NOT pinned ({}): Route 53 answers by P's check alone, and would send users back to P if it passes; set Disabled + Inverted on {id} by hand",
                        crate::error::chain(&e)
                    )
                }
            };
            changes.push(Change {
                what,
                previous,
                now,
            });
        }
        SwitchMode::RecordUpsert => {
            let what = format!("route53:{}:{} CNAME", dns.hosted_zone_id, dns.record_name);
            let cname = (
                dns.hosted_zone_id.as_str(),
                dns.record_name.as_str(),
                dns.standby_target.as_str(),
            );
            move_cname(deps.records, ledger, what, cname, budget * 6, changes).await?;
        }
        SwitchMode::RoutingControl => {
            let (p, s) = (&plan.regions.primary, &plan.regions.standby);
            let (Some(p_arn), Some(s_arn)) = (&p.routing_control_arn, &s.routing_control_arn)
            else {
                return Err(StepError::Precondition(
                    "routing control ARNs missing from the plan".into(),
                ));
            };
            // S on before P off: never both off. The states before are not
            // read (that is another cluster call per control); they are
            // recorded as what a standing P has, and marked as assumed.
            for (arn, on, before) in [
                (s_arn, true, "Off (assumed, not read)"),
                (p_arn, false, "On (assumed, not read)"),
            ] {
                let what = format!("arc:{arn}");
                let previous = ledger.before(&what, Some(before)).await?;
                deps.arc.set(arn, on).await?;
                changes.push(Change {
                    what,
                    previous,
                    now: if on { "On" } else { "Off" }.into(),
                });
            }
        }
    }
    Ok(())
}

/// The key under which a health check's settings are recorded.
fn check_lever(id: &str) -> String {
    format!("route53:health_check:{id} (inverted, disabled)")
}

/// `inverted=false, disabled=false` (as [`move_traffic`] records them).
fn parse_flags(v: &str) -> Option<(bool, bool)> {
    let mut inverted = None;
    let mut disabled = None;
    for part in v.split(',') {
        match part.trim().split_once('=') {
            Some(("inverted", b)) => inverted = b.trim().parse().ok(),
            Some(("disabled", b)) => disabled = b.trim().parse().ok(),
            _ => return None,
        }
    }
    Some((inverted?, disabled?))
}

/// A failback's switch back in `health_check_failover` mode: P's check
/// (the reversed plan's standby) gets the settings recorded before the
/// failover pinned it, or Route 53's defaults (not inverted, enabled) when
/// none were read. Route 53 then answers P as soon as P's check passes.
async fn unpin<C, R, A, P, N>(
    plan: &crate::plan::Plan,
    fb: &crate::execution::FailbackRun,
    deps: &SwitchDeps<'_, C, R, A, P>,
    ledger: &Ledger<'_, N>,
    changes: &mut Vec<Change>,
) -> Result<(), StepError>
where
    C: HealthCheckControl,
    N: Fn() -> DateTime<Utc>,
{
    let budget = Duration::from_millis(plan.timings.call_timeout_ms);
    let id = &plan.regions.standby.health_check_id;
    let what = check_lever(id);
    let shown = |(i, d): (bool, bool)| format!("inverted={i}, disabled={d}");
    let target = fb
        .restore
        .get(&what)
        .cloned()
        .flatten()
        .and_then(|v| parse_flags(&v))
        .unwrap_or((false, false));
    let current = deps.checks.flags(id, budget).await?;
    if current == target {
        return ledger.already(&what, &shown(target), changes).await;
    }
    let previous = ledger.before(&what, Some(&shown(current))).await?;
    deps.checks
        .set_flags(id, target.0, target.1, budget)
        .await?;
    changes.push(Change {
        what,
        previous,
        now: shown(target),
    });
    Ok(())
}

/// Point the CNAME `(zone, name)` at `target`, recording what it named
/// before (or report the change an earlier attempt made).
async fn move_cname<R: RecordSets, N: Fn() -> DateTime<Utc>>(
    records: &R,
    ledger: &Ledger<'_, N>,
    what: String,
    (zone, name, target): (&str, &str, &str),
    budget: Duration,
    changes: &mut Vec<Change>,
) -> Result<(), StepError> {
    let current = records.value(zone, name, "CNAME").await?;
    if same_name(current.as_deref(), target) {
        return ledger.already(&what, target, changes).await;
    }
    let previous = ledger.before(&what, current.as_deref()).await?;
    records.upsert(zone, name, "CNAME", target, budget).await?;
    changes.push(Change {
        what,
        previous,
        now: target.to_owned(),
    });
    Ok(())
}

fn same_name(current: Option<&str>, target: &str) -> bool {
    current.map(|v| v.trim_end_matches('.')) == Some(target.trim_end_matches('.'))
}
