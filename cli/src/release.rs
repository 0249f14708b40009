//! `handover release`: clear a transition or a lock an ended run left
//! behind, after showing what holds it and checking that its execution has
//! closed. A held transition refuses every later failover; a held lock
//! blocks detect until its lease runs out.
//!
//! The transition is not simply deleted: P may be fenced. It goes through
//! the same compensation the audit runs when a run ends
//! (`handover::failover::compensate`): unfence P when nothing was promoted,
//! move the record to S when S was, and leave it (with why) when the world
//! cannot tell. The lock is released with the run's cooldown.

use crate::Context;
use crate::exit::{Exit, Failure};
use handover::adapters::Rds;
use handover::error::chain;
use handover::execution::ExecutionInput;
use handover::failover::compensate::{Compensation, acting_until, compensate};
use handover::report::audit::cooldown_of;
use handover::report::sources::{ExecutionLookup, PAGE_SIZE, SfnHistory, fold_history};
use handover::store::lock::ReleaseOutcome;
use std::io::{BufRead, Write};

fn refused(m: impl std::fmt::Display) -> Failure {
    (Exit::Refused, format!("refused (nothing changed): {m}"))
}

fn failed(m: impl std::fmt::Display) -> Failure {
    (Exit::Failed, format!("failed: {m}"))
}

/// Has `execution` closed, long enough ago that none of its tasks can still
/// act (`handover::failover::compensate::TAIL` after a stop from outside or
/// a task whose end is not known)? `Ok(None)`: it does not exist (detect
/// took the lock and its StartExecution never landed). Returns its status
/// and input.
async fn closed(
    history: &SfnHistory,
    execution: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Option<(String, Option<ExecutionInput>)>, Failure> {
    match history.describe(execution).await {
        Ok((status, input)) => {
            if !status.is_terminal() {
                return Err(refused(format!(
                    "{execution} is {}: a live run holds it; let it end (audit compensates it then)",
                    status.status
                )));
            }
            let stopped = status
                .stop_date
                .and_then(chrono::DateTime::<chrono::Utc>::from_timestamp_millis);
            let facts = fold_history(history, execution, PAGE_SIZE)
                .await
                .map_err(|e| {
                    failed(format!("reading the history of {execution}: {}", chain(&e)))
                })?;
            if let Some(until) = acting_until(&facts, stopped, now).filter(|u| *u > now) {
                return Err(refused(format!(
                    "{execution} ended {} at {}; a task it started may still be acting until {}: run release again then",
                    status.status,
                    stopped.map_or("an unknown time".into(), |at| at
                        .format("%H:%M:%S UTC")
                        .to_string()),
                    until.format("%H:%M:%S UTC")
                )));
            }
            Ok(Some((status.status, serde_json::from_str(&input).ok())))
        }
        Err(e) if e.code() == Some("ExecutionDoesNotExist") => Ok(None),
        Err(e) => Err(failed(format!("reading {execution}: {}", chain(&e)))),
    }
}

/// Release what ended runs hold.
pub async fn release(ctx: Context, yes: bool) -> Result<String, Failure> {
    let (record, lock) = tokio::join!(ctx.store.primary(), ctx.store.lock_state());
    let record =
        record.map_err(|e| failed(format!("reading the primary record: {}", chain(&e))))?;
    let lock = lock.map_err(|e| failed(format!("reading the lock: {}", chain(&e))))?;
    let transition = record.as_ref().and_then(|r| r.transition.clone());
    let held = lock.as_ref().and_then(|l| {
        l.holder
            .clone()
            .map(|h| (h, l.execution.clone(), l.lease_until))
    });
    if transition.is_none() && held.is_none() {
        return Ok("nothing holds the failover: no transition, and the lock is free".into());
    }
    let history = SfnHistory::new(&ctx.aws, &ctx.region).await;
    let now = chrono::Utc::now();
    let mut shown = Vec::new();
    let mut run_plan = None;
    if let Some(t) = &transition {
        let state = closed(&history, &t.execution, now).await?;
        // Only a started run claims a transition: an unknown execution is
        // the wrong state machine or one past its retention. Its plan (the
        // instances, the fence) is unknown too: a person must look.
        let Some((_, input)) = &state else {
            return Err(refused(format!(
                "the transition names {}, which Step Functions does not know (another stack's state machine, or past retention): compensate by hand after checking P's security groups and S",
                t.execution
            )));
        };
        if input.is_none() {
            return Err(refused(format!(
                "the input of {} is not a Handover run's: its plan (instances, fence) is unknown",
                t.execution
            )));
        }
        shown.push(format!(
            "transition: {} holds it ({:?} toward {}, since {}); the run {}",
            t.execution,
            t.phase,
            t.to_region,
            t.since.format("%Y-%m-%d %H:%M:%S UTC"),
            match &state {
                Some((status, _)) => format!("ended {status}"),
                None => "does not exist".into(),
            }
        ));
        run_plan = state.and_then(|(_, i)| i).map(|i| i.plan);
    }
    if let Some((holder, execution, lease)) = &held {
        let state = match execution {
            Some(e) => Some((e.clone(), closed(&history, e, now).await?)),
            None => None,
        };
        let Some((execution, state)) = state else {
            return Err(refused(format!(
                "{holder} holds the lock and the lock does not name its execution (taken before Handover recorded it): wait for its lease ({}) to run out",
                lease.map_or("none".into(), |l| l
                    .format("%Y-%m-%d %H:%M:%S UTC")
                    .to_string())
            )));
        };
        // Detect takes the lock just before it starts the run: a run that
        // does not exist yet may be starting now. Only once the lease is
        // over can it not be.
        if state.is_none() && lease.is_none_or(|l| l > now) {
            return Err(refused(format!(
                "{holder} holds the lock and its run {execution} does not exist (yet): detect may be starting it; wait for the lease ({}) to run out",
                lease.map_or("none".into(), |l| l
                    .format("%Y-%m-%d %H:%M:%S UTC")
                    .to_string())
            )));
        }
        shown.push(format!(
            "lock: {holder} holds it (lease until {}); its run {execution} {}",
            lease.map_or("none".into(), |l| l
                .format("%Y-%m-%d %H:%M:%S UTC")
                .to_string()),
            match &state {
                Some((status, _)) => format!("ended {status}"),
                None => "was never started".into(),
            }
        ));
        if run_plan.is_none() {
            run_plan = state.and_then(|(_, i)| i).map(|i| i.plan);
        }
    }
    // The plan that ran decides the instances and the fence; the current
    // one when the run left none (it never started).
    let plan = run_plan.unwrap_or_else(|| ctx.plan.clone());
    let what = shown.join("\n");
    if !yes {
        let mut err = std::io::stderr();
        let _ = write!(
            err,
            "{what}\n\nType `release` to release it (P is unfenced if nothing was promoted): "
        );
        let _ = err.flush();
        let mut line = String::new();
        let ok = std::io::stdin().lock().read_line(&mut line).is_ok() && line.trim() == "release";
        if !ok {
            return Err(refused("not confirmed"));
        }
    }
    let mut done = vec![what];
    let mut unresolved = None;
    if let Some(t) = &transition {
        let p = Rds::new(&ctx.aws, &plan.regions.primary.region).await;
        let s = Rds::new(&ctx.aws, &plan.regions.standby.region).await;
        // closed() refused while a task may act: nothing is in flight now.
        match compensate(&plan, &ctx.store, &t.execution, None, &p, &s, now).await {
            Compensation::Nothing => done.push("transition: already gone".into()),
            Compensation::Released { detail, .. } => {
                done.push(format!("transition released: {detail}"));
            }
            Compensation::Completed { epoch } => done.push(format!(
                "S had been promoted: the record now names S at epoch {epoch}. The run never finished: move traffic and the writer endpoint to S if it did not, then verify a write"
            )),
            Compensation::Deferred { until } => {
                unresolved = Some(format!("a task of the run may act until {until}"));
            }
            Compensation::Unresolved { detail } => unresolved = Some(detail),
            Compensation::Elsewhere { detail } => {
                unresolved = Some(format!(
                    "{detail}; run `handover status` in a minute, and `handover release` again if the transition is still held"
                ));
            }
        }
    }
    if let Some((holder, ..)) = &held {
        match ctx
            .store
            .release_lock(holder, now, cooldown_of(&plan))
            .await
            .map_err(|e| failed(format!("releasing the lock: {}", chain(&e))))?
        {
            ReleaseOutcome::Released { cooldown_until } => done.push(format!(
                "lock released; detect starts no run before {}",
                cooldown_until.format("%Y-%m-%d %H:%M:%S UTC")
            )),
            ReleaseOutcome::NotHolder { holder: now_held } => done.push(format!(
                "lock: no longer held by {holder} (now {})",
                now_held.as_deref().unwrap_or("free")
            )),
        }
    }
    match unresolved {
        Some(detail) => Err((
            Exit::Refused,
            format!("{}\ntransition NOT released: {detail}", done.join("\n")),
        )),
        None => Ok(done.join("\n")),
    }
}
