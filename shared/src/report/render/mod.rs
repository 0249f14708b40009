//! Rendering a [`Report`]: `report.json`, `report.md`, `report.html`, and
//! the short Slack summary.
//!
//! The picture (Mermaid gantt in Markdown, SVG in HTML) draws the same
//! [`bars`]: detection, then one bar per state name from its first entry to
//! its last exit (loops such as the promotion poll become one bar), plus the
//! milestones, T0 and the RTO target.

mod html;
mod markdown;
mod svg;

pub use html::html;
pub use markdown::markdown;
pub use svg::svg_timeline;

use super::facts::seconds;
use super::model::{Report, Status};
use super::numbers::clock;
use crate::slack::message::escape as escape_slack;
use crate::units::fmt_num;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};

/// Rows of the state table shown in Markdown and HTML (all are in the JSON).
pub const MAX_STATE_ROWS: usize = 200;

/// `report.json`.
pub fn json(report: &Report) -> String {
    serde_json::to_string_pretty(report).unwrap_or_else(|e| {
        // Serialising plain data cannot fail; keep a valid document if it ever does.
        json!({"schema": report.schema, "error": e.to_string()}).to_string()
    })
}

/// One bar of the timeline.
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    /// Label.
    pub label: String,
    /// Start.
    pub start: DateTime<Utc>,
    /// End.
    pub end: DateTime<Utc>,
    /// Visits merged into the bar.
    pub visits: usize,
    /// Did any visit see an error?
    pub errors: bool,
    /// Did a visit end with its last attempt failed (not retried to success)?
    pub failed: bool,
    /// Is this the detection phase (before the execution)?
    pub detection: bool,
}

/// The bars of the timeline.
pub fn bars(r: &Report) -> Vec<Bar> {
    let end_default = r.summary.ended_at.unwrap_or(r.generated_at);
    let mut out: Vec<Bar> = Vec::new();
    if let Some(start) = r.summary.started_at {
        out.push(Bar {
            label: "Detection (T0 → start)".into(),
            start: r.summary.t0,
            end: start,
            visits: 1,
            errors: false,
            failed: false,
            detection: true,
        });
    }
    for s in &r.states {
        let end = s.exited_at.unwrap_or(end_default);
        match out.iter_mut().find(|b| !b.detection && b.label == s.name) {
            Some(b) => {
                b.end = b.end.max(end);
                b.visits += 1;
                b.errors |= !s.errors.is_empty();
                b.failed |= s.failed;
            }
            None => out.push(Bar {
                label: s.name.clone(),
                start: s.entered_at,
                end,
                visits: 1,
                errors: !s.errors.is_empty(),
                failed: s.failed,
                detection: false,
            }),
        }
    }
    out
}

/// `T+m:ss` of `t` after T0.
pub(crate) fn t_plus(r: &Report, t: DateTime<Utc>) -> String {
    format!("T+{}", clock(seconds(r.summary.t0, t)))
}

/// A measure's value for display: `m:ss` for times, `N s` for RPO.
pub(crate) fn value_text(key: &str, v: Option<f64>) -> String {
    match v {
        None => "—".into(),
        Some(v) if key == "rpo" => format!("{} s", fmt_num(v)),
        Some(v) => clock(v),
    }
}

/// A target for display.
pub(crate) fn target_text(key: &str, t: u64) -> String {
    if key == "rpo" {
        format!("{t} s")
    } else {
        clock(t as f64)
    }
}

/// Pass/miss marker for text renderings.
pub(crate) fn status_mark(s: Status) -> &'static str {
    match s {
        Status::Pass => "✅ pass",
        Status::Miss => "❌ miss",
        Status::Pending => "⏳ pending",
        Status::NotReached => "✖ not reached",
        Status::NotApplicable => "— n/a",
    }
}

/// A failback's re-protection and data check, one line each (Markdown and HTML).
pub fn failback_lines(fb: &crate::report::model::FailbackSummary) -> Vec<String> {
    let r = &fb.reprotect;
    let mut out = vec![
        format!(
            "Undoes {} (epoch {}).",
            fb.undoes
                .as_deref()
                .unwrap_or("a failover Handover did not run"),
            fb.from_epoch
        ),
        match fb.reprotect_s {
            Some(s) => format!(
                "Re-protect: {} created as a replica of the primary and caught up in {} s (ReplicaLag {}).",
                r.replica_id,
                fmt_num(s),
                r.lag_s
                    .map(|l| format!("{} s", fmt_num(l)))
                    .unwrap_or_else(|| "unknown".into())
            ),
            None => format!("Re-protect: {} was a replica already.", r.replica_id),
        },
    ];
    if let Some(old) = &r.retired_id {
        out.push(format!(
            "The old instance is kept as {old} (Handover never deletes an instance): it holds the writes S never got in the failover; reconcile them before anyone deletes it."
        ));
    }
    for t in &fb.data_check.tables {
        out.push(format!(
            "Data check {}: S {} rows, P {} rows, checksums {} ({}){}.",
            t.table,
            t.s_rows,
            t.p_rows,
            if t.s_checksum == t.p_checksum {
                "equal"
            } else {
                "DIFFER"
            },
            t.s_checksum,
            t.key_bound
                .as_deref()
                .map(|b| format!(", up to key {b}"))
                .unwrap_or_default()
        ));
    }
    out
}

/// Escape text for HTML and SVG (element content and attribute values).
pub fn escape_html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The Slack summary: notification text and Block Kit blocks with the four numbers.
pub fn slack_summary(r: &Report, report_location: &str) -> (String, Vec<Value>) {
    let s = &r.summary;
    let text = format!(
        "Handover {} {} {}: {}",
        s.mode,
        escape_slack(&s.incident_id),
        s.outcome.as_str(),
        escape_slack(&s.result)
    );
    let numbers = r
        .numbers
        .all()
        .iter()
        .map(|m| {
            format!(
                "*{}* {} (target {}) {}",
                m.label,
                value_text(&m.key, m.value_s),
                target_text(&m.key, m.target_s),
                status_mark(m.status)
            )
        })
        .collect::<Vec<_>>()
        .join("\n");
    let mut blocks = vec![
        json!({"type": "section", "text": {"type": "mrkdwn", "text": format!("*{text}*")}}),
        json!({"type": "section", "text": {"type": "mrkdwn", "text": numbers}}),
    ];
    if let Some(w) = r.durations.iter().find(|d| d.key == "write_unavailable")
        && let Some(v) = w.value_s
    {
        blocks.push(json!({"type": "context", "elements": [{"type": "mrkdwn",
            "text": format!("Write-unavailable window {}", clock(v))}]}));
    }
    let problems = r
        .findings
        .iter()
        .filter(|f| f.severity >= super::model::Severity::Warning)
        .count();
    blocks.push(json!({"type": "context", "elements": [{"type": "mrkdwn",
        "text": format!("{} findings need attention · {} action items · report: {}",
            problems, r.action_items.len(), escape_slack(report_location))}]}));
    (text, blocks)
}
