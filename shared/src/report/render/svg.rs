//! The SVG Gantt timeline: phases and states as bars, milestones as
//! diamonds on their own rows, T0 and the RTO target as vertical lines.
//! Self-contained (no fonts, images or scripts) and every text escaped.

use super::{Bar, bars, escape_html as esc, t_plus};
use crate::report::facts::seconds;
use crate::report::model::Report;
use crate::report::numbers::clock;
use std::fmt::Write;

const WIDTH: f64 = 1000.0;
const LABEL_W: f64 = 200.0;
const RIGHT_PAD: f64 = 70.0;
const ROW: f64 = 22.0;
const TOP: f64 = 34.0;

/// The timeline as an `<svg>` element.
pub fn svg_timeline(r: &Report) -> String {
    let bars = bars(r);
    let t0 = r.summary.t0;
    let rto = r.numbers.read_rto.target_s as f64;
    let marks: Vec<(&str, f64, bool)> = r
        .milestones
        .iter()
        .filter_map(|m| m.t_plus_s.map(|t| (m.label.as_str(), t, m.in_order)))
        .collect();
    // Domain: from min(0, earliest) to max(end, RTO target, latest milestone), seconds after T0.
    let mut lo: f64 = 0.0;
    let mut hi: f64 = rto;
    for b in &bars {
        lo = lo.min(seconds(t0, b.start));
        hi = hi.max(seconds(t0, b.end));
    }
    for (_, t, _) in &marks {
        lo = lo.min(*t);
        hi = hi.max(*t);
    }
    let span = (hi - lo).max(1.0) * 1.04;
    let plot_w = WIDTH - LABEL_W - RIGHT_PAD;
    let x = |t: f64| LABEL_W + (t - lo) / span * plot_w;
    let rows = bars.len() + marks.len() + 1;
    let height = TOP + rows as f64 * ROW + 24.0;
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" role="img" aria-labelledby="tl-title" font-family="sans-serif" font-size="12">"#
    );
    let _ = write!(
        s,
        r#"<title id="tl-title">{}</title>"#,
        esc(&format!("Timeline of {} from T0", r.summary.incident_id))
    );
    let _ = write!(
        s,
        r##"<rect x="0" y="0" width="{WIDTH}" height="{height}" fill="#ffffff"/>"##
    );
    // Axis ticks.
    let step = tick_step(span);
    let mut t = (lo / step).ceil() * step;
    while t <= lo + span {
        let xt = x(t);
        let _ = write!(
            s,
            r##"<line x1="{xt:.1}" y1="{}" x2="{xt:.1}" y2="{:.1}" stroke="#e3e6ea"/><text x="{xt:.1}" y="{}" text-anchor="middle" fill="#555">{}</text>"##,
            TOP - 8.0,
            height - 20.0,
            TOP - 14.0,
            esc(&format!("T+{}", clock(t)))
        );
        t += step;
    }
    // Bars.
    let mut y = TOP;
    for b in &bars {
        bar(&mut s, b, y, &x, t0, r);
        y += ROW;
    }
    let _ = write!(
        s,
        r##"<text x="8" y="{:.1}" font-weight="bold" fill="#333">Milestones</text>"##,
        y + 15.0
    );
    y += ROW;
    for (label, t, in_order) in &marks {
        let xm = x(*t);
        let color = if *in_order { "#1f6feb" } else { "#d29922" };
        let cy = y + ROW / 2.0;
        let _ = write!(
            s,
            r##"<text x="8" y="{:.1}" fill="#333">{}</text><path d="M{xm:.1} {:.1} l6 6 l-6 6 l-6 -6 z" fill="{color}"/><text x="{:.1}" y="{:.1}" fill="#333">{}</text>"##,
            cy + 4.0,
            esc(&format!(
                "{label}{}",
                if *in_order { "" } else { " (out of order)" }
            )),
            cy - 6.0,
            xm + 9.0,
            cy + 4.0,
            esc(&format!("T+{}", clock(*t)))
        );
        y += ROW;
    }
    // T0 and the RTO target on top of everything.
    let (x0, xr) = (x(0.0), x(rto));
    let _ = write!(
        s,
        r##"<line x1="{x0:.1}" y1="{:.1}" x2="{x0:.1}" y2="{:.1}" stroke="#222" stroke-width="1.5"/><text x="{:.1}" y="{:.1}" fill="#222" font-weight="bold">T0</text>"##,
        TOP - 6.0,
        height - 20.0,
        x0 + 3.0,
        height - 8.0
    );
    let _ = write!(
        s,
        r##"<line x1="{xr:.1}" y1="{:.1}" x2="{xr:.1}" y2="{:.1}" stroke="#cf222e" stroke-width="1.5" stroke-dasharray="6 4"/><text x="{xr:.1}" y="{:.1}" text-anchor="middle" fill="#cf222e" font-weight="bold">{}</text>"##,
        TOP - 6.0,
        height - 20.0,
        height - 8.0,
        esc(&format!("RTO target {}", clock(rto)))
    );
    s.push_str("</svg>");
    s
}

fn bar(
    s: &mut String,
    b: &Bar,
    y: f64,
    x: &impl Fn(f64) -> f64,
    t0: chrono::DateTime<chrono::Utc>,
    r: &Report,
) {
    let (a, z) = (seconds(t0, b.start), seconds(t0, b.end));
    let (xa, xz) = (x(a), x(z));
    let w = (xz - xa).max(2.0);
    let fill = if b.detection {
        "#8c959f"
    } else if b.failed {
        "#cf222e"
    } else if b.errors {
        // Errors, retried to success.
        "#d29922"
    } else {
        "#2da44e"
    };
    let label = if b.visits > 1 {
        format!("{} ×{}", b.label, b.visits)
    } else {
        b.label.clone()
    };
    let tip = format!(
        "{}: {} → {} ({})",
        b.label,
        t_plus(r, b.start),
        t_plus(r, b.end),
        clock(z - a)
    );
    let _ = write!(
        s,
        r##"<text x="8" y="{:.1}" fill="#333">{}</text><rect x="{xa:.1}" y="{:.1}" width="{w:.1}" height="{:.1}" rx="2" fill="{fill}"><title>{}</title></rect><text x="{:.1}" y="{:.1}" fill="#555">{}</text>"##,
        y + 15.0,
        esc(&truncate(&label, 28)),
        y + 4.0,
        ROW - 8.0,
        esc(&tip),
        xa + w + 4.0,
        y + 15.0,
        esc(&clock(z - a))
    );
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_owned()
    } else {
        let mut t: String = s.chars().take(n - 1).collect();
        t.push('…');
        t
    }
}

fn tick_step(span: f64) -> f64 {
    const STEPS: [f64; 10] = [
        10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1800.0, 3600.0, 7200.0,
    ];
    STEPS
        .iter()
        .copied()
        .find(|st| span / st <= 12.0)
        .unwrap_or_else(|| (span / 12.0 / 3600.0).ceil() * 3600.0)
}
