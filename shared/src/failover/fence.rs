//! Fence: cut the old primary off from writers before S becomes writable.
//!
//! P's DB gets the plan's deny-all security group (rds:ModifyDBInstance,
//! ApplyImmediately). The previous groups are recorded first, so a crash
//! between the two calls never loses what failback must restore. The outcome
//! is `confirmed` only when a describe shows the fence group alone, `active`:
//! RDS applies a change over seconds, the new group `adding` and the old ones
//! `removing` meanwhile, and until then P still accepts what they allowed.

use super::{StepError, claimed, start_epoch};
use crate::adapters::rds::{DbInspector, Rds};
use crate::adapters::{AwsError, bounded, call_error};
use crate::execution::{ExecutionState, FenceOutcome, FenceResult};
use crate::plan::OnUnconfirmed;
use crate::store::Store;
use crate::store::primary::TransitionOutcome;
use chrono::{DateTime, Utc};
use std::time::Duration;
use tracing::{info, instrument, warn};

/// Replace a DB instance's security groups (rds:ModifyDBInstance) and end
/// its sessions (rds:RebootDBInstance).
pub trait DbFencer: DbInspector {
    /// Set exactly `groups` on `id`, applied immediately.
    fn set_security_groups(
        &self,
        id: &str,
        groups: &[String],
        budget: Duration,
    ) -> impl std::future::Future<Output = Result<(), AwsError>> + Send;

    /// Reboot `id`: the engine restarts and every session ends. Returns the
    /// status RDS answered with (`rebooting` once accepted).
    fn reboot(
        &self,
        id: &str,
        budget: Duration,
    ) -> impl std::future::Future<Output = Result<String, AwsError>> + Send;

    /// When RDS last reported `id` restarted ("DB instance restarted",
    /// RDS-EVENT-0006) at or after `since` (rds:DescribeEvents); `None`
    /// when it has not.
    fn restarted_since(
        &self,
        id: &str,
        since: DateTime<Utc>,
        budget: Duration,
    ) -> impl std::future::Future<Output = Result<Option<DateTime<Utc>>, AwsError>> + Send;
}

impl DbFencer for Rds {
    #[instrument(skip(self))]
    async fn set_security_groups(
        &self,
        id: &str,
        groups: &[String],
        budget: Duration,
    ) -> Result<(), AwsError> {
        let region = self.region().to_owned();
        bounded("rds", "ModifyDBInstance", &region, budget, async {
            self.client()
                .modify_db_instance()
                .db_instance_identifier(id)
                .set_vpc_security_group_ids(Some(groups.to_vec()))
                .apply_immediately(true)
                .send()
                .await
                .map_err(|e| call_error("rds", "ModifyDBInstance", &region, e))?;
            Ok(())
        })
        .await
    }

    #[instrument(skip(self))]
    async fn reboot(&self, id: &str, budget: Duration) -> Result<String, AwsError> {
        let region = self.region().to_owned();
        bounded("rds", "RebootDBInstance", &region, budget, async {
            let out = self
                .client()
                .reboot_db_instance()
                .db_instance_identifier(id)
                .send()
                .await
                .map_err(|e| call_error("rds", "RebootDBInstance", &region, e))?;
            Ok(out
                .db_instance()
                .and_then(|d| d.db_instance_status())
                .unwrap_or("unknown")
                .to_owned())
        })
        .await
    }

    #[instrument(skip(self))]
    async fn restarted_since(
        &self,
        id: &str,
        since: DateTime<Utc>,
        budget: Duration,
    ) -> Result<Option<DateTime<Utc>>, AwsError> {
        let region = self.region().to_owned();
        bounded("rds", "DescribeEvents", &region, budget, async {
            let out = self
                .client()
                .describe_events()
                .source_identifier(id)
                .source_type(aws_sdk_rds::types::SourceType::DbInstance)
                .start_time(aws_smithy_types::DateTime::from_millis(
                    since.timestamp_millis(),
                ))
                .send()
                .await
                .map_err(|e| call_error("rds", "DescribeEvents", &region, e))?;
            Ok(out
                .events()
                .iter()
                .filter(|e| {
                    e.message()
                        .is_some_and(|m| m.to_ascii_lowercase().contains(RESTARTED))
                })
                .filter_map(|e| e.date())
                .filter_map(|d| DateTime::<Utc>::from_timestamp_millis(d.to_millis().ok()?))
                .filter(|d| *d >= since)
                .max())
        })
        .await
    }
}

/// What RDS says when the engine is back after a reboot: "DB instance
/// restarted" (RDS-EVENT-0006, category availability; RDS User Guide,
/// "Amazon RDS event categories and event messages").
const RESTARTED: &str = "db instance restarted";

/// Fence P for the run in `state`, as `execution`.
pub async fn fence<F: DbFencer + Sync>(
    state: &ExecutionState,
    execution: &str,
    store: &Store,
    p_rds: &F,
    now: impl Fn() -> DateTime<Utc>,
) -> Result<FenceResult, StepError> {
    let now = super::millis(now);
    let plan = &state.input.plan;
    let epoch = start_epoch(state)?;
    super::approved(state, execution, store).await?;
    let site = &plan.regions.primary;
    let fence_group = site.fence_security_group_id.clone();
    let budget = Duration::from_millis(plan.fence.timeout_ms);
    let policy = plan.fence.on_unconfirmed;
    let rec = claimed(
        begin(store, epoch, execution, &plan.regions.standby.region, &now).await?,
        "fence",
    )?;
    let tr = rec.transition.expect("a claimed record has a transition");
    if let (Some((label, at)), Some(previous)) = (&tr.fence, &tr.fence_previous_groups) {
        // A retry of a fence that already ran: report the same outcome.
        let outcome = if label == CONFIRMED {
            FenceOutcome::Confirmed
        } else {
            FenceOutcome::Unconfirmed
        };
        info!(execution, ?outcome, "fence already done by this execution");
        return Ok(result(
            outcome,
            policy,
            label == UNREACHABLE,
            previous.clone(),
            fence_group,
            tr.since,
            *at,
            epoch,
            "already fenced by this execution".into(),
        ));
    }

    let watched = Watched::new(p_rds);
    // An earlier attempt of this fence that recorded P's groups or an
    // accepted reboot had its answers: P answered, whatever it does now.
    if tr.fence_previous_groups.is_some() || tr.fence_reboot_at.is_some() {
        watched.mark_answered();
    }
    let (outcome, previous, detail) = match attempt(
        &watched,
        &site.db_instance_id,
        &fence_group,
        budget,
        Duration::from_secs(plan.fence.confirm_s),
        plan.fence.end_sessions.then_some(tr.fence_reboot_at),
        rec.unfence_pending.clone(),
        store,
        epoch,
        execution,
        &now,
    )
    .await
    {
        Ok((previous, detail)) => (FenceOutcome::Confirmed, previous, detail),
        Err(Unconfirmed { previous, detail }) => (FenceOutcome::Unconfirmed, previous, detail),
    };
    let fenced_at = now();
    let unreachable = !watched.answered();
    let label = match outcome {
        FenceOutcome::Confirmed => CONFIRMED,
        FenceOutcome::Unconfirmed if unreachable => UNREACHABLE,
        FenceOutcome::Unconfirmed => UNCONFIRMED,
    };
    let rec = claimed(
        store
            .record_fence_outcome(epoch, execution, label, fenced_at)
            .await?,
        "fence",
    )?;
    let previous = rec
        .transition
        .and_then(|t| t.fence_previous_groups)
        .unwrap_or(previous);
    match outcome {
        FenceOutcome::Confirmed => {
            info!(execution, epoch, db = %site.db_instance_id, "primary fenced")
        }
        FenceOutcome::Unconfirmed => warn!(execution, epoch, ?policy, detail, "fence unconfirmed"),
    }
    Ok(result(
        outcome,
        policy,
        unreachable,
        previous,
        fence_group,
        tr.since,
        fenced_at,
        epoch,
        detail,
    ))
}

/// Claim the transition for this fence. While an unfence of P holds its
/// claim (audit's sweep restoring P's groups from an earlier fence, or a
/// run's compensation; at most [`crate::store::primary::UNFENCE_LEASE`]),
/// wait for it, reading again each second: the fence then finds P as the
/// unfence left it, and the unfence cannot undo this fence. A claim
/// renewed after a call whose answer was lost outlasts the wait: then the
/// fence is `Held`, and the state machine retries it.
async fn begin(
    store: &Store,
    epoch: i64,
    execution: &str,
    to_region: &str,
    now: &impl Fn() -> DateTime<Utc>,
) -> Result<TransitionOutcome, StepError> {
    let waited = std::time::Instant::now();
    let most = Duration::from_millis(crate::plan::FENCE_SWEEP_WAIT_MS);
    loop {
        match store
            .begin_fencing(epoch, execution, to_region, now())
            .await?
        {
            TransitionOutcome::Unfencing { since } if waited.elapsed() < most => {
                info!(%since, "an unfence of P holds its claim: the fence waits for it");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            out => return Ok(out),
        }
    }
}

/// The fence's outcome as the transition records it. A retried fence
/// reports the same outcome, and whether P's RDS API ever answered.
const CONFIRMED: &str = "confirmed";
/// Unconfirmed, and P's RDS API answered at least one call.
const UNCONFIRMED: &str = "unconfirmed";
/// Unconfirmed, and P's RDS API answered no call: the only case in which
/// `on_unconfirmed: proceed` may promote.
const UNREACHABLE: &str = "unconfirmed: P unreachable";

/// P's RDS as the fence calls it, noting whether its API ever answered.
/// `on_unconfirmed: proceed` exists for a P whose RDS API cannot be
/// reached. A P that answered (a refused reboot while it is `backing-up`,
/// a group change still `adding`) can still take writes from its open
/// sessions: promoting then would make two writers.
struct Watched<'a, F> {
    rds: &'a F,
    answered: std::sync::atomic::AtomicBool,
}

impl<'a, F> Watched<'a, F> {
    fn new(rds: &'a F) -> Self {
        Self {
            rds,
            answered: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Did any call get an answer from P's RDS API? A timeout, a transport
    /// failure or a 5xx is no answer (the API may be down); any other
    /// answer, an error included, is.
    fn answered(&self) -> bool {
        self.answered.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn mark_answered(&self) {
        self.answered
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    fn note<T>(&self, r: Result<T, AwsError>) -> Result<T, AwsError> {
        if r.as_ref().map_or_else(|e| !e.outcome_unknown(), |_| true) {
            self.mark_answered();
        }
        r
    }
}

impl<F: DbInspector + Sync> DbInspector for Watched<'_, F> {
    async fn describe(
        &self,
        id: &str,
        budget: Duration,
    ) -> Result<Option<crate::adapters::DbInstance>, AwsError> {
        self.note(self.rds.describe(id, budget).await)
    }
}

impl<F: DbFencer + Sync> DbFencer for Watched<'_, F> {
    async fn set_security_groups(
        &self,
        id: &str,
        groups: &[String],
        budget: Duration,
    ) -> Result<(), AwsError> {
        self.note(self.rds.set_security_groups(id, groups, budget).await)
    }

    async fn reboot(&self, id: &str, budget: Duration) -> Result<String, AwsError> {
        self.note(self.rds.reboot(id, budget).await)
    }

    async fn restarted_since(
        &self,
        id: &str,
        since: DateTime<Utc>,
        budget: Duration,
    ) -> Result<Option<DateTime<Utc>>, AwsError> {
        self.note(self.rds.restarted_since(id, since, budget).await)
    }
}

struct Unconfirmed {
    previous: Vec<String>,
    detail: String,
}

#[allow(clippy::too_many_arguments)]
async fn attempt<F: DbFencer>(
    rds: &F,
    db: &str,
    fence_group: &str,
    budget: Duration,
    confirm: Duration,
    // End P's sessions? With when an earlier attempt's reboot was accepted.
    end_sessions: Option<Option<DateTime<Utc>>>,
    // P's groups from before an earlier fence that could not be undone.
    unfence_pending: Option<Vec<String>>,
    store: &Store,
    epoch: i64,
    execution: &str,
    now: &impl Fn() -> DateTime<Utc>,
) -> Result<(Vec<String>, String), Unconfirmed> {
    let unconfirmed = |previous: Vec<String>, e: String| Unconfirmed {
        previous,
        detail: e,
    };
    let before = match rds.describe(db, budget).await {
        Ok(Some(d)) => d,
        Ok(None) => return Err(unconfirmed(vec![], format!("{db} not found in P"))),
        Err(e) => {
            return Err(unconfirmed(
                vec![],
                format!("describe: {}", crate::error::chain(&e)),
            ));
        }
    };
    // The deny-all group is never one of P's own. P still carries an
    // earlier run's fence that compensation could not undo: its groups from
    // before that fence are the ones to restore.
    let own: Vec<String> = before
        .security_groups
        .iter()
        .filter(|g| *g != fence_group)
        .cloned()
        .collect();
    let previous: Vec<String> = match unfence_pending {
        Some(pending) if own.is_empty() => pending,
        _ if own.is_empty() => before.security_groups.clone(),
        _ => own,
    };
    if let Err(e) = store
        .record_fence_previous(epoch, execution, &previous, now())
        .await
    {
        return Err(unconfirmed(
            previous,
            format!("recording previous groups: {}", crate::error::chain(&e)),
        ));
    }
    let want = vec![fence_group.to_owned()];
    if previous != want
        && let Err(e) = rds.set_security_groups(db, &want, budget).await
    {
        return Err(unconfirmed(
            previous,
            format!("modify: {}", crate::error::chain(&e)),
        ));
    }
    // Wait for RDS to apply it: the fence group alone, and `active`.
    let waited = std::time::Instant::now();
    loop {
        let last = match rds.describe(db, budget).await {
            Ok(Some(d)) if d.security_groups == want && d.unsettled_security_groups.is_empty() => {
                let groups = format!(
                    "{db} security groups now {want:?}, active after {:.1} s",
                    waited.elapsed().as_secs_f64()
                );
                let Some(prior) = end_sessions else {
                    return Ok((previous, groups));
                };
                // A security group stops new connections only: sessions
                // already open (a pool's) keep writing until the engine
                // restarts.
                let restart = Restart {
                    store,
                    epoch,
                    execution,
                    prior,
                };
                return match end_all_sessions(rds, db, budget, waited + confirm, restart, now).await
                {
                    Ok(how) => Ok((previous, format!("{groups}; {how}"))),
                    Err(e) => Err(unconfirmed(
                        previous,
                        format!("{groups}, but its open sessions were not ended: {e}"),
                    )),
                };
            }
            // Applied and not what was asked: a describe that does not show
            // the change yet (RDS is eventually consistent), or someone else
            // changed it. Read again until the deadline.
            Ok(Some(d)) if d.unsettled_security_groups.is_empty() => format!(
                "modify accepted but {db} shows groups {:?}",
                d.security_groups
            ),
            Ok(Some(d)) => format!(
                "{db} still applying the change after {} s: {:?}",
                confirm.as_secs(),
                d.unsettled_security_groups
            ),
            Ok(None) => {
                return Err(unconfirmed(
                    previous,
                    format!("{db} disappeared after modify"),
                ));
            }
            Err(e) => format!("describe after modify: {}", crate::error::chain(&e)),
        };
        let pause = poll_after(waited.elapsed());
        if waited.elapsed() + pause > confirm {
            return Err(unconfirmed(previous, last));
        }
        tokio::time::sleep(pause).await;
    }
}

/// Where the fence records P's reboot, and an earlier attempt's record.
struct Restart<'a> {
    store: &'a Store,
    epoch: i64,
    execution: &'a str,
    prior: Option<DateTime<Utc>>,
}

/// Reboot P and wait until it has restarted. RDS answers the call with
/// `rebooting`, but its describes may show `available` for a while before
/// the reboot begins; the engine's shutdown ends every session. So P is
/// taken as restarted only once a describe showed `rebooting` and then
/// `available`, or RDS reported "DB instance restarted" after the request.
/// A reboot this execution already had accepted (a retried fence) is not
/// asked again. A refusal while P is busy (`modifying` from the group
/// change, or `rebooting` for a reason of its own, which may have begun
/// before the deny-all group was active) and throttling or errors are asked
/// again until `deadline`.
async fn end_all_sessions<F: DbFencer>(
    rds: &F,
    db: &str,
    budget: Duration,
    deadline: std::time::Instant,
    restart: Restart<'_>,
    now: &impl Fn() -> DateTime<Utc>,
) -> Result<String, String> {
    // Whether a pause of `p` still ends before the deadline.
    let room_for = |p: Duration| std::time::Instant::now() + p < deadline;
    let record = |at: DateTime<Utc>| async move {
        if let Err(e) = restart
            .store
            .record_fence_reboot(restart.epoch, restart.execution, at)
            .await
        {
            warn!(error = %crate::error::chain(&e), "could not record the reboot; a retry would reboot again");
        }
    };
    // A reboot this fence sent whose answer never came (timed out, lost):
    // RDS may have accepted it.
    let mut unanswered: Option<DateTime<Utc>> = None;
    // Did a describe show P `rebooting` since the reboot was accepted?
    let mut rebooting_seen = false;
    // Was a reboot refused first (P `rebooting` or busy for a reason of its
    // own)? Then a `rebooting` seen later may be a stale view of that one:
    // only RDS's restart event after ours was accepted counts.
    let mut refused_first = false;
    let requested = match restart.prior {
        Some(at) => at,
        None => loop {
            let refused = match rds.reboot(db, budget).await {
                Ok(status) if status == "rebooting" => {
                    let at = now();
                    record(at).await;
                    break at;
                }
                Ok(status) => format!("RDS answered the reboot with {db} {status}"),
                Err(e) => {
                    if e.outcome_unknown() {
                        unanswered.get_or_insert_with(now);
                    }
                    crate::error::chain(&e)
                }
            };
            // The unanswered reboot was accepted if P is rebooting now (RDS
            // refuses the next one while it does): that one ends the sessions.
            if let Some(at) = unanswered
                && let Ok(Some(d)) = rds.describe(db, budget).await
                && d.status == "rebooting"
            {
                info!(
                    db,
                    "a reboot whose answer was lost is under way: waiting for it"
                );
                record(at).await;
                rebooting_seen = !refused_first;
                break at;
            }
            refused_first = true;
            // A refused reboot (P still `modifying` from the group change)
            // is a failed mutating call in CloudTrail: asked again every
            // 500 ms, not at the pace of a read.
            if !room_for(REBOOT_RETRY) {
                return Err(format!("reboot: {refused}"));
            }
            tokio::time::sleep(REBOOT_RETRY).await;
        },
    };
    // The wait for the restart, read at the schedule's pace from here.
    // `available` counts only once the reboot was seen to take effect: a
    // describe showing `rebooting`, or RDS's restart event after the
    // request. Users report describes still showing `available` for a
    // while after RebootDBInstance returned.
    let began = std::time::Instant::now();
    let mut events_read: Option<std::time::Instant> = None;
    loop {
        let status = match rds.describe(db, budget).await {
            Ok(Some(d)) if d.status == "available" => {
                let evidence = if rebooting_seen {
                    Some("seen rebooting, then available".to_owned())
                } else {
                    restart_event(rds, db, requested, budget, &mut events_read).await
                };
                if let Some(evidence) = evidence {
                    return Ok(format!(
                        "open sessions ended: {db} restarted ({evidence}; reboot accepted at {}, available {:.1} s later)",
                        requested.format("%H:%M:%S%.3f"),
                        (now() - requested).num_milliseconds() as f64 / 1000.0
                    ));
                }
                "available, with no sign yet that the reboot took effect".to_owned()
            }
            Ok(Some(d)) => {
                rebooting_seen |= d.status == "rebooting" && !refused_first;
                d.status
            }
            Ok(None) => return Err(format!("{db} disappeared while rebooting")),
            Err(e) => format!("describe: {}", crate::error::chain(&e)),
        };
        let pause = poll_after(began.elapsed());
        if !room_for(pause) {
            return Err(format!(
                "{db} still {status} after its reboot: sessions opened before the fence may still write"
            ));
        }
        tokio::time::sleep(pause).await;
    }
}

/// RDS's restart event since the reboot was `requested`, read at most
/// once a second (the describes already take most of RDS's request rate).
async fn restart_event<F: DbFencer>(
    rds: &F,
    db: &str,
    requested: DateTime<Utc>,
    budget: Duration,
    last_read: &mut Option<std::time::Instant>,
) -> Option<String> {
    if last_read.is_some_and(|t| t.elapsed() < Duration::from_secs(1)) {
        return None;
    }
    *last_read = Some(std::time::Instant::now());
    // No slack before the request: an earlier restart (P rebooting for a
    // reason of its own) must never pass for ours. RDS dates its event after
    // the restart, seconds after `requested`; a Lambda clock ahead of RDS's
    // only makes the fence wait longer.
    match rds.restarted_since(db, requested, budget).await {
        Ok(Some(at)) => Some(format!(
            "RDS reported it restarted at {}",
            at.format("%H:%M:%S%.3f")
        )),
        Ok(None) => None,
        Err(e) => {
            warn!(error = %crate::error::chain(&e), "could not read P's restart event");
            None
        }
    }
}

/// How often a refused reboot is asked again.
const REBOOT_RETRY: Duration = Duration::from_millis(500);

/// How long the fence waits before it reads P again, `waited` into a wait
/// (the group's change, the reboot): every 100 ms for the first 2 s (a
/// group change RDS applies at once, and the emulated world's compressed
/// pace), every 500 ms to 10 s, then every second. A reboot of minutes is
/// then read about once a second, well inside RDS's sustained 12 requests a
/// second per account and Region ("Request throttling for the Amazon RDS
/// API", RDS User Guide), which the app's own tooling shares in P; and a
/// change is seen at most one pause after RDS shows it.
fn poll_after(waited: Duration) -> Duration {
    if waited < Duration::from_secs(2) {
        Duration::from_millis(100)
    } else if waited < Duration::from_secs(10) {
        Duration::from_millis(500)
    } else {
        Duration::from_secs(1)
    }
}

#[allow(clippy::too_many_arguments)]
fn result(
    outcome: FenceOutcome,
    policy: OnUnconfirmed,
    // P's RDS API answered no call of this fence.
    unreachable: bool,
    previous: Vec<String>,
    fence_group: String,
    started_at: DateTime<Utc>,
    fenced_at: DateTime<Utc>,
    epoch: i64,
    detail: String,
) -> FenceResult {
    let proceed = policy == OnUnconfirmed::Proceed && unreachable;
    let detail =
        if outcome == FenceOutcome::Unconfirmed && policy == OnUnconfirmed::Proceed && !unreachable
        {
            format!("{detail}; P's RDS API answered, so on_unconfirmed: proceed does not apply")
        } else {
            detail
        };
    FenceResult {
        outcome,
        policy,
        may_proceed: outcome == FenceOutcome::Confirmed || proceed,
        previous_security_groups: previous,
        fence_security_group: fence_group,
        started_at,
        fenced_at,
        epoch,
        detail,
    }
}

#[cfg(test)]
mod tests {
    use super::poll_after;
    use std::time::Duration;

    #[test]
    fn the_fence_waits_out_a_whole_claim_of_the_sweep() {
        let lease = crate::store::primary::UNFENCE_LEASE.num_milliseconds() as u64;
        assert!(crate::plan::FENCE_SWEEP_WAIT_MS >= lease + 5_000);
    }

    /// The reads a wait of `total` costs under the schedule.
    fn reads(total: Duration) -> u32 {
        let (mut waited, mut n) = (Duration::ZERO, 0);
        while waited < total {
            waited += poll_after(waited);
            n += 1;
        }
        n
    }

    #[test]
    fn the_fence_reads_p_quickly_at_first_and_about_once_a_second_through_a_long_reboot() {
        // A change applied within a second is seen within 100 ms of it.
        assert_eq!(
            poll_after(Duration::from_millis(900)),
            Duration::from_millis(100)
        );
        // A reboot of 5 minutes: about one DescribeDBInstances a second,
        // far inside RDS's sustained 12 a second per account and Region.
        let n = reads(Duration::from_secs(300));
        assert!((310..=330).contains(&n), "{n} reads in 5 minutes");
        assert_eq!(reads(Duration::from_secs(2)), 20);
    }
}
