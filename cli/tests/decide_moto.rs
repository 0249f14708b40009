//! `handover approve` / `reject` against moto: the real binary decides a
//! run that waits on a real Step Functions task token, through the same
//! single-use key as a Slack click, as the IAM principal that runs it.
//!
//! The waiting run: moto executes a `.waitForTaskToken` task (SNS publish of
//! the token, read back from the router's SNS log), and the key is stored as
//! the approval function stores it. The operator's credentials come from
//! `sts:AssumeRole` on moto, so `GetCallerIdentity` answers an assumed-role
//! session ARN, as it does for an SSO or on-call role in AWS.

use handover::plan::{CliApprover, Plan};
use handover::store::Store;
use handover::store::approval::{ApprovalSelector, Decision, NewApproval};
use handover_testkit::world::{run_input, unique_plan};
use handover_testkit::{TEST_REGION, aws, fresh_store, unique};
use serde_json::{Value, json};
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

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

fn plain_user() -> Creds {
    Creds {
        key: "test".into(),
        secret: "test".into(),
        token: None,
    }
}

fn cli(args: &[&str], store: &Store, creds: &Creds, stdin: &str) -> (i32, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_handover"));
    cmd.args(args)
        .args(["--table", store.table(), "--region", TEST_REGION])
        .env("AWS_ENDPOINT_URL", handover_testkit::endpoint())
        .env("AWS_ACCESS_KEY_ID", &creds.key)
        .env("AWS_SECRET_ACCESS_KEY", &creds.secret)
        .env_remove("AWS_SESSION_TOKEN")
        .env_remove("AWS_PROFILE")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(t) = &creds.token {
        cmd.env("AWS_SESSION_TOKEN", t);
    }
    let mut child = cmd.spawn().expect("run handover");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A run waiting for its approval: started on a state machine whose task
/// publishes its token and waits, with the key stored for that token.
struct Waiting {
    execution: String,
    incident: String,
    key: String,
}

async fn waiting_run(store: &Store, plan: &Plan, data_loss: bool, expires_in: i64) -> Waiting {
    let aws = aws();
    let topic = handover_testkit::operator_topic(&aws, TEST_REGION).await;
    let definition = json!({
        "StartAt": "RequestApproval",
        "States": {
            "RequestApproval": {
                "Type": "Task",
                "Resource": "arn:aws:states:::sns:publish.waitForTaskToken",
                "Parameters": {"TopicArn": topic, "Message.$": "$$.Task.Token"},
                "ResultPath": "$.approval",
                "Next": "Approved",
                "Catch": [{"ErrorEquals": ["Handover.Rejected"], "ResultPath": "$.error", "Next": "Rejected"}]
            },
            "Approved": {"Type": "Pass", "End": true},
            "Rejected": {"Type": "Fail", "Error": "Handover.Rejected", "Cause": "rejected"}
        }
    });
    let sfn = aws.sfn(TEST_REGION).await;
    let machine = sfn
        .create_state_machine()
        .name(unique("cli-approval"))
        .definition(definition.to_string())
        .role_arn("arn:aws:iam::123456789012:role/handover-states")
        .send()
        .await
        .unwrap()
        .state_machine_arn;
    let incident = unique("shop-inc");
    let execution = sfn
        .start_execution()
        .state_machine_arn(&machine)
        .name(&incident)
        .input(serde_json::to_string(&run_input(plan, &incident)).unwrap())
        .send()
        .await
        .unwrap()
        .execution_arn;
    let token = {
        let mut token = None;
        for _ in 0..100 {
            token = handover_testkit::topic_messages(&topic)
                .await
                .into_iter()
                .find_map(|m| m["Message"].as_str().map(str::to_owned));
            if token.is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        token.expect("the task published its token")
    };
    let key = handover::approval::new_key().unwrap();
    let now = chrono::Utc::now();
    store
        .put_approval(&NewApproval {
            key: key.clone(),
            task_token: token,
            execution: execution.clone(),
            incident: incident.clone(),
            requested_at: now,
            expires_at: now + chrono::Duration::seconds(expires_in),
            question: format!("FAILOVER approval: {} — {incident}", plan.service),
            data_loss,
        })
        .await
        .unwrap();
    Waiting {
        execution,
        incident,
        key,
    }
}

async fn ended(execution: &str) -> (String, Option<Value>, Option<String>, Option<String>) {
    let sfn = aws().sfn(TEST_REGION).await;
    for _ in 0..100 {
        let d = sfn
            .describe_execution()
            .execution_arn(execution)
            .send()
            .await
            .unwrap();
        if d.status().as_str() != "RUNNING" {
            return (
                d.status().as_str().to_owned(),
                d.output().map(|o| serde_json::from_str(o).unwrap()),
                d.error().map(str::to_owned),
                d.cause().map(str::to_owned),
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{execution} still running");
}

fn plan_with_cli_approver() -> Plan {
    let mut plan = unique_plan();
    plan.cli_approvers = vec![CliApprover {
        arn: ONCALL_ROLE.into(),
        name: "On-call (CLI)".into(),
    }];
    plan
}

#[tokio::test]
async fn approve_resumes_the_run_as_the_iam_principal_once_and_a_second_decision_is_refused() {
    let store = fresh_store(&aws()).await;
    let plan = plan_with_cli_approver();
    let run = waiting_run(&store, &plan, false, 900).await;
    let oncall = session_of(ONCALL_ROLE, "alice@example.com").await;
    // Not confirmed (another word typed): nothing changes.
    let (code, _, err) = cli(&["approve", "--key", &run.key], &store, &oncall, "yes\n");
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("not confirmed"), "{err}");
    // It showed the question as the approval function stored it.
    assert!(err.contains(&format!("— {}", run.incident)), "{err}");
    assert!(err.contains("Type `approve`"), "{err}");
    let rec = store
        .approval(&ApprovalSelector::Key(run.key.clone()))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(rec.decided, None);
    // Found by the incident holding the lock when no flag is given.
    store
        .acquire_lock(
            &run.incident,
            &plan.service,
            chrono::Utc::now(),
            chrono::Duration::seconds(600),
        )
        .await
        .unwrap();
    let (code, out, err) = cli(&["approve"], &store, &oncall, "approve\n");
    assert_eq!(code, 0, "{out}{err}");
    let session = "arn:aws:sts::123456789012:assumed-role/handover-oncall/alice@example.com";
    assert!(
        out.contains(&format!("by On-call (CLI) ({session})")),
        "{out}"
    );
    let (status, output, ..) = ended(&run.execution).await;
    assert_eq!(status, "SUCCEEDED");
    let approval = &output.unwrap()["approval"];
    assert_eq!(approval["decision"], "approve");
    assert_eq!(approval["approver_id"], session);
    assert_eq!(approval["approver_name"], "On-call (CLI)");
    // The same single-use key: a later reject (by the same person) is refused.
    let (code, _, err) = cli(
        &["reject", "--execution", &run.execution, "--yes"],
        &store,
        &oncall,
        "",
    );
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("has ended (SUCCEEDED)"), "{err}");
    let rec = store
        .approval(&ApprovalSelector::Incident(run.incident.clone()))
        .await
        .unwrap()
        .unwrap();
    let (d, by, _) = rec.decided.unwrap();
    assert_eq!((d, by.as_str()), (Decision::Approve, session));
    assert!(rec.delivered_at.is_some());
}

#[tokio::test]
async fn reject_fails_the_run_as_rejected_with_who_rejected() {
    let store = fresh_store(&aws()).await;
    let plan = plan_with_cli_approver();
    let run = waiting_run(&store, &plan, false, 900).await;
    let oncall = session_of(ONCALL_ROLE, "bob").await;
    let (code, out, err) = cli(
        &["reject", "--incident", &run.incident, "--yes"],
        &store,
        &oncall,
        "",
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with("Rejected"), "{out}");
    let (status, _, error, cause) = ended(&run.execution).await;
    assert_eq!(status, "FAILED");
    assert_eq!(error.as_deref(), Some("Handover.Rejected"));
    // The Fail state's own cause; the task's failure carried the decision.
    assert!(cause.is_some());
}

#[tokio::test]
async fn a_principal_off_the_runs_plan_is_refused_and_the_key_stays_pending() {
    let store = fresh_store(&aws()).await;
    let plan = plan_with_cli_approver();
    let run = waiting_run(&store, &plan, false, 900).await;
    for (creds, who) in [
        (
            session_of("arn:aws:iam::123456789012:role/developer", "mallory").await,
            "assumed-role/developer/mallory",
        ),
        (plain_user(), "user/moto"),
    ] {
        let (code, _, err) = cli(&["approve", "--key", &run.key, "--yes"], &store, &creds, "");
        assert_eq!(code, 3, "{err}");
        assert!(
            err.contains(who) && err.contains("not on this run's plan cli_approvers"),
            "{err}"
        );
        assert!(err.contains(ONCALL_ROLE), "it names who may: {err}");
    }
    // The run's plan decides, not the caller's: an empty list admits nobody.
    let mut bare = unique_plan();
    bare.cli_approvers.clear();
    let other = waiting_run(&store, &bare, false, 900).await;
    let oncall = session_of(ONCALL_ROLE, "alice").await;
    let (code, _, err) = cli(
        &["approve", "--key", &other.key, "--yes"],
        &store,
        &oncall,
        "",
    );
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("the list is empty"), "{err}");
    for key in [&run.key, &other.key] {
        let rec = store
            .approval(&ApprovalSelector::Key(key.clone()))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(rec.decided, None, "nothing was consumed");
    }
}

#[tokio::test]
async fn approving_a_possible_data_loss_needs_its_acknowledgement() {
    let store = fresh_store(&aws()).await;
    let plan = plan_with_cli_approver();
    let run = waiting_run(&store, &plan, true, 900).await;
    let oncall = session_of(ONCALL_ROLE, "alice").await;
    let (code, _, err) = cli(
        &["approve", "--key", &run.key, "--yes"],
        &store,
        &oncall,
        "",
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("pass --accept-data-loss"), "{err}");
    // Interactively, the words must be typed.
    let (code, _, err) = cli(&["approve", "--key", &run.key], &store, &oncall, "y\n");
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("data loss not accepted"), "{err}");
    assert_eq!(
        store
            .approval(&ApprovalSelector::Key(run.key.clone()))
            .await
            .unwrap()
            .unwrap()
            .decided,
        None
    );
    let (code, out, err) = cli(
        &["approve", "--key", &run.key, "--yes", "--accept-data-loss"],
        &store,
        &oncall,
        "",
    );
    assert_eq!(code, 0, "{out}{err}");
    let (status, output, ..) = ended(&run.execution).await;
    assert_eq!(status, "SUCCEEDED");
    assert_eq!(output.unwrap()["approval"]["data_loss_acknowledged"], true);
}

#[tokio::test]
async fn unknown_expired_and_unnamed_approvals_are_refused_with_what_to_do() {
    let store = fresh_store(&aws()).await;
    let plan = plan_with_cli_approver();
    let oncall = session_of(ONCALL_ROLE, "alice").await;
    // Nothing named and no failover holding the lock.
    let (code, _, err) = cli(&["approve", "--yes"], &store, &oncall, "");
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("no failover holds the lock"), "{err}");
    let (code, _, err) = cli(&["approve", "--key", "nope", "--yes"], &store, &oncall, "");
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("no approval was asked for key nope"), "{err}");
    let (code, _, err) = cli(
        &["approve", "--key", "a", "--incident", "b"],
        &store,
        &oncall,
        "",
    );
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = cli(
        &["reject", "--key", "a", "--accept-data-loss"],
        &store,
        &oncall,
        "",
    );
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = cli(
        &["approve", "--key", "a", "--plan-file", "/tmp/x"],
        &store,
        &oncall,
        "",
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("the run's own plan"), "{err}");
    // Expired: the run stopped waiting (its task timed out).
    let run = waiting_run(&store, &plan, false, -1).await;
    let (code, _, err) = cli(
        &["approve", "--key", &run.key, "--yes"],
        &store,
        &oncall,
        "",
    );
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("expired at"), "{err}");
}

#[tokio::test]
async fn a_decision_resent_by_another_session_of_the_role_is_credited_to_the_one_the_key_records() {
    let store = fresh_store(&aws()).await;
    let plan = plan_with_cli_approver();
    let run = waiting_run(&store, &plan, false, 900).await;
    // Alice's approve consumed the key, and its SendTaskSuccess never
    // answered (her terminal died): the key records her decision, undelivered.
    let alice = "arn:aws:sts::123456789012:assumed-role/handover-oncall/alice@example.com";
    store
        .consume_approval(&run.key, Decision::Approve, alice, chrono::Utc::now())
        .await
        .unwrap();
    // Bob, in the same on-call role, sends it again.
    let bob = session_of(ONCALL_ROLE, "bob@example.com").await;
    let (code, out, err) = cli(&["approve", "--key", &run.key, "--yes"], &store, &bob, "");
    assert_eq!(code, 0, "{out}{err}");
    let bob_arn = "arn:aws:sts::123456789012:assumed-role/handover-oncall/bob@example.com";
    assert!(
        out.contains(&format!("Re-sent {alice}'s approve")) && out.contains(bob_arn),
        "{out}"
    );
    let (status, output, ..) = ended(&run.execution).await;
    assert_eq!(status, "SUCCEEDED");
    // The run credits the decider the key records, not the re-sender.
    let approval = &output.unwrap()["approval"];
    assert_eq!(approval["approver_id"], alice);
    assert_eq!(approval["approver_name"], "On-call (CLI)");
    let rec = store
        .approval(&ApprovalSelector::Key(run.key.clone()))
        .await
        .unwrap()
        .unwrap();
    let (d, by, _) = rec.decided.unwrap();
    assert_eq!((d, by.as_str()), (Decision::Approve, alice));
    assert!(
        rec.delivered_at.is_some(),
        "marked delivered on the re-send"
    );
    // Who sent it is kept beside who decided.
    assert_eq!(rec.delivered_by.as_deref(), Some(bob_arn));
}
