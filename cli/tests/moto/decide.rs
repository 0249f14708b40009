//! `handover approve` / `reject` against the local world, up to the
//! decision endpoint: the real binary, its refusals before any request, and
//! API Gateway's AWS_IAM authentication of its SigV4-signed request (the
//! router authenticates against the credentials moto issued).
//!
//! The decision itself runs in the slack function behind the route: those
//! cases need the function running (`cargo lambda watch`), which cannot
//! start while `cargo test` holds the target directory, so they are path
//! tests (`harness/tests/paths/cli_decisions.rs`) and slack's handler tests.

use handover::store::Store;
use handover_testkit::{TEST_REGION, aws, fresh_store};
use std::io::Write;
use std::process::{Command, Stdio};

const ONCALL_ROLE: &str = "arn:aws:iam::123456789012:role/handover-oncall";

struct Creds {
    key: String,
    secret: String,
    token: Option<String>,
}

/// Credentials of a session of `role` (moto answers any role).
async fn session_of(role: &str, name: &str) -> Creds {
    let c = handover_testkit::assume_role(&aws(), role, name).await;
    Creds {
        key: c.access_key_id,
        secret: c.secret_access_key,
        token: Some(c.session_token),
    }
}

/// Keys moto never issued (the emulator's own defaults).
fn unknown_keys() -> Creds {
    Creds {
        key: "test".into(),
        secret: "test".into(),
        token: None,
    }
}

fn cli(args: &[&str], creds: &Creds, url: Option<&str>) -> (i32, String, String) {
    cli_in(TEST_REGION, args, creds, url)
}

fn cli_in(region: &str, args: &[&str], creds: &Creds, url: Option<&str>) -> (i32, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_handover"));
    cmd.args(args)
        .args(["--region", region])
        .env("AWS_ENDPOINT_URL", handover_testkit::endpoint())
        .env("AWS_ACCESS_KEY_ID", &creds.key)
        .env("AWS_SECRET_ACCESS_KEY", &creds.secret)
        .env_remove("AWS_SESSION_TOKEN")
        .env_remove("AWS_PROFILE")
        .env_remove("HANDOVER_DECISION_URL")
        .env_remove("TABLE_NAME")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(url) = url {
        cmd.args(["--decision-url", url]);
    }
    if let Some(t) = &creds.token {
        cmd.env("AWS_SESSION_TOKEN", t);
    }
    let mut child = cmd.spawn().expect("run handover");
    child.stdin.take().unwrap().write_all(b"").unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

async fn decision_url() -> String {
    handover_testkit::lambdas::serve_iam_routes().await;
    handover_testkit::triggers::decision_url()
}

#[tokio::test]
async fn usage_errors_are_refused_before_any_request() {
    let creds = unknown_keys();
    let url = decision_url().await;
    let (code, _, err) = cli(&["approve", "--key", "k", "--yes"], &creds, None);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("HANDOVER_DECISION_URL") && err.contains("DecisionUrl"),
        "it says where the endpoint comes from: {err}"
    );
    for args in [
        vec!["approve", "--key", "a", "--incident", "b"],
        vec!["reject", "--key", "a", "--accept-data-loss"],
        vec!["approve", "--key", "a", "--plan-file", "/tmp/x"],
        vec!["approve", "--yes"],
    ] {
        let (code, _, err) = cli(&args, &creds, Some(&url));
        assert_eq!(code, 2, "{args:?}: {err}");
    }
    let (_, _, err) = cli(&["approve", "--yes"], &creds, Some(&url));
    assert!(err.contains("--table"), "{err}");
}

#[tokio::test]
async fn with_no_approval_named_it_takes_the_failover_holding_the_lock_or_says_none() {
    let store: Store = fresh_store(&aws()).await;
    let url = decision_url().await;
    let oncall = session_of(ONCALL_ROLE, "alice@example.com").await;
    let (code, _, err) = cli(
        &["approve", "--yes", "--table", store.table()],
        &oncall,
        Some(&url),
    );
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("no failover holds the lock"), "{err}");
}

#[tokio::test]
async fn api_gateway_refuses_keys_moto_never_issued_and_a_wrong_signature() {
    let url = decision_url().await;
    let (code, _, err) = cli(
        &["approve", "--key", "k", "--yes"],
        &unknown_keys(),
        Some(&url),
    );
    assert_eq!(code, 3, "{err}");
    assert!(
        err.contains("403") && err.contains("security token included in the request is invalid"),
        "{err}"
    );
    assert!(
        err.contains("execute-api:Invoke"),
        "says what to fix: {err}"
    );
    // A real session's key and token, signed with another secret.
    let mut forged = session_of(ONCALL_ROLE, "mallory@example.com").await;
    forged.secret = "not-the-secret-moto-issued".into();
    let (code, _, err) = cli(&["approve", "--key", "k", "--yes"], &forged, Some(&url));
    assert_eq!(code, 3, "{err}");
    assert!(
        err.contains("signature we calculated does not match"),
        "{err}"
    );
    // Not the route the template declares.
    let (code, _, err) = cli(
        &["approve", "--key", "k", "--yes"],
        &forged,
        Some(&format!("{}/decide", handover_testkit::endpoint())),
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("DecisionUrl"), "{err}");
}

#[tokio::test]
async fn a_signed_request_from_a_real_session_passes_api_gateway() {
    let url = decision_url().await;
    let oncall = session_of(ONCALL_ROLE, "alice@example.com").await;
    let (code, _, err) = cli(&["approve", "--key", "k", "--yes"], &oncall, Some(&url));
    // Authenticated: API Gateway invoked the integration. Under `cargo test`
    // no function runs behind it (the path tests run it), so the
    // integration fails as API Gateway reports it; what matters here is
    // that no 403 came back.
    assert!(!err.contains("403"), "{err}");
    assert!(
        code == 4 && err.contains("500"),
        "the integration, not the authoriser, answered: {code} {err}"
    );
    let calls = handover_testkit::calls().await;
    assert!(
        calls.iter().any(|c| c["service"] == "execute-api"
            && c["action"] == "Invoke"
            && c["caller"] == "handover-cli"),
        "the router logs the call as the CLI's execute-api:Invoke"
    );
}

#[tokio::test]
async fn api_gateway_refuses_an_unsigned_request_and_a_signature_for_another_region() {
    let url = decision_url().await;
    // What the README's smoke test sends: no signature at all.
    let resp = reqwest::Client::new()
        .post(&url)
        .header("content-type", "application/json")
        .body(r#"{"key":"k","decision":"approve"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 403);
    let body: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(body["message"], "Forbidden");
    // Signed for P's Region, the API being S's.
    let oncall = session_of(ONCALL_ROLE, "alice@example.com").await;
    let (code, _, err) = cli_in(
        "ap-northeast-2",
        &["approve", "--key", "k", "--yes"],
        &oncall,
        Some(&url),
    );
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("scoped to a valid region"), "{err}");
}

#[test]
fn the_cli_refuses_a_plain_http_endpoint_and_a_region_other_than_the_urls() {
    let creds = unknown_keys();
    let (code, _, err) = cli(
        &["approve", "--key", "k", "--yes"],
        &creds,
        Some("http://a1b2c3d4e5.execute-api.ap-northeast-1.amazonaws.com/decisions"),
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("HTTPS"), "{err}");
    let (code, _, err) = cli_in(
        "ap-northeast-2",
        &["approve", "--key", "k", "--yes"],
        &creds,
        Some("https://a1b2c3d4e5.execute-api.ap-northeast-1.amazonaws.com/decisions"),
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("pass --region ap-northeast-1"), "{err}");
}
