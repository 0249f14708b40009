//! The sweep: audit on its own schedule, for a run whose audit never completed.
//!
//! audit normally runs on the run's terminal status (an EventBridge rule,
//! retried by EventBridge, then twice by Lambda). When every delivery fails
//! (audit throttled, S3 or DynamoDB down for the hour), the event lands in the
//! alarmed failure queue and nothing replays it: the lock stays held, and a
//! transition left by a run that fenced P makes every later run `Refused` at
//! the fence. The sweep reads the state store instead of trusting that the
//! event arrived. It takes the execution that holds the transition or the
//! lock; if that execution has ended, and ended more than [`GRACE`] ago (its
//! own audit may still be on its way), it runs the very audit the event would
//! have run: compensation, post-checks, the report, the lock release.

use super::audit::{AuditDeps, AuditError, AuditOutcome, Trigger, audit_for};
use super::sources::{ExecutionHistory, ExecutionLookup};
use crate::store::lock::KeepOutcome;
use chrono::{DateTime, Utc};
use tracing::{error, info, warn};

/// How long after a run ended the sweep leaves it to its own audit: longer
/// than EventBridge's and Lambda's retries of the status change take to
/// succeed in the common case (Lambda retries an asynchronous invocation
/// after about 1 and 2 minutes).
pub const GRACE: chrono::Duration = chrono::Duration::minutes(10);

/// One sweep. `state_machine_arn` names the lock holder's execution.
///
/// - The lock holder's run ended more than [`GRACE`] ago: its audit never
///   completed; run it now (late), exactly as the event would have.
/// - A transition is left by a run that ended and was audited (it no longer
///   holds the lock): its compensation left it for a person, typically a
///   promotion still under way when the run gave up (`PromotionStuck`).
///   Compensate again: once S's promotion has finished, the record moves to
///   S; a promotion that never finishes stays for a person.
pub async fn sweep<S: ExecutionHistory + ExecutionLookup>(
    deps: &AuditDeps,
    sfn: &S,
    state_machine_arn: &str,
    now: DateTime<Utc>,
) -> Result<AuditOutcome, AuditError> {
    let record = deps.store.primary().await?;
    // P left fenced by a run whose compensation could not undo it, and no
    // run holds a transition now: try the unfence again.
    let mut notes = Vec::new();
    if let Some(rec) = record.as_ref().filter(|r| r.transition.is_none())
        && let Some(groups) = &rec.unfence_pending
    {
        match unfence(deps, rec, groups).await? {
            Ok(done) => return Ok(done),
            Err(note) => notes.push(note),
        }
    }
    let transition = record.and_then(|r| r.transition);
    let holder = deps.store.lock_state().await?.and_then(|l| l.holder);
    let held = holder
        .as_ref()
        .map(|h| crate::adapters::sfn::execution_arn(state_machine_arn, h));
    if let Some(arn) = &held {
        match ended(sfn, arn).await? {
            Ended::Since(stopped, status) if now - stopped >= GRACE => {
                warn!(execution = %arn, status = %status.status, "a run ended and its audit never completed: auditing it now");
                return audit_for(deps, sfn, &status, now, Trigger::Sweep)
                    .await
                    .map(|(outcome, _)| outcome);
            }
            Ended::Since(..) => {
                notes.push(format!("{arn} ended moments ago: left to its own audit"))
            }
            Ended::Running(input) => {
                let holder = holder.as_deref().unwrap_or_default();
                notes.push(keep_the_lock(deps, holder, arn, &input, now).await?);
            }
            Ended::Missing => {
                // A lock taken for a run that never started: its lease ends it.
                warn!(execution = %arn, "the lock holder's execution does not exist; left to the lease");
                notes.push(format!("{arn} does not exist: left to the lock's lease"));
            }
        }
    }
    if let Some(t) = transition.filter(|t| held.as_ref() != Some(&t.execution)) {
        if let Ended::Since(_, status) = ended(sfn, &t.execution).await? {
            let (_, input) = sfn.describe(&t.execution).await?;
            let input: crate::execution::ExecutionInput =
                serde_json::from_str(&input).map_err(super::ReportError::Input)?;
            let plan = &input.plan;
            // Its audit may have deferred the undoing while a task it
            // started could still act: the same reading of its history.
            let facts =
                super::sources::fold_history(sfn, &t.execution, super::sources::PAGE_SIZE).await?;
            let acting_until =
                crate::failover::compensate::acting_until(&facts, status.stopped_at(), now);
            let (p_rds, s_rds) = (
                crate::adapters::Rds::new(&deps.aws, &plan.regions.primary.region).await,
                crate::adapters::Rds::new(&deps.aws, &plan.regions.standby.region).await,
            );
            let compensation = crate::failover::compensate::compensate(
                plan,
                &deps.store,
                &t.execution,
                acting_until,
                &p_rds,
                &s_rds,
                now,
            )
            .await;
            info!(execution = %t.execution, status = %status.status, compensation = ?compensation, "reconciled a transition its ended run left");
            // What the run's audit could not settle, settled now: the
            // channel hears it (an unresolved one is alerted by compensate's
            // log on every sweep, not posted every 5 minutes).
            if let crate::failover::compensate::Compensation::Released { detail, .. } =
                &compensation
            {
                let text = format!(
                    ":white_check_mark: *The sweep released the transition an ended run left* ({}): {detail}. The next incident can fail over.",
                    t.execution
                );
                super::audit::notify(deps, plan, &text).await;
            }
            if let crate::failover::compensate::Compensation::Completed { epoch } = &compensation {
                // The record now names S, but the run that gave up never
                // switched: traffic and the writer still point at fenced P.
                error!(execution = %t.execution, epoch, alert = true, "S finished promoting after its run gave up: traffic and the writer endpoint were not switched");
                let text = format!(
                    ":rotating_light: *S finished promoting after the run gave up* ({}). The primary record now names {} (epoch {epoch}), and P stays fenced. *Traffic and the writer endpoint were NOT switched*: move them to S now (the writer to `{}`, and the public name's lever as the plan's `dns.switch_mode` says), then verify a write.",
                    t.execution,
                    plan.regions.standby.region,
                    match &plan.dns.writer {
                        crate::plan::WriterEndpoint::Cname { standby_target, .. } => standby_target,
                        crate::plan::WriterEndpoint::SsmParameter { standby_value, .. } =>
                            standby_value,
                    }
                );
                super::audit::notify(deps, plan, &text).await;
            }
            return Ok(AuditOutcome::Reconciled {
                execution: t.execution,
                compensation,
            });
        }
        notes.push(format!("the transition's run {} is running", t.execution));
    }
    Ok(AuditOutcome::Skipped {
        status: if notes.is_empty() {
            "nothing left behind: no transition, lock free".into()
        } else {
            notes.join("; ")
        },
    })
}

/// Restore P's `groups` that compensation could not. The sweep first
/// claims the restoring in the primary record: a fence that began before
/// the claim makes it fail (P is left to that run), and a fence that comes
/// after waits for the claim to end. The claim ends only once a describe
/// shows the groups applied; a call whose outcome is unknown renews it. So
/// the sweep never undoes a fence, and a fence never records P's groups
/// half changed. `Ok(outcome)` when P was unfenced; `Err(note)` when not.
async fn unfence(
    deps: &AuditDeps,
    rec: &crate::store::primary::PrimaryRecord,
    groups: &[String],
) -> Result<Result<AuditOutcome, String>, AuditError> {
    use crate::failover::fence::DbFencer;
    use crate::store::primary::UnfenceEnd;
    let db = &rec.db_instance_id;
    let Some(claimed_at) = deps.store.claim_unfence(groups, Utc::now()).await? else {
        info!(%db, "a fence began, or another sweep is unfencing P: P left to it");
        return Ok(Err(
            "P's pending unfence is left to the run or sweep that holds P now".into(),
        ));
    };
    let p = crate::adapters::Rds::new(&deps.aws, &rec.region).await;
    let set = p
        .set_security_groups(db, groups, std::time::Duration::from_secs(10))
        .await;
    let how = match &set {
        Ok(()) if applied(&p, db, groups).await => UnfenceEnd::Done,
        // Accepted but not seen applied yet: RDS may still be applying it.
        Ok(()) => UnfenceEnd::Unknown,
        Err(e) if e.outcome_unknown() => UnfenceEnd::Unknown,
        Err(_) => UnfenceEnd::Refused,
    };
    let ended = deps.store.end_unfence(claimed_at, how, Utc::now()).await?;
    match (how, set) {
        (UnfenceEnd::Done, _) => {
            if ended {
                warn!(%db, ?groups, "the sweep unfenced P (its compensation could not)");
            } else {
                error!(%db, ?groups, alert = true, "the sweep's claim lapsed before it finished: a fence that began since may have been undone; check P's groups against the transition");
            }
            Ok(Ok(AuditOutcome::Reconciled {
                execution: String::new(),
                compensation: crate::failover::compensate::Compensation::Released {
                    restored_groups: Some(groups.to_vec()),
                    detail: format!("the sweep restored P's security groups to {groups:?}"),
                },
            }))
        }
        (_, Err(e)) => {
            error!(%db, alert = true, error = %crate::error::chain(&e), "P is still fenced with nothing promoted");
            Ok(Err(format!(
                "P is still fenced with nothing promoted and could not be unfenced ({}): restore its groups to {groups:?}",
                crate::error::chain(&e)
            )))
        }
        (_, Ok(())) => Ok(Err(format!(
            "P's groups {groups:?} were accepted but not seen applied: the next sweep checks again"
        ))),
    }
}

/// Does a describe of P show exactly `groups`, settled, within 20 s?
async fn applied<R: crate::adapters::rds::DbInspector>(p: &R, db: &str, groups: &[String]) -> bool {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        if let Ok(Some(d)) = p.describe(db, std::time::Duration::from_secs(5)).await
            && same_set(&d.security_groups, groups)
            && d.unsettled_security_groups.is_empty()
        {
            return true;
        }
        if std::time::Instant::now() >= until {
            return false;
        }
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
}

fn same_set(a: &[String], b: &[String]) -> bool {
    let set = |v: &[String]| {
        v.iter()
            .cloned()
            .collect::<std::collections::BTreeSet<String>>()
    };
    set(a) == set(b)
}

enum Ended {
    Since(DateTime<Utc>, Box<super::audit::ExecutionStatusChange>),
    /// Still running, with its input.
    Running(String),
    Missing,
}

/// A running run keeps the lock for its whole lease, counted from now.
/// detect (or the CLI) renews the lease once the run has started, but that
/// renewal can be lost (the starter died, or DynamoDB refused), and a tick
/// of a new incident never renews another's. The sweep runs every 5
/// minutes, inside the 10-minute start lease, so at least one sweep lands
/// before a start lease lapses (one failed sweep can be enough to let it
/// lapse). A lapsed lock the run still holds is taken back; one released
/// meanwhile (the run ended) or taken by another incident is not. The
/// lease only grows: audit releases the lock when the run ends.
async fn keep_the_lock(
    deps: &AuditDeps,
    holder: &str,
    arn: &str,
    input: &str,
    now: DateTime<Utc>,
) -> Result<String, AuditError> {
    let input: crate::execution::ExecutionInput =
        serde_json::from_str(input).map_err(super::ReportError::Input)?;
    let lease_s = match input.mode {
        crate::execution::Mode::Failover => input.plan.failover_lease_s(),
        crate::execution::Mode::Switchover => input.plan.switchover_lease_s(),
    };
    let lease = crate::plan::span_s(lease_s);
    match deps.store.keep_lock(holder, now, lease).await? {
        KeepOutcome::Kept { lapsed: false } => {
            info!(execution = %arn, lease_s, "a running run keeps the lock for its lease");
            Ok(format!(
                "{arn} is running: the lock is its own for {lease_s} s"
            ))
        }
        KeepOutcome::Kept { lapsed: true } => {
            warn!(execution = %arn, lease_s, alert = true, "a running run's lock had lapsed: taken back for its lease");
            Ok(format!(
                "{arn} is running and its lock had lapsed: taken back for {lease_s} s"
            ))
        }
        // Released between the describe and the write: the run has just
        // ended (audit released it), or `handover release` ran.
        KeepOutcome::NotHolder { holder: None } => {
            warn!(execution = %arn, holder, "a running run's lock was released meanwhile");
            Ok(format!(
                "{arn} was running, and its lock was released meanwhile"
            ))
        }
        KeepOutcome::NotHolder { holder: now_held } => {
            error!(execution = %arn, holder, now_held = now_held.as_deref().unwrap_or("nobody"), alert = true, "a running run's lock passed to another incident");
            Ok(format!(
                "{arn} is running, and its lock passed to another incident"
            ))
        }
    }
}

async fn ended<S: ExecutionLookup>(sfn: &S, arn: &str) -> Result<Ended, AuditError> {
    let (status, input) = match sfn.describe(arn).await {
        Ok(found) => found,
        Err(e) if e.code() == Some("ExecutionDoesNotExist") => return Ok(Ended::Missing),
        Err(e) => return Err(e.into()),
    };
    if !status.is_terminal() {
        return Ok(Ended::Running(input));
    }
    let stopped = status.stopped_at().unwrap_or(DateTime::<Utc>::MIN_UTC);
    Ok(Ended::Since(stopped, Box::new(status)))
}
