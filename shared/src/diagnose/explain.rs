//! The optional AI explanation: the finished diagnosis, put into words by a
//! Bedrock model for the person who must decide.
//!
//! It is advisory and comes last. The rules have already decided the action,
//! the risk and the lag gate; the model sees their output, not the raw APIs,
//! and its text only travels to Slack and the report. On any failure or
//! timeout the approver sees the deterministic summary alone, with a line
//! saying why the explanation is missing.

use crate::adapters::{Ask, TextModel};
use crate::execution::{Diagnosis, Explanation, ExplanationOutcome};
use crate::plan::{Explain, Plan};
use serde_json::json;
use std::time::{Duration, Instant};
use tracing::{info, warn};

/// Longest explanation kept, in characters (a Slack section holds 3000).
pub const MAX_CHARS: usize = 1200;

/// Upper bound on the model's answer.
pub const MAX_TOKENS: i32 = 400;

/// What the model is told about its job.
pub const SYSTEM: &str = "You help an on-call engineer decide whether to fail a web service \
over from Region P to Region S. You receive the output of deterministic rules: evidence, \
hypotheses with evidence for and against, a risk level, the recommended action and the \
estimated data loss (RPO). In plain text and at most 120 words, explain what the evidence \
most likely means and what would change the picture. Separate the trigger from the likely \
root cause. Use only the evidence given; say where it is missing or conflicting. Do not \
contradict or change the recommended action, do not tell the reader to approve or reject, \
and do not give commands. The rules and the person decide; your text is advisory.";

/// The user message: the diagnosis as compact JSON. Deterministic for a
/// given diagnosis, and free of anything secret (the diagnosis holds none).
pub fn prompt(plan: &Plan, d: &Diagnosis) -> String {
    let doc = json!({
        "service": plan.service,
        "primary_region": plan.regions.primary.region,
        "standby_region": plan.regions.standby.region,
        "observed_at": d.observed_at,
        "recommended_action": d.action,
        "risk": d.risk,
        "risk_rule": d.risk_rule,
        "rpo_estimate_s": d.rpo_estimate_s,
        "rpo_target_s": d.rpo_target_s,
        "rpo_over_target": d.rpo_over_target,
        "reasons": d.reasons,
        "evidence": d.evidence.iter().map(|e| json!({
            "source": e.source,
            "observation": e.observation,
            "supports_p_down": e.supports_p_down,
        })).collect::<Vec<_>>(),
        "hypotheses": d.hypotheses.iter().map(|h| json!({
            "id": h.id,
            "title": h.title,
            "standing": h.standing,
            "for": h.evidence_for,
            "against": h.evidence_against,
        })).collect::<Vec<_>>(),
        "summary": d.summary,
    });
    format!("Explain this failover assessment.\n\n{doc}")
}

/// Ask the model; never fails. The outcome is text or the reason there is none.
pub async fn explain<M: TextModel>(
    plan: &Plan,
    cfg: &Explain,
    d: &Diagnosis,
    model: &M,
) -> Explanation {
    let user = prompt(plan, d);
    let started = Instant::now();
    let answer = model
        .converse(
            Ask {
                model_id: &cfg.model_id,
                system: SYSTEM,
                user: &user,
                max_tokens: MAX_TOKENS,
            },
            Duration::from_millis(cfg.timeout_ms),
        )
        .await;
    let latency_ms = started.elapsed().as_millis() as u64;
    let outcome = match answer {
        Ok(raw) => match clean(&raw) {
            Some(text) => ExplanationOutcome::Text(text),
            None => ExplanationOutcome::Unavailable("the model returned no usable text".into()),
        },
        Err(e) => ExplanationOutcome::Unavailable(crate::error::chain(&e)),
    };
    match &outcome {
        ExplanationOutcome::Text(t) => {
            info!(model_id = %cfg.model_id, latency_ms, chars = t.chars().count(), "explanation received")
        }
        ExplanationOutcome::Unavailable(why) => {
            warn!(model_id = %cfg.model_id, latency_ms, reason = %why, "explanation unavailable; the deterministic summary stands")
        }
    }
    Explanation {
        model_id: cfg.model_id.clone(),
        outcome,
        latency_ms,
    }
}

/// Plain, bounded text: control characters dropped (newlines kept, at most
/// one blank line in a row), trimmed, cut at [`MAX_CHARS`] with an ellipsis.
/// `None` when nothing is left.
pub fn clean(raw: &str) -> Option<String> {
    let mut out = String::with_capacity(raw.len().min(MAX_CHARS * 4));
    let mut newlines = 0;
    for c in raw.trim().chars() {
        if c == '\n' {
            newlines += 1;
            if newlines <= 2 {
                out.push('\n');
            }
            continue;
        }
        if c.is_control() {
            // \r, \t, escape sequences and other control characters.
            if c == '\t' {
                out.push(' ');
            }
            continue;
        }
        newlines = 0;
        out.push(c);
    }
    let out = out.trim();
    if out.is_empty() {
        return None;
    }
    if out.chars().count() <= MAX_CHARS {
        return Some(out.to_owned());
    }
    let mut cut: String = out.chars().take(MAX_CHARS - 1).collect();
    cut.push('…');
    Some(cut)
}

#[cfg(test)]
#[path = "explain_tests.rs"]
mod tests;
