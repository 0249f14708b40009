use approval::handler::*;
use chrono::{DateTime, Duration, DurationRound, Utc};
use handover::adapters::Sns;
use handover::clock::FixedClock;
use handover::error::ErrorName;
use handover::slack::api::RetryPolicy;
use handover::slack::api::SlackApi;
use handover::slack::message::CliHint;
use handover::slack::message::{ACTION_APPROVE, ACTION_APPROVE_DATA_LOSS, ACTION_REJECT};
use handover::slack::secrets::SecretsManager;
use handover::slack::stand_in::{Fault, SlackStandIn};
use handover::store::approval::{ConsumeOutcome, Decision};
use handover_testkit::{TEST_REGION, aws, fresh_store, logs, unique};
use serde_json::{Value, json};
use std::sync::Arc;

const REQUEST: &str = include_str!("../events/request.json");
const REQUEST_OVER_TARGET: &str = include_str!("../events/request-rpo-over-target.json");
const BOT_TOKEN: &str = "xoxb-1234-5678-approval-test-bot-token";

struct World {
    deps: Deps,
    slack: SlackStandIn,
    secret_arn: String,
    topic: String,
    now: DateTime<Utc>,
}

fn fast() -> RetryPolicy {
    RetryPolicy {
        attempts: 3,
        first_backoff: std::time::Duration::from_millis(10),
        max_backoff: std::time::Duration::from_millis(40),
        attempt_timeout: std::time::Duration::from_secs(2),
    }
}

async fn world() -> World {
    let aws = Arc::new(aws());
    let store = fresh_store(&aws).await;
    let secret_arn = aws
        .secrets(TEST_REGION)
        .await
        .create_secret()
        .name(unique("handover-slack-bot"))
        .secret_string(BOT_TOKEN)
        .send()
        .await
        .expect("create secret in moto")
        .arn
        .expect("secret ARN");
    let slack = SlackStandIn::start().await.unwrap();
    let now = Utc::now()
        .duration_trunc(Duration::milliseconds(1))
        .unwrap();
    let topic = handover_testkit::operator_topic(&aws, TEST_REGION).await;
    let deps = Deps {
        operators: Sns::new(&aws, &topic).await,
        cli: CliHint {
            table: store.table().to_owned(),
            region: TEST_REGION.into(),
            decision_url: "https://a1b2c3d4e5.execute-api.ap-northeast-1.amazonaws.com/decisions"
                .into(),
        },
        store,
        secrets: SecretsManager::new(aws, TEST_REGION),
        slack: SlackApi::new(slack.api_base(), fast()).unwrap(),
        clock: Box::new(FixedClock(now)),
    };
    World {
        deps,
        slack,
        secret_arn,
        topic,
        now,
    }
}

impl World {
    fn event(&self, fixture: &str) -> Value {
        let mut v: Value = serde_json::from_str(fixture).unwrap();
        v["state"]["plan"]["slack"]["bot_token_secret_arn"] = json!(self.secret_arn);
        v
    }
}

/// Consume `key` as an allowed approver would, a second after it was asked.
async fn consume(w: &World, key: &str) -> handover::store::approval::ConsumedApproval {
    let consumed = w
        .deps
        .store
        .consume_approval(
            key,
            Decision::Approve,
            "U0ONCALL01",
            w.now + Duration::seconds(1),
        )
        .await
        .unwrap();
    let ConsumeOutcome::Consumed(c) = consumed else {
        panic!("{consumed:?}")
    };
    c
}

fn token_of(event: &Value) -> String {
    event["token"].as_str().unwrap().to_owned()
}

fn buttons(message: &Value) -> Vec<Value> {
    message["blocks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["type"] == "actions")
        .expect("an actions block")["elements"]
        .as_array()
        .unwrap()
        .clone()
}

#[tokio::test]
async fn the_question_is_posted_with_the_key_and_the_key_maps_to_the_token() {
    let w = world().await;
    let event = w.event(REQUEST);
    let out = handler(event.clone(), &w.deps).await.unwrap();
    assert_eq!(out.requested_at, w.now);
    assert_eq!(
        out.expires_at,
        w.now + Duration::seconds(900),
        "plan timeout"
    );
    assert!(handover::slack::interaction::is_key(&out.key));
    let output = serde_json::to_string(&out).unwrap();
    assert!(
        !output.contains(&token_of(&event)),
        "the output lands in the history"
    );

    let messages = w.slack.messages();
    assert_eq!(messages.len(), 1);
    let m = &messages[0];
    let bearer = format!("Bearer {BOT_TOKEN}");
    assert_eq!(m.authorization.as_deref(), Some(bearer.as_str()));
    assert_eq!(m.body["channel"], "C0123456789");
    assert_eq!(out.message.as_ref().unwrap().channel, "C0123456789");
    assert_eq!(out.operator_notice, None);
    assert!(handover_testkit::topic_messages(&w.topic).await.is_empty());
    let b = buttons(&m.body);
    assert_eq!(b[0]["action_id"], ACTION_APPROVE);
    assert_eq!(b[1]["action_id"], ACTION_REJECT);
    assert!(b.iter().all(|b| b["value"] == json!(out.key)));
    assert!(
        !m.body.to_string().contains(&token_of(&event)),
        "no token in Slack"
    );

    // Where it was asked is kept with the key, for a CLI decision to update.
    let stored = w
        .deps
        .store
        .approval(&handover::store::approval::ApprovalSelector::Key(
            out.key.clone(),
        ))
        .await
        .unwrap()
        .unwrap();
    let posted = stored.message.expect("the posted question is recorded");
    assert_eq!(posted.channel, "C0123456789");
    assert_eq!(
        Some(posted.ts.as_str()),
        out.message.as_ref().map(|m| m.ts.as_str())
    );
    let blocks: Value = serde_json::from_str(&posted.blocks).unwrap();
    assert_eq!(blocks, m.body["blocks"], "the blocks as posted");

    let c = consume(&w, &out.key).await;
    assert_eq!(c.task_token, token_of(&event));
    assert_eq!(c.execution, event["execution"].as_str().unwrap());
    assert_eq!(c.incident, "shop-ap-northeast-2-20261130T141155Z");
    assert_eq!(c.requested_at, w.now);
}

#[tokio::test]
async fn the_key_expires_after_the_plans_approval_timeout() {
    let w = world().await;
    let mut event = w.event(REQUEST);
    event["state"]["plan"]["timings"]["approval_timeout_s"] = json!(60);
    let out = handler(event, &w.deps).await.unwrap();
    let late = w.now + Duration::seconds(61);
    let outcome = w
        .deps
        .store
        .consume_approval(&out.key, Decision::Approve, "U0ONCALL01", late)
        .await
        .unwrap();
    assert_eq!(
        outcome,
        ConsumeOutcome::Expired {
            at: w.now + Duration::seconds(60)
        }
    );
}

#[tokio::test]
async fn rpo_over_target_makes_the_approve_button_accept_data_loss() {
    let w = world().await;
    handler(w.event(REQUEST_OVER_TARGET), &w.deps)
        .await
        .unwrap();
    let b = buttons(&w.slack.messages()[0].body);
    assert_eq!(b[0]["action_id"], ACTION_APPROVE_DATA_LOSS);
    assert_eq!(
        b[0]["text"]["text"],
        "Approve — accept up to 312 s data loss"
    );
    assert_eq!(b[0]["confirm"]["title"]["text"], "Accept data loss?");
}

#[tokio::test]
async fn slack_failing_after_retries_asks_the_operator_topic_and_the_run_keeps_waiting() {
    let w = world().await;
    w.slack.fail_next([
        Fault::Status(503),
        Fault::RateLimited(0),
        Fault::Status(500),
    ]);
    let event = w.event(REQUEST);
    let out = handler(event.clone(), &w.deps).await.unwrap();
    assert_eq!(w.slack.calls().len(), 3);
    assert!(w.slack.messages().is_empty());
    assert_eq!(out.message, None);
    assert!(
        out.slack_error.as_deref().unwrap().contains("HTTP 500"),
        "{out:?}"
    );
    assert!(out.operator_notice.is_some());
    assert!(
        w.deps
            .store
            .approval(&handover::store::approval::ApprovalSelector::Key(
                out.key.clone()
            ))
            .await
            .unwrap()
            .unwrap()
            .message
            .is_none(),
        "nothing was posted, so nothing to update"
    );
    let notices = handover_testkit::topic_messages(&w.topic).await;
    assert_eq!(notices.len(), 1, "{notices:?}");
    let subject = notices[0]["Subject"].as_str().unwrap();
    let body = notices[0]["Message"].as_str().unwrap();
    assert!(subject.contains("approval needed"), "{subject}");
    assert!(subject.contains("Slack refused"), "{subject}");
    // The same single-use key as a click; the token is read by key, never sent.
    assert!(
        body.contains(&format!("handover approve --key {} ", out.key)),
        "{body}"
    );
    assert!(
        body.contains(&format!("handover reject --key {} ", out.key)),
        "{body}"
    );
    assert!(!body.contains(&token_of(&event)), "the task token was sent");
    assert!(!body.contains(BOT_TOKEN));
    // The key is stored, so the CLI path decides exactly as a click would.
    let c = consume(&w, &out.key).await;
    assert_eq!(c.task_token, token_of(&event));
}

#[tokio::test]
async fn a_permanent_slack_error_asks_the_operator_topic_without_retries() {
    let w = world().await;
    w.slack.fail_next([Fault::Api("channel_not_found".into())]);
    let out = handler(w.event(REQUEST), &w.deps).await.unwrap();
    assert!(
        out.slack_error
            .as_deref()
            .unwrap()
            .contains("channel_not_found"),
        "{out:?}"
    );
    assert_eq!(w.slack.calls().len(), 1);
    assert_eq!(handover_testkit::topic_messages(&w.topic).await.len(), 1);
}

/// A topic nobody listens to (no subscription, or an e-mail one never
/// confirmed) asks nobody: the run escalates instead of waiting.
#[tokio::test]
async fn an_operator_topic_nobody_listens_to_is_not_asking_and_the_run_escalates() {
    let mut w = world().await;
    let aws = aws();
    let lonely = aws
        .sns(TEST_REGION)
        .await
        .create_topic()
        .name(unique("nobody-listens"))
        .send()
        .await
        .unwrap()
        .topic_arn
        .unwrap();
    w.deps.operators = Sns::new(&aws, &lonely).await;
    w.slack.fail_next([Fault::Api("channel_not_found".into())]);
    let err = handler(w.event(REQUEST), &w.deps).await.unwrap_err();
    assert_eq!(err.name, ErrorName::Fatal);
    assert!(
        err.message.contains("no confirmed subscription"),
        "{}",
        err.message
    );
    assert!(err.message.contains("escalate"), "{}", err.message);
}

#[tokio::test]
async fn slack_and_the_operator_topic_both_refusing_is_fatal_so_the_run_escalates() {
    let mut w = world().await;
    let aws = aws();
    w.deps.operators = Sns::new(
        &aws,
        &format!(
            "arn:aws:sns:{TEST_REGION}:123456789012:{}",
            unique("absent")
        ),
    )
    .await;
    w.slack.fail_next([Fault::Api("channel_not_found".into())]);
    let err = handler(w.event(REQUEST), &w.deps).await.unwrap_err();
    assert_eq!(err.name, ErrorName::Fatal);
    assert!(err.message.contains("escalate"), "{}", err.message);
    assert!(err.message.contains("channel_not_found"), "{}", err.message);
    assert!(err.message.contains("operator topic"), "{}", err.message);
}

#[tokio::test]
async fn a_missing_bot_token_secret_is_fatal_and_nothing_is_posted() {
    let w = world().await;
    let mut event = w.event(REQUEST);
    event["state"]["plan"]["slack"]["bot_token_secret_arn"] = json!(format!(
        "arn:aws:secretsmanager:{TEST_REGION}:123456789012:secret:{}",
        unique("absent")
    ));
    let err = handler(event, &w.deps).await.unwrap_err();
    assert_eq!(err.name, ErrorName::Fatal, "{}", err.message);
    assert!(
        err.message.contains("ResourceNotFoundException"),
        "{}",
        err.message
    );
    assert!(w.slack.calls().is_empty());
}

#[tokio::test]
async fn malformed_payloads_are_invalid_input() {
    let w = world().await;
    let mut no_diagnosis = w.event(REQUEST);
    no_diagnosis["state"]
        .as_object_mut()
        .unwrap()
        .remove("diagnosis");
    let mut no_token = w.event(REQUEST);
    no_token.as_object_mut().unwrap().remove("token");
    let mut bad_plan = w.event(REQUEST);
    bad_plan["state"]["plan"]["slack"]
        .as_object_mut()
        .unwrap()
        .remove("channel");
    for (event, says) in [
        (json!({}), "token"),
        (json!("approve"), "approval task payload"),
        (no_token, "token"),
        (no_diagnosis, "$.diagnosis"),
        (bad_plan, "channel"),
    ] {
        let err = handler(event, &w.deps).await.unwrap_err();
        assert_eq!(err.name, ErrorName::InvalidInput, "{}", err.message);
        assert!(err.message.contains(says), "{says}: {}", err.message);
    }
    assert!(w.slack.calls().is_empty());
}

#[tokio::test]
async fn no_log_line_contains_the_task_token_or_the_bot_token() {
    let w = world().await;
    let event = w.event(REQUEST);
    let token = token_of(&event);
    let (out, ok_logs) = logs::capture(handler(event.clone(), &w.deps)).await;
    let key = out.unwrap().key;
    w.slack
        .fail_next([Fault::Status(503), Fault::Status(503), Fault::Status(503)]);
    let (out, failing_logs) = logs::capture(handler(event, &w.deps)).await;
    assert!(out.unwrap().operator_notice.is_some());
    assert!(
        ok_logs.contains("approval requested"),
        "logs were captured: {ok_logs}"
    );
    assert!(
        ok_logs.contains(&key),
        "the key is logged, for tracing a click"
    );
    assert!(failing_logs.contains("retrying"), "{failing_logs}");
    for text in [&ok_logs, &failing_logs] {
        assert!(!text.contains(&token), "task token in logs: {text}");
        assert!(
            !text.contains(&token[..40]),
            "part of the task token in logs"
        );
        assert!(!text.contains(BOT_TOKEN), "bot token in logs: {text}");
    }
}
