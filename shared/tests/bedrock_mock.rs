//! The Converse request, exactly (moto has no Converse, so these use
//! aws-smithy-mocks): model, system prompt, one user message, bounded and
//! deterministic inference settings; and errors that become "unavailable".

use aws_sdk_bedrockruntime::Client;
use aws_sdk_bedrockruntime::operation::converse::{ConverseError, ConverseOutput};
use aws_sdk_bedrockruntime::types::error::ThrottlingException;
use aws_sdk_bedrockruntime::types::{
    ContentBlock, ConversationRole, ConverseOutput as Out, Message, StopReason, SystemContentBlock,
    TokenUsage,
};
use aws_smithy_mocks::{RuleMode, mock, mock_client};
use handover::adapters::{Ask, Bedrock, TextModel};
use handover::diagnose::explain::{MAX_TOKENS, SYSTEM, explain};
use handover::execution::ExplanationOutcome;
use handover::plan::{Explain, Plan};
use std::time::Duration;

const MODEL: &str = "anthropic.claude-3-haiku-20240307-v1:0";

fn answer(blocks: &[&str]) -> ConverseOutput {
    let msg = Message::builder()
        .role(ConversationRole::Assistant)
        .set_content(Some(
            blocks
                .iter()
                .map(|b| ContentBlock::Text((*b).to_owned()))
                .collect(),
        ));
    ConverseOutput::builder()
        .output(Out::Message(msg.build().unwrap()))
        .stop_reason(StopReason::EndTurn)
        .usage(
            TokenUsage::builder()
                .input_tokens(900)
                .output_tokens(60)
                .total_tokens(960)
                .build()
                .unwrap(),
        )
        .build()
        .unwrap()
}

/// Bedrock answering from one mocked rule.
fn bedrock(rule: &aws_smithy_mocks::Rule) -> Bedrock {
    Bedrock::from_client(
        mock_client!(aws_sdk_bedrockruntime, RuleMode::MatchAny, [rule]),
        "ap-northeast-1",
    )
}

fn cfg() -> Explain {
    Explain {
        model_id: MODEL.into(),
        region: None,
        timeout_ms: 5_000,
    }
}

fn plan() -> Plan {
    Plan::from_json(include_str!("../../infra/plan.example.jsonc")).unwrap()
}

/// The diagnosis inside the approval task's real event.
fn diagnosis() -> handover::execution::Diagnosis {
    let event: serde_json::Value =
        serde_json::from_str(include_str!("../../functions/approval/events/request.json")).unwrap();
    serde_json::from_value(event["state"]["diagnosis"].clone()).expect("a diagnosis")
}

#[tokio::test]
async fn the_request_is_exactly_one_bounded_deterministic_question() {
    let plan = plan();
    let d = diagnosis();
    let user = handover::diagnose::explain::prompt(&plan, &d);
    let expected_user = user.clone();
    let converse = mock!(Client::converse)
        .match_requests(move |r| {
            let system_ok = matches!(r.system(), [SystemContentBlock::Text(t)] if t == SYSTEM);
            let msg_ok = matches!(r.messages(), [m] if *m.role() == ConversationRole::User
                && matches!(m.content(), [ContentBlock::Text(t)] if *t == expected_user));
            let cfg = r.inference_config();
            r.model_id() == Some(MODEL)
                && system_ok
                && msg_ok
                && cfg.and_then(|c| c.max_tokens()) == Some(MAX_TOKENS)
                && cfg.and_then(|c| c.temperature()) == Some(0.0)
        })
        .then_output(|| answer(&["P is down region-wide.", "The replica is current."]));
    let bedrock = bedrock(&converse);
    let x = explain(&plan, &cfg(), &d, &bedrock).await;
    assert_eq!(converse.num_calls(), 1);
    assert_eq!(
        x.text(),
        Some("P is down region-wide.\nThe replica is current."),
        "{x:?}"
    );
}

#[tokio::test]
async fn a_throttle_is_one_call_and_an_unavailable_explanation() {
    let throttled = mock!(Client::converse).then_error(|| {
        ConverseError::ThrottlingException(
            ThrottlingException::builder()
                .message("Too many requests")
                .build(),
        )
    });
    let bedrock = bedrock(&throttled);
    let x = explain(&plan(), &cfg(), &diagnosis(), &bedrock).await;
    assert_eq!(throttled.num_calls(), 1, "one Converse call");
    match &x.outcome {
        ExplanationOutcome::Unavailable(why) => {
            assert!(why.contains("bedrock:Converse"), "{why}");
            assert!(why.contains("ThrottlingException"), "{why}");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn an_answer_without_text_is_a_shape_error() {
    let empty = mock!(Client::converse).then_output(|| answer(&[]));
    let bedrock = bedrock(&empty);
    let err = bedrock
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
