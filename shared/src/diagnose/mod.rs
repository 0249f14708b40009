//! Diagnosis: a bounded snapshot of both sides, then deterministic rules.
//!
//! [`gather`] takes the snapshot; every call has a time budget, and a timeout
//! or an error is kept as evidence rather than failing the step. [`rules::assess`]
//! turns the snapshot into a [`Diagnosis`]: evidence, hypotheses with evidence
//! for and against, a risk level with the rule that fired, the RPO estimate
//! and the action the state machine's Choice reads.

pub mod explain;
pub mod gate;
pub mod rules;

use crate::adapters::{
    DbInspector, DbInstance, EndpointProbe, HealthChecks, LagSample, ProbeResult, ReplicaLag,
    TargetCounts, TargetHealth,
};
use crate::execution::Diagnosis;
use crate::plan::Plan;
use chrono::{DateTime, Utc};
use std::time::Duration;

/// Everything observed, at one moment.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// When.
    pub observed_at: DateTime<Utc>,
    /// GET of P's own endpoint.
    pub p_app: ProbeResult,
    /// GET of S's own endpoint.
    pub s_app: ProbeResult,
    /// P's health check, share of healthy checkers.
    pub p_health: Result<f64, String>,
    /// S's health check, share of healthy checkers.
    pub s_health: Result<f64, String>,
    /// P's primary (`Ok(None)`: not found; `Err`: API unreachable or failing).
    pub p_db: Result<Option<DbInstance>, String>,
    /// S's replica.
    pub s_db: Result<Option<DbInstance>, String>,
    /// Newest ReplicaLag sample of S's replica in the last five minutes.
    pub lag: Result<Option<LagSample>, String>,
    /// Target health of P's load-balancer target groups (those the plan names).
    pub p_targets: Vec<TargetObservation>,
    /// Target health of S's load-balancer target groups.
    pub s_targets: Vec<TargetObservation>,
}

/// One target group's health, as read.
#[derive(Debug, Clone, PartialEq)]
pub struct TargetObservation {
    /// Target group ARN.
    pub arn: String,
    /// Healthy and registered targets, or why they are unknown.
    pub counts: Result<TargetCounts, ReadError>,
}

/// A read that failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadError {
    /// What failed, with its cause.
    pub message: String,
    /// Timed out or could not connect (the API itself is unreachable), as
    /// opposed to an answer that was an error (a missing group, a denial).
    pub unreachable: bool,
}

impl TargetObservation {
    /// The group's name, from `…:targetgroup/<name>/<id>`.
    pub fn name(&self) -> &str {
        self.arn
            .split_once(":targetgroup/")
            .and_then(|(_, rest)| rest.split('/').next())
            .unwrap_or(&self.arn)
    }
}

/// The sources a snapshot reads.
pub struct Sources<'a, E, H, D, L, T> {
    /// HTTPS probe.
    pub probe: &'a E,
    /// Route 53 health checks.
    pub health: &'a H,
    /// RDS in P.
    pub p_rds: &'a D,
    /// RDS in S.
    pub s_rds: &'a D,
    /// CloudWatch in S.
    pub s_lag: &'a L,
    /// ELB in P.
    pub p_elb: &'a T,
    /// ELB in S.
    pub s_elb: &'a T,
}

/// Take the snapshot; every call runs concurrently within the plan's budget.
pub async fn gather<E, H, D, L, T>(
    plan: &Plan,
    src: &Sources<'_, E, H, D, L, T>,
    now: DateTime<Utc>,
) -> Snapshot
where
    E: EndpointProbe,
    H: HealthChecks,
    D: DbInspector,
    L: ReplicaLag,
    T: TargetHealth,
{
    let budget = Duration::from_millis(plan.timings.call_timeout_ms);
    let probe_budget = Duration::from_millis(plan.detection.probe_timeout_ms);
    let (p, s) = (&plan.regions.primary, &plan.regions.standby);
    let text = |e: crate::adapters::AwsError| crate::error::chain(&e);
    let (p_app, s_app, p_health, s_health, p_db, s_db, lag, p_targets, s_targets) = tokio::join!(
        src.probe.get(&p.endpoint, probe_budget),
        src.probe.get(&s.endpoint, probe_budget),
        src.health.healthy_share(&p.health_check_id, budget),
        src.health.healthy_share(&s.health_check_id, budget),
        src.p_rds.describe(&p.db_instance_id, budget),
        src.s_rds.describe(&s.db_instance_id, budget),
        src.s_lag
            .latest_lag(&s.db_instance_id, now, chrono::Duration::minutes(5), budget),
        targets(src.p_elb, &p.target_group_arns, budget),
        targets(src.s_elb, &s.target_group_arns, budget),
    );
    Snapshot {
        observed_at: now,
        p_app,
        s_app,
        p_health: p_health.map(|(share, _)| share).map_err(text),
        s_health: s_health.map(|(share, _)| share).map_err(text),
        p_db: p_db.map_err(text),
        s_db: s_db.map_err(text),
        lag: lag.map_err(text),
        p_targets,
        s_targets,
    }
}

/// Read every named target group concurrently.
async fn targets<T: TargetHealth>(
    elb: &T,
    arns: &[String],
    budget: Duration,
) -> Vec<TargetObservation> {
    let reads = arns.iter().map(|arn| async move {
        TargetObservation {
            arn: arn.clone(),
            counts: elb.counts(arn, budget).await.map_err(|e| ReadError {
                message: crate::error::chain(&e),
                unreachable: e.is_unreachable(),
            }),
        }
    });
    futures_util::future::join_all(reads).await
}

/// Snapshot and assess, for a run of `mode`.
pub async fn diagnose<E, H, D, L, T>(
    plan: &Plan,
    mode: crate::execution::Mode,
    src: &Sources<'_, E, H, D, L, T>,
    now: DateTime<Utc>,
) -> Diagnosis
where
    E: EndpointProbe,
    H: HealthChecks,
    D: DbInspector,
    L: ReplicaLag,
    T: TargetHealth,
{
    rules::assess_as(plan, &gather(plan, src, now).await, mode)
}

#[cfg(test)]
mod tests;
