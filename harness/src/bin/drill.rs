//! `make drill`: a full local failover drill on emulated AWS.
//!
//! It starts a world on 127.0.0.1 (moto behind the router, PostgreSQL, a Slack
//! stand-in, P's and S's apps, the real functions under `cargo lambda watch`),
//! provisions it from `drill/plan.json`, breaks P, lets `detect` fire on a
//! compressed clock, answers the approval through a signed Slack click,
//! follows the execution, delivers the status-change event to `audit`, and
//! writes the report under `out/drill-<timestamp>/`.
//!
//! `DRILL_DECISION=approve` (default) | `reject` | `timeout` | `interactive` |
//! `switchover` (no break: a planned switchover started by `handover switchover`).
//! `HANDOVER_PACE=real HANDOVER_SCALE=k` runs the world at AWS's durations
//! divided by k, the plan's timings too (`harness/src/pace.rs`).
//! `DRILL_INCIDENT=partition` (default) | `app-down`: what breaks P.
//! Exits 0 when the asked-for scenario happened; otherwise non-zero with why.

use anyhow::{Result, bail};
use chrono::Utc;
use handover_testkit::drill::{Decision, Drill, Options, Summary, start_emulator};
use handover_testkit::process::say;
use std::process::ExitCode;
use std::time::Instant;

fn main() -> ExitCode {
    let started = Instant::now();
    let decision = match Decision::from_env() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("drill: {e:#}");
            return ExitCode::from(2);
        }
    };
    let options = match Options::from_env(decision) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("drill: {e:#}");
            return ExitCode::from(2);
        }
    };
    let out = handover_testkit::process::workspace_root()
        .join("out")
        .join(format!(
            "drill-{}-{decision}",
            Utc::now().format("%Y%m%dT%H%M%SZ")
        ));
    say(
        started,
        format!("drill ({decision}): output in {}", out.display()),
    );
    // The emulator starts before the runtime: it sets this process's AWS environment.
    let emulator = match start_emulator(&out) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("drill FAILED: {e:#}");
            return ExitCode::FAILURE;
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let outcome = runtime.block_on(async {
        let run = async {
            let mut drill = Drill::start(&out, emulator, started, options).await?;
            drill.run(decision).await
        };
        tokio::select! {
            r = run => r,
            _ = tokio::signal::ctrl_c() => Err(anyhow::anyhow!("interrupted (Ctrl-C)")),
        }
    });
    runtime.shutdown_timeout(std::time::Duration::from_secs(2));
    match outcome.and_then(|s| check(decision, &s).map(|()| s)) {
        Ok(summary) => {
            println!("{summary}");
            println!(
                "drill: the {decision} scenario happened as asked ({:.0} s)",
                started.elapsed().as_secs_f64()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("drill FAILED: {e:#}\nlogs: {}", out.display());
            ExitCode::FAILURE
        }
    }
}

fn check(decision: Decision, s: &Summary) -> Result<()> {
    let want = match decision {
        Decision::Approve | Decision::Switchover | Decision::Roundtrip => "SUCCEEDED",
        Decision::Reject => "Handover.Rejected",
        Decision::Timeout => "Handover.ApprovalTimedOut",
        Decision::Interactive => return Ok(()),
    };
    let got = if s.status == "SUCCEEDED" {
        "SUCCEEDED"
    } else {
        s.error.as_deref().unwrap_or(&s.status)
    };
    if got != want {
        bail!(
            "asked for {decision}, expected {want}, got {got}: {:?}",
            s.cause
        );
    }
    Ok(())
}
