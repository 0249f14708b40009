//! `make campaign`: the fault campaign on the local world.
//!
//! Runs seeded failover incidents through the real state machine and the
//! real binaries, each with a drawn scenario and fault schedule (see
//! `handover_testkit::campaign`), checks Handover's invariants after each,
//! and prints `fault campaign: <R> runs, <F> faults injected, <V> invariant
//! violations`. Exits non-zero when V > 0.
//!
//! - `HANDOVER_CAMPAIGN_RUNS` (default 40): how many runs, next incidents included.
//! - `HANDOVER_CAMPAIGN_SEED` (default 20261201): the seed the run seeds come from.
//! - `HANDOVER_CAMPAIGN_REPLAY=<seed>`: run that one seed (and its next incident) only.

use handover_testkit::campaign::{campaign, out_dir};
use handover_testkit::drill::start_emulator;
use handover_testkit::process::say;
use std::process::ExitCode;
use std::time::Instant;

fn seed(v: &str) -> Option<u64> {
    let v = v.trim();
    u64::from_str_radix(v.trim_start_matches("0x"), 16)
        .ok()
        .filter(|_| v.starts_with("0x") || v.len() == 16)
        .or_else(|| v.parse().ok())
}

fn main() -> ExitCode {
    let started = Instant::now();
    if let Err(e) = handover_testkit::pace::Pace::fast_only("the campaign") {
        eprintln!("campaign: {e:#}");
        return ExitCode::from(2);
    }
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let runs = match env("HANDOVER_CAMPAIGN_RUNS").map(|v| v.parse::<usize>()) {
        None => 40,
        Some(Ok(n)) if n > 0 => n,
        Some(_) => {
            eprintln!("campaign: HANDOVER_CAMPAIGN_RUNS must be a positive number");
            return ExitCode::from(2);
        }
    };
    let parse = |k: &str| match env(k) {
        None => Ok(None),
        Some(v) => seed(&v).map(Some).ok_or_else(|| {
            format!("campaign: {k}={v:?} is not a seed (decimal, or 16 hex digits as printed)")
        }),
    };
    let (base, replay) = match (
        parse("HANDOVER_CAMPAIGN_SEED"),
        parse("HANDOVER_CAMPAIGN_REPLAY"),
    ) {
        (Ok(b), Ok(r)) => (b.unwrap_or(20_261_201), r),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let out = out_dir();
    let _ = std::fs::remove_dir_all(&out);
    say(
        started,
        format!(
            "fault campaign: {runs} runs from seed {base}, output in {}",
            out.display()
        ),
    );
    let emulator = match start_emulator(&out) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("campaign FAILED: {e:#}");
            return ExitCode::FAILURE;
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let outcome = runtime.block_on(async {
        tokio::select! {
            r = campaign(&out, emulator, started, runs, base, replay) => r,
            _ = tokio::signal::ctrl_c() => Err(anyhow::anyhow!("interrupted (Ctrl-C)")),
        }
    });
    runtime.shutdown_timeout(std::time::Duration::from_secs(2));
    match outcome {
        Ok(0) => ExitCode::SUCCESS,
        Ok(_) => {
            eprintln!(
                "campaign: invariants broken; see {}/violations.txt",
                out.display()
            );
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("campaign FAILED: {e:#}\nlogs: {}", out.display());
            ExitCode::FAILURE
        }
    }
}
