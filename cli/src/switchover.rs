//! `handover switchover`: start a planned switchover, P → S, with RPO 0.
//!
//! It takes the same lock detect takes (so no failover can start beside
//! it, and it cannot start beside one), then starts the state machine with
//! `mode: switchover`. The run checks readiness on its plan, asks for
//! approval as a failover does, fences P, waits until S has replayed all
//! of P's WAL (or stops, and audit unfences P), then promotes, switches
//! and verifies.

use crate::Context;
use crate::args::StartArgs;
use crate::exit::{Exit, Failure};
use chrono::Utc;
use handover::adapters::{AwsError, ExecutionStarter, Sfn, StartOutcome};
use handover::execution::{ExecutionInput, Mode, Side};
use handover::report::sources::{ExecutionLookup, SfnHistory};
use handover::store::lock::{AcquireOutcome, KeepOutcome, ReleaseOutcome};
use std::io::{BufRead, Write};

pub(crate) fn failed(e: impl std::fmt::Display) -> Failure {
    (Exit::Failed, format!("failed (retry): {e}"))
}

pub(crate) fn refused(m: impl std::fmt::Display) -> Failure {
    (Exit::Refused, format!("refused: {m}"))
}

/// The execution name: `<service>-switchover-<time>` (at most 80 characters
/// of `[A-Za-z0-9-_]`, as detect's incident ids).
pub fn switchover_id(service: &str, at: chrono::DateTime<Utc>) -> String {
    handover::detect::incident_id(service, "switchover", at)
}

/// Start a planned switchover.
pub async fn switchover(ctx: Context, start: &StartArgs) -> Result<String, Failure> {
    let plan = &ctx.plan;
    let state_machine = state_machine_arn(start)?;
    let record = idle_record(&ctx).await?;
    if record.region != plan.regions.primary.region {
        return Err(refused(format!(
            "the primary record names {} ({}), not the plan's P ({}): after a failover S has no replica to switch over to; getting back to P is a failback",
            record.db_instance_id, record.region, plan.regions.primary.region
        )));
    }
    let (p, s) = (&plan.regions.primary, &plan.regions.standby);
    let what = format!(
        "Planned switchover of {}: {} ({}) → {} ({}), epoch {} → {}.\n\
         The run checks readiness, asks for approval in Slack (or `handover approve`), fences P \
         (P takes no writes from then on), waits up to {} s until S has replayed all of P's WAL, \
         then promotes {} and moves traffic and the writer endpoint. If S does not catch up, \
         nothing is promoted and P is unfenced.",
        plan.service,
        p.db_instance_id,
        p.region,
        s.db_instance_id,
        s.region,
        record.epoch,
        record.epoch + 1,
        plan.switchover.timeout_s,
        s.db_instance_id,
    );
    confirm(start.yes, &what, "switchover")?;
    let now = Utc::now();
    let name = switchover_id(&plan.service, now);
    let sfn = Sfn::new(&ctx.aws, &ctx.region, &state_machine).await;
    let arn = sfn.execution_arn(&name);
    // Longer than a failover's by the catch-up's bound: the lock must
    // outlive the run it guards. Until the run exists, the short lease
    // detect takes: a command that dies before the start holds detect off
    // for minutes, not for the run's whole lease. `start_run` extends it.
    let lease_s = plan.switchover_lease_s();
    take_lock(&ctx, &name, &arn, now, start_lease_s()).await?;
    let input = ExecutionInput {
        incident_id: name.clone(),
        drill: start.drill,
        mode: Mode::Switchover,
        t0: now,
        detected_at: now,
        primary: Side {
            region: record.region.clone(),
            db_instance_id: record.db_instance_id.clone(),
            epoch: Some(record.epoch),
        },
        standby: Side {
            region: s.region.clone(),
            db_instance_id: s.db_instance_id.clone(),
            epoch: None,
        },
        evidence: Vec::new(),
        plan: plan.clone(),
        failback: None,
    };
    start_run(&ctx, &sfn, &name, &arn, &input, &what, lease_s).await
}

/// The primary record, refused when there is none or a transition is open
/// (a planned run starts only when no run is moving the primary).
pub(crate) async fn idle_record(
    ctx: &Context,
) -> Result<handover::store::primary::PrimaryRecord, Failure> {
    let record = ctx
        .store
        .primary()
        .await
        .map_err(|e| failed(handover::error::chain(&e)))?
        .ok_or_else(|| refused("there is no primary record: run `handover init` first"))?;
    if let Some(t) = &record.transition {
        return Err(refused(format!(
            "a transition is in progress ({:?}, held by {} since {}): wait for it, or `handover release` once its run has ended",
            t.phase, t.execution, t.since
        )));
    }
    Ok(record)
}

/// The state machine's ARN: `--state-machine`, or `STATE_MACHINE_ARN`.
pub(crate) fn state_machine_arn(start: &StartArgs) -> Result<String, Failure> {
    start
        .state_machine
        .clone()
        .or_else(|| crate::env("STATE_MACHINE_ARN"))
        .ok_or_else(|| {
            (
                Exit::Usage,
                "no state machine: pass --state-machine (the stack output StateMachineArn) or set STATE_MACHINE_ARN"
                    .to_string(),
            )
        })
}

/// Ask the operator to type `word` (skipped when `yes`: `--yes`).
pub(crate) fn confirm(yes: bool, what: &str, word: &str) -> Result<(), Failure> {
    if yes {
        return Ok(());
    }
    let mut err = std::io::stderr();
    let _ = write!(err, "{what}\n\nType `{word}` to start it: ");
    let _ = err.flush();
    let mut line = String::new();
    let ok = std::io::stdin().lock().read_line(&mut line).is_ok() && line.trim() == word;
    if ok {
        Ok(())
    } else {
        Err(refused("not confirmed"))
    }
}

/// Take the lock detect takes for the run `name` (`arn`) for `lease_s`:
/// refused, with nothing changed, while another run holds it or it cools
/// down, or while a run whose lease lapsed still goes on.
pub(crate) async fn take_lock(
    ctx: &Context,
    name: &str,
    arn: &str,
    now: chrono::DateTime<Utc>,
    lease_s: u64,
) -> Result<(), Failure> {
    refuse_a_lapsed_running_holder(ctx, now).await?;
    let lease = chrono::Duration::seconds(i64::try_from(lease_s).unwrap_or(i64::MAX / 2));
    let acquired = match ctx.store.acquire_lock(name, arn, now, lease).await {
        Ok(a) => a,
        Err(e) => {
            // The write may have landed with its answer lost: a lock held
            // for a run that never starts would hold detect off for the
            // whole lease. Give it back if it is ours.
            let back = match ctx.store.lock_state().await {
                Ok(Some(l)) if l.holder.as_deref() == Some(name) => ctx
                    .store
                    .release_lock(name, Utc::now(), chrono::Duration::zero())
                    .await
                    .map(|_| "it had been taken: given back")
                    .unwrap_or("it may be held: `handover release` clears it"),
                Ok(_) => "it is not held by this run",
                Err(_) => "it may be held: `handover release` clears it",
            };
            return Err(failed(format!(
                "taking the lock: {}; {back}",
                handover::error::chain(&e)
            )));
        }
    };
    match acquired {
        // AlreadyOurs: a retried write whose first try landed, or another
        // invocation in the same second (the same name). Going on is safe:
        // StartExecution by name starts one run at most.
        AcquireOutcome::Acquired { .. } | AcquireOutcome::AlreadyOurs { .. } => Ok(()),
        AcquireOutcome::Held { by, until } => Err(refused(format!(
            "{by} holds the lock until {until}: a failover (or another planned run) is running"
        ))),
        AcquireOutcome::CoolingDown { until, after } => Err(refused(format!(
            "cooling down after {} until {until}",
            after.as_deref().unwrap_or("the last run")
        ))),
    }
}

/// How long after a lapsed lease a holder whose run does not show may
/// still be starting it: detect's tick and its Lambda timeout (50 s),
/// with room.
const STARTING_GRACE: chrono::Duration = chrono::Duration::seconds(120);

/// A lock whose lease lapsed can be taken over, but not while its run goes
/// on: that run would go on without the lock. audit's sweep keeps it back
/// within 5 minutes. Refuse, writing nothing. A holder with no run
/// recorded, or whose run ended or never started, may be taken over.
async fn refuse_a_lapsed_running_holder(
    ctx: &Context,
    now: chrono::DateTime<Utc>,
) -> Result<(), Failure> {
    let lock = ctx
        .store
        .lock_state()
        .await
        .map_err(|e| failed(handover::error::chain(&e)))?;
    let Some(lock) = lock else { return Ok(()) };
    let (Some(holder), Some(until), Some(run)) = (lock.holder, lock.lease_until, lock.execution)
    else {
        return Ok(());
    };
    if until >= now {
        return Ok(()); // live: the lock's own condition refuses it
    }
    let history = SfnHistory::new(&ctx.aws, &ctx.region).await;
    match history.describe(&run).await {
        Ok((status, _)) if status.is_terminal() => Ok(()),
        Ok((status, _)) => Err(refused(format!(
            "{holder}'s lease lapsed at {until}, but its run {run} is {}: audit's sweep keeps its lock within 5 minutes. Let that run end, or stop it, before starting another",
            status.status
        ))),
        // Not there: its starter may still be starting it (detect's tick
        // runs up to 50 s past its lease), so only a lease lapsed longer
        // ago than that may be taken over.
        Err(e) if matches!(e.code(), Some("ExecutionDoesNotExist" | "InvalidArn")) => {
            if now - until < STARTING_GRACE {
                Err(refused(format!(
                    "{holder}'s lease lapsed at {until}, and its run {run} does not show: it may still be starting. Try again in {} s",
                    STARTING_GRACE.num_seconds()
                )))
            } else {
                Ok(())
            }
        }
        Err(e) => Err(failed(format!(
            "{holder}'s lease lapsed, and whether its run {run} goes on is unknown: {}",
            handover::error::chain(&e)
        ))),
    }
}

/// The lease a planned run's lock has until the run has started: the one
/// detect takes before its start ([`handover::detect::START_LEASE`]).
pub(crate) fn start_lease_s() -> u64 {
    handover::detect::START_LEASE.num_seconds().unsigned_abs()
}

/// How long the command goes on trying to extend the lock once the run
/// exists, 5 s apart: a throttled or briefly unreachable table gets a
/// minute, well inside the start lease. After that, audit's sweep keeps it.
const EXTEND_FOR: std::time::Duration = std::time::Duration::from_secs(60);

/// The lock must be `name`'s, with a fresh start lease, when its run
/// starts: the time since it was taken (a failback's re-protection) is not
/// counted against the start.
async fn refresh_start_lease(ctx: &Context, name: &str) -> Result<(), Failure> {
    let lease = chrono::Duration::seconds(i64::try_from(start_lease_s()).unwrap_or(600));
    match ctx.store.renew_lock(name, Utc::now(), lease).await {
        Ok(true) => Ok(()),
        Ok(false) => Err(refused(format!(
            "the lock is no longer {name}'s (its lease ran out, or another run took it): nothing was started; run the command again"
        ))),
        Err(e) => {
            let lock = give_back(ctx, name).await;
            Err(failed(format!(
                "renewing the lock before the start: {}; nothing was started; {lock}",
                handover::error::chain(&e)
            )))
        }
    }
}

/// The run `arn` exists: extend its lock from the start lease to the run's
/// own, `lease_s` from now, and say what the lock is. The run's lock is
/// kept even if its start lease lapsed meanwhile, as audit's sweep keeps
/// it. A lock the command cannot extend within [`EXTEND_FOR`], or that
/// another incident took, ends the command with [`Exit::Started`]: the run
/// goes on, and the operator must look, not start it again.
async fn extend_for_the_run(
    ctx: &Context,
    name: &str,
    arn: &str,
    lease_s: u64,
) -> Result<String, Failure> {
    let lease = chrono::Duration::seconds(i64::try_from(lease_s).unwrap_or(i64::MAX / 2));
    let until = std::time::Instant::now() + EXTEND_FOR;
    let last = loop {
        let last = match ctx.store.keep_lock(name, Utc::now(), lease).await {
            Ok(KeepOutcome::Kept { .. }) => {
                return Ok(format!("held by {name} for up to {lease_s} s"));
            }
            Ok(KeepOutcome::NotHolder { holder }) => {
                return Err(started_unguarded(
                    arn,
                    format!(
                        "the lock is no longer {name}'s but {}'s (released, or taken after its lease lapsed). Run `handover status` now: if another run goes on, stop one of the two",
                        holder.as_deref().unwrap_or("nobody")
                    ),
                ));
            }
            Err(e) => handover::error::chain(&e),
        };
        if std::time::Instant::now() >= until {
            break last;
        }
        eprintln!("extending the lock for the run: {last}; trying again in 5 s");
        tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    };
    Err(started(
        arn,
        format!(
            "its lock could not be extended past its {} s start lease within {} s ({last}). audit's sweep keeps a running run's lock every 5 minutes: run `handover status` within 5 minutes to see that the run holds it; `handover pause` keeps detect from starting a failover meanwhile",
            start_lease_s(),
            EXTEND_FOR.as_secs()
        ),
    ))
}

/// The run `arn` exists, or may, but `what` went wrong after its start.
fn started(arn: &str, what: String) -> Failure {
    (
        Exit::Started,
        format!(
            "started, but: {what}.\nThe run {arn} exists: do not run the command again.\nnext: approve in Slack, or `handover approve --execution {arn}`"
        ),
    )
}

/// The run `arn` exists without its lock: no approve line, the operator
/// must first see which runs go on.
fn started_unguarded(arn: &str, what: String) -> Failure {
    (
        Exit::Started,
        format!("started, but: {what}.\nThe run {arn} exists: do not run the command again."),
    )
}

/// Give the lock `name` took back, without a cooldown (nothing ran under
/// it), and say how that went.
pub(crate) async fn give_back(ctx: &Context, name: &str) -> String {
    match ctx
        .store
        .release_lock(name, Utc::now(), chrono::Duration::zero())
        .await
    {
        Ok(ReleaseOutcome::Released { .. }) => "the lock was given back".to_string(),
        Ok(ReleaseOutcome::NotHolder { .. }) => "the lock was not ours any more".into(),
        Err(e) => format!(
            "the lock stays held until its lease ends, or `handover release` ({})",
            handover::error::chain(&e)
        ),
    }
}

/// Start the run `name` under the lock it holds, then extend the lock to
/// the run's lease `lease_s`. On a start that certainly did not happen,
/// give the lock back; on one that may have happened, leave the start lease.
pub(crate) async fn start_run(
    ctx: &Context,
    sfn: &Sfn,
    name: &str,
    arn: &str,
    input: &ExecutionInput,
    what: &str,
    lease_s: u64,
) -> Result<String, Failure> {
    let body = serde_json::to_string(input).map_err(failed)?;
    refresh_start_lease(ctx, name).await?;
    match sfn.start(name, &body).await {
        Ok(StartOutcome::Started { execution_arn }) => {
            let lock = extend_for_the_run(ctx, name, &execution_arn, lease_s).await?;
            Ok(format!(
                "{what}\n\nstarted: {execution_arn}\nlock: {lock}\nnext: approve in Slack, or `handover approve --execution {execution_arn}`"
            ))
        }
        // Another invocation in the same second started it: the same run,
        // under the same lock.
        Ok(StartOutcome::AlreadyExists { status, .. }) if status.as_deref() == Some("RUNNING") => {
            let lock = extend_for_the_run(ctx, name, arn, lease_s).await?;
            Ok(format!(
                "{what}\n\nstarted a moment ago by another invocation: {arn}\nlock: {lock}\nnext: approve in Slack, or `handover approve --execution {arn}`"
            ))
        }
        Ok(StartOutcome::AlreadyExists {
            status: Some(status),
            ..
        }) => {
            // A closed run of that name: nothing runs under this lock.
            let lock = give_back(ctx, name).await;
            Err(refused(format!(
                "an execution named {name} exists already ({status}); {lock}; try again in a second"
            )))
        }
        // A run of that name whose status could not be read may be running
        // under this lock: keep it.
        Ok(StartOutcome::AlreadyExists { status: None, .. }) => Err((
            Exit::Started,
            format!(
                "started, or may have: an execution named {name} exists, and its status could not be read. The lock stays held until its {} s start lease ends.\nDo not run the command again: run `handover status`",
                start_lease_s()
            ),
        )),
        Err(e) => after_a_failed_start(ctx, name, arn, what, lease_s, &e).await,
    }
}

/// StartExecution failed. A refusal (a 4xx answer) started nothing: give
/// the lock back. Otherwise the call may have started the run with its
/// answer lost, or may still start it: ask, and keep the start lease unless
/// the run shows (then extend it). A single "does not exist" proves
/// nothing: the describe is eventually consistent, and a timed-out attempt
/// may still land.
async fn after_a_failed_start(
    ctx: &Context,
    name: &str,
    arn: &str,
    what: &str,
    lease_s: u64,
    e: &AwsError,
) -> Result<String, Failure> {
    if !e.outcome_unknown() {
        let lock = give_back(ctx, name).await;
        return Err(failed(format!(
            "StartExecution was refused: {}; nothing started; {lock}",
            handover::error::chain(e)
        )));
    }
    let client = ctx.aws.sfn(&ctx.region).await;
    match client.describe_execution().execution_arn(arn).send().await {
        Ok(d) => {
            let lock = extend_for_the_run(ctx, name, arn, lease_s).await?;
            Ok(format!(
                "{what}\n\nstarted: {arn} ({}; StartExecution's answer was lost: {})\nlock: {lock}\nnext: approve in Slack, or `handover approve --execution {arn}`",
                d.status.as_str(),
                handover::error::chain(e)
            ))
        }
        Err(d) => {
            let why = if d
                .as_service_error()
                .is_some_and(|s| s.is_execution_does_not_exist())
            {
                "the run does not show yet, but the call may still create it".to_owned()
            } else {
                format!(
                    "whether the run started is unknown ({})",
                    handover::error::chain(&d)
                )
            };
            Err((
                Exit::Started,
                format!(
                    "started, or may have: StartExecution: {}; {why}. The lock stays held until its {} s start lease ends.\nDo not run the command again: run `handover status` in a minute",
                    handover::error::chain(e),
                    start_lease_s()
                ),
            ))
        }
    }
}
