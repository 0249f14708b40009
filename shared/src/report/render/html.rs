//! `report.html`: one self-contained page, inline CSS and SVG, no scripts
//! and no external assets (a Content-Security-Policy forbids loading any).

use super::markdown::severity;
use super::{MAX_STATE_ROWS, escape_html as esc, svg_timeline, t_plus, target_text, value_text};
use crate::execution::ExplanationOutcome;
use crate::report::model::{Report, Status};
use crate::report::numbers::clock;
use std::fmt::Write;

const CSS: &str = "body{font-family:-apple-system,'Segoe UI',Helvetica,Arial,sans-serif;margin:24px auto;max-width:1040px;color:#1f2328;padding:0 16px}\
h1{font-size:24px;margin-bottom:4px}h2{font-size:19px;border-bottom:1px solid #d0d7de;padding-bottom:4px;margin-top:28px}\
table{border-collapse:collapse;width:100%;font-size:13px;margin:8px 0}th,td{border:1px solid #d0d7de;padding:4px 8px;text-align:left;vertical-align:top}\
th{background:#f6f8fa}.cards{display:flex;gap:12px;flex-wrap:wrap}.card{flex:1;min-width:200px;border:1px solid #d0d7de;border-radius:6px;padding:10px 14px}\
.card .v{font-size:26px;font-weight:600}.pass{border-left:6px solid #2da44e}.miss{border-left:6px solid #cf222e}.pending{border-left:6px solid #d29922}.na{border-left:6px solid #8c959f}\
.tag{display:inline-block;border-radius:10px;padding:0 8px;font-size:12px;font-weight:600;color:#fff}.t-pass,.t-ok{background:#2da44e}.t-miss,.t-critical{background:#cf222e}\
.t-pending,.t-warning{background:#d29922}.t-na,.t-info{background:#8c959f}.outcome{font-size:15px}.stop{background:#ffebe9;border:1px solid #cf222e;border-radius:6px;padding:8px 14px}\
.svg{overflow-x:auto;border:1px solid #d0d7de;border-radius:6px}.muted{color:#656d76;font-size:12px}.bad{color:#cf222e;font-weight:600}";

fn status_class(s: Status) -> &'static str {
    match s {
        Status::Pass => "pass",
        Status::Miss => "miss",
        Status::Pending => "pending",
        Status::NotReached | Status::NotApplicable => "na",
    }
}

fn row(o: &mut String, cells: &[String]) {
    o.push_str("<tr>");
    for c in cells {
        let _ = write!(o, "<td>{c}</td>");
    }
    o.push_str("</tr>");
}

fn head(o: &mut String, cells: &[&str]) {
    o.push_str("<table><tr>");
    for c in cells {
        let _ = write!(o, "<th>{}</th>", esc(c));
    }
    o.push_str("</tr>");
}

fn ul(o: &mut String, items: &[String]) {
    o.push_str("<ul>");
    if items.is_empty() {
        o.push_str("<li class=\"muted\">none recorded</li>");
    }
    for i in items {
        let _ = write!(o, "<li>{}</li>", esc(i));
    }
    o.push_str("</ul>");
}

/// Render `report.html`.
pub fn html(r: &Report) -> String {
    let s = &r.summary;
    let mut o = String::with_capacity(64 * 1024);
    let title = format!("Handover report: {} ({})", s.incident_id, s.mode);
    let _ = write!(
        o,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{}</title><style>{CSS}</style></head><body>",
        esc(&title)
    );
    let _ = write!(
        o,
        "<h1>{}</h1><p class=\"outcome\"><b>{}</b>: {}</p>",
        esc(&title),
        s.outcome.as_str(),
        esc(&s.result)
    );
    if let Some(stop) = &r.stopped {
        let _ = write!(
            o,
            "<div class=\"stop\"><b>Where it stopped.</b> State <b>{}</b>, error <code>{}</code>: {}</div>",
            esc(stop.state.as_deref().unwrap_or("—")),
            esc(stop.error.as_deref().unwrap_or("—")),
            esc(stop.cause.as_deref().unwrap_or("no cause recorded"))
        );
    }
    o.push_str("<h2>Summary</h2><table>");
    let when = |t: Option<chrono::DateTime<chrono::Utc>>| {
        t.map_or("—".into(), |t| {
            t.format("%Y-%m-%d %H:%M:%S UTC").to_string()
        })
    };
    for (k, v) in [
        ("Service", s.service.clone()),
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
        ("T0", when(Some(s.t0))),
        (
            "Started / ended",
            format!("{} / {}", when(s.started_at), when(s.ended_at)),
        ),
        ("Execution", s.execution_arn.clone()),
        (
            "Plan version · history events",
            format!("{} · {}", s.plan_version, s.history_events),
        ),
        (
            "Last readiness",
            s.last_readiness
                .clone()
                .unwrap_or_else(|| "never evaluated".into()),
        ),
    ] {
        row(&mut o, &[esc(k), esc(&v)]);
    }
    o.push_str("</table><h2>The four numbers</h2><div class=\"cards\">");
    for m in r.numbers.all() {
        let c = status_class(m.status);
        let _ = write!(
            o,
            "<div class=\"card {c}\"><div>{}</div><div class=\"v\">{}</div><div>target {} <span class=\"tag t-{c}\">{}</span></div><div class=\"muted\">{}</div></div>",
            esc(&m.label),
            esc(&value_text(&m.key, m.value_s)),
            esc(&target_text(&m.key, m.target_s)),
            m.status.label(),
            esc(&m.how)
        );
    }
    o.push_str("</div><h2>Durations</h2>");
    head(&mut o, &["Duration", "Value", "How"]);
    for d in &r.durations {
        row(
            &mut o,
            &[
                esc(&d.label),
                d.value_s.map_or("—".into(), clock),
                esc(&d.how),
            ],
        );
    }
    let _ = write!(
        o,
        "</table><h2>Timeline</h2><div class=\"svg\">{}</div>",
        svg_timeline(r)
    );
    head(
        &mut o,
        &["Milestone", "Time (UTC)", "T+", "Source", "In order"],
    );
    for m in &r.milestones {
        row(
            &mut o,
            &[
                esc(&m.label),
                m.at.map_or("—".into(), |t| t.format("%H:%M:%S").to_string()),
                m.at.map_or("—".into(), |t| esc(&t_plus(r, t))),
                format!("<code>{}</code>", esc(&m.source)),
                if m.in_order {
                    "yes".into()
                } else {
                    "<span class=\"bad\">no</span>".into()
                },
            ],
        );
    }
    o.push_str("</table>");
    if !r.order_problems.is_empty() {
        o.push_str("<p class=\"bad\">Out of order:</p>");
        ul(&mut o, &r.order_problems);
    }
    o.push_str("<h2>States</h2>");
    head(
        &mut o,
        &[
            "State", "Type", "Entered", "Exited", "Duration", "Retries", "Errors",
        ],
    );
    for st in r.states.iter().take(MAX_STATE_ROWS) {
        let errors: Vec<String> = st
            .errors
            .iter()
            .map(|e| format!("{}: {}", e.error, e.cause.as_deref().unwrap_or("")))
            .collect();
        row(
            &mut o,
            &[
                esc(&st.name),
                esc(&st.kind),
                esc(&t_plus(r, st.entered_at)),
                st.exited_at.map_or("—".into(), |t| esc(&t_plus(r, t))),
                st.duration_s.map_or("—".into(), clock),
                st.retries.to_string(),
                esc(&errors.join("; ")),
            ],
        );
    }
    o.push_str("</table>");
    if r.states.len() > MAX_STATE_ROWS {
        let _ = write!(
            o,
            "<p class=\"muted\">…and {} more state visits (all are in report.json).</p>",
            r.states.len() - MAX_STATE_ROWS
        );
    }
    o.push_str("<h2>Hypotheses</h2>");
    head(&mut o, &["Hypothesis", "Standing", "For", "Against"]);
    for h in &r.hypotheses {
        row(
            &mut o,
            &[
                esc(&h.title),
                esc(&h.standing),
                esc(&h.evidence_for.join("; ")),
                esc(&h.evidence_against.join("; ")),
            ],
        );
    }
    o.push_str("</table>");
    if let Some(x) = &r.explanation {
        let _ = write!(
            o,
            "<p><b>AI explanation</b> <span class=\"muted\">(advisory, {}, {} ms; shown to the approver, never decided on)</span></p>",
            esc(&x.model_id),
            x.latency_ms
        );
        match &x.outcome {
            ExplanationOutcome::Text(t) => {
                let _ = write!(
                    o,
                    "<blockquote style=\"white-space:pre-wrap\">{}</blockquote>",
                    esc(t)
                );
            }
            ExplanationOutcome::Unavailable(why) => {
                let _ = write!(o, "<p class=\"muted\">Unavailable: {}</p>", esc(why));
            }
        }
    }
    let t = &r.trigger_vs_root_cause;
    o.push_str("<h2>Trigger vs root cause</h2><p><b>Trigger</b> (what started the run):</p>");
    ul(&mut o, &t.trigger);
    o.push_str("<p><b>Candidate root causes:</b></p>");
    ul(&mut o, &t.candidates);
    o.push_str("<p><b>Co-symptoms</b> (came with the failure; not causes by themselves):</p>");
    ul(&mut o, &t.co_symptoms);
    let _ = write!(
        o,
        "<p><b>Root-cause verdict:</b> <i>{}</i></p>",
        esc(&t.verdict)
    );
    o.push_str("<h2>Post-check findings</h2>");
    head(&mut o, &["Severity", "Check", "Finding", "Evidence"]);
    for f in &r.findings {
        let sev = severity(f.severity);
        row(
            &mut o,
            &[
                format!("<span class=\"tag t-{sev}\">{sev}</span>"),
                esc(&f.check),
                esc(&f.title),
                esc(&f.evidence.join("; ")),
            ],
        );
    }
    o.push_str("</table><h2>Action items</h2>");
    let items: Vec<String> = r
        .action_items
        .iter()
        .map(|a| format!("{} (because {})", a.title, a.because))
        .collect();
    ul(&mut o, &items);
    if let Some(fb) = &r.failback_run {
        o.push_str("<h2>Failback</h2>");
        ul(&mut o, &super::failback_lines(fb));
    }
    o.push_str("<h2>Failback checklist</h2><ol>");
    for f in &r.failback {
        let _ = write!(o, "<li>{}</li>", esc(f));
    }
    o.push_str("</ol>");
    if !r.warnings.is_empty() {
        o.push_str("<h2>Warnings</h2>");
        ul(&mut o, &r.warnings);
    }
    let _ = write!(
        o,
        "<p class=\"muted\">{} · generated {}</p></body></html>",
        esc(&r.schema),
        r.generated_at.to_rfc3339()
    );
    o
}
