//! The whole approval loop against moto's Step Functions interpreter.
//!
//! A state machine's `lambda:invoke.waitForTaskToken` task (shaped like
//! `RequestApproval` in statemachine.asl.json) invokes "approval"; moto calls
//! Lambda through the Handover router, which forwards to a loopback Lambda
//! endpoint in this test running the approval code. The question lands in a
//! Slack stand-in; two signed clicks race; exactly one SendTaskSuccess
//! reaches Step Functions, and the run ends with the approver's identity.
//!
//! The router's Lambda upstream is fixed when it starts, so this test starts
//! its own emulator (harness/py/handover_emulator.py) pointed at its endpoint.
//! It is the only test in this binary: it sets the process's AWS endpoint.

use aws_sdk_sfn::types::{ExecutionStatus, HistoryEventType};
use chrono::Utc;
use handover::approval::decide::DEFAULT_BUDGET;
use handover::approval::{ApprovalTask, Decider, Outcome, Requester, SfnCallback, SignedRequest};
use handover::aws::Aws;
use handover::clock::SystemClock;
use handover::error::parse_event;
use handover::plan::Plan;
use handover::slack::api::{RetryPolicy, SlackApi};
use handover::slack::message::{ACTION_APPROVE, ACTION_REJECT, CliHint};
use handover::slack::secrets::{Secret, SecretsManager};
use handover::slack::stand_in::{
    self, Fault, HttpResponse, SlackStandIn, click_body, signed_headers,
};
use handover::store::{Store, create_table};
use serde_json::{Value, json};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

const REGION: &str = "ap-northeast-1";
const SIGNING_SECRET: &str = "round-trip-signing-secret";
const BOT_TOKEN: &str = "xoxb-round-trip-bot-token";
mod support;

use support::start_emulator;

const REQUEST: &str = include_str!("../../functions/approval/events/request.json");

/// What the loopback "approval" Lambda needs.
struct Approval {
    store: Store,
    secrets: SecretsManager,
    slack: SlackApi,
    cli: CliHint,
    operators: handover::adapters::Sns,
}

async fn invoke(ctx: &OnceLock<Approval>, body: &[u8]) -> HttpResponse {
    let Some(a) = ctx.get() else {
        return HttpResponse::json(
            500,
            json!({"errorType": "Handover.Fatal", "errorMessage": "not ready"}),
        );
    };
    let result = async {
        let event: Value = serde_json::from_slice(body)
            .map_err(|e| handover::error::FunctionError::invalid_input(e.to_string()))?;
        let task: ApprovalTask = parse_event("approval task payload", event)?;
        let requester = Requester {
            store: &a.store,
            secrets: &a.secrets,
            slack: &a.slack,
            clock: &SystemClock,
            cli: &a.cli,
            operators: &a.operators,
        };
        Ok::<_, handover::error::FunctionError>(requester.request(&task).await?)
    }
    .await;
    match result {
        Ok(out) => HttpResponse::json(200, serde_json::to_value(out).unwrap()),
        // What cargo lambda answers for a handler error; the router turns it
        // into 200 + X-Amz-Function-Error as real Lambda does.
        Err(e) => HttpResponse::json(
            500,
            json!({"errorType": e.name.as_str(), "errorMessage": e.message}),
        ),
    }
}

fn definition() -> String {
    let asl: Value = serde_json::from_str(include_str!("../../statemachine.asl.json")).unwrap();
    let mut ask = asl["States"]["RequestApproval"].clone();
    ask["Parameters"]["FunctionName"] =
        json!("arn:aws:lambda:ap-northeast-1:123456789012:function:approval");
    ask["Next"] = json!("Approved");
    ask["Catch"] = json!([
        {"ErrorEquals": ["Handover.Rejected"], "ResultPath": "$.error", "Next": "Rejected"},
        {"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "Escalated"}
    ]);
    json!({"StartAt": "RequestApproval", "States": {
        "RequestApproval": ask,
        "Approved": {"Type": "Pass", "End": true},
        "Rejected": {"Type": "Fail", "Error": "Handover.Rejected", "Cause": "rejected"},
        "Escalated": {"Type": "Pass", "End": true}
    }})
    .to_string()
}

struct Run<'a> {
    aws: &'a Aws,
    machine: &'a str,
}

impl Run<'_> {
    async fn start(&self, input: &Value) -> String {
        let sfn = self.aws.sfn(REGION).await;
        sfn.start_execution()
            .state_machine_arn(self.machine)
            .name(handover_testkit::unique("rt"))
            .input(input.to_string())
            .send()
            .await
            .unwrap()
            .execution_arn
    }

    async fn finished(&self, execution: &str) -> (ExecutionStatus, Value, Option<String>) {
        let d =
            handover_testkit::ended_execution(self.aws, REGION, execution, Duration::from_secs(30))
                .await;
        let out = d
            .output()
            .map_or(Value::Null, |o| serde_json::from_str(o).unwrap());
        (d.status().clone(), out, d.error().map(str::to_owned))
    }

    /// The task token moto put in the Lambda payload (from TaskScheduled).
    async fn token(&self, execution: &str) -> String {
        let sfn = self.aws.sfn(REGION).await;
        let h = sfn
            .get_execution_history()
            .execution_arn(execution)
            .send()
            .await
            .unwrap();
        let e = h
            .events()
            .iter()
            .find(|e| e.r#type() == &HistoryEventType::TaskScheduled)
            .unwrap();
        let params: Value =
            serde_json::from_str(e.task_scheduled_event_details().unwrap().parameters()).unwrap();
        let payload = &params["Payload"];
        let payload: Value = payload
            .as_str()
            .map_or(payload.clone(), |s| serde_json::from_str(s).unwrap());
        payload["token"].as_str().unwrap().to_owned()
    }
}

async fn question(slack: &SlackStandIn, n: usize) -> String {
    for _ in 0..200 {
        if let Some(m) = slack.messages().get(n) {
            let actions = m.body["blocks"]
                .as_array()
                .unwrap()
                .iter()
                .find(|b| b["type"] == "actions")
                .unwrap()
                .clone();
            return actions["elements"][0]["value"].as_str().unwrap().to_owned();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no approval message {n} in Slack");
}

fn click(
    user: &str,
    action: &str,
    key: &str,
    slack: &SlackStandIn,
    store: &mut Vec<(String, String, String)>,
) -> usize {
    let body = click_body(user, "T0TEAM0001", action, key, &slack.response_url(user));
    let (ts, sig) = signed_headers(
        SIGNING_SECRET.as_bytes(),
        Utc::now().timestamp(),
        body.as_bytes(),
    );
    store.push((body, ts, sig));
    store.len() - 1
}

fn signed(c: &(String, String, String)) -> SignedRequest<'_> {
    SignedRequest {
        timestamp: Some(&c.1),
        signature: Some(&c.2),
        content_type: Some("application/x-www-form-urlencoded"),
        body: c.0.as_bytes(),
    }
}

#[tokio::test]
async fn a_wait_for_task_token_run_resumes_on_the_signed_click_with_the_approvers_identity() {
    let ctx: Arc<OnceLock<Approval>> = Arc::default();
    let shared = ctx.clone();
    let lambda = stand_in::serve(move |req| {
        let ctx = shared.clone();
        async move { invoke(&ctx, &req.body).await }
    })
    .await
    .unwrap();
    let emulator = start_emulator(&lambda.url).await;
    // SAFETY: the only test in this binary; set before any client is built.
    unsafe {
        std::env::set_var("HANDOVER_TEST_AWS_ENDPOINT", &emulator.endpoint);
        std::env::set_var("AWS_ENDPOINT_URL", &emulator.endpoint);
    }
    let aws = Arc::new(handover_testkit::aws());
    let slack = SlackStandIn::start().await.unwrap();
    let table = handover_testkit::unique("handover-rt");
    create_table(&aws.dynamodb(REGION).await, &table)
        .await
        .unwrap();
    let store = Store::new(aws.dynamodb(REGION).await, table.clone());
    let bot_secret = aws
        .secrets(REGION)
        .await
        .create_secret()
        .name("rt-bot")
        .secret_string(BOT_TOKEN)
        .send()
        .await
        .unwrap()
        .arn
        .unwrap();
    let fast = RetryPolicy {
        attempts: 2,
        first_backoff: Duration::from_millis(10),
        max_backoff: Duration::from_millis(20),
        attempt_timeout: Duration::from_secs(2),
    };
    let operators =
        handover::adapters::Sns::new(&aws, &handover_testkit::operator_topic(&aws, REGION).await)
            .await;
    let ok = ctx.set(Approval {
        operators,
        store: store.clone(),
        secrets: SecretsManager::new(aws.clone(), REGION),
        slack: SlackApi::new(slack.api_base(), fast).unwrap(),
        cli: CliHint {
            table,
            region: REGION.into(),
            decision_url: format!("{}/decisions", handover_testkit::endpoint()),
        },
    });
    assert!(ok.is_ok());
    let machine = aws
        .sfn(REGION)
        .await
        .create_state_machine()
        .name("rt-approval")
        .definition(definition())
        .role_arn("arn:aws:iam::123456789012:role/handover-states")
        .send()
        .await
        .unwrap()
        .state_machine_arn;
    let run = Run {
        aws: &aws,
        machine: &machine,
    };
    let mut input = serde_json::from_str::<Value>(REQUEST).unwrap()["state"].clone();
    input["plan"]["slack"]["bot_token_secret_arn"] = json!(bot_secret);
    input["plan"]["timings"]["approval_timeout_s"] = json!(120);
    let plan = Plan::from_value(input["plan"].clone()).unwrap();
    let callback = SfnCallback::new(aws.clone(), REGION);
    let signing_secret = Secret::new(SIGNING_SECRET);
    let decider = Decider {
        plan: &plan,
        store: &store,
        callback: &callback,
        slack: &SlackApi::new(slack.api_base(), fast).unwrap(),
        signing_secret: &signing_secret,
        clock: &SystemClock,
        budget: DEFAULT_BUDGET,
    };
    let mut clicks = Vec::new();

    let (outcomes, logs) = handover_testkit::logs::capture(async {
        // 1. Approve, with two people clicking at once.
        let approved = run.start(&input).await;
        let key = question(&slack, 0).await;
        let (a, b) = (
            click("U0ONCALL01", ACTION_APPROVE, &key, &slack, &mut clicks),
            click("U0ONCALL02", ACTION_APPROVE, &key, &slack, &mut clicks),
        );
        let (oa, ob) = tokio::join!(
            decider.handle(signed(&clicks[a])),
            decider.handle(signed(&clicks[b]))
        );
        // 2. Reject.
        let rejected = run.start(&input).await;
        let key = question(&slack, 1).await;
        let r = click("U0ONCALL02", ACTION_REJECT, &key, &slack, &mut clicks);
        let or = decider.handle(signed(&clicks[r])).await;
        // 3. Slack down and SNS failing too (the router's fault): nobody can
        //    be asked, so the approval task fails with a stable name and the
        //    run escalates rather than waits.
        slack.fail_next([Fault::Status(500), Fault::Status(503)]);
        handover_testkit::control(
            "faults",
            json!({ format!("sns:{REGION}"): {"mode": "error"} }),
        )
        .await;
        let escalated = run.start(&input).await;
        let _ = run.finished(&escalated).await;
        handover_testkit::control("faults", json!({ format!("sns:{REGION}"): null })).await;
        (approved, rejected, escalated, [oa, ob, or])
    })
    .await;
    let (approved, rejected, escalated, [oa, ob, or]) = outcomes;

    let decided = [&oa, &ob]
        .iter()
        .filter(|o| matches!(o, Outcome::Decided(_)))
        .count();
    let already = [&oa, &ob]
        .iter()
        .filter(|o| matches!(o, Outcome::AlreadyDecided { .. }))
        .count();
    assert_eq!((decided, already), (1, 1), "{oa:?} {ob:?}");
    let (status, output, _) = run.finished(&approved).await;
    assert_eq!(status, ExecutionStatus::Succeeded);
    let who = output["approval"]["approver_id"].as_str().unwrap();
    let expected = if matches!(oa, Outcome::Decided(_)) {
        "U0ONCALL01"
    } else {
        "U0ONCALL02"
    };
    assert_eq!(who, expected);
    assert!(
        output["approval"]["approver_name"]
            .as_str()
            .unwrap()
            .ends_with("on-call")
    );
    assert_eq!(output["approval"]["decision"], "approve");

    assert!(matches!(or, Outcome::Decided(_)), "{or:?}");
    let (status, _, error) = run.finished(&rejected).await;
    assert_eq!(
        (status, error.as_deref()),
        (ExecutionStatus::Failed, Some("Handover.Rejected"))
    );

    let (status, output, _) = run.finished(&escalated).await;
    assert_eq!(status, ExecutionStatus::Succeeded, "caught and escalated");
    assert_eq!(output["error"]["Error"], "Handover.Fatal", "{output}");
    assert!(
        output["error"]["Cause"]
            .as_str()
            .unwrap()
            .contains("escalate"),
        "{output}"
    );

    let calls = handover_testkit::call_log().await;
    let count = |action: &str| calls.iter().filter(|c| c["action"] == action).count();
    assert_eq!(
        count("SendTaskSuccess"),
        1,
        "exactly one SendTaskSuccess on the wire"
    );
    assert_eq!(count("SendTaskFailure"), 1);
    assert_eq!(count("Invoke:approval"), 3);

    for execution in [&approved, &rejected] {
        let token = run.token(execution).await;
        let leak: Vec<&str> = logs
            .lines()
            .filter(|l| l.contains(&token) && !l.contains("\"target\":\"aws_smithy_runtime"))
            .collect();
        assert!(leak.is_empty(), "task token in logs: {leak:#?}");
        assert!(
            !slack
                .calls()
                .iter()
                .any(|c| c.body.to_string().contains(&token)),
            "token sent to Slack"
        );
    }
    assert!(!logs.contains(BOT_TOKEN) && !logs.contains(SIGNING_SECRET));
    drop(emulator);
}
