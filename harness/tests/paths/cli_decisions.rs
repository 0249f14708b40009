//! `handover approve` / `reject` end to end: the real CLI signs its request
//! with the operator's session (SigV4), the router authenticates it as API
//! Gateway's AWS_IAM authoriser does, and the real slack binary behind
//! `cargo lambda watch` decides on the server: the run's own plan
//! (`cli_approvers`), the key consumed once, the principal recorded.
//!
//! Each run really waits on a task token (an EventBridge
//! `.waitForTaskToken` task) with a Handover input whose plan lists, or
//! does not list, the caller; its key is stored in the world's table as the
//! approval function stores it.

use super::{World, fresh_record, path_plan, world};
use handover::plan::Plan;
use handover::store::approval::{ApprovalSelector, Decision};
use handover_testkit::TEST_REGION;
use serde_json::Value;
use std::io::Write;
use std::process::Stdio;
use std::time::Duration;

use handover_testkit::world::ONCALL_ROLE;
const ALICE: &str = "arn:aws:sts::123456789012:assumed-role/handover-oncall/alice@example.com";
const BOB: &str = "arn:aws:sts::123456789012:assumed-role/handover-oncall/bob@example.com";

fn plan_with_cli_approver(w: &World) -> Plan {
    handover_testkit::world::listing_oncall(path_plan(w))
}

type Waiting = handover_testkit::world::WaitingApproval;

async fn waiting_run(w: &World, plan: &Plan, data_loss: bool, expires_in: i64) -> Waiting {
    handover_testkit::world::waiting_approval(&w.aws, &w.store, plan, data_loss, expires_in).await
}

/// The CLI as `role`'s session `name` (None: keys moto never issued).
async fn cli(
    w: &World,
    as_: Option<(&str, &str)>,
    args: &[&str],
    stdin: &str,
) -> (i32, String, String) {
    let mut cmd = std::process::Command::new(handover_testkit::cli_binary());
    cmd.args(args)
        .args(["--region", TEST_REGION])
        .env("AWS_ENDPOINT_URL", handover_testkit::endpoint())
        .env(
            "HANDOVER_DECISION_URL",
            handover_testkit::triggers::decision_url(),
        )
        .env("TABLE_NAME", w.store.table())
        .env_remove("AWS_PROFILE")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    match as_ {
        Some((role, name)) => {
            let s = handover_testkit::assume_role(&w.aws, role, name).await;
            cmd.env("AWS_ACCESS_KEY_ID", s.access_key_id)
                .env("AWS_SECRET_ACCESS_KEY", s.secret_access_key)
                .env("AWS_SESSION_TOKEN", s.session_token);
        }
        None => {
            cmd.env("AWS_ACCESS_KEY_ID", "test")
                .env("AWS_SECRET_ACCESS_KEY", "test")
                .env_remove("AWS_SESSION_TOKEN");
        }
    }
    let stdin = stdin.to_owned();
    let out = tokio::task::spawn_blocking(move || {
        let mut child = cmd
            .spawn()
            .expect("run handover (scripts/paths.sh builds it)");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    })
    .await
    .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

async fn ended(w: &World, execution: &str) -> (String, Option<Value>, Option<String>) {
    let d =
        handover_testkit::ended_execution(&w.aws, TEST_REGION, execution, Duration::from_secs(30))
            .await;
    (
        d.status().as_str().to_owned(),
        d.output().map(|o| serde_json::from_str(o).unwrap()),
        d.error().map(str::to_owned),
    )
}

async fn decided(w: &World, key: &str) -> Option<(Decision, String)> {
    w.store
        .approval(&ApprovalSelector::Key(key.to_owned()))
        .await
        .unwrap()
        .expect("the key")
        .decided
        .map(|(d, by, _)| (d, by))
}

#[tokio::test]
async fn path_cli_approve_is_decided_on_the_server_as_the_iam_principal_once() {
    let w = world().await;
    let plan = plan_with_cli_approver(&w);
    let run = waiting_run(&w, &plan, false, 900).await;
    let alice = Some((ONCALL_ROLE, "alice@example.com"));
    // Not confirmed (another word typed): nothing changes.
    let (code, _, err) = cli(&w, alice, &["approve", "--key", &run.key], "yes\n").await;
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("not confirmed"), "{err}");
    // It showed the question as the endpoint gave it, and who you are.
    assert!(err.contains(&format!("— {}", run.incident)), "{err}");
    assert!(
        err.contains(&format!("You are On-call (CLI) ({ALICE})")),
        "{err}"
    );
    assert_eq!(decided(&w, &run.key).await, None);
    // With no approval named: the failover holding the lock.
    w.store
        .acquire_lock(
            &run.incident,
            &plan.service,
            chrono::Utc::now(),
            chrono::Duration::seconds(600),
        )
        .await
        .unwrap();
    let (code, out, err) = cli(&w, alice, &["approve"], "approve\n").await;
    fresh_record(&w, &plan).await; // the table is shared: the lock goes
    assert_eq!(code, 0, "{out}{err}\n{}", w.lambdas.output());
    assert!(
        out.contains(&format!("by On-call (CLI) ({ALICE})")),
        "{out}"
    );
    let (status, output, _) = ended(&w, &run.execution).await;
    assert_eq!(status, "SUCCEEDED");
    let approval = &output.unwrap()["approval"];
    assert_eq!(approval["decision"], "approve");
    assert_eq!(approval["approver_id"], ALICE);
    assert_eq!(approval["approver_name"], "On-call (CLI)");
    // The same single-use key: a later reject is refused.
    let (code, _, err) = cli(
        &w,
        alice,
        &["reject", "--execution", &run.execution, "--yes"],
        "",
    )
    .await;
    assert_eq!(code, 3, "{err}");
    assert!(
        err.contains("already decided (approve)") && err.contains("it has ended: SUCCEEDED"),
        "{err}"
    );
    // The same approve again (a lost answer's re-run) says it is done.
    let (code, out, err) = cli(&w, alice, &["approve", "--key", &run.key, "--yes"], "").await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("already decided the same way") && out.contains("(you)"),
        "{out}"
    );
    assert_eq!(
        decided(&w, &run.key).await,
        Some((Decision::Approve, ALICE.to_owned()))
    );
    // The real binary logged the decision, and never the task token.
    let logs = w.lambdas.output();
    assert!(logs.contains("cli decision handled"), "{logs}");
    assert!(!logs.contains(&run.token), "the task token was logged");
}

#[tokio::test]
async fn path_cli_reject_fails_the_run_as_rejected() {
    let w = world().await;
    let run = waiting_run(&w, &plan_with_cli_approver(&w), false, 900).await;
    let (code, out, err) = cli(
        &w,
        Some((ONCALL_ROLE, "bob@example.com")),
        &["reject", "--incident", &run.incident, "--yes"],
        "",
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with("Rejected"), "{out}");
    let (status, _, error) = ended(&w, &run.execution).await;
    assert_eq!(status, "FAILED");
    assert_eq!(error.as_deref(), Some("Handover.Rejected"));
    assert_eq!(
        decided(&w, &run.key).await,
        Some((Decision::Reject, BOB.to_owned()))
    );
}

#[tokio::test]
async fn path_cli_a_principal_off_the_runs_plan_is_refused_on_the_server() {
    let w = world().await;
    let plan = plan_with_cli_approver(&w);
    let run = waiting_run(&w, &plan, false, 900).await;
    let (code, _, err) = cli(
        &w,
        Some(("arn:aws:iam::123456789012:role/developer", "mallory")),
        &["approve", "--key", &run.key, "--yes"],
        "",
    )
    .await;
    assert_eq!(code, 3, "{err}");
    assert!(
        err.contains("assumed-role/developer/mallory")
            && err.contains("not on the stack's plan cli_approvers"),
        "{err}"
    );
    // Keys moto never issued do not get past API Gateway.
    let (code, _, err) = cli(&w, None, &["approve", "--key", &run.key, "--yes"], "").await;
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("API Gateway refused"), "{err}");
    // The run's plan decides: an empty list admits nobody.
    let mut bare = plan.clone();
    bare.cli_approvers.clear();
    let other = waiting_run(&w, &bare, false, 900).await;
    let (code, _, err) = cli(
        &w,
        Some((ONCALL_ROLE, "alice@example.com")),
        &["approve", "--key", &other.key, "--yes"],
        "",
    )
    .await;
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("the list is empty"), "{err}");
    assert_eq!(decided(&w, &run.key).await, None, "nothing was consumed");
    assert_eq!(decided(&w, &other.key).await, None);
}

#[tokio::test]
async fn path_cli_approving_a_possible_data_loss_needs_its_acknowledgement() {
    let w = world().await;
    let run = waiting_run(&w, &plan_with_cli_approver(&w), true, 900).await;
    let alice = Some((ONCALL_ROLE, "alice@example.com"));
    let (code, _, err) = cli(&w, alice, &["approve", "--key", &run.key, "--yes"], "").await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("pass --accept-data-loss"), "{err}");
    // Interactively, the words must be typed.
    let (code, _, err) = cli(&w, alice, &["approve", "--key", &run.key], "y\n").await;
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("data loss not accepted"), "{err}");
    assert_eq!(decided(&w, &run.key).await, None);
    let (code, out, err) = cli(
        &w,
        alice,
        &["approve", "--key", &run.key, "--yes", "--accept-data-loss"],
        "",
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    let (status, output, _) = ended(&w, &run.execution).await;
    assert_eq!(status, "SUCCEEDED");
    assert_eq!(output.unwrap()["approval"]["data_loss_acknowledged"], true);
}

#[tokio::test]
async fn path_cli_unknown_and_expired_approvals_are_refused_with_what_to_do() {
    let w = world().await;
    let alice = Some((ONCALL_ROLE, "alice@example.com"));
    let (code, _, err) = cli(&w, alice, &["approve", "--key", "nope", "--yes"], "").await;
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("no approval was asked for key nope"), "{err}");
    // Expired: the run stopped waiting (its task timed out).
    let run = waiting_run(&w, &plan_with_cli_approver(&w), false, -1).await;
    let (code, _, err) = cli(&w, alice, &["approve", "--key", &run.key, "--yes"], "").await;
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("expired at"), "{err}");
}

#[tokio::test]
async fn path_cli_a_decision_resent_by_another_session_of_the_role_is_credited_to_the_first() {
    let w = world().await;
    let run = waiting_run(&w, &plan_with_cli_approver(&w), false, 900).await;
    // Alice's approve consumed the key, and its SendTaskSuccess never
    // answered (her terminal died): the key records her decision, undelivered.
    w.store
        .consume_approval(&run.key, Decision::Approve, ALICE, chrono::Utc::now())
        .await
        .unwrap();
    // Bob, in the same on-call role, sends it again.
    let (code, out, err) = cli(
        &w,
        Some((ONCALL_ROLE, "bob@example.com")),
        &["approve", "--key", &run.key, "--yes"],
        "",
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains(&format!("Re-sent {ALICE}'s approve")) && out.contains(BOB),
        "{out}"
    );
    let (status, output, _) = ended(&w, &run.execution).await;
    assert_eq!(status, "SUCCEEDED");
    // The run credits the decider the key records, not the re-sender.
    let approval = &output.unwrap()["approval"];
    assert_eq!(approval["approver_id"], ALICE);
    let rec = w
        .store
        .approval(&ApprovalSelector::Key(run.key.clone()))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        rec.decided.map(|(d, by, _)| (d, by)),
        Some((Decision::Approve, ALICE.to_owned()))
    );
    assert!(
        rec.delivered_at.is_some(),
        "marked delivered on the re-send"
    );
    assert_eq!(rec.delivered_by.as_deref(), Some(BOB));
}

/// Slack asked, and the on-call decided at a terminal instead: the message
/// that asked loses its buttons and says who decided, as after a click.
#[tokio::test]
async fn path_cli_decision_updates_the_slack_message_that_asked() {
    let w = world().await;
    let run = super::start(&w, 5.0, |_| {}).await;
    let keys = super::buttons(&w, &run).await;
    let (_, key) = keys.first().expect("the question was posted").clone();
    // The approval function records where it asked right after the post.
    for _ in 0..50 {
        let stored = w
            .store
            .approval(&ApprovalSelector::Key(key.clone()))
            .await
            .unwrap();
        if stored.and_then(|a| a.message).is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (code, out, err) = cli(
        &w,
        Some((ONCALL_ROLE, "alice@example.com")),
        &["approve", "--key", &key, "--yes"],
        "",
    )
    .await;
    assert_eq!(code, 0, "{out}{err}\n{}", w.lambdas.output());
    let e = super::ended(&w, &run).await;
    assert_eq!(e.status, "SUCCEEDED", "{} {:?}", super::path(&e), e.cause);
    assert_eq!(e.output["approval"]["approver_id"], ALICE);
    let updates: Vec<_> = w
        .slack
        .calls()
        .into_iter()
        .filter(|c| c.path == "/api/chat.update")
        .collect();
    let update = updates
        .iter()
        .find(|u| u.body.to_string().contains(&run.incident))
        .unwrap_or_else(|| panic!("a chat.update of this run's question: {updates:?}"));
    assert_eq!(update.status, 200, "{:?}", update.body);
    let blocks = update.body["blocks"].to_string();
    assert!(
        !blocks.contains(handover::slack::message::BLOCK_ACTIONS),
        "the buttons go: {blocks}"
    );
    assert!(
        blocks.contains(ALICE) && blocks.contains("with the handover CLI"),
        "{blocks}"
    );
}
