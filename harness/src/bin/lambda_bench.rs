//! `lambda_bench`: a function process as Lambda runs it, Rust against a
//! Python peer, in the same run and the same world.
//!
//! It starts the drill's world (moto behind the router, the plan in SSM, the
//! table, the state machine), then serves a local Lambda Runtime API
//! ([`handover_testkit::runtime_api`]) and, for each peer, spawns the
//! function's process cold, as Lambda would: the Rust binary, the Python 3 +
//! boto3 peer under `python -m awslambdaric` (`bench/python/`), and the
//! hello-world floor (`floor`). Each gets the environment the stack gives
//! the function. It measures init (spawn → the first `next`), the first and
//! a warm invocation (event handed out → response), and peak RSS (VmHWM),
//! and checks that the Python peer made the same AWS calls as the Rust
//! function (the router's call log, by action).
//!
//! Lambda gives CPU in proportion to memory (1,769 MB = 1 vCPU): each
//! process runs under a cgroup CPU quota for the template's MemorySize when
//! the machine allows it (cgroup v1 `cpu.cfs_quota_us`, or v2 `cpu.max`),
//! and says so when it does not.
//!
//! - `HANDOVER_BENCH_BIN` (default `target/release`): where the Rust
//!   binaries are (`make test` passes its debug build).
//! - `HANDOVER_BENCH_RUNS` (default 5): cold starts per peer; the medians
//!   are printed.
//! - `HANDOVER_BENCH_CHECK=1`: exit non-zero unless the Rust init is
//!   faster than the Python peer's (a ratio in one run, never an absolute
//!   time).
//! - `HANDOVER_BENCH_FUNCTIONS` (default `detect,slack`): which functions.
//! - `HANDOVER_BENCH_CLICKS` (default 20): cold starts of `slack` per peer,
//!   each with one cold and one warm click (the click's distribution).
//!
//! `slack` answers real clicks: before each, a Step Functions task really
//! waits for its token, the key is stored as the approval function stores
//! it, and the click is signed as Slack signs it and shaped as the
//! template's HTTP API route delivers it. The click counts only when the
//! answer is a 200, the key is recorded decided and delivered, and the
//! message was updated through `response_url`. A cold click is measured as
//! Lambda's caller lives it: the click is ready before the process is
//! spawned, handed out at its first `next`, and timed from the spawn to its
//! 200. The calls answered with an error (which the SDK retries) are left
//! out of the comparison between peers, so a retry in one run does not
//! make them differ.
//!
//! Prints, per function:
//! `bench <function>: init <r> ms vs <p> ms (x<ratio>), rss <r> MB vs <p> MB, first <r> ms vs <p> ms`,
//! and for `slack` the click's p50 and p99, cold and warm.

use anyhow::{Context, Result, anyhow, bail};
use handover_testkit::drill::{Drill, start_emulator};
use handover_testkit::process::say;
use handover_testkit::runtime_api::{Answer, RuntimeApi};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The function's MemorySize in the expanded template (SAM applies the
/// Globals). Lambda's default, 128 MB, when it sets none.
fn memory_mb(function: &str) -> u32 {
    let resource = format!("{}Function", capitalised(function));
    handover_testkit::triggers::expanded_template()["Resources"][&resource]["Properties"]
        ["MemorySize"]
        .as_u64()
        .map_or(128, |m| m as u32)
}

fn capitalised(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
        .unwrap_or_default()
}

/// A cgroup that holds a process to `memory_mb`'s share of one CPU, as
/// Lambda does. `Err`: why the machine does not allow it.
fn cpu_quota(memory_mb: u32) -> Result<PathBuf, String> {
    let quota = u64::from(memory_mb) * 100_000 / 1769;
    let v1 = Path::new("/sys/fs/cgroup/cpu");
    let v2 = Path::new("/sys/fs/cgroup");
    let name = format!("handover-bench-{memory_mb}mb");
    if v1.join("cpu.cfs_quota_us").exists() {
        let dir = v1.join(&name);
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        std::fs::write(dir.join("cpu.cfs_period_us"), "100000")
            .and_then(|()| std::fs::write(dir.join("cpu.cfs_quota_us"), quota.to_string()))
            .map_err(|e| format!("{}: {e}", dir.display()))?;
        return Ok(dir);
    }
    if v2.join("cgroup.controllers").exists() {
        let dir = v2.join(&name);
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        std::fs::write(dir.join("cpu.max"), format!("{quota} 100000"))
            .map_err(|e| format!("{}: {e}", dir.display()))?;
        return Ok(dir);
    }
    Err("no cgroup CPU controller mounted".into())
}

struct Peer {
    label: &'static str,
    program: PathBuf,
    args: Vec<String>,
    cwd: PathBuf,
}

#[derive(Debug, Clone, Default)]
struct Sample {
    init: Duration,
    /// Spawned → the first invocation's answer (the event was ready before
    /// the spawn, handed out at the first `next`): what a cold caller waits.
    cold: Duration,
    first: Duration,
    warm: Duration,
    rss_kb: u64,
    calls: Vec<String>,
}

/// The detect tick: EventBridge Scheduler's payload (the fixture, as the
/// template's schedule delivers it), a minute later each time so that the
/// tick is never a duplicate.
struct Ticks {
    fixture: serde_json::Value,
    next: chrono::DateTime<chrono::Utc>,
}

impl Ticks {
    fn event(&mut self) -> String {
        let mut e = self.fixture.clone();
        e["time"] = serde_json::json!(self.next.to_rfc3339_opts(chrono::SecondsFormat::Secs, true));
        self.next += chrono::Duration::minutes(1);
        e.to_string()
    }
}

/// A pending approval per click: a Step Functions task that really waits
/// for its token, the key stored as the approval function stores it, and
/// the click on its approve button, signed as Slack signs it.
struct Clicks<'a> {
    drill: &'a Drill,
    keys: Vec<String>,
    /// The Slack stand-in's `response_url` updates so far.
    updates: usize,
}

impl Clicks<'_> {
    async fn event(&mut self) -> Result<String> {
        let (execution, token) =
            handover_testkit::waiting_task(self.drill.aws(), handover_testkit::TEST_REGION).await;
        let key = handover::approval::new_key().map_err(|e| anyhow!("no random key: {e}"))?;
        let now = chrono::Utc::now();
        self.drill
            .store()
            .put_approval(&handover::store::approval::NewApproval {
                key: key.clone(),
                task_token: token,
                execution,
                incident: handover_testkit::unique("bench"),
                requested_at: now,
                expires_at: now + chrono::Duration::minutes(15),
                question: "FAILOVER approval: bench".into(),
                data_loss: false,
            })
            .await?;
        let event = handover_testkit::lambdas::slack_click_event(
            handover_testkit::drill::SIGNING_SECRET,
            &self.drill.plan().slack.approvers[0].user_id,
            handover::slack::message::ACTION_APPROVE,
            &key,
            &self.drill.response_url("bench"),
        );
        self.keys.push(key);
        Ok(event.to_string())
    }

    /// The click counts only if Slack got its 200 and the decision was
    /// applied: the key decided and delivered to the waiting task.
    async fn check(&mut self, answer: &str) -> Result<()> {
        let answer: serde_json::Value = serde_json::from_str(answer)?;
        if answer["statusCode"] != 200 {
            bail!("the click was answered {answer}");
        }
        let key = self.keys.last().context("no click was sent")?;
        let record = self
            .drill
            .store()
            .approval(&handover::store::approval::ApprovalSelector::Key(
                key.clone(),
            ))
            .await?
            .context("the clicked key is gone")?;
        if record.decided.is_none() || record.delivered_at.is_none() {
            bail!("the click answered 200 but its decision was not applied: {record:?}");
        }
        // And the message was updated through response_url before the 200.
        let updates = self.drill.slack_updates();
        if updates != self.updates + 1 {
            bail!(
                "the click answered 200 with {} response_url updates (one expected)",
                updates - self.updates
            );
        }
        self.updates = updates;
        Ok(())
    }
}

/// What a function is invoked with.
enum Work<'a> {
    Ticks(Ticks),
    Clicks(Clicks<'a>),
}

impl Work<'_> {
    async fn event(&mut self) -> Result<String> {
        match self {
            Work::Ticks(t) => Ok(t.event()),
            Work::Clicks(c) => c.event().await,
        }
    }

    /// Whether `answer` did the work (the floor answers anything: not checked).
    async fn check(&mut self, peer: &str, answer: &str) -> Result<()> {
        match self {
            Work::Clicks(c) if peer != "floor" => c.check(answer).await,
            _ => Ok(()),
        }
    }
}

fn vm_hwm_kb(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1).map(str::to_owned))
        })
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// The router's log of `caller`'s AWS calls: (`service:action`, HTTP status).
async fn calls_by(caller: &str) -> Result<Vec<(String, u64)>> {
    let url = format!("{}/_handover/calls", handover_testkit::endpoint());
    let calls: Vec<serde_json::Value> = reqwest::get(&url).await?.json().await?;
    Ok(calls
        .iter()
        .filter(|c| c["caller"] == caller)
        .map(|c| {
            (
                format!(
                    "{}:{}",
                    c["service"].as_str().unwrap_or("?"),
                    c["action"].as_str().unwrap_or("?")
                ),
                c["status"].as_u64().unwrap_or(0),
            )
        })
        .collect())
}

#[allow(clippy::too_many_arguments)]
async fn sample(
    api: &RuntimeApi,
    function: &str,
    peer: &Peer,
    env: &[(&'static str, String)],
    work: &mut Work<'_>,
    quota: Option<&Path>,
    log: &Path,
) -> Result<Sample> {
    api.reset();
    let mut cmd = match quota {
        // The process is in the cgroup from its first instruction.
        Some(dir) => {
            let mut c = Command::new("sh");
            c.arg("-c")
                .arg("echo $$ > \"$0/cgroup.procs\" && exec \"$@\"")
                .arg(dir)
                .arg(&peer.program)
                .args(&peer.args);
            c
        }
        None => {
            let mut c = Command::new(&peer.program);
            c.args(&peer.args);
            c
        }
    };
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)?;
    cmd.current_dir(&peer.cwd)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .env("AWS_ENDPOINT_URL", handover_testkit::endpoint())
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_REGION", handover_testkit::TEST_REGION)
        .env("AWS_DEFAULT_REGION", handover_testkit::TEST_REGION)
        .env("AWS_LAMBDA_RUNTIME_API", api.host())
        .env("AWS_LAMBDA_FUNCTION_NAME", function)
        .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        .env(
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE",
            memory_mb(function).to_string(),
        )
        .env(
            "AWS_LAMBDA_LOG_GROUP_NAME",
            format!("/aws/lambda/{function}"),
        )
        .env("AWS_LAMBDA_LOG_STREAM_NAME", "bench")
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::from(out.try_clone()?))
        .stderr(Stdio::from(out));
    let before = calls_by(function).await?.len();
    // The first event is ready before the process starts: handed out at
    // its first `next`, as Lambda hands out the request that started it.
    let mut first_event = Some(work.event().await?);
    let spawned = Instant::now();
    let mut child = cmd
        .spawn()
        .with_context(|| format!("spawn {}", peer.program.display()))?;
    let result = async {
        let ready = api
            .first_next(Duration::from_secs(60))
            .await
            .map_err(|e| anyhow!("{} {function}: {e}", peer.label))?;
        let init = ready.duration_since(spawned);
        let mut times = Vec::new();
        let mut cold = Duration::ZERO;
        for _ in 0..2 {
            let event = match first_event.take() {
                Some(e) => e,
                None => work.event().await?,
            };
            let i = api
                .invoke(&event, Duration::from_secs(60))
                .await
                .map_err(|e| anyhow!("{} {function}: {e}", peer.label))?;
            if times.is_empty() {
                cold = spawned.elapsed();
            }
            match &i.answer {
                Answer::Error(e) => bail!("{} {function} answered an error: {e}", peer.label),
                Answer::Response(r) => work
                    .check(peer.label, r)
                    .await
                    .with_context(|| format!("{} {function}", peer.label))?,
            }
            times.push(i.duration);
        }
        let rss_kb = vm_hwm_kb(child.id());
        // Without the calls answered with an error (a throttle, a 5xx):
        // the SDK retries those, so a retried call shows once, as in the
        // other peer's run. (Calls the router answers itself, such as Route
        // 53's health-check status, carry no status and are kept.)
        let calls = calls_by(function).await?[before..]
            .iter()
            .filter(|(_, status)| !(400..600).contains(status))
            .map(|(call, _)| call.clone())
            .collect();
        Ok(Sample {
            init,
            cold,
            first: times[0],
            warm: times[1],
            rss_kb,
            calls,
        })
    }
    .await;
    let _ = child.kill();
    let _ = child.wait();
    result
}

fn median(v: Vec<Duration>) -> Duration {
    percentile(v, 50)
}

/// The nearest-rank percentile: the smallest sample at or above `p`% of
/// them (p99 of 20 samples is the slowest).
fn percentile(mut v: Vec<Duration>, p: usize) -> Duration {
    v.sort();
    let rank = (v.len() * p).div_ceil(100).max(1);
    v[rank - 1]
}

fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1000.0)
}

fn main() -> std::process::ExitCode {
    let started = Instant::now();
    if let Err(e) = handover_testkit::pace::Pace::fast_only("the bench") {
        eprintln!("bench: {e:#}");
        return std::process::ExitCode::from(2);
    }
    let out = handover_testkit::process::workspace_root().join("out/bench");
    let _ = std::fs::remove_dir_all(&out);
    // The emulator starts before the runtime: it sets this process's AWS
    // environment.
    let outcome = std::fs::create_dir_all(&out)
        .map_err(anyhow::Error::from)
        .and_then(|()| start_emulator(&out))
        .and_then(|emulator| {
            tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .expect("tokio runtime")
                .block_on(bench(started, out.clone(), emulator))
        });
    match outcome {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench FAILED: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn bench(
    started: Instant,
    out: PathBuf,
    emulator: handover_testkit::process::Guard,
) -> Result<()> {
    let root = handover_testkit::process::workspace_root();
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let count = |k: &str, default: usize| -> Result<usize> {
        Ok(env(k)
            .map(|v| v.parse())
            .transpose()
            .with_context(|| k.to_owned())?
            .unwrap_or(default)
            .max(1))
    };
    let bin = env("HANDOVER_BENCH_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target/release"));
    let runs = count("HANDOVER_BENCH_RUNS", 5)?;
    let clicks = count("HANDOVER_BENCH_CLICKS", 20)?;
    let functions = env("HANDOVER_BENCH_FUNCTIONS").unwrap_or_else(|| "detect,slack".into());
    let check = env("HANDOVER_BENCH_CHECK").is_some_and(|v| v == "1");
    let drill = Drill::start(&out, emulator, started, Default::default()).await?;
    let api = RuntimeApi::start().await?;
    let mut slower = Vec::new();
    for function in functions.split(',').map(str::trim) {
        let (work, runs) = match function {
            "detect" => (
                Work::Ticks(Ticks {
                    fixture: serde_json::from_str(&std::fs::read_to_string(
                        root.join("functions/detect/events/scheduled.json"),
                    )?)?,
                    next: chrono::Utc::now() + chrono::Duration::hours(1),
                }),
                runs,
            ),
            "slack" => (
                Work::Clicks(Clicks {
                    drill: &drill,
                    keys: Vec::new(),
                    updates: drill.slack_updates(),
                }),
                clicks,
            ),
            other => bail!("no bench for {other:?}: detect or slack"),
        };
        let (ri, pi) = one(started, &api, &drill, &bin, function, work, runs, &out).await?;
        if ri >= pi {
            slower.push(format!(
                "{function}: the Rust init ({} ms) is not faster than the Python peer's ({} ms) in this run",
                ms(ri),
                ms(pi)
            ));
        }
    }
    drop(drill);
    if check && !slower.is_empty() {
        bail!("{}", slower.join("; "));
    }
    Ok(())
}

/// Bench `function`: `runs` cold starts of each peer, interleaved; prints
/// its lines and returns the median inits (Rust, Python).
#[allow(clippy::too_many_arguments)]
async fn one(
    started: Instant,
    api: &RuntimeApi,
    drill: &Drill,
    bin: &Path,
    function: &str,
    mut work: Work<'_>,
    runs: usize,
    out: &Path,
) -> Result<(Duration, Duration)> {
    let root = handover_testkit::process::workspace_root();
    let mut peers = vec![
        Peer {
            label: "rust",
            program: bin.join(function),
            args: Vec::new(),
            cwd: root.clone(),
        },
        Peer {
            label: "python",
            program: root.join(".venv/bin/python"),
            args: vec![
                "-m".into(),
                "awslambdaric".into(),
                format!("{function}.handler"),
            ],
            cwd: root.join("bench/python"),
        },
    ];
    // The floor once, beside detect: what the runtime alone costs.
    if function == "detect" {
        peers.push(Peer {
            label: "floor",
            program: bin.join("floor"),
            args: Vec::new(),
            cwd: root.clone(),
        });
    }
    let mb = memory_mb(function);
    let quota = match cpu_quota(mb) {
        Ok(dir) => {
            say(
                started,
                format!(
                    "{function}: CPU quota: {mb} MB's share of one CPU ({:.1}%), cgroup {}",
                    f64::from(mb) * 100.0 / 1769.0,
                    dir.display()
                ),
            );
            Some(dir)
        }
        Err(why) => {
            say(
                started,
                format!(
                    "{function}: CPU quota: not applied, the machine does not allow it ({why})"
                ),
            );
            None
        }
    };
    say(
        started,
        format!(
            "{function}: {runs} cold starts per peer, binaries from {}",
            bin.display()
        ),
    );
    let log = out.join(format!("{function}-processes.log"));
    let mut results: Vec<Vec<Sample>> = vec![Vec::new(); peers.len()];
    // Interleaved, so a slow moment of the machine falls on every peer alike.
    for run in 0..runs {
        for (i, peer) in peers.iter().enumerate() {
            let s = sample(
                api,
                function,
                peer,
                drill.function_env(),
                &mut work,
                quota.as_deref(),
                &log,
            )
            .await?;
            say(
                started,
                format!(
                    "{function} run {} {}: init {} ms, first {} ms, warm {} ms, rss {:.1} MB, {} AWS calls",
                    run + 1,
                    peer.label,
                    ms(s.init),
                    ms(s.first),
                    ms(s.warm),
                    s.rss_kb as f64 / 1024.0,
                    s.calls.len()
                ),
            );
            results[i].push(s);
        }
    }
    // The peer is a fair stick only if it does the same work.
    let actions = |s: &Sample| {
        let mut a = s.calls.clone();
        a.sort();
        a
    };
    let (rust, python) = (&results[0], &results[1]);
    if actions(&rust[0]) != actions(&python[0]) {
        bail!(
            "the Python peer's AWS calls differ from the Rust function's:\n  rust:   {:?}\n  python: {:?}",
            actions(&rust[0]),
            actions(&python[0])
        );
    }
    let med = |r: &[Sample], f: fn(&Sample) -> Duration| median(r.iter().map(f).collect());
    let rss = |r: &[Sample]| {
        let mut v: Vec<u64> = r.iter().map(|s| s.rss_kb).collect();
        v.sort();
        v[v.len() / 2] as f64 / 1024.0
    };
    let (ri, pi) = (med(rust, |s| s.init), med(python, |s| s.init));
    println!(
        "bench {function}: init {} ms vs {} ms (x{:.1}), rss {:.1} MB vs {:.1} MB, first {} ms vs {} ms",
        ms(ri),
        ms(pi),
        pi.as_secs_f64() / ri.as_secs_f64().max(1e-6),
        rss(rust),
        rss(python),
        ms(med(rust, |s| s.first)),
        ms(med(python, |s| s.first)),
    );
    match function {
        "detect" => {
            let floor = &results[2];
            println!(
                "bench floor: init {} ms, rss {:.1} MB, first {} ms ({function} spends {} ms at init beyond it: the plan, the clients); warm {function} {} ms vs {} ms; AWS calls (init and two ticks): {}",
                ms(med(floor, |s| s.init)),
                rss(floor),
                ms(med(floor, |s| s.first)),
                ms(ri.saturating_sub(med(floor, |s| s.init))),
                ms(med(rust, |s| s.warm)),
                ms(med(python, |s| s.warm)),
                actions(&rust[0]).join(", ")
            );
        }
        _ => {
            // A cold click waits for the process to start: spawn → its 200.
            let cold = |r: &[Sample], p| percentile(r.iter().map(|s| s.cold).collect(), p);
            let warm = |r: &[Sample], p| percentile(r.iter().map(|s| s.warm).collect(), p);
            let line = |r: &[Sample]| {
                format!(
                    "cold p50 {} ms p99 {} ms, warm p50 {} ms p99 {} ms",
                    ms(cold(r, 50)),
                    ms(cold(r, 99)),
                    ms(warm(r, 50)),
                    ms(warm(r, 99))
                )
            };
            println!(
                "bench {function} click (request -> 200 with the decision applied, {mb} MB, {runs} cold and {runs} warm): rust {}; python {}; Slack's budget 3000 ms, Handover's 2500 ms cold p99: {}; AWS calls (init and two clicks): {}",
                line(rust),
                line(python),
                if cold(rust, 99) <= Duration::from_millis(2500) {
                    "within"
                } else {
                    "OVER"
                },
                actions(&rust[0]).join(", ")
            );
        }
    }
    Ok((ri, pi))
}
