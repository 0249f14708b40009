//! Compensation when a run ends: nothing left half-done before the
//! irreversible step, nothing left unreported after it.
//!
//! audit calls [`compensate`] on every terminal status (SUCCEEDED, FAILED,
//! TIMED_OUT, ABORTED: the last two never pass through the state machine's
//! Catch). If this execution still holds the transition:
//! - **the promotion was never called**: P's security groups go back to the
//!   ones recorded before the fence, and the transition is released, so
//!   the next incident can fail over;
//! - **the promotion was called**: the world decides. S no longer a replica
//!   means it was promoted: the record moves to S (epoch + 1), as the status
//!   poll would have done. S still a replica (or unreadable): nothing is
//!   touched and a person is told, since the promotion may still complete.
//!
//! Undoing waits while a task of the run may still act ([`TAIL`] after its
//! stop): an aborted or timed-out run can leave a fence or promote
//! invocation running, and unfencing P under a promotion that then lands
//! makes two writers. Until then the outcome is [`Compensation::Deferred`],
//! and audit's sweep compensates once the tail is over.

use super::fence::DbFencer;
use crate::adapters::DbInspector;
use crate::plan::Plan;
use crate::report::facts::RunFacts;
use crate::store::Store;
use crate::store::primary::{PromotionOutcome, TransitionOutcome, UNFENCE_LEASE, UnfenceClaim};
use chrono::{DateTime, Utc};
use serde::Serialize;
use std::time::Duration;
use tracing::{error, info, warn};

/// How long compensation keeps trying to unfence P (RDS refuses a modify
/// while P reboots; a reboot takes about a minute).
const UNFENCE_BUDGET: Duration = Duration::from_secs(120);
/// The pause between attempts.
const UNFENCE_PAUSE: Duration = Duration::from_secs(2);

/// How long after a run closed its tasks may still be acting, when it was
/// closed from outside or a task's end does not say its invocation stopped
/// ([`RunFacts::tasks_may_act`]). Step Functions closing a run
/// (StopExecution, the run's or a task's timeout) does not stop a Lambda
/// invocation already running: the fence or promote function can still be
/// between its record write and its RDS call for up to its timeout (300 s
/// for fence, 60 s for promote in the template; a template test keeps them
/// under this), and RDS applies a call it accepted.
pub const TAIL: chrono::Duration = chrono::Duration::seconds(360);

/// Until when a task of the run may still act: `None` when nothing is in
/// flight. `stopped` is the run's stop date as Step Functions gave it, for
/// a history read before its terminal event.
pub fn acting_until(
    facts: &RunFacts,
    stopped: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    facts.tasks_may_act().then(|| {
        facts
            .terminal
            .as_ref()
            .map(|t| t.at)
            .or(stopped)
            .unwrap_or(now)
            + TAIL
    })
}

/// What compensation did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Compensation {
    /// This execution holds no transition: nothing to undo.
    Nothing,
    /// The promotion was never called: the transition is released.
    Released {
        /// P's groups as restored (None: the fence had recorded none, or
        /// restoring them failed; see `detail`).
        restored_groups: Option<Vec<String>>,
        /// What happened, in words (for the report and the operators).
        detail: String,
    },
    /// The promotion had been called and S is promoted: the record now names S.
    Completed {
        /// The new epoch.
        epoch: i64,
    },
    /// Nothing was promoted, and a task of the run may still be acting:
    /// P stays as it is and the transition stays held until `until`, when
    /// audit's sweep (or `handover release`) compensates.
    Deferred {
        /// When the run's tasks can no longer act.
        until: DateTime<Utc>,
    },
    /// Another compensation of this run (its own audit, the sweep, or
    /// `handover release`) holds a live claim: it is restoring P. This one
    /// touched nothing.
    Elsewhere {
        /// What it found, in words.
        detail: String,
    },
    /// The promotion had been called and S is not (yet) promoted, or the
    /// world could not be read: left as it is for a person.
    Unresolved {
        /// Why, and what to check.
        detail: String,
    },
}

/// Undo or complete what `execution` left in the primary record.
/// `acting_until` ([`acting_until`]): until when a task of the run may still
/// act; undoing waits for it, completing does not.
pub async fn compensate<P: DbFencer + Sync, S: DbInspector + Sync>(
    plan: &Plan,
    store: &Store,
    execution: &str,
    acting_until: Option<DateTime<Utc>>,
    p_rds: &P,
    s_rds: &S,
    now: DateTime<Utc>,
) -> Compensation {
    let budget = Duration::from_millis(plan.fence.timeout_ms);
    let rec = match store.primary().await {
        Ok(Some(rec)) => rec,
        Ok(None) => return Compensation::Nothing,
        Err(e) => {
            return Compensation::Unresolved {
                detail: format!(
                    "the primary record could not be read: {}",
                    crate::error::chain(&e)
                ),
            };
        }
    };
    let Some(tr) = rec.transition.as_ref().filter(|t| t.execution == execution) else {
        return Compensation::Nothing;
    };
    let (p, s) = (&plan.regions.primary, &plan.regions.standby);
    // A claimed promotion whose call was never recorded may still have
    // reached RDS (its answer lost, then the retries ran out): S decides.
    let called = match (tr.promote_called_at, tr.promote_claimed_at) {
        (Some(called), _) => Some(called),
        (None, Some(claimed)) => match s_rds.describe(&s.db_instance_id, budget).await {
            Ok(Some(d))
                if d.replication_source.is_none()
                    || matches!(d.status.as_str(), "modifying" | "rebooting") =>
            {
                warn!(execution, status = %d.status, "promotion claimed, never recorded as called, and S shows it started");
                Some(claimed)
            }
            Ok(_) => None,
            Err(e) => {
                return Compensation::Unresolved {
                    detail: format!(
                        "the promotion was claimed at {claimed} and S could not be read ({}): P stays fenced until a person looks",
                        crate::error::chain(&e)
                    ),
                };
            }
        },
        (None, None) => None,
    };
    if let Some(called) = called {
        // Read the world: was S promoted?
        return match s_rds.describe(&s.db_instance_id, budget).await {
            Ok(Some(d)) if d.replication_source.is_none() && d.status == "available" => match store
                .complete_promotion(rec.epoch, execution, &s.region, &s.db_instance_id, now)
                .await
            {
                Ok(PromotionOutcome::Promoted(r) | PromotionOutcome::AlreadyPromoted(r)) => {
                    info!(
                        execution,
                        epoch = r.epoch,
                        "the run ended after promoting S: the record now names S"
                    );
                    Compensation::Completed { epoch: r.epoch }
                }
                Ok(other) => Compensation::Unresolved {
                    detail: format!("S is promoted but the record could not be moved: {other:?}"),
                },
                Err(e) => Compensation::Unresolved {
                    detail: format!(
                        "S is promoted but the record could not be moved: {}",
                        crate::error::chain(&e)
                    ),
                },
            },
            Ok(found) => {
                let seen = found.map_or("not found".to_owned(), |d| {
                    format!(
                        "{} (replication source {:?})",
                        d.status, d.replication_source
                    )
                });
                error!(execution, alert = true, s = %seen, "promotion called but S is not promoted: a person must reconcile");
                Compensation::Unresolved {
                    detail: format!(
                        "PromoteReadReplica was called at {called} and S is {seen}: the promotion may still complete; the transition stays until a person reconciles it"
                    ),
                }
            }
            Err(e) => Compensation::Unresolved {
                detail: format!("S could not be read: {}", crate::error::chain(&e)),
            },
        };
    }
    // Never promoted, as far as S tells. A promote invocation still running
    // may be between its claim and its call, and a fence invocation may yet
    // apply the fence: undoing now could make two writers, or fence P with
    // nothing held. Wait them out. A claimed promotion waits TAIL after its
    // claim whatever the history says: its call may have gone out with the
    // answer lost (the invocation then ended with an error of its own), and
    // RDS can take a moment to show a promotion it accepted.
    let claimed_until = tr.promote_claimed_at.map(|c| c + TAIL);
    if let Some(until) = acting_until.max(claimed_until).filter(|u| *u > now) {
        warn!(execution, %until, "the run ended with a task that may still act: compensation waits for it");
        return Compensation::Deferred { until };
    }
    // Never promoted: unfence P, then release the transition. RDS refuses a
    // modify while P is `rebooting` (the fence's reboot, perhaps repeated
    // when its answers were lost), so a refusal of that kind, or a transient
    // error, is retried for up to UNFENCE_BUDGET. If P still cannot be
    // unfenced (P's Region unreachable, the instance failed), its groups are
    // kept in the record (`unfence_pending`) and the transition is released
    // all the same: a held transition would refuse every later failover. The
    // sweep retries the unfence while no run holds a transition, and the
    // next fence records these groups as P's.
    let mut claims = Vec::new();
    let (restored_groups, unfence) = match &tr.fence_previous_groups {
        Some(previous) if !previous.is_empty() => {
            let u = unfence_under_claim(
                store,
                p_rds,
                &p.db_instance_id,
                previous,
                rec.epoch,
                execution,
                budget,
            )
            .await;
            if !u.unknown {
                claims = u.tried;
            }
            let attempts = u.attempts;
            match u.result {
                Err(Stopped::Gone) => {
                    info!(
                        execution,
                        "another compensation of this run released its transition first: this one touched nothing"
                    );
                    return Compensation::Nothing;
                }
                Err(Stopped::Held { since }) => {
                    let detail = format!(
                        "another compensation of this run is restoring P's groups (its claim of {since}): this one touched nothing"
                    );
                    info!(execution, "{detail}");
                    return Compensation::Elsewhere { detail };
                }
                Ok(()) => (
                    Some(previous.clone()),
                    format!("P's security groups restored to {previous:?}"),
                ),
                Err(Stopped::Failed(e)) => {
                    error!(execution, alert = true, groups = ?previous, attempts, "P could not be unfenced");
                    let kept = match store.record_unfence_pending(previous, now).await {
                        Ok(()) => "its groups are kept in the record and audit's sweep tries again every 5 minutes".to_owned(),
                        Err(se) => format!("and its groups could not be kept in the record ({})", crate::error::chain(&se)),
                    };
                    (
                        None,
                        format!(
                            "P could NOT be unfenced after {attempts} attempts ({e}): nothing was promoted, so the service has no writer until P's groups are back; {kept}; to act now, restore P's security groups to {previous:?}"
                        ),
                    )
                }
            }
        }
        _ => (None, "the fence had not changed P".to_owned()),
    };
    let released = store.abandon_transition(rec.epoch, execution, now).await;
    // A call whose outcome is unknown may still land: its claim, renewed
    // before the release, then stays until it lapses.
    if let Err(e) = store.end_compensation_unfence(&claims, now).await {
        warn!(error = %crate::error::chain(&e), "the unfence claim stays until it lapses: a fence waits for it");
    }
    match released {
        Ok(TransitionOutcome::Claimed(_)) => {
            if restored_groups.is_some()
                && rec.unfence_pending.is_some()
                && let Err(e) = store.clear_unfence_pending(now).await
            {
                warn!(error = %crate::error::chain(&e), "P is unfenced but the pending record stays (the sweep will find P already unfenced)");
            }
            warn!(execution, unfence = %unfence, "the run ended before promotion: transition released");
            Compensation::Released {
                restored_groups,
                detail: format!("{unfence}; the transition is released"),
            }
        }
        Ok(other) => Compensation::Unresolved {
            detail: format!("{unfence}; the transition could not be released: {other:?}"),
        },
        Err(e) => Compensation::Unresolved {
            detail: format!(
                "{unfence}; the transition could not be released: {}",
                crate::error::chain(&e)
            ),
        },
    }
}

/// What [`unfence_under_claim`] did.
struct Unfence {
    /// Calls tried.
    attempts: u32,
    /// Every claim stamp this compensation wrote or tried to write.
    tried: Vec<DateTime<Utc>>,
    /// A call's outcome was unknown (it may still land): the claim was
    /// renewed at the end, and must stay until it lapses.
    unknown: bool,
    /// `Ok`: P's groups restored.
    result: Result<(), Stopped>,
}

/// Why [`unfence_under_claim`] stopped without restoring P.
enum Stopped {
    /// The run no longer holds the transition: no call went out after
    /// that was seen.
    Gone,
    /// Another compensation of the run holds a live claim.
    Held {
        /// When it claimed.
        since: DateTime<Utc>,
    },
    /// The last error, in words.
    Failed(String),
}

/// The least time left on a claim for a call to go out under it: the call
/// must end (its budget) before the claim lapses.
const CLAIM_MARGIN: Duration = Duration::from_secs(5);

/// Restore P's `previous` groups. Each call goes out only under a live
/// claim of this compensation ([`Store::claim_compensation_unfence`]),
/// taken at wall-clock time while the run still holds its transition, and
/// its budget ends before the claim lapses. Two compensations of one run
/// (the run's own audit and the sweep, side by side when audit's
/// concurrency is not reserved) never call together: the second finds the
/// first's claim. No fence begins while a claim is live. A call whose
/// outcome is unknown (it may still land), or a claim that replaced
/// another's lapsed one, renews the claim at the end, so that it holds a
/// whole lease after the last call ([`renew_for_late_calls`]). RDS refuses
/// a modify while P is `rebooting`, so such a refusal, a transient error,
/// or a failed claim write is retried for up to [`UNFENCE_BUDGET`].
async fn unfence_under_claim<P: DbFencer + Sync>(
    store: &Store,
    p_rds: &P,
    db: &str,
    previous: &[String],
    epoch: i64,
    execution: &str,
    budget: Duration,
) -> Unfence {
    let started = tokio::time::Instant::now();
    let mut u = Unfence {
        attempts: 0,
        tried: Vec::new(),
        unknown: false,
        result: Err(Stopped::Gone),
    };
    let mut last_call = None;
    loop {
        let at = Utc::now();
        u.tried.push(at);
        let claimed = store
            .claim_compensation_unfence(epoch, execution, &u.tried, at)
            .await;
        let error = match claimed {
            Ok(UnfenceClaim::Gone) => break,
            Ok(UnfenceClaim::Held { since }) => {
                u.result = Err(Stopped::Held { since });
                break;
            }
            Err(e) => format!(
                "the claim could not be written: {}",
                crate::error::chain(&e)
            ),
            Ok(UnfenceClaim::Claimed { took_over }) => {
                // It replaced another compensation's lapsed claim, whose
                // call may still land: keep this claim for a whole lease
                // at the end.
                u.unknown |= took_over;
                match call_under(at, budget) {
                    None => "the claim was written too late to call under it".to_owned(),
                    Some(call_budget) => {
                        u.attempts += 1;
                        last_call = Some(tokio::time::Instant::now());
                        match p_rds.set_security_groups(db, previous, call_budget).await {
                            Ok(()) => {
                                u.result = Ok(());
                                break;
                            }
                            Err(e) => {
                                u.unknown |= e.outcome_unknown();
                                if e.code() == Some("InvalidDBInstanceState") || e.is_transient() {
                                    crate::error::chain(&e)
                                } else {
                                    u.result = Err(Stopped::Failed(crate::error::chain(&e)));
                                    break;
                                }
                            }
                        }
                    }
                }
            }
        };
        if started.elapsed() + UNFENCE_PAUSE >= UNFENCE_BUDGET {
            u.result = Err(Stopped::Failed(error));
            break;
        }
        warn!(execution, attempts = u.attempts, %error, "P not unfenced yet; trying again");
        tokio::time::sleep(UNFENCE_PAUSE).await;
    }
    if u.unknown {
        renew_for_late_calls(store, epoch, execution, &mut u.tried, last_call).await;
    }
    u
}

/// After a call whose outcome is unknown (it may still land), renew the
/// claim while the transition is still this run's: no fence begins for a
/// whole lease from now. `Held` or `Gone`: another compensation's claim
/// covers it (one that took over a lapsed claim keeps its own until it
/// lapses). If the claim cannot be written, wait out a lease from the last
/// call instead, before the transition is released.
async fn renew_for_late_calls(
    store: &Store,
    epoch: i64,
    execution: &str,
    tried: &mut Vec<DateTime<Utc>>,
    last_call: Option<tokio::time::Instant>,
) {
    let at = Utc::now();
    tried.push(at);
    if let Err(e) = store
        .claim_compensation_unfence(epoch, execution, tried, at)
        .await
    {
        warn!(execution, error = %crate::error::chain(&e), "the unfence claim could not be renewed after a call whose outcome is unknown: waiting until that call can no longer land");
        if let (Some(sent), Ok(lease)) = (last_call, UNFENCE_LEASE.to_std()) {
            tokio::time::sleep_until(sent + lease).await;
        }
    }
}

/// The budget for a call under a claim taken at `at`: `budget`, cut so
/// that the call ends [`CLAIM_MARGIN`] before the claim lapses. `None`:
/// too little is left (the claim's write was slow).
fn call_under(at: DateTime<Utc>, budget: Duration) -> Option<Duration> {
    let left = (at + UNFENCE_LEASE - Utc::now()).to_std().ok()?;
    let usable = left.checked_sub(CLAIM_MARGIN)?;
    (usable >= Duration::from_secs(1)).then(|| budget.min(usable))
}
