//! Clicks that decide, or find the decision already made, expired or moot.

use crate::test_world::*;
use aws_sdk_sfn::types::ExecutionStatus;
use chrono::Utc;
use handover::slack::message::{ACTION_APPROVE, ACTION_APPROVE_DATA_LOSS, ACTION_REJECT};
use handover::slack::stand_in::click_body;
use handover_testkit::unique;
use serde_json::Value;

const TEAM: &str = "T0TEAM0001";
const FAKE_EXECUTION: &str = "arn:aws:states:ap-northeast-1:123456789012:execution:handover:none";
const FAKE_TOKEN: &str = "AQCEAAAAKgAAAAMAAAAAAAAAAfake-token-nobody-waits-for";

#[tokio::test]
async fn a_signed_approve_resumes_the_run_with_the_approvers_identity() {
    let w = world().await;
    let (execution, token) = w.waiting_task().await;
    let key = w
        .pending(&execution, &token, chrono::Duration::minutes(15))
        .await;
    let resp = w
        .send(w.click("U0ONCALL01", TEAM, ACTION_APPROVE_DATA_LOSS, &key))
        .await;
    assert_eq!(resp.status_code, 200, "{}", text(&resp));
    let (status, output, ..) = w.finished(&execution).await;
    assert_eq!(status, ExecutionStatus::Succeeded);
    let approval = &output["approval"];
    assert_eq!(approval["decision"], "approve");
    assert_eq!(approval["approver_id"], "U0ONCALL01");
    assert_eq!(approval["approver_name"], "Primary on-call");
    assert_eq!(approval["data_loss_acknowledged"], true);
    assert_eq!(w.successes(), 1);
    let responses = w.slack.responses();
    assert_eq!(responses.len(), 1);
    assert_eq!(responses[0].body["replace_original"], true);
    let blocks = responses[0].body["blocks"].to_string();
    assert!(blocks.contains("*Approved* by Primary on-call"), "{blocks}");
    assert!(!blocks.contains("\"actions\""), "buttons removed: {blocks}");
}

#[tokio::test]
async fn a_signed_reject_fails_the_run_with_handover_rejected_naming_who() {
    let w = world().await;
    let (execution, token) = w.waiting_task().await;
    let key = w
        .pending(&execution, &token, chrono::Duration::minutes(15))
        .await;
    let resp = w
        .send(w.click("U0ONCALL02", TEAM, ACTION_REJECT, &key))
        .await;
    assert_eq!(resp.status_code, 200, "{}", text(&resp));
    let (status, _, error, moto_cause) = w.finished(&execution).await;
    assert_eq!(status, ExecutionStatus::Failed);
    assert_eq!(error.as_deref(), Some("Handover.Rejected"));
    assert_eq!((w.successes(), w.failures()), (0, 1));
    let (sent_error, sent_cause) = w
        .deps
        .callback
        .last_failure
        .lock()
        .unwrap()
        .clone()
        .unwrap();
    assert_eq!(sent_error, "Handover.Rejected");
    let cause: Value = serde_json::from_str(&sent_cause).unwrap();
    assert_eq!(cause["decision"], "reject");
    assert_eq!(cause["approver_id"], "U0ONCALL02");
    assert_eq!(cause["approver_name"], "Secondary on-call");
    // moto 5.2.5 drops SendTaskFailure's cause (stepfunctions/responses.py
    // passes only the error); AWS keeps it. When it arrives, it is ours.
    if let Some(c) = moto_cause {
        assert_eq!(c, sent_cause);
    }
    assert!(
        w.slack.responses()[0]
            .body
            .to_string()
            .contains("*Rejected* by Secondary on-call")
    );
}

#[tokio::test]
async fn a_replayed_click_is_already_decided_and_a_stale_replay_is_refused() {
    let w = world().await;
    let (execution, token) = w.waiting_task().await;
    let key = w
        .pending(&execution, &token, chrono::Duration::minutes(15))
        .await;
    let body = click_body(
        "U0ONCALL01",
        TEAM,
        ACTION_APPROVE,
        &key,
        &w.slack.response_url("x"),
    );
    let now = Utc::now().timestamp();
    let click = signed_event(&body, now, SIGNING_SECRET.as_bytes());
    assert_eq!(w.send(click.clone()).await.status_code, 200);
    let replay = w.send(click).await;
    assert_eq!(replay.status_code, 200);
    assert_eq!(
        w.successes(),
        1,
        "the replay sent nothing to Step Functions"
    );
    let last = w.slack.responses().pop().unwrap().body;
    assert_eq!(last["response_type"], "ephemeral");
    let note = last["text"].as_str().unwrap();
    assert!(
        note.contains("Already decided (approve) by Primary on-call at <!date^"),
        "{note}"
    );
    // The same bytes captured and sent later than five minutes are not even parsed.
    let stale = w
        .send(signed_event(&body, now - 301, SIGNING_SECRET.as_bytes()))
        .await;
    assert_eq!(stale.status_code, 401);
    assert_eq!(w.finished(&execution).await.0, ExecutionStatus::Succeeded);
}

#[tokio::test]
async fn double_click_two_concurrent_requests_send_exactly_one_success() {
    let w = world().await;
    let (execution, token) = w.waiting_task().await;
    let key = w
        .pending(&execution, &token, chrono::Duration::minutes(15))
        .await;
    let a = w.click("U0ONCALL01", TEAM, ACTION_APPROVE, &key);
    let b = w.click("U0ONCALL02", TEAM, ACTION_APPROVE, &key);
    let (ra, rb) = tokio::join!(w.send(a), w.send(b));
    assert_eq!((ra.status_code, rb.status_code), (200, 200));
    assert_eq!(w.successes(), 1, "exactly one SendTaskSuccess");
    let responses = w.slack.responses();
    let replaced = responses
        .iter()
        .filter(|r| r.body["replace_original"] == true)
        .count();
    let already = responses
        .iter()
        .filter(|r| {
            r.body["text"]
                .as_str()
                .is_some_and(|t| t.starts_with("Already decided"))
        })
        .count();
    assert_eq!((replaced, already), (1, 1), "{responses:?}");
    let (status, output, ..) = w.finished(&execution).await;
    assert_eq!(status, ExecutionStatus::Succeeded);
    assert!(
        ["U0ONCALL01", "U0ONCALL02"].contains(&output["approval"]["approver_id"].as_str().unwrap())
    );
}

#[tokio::test]
async fn a_task_that_no_longer_waits_gets_a_clear_note_and_nothing_else_changes() {
    let w = world().await;
    let key = w
        .pending(FAKE_EXECUTION, FAKE_TOKEN, chrono::Duration::minutes(15))
        .await;
    let resp = w
        .send(w.click("U0ONCALL01", TEAM, ACTION_APPROVE, &key))
        .await;
    assert_eq!(resp.status_code, 200);
    let r = w.slack.responses();
    assert_eq!(r.len(), 1);
    assert_eq!(
        r[0].body["replace_original"], false,
        "the message keeps its buttons text"
    );
    let note = r[0].body["text"].as_str().unwrap();
    assert!(note.contains("no longer waits"), "{note}");
    assert!(
        note.contains("InvalidToken") || note.contains("TaskDoesNotExist"),
        "{note}"
    );
}

#[tokio::test]
async fn expired_and_unknown_keys_say_so() {
    let w = world().await;
    let expired = w
        .pending(FAKE_EXECUTION, FAKE_TOKEN, chrono::Duration::seconds(-30))
        .await;
    assert_eq!(
        w.send(w.click("U0ONCALL01", TEAM, ACTION_APPROVE, &expired))
            .await
            .status_code,
        200
    );
    assert_eq!(
        w.send(w.click("U0ONCALL01", TEAM, ACTION_APPROVE, "AAAAAAAAAAAAAAAAAAAAAA"))
            .await
            .status_code,
        200
    );
    let notes: Vec<String> = w
        .slack
        .responses()
        .iter()
        .map(|r| r.body["text"].as_str().unwrap().to_owned())
        .collect();
    assert!(notes[0].contains("expired"), "{notes:?}");
    assert!(notes[1].contains("not known"), "{notes:?}");
    assert_eq!((w.successes(), w.failures()), (0, 0));
}

#[tokio::test]
async fn no_log_line_contains_a_token_or_a_secret() {
    let w = world().await;
    let (execution, token) = w.waiting_task().await;
    let key = w
        .pending(&execution, &token, chrono::Duration::minutes(15))
        .await;
    let fake = w
        .pending(FAKE_EXECUTION, FAKE_TOKEN, chrono::Duration::minutes(1))
        .await;
    let click = w.click("U0ONCALL01", TEAM, ACTION_APPROVE, &key);
    let signature = click["headers"]["x-slack-signature"]
        .as_str()
        .unwrap()
        .to_owned();
    let flow = async {
        w.send(w.click("U0INTRUDER", TEAM, ACTION_APPROVE, &key))
            .await;
        w.send(signed_event("payload=x", Utc::now().timestamp(), b"wrong"))
            .await;
        w.send(click.clone()).await;
        w.send(click).await;
        w.send(w.click("U0ONCALL01", TEAM, ACTION_REJECT, &fake))
            .await;
    };
    let ((), logs) = capture_capped(flow).await;
    assert!(
        logs.contains("slack click handled"),
        "logs were captured: {logs}"
    );
    assert!(logs.contains("decision sent to step functions"), "{logs}");
    assert!(
        logs.contains("DynamoDB.UpdateItem"),
        "SDK spans are captured too"
    );
    for secret in [
        token.as_str(),
        FAKE_TOKEN,
        SIGNING_SECRET,
        signature.as_str(),
        "/actions/T0TEAM0001/",
    ] {
        let leak: Vec<&str> = logs.lines().filter(|l| l.contains(secret)).collect();
        assert!(leak.is_empty(), "{secret} in logs: {leak:#?}");
    }
}

#[tokio::test]
async fn a_decision_step_functions_never_got_releases_the_key_for_another_click() {
    // Step Functions in eu-west-1 fails for this test alone.
    const REGION: &str = "eu-west-1";
    let w = world().await;
    let (execution, token) = w.waiting_task_in(REGION).await;
    let key = w
        .pending(&execution, &token, chrono::Duration::minutes(15))
        .await;
    // A definitive refusal: a 400 the SDK does not retry (nothing decided).
    let id = unique("refuse");
    handover_testkit::add_fault_rules(serde_json::json!([{"id": id, "mode": "error",
        "status": 400, "code": "ValidationException", "message": "injected refusal",
        "service": "states", "region": REGION, "action": "SendTaskSuccess"}]))
    .await;
    let first = w
        .send(w.click("U0ONCALL01", TEAM, ACTION_APPROVE, &key))
        .await;
    handover_testkit::remove_fault_rules(&[&id]).await;
    assert_eq!(first.status_code, 503, "{}", text(&first));
    let note = w.slack.responses()[0].body["text"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        note.contains("the key was released: decide again"),
        "{note}"
    );
    assert_eq!(w.status(&execution).await, ExecutionStatus::Running);

    // The second click decides, exactly once.
    let second = w
        .send(w.click("U0ONCALL01", TEAM, ACTION_APPROVE, &key))
        .await;
    assert_eq!(second.status_code, 200, "{}", text(&second));
    let (status, output, ..) = w.finished(&execution).await;
    assert_eq!(status, ExecutionStatus::Succeeded);
    assert_eq!(output["approval"]["approver_id"], "U0ONCALL01");
    let third = w
        .send(w.click("U0ONCALL02", TEAM, ACTION_REJECT, &key))
        .await;
    assert_eq!(third.status_code, 200);
    let notes = w.slack.responses();
    let last = notes.last().unwrap().body["text"].as_str().unwrap_or("");
    assert!(last.contains("Already decided"), "{last}");
    assert_eq!(w.failures(), 0, "the reject never reached Step Functions");
}

/// Issue 12, scenario 7: SendTaskSuccess is applied but its answer is lost.
/// If the SDK's retry fits the click's budget, Step Functions answers that
/// the task no longer waits. That used to read "the run no longer waits: it
/// timed out or ended". The task's history is read instead, and the person
/// is told the decision arrived. If the retry does not fit, the person is
/// told it may have arrived, and the same click learns that it did.
#[tokio::test]
async fn a_decision_whose_answer_was_lost_is_not_released_and_a_repeat_click_learns_it_arrived() {
    const REGION: &str = "eu-west-2";
    let w = world().await;
    let (execution, token) = w.waiting_task_in(REGION).await;
    let key = w
        .pending(&execution, &token, chrono::Duration::minutes(15))
        .await;
    let id = unique("lost");
    handover_testkit::add_fault_rules(serde_json::json!([{"id": id, "mode": "lost", "count": 1,
        "service": "states", "region": REGION, "action": "SendTaskSuccess"}]))
    .await;
    let first = w
        .send(w.click("U0ONCALL01", TEAM, ACTION_APPROVE, &key))
        .await;
    handover_testkit::remove_fault_rules(&[&id]).await;
    let sends = if first.status_code == 503 {
        let note = w.slack.responses()[0].body["text"]
            .as_str()
            .unwrap_or("")
            .to_owned();
        assert!(
            note.contains("may or may not have reached the run"),
            "{note}"
        );
        let again = w
            .send(w.click("U0ONCALL01", TEAM, ACTION_APPROVE, &key))
            .await;
        assert_eq!(again.status_code, 200, "{}", text(&again));
        2
    } else {
        1
    };
    assert!(first.status_code == 200 || sends == 2, "{}", text(&first));
    let replaced = w.slack.responses().last().unwrap().body.clone();
    assert_eq!(replaced["replace_original"], true, "{replaced}");
    assert!(replaced.to_string().contains("Approved"), "{replaced}");
    // The run did get it.
    let (status, output, ..) = w.finished(&execution).await;
    assert_eq!(status, ExecutionStatus::Succeeded);
    assert_eq!(output["approval"]["approver_id"], "U0ONCALL01");
    // Someone else cannot take the key over.
    let other = w
        .send(w.click("U0ONCALL02", TEAM, ACTION_REJECT, &key))
        .await;
    assert_eq!(other.status_code, 200);
    let last = w.slack.responses().last().unwrap().body["text"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    assert!(last.contains("Already decided"), "{last}");
    assert_eq!(w.failures(), 0);
    // Marked delivered: a further click is only told who decided.
    let fourth = w
        .send(w.click("U0ONCALL01", TEAM, ACTION_APPROVE, &key))
        .await;
    assert_eq!(fourth.status_code, 200);
    let last = w.slack.responses().last().unwrap().body["text"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    assert!(last.contains("Already decided"), "{last}");
    assert_eq!(
        w.successes(),
        sends,
        "one send per click that could not be told, no more"
    );
}

/// Issue 12, scenario 7: SendTaskSuccess times out before Step Functions
/// sees it. The key stays with this person's decision; the same click sends
/// it again and the run gets it, exactly once.
#[tokio::test]
async fn a_decision_that_timed_out_is_sent_again_by_the_same_click() {
    const REGION: &str = "eu-west-3";
    let w = world().await;
    let (execution, token) = w.waiting_task_in(REGION).await;
    let key = w
        .pending(&execution, &token, chrono::Duration::minutes(15))
        .await;
    let id = unique("slow");
    handover_testkit::add_fault_rules(
        serde_json::json!([{"id": id, "mode": "timeout", "seconds": 2.0,
        "service": "states", "region": REGION, "action": "SendTaskSuccess"}]),
    )
    .await;
    let first = w
        .send(w.click("U0ONCALL01", TEAM, ACTION_APPROVE, &key))
        .await;
    handover_testkit::remove_fault_rules(&[&id]).await;
    assert_eq!(first.status_code, 503, "{}", text(&first));
    assert_eq!(
        w.status(&execution).await,
        ExecutionStatus::Running,
        "nothing arrived"
    );
    let again = w
        .send(w.click("U0ONCALL01", TEAM, ACTION_APPROVE, &key))
        .await;
    assert_eq!(again.status_code, 200, "{}", text(&again));
    let (status, output, ..) = w.finished(&execution).await;
    assert_eq!(status, ExecutionStatus::Succeeded);
    assert_eq!(output["approval"]["approver_id"], "U0ONCALL01");
}
