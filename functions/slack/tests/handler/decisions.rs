//! `POST /decisions`: `handover approve` / `reject` decided on the server,
//! as the principal API Gateway's AWS_IAM authoriser names. The events are
//! the fixture (`events/decision.json`) with the principal and body each
//! test needs; the runs really wait on a task token, with a Handover input
//! whose plan lists (or does not list) the caller.

use crate::test_world::*;
use chrono::Utc;
use handover::approval::iam::{DecisionReply, ReplyKind};
use handover::plan::{CliApprover, Plan};
use handover::store::approval::ApprovalSelector;
use handover_testkit::{example_plan, unique};
use serde_json::{Value, json};

const FIXTURE: &str = include_str!("../../events/decision.json");
use handover_testkit::world::ONCALL_ROLE;
const ALICE: &str = "arn:aws:sts::123456789012:assumed-role/handover-oncall/alice@example.com";
const BOB: &str = "arn:aws:sts::123456789012:assumed-role/handover-oncall/bob@example.com";
const MALLORY: &str = "arn:aws:sts::123456789012:assumed-role/developer/mallory@example.com";

/// The fixture as API Gateway delivers it for `principal` (None: no
/// `authorizer.iam`, as an open route would deliver it) with `body`.
fn event(principal: Option<&str>, body: &Value) -> Value {
    let mut e: Value = serde_json::from_str(FIXTURE).unwrap();
    match principal {
        Some(p) => e["requestContext"]["authorizer"]["iam"]["userArn"] = json!(p),
        None => {
            e["requestContext"]
                .as_object_mut()
                .unwrap()
                .remove("authorizer");
        }
    }
    let text = body.to_string();
    e["headers"]["content-length"] = json!(text.len().to_string());
    e["body"] = json!(text);
    e
}

fn plan_listing_oncall() -> Plan {
    handover_testkit::world::listing_oncall(example_plan())
}

type Waiting = handover_testkit::world::WaitingApproval;

async fn waiting(w: &World, plan: &Plan, data_loss: bool, expires_in: i64) -> Waiting {
    handover_testkit::world::waiting_approval(&w.aws, &w.deps.store, plan, data_loss, expires_in)
        .await
}

async fn send(w: &World, e: Value) -> (u16, DecisionReply, String) {
    let resp = w.send(e).await;
    let body = text(&resp);
    let reply: DecisionReply = serde_json::from_str(&body).expect("a decision reply");
    (resp.status_code as u16, reply, body)
}

async fn pending(w: &World, key: &str) -> bool {
    w.deps
        .store
        .approval(&ApprovalSelector::Key(key.into()))
        .await
        .unwrap()
        .expect("the key")
        .decided
        .is_none()
}

#[tokio::test]
async fn a_cli_decision_resumes_the_run_as_the_principal_api_gateway_authenticated() {
    let w = world().await;
    let run = waiting(&w, &plan_listing_oncall(), false, 600).await;
    let e = event(
        Some(ALICE),
        &json!({"execution": run.execution, "decision": "approve"}),
    );
    let (status, reply, body) = send(&w, e).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(reply.outcome, ReplyKind::Decided, "{body}");
    assert_eq!(reply.caller.as_deref(), Some(ALICE));
    assert_eq!(reply.approver.as_deref(), Some("On-call (CLI)"));
    assert!(reply.text.contains(ALICE), "{}", reply.text);
    assert_eq!(w.successes(), 1);
    let (status, output, ..) = w.finished(&run.execution).await;
    assert_eq!(status.as_str(), "SUCCEEDED");
    assert_eq!(output["approval"]["approver_id"], ALICE);
    assert_eq!(output["approval"]["approver_name"], "On-call (CLI)");
    // The answer never carries the task token (the real binary's logs are
    // checked in the path test that decides through the CLI).
    assert!(!body.contains(&run.token), "{body}");
}

#[tokio::test]
async fn without_an_authenticated_principal_nothing_happens() {
    let w = world().await;
    let run = waiting(&w, &plan_listing_oncall(), false, 600).await;
    // The route left open by mistake: API Gateway sends no authorizer.iam.
    // A principal named in the body is not a principal.
    let (status, reply, body) = send(
        &w,
        event(None, &json!({"key": run.key, "decision": "approve"})),
    )
    .await;
    assert_eq!(status, 401, "{body}");
    assert_eq!(reply.outcome, ReplyKind::Unauthenticated);
    let forged = event(
        Some(ALICE),
        &json!({"key": run.key, "decision": "approve", "approver_id": MALLORY}),
    );
    let (status, reply, _) = send(&w, forged).await;
    assert_eq!(status, 400, "{}", reply.text);
    assert!(pending(&w, &run.key).await, "the key is untouched");
    assert_eq!(w.successes() + w.failures(), 0);
    assert!(reply.approval.is_none());
}

#[tokio::test]
async fn a_principal_off_the_runs_plan_is_refused_and_shown_nothing() {
    let w = world().await;
    let run = waiting(&w, &plan_listing_oncall(), false, 600).await;
    for body in [
        json!({"key": run.key, "decision": "approve"}),
        json!({"key": run.key}),
    ] {
        let (status, reply, text) = send(&w, event(Some(MALLORY), &body)).await;
        assert_eq!(status, 403, "{text}");
        assert_eq!(reply.outcome, ReplyKind::Forbidden);
        assert!(reply.text.contains("stack's plan"), "{}", reply.text);
        assert!(
            !reply.text.contains(ONCALL_ROLE) && !reply.text.contains(&run.incident),
            "a stranger learns nothing: {}",
            reply.text
        );
        assert!(reply.approval.is_none(), "no question for a stranger");
    }
    // The deployed plan is not the judge: a run whose own plan lists nobody
    // refuses even the on-call role.
    let mut nobody = example_plan();
    nobody.cli_approvers.clear();
    let bare = waiting(&w, &nobody, false, 600).await;
    let (status, reply, _) = send(
        &w,
        event(
            Some(ALICE),
            &json!({"key": bare.key, "decision": "approve"}),
        ),
    )
    .await;
    assert_eq!(status, 403);
    assert!(reply.text.contains("the list is empty"), "{}", reply.text);
    // Nor can a run's plan widen the list: the stack's plan (the
    // function's) must list the caller too.
    let mut widened = plan_listing_oncall();
    widened.cli_approvers.push(CliApprover {
        arn: "arn:aws:iam::123456789012:role/developer".into(),
        name: "Developer".into(),
    });
    let deployed = w
        .deps
        .plan
        .current(&handover::clock::SystemClock)
        .await
        .unwrap();
    assert!(deployed.cli_approver(MALLORY).is_none());
    let forged = waiting(&w, &widened, false, 600).await;
    let (status, reply, _) = send(
        &w,
        event(
            Some(MALLORY),
            &json!({"key": forged.key, "decision": "approve"}),
        ),
    )
    .await;
    assert_eq!(status, 403, "{}", reply.text);
    assert!(reply.text.contains("stack's plan"), "{}", reply.text);
    assert!(reply.approval.is_none());
    for key in [&run.key, &bare.key, &forged.key] {
        assert!(pending(&w, key).await);
    }
    assert_eq!(w.successes() + w.failures(), 0);
}

#[tokio::test]
async fn the_question_changes_nothing_and_never_carries_the_token() {
    let w = world().await;
    let run = waiting(&w, &plan_listing_oncall(), true, 600).await;
    let (status, reply, body) =
        send(&w, event(Some(ALICE), &json!({"incident": run.incident}))).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(reply.outcome, ReplyKind::Question);
    let a = reply.approval.expect("the question");
    assert_eq!(a.key, run.key);
    assert!(a.data_loss);
    assert!(a.question.contains(&run.incident), "{}", a.question);
    assert!(!body.contains(&run.token), "{body}");
    assert!(pending(&w, &run.key).await);
    assert_eq!(w.successes() + w.failures(), 0);
}

#[tokio::test]
async fn a_possible_data_loss_is_approved_only_with_its_acknowledgement() {
    let w = world().await;
    let lossy = waiting(&w, &plan_listing_oncall(), true, 600).await;
    let plain = waiting(&w, &plan_listing_oncall(), false, 600).await;
    let (status, reply, _) = send(
        &w,
        event(
            Some(ALICE),
            &json!({"key": lossy.key, "decision": "approve"}),
        ),
    )
    .await;
    assert_eq!(status, 400);
    assert!(reply.text.contains("data loss"), "{}", reply.text);
    let (status, reply, _) = send(
        &w,
        event(
            Some(ALICE),
            &json!({"key": plain.key, "decision": "approve", "accept_data_loss": true}),
        ),
    )
    .await;
    assert_eq!(
        status, 400,
        "an acknowledgement of a loss nobody asked about"
    );
    assert!(
        reply.text.contains("accepts no data loss"),
        "{}",
        reply.text
    );
    assert!(pending(&w, &lossy.key).await && pending(&w, &plain.key).await);
    let (status, reply, _) = send(
        &w,
        event(
            Some(ALICE),
            &json!({"key": lossy.key, "decision": "approve", "accept_data_loss": true}),
        ),
    )
    .await;
    assert_eq!(status, 200, "{}", reply.text);
    let (_, output, ..) = w.finished(&lossy.execution).await;
    assert_eq!(output["approval"]["data_loss_acknowledged"], true);
}

#[tokio::test]
async fn a_second_decision_an_expired_key_and_an_ended_run_are_refused() {
    let w = world().await;
    let run = waiting(&w, &plan_listing_oncall(), false, 600).await;
    let (status, ..) = send(
        &w,
        event(Some(ALICE), &json!({"key": run.key, "decision": "reject"})),
    )
    .await;
    assert_eq!(status, 200);
    let (status, output, error, _) = w.finished(&run.execution).await;
    assert_eq!(status.as_str(), "FAILED", "{output}");
    assert_eq!(error.as_deref(), Some("Handover.Rejected"));
    // Bob, another session of the same role, after the run ended.
    let (status, reply, _) = send(
        &w,
        event(Some(BOB), &json!({"key": run.key, "decision": "approve"})),
    )
    .await;
    assert_eq!(status, 409, "{}", reply.text);
    assert_eq!(reply.outcome, ReplyKind::AlreadyDecided);
    assert!(
        reply.text.contains("already decided (reject)")
            && reply.text.contains("it has ended: FAILED"),
        "{}",
        reply.text
    );
    // Alice again, her answer lost: the run has her reject, and ended.
    let (status, reply, _) = send(
        &w,
        event(Some(ALICE), &json!({"key": run.key, "decision": "reject"})),
    )
    .await;
    assert_eq!(status, 200, "{}", reply.text);
    assert_eq!(reply.outcome, ReplyKind::AlreadyDelivered);
    assert!(reply.text.contains("(you)"), "{}", reply.text);
    // The question still shows, with the decision, for the CLI to act on.
    let (status, reply, _) = send(&w, event(Some(ALICE), &json!({"key": run.key}))).await;
    assert_eq!(status, 200);
    assert_eq!(reply.outcome, ReplyKind::Question);
    assert!(reply.approval.unwrap().decided.is_some());
    let expired = waiting(&w, &plan_listing_oncall(), false, -1).await;
    let (status, reply, _) = send(
        &w,
        event(
            Some(ALICE),
            &json!({"key": expired.key, "decision": "approve"}),
        ),
    )
    .await;
    assert_eq!(status, 409);
    assert!(reply.text.contains("expired"), "{}", reply.text);
    let (status, reply, _) = send(
        &w,
        event(
            Some(ALICE),
            &json!({"key": "q2T8f3K9aZ0wXy1VbN4mLg", "decision": "approve"}),
        ),
    )
    .await;
    assert_eq!(status, 404);
    assert_eq!(reply.outcome, ReplyKind::Unknown);
    assert_eq!(w.successes() + w.failures(), 1);
}

#[tokio::test]
async fn a_decision_already_made_is_not_made_again() {
    let w = world().await;
    let run = waiting(&w, &plan_listing_oncall(), false, 600).await;
    let first = send(
        &w,
        event(Some(ALICE), &json!({"key": run.key, "decision": "approve"})),
    )
    .await;
    assert_eq!(first.0, 200, "{}", first.2);
    // The run goes on past its approval; the second click must not count.
    let second = send(
        &w,
        event(Some(BOB), &json!({"key": run.key, "decision": "reject"})),
    )
    .await;
    assert!(
        matches!(
            second.1.outcome,
            ReplyKind::AlreadyDecided | ReplyKind::Closed
        ),
        "{}",
        second.2
    );
    assert_eq!(w.successes(), 1);
    assert_eq!(w.failures(), 0);
}

#[tokio::test]
async fn a_request_on_the_slack_route_never_takes_the_iam_path() {
    let w = world().await;
    let run = waiting(&w, &plan_listing_oncall(), false, 600).await;
    let mut e = event(Some(ALICE), &json!({"key": run.key, "decision": "approve"}));
    e["routeKey"] = json!("POST /slack/interactions");
    e["rawPath"] = json!("/slack/interactions");
    e["requestContext"]["routeKey"] = json!("POST /slack/interactions");
    e["requestContext"]["http"]["path"] = json!("/slack/interactions");
    let resp = w.send(e).await;
    assert_eq!(
        resp.status_code, 401,
        "Slack's route wants Slack's signature"
    );
    assert!(pending(&w, &run.key).await);
    assert_eq!(w.successes() + w.failures(), 0);
}

#[tokio::test]
async fn the_slack_message_that_asked_is_updated_with_the_cli_decision() {
    use handover::slack::message::{BLOCK_ACTIONS, BLOCK_CLI};
    use handover::slack::secrets::Secret;
    use handover::store::approval::PostedQuestion;
    let mut w = world().await;
    // The stack's bot token, as the deployed plan names it.
    let token = "xoxb-decision-test-token";
    let arn = w
        .aws
        .secrets(handover_testkit::TEST_REGION)
        .await
        .create_secret()
        .name(unique("slack-bot"))
        .secret_string(token)
        .send()
        .await
        .unwrap()
        .arn
        .unwrap();
    w.deps.plan.plan_mut().slack.bot_token_secret_arn = arn;
    let run = waiting(&w, &plan_listing_oncall(), false, 600).await;
    // The question as the approval function posted it, and recorded.
    let asked = vec![
        json!({"type": "section", "text": {"type": "mrkdwn", "text": "FAILOVER approval"}}),
        json!({"type": "actions", "block_id": BLOCK_ACTIONS, "elements": []}),
        json!({"type": "context", "block_id": BLOCK_CLI, "elements": []}),
    ];
    let posted = w
        .deps
        .slack
        .post_message(
            &Secret::new(token),
            "C0123456789",
            "FAILOVER approval",
            &asked,
        )
        .await
        .unwrap();
    w.deps
        .store
        .set_approval_message(
            &run.key,
            &PostedQuestion {
                channel: posted.channel.clone(),
                ts: posted.ts.clone(),
                blocks: serde_json::to_string(&asked).unwrap(),
            },
        )
        .await
        .unwrap();
    let (status, _, body) = send(
        &w,
        event(Some(ALICE), &json!({"key": run.key, "decision": "approve"})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let updates: Vec<_> = w
        .slack
        .calls()
        .into_iter()
        .filter(|c| c.path == "/api/chat.update")
        .collect();
    assert_eq!(updates.len(), 1, "one chat.update");
    let u = &updates[0];
    assert_eq!(u.status, 200);
    assert_eq!(
        u.authorization.as_deref(),
        Some(format!("Bearer {token}").as_str())
    );
    assert_eq!(u.body["channel"], posted.channel);
    assert_eq!(u.body["ts"], posted.ts);
    let blocks = u.body["blocks"].to_string();
    assert!(
        blocks.contains("FAILOVER approval"),
        "the question stays: {blocks}"
    );
    assert!(
        !blocks.contains(BLOCK_ACTIONS) && !blocks.contains(BLOCK_CLI),
        "the buttons and the CLI hint go: {blocks}"
    );
    assert!(
        blocks.contains(ALICE) && blocks.contains("with the handover CLI"),
        "{blocks}"
    );
    assert!(!blocks.contains(&run.token));
}

#[tokio::test]
async fn the_same_decision_already_delivered_is_done_and_says_whose_it_was() {
    let w = world().await;
    // A run that waits past its approval, so the second request finds it
    // running: the first decision reached it, a second changes nothing.
    let run = waiting(&w, &plan_listing_oncall(), false, 600).await;
    w.deps
        .store
        .consume_approval(
            &run.key,
            handover::store::approval::Decision::Approve,
            ALICE,
            Utc::now(),
        )
        .await
        .unwrap();
    w.deps
        .store
        .mark_approval_delivered(&run.key, ALICE, ALICE, Utc::now())
        .await
        .unwrap();
    // Alice again (her first answer was lost), then Bob wanting the same.
    for (who, says) in [(ALICE, "(you)"), (BOB, ALICE)] {
        let (status, reply, body) = send(
            &w,
            event(Some(who), &json!({"key": run.key, "decision": "approve"})),
        )
        .await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(reply.outcome, ReplyKind::AlreadyDelivered, "{body}");
        assert!(
            reply.text.contains("already decided the same way"),
            "{}",
            reply.text
        );
        assert!(reply.text.contains(says), "{}", reply.text);
    }
    // The other decision is refused.
    let (status, reply, _) = send(
        &w,
        event(Some(BOB), &json!({"key": run.key, "decision": "reject"})),
    )
    .await;
    assert_eq!(status, 409);
    assert_eq!(reply.outcome, ReplyKind::AlreadyDecided);
    assert_eq!(w.successes() + w.failures(), 0, "nothing was sent again");
}

#[tokio::test]
async fn a_clicked_decision_stranded_by_a_lost_answer_is_delivered_from_the_cli() {
    let w = world().await;
    let run = waiting(&w, &plan_listing_oncall(), false, 600).await;
    // U0ONCALL01 clicked approve; Step Functions' answer was lost, and
    // now Slack is down: the same decision, sent by the on-call role,
    // reaches the run credited to the one who clicked.
    w.deps
        .store
        .consume_approval(
            &run.key,
            handover::store::approval::Decision::Approve,
            "U0ONCALL01",
            Utc::now(),
        )
        .await
        .unwrap();
    let (status, reply, body) = send(
        &w,
        event(Some(ALICE), &json!({"key": run.key, "decision": "approve"})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(reply.outcome, ReplyKind::Decided, "{body}");
    assert!(
        reply.text.contains("Re-sent U0ONCALL01's approve"),
        "{}",
        reply.text
    );
    let (status, output, ..) = w.finished(&run.execution).await;
    assert_eq!(status.as_str(), "SUCCEEDED");
    assert_eq!(output["approval"]["approver_id"], "U0ONCALL01");
    // A different decision does not ride on it.
    let other = waiting(&w, &plan_listing_oncall(), false, 600).await;
    w.deps
        .store
        .consume_approval(
            &other.key,
            handover::store::approval::Decision::Approve,
            "U0ONCALL01",
            Utc::now(),
        )
        .await
        .unwrap();
    let (status, reply, _) = send(
        &w,
        event(
            Some(ALICE),
            &json!({"key": other.key, "decision": "reject"}),
        ),
    )
    .await;
    assert_eq!(status, 409, "{}", reply.text);
    assert_eq!(w.failures(), 0);
}

#[tokio::test]
async fn the_cli_decides_when_the_slack_signing_secret_cannot_be_read() {
    use handover::slack::message::ACTION_APPROVE;
    let mut w = world().await;
    // The secret could not be read at cold start and still cannot.
    w.deps.signing_secret = tokio::sync::OnceCell::new();
    w.deps.plan.plan_mut().slack.signing_secret_arn =
        "arn:aws:secretsmanager:ap-northeast-1:123456789012:secret:handover/deleted-AbCdEf".into();
    let run = waiting(&w, &plan_listing_oncall(), false, 600).await;
    let click = w.click("U0ONCALL01", "T0TEAM0001", ACTION_APPROVE, &run.key);
    // A function error (API Gateway answers Slack 500; the Errors alarm fires).
    let err = slack::handler::handler(click, &w.deps).await.unwrap_err();
    assert!(err.to_string().contains("handover approve"), "{err}");
    assert!(pending(&w, &run.key).await, "the click changed nothing");
    let (status, reply, body) = send(
        &w,
        event(Some(ALICE), &json!({"key": run.key, "decision": "approve"})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(reply.outcome, ReplyKind::Decided);
}
