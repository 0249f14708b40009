//! What one evaluation leaves behind for people and machines: the report
//! files in S3, the EMF metric lines, and the "Handover Readiness Changed"
//! event. Pure functions of a [`Readiness`]; the readiness function writes
//! them.
//!
//! None of them carries more than the checks do. A check's `observed` never
//! quotes a value read with decryption (see the dependency checks), so no
//! secret reaches S3, CloudWatch or EventBridge through them.

use super::{Readiness, Verdict};
use crate::telemetry::{Emf, Unit};
use chrono::{DateTime, Utc};
use serde::Serialize;

/// Where the files go in the report bucket.
pub const PREFIX: &str = "readiness/";

/// The event's `source` (custom sources may not start with `aws.`).
pub const EVENT_SOURCE: &str = "handover.readiness";

/// The event's `detail-type`.
pub const EVENT_DETAIL_TYPE: &str = "Handover Readiness Changed";

/// The metric namespace, as every Handover metric.
pub const NAMESPACE: &str = "Handover";

/// One file to store: its key, content type and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadinessFile {
    /// The key in the report bucket, under [`PREFIX`].
    pub key: String,
    /// `application/json` or `text/markdown; charset=utf-8`.
    pub content_type: &'static str,
    /// The body.
    pub body: String,
}

/// The files of one evaluation, in the order to write them: the dated
/// copies first, then `latest.*`. A `latest` written last never names an
/// evaluation that history lacks.
pub fn files(r: &Readiness, service: &str) -> Vec<ReadinessFile> {
    let json = serde_json::to_string_pretty(&Document::of(r, service)).unwrap_or_default();
    let md = markdown(r, service);
    let dated = history_stem(r.at);
    let file = |key: String, content_type, body: &String| ReadinessFile {
        key,
        content_type,
        body: body.clone(),
    };
    vec![
        file(format!("{dated}.json"), JSON, &json),
        file(format!("{dated}.md"), MARKDOWN, &md),
        file(format!("{PREFIX}latest.json"), JSON, &json),
        file(format!("{PREFIX}latest.md"), MARKDOWN, &md),
    ]
}

/// The key of the latest result as JSON (what `handover readiness --last` reads).
pub fn latest_json_key() -> String {
    format!("{PREFIX}latest.json")
}

const JSON: &str = "application/json";
const MARKDOWN: &str = "text/markdown; charset=utf-8";

/// `readiness/history/2026-12-05/130400.123Z` (add `.json` or `.md`): one
/// folder a day, sorted by time. Milliseconds keep two evaluations of one
/// second (a deploy's and the schedule's) apart.
pub fn history_stem(at: DateTime<Utc>) -> String {
    format!("{PREFIX}history/{}", at.format("%Y-%m-%d/%H%M%S%.3fZ"))
}

/// The JSON file: the service, the counts, and every check.
#[derive(Debug, Serialize, serde::Deserialize, PartialEq)]
pub struct Document {
    /// The plan's service.
    pub service: String,
    /// `readiness: 0 fail, 1 warn, 24 pass`.
    pub summary: String,
    /// The worst verdict.
    pub worst: Verdict,
    /// The evaluation itself (its time and every check).
    #[serde(flatten)]
    pub readiness: Readiness,
}

impl Document {
    fn of(r: &Readiness, service: &str) -> Self {
        Self {
            service: service.to_owned(),
            summary: r.summary(),
            worst: r.worst(),
            readiness: r.clone(),
        }
    }
}

/// The Markdown file: the summary, then a table of every check, the ones
/// that are not a pass first.
pub fn markdown(r: &Readiness, service: &str) -> String {
    let mut out = vec![
        format!("# Readiness of {service}"),
        String::new(),
        format!(
            "{} at {}.",
            r.summary(),
            r.at.format("%Y-%m-%d %H:%M:%S UTC")
        ),
        String::new(),
        "| verdict | check | observed | expected | fix |".to_owned(),
        "|---|---|---|---|---|".to_owned(),
    ];
    let mut checks: Vec<_> = r.checks.iter().collect();
    checks.sort_by_key(|c| std::cmp::Reverse(c.verdict));
    for c in checks {
        out.push(format!(
            "| {} | `{}` | {} | {} | {} |",
            c.verdict.label(),
            c.id,
            cell(&c.observed),
            cell(&c.expected),
            cell(&c.fix)
        ));
    }
    out.push(String::new());
    out.join("\n")
}

/// A table cell: no line break, no column break.
fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace(['\n', '\r'], " ")
}

/// The EMF lines of one evaluation, dimension `Stack`: the counts of pass,
/// warn and fail (`ReadinessPass`, `ReadinessWarn`, `ReadinessFail`),
/// `ReadinessEvaluations` (1: the stack's heartbeat alarm) and
/// `ReadinessFailingTwice` (1 when this evaluation and the one before,
/// `previous_failed`, both have a failing check: the stack's alarm). Then
/// one line per failing check (`ReadinessCheckFailing` = 1, dimensions
/// `Stack` and `Check`).
pub fn emf_lines(
    r: &Readiness,
    previous_failed: bool,
    stack: &str,
    timestamp_ms: i64,
) -> Vec<String> {
    let count = |v| r.count(v) as f64;
    let twice = previous_failed && r.count(Verdict::Fail) > 0;
    let mut lines = vec![
        Emf::new(NAMESPACE)
            .dimension("Stack", stack)
            .metric("ReadinessPass", count(Verdict::Pass), Unit::Count)
            .metric("ReadinessWarn", count(Verdict::Warn), Unit::Count)
            .metric("ReadinessFail", count(Verdict::Fail), Unit::Count)
            .metric("ReadinessEvaluations", 1.0, Unit::Count)
            .metric(
                "ReadinessFailingTwice",
                f64::from(u8::from(twice)),
                Unit::Count,
            )
            .render(timestamp_ms),
    ];
    for c in r.checks.iter().filter(|c| c.verdict == Verdict::Fail) {
        lines.push(
            Emf::new(NAMESPACE)
                .dimension("Stack", stack)
                .dimension("Check", c.id.clone())
                .metric("ReadinessCheckFailing", 1.0, Unit::Count)
                .render(timestamp_ms),
        );
    }
    lines
}

/// The detail of a "Handover Readiness Changed" event (schema in
/// docs/reference/readiness-outputs.md).
#[derive(Debug, Serialize, serde::Deserialize, PartialEq)]
pub struct ChangeDetail {
    /// The plan's service.
    pub service: String,
    /// When the world was read (RFC 3339).
    pub at: DateTime<Utc>,
    /// This evaluation's summary line.
    pub summary: String,
    /// The previous one's, when it is known.
    pub previous_summary: Option<String>,
    /// The worst verdict now.
    pub worst: Verdict,
    /// How many checks pass, warn and fail now.
    pub counts: Counts,
    /// Every check whose verdict differs from the previous evaluation (all
    /// of them when there is none), in the evaluation's order.
    pub changed: Vec<ChangedCheck>,
}

/// How many checks have each verdict.
#[derive(Debug, Serialize, serde::Deserialize, PartialEq)]
pub struct Counts {
    /// Checks that pass.
    pub pass: usize,
    /// Checks that warn.
    pub warn: usize,
    /// Checks that fail.
    pub fail: usize,
}

/// One check whose verdict changed.
#[derive(Debug, Serialize, serde::Deserialize, PartialEq)]
pub struct ChangedCheck {
    /// The check's id.
    pub id: String,
    /// Its verdict before (None: it was not evaluated, or nothing is known).
    pub was: Option<Verdict>,
    /// Its verdict now (None: it is no longer evaluated).
    pub now: Option<Verdict>,
    /// What was observed now (empty when it is no longer evaluated).
    pub observed: String,
    /// The fix, when it does not pass.
    pub fix: String,
}

/// The event's detail for a change from `previous` to `r`. A check is
/// "changed" when its set of verdicts under one id differs: readiness may
/// report one id several times (a check per dependency).
pub fn change_detail(previous: Option<&Readiness>, r: &Readiness, service: &str) -> ChangeDetail {
    let verdicts = |x: &Readiness, id: &str| -> Vec<Verdict> {
        x.checks
            .iter()
            .filter(|c| c.id == id)
            .map(|c| c.verdict)
            .collect()
    };
    let mut changed: Vec<ChangedCheck> = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    for c in &r.checks {
        if seen.contains(&c.id.as_str()) {
            continue;
        }
        seen.push(&c.id);
        let was = previous.map(|p| verdicts(p, &c.id));
        if was.as_ref() == Some(&verdicts(r, &c.id)) {
            continue;
        }
        // The worst instance stands for the id (one line per id).
        let now = r
            .checks
            .iter()
            .filter(|x| x.id == c.id)
            .max_by_key(|x| x.verdict)
            .unwrap_or(c);
        changed.push(ChangedCheck {
            id: c.id.clone(),
            was: was.and_then(|w| w.into_iter().max()),
            now: Some(now.verdict),
            observed: now.observed.clone(),
            fix: now.fix.clone(),
        });
    }
    for gone in previous.iter().flat_map(|p| &p.checks) {
        if !r.checks.iter().any(|c| c.id == gone.id) && !changed.iter().any(|c| c.id == gone.id) {
            changed.push(ChangedCheck {
                id: gone.id.clone(),
                was: Some(gone.verdict),
                now: None,
                observed: String::new(),
                fix: String::new(),
            });
        }
    }
    ChangeDetail {
        service: service.to_owned(),
        at: r.at,
        summary: r.summary(),
        previous_summary: previous.map(Readiness::summary),
        worst: r.worst(),
        counts: Counts {
            pass: r.count(Verdict::Pass),
            warn: r.count(Verdict::Warn),
            fail: r.count(Verdict::Fail),
        },
        changed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::readiness::Check;

    fn check(id: &str, verdict: Verdict) -> Check {
        Check {
            id: id.into(),
            verdict,
            observed: format!("{id} observed"),
            expected: "as planned".into(),
            fix: if verdict == Verdict::Pass {
                String::new()
            } else {
                format!("fix {id}")
            },
        }
    }

    fn at(h: u32, m: u32) -> DateTime<Utc> {
        chrono::TimeZone::with_ymd_and_hms(&Utc, 2026, 12, 5, h, m, 7).unwrap()
    }

    fn readiness(checks: Vec<Check>) -> Readiness {
        Readiness {
            at: at(13, 4),
            checks,
        }
    }

    #[test]
    fn the_files_are_a_dated_copy_then_latest_and_the_json_reads_back() {
        let r = readiness(vec![
            check("rds.p_exists", Verdict::Pass),
            check("secrets.db_user", Verdict::Fail),
        ]);
        let f = files(&r, "shop");
        let keys: Vec<&str> = f.iter().map(|f| f.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "readiness/history/2026-12-05/130407.000Z.json",
                "readiness/history/2026-12-05/130407.000Z.md",
                "readiness/latest.json",
                "readiness/latest.md",
            ]
        );
        assert_eq!(f[0].body, f[2].body);
        let doc: Document = serde_json::from_str(&f[2].body).unwrap();
        assert_eq!(doc.readiness, r);
        assert_eq!(doc.worst, Verdict::Fail);
        assert_eq!(doc.service, "shop");
        assert_eq!(latest_json_key(), f[2].key);
        // The failing check leads the Markdown table.
        let md = &f[3].body;
        let fail = md.find("`secrets.db_user`").unwrap();
        let pass = md.find("`rds.p_exists`").unwrap();
        assert!(fail < pass, "{md}");
        assert!(md.contains("readiness: 1 fail, 0 warn, 1 pass at 2026-12-05 13:04:07 UTC"));
    }

    #[test]
    fn a_cell_with_a_pipe_or_a_line_break_stays_in_its_column() {
        let mut c = check("dns.ttl", Verdict::Warn);
        c.observed = "a | b\nc".into();
        let md = markdown(&readiness(vec![c]), "shop");
        assert!(md.contains("| a \\| b c |"), "{md}");
    }

    /// The shape CloudWatch reads (EMF specification, "Embedded metric
    /// format specification" in the CloudWatch User Guide): every name in
    /// `Dimensions` and `Metrics` is a root member, and metric values are
    /// numbers.
    #[test]
    fn the_emf_lines_parse_as_cloudwatch_reads_them() {
        let r = readiness(vec![
            check("rds.p_exists", Verdict::Pass),
            check("dns.ttl", Verdict::Warn),
            check("secrets.db_user", Verdict::Fail),
            check("slack.in_channel", Verdict::Fail),
        ]);
        let lines = emf_lines(&r, true, "prod", 1_800_000_000_000);
        assert_eq!(lines.len(), 3, "the counts, then one per failing check");
        let mut failing = Vec::new();
        for line in &lines {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            let aws = &v["_aws"];
            assert_eq!(aws["Timestamp"], 1_800_000_000_000_i64);
            let directive = &aws["CloudWatchMetrics"][0];
            assert_eq!(directive["Namespace"], NAMESPACE);
            for set in directive["Dimensions"].as_array().unwrap() {
                for d in set.as_array().unwrap() {
                    assert!(v[d.as_str().unwrap()].is_string(), "{d} in {line}");
                }
            }
            for m in directive["Metrics"].as_array().unwrap() {
                assert!(v[m["Name"].as_str().unwrap()].is_number(), "{m} in {line}");
                assert_eq!(m["Unit"], "Count");
            }
            assert_eq!(v["Stack"], "prod");
            if let Some(c) = v["Check"].as_str() {
                assert_eq!(v["ReadinessCheckFailing"], 1.0);
                failing.push(c.to_owned());
            }
        }
        let counts: serde_json::Value = serde_json::from_str(&lines[0]).unwrap();
        assert_eq!(counts["ReadinessPass"], 1.0);
        assert_eq!(counts["ReadinessWarn"], 1.0);
        assert_eq!(counts["ReadinessFail"], 2.0);
        assert_eq!(counts["ReadinessEvaluations"], 1.0);
        assert_eq!(counts["ReadinessFailingTwice"], 1.0);
        assert_eq!(failing, ["secrets.db_user", "slack.in_channel"]);
    }

    #[test]
    fn failing_twice_needs_this_and_the_previous_evaluation_failing() {
        let twice = |r: &Readiness, previous_failed| {
            let v: serde_json::Value =
                serde_json::from_str(&emf_lines(r, previous_failed, "prod", 0)[0]).unwrap();
            v["ReadinessFailingTwice"].as_f64().unwrap()
        };
        let failing = readiness(vec![check("dns.ttl", Verdict::Fail)]);
        let passing = readiness(vec![check("dns.ttl", Verdict::Warn)]);
        assert_eq!(twice(&failing, true), 1.0);
        assert_eq!(twice(&failing, false), 0.0);
        assert_eq!(twice(&passing, true), 0.0);
    }

    #[test]
    fn the_event_names_only_the_checks_whose_verdict_changed() {
        let before = readiness(vec![
            check("rds.p_exists", Verdict::Pass),
            check("dns.ttl", Verdict::Warn),
            check("slack.bot", Verdict::Pass),
            check("capacity.ecs", Verdict::Pass),
        ]);
        let mut now = readiness(vec![
            check("rds.p_exists", Verdict::Pass),
            check("dns.ttl", Verdict::Pass),
            check("slack.bot", Verdict::Fail),
            check("canary.s_read", Verdict::Warn),
        ]);
        now.at = at(13, 34);
        let d = change_detail(Some(&before), &now, "shop");
        let ids: Vec<(&str, Option<Verdict>, Option<Verdict>)> = d
            .changed
            .iter()
            .map(|c| (c.id.as_str(), c.was, c.now))
            .collect();
        assert_eq!(
            ids,
            [
                ("dns.ttl", Some(Verdict::Warn), Some(Verdict::Pass)),
                ("slack.bot", Some(Verdict::Pass), Some(Verdict::Fail)),
                ("canary.s_read", None, Some(Verdict::Warn)),
                ("capacity.ecs", Some(Verdict::Pass), None),
            ]
        );
        assert_eq!(d.changed[1].fix, "fix slack.bot");
        assert_eq!(d.counts.fail, 1);
        assert_eq!(d.worst, Verdict::Fail);
        assert_eq!(
            d.previous_summary.as_deref(),
            Some("readiness: 0 fail, 1 warn, 3 pass")
        );
        // The first evaluation: every check is new.
        let first = change_detail(None, &before, "shop");
        assert_eq!(first.changed.len(), 4);
        assert!(first.changed.iter().all(|c| c.was.is_none()));
    }

    #[test]
    fn one_id_checked_twice_changes_when_any_of_its_verdicts_does() {
        let before = readiness(vec![
            check("dependencies.ssm_parameter", Verdict::Pass),
            check("dependencies.ssm_parameter", Verdict::Pass),
        ]);
        let now = readiness(vec![
            check("dependencies.ssm_parameter", Verdict::Pass),
            check("dependencies.ssm_parameter", Verdict::Fail),
        ]);
        let d = change_detail(Some(&before), &now, "shop");
        assert_eq!(d.changed.len(), 1);
        assert_eq!(d.changed[0].now, Some(Verdict::Fail));
        assert!(change_detail(Some(&now), &now, "shop").changed.is_empty());
    }
}
