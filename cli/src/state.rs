//! `handover status`, `pause` and `resume`: Handover's own state, read from
//! and written to the table with the operator's credentials.

use crate::Context;
use crate::exit::{Exit, Failure};
use handover::store::control::Pause;
use serde_json::json;

fn failed(e: impl std::error::Error) -> Failure {
    (
        Exit::Failed,
        format!(
            "the table could not be read or written (retry): {}",
            handover::error::chain(&e)
        ),
    )
}

fn when(t: Option<chrono::DateTime<chrono::Utc>>) -> String {
    t.map_or_else(
        || "—".to_owned(),
        |t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string(),
    )
}

/// Who acts: `--by`, else the login name, else refused (it is shown to
/// everyone who wonders why Handover does not fail over).
fn who(by: Option<String>) -> Result<String, Failure> {
    by.or_else(|| std::env::var("USER").ok())
        .filter(|s| !s.trim().is_empty())
        .ok_or_else(|| {
            (
                Exit::Usage,
                "say who you are: --by NAME (no USER in the environment)".to_owned(),
            )
        })
}

/// Everything an operator asks first at 3 a.m.
pub async fn status(ctx: Context, json: bool) -> Result<String, Failure> {
    let store = &ctx.store;
    let p = &ctx.plan.regions.primary;
    let (primary, lock, probe, pause, readiness) = tokio::join!(
        store.primary(),
        store.lock_state(),
        store.probe_run(&p.region),
        store.pause(),
        store.readiness(),
    );
    let (primary, lock, probe, pause, readiness) = (
        primary.map_err(failed)?,
        lock.map_err(failed)?,
        probe.map_err(failed)?,
        pause.map_err(failed)?,
        readiness.map_err(failed)?,
    );
    let now = chrono::Utc::now();
    // The run holding the lock, and the state it is in.
    let run = match lock
        .as_ref()
        .filter(|l| l.holder.is_some())
        .and_then(|l| l.execution.clone())
    {
        Some(arn) => Some((arn.clone(), current_state(&ctx, &arn).await)),
        None => None,
    };
    if json {
        let doc = json!({
            "service": ctx.plan.service,
            "primary": primary.as_ref().map(|r| json!({
                "region": r.region, "db_instance_id": r.db_instance_id, "epoch": r.epoch,
                "transition": r.transition.as_ref().map(|t| json!({
                    "execution": t.execution, "phase": t.phase, "since": t.since,
                })),
                "last_execution": r.last_execution, "promoted_at": r.promoted_at,
                "unfence_pending": r.unfence_pending,
            })),
            "lock": lock.as_ref().map(|l| json!({
                "holder": l.holder, "lease_until": l.lease_until,
                "cooldown_until": l.cooldown_until, "last_incident": l.last_incident,
                "execution": l.execution,
            })),
            "run": run.as_ref().map(|(arn, s)| match s {
                Ok((status, state)) => json!({"execution": arn, "status": status, "state": state}),
                Err(e) => json!({"execution": arn, "error": e}),
            }),
            "probe": {"region": p.region, "consecutive_failures": probe.consecutive_failures,
                      "t0": probe.t0, "last_tick": probe.last_tick},
            "pause": pause,
            "readiness": readiness.as_ref().map(|r| &r.readiness),
        });
        return Ok(serde_json::to_string_pretty(&doc).unwrap_or_default());
    }
    let mut out = vec![format!("Handover for {}", ctx.plan.service)];
    out.push(match &primary {
        Some(r) => format!(
            "primary: {} in {} at epoch {}{}",
            r.db_instance_id,
            r.region,
            r.epoch,
            r.last_execution
                .as_deref()
                .map(|e| format!(" (last failover {e}, promoted {})", when(r.promoted_at)))
                .unwrap_or_default()
        ),
        None => "primary: NO RECORD (run `handover init`)".into(),
    });
    if let Some(t) = primary.as_ref().and_then(|r| r.transition.as_ref()) {
        out.push(format!(
            "transition: {:?} by {} since {}",
            t.phase,
            t.execution,
            when(Some(t.since))
        ));
    }
    if let Some(groups) = primary.as_ref().and_then(|r| r.unfence_pending.as_ref()) {
        out.push(format!(
            "UNFENCE PENDING: P's groups {groups:?} could not be restored yet (audit's sweep retries)"
        ));
    }
    out.push(match &lock {
        Some(l) => match &l.holder {
            Some(h) => format!(
                "lock: held by {h} until {}{}",
                when(l.lease_until),
                if l.lease_until.is_some_and(|u| u < now) {
                    " (PAST ITS LEASE)"
                } else {
                    ""
                }
            ),
            None => format!(
                "lock: free{}",
                l.cooldown_until
                    .filter(|c| *c > now)
                    .map(|c| format!(", cooldown until {}", when(Some(c))))
                    .unwrap_or_default()
            ),
        },
        None => "lock: free (never taken)".into(),
    });
    if let Some((arn, s)) = &run {
        out.push(match s {
            Ok((status, Some(state))) => format!("run: {arn} is {status}, in state {state}"),
            Ok((status, None)) => format!("run: {arn} is {status}"),
            Err(e) => format!("run: {arn} could not be read: {e}"),
        });
    }
    out.push(format!(
        "probe of P ({}): {} consecutive failing ticks{}, last tick {}",
        p.region,
        probe.consecutive_failures,
        probe
            .t0
            .map(|t| format!(" since T0 {}", when(Some(t))))
            .unwrap_or_default(),
        when(probe.last_tick)
    ));
    out.push(if pause.paused {
        format!(
            "PAUSED by {}: {} (detect probes but starts no failover)",
            pause.by.as_deref().unwrap_or("?"),
            pause.reason.as_deref().unwrap_or("no reason given")
        )
    } else {
        "not paused".into()
    });
    out.push(match &readiness {
        Some(r) => format!(
            "{} ({} min ago)",
            r.readiness.summary(),
            (now - r.readiness.at).num_minutes()
        ),
        None => "readiness: never evaluated".into(),
    });
    Ok(out.join("\n"))
}

/// Stop detect from starting failovers (it goes on probing and recording).
pub async fn pause(
    ctx: Context,
    reason: Option<String>,
    by: Option<String>,
) -> Result<String, Failure> {
    let reason = reason
        .filter(|r| !r.trim().is_empty())
        .ok_or_else(|| (Exit::Usage, "say why: --reason TEXT (it is shown in `handover status` and to whoever wonders why nothing fails over)".to_owned()))?;
    let by = who(by)?;
    let p = Pause {
        paused: true,
        reason: Some(reason.clone()),
        by: Some(by.clone()),
    };
    ctx.store
        .set_pause(&p, chrono::Utc::now())
        .await
        .map_err(failed)?;
    Ok(format!(
        "paused by {by}: {reason}. detect goes on probing but starts no failover until `handover resume`."
    ))
}

/// Let detect start failovers again.
pub async fn resume(ctx: Context, by: Option<String>) -> Result<String, Failure> {
    let by = who(by)?;
    let before = ctx.store.pause().await.map_err(failed)?;
    ctx.store
        .set_pause(
            &Pause {
                paused: false,
                reason: Some(format!("resumed by {by}")),
                by: Some(by.clone()),
            },
            chrono::Utc::now(),
        )
        .await
        .map_err(failed)?;
    Ok(if before.paused {
        format!(
            "resumed by {by} (was paused by {}: {})",
            before.by.as_deref().unwrap_or("?"),
            before.reason.as_deref().unwrap_or("no reason given")
        )
    } else {
        format!("was not paused; nothing changed but the record of {by} resuming")
    })
}

/// An execution's status and the last state it entered
/// (states:DescribeExecution, states:GetExecutionHistory newest first).
async fn current_state(ctx: &Context, arn: &str) -> Result<(String, Option<String>), String> {
    let sfn = ctx.aws.sfn(&ctx.region).await;
    let text = |e: &dyn std::error::Error| handover::error::chain(e);
    let d = match sfn.describe_execution().execution_arn(arn).send().await {
        Ok(d) => d,
        Err(e)
            if e.as_service_error()
                .is_some_and(|s| s.is_execution_does_not_exist()) =>
        {
            return Ok((
                "never started (detect took the lock; its StartExecution did not land)".into(),
                None,
            ));
        }
        Err(e) => return Err(text(&e)),
    };
    let h = sfn
        .get_execution_history()
        .execution_arn(arn)
        .reverse_order(true)
        .max_results(25)
        .send()
        .await
        .map_err(|e| text(&e))?;
    let state = h
        .events()
        .iter()
        .find_map(|e| e.state_entered_event_details().map(|d| d.name().to_owned()));
    Ok((d.status().as_str().to_owned(), state))
}
