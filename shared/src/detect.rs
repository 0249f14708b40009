//! Detection: is P really down? One tick of the every-minute schedule.
//!
//! A tick probes the watched Region with independent signals, combines them
//! with the plan's rule, records the tick (consecutive failures, T0), and after
//! K failures takes the failover lock and starts one named execution.

use crate::adapters::{
    Alarms, AwsError, EndpointProbe, ExecutionStarter, HealthChecks, StartOutcome,
};
use crate::error::{Classify, ErrorName};
use crate::execution::{ExecutionInput, Side};
use crate::plan::{DetectionRule, Plan, Site};
use crate::store::lock::AcquireOutcome;
use crate::store::probe::TickOutcome;
use crate::store::{Store, StoreError};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::time::Duration;
use tracing::{error, info, warn};

/// One signal's verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Signal {
    /// `endpoint`, `health_check` or `alarm`.
    pub name: String,
    /// Does this signal say the Region is failing? `None`: the signal itself failed.
    pub failing: Option<bool>,
    /// What it saw.
    pub observation: String,
    /// How long it took, milliseconds.
    pub latency_ms: u64,
}

/// The evidence of one tick.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TickEvidence {
    /// Tick time (the schedule's event time).
    pub tick: DateTime<Utc>,
    /// Region probed.
    pub region: String,
    /// The signals.
    pub signals: Vec<Signal>,
    /// The rule's verdict.
    pub failed: bool,
    /// The rule applied.
    pub rule: DetectionRule,
    /// The public name as users meet it, observed on a failing tick.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public: Option<crate::public::PublicObservation>,
}

/// What a tick did.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum TickReport {
    /// The watched Region is healthy.
    Healthy {
        /// Region.
        region: String,
    },
    /// Failing, but fewer than K consecutive ticks.
    Suspect {
        /// Region.
        region: String,
        /// Consecutive failures.
        consecutive: u32,
        /// K.
        threshold: u32,
    },
    /// This tick was already recorded (a retried invocation).
    Duplicate {
        /// Region.
        region: String,
    },
    /// K reached while paused: recorded, nothing started.
    Paused {
        /// Why it is paused.
        reason: Option<String>,
    },
    /// K reached, but there is no standby to fail over to (after a failover,
    /// until failback). Logged as an alert.
    NoStandby {
        /// Region watched.
        region: String,
    },
    /// K reached; the lock is held by another incident or cooling down.
    Locked {
        /// Lock outcome.
        lock: AcquireOutcome,
    },
    /// An execution was started.
    Started {
        /// Incident id (the execution name).
        incident_id: String,
        /// Execution ARN.
        execution_arn: String,
    },
    /// The execution for this incident exists already.
    AlreadyRunning {
        /// Incident id.
        incident_id: String,
    },
    /// An execution of this incident's name ended more than [`STALE_AFTER`]
    /// ago, while P is still failing (its audit never reset the probe run).
    /// Execution names stay taken for 90 days, so the probe run restarts and
    /// the lock is released with the plan's cooldown: after it, the next
    /// ticks count a new incident with a new name. Logged as an alert.
    StaleIncident {
        /// The incident id whose execution ended.
        incident_id: String,
        /// Its status.
        status: String,
    },
}

/// Why a tick failed.
#[derive(Debug, thiserror::Error)]
pub enum DetectError {
    /// The state store failed.
    #[error("state store")]
    Store(#[from] StoreError),
    /// StartExecution failed.
    #[error("starting the execution")]
    Start(#[from] AwsError),
    /// The primary record is missing: Handover is not provisioned.
    #[error(
        "the primary record is missing: provision the table (PRIMARY item) before enabling detect"
    )]
    NoPrimaryRecord,
    /// The primary record names a Region the plan does not know.
    #[error(
        "the primary record names Region {0}, which is neither plan.regions.primary nor plan.regions.standby"
    )]
    UnknownRegion(String),
    /// Serialising the input failed (a bug).
    #[error("building the execution input")]
    Input(#[from] serde_json::Error),
}

impl Classify for DetectError {
    fn error_name(&self) -> ErrorName {
        match self {
            DetectError::Store(e) => e.error_name(),
            DetectError::Start(e) => e.error_name(),
            DetectError::NoPrimaryRecord | DetectError::UnknownRegion(_) => ErrorName::Precondition,
            DetectError::Input(_) => ErrorName::Fatal,
        }
    }
}

/// The signal sources a tick uses.
pub struct Signals<'a, E, H, A> {
    /// HTTPS probe.
    pub endpoint: &'a E,
    /// Route 53 health-check status.
    pub health: &'a H,
    /// CloudWatch alarm (us-east-1), if the plan names one.
    pub alarms: Option<&'a A>,
}

/// Probe `site` once and apply the plan's rule.
pub async fn probe<E: EndpointProbe, H: HealthChecks, A: Alarms>(
    plan: &Plan,
    site: &Site,
    tick: DateTime<Utc>,
    signals: &Signals<'_, E, H, A>,
) -> TickEvidence {
    let d = &plan.detection;
    let timeout = Duration::from_millis(d.probe_timeout_ms);
    let endpoint = async {
        let r = signals.endpoint.get(&site.endpoint, timeout).await;
        Signal {
            name: "endpoint".into(),
            failing: Some(!r.ok()),
            observation: match (&r.status, &r.error) {
                (Some(s), _) => format!("GET {} -> HTTP {s}", site.endpoint),
                (None, Some(e)) => format!("GET {} -> {e}", site.endpoint),
                (None, None) => format!("GET {} -> no answer", site.endpoint),
            },
            latency_ms: r.latency_ms,
        }
    };
    let health = async {
        let start = std::time::Instant::now();
        let r = signals
            .health
            .healthy_share(&site.health_check_id, timeout)
            .await;
        let latency_ms = elapsed_ms(start);
        match r {
            Ok((share, checkers)) => Signal {
                name: "health_check".into(),
                failing: Some(share < d.healthy_share_below),
                observation: format!(
                    "health check {}: {:.0}% of {checkers} checkers healthy",
                    site.health_check_id,
                    share * 100.0
                ),
                latency_ms,
            },
            Err(e) => Signal {
                name: "health_check".into(),
                failing: None,
                observation: format!(
                    "health check {}: {}",
                    site.health_check_id,
                    crate::error::chain(&e)
                ),
                latency_ms,
            },
        }
    };
    let alarm = async {
        let (Some(spec), Some(alarms)) = (&d.alarm, signals.alarms) else {
            return None;
        };
        let start = std::time::Instant::now();
        let r = alarms.alarm_state(&spec.name, timeout).await;
        let latency_ms = elapsed_ms(start);
        Some(match r {
            Ok(state) => Signal {
                name: "alarm".into(),
                failing: match state.as_str() {
                    "ALARM" => Some(true),
                    "OK" => Some(false),
                    _ => None,
                },
                observation: format!("alarm {} ({}): {state}", spec.name, spec.region),
                latency_ms,
            },
            Err(e) => Signal {
                name: "alarm".into(),
                failing: None,
                observation: format!("alarm {}: {}", spec.name, crate::error::chain(&e)),
                latency_ms,
            },
        })
    };
    let (endpoint, health, alarm) =
        tokio::join!(Box::pin(endpoint), Box::pin(health), Box::pin(alarm));
    let mut all = vec![endpoint, health];
    all.extend(alarm);
    let failed = verdict(d.rule, &all);
    TickEvidence {
        tick,
        region: site.region.clone(),
        signals: all,
        failed,
        rule: d.rule,
        public: None,
    }
}

fn elapsed_ms(start: std::time::Instant) -> u64 {
    u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// The plan's rule over the signals. A signal that could not be read
/// (`failing: None`) never counts as failing: a broken prober must not fail
/// a healthy Region over.
pub fn verdict(rule: DetectionRule, signals: &[Signal]) -> bool {
    let failing = signals.iter().filter(|s| s.failing == Some(true)).count();
    match rule {
        DetectionRule::AllFailing => !signals.is_empty() && failing == signals.len(),
        DetectionRule::Majority => failing >= 2 && failing * 2 > signals.len(),
    }
}

/// The incident id (and execution name) of a failing run: derived from the
/// Region and T0, so every tick of the same run names the same execution.
pub fn incident_id(service: &str, region: &str, t0: DateTime<Utc>) -> String {
    let name = format!("{service}-{region}-{}", t0.format("%Y%m%dT%H%M%SZ"));
    // Execution names: 1-80 characters of [A-Za-z0-9-_].
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .take(80)
        .collect()
}

/// Everything a tick needs.
pub struct Detector<'a, E, H, A, S> {
    /// The plan.
    pub plan: &'a Plan,
    /// The state store.
    pub store: &'a Store,
    /// The signals.
    pub signals: Signals<'a, E, H, A>,
    /// Starts executions.
    pub starter: &'a S,
    /// Drill mode, copied into the execution input.
    pub drill: bool,
    /// The stack's name: the `Stack` dimension of the heartbeat metrics.
    pub stack: &'a str,
    /// Observes the public name on failing ticks (None: not observed).
    pub public: Option<&'a crate::public::PublicName<'a, crate::adapters::traffic::Route53Control>>,
}

/// The lease detect takes before it starts the run. It covers detect's own
/// tick (its Lambda `Timeout` is 50 s, infra/template.yaml) and the ticks
/// that retry a start that failed. Once the run has started, the lease
/// counts the whole run ([`Plan::failover_lease_s`]). A lock whose run
/// never started frees itself within this.
pub const START_LEASE: chrono::Duration = chrono::Duration::minutes(10);

/// How long after an execution closed detect waits for its audit before
/// taking the incident as stale (the audit's reads, report and Slack post
/// take well under this).
pub const STALE_AFTER: chrono::Duration = chrono::Duration::minutes(15);

/// The heartbeat of one recorded tick, as EMF: `Handover/DetectTicks` (1)
/// and `Handover/UnreadableSignals` (signals that could not be read). The
/// stack alarms when the ticks stop (missing data breaches) and when a
/// signal stays unreadable for several ticks.
pub fn heartbeat(stack: &str, evidence: &TickEvidence) -> crate::telemetry::Emf {
    let unreadable = evidence
        .signals
        .iter()
        .filter(|s| s.failing.is_none())
        .count();
    crate::telemetry::Emf::new("Handover")
        .dimension("Stack", stack)
        .metric("DetectTicks", 1.0, crate::telemetry::Unit::Count)
        .metric(
            "UnreadableSignals",
            unreadable as f64,
            crate::telemetry::Unit::Count,
        )
        .property("region", evidence.region.clone())
}

impl<E: EndpointProbe, H: HealthChecks, A: Alarms, S: ExecutionStarter> Detector<'_, E, H, A, S> {
    /// Run one tick at `tick` (the schedule event's time); `now` is the wall clock.
    pub async fn tick(
        &self,
        tick: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<TickReport, DetectError> {
        let plan = self.plan;
        let record = self
            .store
            .primary()
            .await?
            .ok_or(DetectError::NoPrimaryRecord)?;
        let (watched, standby) = if record.region == plan.regions.primary.region {
            (&plan.regions.primary, Some(&plan.regions.standby))
        } else if record.region == plan.regions.standby.region {
            // After a failover S is primary; P has no replica until failback.
            (&plan.regions.standby, None)
        } else {
            return Err(DetectError::UnknownRegion(record.region));
        };
        let mut evidence = probe(plan, watched, tick, &self.signals).await;
        // While P fails, how users meet the public name (the read RTO as
        // they lived it is the first 200 from S among these).
        if evidence.failed
            && let Some(public) = self.public
        {
            let budget = std::time::Duration::from_millis(plan.detection.probe_timeout_ms);
            evidence.public = Some(public.observe(plan, "detect tick", budget, Utc::now).await);
        }
        let region = watched.region.clone();
        let run = match self
            .store
            .record_tick(
                &region,
                tick,
                evidence.failed,
                serde_json::to_string(&evidence)?,
            )
            .await?
        {
            TickOutcome::Stale(_) => {
                info!(region, %tick, "tick already recorded");
                return Ok(TickReport::Duplicate { region });
            }
            TickOutcome::Recorded(run) => run,
        };
        heartbeat(self.stack, &evidence).emit();
        if !evidence.failed {
            info!(region, "healthy");
            return Ok(TickReport::Healthy { region });
        }
        let threshold = plan.detection.failures_to_trigger;
        if run.consecutive_failures < threshold {
            warn!(
                region,
                consecutive = run.consecutive_failures,
                threshold,
                "failing, below threshold"
            );
            return Ok(TickReport::Suspect {
                region,
                consecutive: run.consecutive_failures,
                threshold,
            });
        }
        let pause = self.store.pause().await?;
        if pause.paused {
            warn!(region, reason = ?pause.reason, "threshold reached but paused: not starting");
            return Ok(TickReport::Paused {
                reason: pause.reason,
            });
        }
        let Some(standby) = standby else {
            error!(
                region,
                alert = true,
                "primary Region failing and no standby is eligible: a person must act"
            );
            return Ok(TickReport::NoStandby { region });
        };
        let t0 = run.t0.unwrap_or(tick);
        let incident = incident_id(&plan.service, &region, t0);
        let lease = crate::plan::span_s(plan.failover_lease_s());
        let lock = self
            .store
            .acquire_lock(
                &incident,
                &self.starter.execution_arn(&incident),
                now,
                START_LEASE,
            )
            .await?;
        match &lock {
            AcquireOutcome::Acquired { .. } | AcquireOutcome::AlreadyOurs { .. } => {}
            AcquireOutcome::Held { by, until } => {
                info!(incident, holder = %by, %until, "lock held by another incident");
                return Ok(TickReport::Locked { lock });
            }
            AcquireOutcome::CoolingDown { until, after } => {
                info!(incident, %until, after = ?after, "cooling down after the last run");
                return Ok(TickReport::Locked { lock });
            }
        }
        let evidence: Vec<serde_json::Value> = run
            .evidence
            .iter()
            .filter_map(|e| serde_json::from_str(e).ok())
            .collect();
        let input = ExecutionInput {
            incident_id: incident.clone(),
            drill: self.drill,
            mode: crate::execution::Mode::Failover,
            t0,
            detected_at: now,
            primary: Side {
                region: record.region.clone(),
                db_instance_id: record.db_instance_id.clone(),
                epoch: Some(record.epoch),
            },
            standby: Side {
                region: standby.region.clone(),
                db_instance_id: standby.db_instance_id.clone(),
                epoch: None,
            },
            evidence,
            plan: plan.clone(),
            failback: None,
        };
        match self
            .starter
            .start(&incident, &serde_json::to_string(&input)?)
            .await?
        {
            StartOutcome::Started { execution_arn } => {
                info!(incident, execution = %execution_arn, %t0, "failover execution started");
                self.renew_from_the_start(&incident, lease).await;
                Ok(TickReport::Started {
                    incident_id: incident,
                    execution_arn,
                })
            }
            StartOutcome::AlreadyExists { status, stopped_at } => {
                match (status.as_deref(), stopped_at) {
                    // Only the four closed statuses count as closed, and only
                    // once the audit has had its time (it releases the lock with
                    // the plan's cooldown and resets the probe run). Anything
                    // else (unknown, unreadable, a new status, just closed) is
                    // taken as running: restarting the count beside a live run,
                    // or racing the audit, would ask again at once.
                    (
                        Some(status @ ("SUCCEEDED" | "FAILED" | "TIMED_OUT" | "ABORTED")),
                        Some(stopped),
                    ) if now >= stopped + STALE_AFTER => {
                        error!(
                            incident,
                            status,
                            alert = true,
                            "the execution for this incident already ended while P is still failing: restarting the count so the next incident gets a new name"
                        );
                        self.store.reset_probe(&region, t0).await?;
                        let cooldown = crate::plan::span_s(plan.timings.cooldown_s);
                        self.store.release_lock(&incident, now, cooldown).await?;
                        Ok(TickReport::StaleIncident {
                            incident_id: incident,
                            status: status.to_owned(),
                        })
                    }
                    _ => {
                        info!(incident, "execution already exists for this incident");
                        if status.as_deref() == Some("RUNNING") {
                            self.renew_from_the_start(&incident, lease).await;
                        }
                        Ok(TickReport::AlreadyRunning {
                            incident_id: incident,
                        })
                    }
                }
            }
        }
    }
}

impl<E: EndpointProbe, H: HealthChecks, A: Alarms, S: ExecutionStarter> Detector<'_, E, H, A, S> {
    /// The lock was taken for [`START_LEASE`] only, perhaps ticks before
    /// when earlier starts failed. Once the run exists, the lease counts the
    /// whole run from now. A renewal that fails leaves the short lease: the
    /// run goes on, the next tick that finds it running renews again, and
    /// an operator is told.
    async fn renew_from_the_start(&self, incident: &str, lease: chrono::Duration) {
        match self.store.renew_lock(incident, Utc::now(), lease).await {
            Ok(true) => {}
            Ok(false) => error!(
                incident,
                alert = true,
                "the execution started but this incident no longer holds the lock"
            ),
            Err(e) => warn!(
                incident,
                alert = true,
                error = %crate::error::chain(&e),
                "the lock's lease could not be renewed from the start: it runs from the tick that took it"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(failing: Option<bool>) -> Signal {
        Signal {
            name: "x".into(),
            failing,
            observation: String::new(),
            latency_ms: 0,
        }
    }

    #[test]
    fn the_heartbeat_counts_the_tick_and_its_unreadable_signals_for_the_stacks_alarms() {
        let evidence = TickEvidence {
            tick: Utc::now(),
            region: "ap-northeast-2".into(),
            signals: vec![s(Some(true)), s(None), s(None)],
            failed: false,
            rule: DetectionRule::AllFailing,
            public: None,
        };
        let line: serde_json::Value =
            serde_json::from_str(&heartbeat("prod", &evidence).render(0)).unwrap();
        assert_eq!(line["DetectTicks"], 1.0);
        assert_eq!(line["UnreadableSignals"], 2.0);
        assert_eq!(line["Stack"], "prod");
        let m = &line["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(m["Namespace"], "Handover");
        assert_eq!(m["Dimensions"][0][0], "Stack");
        // The template's alarms watch exactly these names.
        let template = include_str!("../../infra/template.yaml");
        for name in [
            "MetricName: DetectTicks",
            "MetricName: UnreadableSignals",
            "Namespace: Handover",
        ] {
            assert!(
                template.contains(name),
                "the template has no alarm on {name}"
            );
        }
    }

    #[test]
    fn rules_over_signals() {
        use DetectionRule::*;
        let cases = [
            (AllFailing, vec![Some(true), Some(true)], true),
            (AllFailing, vec![Some(true), Some(false)], false),
            (AllFailing, vec![Some(true), None], false),
            (AllFailing, vec![Some(true), Some(true), Some(true)], true),
            (AllFailing, vec![Some(true), Some(true), Some(false)], false),
            (Majority, vec![Some(true), Some(true), Some(false)], true),
            (Majority, vec![Some(true), None, Some(false)], false),
            (Majority, vec![Some(true), Some(false)], false),
            (Majority, vec![Some(true), Some(true)], true),
            (AllFailing, vec![], false),
        ];
        for (rule, sig, want) in cases {
            let sig: Vec<Signal> = sig.into_iter().map(s).collect();
            assert_eq!(verdict(rule, &sig), want, "{rule:?} {sig:?}");
        }
    }

    #[test]
    fn incident_ids_are_valid_execution_names() {
        let t0 = chrono::TimeZone::with_ymd_and_hms(&Utc, 2026, 11, 30, 14, 11, 55).unwrap();
        assert_eq!(
            incident_id("shop", "ap-northeast-2", t0),
            "shop-ap-northeast-2-20261130T141155Z"
        );
        assert_eq!(
            incident_id("my shop!", "r", t0),
            "my-shop--r-20261130T141155Z"
        );
    }
}
