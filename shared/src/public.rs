//! The public name as users meet it.
//!
//! From the first failing probe until the run ends, each detect tick, the
//! diagnosis and the re-check observe the public name twice: what Route 53
//! answers for it (TestDNSAnswer), and a GET through it (the plan's read
//! URL), with the side that served. The report's read RTO is the first 200
//! from S among these observations, not verify's read, which comes only
//! after promotion and switch: Route 53's health-check failover moves reads
//! to S minutes earlier (the reference drill: reads at T+5:29, the
//! promotion at T+8:34).

use crate::adapters::traffic::DnsAnswers;
use crate::plan::Plan;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// A side of the failover.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    /// The primary Region of the plan.
    P,
    /// The standby Region of the plan.
    S,
}

/// One observation of the public name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PublicObservation {
    /// When.
    pub at: DateTime<Utc>,
    /// Who looked: `detect tick`, `diagnose`, `re-check`, `verify`.
    pub by: String,
    /// What Route 53 answers for the public name.
    #[serde(default)]
    pub dns: Vec<String>,
    /// The side that answer names (None: no answer, or unreadable).
    #[serde(default)]
    pub dns_side: Option<Side>,
    /// The GET's status (None: no answer).
    #[serde(default)]
    pub status: Option<u16>,
    /// Who served the GET: the plan's `served_by_header`, else the DNS side.
    #[serde(default)]
    pub served_by: Option<Side>,
    /// The longest TTL of the public name's record sets: how long a client
    /// may keep an answer after Route 53 changed it (None: not read, or
    /// aliases only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_s: Option<i64>,
    /// What went wrong, if anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl PublicObservation {
    /// Users read from S: a 200 that S served.
    pub fn reads_from_s(&self) -> bool {
        self.status == Some(200) && self.served_by == Some(Side::S)
    }

    /// One line for the report's evidence.
    pub fn describe(&self) -> String {
        format!(
            "{} at {}: DNS {} ({}{}), GET {} served by {}{}",
            self.by,
            self.at.format("%H:%M:%S"),
            if self.dns.is_empty() {
                "no answer".to_owned()
            } else {
                self.dns.join(",")
            },
            side_name(self.dns_side),
            self.ttl_s
                .map(|t| format!(", TTL {t} s"))
                .unwrap_or_default(),
            self.status
                .map_or_else(|| "no answer".to_owned(), |s| s.to_string()),
            side_name(self.served_by),
            self.error
                .as_deref()
                .map(|e| format!(" ({e})"))
                .unwrap_or_default()
        )
    }
}

fn side_name(s: Option<Side>) -> &'static str {
    match s {
        Some(Side::P) => "P",
        Some(Side::S) => "S",
        None => "?",
    }
}

/// What observes the public name.
pub struct PublicName<'a, D> {
    /// TestDNSAnswer.
    pub dns: &'a D,
    /// The GET.
    pub http: &'a reqwest::Client,
}

impl<D: DnsAnswers + Sync> PublicName<'_, D> {
    /// Observe the public name once, within `budget` for each of the two reads.
    pub async fn observe(
        &self,
        plan: &Plan,
        by: &str,
        budget: Duration,
        now: impl Fn() -> DateTime<Utc>,
    ) -> PublicObservation {
        let dns = &plan.dns;
        let at = now();
        let rtype = match dns.record_type {
            crate::plan::RecordType::Alias => "A",
            crate::plan::RecordType::Cname => "CNAME",
        };
        let target = dns
            .standby_target
            .trim_end_matches('.')
            .to_ascii_lowercase();
        let answer = async {
            tokio::time::timeout(
                budget,
                self.dns
                    .answer(&dns.hosted_zone_id, &dns.record_name, rtype),
            )
            .await
        };
        let ttls = async {
            tokio::time::timeout(
                budget,
                self.dns.record_ttls(&dns.hosted_zone_id, &dns.record_name),
            )
            .await
        };
        let url = dns.read_url();
        let get = async { self.http.get(&url).timeout(budget).send().await };
        let (answer, got, ttls) = tokio::join!(answer, get, ttls);
        // Best effort: the TTL qualifies the observation, it is not one.
        let ttl_s = match ttls {
            Ok(Ok(sets)) => sets.iter().filter_map(|(_, t)| *t).max(),
            _ => None,
        };
        let mut errors = Vec::new();
        let answers = match answer {
            Ok(Ok(a)) => a,
            Ok(Err(e)) => {
                errors.push(format!("TestDNSAnswer: {}", crate::error::chain(&e)));
                Vec::new()
            }
            Err(_) => {
                errors.push(format!(
                    "TestDNSAnswer: no answer in {} ms",
                    budget.as_millis()
                ));
                Vec::new()
            }
        };
        let dns_side = if answers.is_empty() {
            None
        } else if answers
            .iter()
            .any(|a| a.trim_end_matches('.').eq_ignore_ascii_case(&target))
        {
            Some(Side::S)
        } else {
            Some(Side::P)
        };
        let (status, header) = match got {
            Ok(r) => {
                let header = dns
                    .served_by_header
                    .as_deref()
                    .and_then(|h| r.headers().get(h))
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned);
                (Some(r.status().as_u16()), header)
            }
            Err(e) => {
                errors.push(format!("GET {url}: {}", crate::error::chain(&e)));
                (None, None)
            }
        };
        let served_by = match header {
            Some(h) if h.eq_ignore_ascii_case(&plan.regions.standby.region) => Some(Side::S),
            Some(h) if h.eq_ignore_ascii_case(&plan.regions.primary.region) => Some(Side::P),
            Some(_) => None,
            None if status.is_some() => dns_side,
            None => None,
        };
        PublicObservation {
            at,
            by: by.to_owned(),
            dns: answers,
            dns_side,
            status,
            served_by,
            ttl_s,
            error: (!errors.is_empty()).then(|| errors.join("; ")),
        }
    }
}
