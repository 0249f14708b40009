//! Trigger vs root cause, and the action items.

use super::model::*;
use super::numbers::clock;
use crate::execution::{Diagnosis, ExecutionInput};
use crate::units::fmt_num;
use serde_json::Value;

pub(crate) fn trigger_analysis(
    input: &ExecutionInput,
    diagnosis: Option<&Diagnosis>,
) -> TriggerAnalysis {
    let mut trigger: Vec<String> = Vec::new();
    for tick in &input.evidence {
        let at = tick["tick"].as_str().unwrap_or("?");
        for sig in tick["signals"].as_array().into_iter().flatten() {
            if sig["failing"] == Value::Bool(true) {
                let line = format!(
                    "{}: {}",
                    sig["name"].as_str().unwrap_or("signal"),
                    sig["observation"].as_str().unwrap_or("")
                );
                if !trigger.iter().any(|t| t.ends_with(&line)) {
                    trigger.push(format!("{at} {line}"));
                }
            }
        }
    }
    if trigger.is_empty() {
        trigger.push(format!(
            "{} consecutive failing probes of P from T0 {}",
            input.plan.detection.failures_to_trigger,
            input.t0.to_rfc3339()
        ));
    }
    let mut candidates: Vec<&crate::execution::Hypothesis> = diagnosis
        .map(|d| {
            d.hypotheses
                .iter()
                .filter(|h| h.standing != "unlikely")
                .collect()
        })
        .unwrap_or_default();
    candidates.sort_by_key(|h| if h.standing == "likely" { 0 } else { 1 });
    let co_symptoms = diagnosis
        .map(|d| {
            d.evidence
                .iter()
                .filter(|e| e.supports_p_down == Some(true))
                .map(|e| format!("{}: {}", e.source, e.observation))
                .collect()
        })
        .unwrap_or_default();
    TriggerAnalysis {
        trigger,
        candidates: candidates
            .iter()
            .map(|h| format!("{} ({})", h.title, h.standing))
            .collect(),
        co_symptoms,
        verdict: "Left to people: the root cause is decided in the review, not by Handover. \
                  Candidates above come from diagnose's deterministic rules."
            .into(),
    }
}

pub(crate) fn action_items(
    numbers: &Numbers,
    durations: &[Span],
    findings: &[Finding],
    stopped: Option<&StopPoint>,
) -> Vec<ActionItem> {
    let mut out = Vec::new();
    let span = |k: &str| {
        durations
            .iter()
            .find(|d| d.key == k)
            .and_then(|d| d.value_s)
    };
    for m in numbers
        .all()
        .into_iter()
        .filter(|m| m.status == Status::Miss)
    {
        let got = m.value_s.map_or("not reached".to_owned(), |v| {
            if m.key == "rpo" {
                format!("{} s", fmt_num(v))
            } else {
                clock(v)
            }
        });
        let target = if m.key == "rpo" {
            format!("{} s", m.target_s)
        } else {
            clock(m.target_s as f64)
        };
        let title = match m.key.as_str() {
            "read_rto" => {
                "Shorten detection and traffic switch (probe interval, K, DNS TTL, health-check failover)."
            }
            "write_rto" => {
                "Shorten approval and promotion: promote as soon as a person approves; rehearse the on-call response."
            }
            "conservative_rto" => {
                "Get the new primary's first backup sooner (backup window, retention set before promotion)."
            }
            _ => {
                "Investigate replica lag; consider faster replication (instance size, write bursts, Aurora global database)."
            }
        };
        out.push(ActionItem {
            title: title.into(),
            because: format!("{} {got} missed the target {target}", m.label),
            source: format!("target:{}", m.key),
        });
    }
    if let (Some(gap), Some(promo)) = (span("write_unavailable"), span("promotion"))
        && gap > promo + 30.0
    {
        out.push(ActionItem {
            title: "Cut approval latency: writes failed while traffic was on S and the replica was not yet promoted.".into(),
            because: format!(
                "write-unavailable window {} is longer than the promotion itself ({})",
                clock(gap),
                clock(promo)
            ),
            source: "target:write_unavailable".into(),
        });
    }
    if let Some(stop) = stopped {
        out.push(ActionItem {
            title: format!(
                "Find why the run stopped{}.",
                stop.state
                    .as_deref()
                    .map(|s| format!(" in {s}"))
                    .unwrap_or_default()
            ),
            because: stop.summary.clone(),
            source: "stopped".into(),
        });
    }
    for f in findings.iter().filter(|f| f.severity >= Severity::Warning) {
        out.push(ActionItem {
            title: f.action.clone().unwrap_or_else(|| f.title.clone()),
            because: f.title.clone(),
            source: format!("finding:{}", f.check),
        });
    }
    out
}
