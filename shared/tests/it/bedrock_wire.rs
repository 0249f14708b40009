//! The Converse request, exactly, on the wire (moto has no Converse): model,
//! system prompt, one user message, bounded and deterministic inference
//! settings; and the SDK's retries of a throttle, and errors that become
//! "unavailable". Answers are shaped as the Amazon Bedrock API Reference
//! gives them (Converse response syntax; errors with `x-amzn-ErrorType`).

use handover::adapters::{Ask, Bedrock, TextModel};
use handover::diagnose::explain::{MAX_TOKENS, SYSTEM, explain};
use handover::execution::ExplanationOutcome;
use handover::plan::{Explain, Plan};
use handover_testkit::wire::{Canned, Replay};
use serde_json::json;
use std::time::Duration;

const REGION: &str = "ap-northeast-1";
const MODEL: &str = "anthropic.claude-3-haiku-20240307-v1:0";

/// A Converse answer with these text blocks (Converse, "Response Syntax").
fn answer(blocks: &[&str]) -> Canned {
    let content: Vec<_> = blocks.iter().map(|b| json!({ "text": b })).collect();
    Canned::json(&json!({
        "output": { "message": { "role": "assistant", "content": content } },
        "stopReason": "end_turn",
        "usage": { "inputTokens": 900, "outputTokens": 60, "totalTokens": 960 },
        "metrics": { "latencyMs": 812 }
    }))
}

async fn bedrock(replay: &Replay) -> Bedrock {
    Bedrock::from_client(
        aws_sdk_bedrockruntime::Client::new(&replay.config(REGION).await),
        REGION,
    )
}

fn cfg() -> Explain {
    Explain {
        model_id: MODEL.into(),
        region: None,
        timeout_ms: 10_000,
    }
}

fn plan() -> Plan {
    Plan::from_json(include_str!("../../../infra/plan.example.jsonc")).unwrap()
}

/// The diagnosis inside the approval task's real event.
fn diagnosis() -> handover::execution::Diagnosis {
    let event: serde_json::Value = serde_json::from_str(include_str!(
        "../../../functions/approval/events/request.json"
    ))
    .unwrap();
    serde_json::from_value(event["state"]["diagnosis"].clone()).expect("a diagnosis")
}

#[tokio::test]
async fn the_request_is_exactly_one_bounded_deterministic_question() {
    let plan = plan();
    let d = diagnosis();
    let user = handover::diagnose::explain::prompt(&plan, &d);
    let replay = Replay::new().then(answer(&[
        "P is down region-wide.",
        "The replica is current.",
    ]));
    let x = explain(&plan, &cfg(), &d, &bedrock(&replay).await).await;
    assert_eq!(
        x.text(),
        Some("P is down region-wide.\nThe replica is current."),
        "{x:?}"
    );
    let sent = replay.sent();
    assert_eq!(sent.len(), 1, "one Converse call");
    assert_eq!(sent[0].method, "POST");
    assert!(
        sent[0]
            .uri
            .ends_with(&format!("/model/{}/converse", MODEL.replace(':', "%3A"))),
        "{}",
        sent[0].uri
    );
    assert_eq!(
        sent[0].json(),
        json!({
            "system": [{ "text": SYSTEM }],
            "messages": [{ "role": "user", "content": [{ "text": user }] }],
            "inferenceConfig": { "maxTokens": MAX_TOKENS, "temperature": 0.0 }
        }),
        "the whole body (the model is in the path): nothing else is asked"
    );
}

/// Bedrock throttles: the SDK's standard retry (the functions' config)
/// asks again after its backoff, and the second answer is the explanation.
#[tokio::test]
async fn a_throttle_is_retried_by_the_sdk_and_the_next_answer_is_used() {
    let replay = Replay::new()
        .then(Canned::json_error(
            429,
            "ThrottlingException",
            "Too many requests, please wait before trying again.",
        ))
        .then(answer(&["P is down."]));
    let x = explain(&plan(), &cfg(), &diagnosis(), &bedrock(&replay).await).await;
    assert_eq!(x.text(), Some("P is down."), "{x:?}");
    assert_eq!(replay.sent().len(), 2);
}

/// A refusal that no retry can change is one call and an unavailable
/// explanation that names the operation and the error.
#[tokio::test]
async fn a_refusal_is_one_call_and_an_unavailable_explanation() {
    let replay = Replay::new().then(Canned::json_error(
        403,
        "AccessDeniedException",
        "You don't have access to the model with the specified model ID.",
    ));
    let x = explain(&plan(), &cfg(), &diagnosis(), &bedrock(&replay).await).await;
    assert_eq!(replay.sent().len(), 1, "not retried");
    match &x.outcome {
        ExplanationOutcome::Unavailable(why) => {
            assert!(why.contains("bedrock:Converse"), "{why}");
            assert!(why.contains("AccessDeniedException"), "{why}");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn an_answer_without_text_is_a_shape_error() {
    let replay = Replay::new().then(answer(&[]));
    let err = bedrock(&replay)
        .await
        .converse(
            Ask {
                model_id: MODEL,
                system: "s",
                user: "u",
                max_tokens: 10,
            },
            Duration::from_secs(1),
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("no text in the answer"), "{err}");
}
