use super::*;
use crate::slack::fixtures;

const KEY: &str = "q2T8f3K9aZ0wXy1VbN4mLg";

fn cli() -> CliHint {
    CliHint {
        table: "handover-shop".into(),
        region: "ap-northeast-1".into(),
        decision_url: "https://a1b2c3d4e5.execute-api.ap-northeast-1.amazonaws.com/decisions"
            .into(),
    }
}

fn build(lag: Option<f64>, drill: bool) -> (String, Vec<Value>) {
    let mut state = fixtures::state(lag);
    state.input.drill = drill;
    let diagnosis = fixtures::diagnosis(lag);
    let requested_at = fixtures::t0() + chrono::Duration::seconds(200);
    approval(&ApprovalView {
        state: &state,
        diagnosis: &diagnosis,
        key: KEY,
        requested_at,
        expires_at: requested_at + chrono::Duration::minutes(15),
        cli: &cli(),
        readiness: None,
    })
}

fn block<'a>(blocks: &'a [Value], id: &str) -> &'a Value {
    blocks
        .iter()
        .find(|b| b["block_id"] == id)
        .unwrap_or_else(|| panic!("no block {id}"))
}

#[test]
fn the_request_shows_incident_mode_summary_risk_rpo_evidence_and_t0() {
    let (fallback, blocks) = build(Some(5.0), false);
    let text = serde_json::to_string(&blocks).unwrap();
    assert_eq!(blocks[0]["type"], "header");
    let header = blocks[0]["text"]["text"].as_str().unwrap();
    assert!(header.contains("FAILOVER"), "{header}");
    assert!(
        header.contains("shop-ap-northeast-2-20261130T141155Z"),
        "{header}"
    );
    assert!(
        text.contains("P (ap-northeast-2) does not answer"),
        "summary"
    );
    assert!(
        text.contains("*LOW* — replica healthy, lag within target"),
        "risk and rule"
    );
    assert!(text.contains("5 s (target 60 s)"), "RPO vs target");
    assert!(text.contains("timed out after 3000 ms"), "evidence");
    assert!(text.contains("<!date^1796047915^"), "T0 as a Slack date");
    assert!(text.contains("(3 min 20 s ago)"), "time since T0");
    assert!(fallback.contains("risk LOW"), "{fallback}");
    let (_, drill) = build(Some(5.0), true);
    assert!(drill[0]["text"]["text"].as_str().unwrap().contains("DRILL"));
}

#[test]
fn buttons_carry_the_key_and_the_plain_approve_has_no_confirm() {
    let (_, blocks) = build(Some(5.0), false);
    let actions = block(&blocks, BLOCK_ACTIONS)["elements"]
        .as_array()
        .unwrap();
    assert_eq!(actions.len(), 2);
    assert_eq!(actions[0]["action_id"], ACTION_APPROVE);
    assert_eq!(actions[0]["value"], KEY);
    assert!(actions[0].get("confirm").is_none());
    assert_eq!(actions[1]["action_id"], ACTION_REJECT);
    assert_eq!(actions[1]["value"], KEY);
}

#[test]
fn rpo_over_target_changes_the_approve_button_and_asks_to_confirm() {
    let (_, blocks) = build(Some(299.2), false);
    let approve = &block(&blocks, BLOCK_ACTIONS)["elements"][0];
    assert_eq!(approve["action_id"], ACTION_APPROVE_DATA_LOSS);
    assert_eq!(
        approve["text"]["text"],
        "Approve — accept up to 300 s data loss"
    );
    assert_eq!(approve["value"], KEY);
    let confirm = &approve["confirm"];
    assert_eq!(confirm["title"]["text"], "Accept data loss?");
    assert!(
        confirm["text"]["text"]
            .as_str()
            .unwrap()
            .contains("over the target of 60 s")
    );
    let (_, unknown) = build(None, false);
    let approve = &block(&unknown, BLOCK_ACTIONS)["elements"][0];
    assert_eq!(approve["action_id"], ACTION_APPROVE_DATA_LOSS);
    assert_eq!(
        approve["text"]["text"],
        "Approve — accept unknown data loss"
    );
}

#[test]
fn the_cli_hint_names_the_handover_commands_by_key_without_a_token() {
    let (_, blocks) = build(Some(5.0), false);
    let hint = serde_json::to_string(block(&blocks, BLOCK_CLI)).unwrap();
    assert!(
        hint.contains(
            "handover approve --key q2T8f3K9aZ0wXy1VbN4mLg --decision-url https://a1b2c3d4e5.execute-api.ap-northeast-1.amazonaws.com/decisions --region ap-northeast-1`"
        ),
        "{hint}"
    );
    assert!(
        hint.contains(
            "handover reject --key q2T8f3K9aZ0wXy1VbN4mLg --decision-url https://a1b2c3d4e5.execute-api.ap-northeast-1.amazonaws.com/decisions --region ap-northeast-1"
        ),
        "{hint}"
    );
    assert!(hint.contains("cli_approvers"), "{hint}");
    assert!(
        !hint.contains("task_token") && !hint.contains("send-task"),
        "{hint}"
    );
}

#[test]
fn approving_a_possible_data_loss_by_cli_says_so_in_the_command_and_the_question() {
    let state = fixtures::state(Some(300.0));
    let d = fixtures::diagnosis(Some(300.0));
    assert!(d.rpo_over_target);
    let now = fixtures::t0();
    let v = ApprovalView {
        state: &state,
        diagnosis: &d,
        key: "q2T8f3K9aZ0wXy1VbN4mLg",
        requested_at: now,
        expires_at: now + chrono::Duration::minutes(15),
        cli: &cli(),
        readiness: Some("readiness 12 min ago: 0 fail, 2 warn"),
    };
    assert!(cli_commands(&v).approve.ends_with(" --accept-data-loss"));
    assert!(!cli_commands(&v).reject.contains("data-loss"));
    let q = question_text(&state, &d, v.expires_at, v.readiness);
    for want in [
        "DATA LOSS: the RPO estimate (300 s) is over the target of 60 s",
        "Last readiness: readiness 12 min ago: 0 fail, 2 warn",
        &format!("— {}", state.input.incident_id),
    ] {
        assert!(q.contains(want), "{want:?} not in:\n{q}");
    }
}

#[test]
fn every_text_fits_slacks_limits() {
    let mut state = fixtures::state(Some(5.0));
    state.input.incident_id = "x".repeat(400);
    let mut diagnosis = fixtures::diagnosis(Some(5.0));
    diagnosis.summary = "s".repeat(5000);
    for e in &mut diagnosis.evidence {
        e.observation = "o".repeat(5000);
    }
    let now = fixtures::t0();
    let (_, blocks) = approval(&ApprovalView {
        state: &state,
        diagnosis: &diagnosis,
        key: KEY,
        requested_at: now,
        expires_at: now,
        cli: &cli(),
        readiness: None,
    });
    assert!(blocks[0]["text"]["text"].as_str().unwrap().chars().count() <= 150);
    assert!(blocks[1]["text"]["text"].as_str().unwrap().chars().count() <= 3000);
    for b in &blocks {
        if let Some(t) = b["text"]["text"].as_str() {
            assert!(t.chars().count() <= 3000);
        }
    }
}

#[test]
fn decided_replaces_the_buttons_and_hint_with_who_and_when() {
    let (_, blocks) = build(Some(299.0), false);
    let body = decided(
        Some(&blocks),
        &Decided {
            decision: Decision::Approve,
            approver_id: "U0ONCALL01".into(),
            approver_name: "Primary on-call".into(),
            at: fixtures::t0() + chrono::Duration::minutes(5),
            data_loss_acknowledged: true,
        },
    );
    assert_eq!(body["replace_original"], true);
    let out = body["blocks"].as_array().unwrap();
    assert!(
        out.iter().all(|b| b["type"] != "actions"),
        "buttons removed"
    );
    assert!(
        out.iter().all(|b| b["block_id"] != BLOCK_CLI),
        "hint removed"
    );
    assert_eq!(out[0], blocks[0], "the diagnosis stays");
    let last = out.last().unwrap()["text"]["text"].as_str().unwrap();
    assert!(
        last.contains("*Approved* by Primary on-call (<@U0ONCALL01>)"),
        "{last}"
    );
    assert!(last.contains("<!date^1796048215^"), "{last}");
    assert!(last.contains("data loss acknowledged"), "{last}");

    let body = decided(
        None,
        &Decided {
            decision: Decision::Reject,
            approver_id: "U0ONCALL02".into(),
            approver_name: "Secondary on-call".into(),
            at: fixtures::t0(),
            data_loss_acknowledged: false,
        },
    );
    assert_eq!(body["blocks"].as_array().unwrap().len(), 1);
    assert!(
        body["text"]
            .as_str()
            .unwrap()
            .starts_with("Rejected by Secondary on-call")
    );
}

#[test]
fn ephemeral_notes_leave_the_original_alone() {
    let v = ephemeral("already decided");
    assert_eq!(v["response_type"], "ephemeral");
    assert_eq!(v["replace_original"], false);
}

#[test]
fn the_ai_explanation_is_labelled_advisory_and_cannot_mention_anyone() {
    use crate::execution::{Explanation, ExplanationOutcome};
    let mut state = fixtures::state(Some(5.0));
    state.input.drill = false;
    let mut diagnosis = fixtures::diagnosis(Some(5.0));
    diagnosis.explanation = Some(Explanation {
        model_id: "anthropic.claude-3-haiku".into(),
        outcome: ExplanationOutcome::Text(
            "P is down. <!channel> see <https://evil.example|the runbook> & approve".into(),
        ),
        latency_ms: 900,
    });
    let at = fixtures::t0();
    let view = ApprovalView {
        state: &state,
        diagnosis: &diagnosis,
        key: KEY,
        requested_at: at,
        expires_at: at + chrono::Duration::minutes(15),
        cli: &cli(),
        readiness: None,
    };
    let (_, blocks) = approval(&view);
    let text = serde_json::to_string(&blocks).unwrap();
    assert!(text.contains("*AI explanation* _(advisory"), "{text}");
    assert!(!text.contains("<!channel>"), "{text}");
    assert!(!text.contains("<https://evil"), "{text}");
    assert!(text.contains("&lt;!channel&gt;"), "{text}");
    // It sits after the evidence and before the buttons; the buttons are unchanged.
    let pos = |needle: &str| blocks.iter().position(|b| b.to_string().contains(needle));
    assert!(pos("AI explanation") > pos("Key evidence"));
    assert!(pos("AI explanation") < pos(BLOCK_ACTIONS));

    let mut unavailable = diagnosis.clone();
    unavailable.explanation = Some(Explanation {
        model_id: "m".into(),
        outcome: ExplanationOutcome::Unavailable("bedrock:Converse timed out after 8000 ms".into()),
        latency_ms: 8000,
    });
    let (_, blocks) = approval(&ApprovalView {
        diagnosis: &unavailable,
        ..view
    });
    let note = blocks
        .iter()
        .find(|b| b.to_string().contains("AI explanation unavailable"))
        .expect("a note says why there is no explanation");
    assert_eq!(note["type"], "context");
}

/// Issue 14: the approver sees how ready the world was, and how long ago.
#[test]
fn the_last_readiness_is_in_the_question() {
    let state = fixtures::state(Some(4.0));
    let diagnosis = fixtures::diagnosis(Some(4.0));
    let requested_at = fixtures::t0() + chrono::Duration::seconds(200);
    let line = "12 min ago: 1 fail, 1 warn, 14 pass (FAIL secrets.db_user)";
    let view = ApprovalView {
        state: &state,
        diagnosis: &diagnosis,
        key: KEY,
        requested_at,
        expires_at: requested_at + chrono::Duration::minutes(15),
        cli: &cli(),
        readiness: Some(line),
    };
    let (_, blocks) = approval(&view);
    let all = serde_json::to_string(&blocks).unwrap();
    assert!(all.contains("Last readiness"), "{all}");
    assert!(all.contains(line), "{all}");
    let (_, blocks) = approval(&ApprovalView {
        readiness: None,
        ..view
    });
    assert!(
        serde_json::to_string(&blocks)
            .unwrap()
            .contains("never evaluated")
    );
}

/// Issue 16: a planned switchover's question says what it is, promises RPO 0
/// (it never promotes with a loss), and has no data-loss button even with
/// no ReplicaLag sample.
#[test]
fn a_switchover_is_asked_as_one_with_rpo_0_and_no_data_loss_button() {
    let mut state = fixtures::state(None);
    state.input.mode = crate::execution::Mode::Switchover;
    let mut diagnosis = fixtures::diagnosis(None);
    diagnosis.rpo_over_target = false;
    diagnosis.action = crate::execution::Action::SwitchOver;
    let requested_at = fixtures::t0() + chrono::Duration::seconds(200);
    let view = ApprovalView {
        state: &state,
        diagnosis: &diagnosis,
        key: KEY,
        requested_at,
        expires_at: requested_at + chrono::Duration::minutes(15),
        cli: &cli(),
        readiness: None,
    };
    let (text, blocks) = approval(&view);
    assert!(text.starts_with("SWITCHOVER approval needed"), "{text}");
    let all = serde_json::to_string(&blocks).unwrap();
    assert!(all.contains("SWITCHOVER approval"), "{all}");
    assert!(all.contains("*Switch over*"), "{all}");
    assert!(all.contains("*RPO*\\n0 — writes stop on P"), "{all}");
    assert!(all.contains("Approve switchover"), "{all}");
    assert!(!all.contains(ACTION_APPROVE_DATA_LOSS), "{all}");
    let q = question_text(&state, &diagnosis, view.expires_at, None);
    assert!(
        q.contains("Switch over ap-northeast-2 → ap-northeast-1"),
        "{q}"
    );
    assert!(!q.contains("DATA LOSS"), "{q}");
}
