//! The audit's outputs: the three report files and the EMF metric lines.

use super::model::Report;
use super::render;
use crate::telemetry::{Emf, Unit};

/// The report's files: (name, content type, body).
pub fn files(report: &Report) -> [(&'static str, &'static str, String); 3] {
    [
        ("report.json", "application/json", render::json(report)),
        (
            "report.md",
            "text/markdown; charset=utf-8",
            render::markdown(report),
        ),
        (
            "report.html",
            "text/html; charset=utf-8",
            render::html(report),
        ),
    ]
}

/// EMF lines: the four numbers and the durations, then one line per state (dimension `State`).
pub fn emf_lines(report: &Report, timestamp_ms: i64) -> Vec<String> {
    let svc = &report.summary.service;
    let mut emf = Emf::new("Handover")
        .dimension("Service", svc.clone())
        .property("incident", report.summary.incident_id.clone())
        .property("outcome", report.summary.outcome.as_str());
    let names = [
        ("read_rto", "ReadRtoSeconds"),
        ("write_rto", "WriteRtoSeconds"),
        ("conservative_rto", "ConservativeRtoSeconds"),
        ("rpo", "RpoSeconds"),
    ];
    for m in report.numbers.all() {
        if let (Some(v), Some((_, name))) = (m.value_s, names.iter().find(|(k, _)| *k == m.key)) {
            emf = emf.metric(*name, v, Unit::Seconds);
        }
    }
    for d in &report.durations {
        if let Some(v) = d.value_s {
            emf = emf.metric(format!("{}Seconds", camel(&d.key)), v, Unit::Seconds);
        }
    }
    let mut lines = vec![emf.render(timestamp_ms)];
    let mut per_state: Vec<(String, f64, u32)> = Vec::new();
    for s in &report.states {
        let d = s.duration_s.unwrap_or(0.0);
        match per_state.iter_mut().find(|(n, _, _)| *n == s.name) {
            Some(e) => {
                e.1 += d;
                e.2 += s.retries;
            }
            None => per_state.push((s.name.clone(), d, s.retries)),
        }
    }
    for (name, secs, retries) in per_state {
        lines.push(
            Emf::new("Handover")
                .dimension("Service", svc.clone())
                .dimension("State", name)
                .metric("StateDurationSeconds", secs, Unit::Seconds)
                .metric("StateRetries", f64::from(retries), Unit::Count)
                .property("incident", report.summary.incident_id.clone())
                .render(timestamp_ms),
        );
    }
    lines
}

fn camel(key: &str) -> String {
    key.split('_')
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect()
}
