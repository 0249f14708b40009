//! The real function binaries behind `cargo lambda watch`, wired to the router.
//!
//! [`Lambdas::start`] spawns `cargo lambda watch` on a free 127.0.0.1 port with
//! the environment the functions read in AWS (table, Region, plan, Slack API
//! base, state machine), and tells the router to send moto's Lambda
//! invocations there. Dropping it kills the process group.

use crate::process::workspace_root;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running `cargo lambda watch`.
pub struct Lambdas {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// Where its output goes.
    pub log: PathBuf,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

impl Lambdas {
    /// Start with `env` (plus the emulator endpoint and test credentials).
    ///
    /// Every variable the template gives any function must be in `env` (or
    /// be one the harness sets itself): the functions run with what the
    /// stack would give them, never less.
    pub async fn start(env: &[(&str, String)]) -> Lambdas {
        let harness_sets = ["RUST_LOG"];
        let mut missing = std::collections::BTreeSet::new();
        for (function, vars) in crate::triggers::function_environments() {
            for name in vars.keys() {
                if !harness_sets.contains(&name.as_str()) && !env.iter().any(|(k, _)| k == name) {
                    missing.insert(format!("{name} ({function})"));
                }
            }
        }
        assert!(
            missing.is_empty(),
            "the template gives the functions variables the harness does not: {missing:?}"
        );
        let root = workspace_root();
        let port = free_port();
        let log = std::env::temp_dir().join(crate::unique("cargo-lambda-watch") + ".log");
        let out = std::fs::File::create(&log).expect("log file");
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
        .env("AWS_ENDPOINT_URL", crate::endpoint())
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_REGION", crate::TEST_REGION)
        .env("RUST_LOG", "info")
        .stdout(Stdio::from(out.try_clone().expect("log")))
        .stderr(Stdio::from(out))
        .stdin(Stdio::null());
        for (k, v) in env {
            cmd.env(k, v);
        }
        #[cfg(unix)]
        {
            use std::os::unix::process::CommandExt;
            cmd.process_group(0);
        }
        let child = cmd
            .spawn()
            .expect("spawn cargo lambda watch (run `make venv`)");
        // A Lambdas held in a static is never dropped: whoever runs the test
        // binary can stop it by the pid written here (scripts/paths.sh does).
        if let Some(file) = std::env::var_os("HANDOVER_LAMBDAS_PIDFILE") {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(file)
                .expect("HANDOVER_LAMBDAS_PIDFILE");
            writeln!(f, "{}", child.id()).expect("write the pid file");
        }
        let url = format!("http://127.0.0.1:{port}");
        let start = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                start.elapsed() < Duration::from_secs(120),
                "cargo lambda watch did not listen within 120 s; see {}",
                log.display()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        crate::control("lambda", serde_json::json!({ "upstream": url })).await;
        serve_iam_routes().await;
        Lambdas { child, url, log }
    }

    /// The output so far (every function's logs).
    pub fn output(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
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
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        for _ in 0..50 {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
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
