//! How Handover writes numbers in its text: reports, Slack and logs.

/// `126` or `126.4`.
pub fn fmt_num(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}
