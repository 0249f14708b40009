//! The real function binaries behind `cargo lambda watch`, wired to the router.
//!
//! [`Lambdas::start`] runs one `cargo lambda watch` per function in the
//! template, each on its own 127.0.0.1 port, with exactly the environment
//! the expanded template gives that function, plus the endpoints the
//! harness overrides (the emulator's, the Slack stand-in's), test
//! credentials and the log level. It tells the router which port serves
//! which function. A function that reads a variable its template entry
//! lacks finds it unset here, as it would in AWS. Dropping it kills the
//! process groups.

use crate::process::workspace_root;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The running functions: one `cargo lambda watch` each.
pub struct Lambdas {
    children: Vec<Child>,
    /// Where their output goes: one file, every function's lines.
    pub log: PathBuf,
}

/// `n` free ports, all different: each held until all are chosen.
fn free_ports(n: usize) -> Vec<u16> {
    let held: Vec<std::net::TcpListener> = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").expect("bind"))
        .collect();
    held.iter()
        .map(|l| l.local_addr().expect("addr").port())
        .collect()
}

/// What the harness adds to every function's environment: the emulator
/// endpoint, credentials and Region, and the log level. Nothing else.
fn harness_environment() -> [(&'static str, String); 5] {
    [
        ("AWS_ENDPOINT_URL", crate::endpoint()),
        ("AWS_ACCESS_KEY_ID", "test".into()),
        ("AWS_SECRET_ACCESS_KEY", "test".into()),
        ("AWS_REGION", crate::TEST_REGION.into()),
        ("RUST_LOG", "info".into()),
    ]
}

/// What the harness may point elsewhere for every function, when `env`
/// holds it: the Slack Web API's base (the stand-in, as `AWS_ENDPOINT_URL`
/// points at the emulator) and the log level.
const OVERRIDES: [&str; 2] = ["SLACK_API_BASE", "RUST_LOG"];

/// `cargo lambda watch` reads `RUST_LOG` as well. At TRACE its file
/// watcher logs every path it visits, each line with the whole Cargo
/// metadata: 2.2 GB in a reject drill at TRACE, against a few MB from the
/// functions. So the watch process itself runs at INFO, and the function's
/// level reaches the function alone, through `--env-var`, which overrides
/// the variable the function would inherit.
fn function_log_level(level: &str) -> [String; 2] {
    // `--env-var` splits its value at commas: a level with directives
    // would arrive cut. None of the harness's levels has one.
    assert!(
        !level.contains(','),
        "RUST_LOG {level:?}: cargo lambda watch's --env-var cuts it at the comma"
    );
    ["--env-var".into(), format!("RUST_LOG={level}")]
}

/// One function of the template: its binary and the environment the
/// template gives it, each value taken from `env`.
struct Function {
    binary: String,
    env: Vec<(String, String)>,
}

/// Each function of the expanded template with its own environment.
/// Every variable the template gives a function must be in `env` (or be
/// one the harness sets): the functions run with what the stack would give
/// them, never less and never more.
fn functions(env: &[(&str, String)]) -> Vec<Function> {
    let harness = harness_environment();
    let mut missing = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    for (logical, vars) in crate::triggers::function_environments() {
        let mut own = Vec::new();
        for name in vars.keys() {
            if harness.iter().any(|(k, _)| k == name) {
                continue;
            }
            match env.iter().find(|(k, _)| k == name) {
                Some((_, v)) => own.push((name.clone(), v.clone())),
                None => {
                    missing.insert(format!("{name} ({logical})"));
                }
            }
        }
        own.extend(
            env.iter()
                .filter(|(k, _)| OVERRIDES.contains(k))
                .map(|(k, v)| ((*k).to_owned(), v.clone())),
        );
        let binary = crate::triggers::binary_of(&logical);
        out.push(Function { binary, env: own });
    }
    assert!(
        missing.is_empty(),
        "the template gives the functions variables the harness does not: {missing:?}"
    );
    out
}

/// Is `name` a variable some function could read from the harness's own
/// environment? Those are removed, so that only the template's reach it.
fn inherited_reads(name: &str) -> bool {
    name.starts_with("HANDOVER_")
        || name.starts_with("AWS_")
        || name.starts_with("PLAN_")
        || name.starts_with("SLACK_")
        || ["TABLE_NAME", "STATE_MACHINE_ARN", "RUST_LOG"].contains(&name)
        || crate::triggers::function_environments()
            .iter()
            .any(|(_, vars)| vars.contains_key(name))
}

impl Lambdas {
    /// Start every function of the template with the environment the
    /// template gives it, its values from `env`.
    pub async fn start(env: &[(&str, String)]) -> Lambdas {
        let log = std::env::temp_dir().join(crate::unique("cargo-lambda-watch") + ".log");
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .expect("log file");
        let mut children = Vec::new();
        let mut upstreams = serde_json::Map::new();
        let functions = functions(env);
        let ports = free_ports(functions.len());
        for (f, port) in functions.into_iter().zip(ports.iter().copied()) {
            children.push(spawn_watch(&f, port, &out));
            upstreams.insert(f.binary, format!("http://127.0.0.1:{port}").into());
        }
        let lambdas = Lambdas { children, log };
        let start = Instant::now();
        for port in ports {
            while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
                assert!(
                    start.elapsed() < Duration::from_secs(120),
                    "cargo lambda watch did not listen within 120 s; see {}",
                    lambdas.log.display()
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
        crate::control("lambda", serde_json::json!({ "upstreams": upstreams })).await;
        serve_iam_routes().await;
        lambdas
    }

    /// The output so far (every function's logs).
    pub fn output(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// `cargo lambda watch` serving function `f` alone on `port`.
fn spawn_watch(f: &Function, port: u16, out: &std::fs::File) -> Child {
    let child = watch_command(f, port, out, &harness_environment())
        .spawn()
        .expect("spawn cargo lambda watch (run `make venv`)");
    // A Lambdas held in a static is never dropped: whoever runs the test
    // binary can stop it by the pids written here (scripts/paths.sh does).
    if let Some(file) = std::env::var_os("HANDOVER_LAMBDAS_PIDFILE") {
        use std::io::Write;
        let mut pids = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(file)
            .expect("HANDOVER_LAMBDAS_PIDFILE");
        writeln!(pids, "{}", child.id()).expect("write the pid file");
    }
    child
}

/// The `cargo lambda watch` command for `f` on `port`, its output to `out`:
/// the template's environment for `f`, the harness's (`harness`), and
/// `f`'s level.
fn watch_command(
    f: &Function,
    port: u16,
    out: &std::fs::File,
    harness: &[(&str, String)],
) -> Command {
    let root = workspace_root();
    let mut cmd = Command::new(root.join(".venv/bin/cargo-lambda"));
    cmd.args([
        "lambda",
        "watch",
        "--ignore-changes",
        "-A",
        "127.0.0.1",
        "-P",
        &port.to_string(),
    ])
    .current_dir(&root)
    .stdout(Stdio::from(out.try_clone().expect("log")))
    .stderr(Stdio::from(out.try_clone().expect("log")))
    .stdin(Stdio::null());
    for (k, _) in std::env::vars() {
        if inherited_reads(&k) {
            cmd.env_remove(k);
        }
    }
    cmd.envs(harness.iter().map(|(k, v)| (k, v)));
    cmd.envs(f.env.iter().map(|(k, v)| (k, v)));
    let level = f.env.iter().rev().find(|(k, _)| k == "RUST_LOG");
    let level = level.map_or("info", |(_, v)| v.as_str());
    cmd.args(function_log_level(level)).env("RUST_LOG", "info");
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        cmd.process_group(0);
    }
    cmd
}

/// Have the router serve the template's `AWS_IAM` routes as API Gateway
/// does: SigV4 authenticated against moto's credentials, then the function.
/// The API is the stack's, in the functions' Region.
pub async fn serve_iam_routes() {
    let routes: Vec<serde_json::Value> = crate::triggers::iam_routes()
        .into_iter()
        .map(|r| serde_json::json!({"method": r.method, "path": r.path, "function": r.function, "auth": "AWS_IAM", "region": crate::TEST_REGION}))
        .collect();
    crate::control("apigw", serde_json::json!({ "routes": routes })).await;
}

impl Drop for Lambdas {
    fn drop(&mut self) {
        // SIGTERM: cargo lambda stops the function processes it started.
        for child in &self.children {
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
        }
        for child in &mut self.children {
            for _ in 0..50 {
                if matches!(child.try_wait(), Ok(Some(_))) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The state machine definition with the function ARNs substituted, as the
/// SAM template's DefinitionSubstitutions do: the names are read from the
/// template (`XFunctionArn: !GetAtt XFunction.Arn`), so a substitution the
/// template lacks is left in the definition and fails here.
pub fn definition(region: &str) -> String {
    let asl = std::fs::read_to_string(workspace_root().join("statemachine.asl.json"))
        .expect("statemachine.asl.json");
    let template = std::fs::read_to_string(workspace_root().join("infra/template.yaml"))
        .expect("infra/template.yaml");
    let substitutions: Vec<String> = template
        .lines()
        .skip_while(|l| l.trim() != "DefinitionSubstitutions:")
        .skip(1)
        .take_while(|l| l.trim_start().contains("FunctionArn: !GetAtt "))
        .filter_map(|l| {
            l.trim()
                .split_once("FunctionArn:")
                .map(|(name, _)| name.to_owned())
        })
        .collect();
    assert!(
        substitutions.len() >= 6,
        "no DefinitionSubstitutions read from infra/template.yaml: {substitutions:?}"
    );
    let mut out = asl.clone();
    for f in &substitutions {
        out = out.replace(
            &format!("${{{f}FunctionArn}}"),
            &format!(
                "arn:aws:lambda:{region}:123456789012:function:{}",
                f.to_lowercase()
            ),
        );
    }
    assert!(
        !out.contains("${"),
        "unknown substitution left in the definition"
    );
    out
}

/// Invoke `function` through the router's Lambda Invoke API, as moto,
/// EventBridge, Scheduler and API Gateway do. A function error (the
/// `X-Amz-Function-Error` header) is an `Err` carrying the error document.
pub async fn invoke(
    function: &str,
    event: &serde_json::Value,
) -> anyhow::Result<serde_json::Value> {
    let resp = reqwest::Client::new()
        .post(format!(
            "{}/2015-03-31/functions/{function}/invocations",
            crate::endpoint()
        ))
        .json(event)
        .timeout(Duration::from_secs(300))
        .send()
        .await?;
    let failed = resp.headers().contains_key("x-amz-function-error");
    let body: serde_json::Value = resp.json().await?;
    if failed {
        anyhow::bail!("{function} failed: {body}");
    }
    Ok(body)
}

/// The API Gateway HTTP API event of a Slack button click signed as Slack
/// signs it (now), as the template's route delivers it to the slack function.
pub fn slack_click_event(
    signing_secret: &str,
    user: &str,
    action: &str,
    key: &str,
    response_url: &str,
) -> serde_json::Value {
    let body = handover::slack::stand_in::click_body(user, "T0TEAM0001", action, key, response_url);
    let (ts, sig) = handover::slack::stand_in::signed_headers(
        signing_secret.as_bytes(),
        chrono::Utc::now().timestamp(),
        body.as_bytes(),
    );
    crate::triggers::http_event(
        "SlackFunction",
        crate::TEST_REGION,
        "POST",
        "/slack/interactions",
        &[
            (
                "content-type",
                "application/x-www-form-urlencoded".to_owned(),
            ),
            (
                "user-agent",
                "Slackbot 1.0 (+https://api.slack.com/robots)".to_owned(),
            ),
            ("x-slack-request-timestamp", ts),
            ("x-slack-signature", sig),
        ],
        &body,
    )
}

/// A Slack button click signed as Slack signs it, delivered to the slack
/// function as the template's HTTP API route would. Returns the HTTP status
/// and body that API Gateway would send back to Slack.
pub async fn slack_click(
    signing_secret: &str,
    user: &str,
    action: &str,
    key: &str,
    response_url: &str,
) -> (u16, String) {
    let event = slack_click_event(signing_secret, user, action, key, response_url);
    let answer = match invoke("slack", &event).await {
        Ok(a) => a,
        // API Gateway's answer when the integration fails (HTTP API
        // developer guide, "Troubleshooting issues with HTTP API Lambda
        // integrations"): Slack shows the click as failed.
        Err(_) => return (500, r#"{"message":"Internal Server Error"}"#.to_owned()),
    };
    let status = answer["statusCode"]
        .as_u64()
        .expect("an HTTP API answer has statusCode") as u16;
    let body = match answer["body"].as_str() {
        Some(b) if answer["isBase64Encoded"] == true => String::from_utf8_lossy(
            &base64::Engine::decode(&base64::engine::general_purpose::STANDARD, b)
                .unwrap_or_default(),
        )
        .into_owned(),
        Some(b) => b.to_owned(),
        None => String::new(),
    };
    (status, body)
}

#[cfg(test)]
mod tests {
    use super::{Function, watch_command};

    /// The function's level goes to the function alone; the watch process
    /// runs at INFO whatever the function's level.
    #[test]
    fn the_function_gets_its_level_and_the_watcher_info() {
        let f = Function {
            binary: "slack".into(),
            env: vec![("RUST_LOG".into(), "trace".into())],
        };
        let out = tempfile_for_test();
        let cmd = watch_command(&f, 9, &out, &[("RUST_LOG", "info".into())]);
        let args: Vec<_> = cmd.get_args().map(|a| a.to_string_lossy()).collect();
        let at = args
            .iter()
            .position(|a| a == "--env-var")
            .expect("--env-var");
        assert_eq!(args[at + 1], "RUST_LOG=trace", "{args:?}");
        let watcher = cmd
            .get_envs()
            .filter(|(k, _)| *k == "RUST_LOG")
            .last()
            .and_then(|(_, v)| v);
        assert_eq!(watcher, Some(std::ffi::OsStr::new("info")));
    }

    fn tempfile_for_test() -> std::fs::File {
        let path = std::env::temp_dir().join(crate::unique("watch-command") + ".log");
        std::fs::File::create(path).expect("log file")
    }
}
