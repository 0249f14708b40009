//! The explanation is advisory: its outcome never changes the diagnosis.

use super::*;
use crate::adapters::AwsError;
use crate::diagnose::rules;
use crate::diagnose::tests::down;
use std::sync::Mutex;

fn plan() -> Plan {
    Plan::from_json(include_str!("../../../infra/plan.example.jsonc")).unwrap()
}

fn cfg() -> Explain {
    Explain {
        model_id: "anthropic.claude-3-haiku-20240307-v1:0".into(),
        region: None,
        timeout_ms: 2_000,
    }
}

/// Model id, system prompt, user message, max tokens, budget.
type Asked = (String, String, String, i32, Duration);

/// A model that answers from a script and remembers what it was asked.
struct Scripted {
    answer: Result<String, &'static str>,
    asked: Mutex<Vec<Asked>>,
}

impl Scripted {
    fn new(answer: Result<&str, &'static str>) -> Self {
        Self {
            answer: answer.map(str::to_owned),
            asked: Mutex::new(Vec::new()),
        }
    }
}

impl TextModel for Scripted {
    async fn converse(&self, ask: Ask<'_>, budget: Duration) -> Result<String, AwsError> {
        self.asked.lock().unwrap().push((
            ask.model_id.into(),
            ask.system.into(),
            ask.user.into(),
            ask.max_tokens,
            budget,
        ));
        self.answer.clone().map_err(|code| AwsError::Shape {
            service: "bedrock",
            op: "Converse",
            region: "ap-northeast-1".into(),
            problem: code.into(),
        })
    }
}

#[tokio::test]
async fn a_text_answer_is_kept_and_the_decision_fields_are_untouched() {
    let plan = plan();
    let d = rules::assess(&plan, &down(5.0));
    let model = Scripted::new(Ok("P looks down region-wide; the replica is current."));
    let x = explain(&plan, &cfg(), &d, &model).await;
    assert_eq!(
        x.text(),
        Some("P looks down region-wide; the replica is current.")
    );
    assert_eq!(x.model_id, cfg().model_id);
    let asked = model.asked.lock().unwrap();
    let (model_id, system, user, max_tokens, budget) = &asked[0];
    assert_eq!(model_id, &cfg().model_id);
    assert_eq!(system, SYSTEM);
    assert_eq!(user, &prompt(&plan, &d));
    assert_eq!(*max_tokens, MAX_TOKENS);
    assert_eq!(*budget, Duration::from_millis(2_000));
}

#[tokio::test]
async fn a_failed_call_is_unavailable_with_its_reason() {
    let plan = plan();
    let d = rules::assess(&plan, &down(5.0));
    let x = explain(
        &plan,
        &cfg(),
        &d,
        &Scripted::new(Err("ThrottlingException")),
    )
    .await;
    assert_eq!(x.text(), None);
    match &x.outcome {
        ExplanationOutcome::Unavailable(why) => {
            assert!(why.contains("ThrottlingException"), "{why}")
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn blank_or_control_only_text_is_unavailable() {
    let plan = plan();
    let d = rules::assess(&plan, &down(5.0));
    let x = explain(&plan, &cfg(), &d, &Scripted::new(Ok(" \n\u{1b}\r\n\t "))).await;
    assert!(
        matches!(x.outcome, ExplanationOutcome::Unavailable(ref w) if w.contains("no usable text")),
        "{x:?}"
    );
}

#[test]
fn the_prompt_is_deterministic_and_carries_the_rules_output() {
    let plan = plan();
    let d = rules::assess(&plan, &down(300.0));
    let p = prompt(&plan, &d);
    assert_eq!(p, prompt(&plan, &d));
    for needle in [
        "\"recommended_action\":\"fail_over\"",
        "\"risk\":\"high\"",
        "\"rpo_over_target\":true",
        "rds:ap-northeast-2:DescribeDBInstances:shop-db",
        "regional_outage",
        "ap-northeast-1",
    ] {
        assert!(p.contains(needle), "{needle} missing from {p}");
    }
    // A second explanation never feeds on a first one.
    let mut with = d.clone();
    with.explanation = Some(Explanation {
        model_id: "m".into(),
        outcome: ExplanationOutcome::Text("earlier words".into()),
        latency_ms: 1,
    });
    assert_eq!(prompt(&plan, &with), p);
}

#[test]
fn clean_drops_control_characters_and_bounds_the_length() {
    assert_eq!(
        clean("  a\u{1b}[31mb\r\n\n\n\nc\td  ").as_deref(),
        Some("a[31mb\n\nc d")
    );
    assert_eq!(clean("\u{7}\n\n"), None);
    let long = "é".repeat(MAX_CHARS * 2);
    let cut = clean(&long).unwrap();
    assert_eq!(cut.chars().count(), MAX_CHARS);
    assert!(cut.ends_with('…'));
    let exact = "x".repeat(MAX_CHARS);
    assert_eq!(clean(&exact).unwrap(), exact);
}

#[test]
fn the_explanation_round_trips_as_text_or_unavailable() {
    let x = Explanation {
        model_id: "m".into(),
        outcome: ExplanationOutcome::Unavailable("timed out".into()),
        latency_ms: 8000,
    };
    let v = serde_json::to_value(&x).unwrap();
    assert_eq!(
        v,
        serde_json::json!({"model_id": "m", "unavailable": "timed out", "latency_ms": 8000})
    );
    assert_eq!(serde_json::from_value::<Explanation>(v).unwrap(), x);
}
