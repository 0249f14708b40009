//! Requests that must change nothing: bad signatures (401), users outside
//! the allow-list (403), malformed payloads (400), other events.

use crate::test_world::*;
use aws_sdk_sfn::types::ExecutionStatus;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use chrono::{TimeZone, Utc};
use handover::clock::FixedClock;
use handover::error::ErrorName;
use handover::live_plan::PlanReader;
use handover::slack::message::ACTION_APPROVE;
use handover::slack::stand_in::click_body;
use serde_json::{Value, json};
use slack::handler::*;

const TEAM: &str = "T0TEAM0001";
const FAKE_EXECUTION: &str = "arn:aws:states:ap-northeast-1:123456789012:execution:handover:none";
const FAKE_TOKEN: &str = "AQCEAAAAKgAAAAMAAAAAAAAAAfake-token-nobody-waits-for";

#[tokio::test]
async fn bad_signatures_are_401_and_nothing_else_happens() {
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
    let mut altered = signed_event(&body, now, SIGNING_SECRET.as_bytes());
    let mut bytes = body.clone().into_bytes();
    let i = bytes.len() - 3;
    bytes[i] ^= 0x01; // one byte of the form body
    altered["body"] = json!(STANDARD.encode(&bytes));
    let wrong_secret = signed_event(&body, now, b"not-the-signing-secret");
    let six_minutes_old = signed_event(&body, now - 360, SIGNING_SECRET.as_bytes());
    let mut no_signature = signed_event(&body, now, SIGNING_SECRET.as_bytes());
    no_signature["headers"]
        .as_object_mut()
        .unwrap()
        .remove("x-slack-signature");
    let mut no_timestamp = signed_event(&body, now, SIGNING_SECRET.as_bytes());
    no_timestamp["headers"]
        .as_object_mut()
        .unwrap()
        .remove("x-slack-request-timestamp");
    for (event, says) in [
        (altered, "does not match"),
        (wrong_secret, "does not match"),
        (six_minutes_old, "360 s from now"),
        (no_signature, "missing header x-slack-signature"),
        (no_timestamp, "missing header x-slack-request-timestamp"),
    ] {
        let resp = w.send(event).await;
        assert_eq!(resp.status_code, 401, "{says}");
        assert!(text(&resp).contains(says), "{says}: {}", text(&resp));
    }
    assert_eq!((w.successes(), w.failures()), (0, 0));
    assert!(w.slack.calls().is_empty(), "not even response_url");
    assert_eq!(w.status(&execution).await, ExecutionStatus::Running);
    // The key is untouched: the genuine click still decides.
    let resp = w
        .send(signed_event(&body, now, SIGNING_SECRET.as_bytes()))
        .await;
    assert_eq!(resp.status_code, 200);
    assert_eq!(w.finished(&execution).await.0, ExecutionStatus::Succeeded);
}

#[tokio::test]
async fn a_user_or_workspace_outside_the_allow_list_gets_403_and_nothing_changes() {
    let w = world().await;
    let (execution, token) = w.waiting_task().await;
    let key = w
        .pending(&execution, &token, chrono::Duration::minutes(15))
        .await;
    let intruder = w
        .send(w.click("U0INTRUDER", TEAM, ACTION_APPROVE, &key))
        .await;
    assert_eq!(intruder.status_code, 403);
    assert!(text(&intruder).contains("not on this service's approver list"));
    let other_team = w
        .send(w.click("U0ONCALL01", "T0OTHERTEAM", ACTION_APPROVE, &key))
        .await;
    assert_eq!(other_team.status_code, 403);
    assert_eq!((w.successes(), w.failures()), (0, 0));
    assert!(
        w.slack
            .responses()
            .iter()
            .all(|r| r.body["response_type"] == "ephemeral")
    );
    assert_eq!(w.status(&execution).await, ExecutionStatus::Running);
    let resp = w
        .send(w.click("U0ONCALL01", TEAM, ACTION_APPROVE, &key))
        .await;
    assert_eq!(resp.status_code, 200, "the key was still pending");
    assert_eq!(w.finished(&execution).await.0, ExecutionStatus::Succeeded);
}

#[tokio::test]
async fn malformed_payloads_are_400_with_the_reason() {
    let w = world().await;
    let key = w
        .pending(FAKE_EXECUTION, FAKE_TOKEN, chrono::Duration::minutes(15))
        .await;
    let now = Utc::now().timestamp();
    let sign = |body: &str| signed_event(body, now, SIGNING_SECRET.as_bytes());
    let mut json_body = sign(r#"{"type":"block_actions"}"#);
    json_body["headers"]["content-type"] = json!("application/json");
    let unknown_action = click_body(
        "U0ONCALL01",
        TEAM,
        "handover_delete_prod",
        &key,
        &w.slack.response_url("x"),
    );
    for (event, says) in [
        (json_body, "not application/x-www-form-urlencoded"),
        (sign("command=%2Ffailover&text=now"), "no payload field"),
        (sign("payload=approve%20it"), "payload is not JSON"),
        (
            sign(&unknown_action),
            "unknown action_id \"handover_delete_prod\"",
        ),
    ] {
        let resp = w.send(event).await;
        assert_eq!(resp.status_code, 400, "{says}");
        assert!(text(&resp).contains(says), "{says}: {}", text(&resp));
    }
    let mut garbled = sign("payload=x");
    garbled["body"] = json!("%%% not base64 %%%");
    assert_eq!(w.send(garbled).await.status_code, 400);
    assert_eq!((w.successes(), w.failures()), (0, 0));
    assert!(w.slack.calls().is_empty());
}

#[tokio::test]
async fn the_fixture_is_signed_as_slack_signs_and_goes_stale() {
    let event: Value = serde_json::from_str(FIXTURE).unwrap();
    let body = STANDARD.decode(event["body"].as_str().unwrap()).unwrap();
    let header = |h: &str| event["headers"][h].as_str();
    let at = |t| FixedClock(Utc.timestamp_opt(t, 0).unwrap());
    // Verified directly: a handled click would POST to the fixture's real
    // hooks.slack.com response_url.
    handover::slack::signing::verify(
        SIGNING_SECRET.as_bytes(),
        header("x-slack-request-timestamp"),
        header("x-slack-signature"),
        &body,
        &at(1_796_048_190),
    )
    .expect("fixture signature");
    let parsed = handover::slack::interaction::parse(header("content-type"), &body).unwrap();
    assert_eq!(parsed.user_id, "U0ONCALL01");
    let mut w = world().await;
    w.deps.clock = Box::new(at(1_796_048_190 + 360));
    assert_eq!(w.send(event).await.status_code, 401);
}

#[tokio::test]
async fn events_that_are_not_slack_posts() {
    let w = world().await;
    let err = handler(json!("click"), &w.deps).await.unwrap_err();
    assert_eq!(err.name, ErrorName::InvalidInput);
    let mut get: Value = serde_json::from_str(FIXTURE).unwrap();
    get["requestContext"]["http"]["method"] = json!("GET");
    assert_eq!(w.send(get).await.status_code, 405);
}

/// The plan as SSM holds it now, as the test changes it.
struct Ssm(std::sync::Arc<std::sync::Mutex<handover::plan::Plan>>);

impl PlanReader for Ssm {
    async fn read(&self) -> Result<handover::plan::Plan, handover::config::ConfigError> {
        Ok(self.0.lock().unwrap().clone())
    }
}

/// Lambda keeps the slack function warm for hours. An approver removed
/// from the plan in SSM stops deciding within a minute of the change.
#[tokio::test]
async fn an_approver_removed_from_the_plan_is_refused_within_a_minute_by_a_warm_function() {
    let ssm = std::sync::Arc::new(std::sync::Mutex::new(handover_testkit::example_plan()));
    let clock = handover::clock::ManualClock::at(chrono::Utc::now());
    let plan = handover::live_plan::LivePlan::load(Ssm(ssm.clone()), &clock)
        .await
        .unwrap();
    let w = world_with(plan, Box::new(clock.clone())).await;
    let (execution, token) = w.waiting_task().await;
    let key = w
        .pending(&execution, &token, chrono::Duration::minutes(15))
        .await;
    ssm.lock()
        .unwrap()
        .slack
        .approvers
        .retain(|a| a.user_id != "U0ONCALL01");
    clock.advance(chrono::Duration::seconds(60));
    let removed = w
        .send(w.click("U0ONCALL01", TEAM, ACTION_APPROVE, &key))
        .await;
    assert_eq!(removed.status_code, 403, "{}", text(&removed));
    assert_eq!((w.successes(), w.failures()), (0, 0));
    assert_eq!(w.status(&execution).await, ExecutionStatus::Running);
    // One still listed decides with the same key.
    let resp = w
        .send(w.click("U0ONCALL02", TEAM, ACTION_APPROVE, &key))
        .await;
    assert_eq!(resp.status_code, 200, "{}", text(&resp));
    assert_eq!(w.finished(&execution).await.0, ExecutionStatus::Succeeded);
}
