//! The real function binaries behind `cargo lambda watch`, wired to the router.
//!
//! [`Lambdas::start`] spawns `cargo lambda watch` on a free 127.0.0.1 port with
//! the environment the functions read in AWS (table, Region, plan, Slack API
//! base, state machine), and tells the router to send moto's Lambda
//! invocations there. Dropping it kills the process group.

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

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("harness/ has a parent")
        .to_path_buf()
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
    pub async fn start(env: &[(&str, String)]) -> Lambdas {
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
        Lambdas { child, url, log }
    }

    /// The output so far (every function's logs).
    pub fn output(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
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
/// SAM template's DefinitionSubstitutions do.
pub fn definition(region: &str) -> String {
    let asl = std::fs::read_to_string(workspace_root().join("statemachine.asl.json"))
        .expect("statemachine.asl.json");
    let mut out = asl.clone();
    for f in [
        "Diagnose", "Approval", "Fence", "Promote", "Switch", "Verify",
    ] {
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
