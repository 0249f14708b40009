//! What the drill measures after the run: the backup that completes the
//! conservative RTO; and at the real pace, figures shown as real time and
//! compared with seed 003 and a yardstick.

use super::{Decision, Drill, REGION, fmt_secs};
use crate::pace::{self, Pace};
use anyhow::{Result, anyhow, bail};
use chrono::{DateTime, Utc};
use serde_json::Value;
use std::time::{Duration, Instant};

/// Seed 003's four numbers, in seconds: read RTO 5:29, write RTO 9:14,
/// conservative RTO 13:05, RPO 126 s.
const SEED_003: [(&str, f64); 4] = [
    ("read_rto", 329.0),
    ("write_rto", 554.0),
    ("conservative_rto", 785.0),
    ("rpo", 126.0),
];

impl Drill {
    /// A modelled figure, and at the real pace the real time it stands for.
    pub(super) fn shown(&self, modelled_s: f64) -> String {
        match self.pace.to_real(modelled_s) {
            None => fmt_secs(modelled_s),
            Some(real) => format!("{} (real {})", fmt_secs(modelled_s), fmt_secs(real)),
        }
    }

    /// The new primary's first backup ends after the run, and after audit
    /// wrote the report with the conservative RTO pending. As on AWS, RDS's
    /// "Finished DB Instance backup" (RDS-EVENT-0002) reaches audit through
    /// the template's rule, and audit rewrites the report. Wait for that
    /// backup in the run's standby's RDS events, deliver the event, and
    /// read the report again. A report with nothing pending is returned as
    /// it is, and the drill says why.
    pub(super) async fn with_later_measures(&self, report: Value) -> Result<Value> {
        let status = report["numbers"]["conservative_rto"]["status"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        match status.as_str() {
            "pending" => {}
            "pass" | "miss" | "not_applicable" | "not_reached" => {
                self.say(format!("conservative RTO already {status} when audit ran"));
                return Ok(report);
            }
            other => bail!("the report's conservative RTO has no known status: {other:?}"),
        }
        let (region, db, since) = standby_of(&report)?;
        let finished = self.first_backup_event(&region, &db, since).await?;
        let date = finished.date().map(|d| d.to_string()).unwrap_or_default();
        let outcome = crate::lambdas::invoke("audit", &backup_event(&region, &db, &date)).await?;
        self.say(format!(
            "audit after the backup that finished {date}: {}",
            outcome.to_string().chars().take(160).collect::<String>()
        ));
        let (_, again) = self.fetch_reports().await?;
        let again = again.ok_or_else(|| anyhow!("the report is gone after the backup's audit"))?;
        let measured = &again["numbers"]["conservative_rto"];
        anyhow::ensure!(
            measured["value_s"].is_number(),
            "audit got the backup's event, but the conservative RTO is still not measured: {measured}"
        );
        Ok(again)
    }

    /// The first "Finished DB instance backup" event of `db` in `region` at
    /// or after `since` (Unix seconds), waited for in RDS's events.
    async fn first_backup_event(
        &self,
        region: &str,
        db: &str,
        since: i64,
    ) -> Result<aws_sdk_rds::types::Event> {
        let wait = self.pace.of(&pace::FIRST_BACKUP) * 2 + Duration::from_secs(30);
        self.say(format!(
            "waiting up to {} for the new primary's first backup",
            fmt_secs(wait.as_secs_f64())
        ));
        let rds = self.aws.rds(region).await;
        let t = Instant::now();
        loop {
            let events = rds
                .describe_events()
                .source_type(aws_sdk_rds::types::SourceType::DbInstance)
                .source_identifier(db)
                .start_time(aws_smithy_types::DateTime::from_secs(since))
                .send()
                .await?;
            let finished = events.events().iter().find(|e| {
                e.message()
                    .is_some_and(|m| m.eq_ignore_ascii_case("finished db instance backup"))
                    && e.date().is_some_and(|d| d.secs() >= since)
            });
            if let Some(e) = finished {
                return Ok(e.clone());
            }
            anyhow::ensure!(
                t.elapsed() < wait,
                "no backup of {db} finished within {}: the conservative RTO stays pending",
                fmt_secs(wait.as_secs_f64())
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// The approve drill at the real pace: the four numbers as real time,
    /// from the break, beside seed 003's and the yardstick's. Read after
    /// `handover rpo`, so the RPO is the measured one. Nothing otherwise.
    pub(super) async fn comparison(&self, decision: Decision) -> Result<Vec<String>> {
        let Pace::Real { scale } = self.pace else {
            return Ok(Vec::new());
        };
        if decision != Decision::Approve {
            return Ok(Vec::new());
        }
        let (_, report) = self.fetch_reports().await?;
        let report = report.ok_or_else(|| anyhow!("no report to compare"))?;
        let broken = (*self.broken_at.lock().expect("the break's time"))
            .ok_or_else(|| anyhow!("the drill did not break P"))?;
        let mut lines = vec![
            format!(
                "Real time (modelled x{scale}), from the break, beside seed 003 and the yardstick:"
            ),
            format!(
                "  {:<18} {:>8} {:>9} {:>9}",
                "", "drill", "seed 003", "yardstick"
            ),
        ];
        for (key, seed) in SEED_003 {
            let m = &report["numbers"][key];
            let drill = from_break(m, key, broken, &report)
                .and_then(|v| self.pace.to_real(v))
                .map_or_else(|| "—".into(), fmt_secs);
            lines.push(format!(
                "  {:<18} {:>8} {:>9} {:>9}",
                m["label"].as_str().unwrap_or(key),
                drill,
                fmt_secs(seed),
                yardstick(key).map_or_else(|| "—".into(), fmt_secs)
            ));
        }
        lines.extend(yardstick_note());
        Ok(lines)
    }
}

/// The run's standby (P's instance in a failback's report), its Region, and
/// when the run started (Unix seconds).
fn standby_of(report: &Value) -> Result<(String, String, i64)> {
    let field = |k: &str| report["summary"][k].as_str().map(str::to_owned);
    let started = field("started_at")
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(&t).ok())
        .map(|t| t.timestamp());
    match (field("standby_region"), field("standby_db"), started) {
        (Some(r), Some(d), Some(t)) => Ok((r, d, t)),
        _ => bail!(
            "the report names no standby or start: {}",
            report["summary"]
        ),
    }
}

/// RDS-EVENT-0002 for `db`, as RDS sends it to EventBridge (RDS User Guide,
/// "Amazon RDS event categories and event messages"), through the
/// template's rule to audit.
fn backup_event(region: &str, db: &str, date: &str) -> Value {
    let arn = format!("arn:aws:rds:{region}:123456789012:db:{db}");
    crate::triggers::rule_event(
        "AuditFunction",
        REGION,
        "aws.rds",
        handover::report::reaudit::RDS_DETAIL_TYPE,
        std::slice::from_ref(&arn),
        serde_json::json!({
            "EventCategories": ["backup"],
            "SourceType": "DB_INSTANCE",
            "SourceArn": arn,
            "Date": date,
            "Message": "Finished DB Instance backup",
            "SourceIdentifier": db,
            "EventID": handover::report::reaudit::BACKUP_FINISHED,
        }),
        &[("StandbyDbInstanceId", db)],
    )
}

/// Modelled seconds from the break to a number's point. An RTO ends at its
/// `to_at`; the report's T0 is its first failing probe, kept to the second,
/// so it is not used. The RPO is a span of data, not a point.
fn from_break(m: &Value, key: &str, broken: DateTime<Utc>, report: &Value) -> Option<f64> {
    if key == "rpo" {
        return m["value_s"].as_f64();
    }
    let at = |v: &Value| {
        v.as_str()
            .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
            .map(|t| t.with_timezone(&Utc))
    };
    let to = at(&m["to_at"]).or_else(|| {
        let t0 = at(&report["summary"]["t0"])?;
        Some(t0 + chrono::Duration::milliseconds((m["value_s"].as_f64()? * 1000.0) as i64))
    })?;
    Some((to - broken).as_seconds_f64())
}

/// The yardstick, in real seconds: what the run would take if detection
/// were the health check's own, the fence free and one TTL the only DNS
/// delay. Not a floor: a client can see the new answer before its TTL ends.
fn yardstick(key: &str) -> Option<f64> {
    let promotion = pace::PROMOTE_MODIFYING.real_s + pace::PROMOTE_REBOOTING.real_s;
    let read = pace::HEALTH_CHECK_DETECTION.real_s + pace::RECORD_TTL.real_s;
    match key {
        "read_rto" => Some(read),
        "write_rto" => Some(read + pace::DECISION.real_s + promotion),
        _ => None,
    }
}

fn yardstick_note() -> Vec<String> {
    vec![format!(
        "  yardstick: read = health check {} + TTL {}; write = that + decision {} + promotion {}",
        fmt_secs(pace::HEALTH_CHECK_DETECTION.real_s),
        fmt_secs(pace::RECORD_TTL.real_s),
        fmt_secs(pace::DECISION.real_s),
        fmt_secs(pace::PROMOTE_MODIFYING.real_s + pace::PROMOTE_REBOOTING.real_s)
    )]
}
