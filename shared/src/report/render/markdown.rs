//! `report.md`: GitHub-flavoured Markdown with a Mermaid gantt block.

use super::{MAX_STATE_ROWS, bars, status_mark, t_plus, target_text, value_text};
use crate::execution::ExplanationOutcome;
use crate::report::model::{Report, Severity};
use crate::report::numbers::clock;
use chrono::{DateTime, Utc};
use std::fmt::Write;

/// Escape a table cell: pipes, newlines and HTML.
fn cell(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('|', "\\|")
        .replace(['\n', '\r'], " ")
}

/// Mermaid task names may not contain `:`, `#` or `;`.
fn mermaid_name(s: &str) -> String {
    s.chars()
        .map(|c| {
            if matches!(c, ':' | '#' | ';' | '\n' | '\r' | '`') {
                ' '
            } else {
                c
            }
        })
        .collect()
}

fn ts(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%S").to_string()
}

fn opt_ts(t: Option<DateTime<Utc>>) -> String {
    t.map_or("—".into(), |t| format!("{} UTC", ts(t)))
}

/// Render `report.md`.
pub fn markdown(r: &Report) -> String {
    let s = &r.summary;
    let mut o = String::new();
    let _ = writeln!(
        o,
        "# Handover report: {} ({})\n",
        cell(&s.incident_id),
        s.mode
    );
    let _ = writeln!(o, "**{}**: {}\n", s.outcome.as_str(), cell(&s.result));
    let _ = writeln!(o, "| | |\n|---|---|");
    for (k, v) in [
        ("Service", s.service.clone()),
        ("Mode", s.mode.clone()),
        (
            "Regions",
            format!("{} → {}", s.primary_region, s.standby_region),
        ),
        ("Databases", format!("{} → {}", s.primary_db, s.standby_db)),
        (
            "Approved by",
            s.approved_by.clone().unwrap_or_else(|| "—".into()),
        ),
        (
            "Data loss acknowledged",
            if s.data_loss_acknowledged {
                "yes"
            } else {
                "no"
            }
            .into(),
        ),
        ("T0", opt_ts(Some(s.t0))),
        ("Execution", s.execution_arn.clone()),
        (
            "Started / ended",
            format!("{} / {}", opt_ts(s.started_at), opt_ts(s.ended_at)),
        ),
        ("Plan version", s.plan_version.clone()),
        ("History events", s.history_events.to_string()),
        (
            "Last readiness",
            s.last_readiness
                .clone()
                .unwrap_or_else(|| "never evaluated".into()),
        ),
    ] {
        let _ = writeln!(o, "| {k} | {} |", cell(&v));
    }
    if let Some(stop) = &r.stopped {
        let _ = writeln!(o, "\n## Where it stopped\n");
        let _ = writeln!(
            o,
            "- **State:** {}",
            cell(stop.state.as_deref().unwrap_or("—"))
        );
        let _ = writeln!(
            o,
            "- **Error:** {}",
            cell(stop.error.as_deref().unwrap_or("—"))
        );
        let _ = writeln!(
            o,
            "- **Cause:** {}",
            cell(stop.cause.as_deref().unwrap_or("—"))
        );
    }
    let _ = writeln!(
        o,
        "\n## The four numbers\n\n| Number | Value | Target | Verdict | How |\n|---|---|---|---|---|"
    );
    for m in r.numbers.all() {
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} |",
            m.label,
            value_text(&m.key, m.value_s),
            target_text(&m.key, m.target_s),
            status_mark(m.status),
            cell(&m.how)
        );
    }
    let _ = writeln!(
        o,
        "\n## Durations\n\n| Duration | Value | How |\n|---|---|---|"
    );
    for d in &r.durations {
        let _ = writeln!(
            o,
            "| {} | {} | {} |",
            d.label,
            d.value_s.map_or("—".into(), clock),
            cell(&d.how)
        );
    }
    let _ = writeln!(o, "\n## Timeline\n");
    gantt(&mut o, r);
    let _ = writeln!(
        o,
        "\n| Milestone | Time (UTC) | T+ | Source | In order |\n|---|---|---|---|---|"
    );
    for m in &r.milestones {
        let _ = writeln!(
            o,
            "| {} | {} | {} | `{}` | {} |",
            m.label,
            m.at.map_or("—".into(), |t| t.format("%H:%M:%S").to_string()),
            m.at.map_or("—".into(), |t| t_plus(r, t)),
            cell(&m.source),
            if m.in_order { "yes" } else { "**no**" }
        );
    }
    if !r.order_problems.is_empty() {
        let _ = writeln!(o, "\n**Out of order:**\n");
        for p in &r.order_problems {
            let _ = writeln!(o, "- {}", cell(p));
        }
    }
    let _ = writeln!(
        o,
        "\n### States\n\n| State | Type | Entered | Exited | Duration | Retries | Errors |\n|---|---|---|---|---|---|---|"
    );
    for st in r.states.iter().take(MAX_STATE_ROWS) {
        let errors: Vec<String> = st
            .errors
            .iter()
            .map(|e| format!("{}: {}", e.error, e.cause.as_deref().unwrap_or("")))
            .collect();
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} | {} | {} |",
            cell(&st.name),
            st.kind,
            t_plus(r, st.entered_at),
            st.exited_at.map_or("—".into(), |t| t_plus(r, t)),
            st.duration_s.map_or("—".into(), clock),
            st.retries,
            cell(&errors.join("; "))
        );
    }
    if r.states.len() > MAX_STATE_ROWS {
        let _ = writeln!(
            o,
            "\n…and {} more state visits (all are in report.json).",
            r.states.len() - MAX_STATE_ROWS
        );
    }
    let _ = writeln!(o, "\n## Hypotheses\n");
    for h in &r.hypotheses {
        let _ = writeln!(o, "- **{}** ({})", cell(&h.title), h.standing);
        for e in &h.evidence_for {
            let _ = writeln!(o, "  - for: {}", cell(e));
        }
        for e in &h.evidence_against {
            let _ = writeln!(o, "  - against: {}", cell(e));
        }
    }
    if r.hypotheses.is_empty() {
        let _ = writeln!(o, "No diagnosis in this run.");
    }
    if let Some(x) = &r.explanation {
        let _ = writeln!(
            o,
            "\n**AI explanation** (advisory, `{}`, {} ms; shown to the approver, never decided on):\n",
            cell(&x.model_id),
            x.latency_ms
        );
        match &x.outcome {
            ExplanationOutcome::Text(t) => {
                for line in t.lines() {
                    let _ = writeln!(o, "> {}", cell(line));
                }
            }
            ExplanationOutcome::Unavailable(why) => {
                let _ = writeln!(o, "_Unavailable: {}_", cell(why));
            }
        }
    }
    let t = &r.trigger_vs_root_cause;
    let _ = writeln!(
        o,
        "\n## Trigger vs root cause\n\n**Trigger** (what started the run):\n"
    );
    list(&mut o, &t.trigger);
    let _ = writeln!(o, "\n**Candidate root causes:**\n");
    for c in &t.candidates {
        let _ = writeln!(o, "- [ ] {}", cell(c));
    }
    let _ = writeln!(
        o,
        "\n**Co-symptoms** (came with the failure; not causes by themselves):\n"
    );
    list(&mut o, &t.co_symptoms);
    let _ = writeln!(o, "\n**Root-cause verdict:** _{}_", cell(&t.verdict));
    let _ = writeln!(
        o,
        "\n## Post-check findings\n\n| Severity | Check | Finding | Evidence |\n|---|---|---|---|"
    );
    for f in &r.findings {
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} |",
            severity(f.severity),
            f.check,
            cell(&f.title),
            cell(&f.evidence.join("; "))
        );
    }
    let _ = writeln!(o, "\n## Action items\n");
    for a in &r.action_items {
        let _ = writeln!(
            o,
            "- [ ] {} _(because {})_",
            cell(&a.title),
            cell(&a.because)
        );
    }
    if r.action_items.is_empty() {
        let _ = writeln!(o, "None.");
    }
    if let Some(fb) = &r.failback_run {
        let _ = writeln!(o, "\n## Failback\n");
        for line in super::failback_lines(fb) {
            let _ = writeln!(o, "- {}", cell(&line));
        }
    }
    let _ = writeln!(o, "\n## Failback checklist\n");
    for f in &r.failback {
        let _ = writeln!(o, "- [ ] {}", cell(f));
    }
    if !r.warnings.is_empty() {
        let _ = writeln!(o, "\n## Warnings\n");
        list(&mut o, &r.warnings);
    }
    let _ = writeln!(
        o,
        "\n<sub>{} · generated {}</sub>",
        r.schema,
        opt_ts(Some(r.generated_at))
    );
    o
}

fn list(o: &mut String, items: &[String]) {
    if items.is_empty() {
        let _ = writeln!(o, "- none recorded");
    }
    for i in items {
        let _ = writeln!(o, "- {}", cell(i));
    }
}

pub(super) fn severity(s: Severity) -> &'static str {
    match s {
        Severity::Ok => "ok",
        Severity::Info => "info",
        Severity::Warning => "warning",
        Severity::Critical => "critical",
    }
}

fn gantt(o: &mut String, r: &Report) {
    let _ = writeln!(
        o,
        "```mermaid\ngantt\n    title {} (UTC)",
        mermaid_name(&r.summary.incident_id)
    );
    let _ = writeln!(
        o,
        "    dateFormat YYYY-MM-DD HH:mm:ss\n    axisFormat %H:%M\n    section Phases"
    );
    for (i, b) in bars(r).iter().enumerate() {
        let tag = if b.failed {
            "crit, "
        } else if b.detection {
            "done, "
        } else {
            ""
        };
        let _ = writeln!(
            o,
            "    {} :{tag}b{i}, {}, {}",
            mermaid_name(&b.label),
            ts(b.start),
            ts(b.end.max(b.start + chrono::Duration::seconds(1)))
        );
    }
    let _ = writeln!(o, "    section Milestones");
    let target = r.summary.t0 + chrono::Duration::seconds(r.numbers.read_rto.target_s as i64);
    let _ = writeln!(
        o,
        "    RTO target T+{} :milestone, crit, rto, {}, 0s",
        clock(r.numbers.read_rto.target_s as f64).replace(':', "."),
        ts(target)
    );
    for (i, m) in r.milestones.iter().enumerate() {
        if let Some(t) = m.at {
            let _ = writeln!(
                o,
                "    {} {} :milestone, m{i}, {}, 0s",
                mermaid_name(&m.label),
                t_plus(r, t).replace(':', "."),
                ts(t)
            );
        }
    }
    let _ = writeln!(o, "```");
}
