//! Verify: prove the failover worked, or fail the run.
//!
//! Three checks run concurrently, each retried with backoff until the plan's
//! deadline, each recording attempts and its first success: DNS answers with
//! S's target (route53:TestDNSAnswer), a GET of the public name returns 200
//! (the read-RTO point), and the write canary succeeds (the write-RTO point).

use super::StepError;
use super::canary::{Secrets, write_once};
use crate::adapters::traffic::{DnsAnswers, WriterEndpointLookup};
use crate::execution::{Check, ExecutionState, VerifyResult};
use chrono::{DateTime, Utc};
use std::time::Duration;
use tracing::{info, warn};

/// Retry timing.
#[derive(Debug, Clone, Copy)]
pub struct Backoff {
    /// First wait.
    pub first: Duration,
    /// Longest wait.
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            first: Duration::from_millis(250),
            max: Duration::from_secs(5),
        }
    }
}

/// Retry `attempt` until it succeeds or `deadline` passes.
pub async fn until_deadline<F, Fut>(
    deadline: tokio::time::Instant,
    backoff: Backoff,
    mut attempt: F,
) -> Check
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(String, DateTime<Utc>), String>>,
{
    let mut wait = backoff.first;
    let mut check = Check {
        ok: false,
        attempts: 0,
        first_success_at: None,
        last_error: None,
        detail: String::new(),
    };
    loop {
        check.attempts += 1;
        match tokio::time::timeout_at(deadline, attempt()).await {
            Ok(Ok((detail, at))) => {
                check.ok = true;
                check.first_success_at = Some(at);
                check.detail = detail;
                return check;
            }
            Ok(Err(e)) => check.last_error = Some(e),
            Err(_) => {
                check
                    .last_error
                    .get_or_insert_with(|| "deadline reached during the attempt".into());
                return check;
            }
        }
        let now = tokio::time::Instant::now();
        if now + wait >= deadline {
            return check;
        }
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(backoff.max);
    }
}

/// The capabilities verify uses.
pub struct VerifyDeps<'a, D, S, R, W> {
    /// TestDNSAnswer.
    pub dns: &'a D,
    /// DescribeDBInstances on S: the endpoint the canary connects to and
    /// whose name S's certificate must carry.
    pub rds: &'a R,
    /// Secrets for the DB canary.
    pub secrets: &'a S,
    /// Plain HTTP(S).
    pub http: &'a reqwest::Client,
    /// The writer endpoint as it is now.
    pub writer: &'a W,
}

/// One write canary attempt on S's instance endpoint.
async fn canary_attempt<S: Secrets, R: crate::adapters::DbInspector + Sync>(
    state: &ExecutionState,
    rds: &R,
    secrets: &S,
    http: &reqwest::Client,
    budget: Duration,
) -> Result<(String, DateTime<Utc>), String> {
    let plan = &state.input.plan;
    let standby = &plan.regions.standby.db_instance_id;
    // Asked again on every attempt: right after promotion RDS may still
    // be rebooting S and report no endpoint.
    let endpoint = match &plan.canary {
        crate::plan::Canary::Postgres { .. } => {
            rds.describe(standby, budget)
                .await
                .map_err(|e| {
                    format!(
                        "describing S's instance {standby}: {}",
                        crate::error::chain(&e)
                    )
                })?
                .ok_or_else(|| format!("S's instance {standby} does not exist"))?
                .endpoint
        }
        crate::plan::Canary::Http { .. } => None,
    };
    write_once(
        &plan.canary,
        endpoint.as_deref(),
        secrets,
        http,
        &state.input.incident_id,
        budget,
    )
    .await
    .map(|w| (w.detail, w.at))
}

/// How long the first write after promotion is tried before the run goes
/// on to the switch: the switch matters more than the measurement.
pub const FIRST_WRITE_DEADLINE: Duration = Duration::from_secs(10);

/// The write canary right after promotion completed, before the switch
/// (`$.first_write`): the first write S took is not held back by the
/// switch's waits. Advisory: a miss is recorded, never an error, and
/// verify proves the write again after the switch.
pub async fn first_write<S: Secrets, R: crate::adapters::DbInspector + Sync>(
    state: &ExecutionState,
    rds: &R,
    secrets: &S,
    http: &reqwest::Client,
    backoff: Backoff,
) -> Check {
    let plan = &state.input.plan;
    // An http canary POSTs through the public name, which still answers
    // from P's side before the switch: it proves nothing here.
    if let crate::plan::Canary::Http { url } = &plan.canary {
        return Check {
            ok: false,
            attempts: 0,
            first_success_at: None,
            last_error: None,
            detail: format!(
                "skipped: the http canary ({url}) goes through the public name, measured by verify after the switch"
            ),
        };
    }
    let limit = Duration::from_secs(plan.timings.verify_deadline_s).min(FIRST_WRITE_DEADLINE);
    let budget = Duration::from_millis(plan.timings.call_timeout_ms);
    let check = until_deadline(tokio::time::Instant::now() + limit, backoff, || {
        canary_attempt(state, rds, secrets, http, budget)
    })
    .await;
    if check.ok {
        info!(incident = %state.input.incident_id, at = ?check.first_success_at, "first write on S after promotion");
    } else {
        warn!(incident = %state.input.incident_id, error = ?check.last_error, "no write on S within {} s of promotion; the switch goes on and verify tries again", limit.as_secs());
    }
    check
}

/// Run the four checks; a miss fails with `Handover.VerifyFailed` and the evidence.
pub async fn verify<
    D: DnsAnswers,
    S: Secrets,
    R: crate::adapters::DbInspector + Sync,
    W: WriterEndpointLookup + Sync,
>(
    state: &ExecutionState,
    deps: &VerifyDeps<'_, D, S, R, W>,
    backoff: Backoff,
) -> Result<VerifyResult, StepError> {
    let plan = &state.input.plan;
    let started_at = Utc::now();
    let deadline =
        tokio::time::Instant::now() + Duration::from_secs(plan.timings.verify_deadline_s);
    let budget = Duration::from_millis(plan.timings.call_timeout_ms);
    let dns = &plan.dns;
    let want = dns
        .standby_target
        .trim_end_matches('.')
        .to_ascii_lowercase();
    let dns_check = until_deadline(deadline, backoff, || async {
        let alias = dns.record_type == crate::plan::RecordType::Alias;
        let answers = deps
            .dns
            .answer(
                &dns.hosted_zone_id,
                &dns.record_name,
                if alias { "A" } else { "CNAME" },
            )
            .await
            .map_err(|e| crate::error::chain(&e))?;
        // An alias answers with the load balancer's addresses: S's are the
        // ones its own name resolves to now.
        let mut expected = vec![want.clone()];
        if alias && let Ok(addrs) = tokio::net::lookup_host((want.as_str(), 443)).await {
            expected.extend(addrs.map(|a| a.ip().to_string()));
        }
        if answers.iter().any(|a| {
            let a = a.trim_end_matches('.');
            expected.iter().any(|e| a.eq_ignore_ascii_case(e))
        }) {
            Ok((
                format!("{} answers {answers:?}", dns.record_name),
                Utc::now(),
            ))
        } else {
            Err(format!(
                "{} answers {answers:?}, not {want}",
                dns.record_name
            ))
        }
    });
    let read_url = dns.read_url();
    let read_check = until_deadline(deadline, backoff, || async {
        let r = deps
            .http
            .get(&read_url)
            .timeout(budget)
            .send()
            .await
            .map_err(|e| crate::error::chain(&e))?;
        match r.status().as_u16() {
            200 => Ok((format!("GET {read_url} -> 200"), Utc::now())),
            code => Err(format!("GET {read_url} -> HTTP {code}")),
        }
    });
    let incident = &state.input.incident_id;
    let write_check = until_deadline(deadline, backoff, || {
        canary_attempt(state, deps.rds, deps.secrets, deps.http, budget)
    });
    let writer_check = until_deadline(deadline, backoff, || async {
        let target = match &dns.writer {
            crate::plan::WriterEndpoint::Cname { standby_target, .. } => standby_target,
            crate::plan::WriterEndpoint::SsmParameter { standby_value, .. } => standby_value,
        };
        let now = deps
            .writer
            .current(&dns.writer)
            .await
            .map_err(|e| crate::error::chain(&e))?;
        let same = now.as_deref().is_some_and(|v| {
            v.trim_end_matches('.')
                .eq_ignore_ascii_case(target.trim_end_matches('.'))
        });
        if same {
            Ok((format!("the writer endpoint names {target}"), Utc::now()))
        } else {
            Err(format!("the writer endpoint names {now:?}, not {target}"))
        }
    });
    let (dns_c, read_c, write_c, writer_c) = tokio::join!(
        Box::pin(dns_check),
        Box::pin(read_check),
        Box::pin(write_check),
        Box::pin(writer_check)
    );
    let writer_ok = writer_c.ok;
    let result = VerifyResult {
        dns: dns_c,
        read: read_c,
        write: write_c,
        writer: Some(writer_c),
        started_at,
    };
    if result.dns.ok && result.read.ok && result.write.ok && writer_ok {
        info!(incident = %incident, read_at = ?result.read.first_success_at, write_at = ?result.write.first_success_at, "verified");
        Ok(result)
    } else {
        warn!(incident = %incident, dns = result.dns.ok, read = result.read.ok, write = result.write.ok, "verification missed its deadline");
        let evidence = serde_json::to_string(&result).unwrap_or_default();
        Err(StepError::VerifyFailed(format!(
            "checks did not all pass within {} s (dns {}, read {}, write {}, writer endpoint {writer_ok}): {evidence}",
            plan.timings.verify_deadline_s, result.dns.ok, result.read.ok, result.write.ok
        )))
    }
}
