//! Promote: make S's replica the writer, at most once per epoch.
//!
//! `start` checks the replica, records the lag at this moment as the RPO,
//! claims the promotion in the primary record (conditional on the epoch and
//! this execution's transition) and only then calls the promotion. `status`
//! serves the state machine's Wait → status → Choice loop; it never sleeps.

use super::{StepError, claimed, start_epoch};
use crate::adapters::rds::{DbInspector, DbInstance, Rds, names_instance};
use crate::adapters::{AwsError, LagSample, ReplicaLag, bounded, call_error};
use crate::execution::{
    ApprovalResult, ExecutionState, FenceResult, PromotionResult, PromotionStatus,
};
use crate::plan::DatabaseKind;
use crate::store::Store;
use crate::store::primary::{PrimaryRecord, PromotionOutcome};
use chrono::{DateTime, Utc};
use std::time::Duration;
use tracing::{info, instrument};

/// Where a promotion is, as the database sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromotionProgress {
    /// Done: standalone and available (RDS), or the writer of the global cluster (Aurora).
    pub complete: bool,
    /// Status text for the report.
    pub status: String,
}

/// Promote a standby database (rds:PromoteReadReplica, or
/// rds:FailoverGlobalCluster / rds:SwitchoverGlobalCluster for Aurora).
pub trait ReplicaPromoter {
    /// Check the standby can be promoted now; `Err(reason)` when not.
    fn ready(
        &self,
        budget: Duration,
    ) -> impl std::future::Future<Output = Result<Result<(), String>, AwsError>> + Send;
    /// Start the promotion.
    fn promote(
        &self,
        budget: Duration,
    ) -> impl std::future::Future<Output = Result<(), AwsError>> + Send;
    /// How far it is.
    fn progress(
        &self,
        budget: Duration,
    ) -> impl std::future::Future<Output = Result<PromotionProgress, AwsError>> + Send;
    /// Has a promotion call already reached the database? Asked when this
    /// execution claimed the promotion but never recorded the call: the
    /// call may have been accepted with its answer lost (a timeout, a reset,
    /// the process killed), and calling again would fail on a replica that
    /// is already promoting.
    fn started(
        &self,
        budget: Duration,
    ) -> impl std::future::Future<Output = Result<bool, AwsError>> + Send;
}

/// The promotion calls are never retried by the SDK: a retry after a lost
/// answer would meet a replica that is already promoting. Handover's own
/// retry asks the database first ([`ReplicaPromoter::started`]).
fn no_sdk_retry() -> aws_sdk_rds::config::Builder {
    aws_sdk_rds::config::Builder::default()
        .retry_config(aws_sdk_rds::config::retry::RetryConfig::disabled())
}

/// RDS instance with a cross-Region read replica.
pub struct RdsReplica<'a> {
    /// RDS in S.
    pub rds: &'a Rds,
    /// The replica.
    pub replica_id: String,
    /// P's primary identifier (the replica's source must be it).
    pub source_id: String,
    /// Backup retention to set on the promoted instance.
    pub backup_retention_days: i32,
}

impl RdsReplica<'_> {
    async fn describe(&self, budget: Duration) -> Result<DbInstance, AwsError> {
        self.rds
            .describe(&self.replica_id, budget)
            .await?
            .ok_or_else(|| AwsError::Shape {
                service: "rds",
                op: "DescribeDBInstances",
                region: self.rds.region().to_owned(),
                problem: format!("{} not found", self.replica_id),
            })
    }
}

impl ReplicaPromoter for RdsReplica<'_> {
    async fn ready(&self, budget: Duration) -> Result<Result<(), String>, AwsError> {
        let d = self.describe(budget).await?;
        Ok(if d.status != "available" {
            Err(format!("replica {} is {}, not available", d.id, d.status))
        } else if !d
            .replication_source
            .as_deref()
            .is_some_and(|s| names_instance(s, &self.source_id))
        {
            Err(format!(
                "{} is not a replica of {} (source: {})",
                d.id,
                self.source_id,
                d.replication_source.as_deref().unwrap_or("none")
            ))
        } else {
            Ok(())
        })
    }

    #[instrument(skip(self), fields(replica = %self.replica_id))]
    async fn promote(&self, budget: Duration) -> Result<(), AwsError> {
        let region = self.rds.region().to_owned();
        bounded("rds", "PromoteReadReplica", &region, budget, async {
            self.rds
                .client()
                .promote_read_replica()
                .db_instance_identifier(&self.replica_id)
                .backup_retention_period(self.backup_retention_days)
                .customize()
                .config_override(no_sdk_retry())
                .send()
                .await
                .map_err(|e| call_error("rds", "PromoteReadReplica", &region, e))?;
            Ok(())
        })
        .await
    }

    async fn progress(&self, budget: Duration) -> Result<PromotionProgress, AwsError> {
        let d = self.describe(budget).await?;
        Ok(PromotionProgress {
            // AWS clears the replication source when promotion completes.
            complete: d.status == "available" && d.replication_source.is_none(),
            status: d.status,
        })
    }

    async fn started(&self, budget: Duration) -> Result<bool, AwsError> {
        let d = self.describe(budget).await?;
        // ready() saw an available replica of P before the claim: a replica
        // that is no longer one, or is modifying or rebooting, is promoting.
        Ok(
            d.replication_source.is_none()
                || matches!(d.status.as_str(), "modifying" | "rebooting"),
        )
    }
}

/// Aurora global database: the secondary cluster in S becomes the writer.
pub struct AuroraGlobal<'a> {
    /// RDS in S.
    pub rds: &'a Rds,
    /// Global cluster id.
    pub global_cluster_id: String,
    /// ARN of S's cluster.
    pub target_cluster_arn: String,
    /// `false`: FailoverGlobalCluster with AllowDataLoss (P lost).
    /// `true`: SwitchoverGlobalCluster (planned, no data loss).
    pub planned: bool,
}

impl AuroraGlobal<'_> {
    async fn target_is_writer(&self, budget: Duration) -> Result<(bool, String), AwsError> {
        let region = self.rds.region().to_owned();
        bounded("rds", "DescribeGlobalClusters", &region, budget, async {
            let out = self
                .rds
                .client()
                .describe_global_clusters()
                .global_cluster_identifier(&self.global_cluster_id)
                .send()
                .await
                .map_err(|e| call_error("rds", "DescribeGlobalClusters", &region, e))?;
            let gc = out
                .global_clusters()
                .first()
                .ok_or_else(|| AwsError::Shape {
                    service: "rds",
                    op: "DescribeGlobalClusters",
                    region: region.clone(),
                    problem: format!("global cluster {} not found", self.global_cluster_id),
                })?;
            let writer = gc.global_cluster_members().iter().any(|m| {
                m.db_cluster_arn() == Some(self.target_cluster_arn.as_str())
                    && m.is_writer() == Some(true)
            });
            Ok((writer, gc.status().unwrap_or("unknown").to_owned()))
        })
        .await
    }
}

impl ReplicaPromoter for AuroraGlobal<'_> {
    async fn ready(&self, budget: Duration) -> Result<Result<(), String>, AwsError> {
        let (writer, status) = self.target_is_writer(budget).await?;
        Ok(if writer {
            Err(format!("{} is already the writer", self.target_cluster_arn))
        } else if status != "available" {
            Err(format!(
                "global cluster {} is {status}",
                self.global_cluster_id
            ))
        } else {
            Ok(())
        })
    }

    #[instrument(skip(self), fields(global = %self.global_cluster_id, planned = self.planned))]
    async fn promote(&self, budget: Duration) -> Result<(), AwsError> {
        let region = self.rds.region().to_owned();
        let c = self.rds.client();
        if self.planned {
            bounded("rds", "SwitchoverGlobalCluster", &region, budget, async {
                c.switchover_global_cluster()
                    .global_cluster_identifier(&self.global_cluster_id)
                    .target_db_cluster_identifier(&self.target_cluster_arn)
                    .customize()
                    .config_override(no_sdk_retry())
                    .send()
                    .await
                    .map(|_| ())
                    .map_err(|e| call_error("rds", "SwitchoverGlobalCluster", &region, e))
            })
            .await
        } else {
            bounded("rds", "FailoverGlobalCluster", &region, budget, async {
                c.failover_global_cluster()
                    .global_cluster_identifier(&self.global_cluster_id)
                    .target_db_cluster_identifier(&self.target_cluster_arn)
                    .allow_data_loss(true)
                    .customize()
                    .config_override(no_sdk_retry())
                    .send()
                    .await
                    .map(|_| ())
                    .map_err(|e| call_error("rds", "FailoverGlobalCluster", &region, e))
            })
            .await
        }
    }

    async fn progress(&self, budget: Duration) -> Result<PromotionProgress, AwsError> {
        let (writer, status) = self.target_is_writer(budget).await?;
        Ok(PromotionProgress {
            complete: writer && status == "available",
            status,
        })
    }

    async fn started(&self, budget: Duration) -> Result<bool, AwsError> {
        let (writer, status) = self.target_is_writer(budget).await?;
        Ok(writer || status != "available")
    }
}

/// The promoter the plan asks for.
pub enum Promoter<'a> {
    /// RDS instance.
    Rds(RdsReplica<'a>),
    /// Aurora global cluster.
    Aurora(AuroraGlobal<'a>),
}

impl<'a> Promoter<'a> {
    /// Build from the plan, on S's RDS client.
    pub fn for_plan(state: &ExecutionState, s_rds: &'a Rds) -> Promoter<'a> {
        let plan = &state.input.plan;
        match plan.database.kind {
            DatabaseKind::RdsInstance => Promoter::Rds(RdsReplica {
                rds: s_rds,
                replica_id: plan.regions.standby.db_instance_id.clone(),
                source_id: plan.regions.primary.db_instance_id.clone(),
                backup_retention_days: plan.database.backup_retention_days,
            }),
            DatabaseKind::AuroraGlobal => Promoter::Aurora(AuroraGlobal {
                rds: s_rds,
                global_cluster_id: plan.database.global_cluster_id.clone().unwrap_or_default(),
                target_cluster_arn: plan
                    .database
                    .standby_cluster_arn
                    .clone()
                    .unwrap_or_default(),
                planned: state.input.drill,
            }),
        }
    }
}

impl ReplicaPromoter for Promoter<'_> {
    async fn ready(&self, budget: Duration) -> Result<Result<(), String>, AwsError> {
        match self {
            Promoter::Rds(p) => p.ready(budget).await,
            Promoter::Aurora(p) => p.ready(budget).await,
        }
    }
    async fn promote(&self, budget: Duration) -> Result<(), AwsError> {
        match self {
            Promoter::Rds(p) => p.promote(budget).await,
            Promoter::Aurora(p) => p.promote(budget).await,
        }
    }
    async fn progress(&self, budget: Duration) -> Result<PromotionProgress, AwsError> {
        match self {
            Promoter::Rds(p) => p.progress(budget).await,
            Promoter::Aurora(p) => p.progress(budget).await,
        }
    }
    async fn started(&self, budget: Duration) -> Result<bool, AwsError> {
        match self {
            Promoter::Rds(p) => p.started(budget).await,
            Promoter::Aurora(p) => p.started(budget).await,
        }
    }
}

/// Start the promotion for the run in `state`.
///
/// The steps, each its own function: the fence and the approval allow it;
/// a retry reports what an earlier attempt did; the epoch has not moved; a
/// call whose answer was lost is found in RDS; the loss passes the gate;
/// then the claim, the one call, and its record.
pub async fn start<P: ReplicaPromoter, L: ReplicaLag>(
    state: &ExecutionState,
    execution: &str,
    store: &Store,
    promoter: &P,
    lag: &L,
    now: impl Fn() -> DateTime<Utc>,
) -> Result<PromotionResult, StepError> {
    let now = super::millis(now);
    let plan = &state.input.plan;
    let epoch = start_epoch(state)?;
    let budget = Duration::from_millis(plan.timings.call_timeout_ms);
    let (fence, approval) = allowed(state, execution, store).await?;
    let current = store
        .primary()
        .await?
        .ok_or_else(|| StepError::Precondition("the primary record is missing".into()))?;
    if let Some(done) = reported_retry(&current, execution, epoch) {
        return Ok(done);
    }
    if current.epoch != epoch {
        return Err(StepError::Refused(format!(
            "the epoch moved from {epoch} to {}",
            current.epoch
        )));
    }
    // An earlier attempt of this execution claimed the promotion: its call
    // may have reached RDS with the answer lost.
    let earlier_claim = current
        .transition
        .as_ref()
        .filter(|t| t.execution == execution && t.promote_claimed_at.is_some());
    if let Some(found) =
        lost_answer(&current, execution, epoch, store, promoter, budget, &now).await?
    {
        return Ok(found);
    }
    if let Err(reason) = promoter.ready(budget).await? {
        return Err(StepError::Precondition(reason));
    }
    // The loss that claim recorded passed the gate then: a retry does not
    // judge a fresher sample (it might refuse while S promotes on its own).
    let sample = match earlier_claim.and_then(|t| t.rpo) {
        Some((seconds, at)) => LagSample { seconds, at },
        None => gated_loss(state, &fence, &approval, lag, budget, &now).await?,
    };
    let claimed_before = earlier_claim.is_some();
    call_once(
        epoch,
        execution,
        store,
        promoter,
        sample,
        claimed_before,
        budget,
        &now,
    )
    .await
}

/// The fence allows promotion and the run's approval stands.
async fn allowed(
    state: &ExecutionState,
    execution: &str,
    store: &Store,
) -> Result<(FenceResult, ApprovalResult), StepError> {
    let fence: FenceResult = state
        .require("fence")
        .map_err(|e| StepError::Precondition(e.message))?;
    if !fence.may_proceed {
        return Err(StepError::Precondition(format!(
            "the fence is {:?} and the policy is {:?}: a person must fence P before promotion",
            fence.outcome, fence.policy
        )));
    }
    let approval = super::approved(state, execution, store).await?;
    Ok((fence, approval))
}

/// A retry after this execution's call went out, or after it completed
/// the promotion: report what was done, never call twice.
fn reported_retry(current: &PrimaryRecord, execution: &str, epoch: i64) -> Option<PromotionResult> {
    if let Some(tr) = current
        .transition
        .as_ref()
        .filter(|t| t.execution == execution)
        && let (Some(called), Some((rpo, at))) = (tr.promote_called_at, tr.rpo)
    {
        info!(execution, "promotion already called by this execution");
        return Some(promoting(
            rpo,
            at,
            called,
            "promoting (already called)".into(),
        ));
    }
    if current.epoch == epoch + 1
        && current.last_execution.as_deref() == Some(execution)
        && let Some(tr) = &current.last_transition
        && let (Some(called), Some((rpo, at))) = (tr.promote_called_at, tr.rpo)
    {
        let mut done = promoting(rpo, at, called, "promoted (already)".into());
        done.status = PromotionStatus::Promoted;
        done.promoted_at = current.promoted_at;
        done.duration_s = current
            .promoted_at
            .map(|p| (p - called).num_milliseconds() as f64 / 1000.0);
        done.epoch = Some(current.epoch);
        return Some(done);
    }
    None
}

/// Claimed but the call never recorded: the call may have been accepted
/// with its answer lost. Read the world, never memory: a replica that is
/// already promoting means it was, and the call is recorded now.
async fn lost_answer<P: ReplicaPromoter>(
    current: &PrimaryRecord,
    execution: &str,
    epoch: i64,
    store: &Store,
    promoter: &P,
    budget: Duration,
    now: &impl Fn() -> DateTime<Utc>,
) -> Result<Option<PromotionResult>, StepError> {
    let Some(tr) = current
        .transition
        .as_ref()
        .filter(|t| t.execution == execution && t.promote_called_at.is_none())
    else {
        return Ok(None);
    };
    let Some((rpo, at)) = tr.rpo else {
        return Ok(None);
    };
    if !promoter.started(budget).await? {
        return Ok(None);
    }
    let called = tr.promote_claimed_at.unwrap_or_else(now);
    claimed(
        store.mark_promote_called(epoch, execution, called).await?,
        "promote",
    )?;
    info!(
        execution,
        epoch, "the earlier promotion call reached RDS; polling it"
    );
    Ok(Some(promoting(
        rpo,
        at,
        called,
        "promoting (the earlier call was accepted; its answer was lost)".into(),
    )))
}

/// The loss this promotion accepts: a planned switchover's proven zero,
/// or the lag at the fence, judged by the gate against the approval.
async fn gated_loss<L: ReplicaLag>(
    state: &ExecutionState,
    fence: &FenceResult,
    approval: &ApprovalResult,
    lag: &L,
    budget: Duration,
    now: &impl Fn() -> DateTime<Utc>,
) -> Result<LagSample, StepError> {
    if state.input.mode == crate::execution::Mode::Switchover {
        return caught_up(state, fence, now);
    }
    let plan = &state.input.plan;
    let s = &plan.regions.standby;
    let latest = lag
        .latest_lag(
            &s.db_instance_id,
            now(),
            chrono::Duration::minutes(5),
            budget,
        )
        .await?;
    let latest = latest.map(|l| loss_at_fence(l, fence, plan.fence.end_sessions));
    let asked = state
        .require::<crate::execution::Diagnosis>("diagnosis")
        .ok();
    if let Some(reason) = crate::diagnose::gate::loss_blocker(
        plan,
        latest.map(|l| l.seconds),
        approval,
        asked.as_ref(),
        now(),
    ) {
        return Err(StepError::Precondition(reason));
    }
    // No sample and an accepted unknown loss: recorded as unknown (-1).
    Ok(latest.unwrap_or(LagSample {
        seconds: -1.0,
        at: now(),
    }))
}

/// A planned switchover promotes only what caught up: its RPO is 0,
/// measured (S replayed P's final WAL position), when it was proven.
fn caught_up(
    state: &ExecutionState,
    fence: &FenceResult,
    now: &impl Fn() -> DateTime<Utc>,
) -> Result<LagSample, StepError> {
    let caught: Option<crate::execution::CatchUpResult> = state
        .step("catch_up")
        .map_err(|e| StepError::Precondition(e.message))?;
    match caught {
        Some(c)
            if c.status == crate::execution::CatchUpStatus::CaughtUp
                && c.caught_up_at.is_some_and(|t| t >= fence.fenced_at) =>
        {
            Ok(LagSample {
                seconds: 0.0,
                at: c.caught_up_at.unwrap_or_else(now),
            })
        }
        other => Err(StepError::Precondition(format!(
            "a planned switchover promotes only once S has caught up with P; the catch-up is {}",
            other.map_or_else(
                || "missing".to_string(),
                |c| format!("{:?}: {}", c.status, c.detail)
            )
        ))),
    }
}

/// Claim the promotion for this epoch with `sample` as its loss, make the
/// one call, and record that it went out. A claim that finds the call
/// already made reports it; a refused call is read against RDS, and is
/// retried when this run claimed before (an earlier or an overlapping
/// attempt), since its call may be what RDS refused for.
#[allow(clippy::too_many_arguments)]
async fn call_once<P: ReplicaPromoter>(
    epoch: i64,
    execution: &str,
    store: &Store,
    promoter: &P,
    sample: LagSample,
    claimed_before: bool,
    budget: Duration,
    now: &impl Fn() -> DateTime<Utc>,
) -> Result<PromotionResult, StepError> {
    let claim_at = now();
    let rec = claimed(
        store
            .claim_promotion(epoch, execution, (sample.seconds, sample.at), claim_at)
            .await?,
        "promote",
    )?;
    let tr = rec.transition.expect("a claimed record has a transition");
    // The claim keeps its first time. Another time means another attempt of
    // this run claimed after this one read the record: an overlapping retry
    // (Step Functions retries a client-side timeout while the first
    // invocation still runs), whose call may be in flight.
    let claimed_before = claimed_before || tr.promote_claimed_at != Some(claim_at);
    let (rpo, at) = tr.rpo.unwrap_or((sample.seconds, sample.at));
    if let Some(called) = tr.promote_called_at {
        return Ok(promoting(
            rpo,
            at,
            called,
            "promoting (already called)".into(),
        ));
    }
    let mut said = "promoting";
    if let Err(e) = promoter.promote(budget).await {
        said = already_promoting(e, claimed_before, promoter, budget).await?;
        info!(
            execution,
            epoch, said, "RDS refused a second promotion call"
        );
    }
    let called = now();
    claimed(
        store.mark_promote_called(epoch, execution, called).await?,
        "promote",
    )?;
    info!(execution, epoch, rpo_s = rpo, "promotion started");
    Ok(promoting(rpo, at, called, said.into()))
}

/// RDS refused the promotion call `e`: is an earlier call of this
/// execution already promoting the replica? Yes only when the describe
/// shows it: a call is never recorded on inference. A refusal
/// (InvalidDBInstanceState) after this run's own earlier claim may be that
/// earlier call at work while describes still show the replica, or S busy
/// (`backing-up`): it is returned as transient, so the state machine's
/// retries (minutes) read S again. Otherwise the refusal stands.
async fn already_promoting<P: ReplicaPromoter>(
    e: AwsError,
    claimed_before: bool,
    promoter: &P,
    budget: Duration,
) -> Result<&'static str, StepError> {
    if e.code() != Some("InvalidDBInstanceState") {
        return Err(e.into());
    }
    if promoter.started(budget).await.unwrap_or(false) {
        return Ok("promoting (RDS says an earlier call went through)");
    }
    match e {
        AwsError::Call {
            service,
            op,
            region,
            code,
            source,
            ..
        } if claimed_before => {
            tracing::warn!(
                "RDS refused a second promotion call and S does not show a promotion yet: retry"
            );
            Err(StepError::Aws(AwsError::Call {
                service,
                op,
                region,
                code,
                transient: true,
                source,
            }))
        }
        e => Err(e.into()),
    }
}

/// What S may lack of P, judged from a lag `sample`. For PostgreSQL,
/// ReplicaLag is now minus S's last replayed commit (RDS User Guide, read
/// replicas), so once P stops committing it grows with the clock while
/// nothing more is lost. A confirmed fence stopped P's commits by
/// `fenced_at` (its sessions ended, new ones refused): a sample taken after
/// it counts only the commits before it, `lag - (sampled - fenced_at)`.
/// The sample's time is its minute's start, so the result errs high. A
/// sample from before the fence, an unconfirmed fence, or a fence that
/// left P's sessions open (`end_sessions` off: the group refuses only new
/// connections) is taken as it is: P may have gone on committing.
pub fn loss_at_fence(
    sample: crate::adapters::cloudwatch::LagSample,
    fence: &FenceResult,
    end_sessions: bool,
) -> crate::adapters::cloudwatch::LagSample {
    if !end_sessions
        || fence.outcome != crate::execution::FenceOutcome::Confirmed
        || sample.seconds < 0.0
        || sample.at <= fence.fenced_at
    {
        return sample;
    }
    let after = (sample.at - fence.fenced_at).num_milliseconds() as f64 / 1000.0;
    crate::adapters::cloudwatch::LagSample {
        seconds: (sample.seconds - after).max(0.0),
        at: sample.at,
    }
}

fn promoting(
    rpo: f64,
    at: DateTime<Utc>,
    called: DateTime<Utc>,
    status: String,
) -> PromotionResult {
    PromotionResult {
        status: PromotionStatus::Promoting,
        rpo_s: rpo,
        lag_sampled_at: at,
        promote_started_at: called,
        promoted_at: None,
        duration_s: None,
        epoch: None,
        polls: 0,
        past_budget: false,
        db_status: status,
    }
}

/// One status poll. When the database reports the promotion complete, the
/// primary record moves to S with epoch + 1 (conditionally).
pub async fn status<P: ReplicaPromoter>(
    state: &ExecutionState,
    execution: &str,
    store: &Store,
    promoter: &P,
    now: impl Fn() -> DateTime<Utc>,
) -> Result<PromotionResult, StepError> {
    let now = super::millis(now);
    let plan = &state.input.plan;
    let epoch = start_epoch(state)?;
    let budget = Duration::from_millis(plan.timings.call_timeout_ms);
    let mut result: PromotionResult = state
        .require("promotion")
        .map_err(|e| StepError::Precondition(e.message))?;
    result.polls += 1;
    if result.status == PromotionStatus::Promoted {
        return Ok(result);
    }
    let progress = promoter.progress(budget).await?;
    result.db_status = progress.status.clone();
    if !progress.complete {
        result.past_budget = now() - result.promote_started_at >= plan.timings.promotion_budget();
        return Ok(result);
    }
    let s = &plan.regions.standby;
    let promoted_at = match store
        .complete_promotion(epoch, execution, &s.region, &s.db_instance_id, now())
        .await?
    {
        PromotionOutcome::Promoted(rec) | PromotionOutcome::AlreadyPromoted(rec) => {
            result.epoch = Some(rec.epoch);
            rec.promoted_at.unwrap_or_else(&now)
        }
        PromotionOutcome::EpochMoved { now } => {
            return Err(StepError::Refused(format!(
                "the epoch moved to {now} before this promotion completed"
            )));
        }
        PromotionOutcome::Busy { execution } => {
            return Err(StepError::Refused(format!(
                "execution {execution} holds the transition"
            )));
        }
        PromotionOutcome::Missing => {
            return Err(StepError::Precondition(
                "the primary record is missing".into(),
            ));
        }
    };
    result.status = PromotionStatus::Promoted;
    result.promoted_at = Some(promoted_at);
    result.duration_s =
        Some((promoted_at - result.promote_started_at).num_milliseconds() as f64 / 1000.0);
    info!(execution, epoch = ?result.epoch, duration_s = ?result.duration_s, "promoted; primary record now names S");
    Ok(result)
}
