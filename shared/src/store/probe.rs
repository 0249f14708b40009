//! Probe counters: consecutive failing ticks and T0 per Region.
//!
//! The next state is computed by [`ProbeRun::advance`], a pure function, and
//! written with one conditional put on the tick the state was read at, so a
//! retried or concurrent tick cannot count twice.

use super::{Attrs, Item, Store, StoreError, call_error, ms, n, s};
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Evidence entries kept per run: the first ticks matter most (T0 and the
/// ticks that crossed the threshold); later ones only add length.
pub const EVIDENCE_CAP: usize = 20;

/// The failing run of one Region as stored.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ProbeRun {
    /// Consecutive failing ticks.
    pub consecutive_failures: u32,
    /// First failing tick of this run.
    pub t0: Option<DateTime<Utc>>,
    /// Last tick recorded.
    pub last_tick: Option<DateTime<Utc>>,
    /// Evidence of the failing ticks (JSON documents), oldest first, capped.
    pub evidence: Vec<String>,
}

/// Result of recording a tick.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TickOutcome {
    /// Recorded; the run as it is now.
    Recorded(ProbeRun),
    /// This tick (or a later one) was already recorded; nothing changed.
    Stale(ProbeRun),
}

impl ProbeRun {
    /// The run after a tick at `tick` that `failed` (or not), with `evidence`.
    /// Returns `None` when the tick is not newer than the last one recorded.
    pub fn advance(&self, tick: DateTime<Utc>, failed: bool, evidence: String) -> Option<ProbeRun> {
        if self.last_tick.is_some_and(|last| tick <= last) {
            return None;
        }
        if !failed {
            return Some(ProbeRun {
                last_tick: Some(tick),
                ..ProbeRun::default()
            });
        }
        let mut next = self.clone();
        next.consecutive_failures = self.consecutive_failures.saturating_add(1);
        next.t0 = Some(self.t0.unwrap_or(tick));
        next.last_tick = Some(tick);
        if next.evidence.len() < EVIDENCE_CAP {
            next.evidence.push(evidence);
        }
        Some(next)
    }

    fn from_item(key: &str, item: &Item) -> Result<Self, StoreError> {
        let a = Attrs::new(key, item);
        Ok(ProbeRun {
            consecutive_failures: u32::try_from(a.opt_i64("consecutive")?.unwrap_or(0)).map_err(
                |_| StoreError::Corrupt {
                    key: key.into(),
                    attribute: "consecutive".into(),
                    problem: "is out of range",
                },
            )?,
            t0: a.opt_time_ms("t0_ms")?,
            last_tick: a.opt_time_ms("last_tick_ms")?,
            evidence: a.strings("evidence")?,
        })
    }
}

fn probe_key(region: &str) -> String {
    format!("PROBE#{region}")
}

impl Store {
    /// The current run of `region`.
    pub async fn probe_run(&self, region: &str) -> Result<ProbeRun, StoreError> {
        let key = probe_key(region);
        Ok(match self.get(&key).await? {
            Some(item) => ProbeRun::from_item(&key, &item)?,
            None => ProbeRun::default(),
        })
    }

    /// Record one tick for `region`. Conditional on the last tick read, so a
    /// duplicate or racing tick is reported as [`TickOutcome::Stale`].
    pub async fn record_tick(
        &self,
        region: &str,
        tick: DateTime<Utc>,
        failed: bool,
        evidence: String,
    ) -> Result<TickOutcome, StoreError> {
        let key = probe_key(region);
        let current = self.probe_run(region).await?;
        let Some(next) = current.advance(tick, failed, evidence) else {
            return Ok(TickOutcome::Stale(current));
        };
        let mut item = Self::key(&key);
        item.insert(
            "consecutive".into(),
            n(i64::from(next.consecutive_failures)),
        );
        item.insert("last_tick_ms".into(), ms(tick));
        if let Some(t0) = next.t0 {
            item.insert("t0_ms".into(), ms(t0));
        }
        item.insert(
            "evidence".into(),
            AttributeValue::L(next.evidence.iter().cloned().map(s).collect()),
        );
        let mut req = self
            .client()
            .put_item()
            .table_name(self.table())
            .set_item(Some(item));
        req = match current.last_tick {
            None => req.condition_expression("attribute_not_exists(last_tick_ms)"),
            Some(last) => req
                .condition_expression("last_tick_ms = :last")
                .expression_attribute_values(":last", ms(last)),
        };
        match req.send().await {
            Ok(_) => Ok(TickOutcome::Recorded(next)),
            Err(e)
                if matches!(
                    e.as_service_error(),
                    Some(PutItemError::ConditionalCheckFailedException(_))
                ) =>
            {
                Ok(TickOutcome::Stale(self.probe_run(region).await?))
            }
            Err(e) => Err(call_error("PutItem", &key, e)),
        }
    }

    /// Forget the failing run of `region` (after a run ended), so the next
    /// failure starts a new incident with a new T0. Conditional on the run's T0.
    pub async fn reset_probe(&self, region: &str, t0: DateTime<Utc>) -> Result<bool, StoreError> {
        let key = probe_key(region);
        let res = self
            .client()
            .update_item()
            .table_name(self.table())
            .set_key(Some(Self::key(&key)))
            .update_expression("SET consecutive = :zero REMOVE t0_ms, evidence")
            .condition_expression("t0_ms = :t0")
            .expression_attribute_values(":zero", n(0))
            .expression_attribute_values(":t0", ms(t0))
            .send()
            .await;
        match res {
            Ok(_) => Ok(true),
            Err(e) if super::primary::conditional_old(&e).is_some() => Ok(false),
            Err(e) => Err(call_error("UpdateItem", &key, e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn t(min: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 30, 14, min, 0).unwrap()
    }

    #[test]
    fn failures_count_up_and_keep_the_first_tick_as_t0() {
        let r = ProbeRun::default();
        let r = r.advance(t(1), true, "a".into()).unwrap();
        let r = r.advance(t(2), true, "b".into()).unwrap();
        assert_eq!(r.consecutive_failures, 2);
        assert_eq!(r.t0, Some(t(1)));
        assert_eq!(r.evidence, vec!["a", "b"]);
    }

    #[test]
    fn a_success_resets_the_run() {
        let r = ProbeRun::default().advance(t(1), true, "a".into()).unwrap();
        let r = r.advance(t(2), false, "ok".into()).unwrap();
        assert_eq!(r.consecutive_failures, 0);
        assert_eq!(r.t0, None);
        assert!(r.evidence.is_empty());
        let r = r.advance(t(3), true, "c".into()).unwrap();
        assert_eq!(r.t0, Some(t(3)));
    }

    #[test]
    fn an_old_or_repeated_tick_changes_nothing() {
        let r = ProbeRun::default().advance(t(2), true, "a".into()).unwrap();
        assert!(r.advance(t(2), true, "again".into()).is_none());
        assert!(r.advance(t(1), false, "late".into()).is_none());
    }

    #[test]
    fn evidence_is_capped() {
        let mut r = ProbeRun::default();
        for i in 0..(EVIDENCE_CAP as u32 + 5) {
            r = r
                .advance(
                    t(0) + chrono::Duration::minutes(i.into()),
                    true,
                    i.to_string(),
                )
                .unwrap();
        }
        assert_eq!(r.evidence.len(), EVIDENCE_CAP);
        assert_eq!(r.evidence[0], "0");
        assert_eq!(r.consecutive_failures, EVIDENCE_CAP as u32 + 5);
    }
}
