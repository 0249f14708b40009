//! The deterministic assessment: the same snapshot always gives the same
//! diagnosis. No model output reaches these rules.

use super::{Snapshot, TargetObservation};
use crate::execution::{Action, Diagnosis, Evidence, Hypothesis, Mode, RiskLevel};
use crate::plan::Plan;

/// Replica statuses from which PromoteReadReplica can run.
const PROMOTABLE: &[&str] = &["available"];

/// Assess a snapshot for a failover.
pub fn assess(plan: &Plan, snap: &Snapshot) -> Diagnosis {
    assess_as(plan, snap, Mode::Failover)
}

/// Assess a snapshot for a run of `mode`. A planned switchover goes ahead
/// only while P is healthy (it stops P's writes itself, and proves S has
/// them all) and S is a usable replica of P; a failing P is a failover's
/// case, not a planned one.
pub fn assess_as(plan: &Plan, snap: &Snapshot, mode: Mode) -> Diagnosis {
    let p = &plan.regions.primary;
    let s = &plan.regions.standby;
    let mut ev: Vec<Evidence> = Vec::new();
    let mut push = |source: String, observation: String, supports: Option<bool>| {
        ev.push(Evidence {
            source,
            observation,
            at: snap.observed_at,
            supports_p_down: supports,
        })
    };

    // --- P --------------------------------------------------------------
    let p_app_down = !snap.p_app.ok();
    push(
        format!("https:{}", p.region),
        describe_probe(&p.endpoint, &snap.p_app),
        Some(p_app_down),
    );
    let p_health_failing = snap
        .p_health
        .as_ref()
        .ok()
        .map(|h| *h < plan.detection.healthy_share_below);
    push(
        format!("route53:health_check:{}", p.health_check_id),
        match &snap.p_health {
            Ok(h) => format!("{:.0}% of checkers healthy", h * 100.0),
            Err(e) => format!("status unknown: {e}"),
        },
        p_health_failing,
    );
    let (p_db_available, p_db_unreachable) = match &snap.p_db {
        Ok(Some(db)) => (db.status == "available", false),
        Ok(None) => (false, false),
        Err(_) => (false, true),
    };
    push(
        format!("rds:{}:DescribeDBInstances:{}", p.region, p.db_instance_id),
        match &snap.p_db {
            Ok(Some(db)) => format!("status={}", db.status),
            Ok(None) => "instance not found".into(),
            Err(e) => format!("API unreachable: {e}"),
        },
        Some(!p_db_available),
    );

    let p_lb = targets_verdict(&snap.p_targets);
    for t in &snap.p_targets {
        push(
            target_source(&p.region, t),
            describe_targets(t),
            match &t.counts {
                Ok(c) => Some(c.healthy == 0),
                // Like P's RDS API: an ELB API that does not answer in P
                // points at P. An answer that is an error (a missing group,
                // a denial) says nothing about P.
                Err(e) => e.unreachable.then_some(true),
            },
        );
    }

    // --- S --------------------------------------------------------------
    let s_app_ok = snap.s_app.ok();
    push(
        format!("https:{}", s.region),
        describe_probe(&s.endpoint, &snap.s_app),
        None,
    );
    let s_health_ok = snap
        .s_health
        .as_ref()
        .ok()
        .map(|h| *h >= plan.detection.healthy_share_below);
    push(
        format!("route53:health_check:{}", s.health_check_id),
        match &snap.s_health {
            Ok(h) => format!("{:.0}% of checkers healthy", h * 100.0),
            Err(e) => format!("status unknown: {e}"),
        },
        None,
    );
    let replica = snap.s_db.as_ref().ok().and_then(|d| d.as_ref());
    let replica_of_p = replica.is_some_and(|d| {
        d.replication_source.as_deref().is_some_and(|src| {
            src == p.db_instance_id || src.ends_with(&format!(":db:{}", p.db_instance_id))
        })
    });
    push(
        format!("rds:{}:DescribeDBInstances:{}", s.region, s.db_instance_id),
        match &snap.s_db {
            Ok(Some(d)) => format!(
                "status={}, replication source={}, master user={}",
                d.status,
                d.replication_source.as_deref().unwrap_or("none"),
                d.master_username.as_deref().unwrap_or("?")
            ),
            Ok(None) => "replica not found".into(),
            Err(e) => format!("API unreachable: {e}"),
        },
        None,
    );
    let lag = snap
        .lag
        .as_ref()
        .ok()
        .and_then(|l| l.as_ref())
        .map(|l| l.seconds);
    push(
        format!("cloudwatch:{}:ReplicaLag:{}", s.region, s.db_instance_id),
        match &snap.lag {
            Ok(Some(l)) if l.seconds < 0.0 => format!(
                "{} (replication stopped) at {}",
                l.seconds,
                l.at.to_rfc3339()
            ),
            Ok(Some(l)) => format!("{} s at {}", l.seconds, l.at.to_rfc3339()),
            Ok(None) => "no samples in the last 5 minutes".into(),
            Err(e) => format!("unknown: {e}"),
        },
        None,
    );

    for t in &snap.s_targets {
        push(target_source(&s.region, t), describe_targets(t), None);
    }
    let s_empty_groups: Vec<&str> = snap
        .s_targets
        .iter()
        .filter(|t| t.counts.as_ref().is_ok_and(|c| c.healthy == 0))
        .map(TargetObservation::name)
        .collect();

    // --- rules ------------------------------------------------------------
    let target = plan.targets.rpo_s;
    let rpo_estimate_s = lag;
    // Unknown lag is over the target too: approving must accept, explicitly,
    // an unknown loss (the message's "accept unknown data loss" button).
    let rpo_over_target = lag.is_none_or(|l| l < 0.0 || l > target as f64);
    let replica_status = replica.map(|d| d.status.as_str());
    let mut reasons = Vec::new();

    let blocked_rule = if replica.is_none() {
        Some(match &snap.s_db {
            Err(_) => "replica status unknown: S's RDS API is unreachable".to_string(),
            _ => format!("no replica {} in {}", s.db_instance_id, s.region),
        })
    } else if !replica_of_p {
        Some(format!(
            "{} is not a replica of {}",
            s.db_instance_id, p.db_instance_id
        ))
    } else if lag.is_some_and(|l| l < 0.0) {
        Some("ReplicaLag is -1: replication has stopped".to_string())
    } else if !replica_status.is_some_and(|st| PROMOTABLE.contains(&st)) {
        Some(format!(
            "replica status is {}, not available",
            replica_status.unwrap_or("unknown")
        ))
    } else {
        None
    };
    let p_recovered = !p_app_down && p_health_failing != Some(true);

    let (action, risk, risk_rule) = if mode == Mode::Switchover {
        if let Some(rule) = switchover_blocker(plan) {
            reasons.push(rule.clone());
            (
                Action::Escalate,
                RiskLevel::Blocked,
                format!("blocked: {rule}"),
            )
        } else if let Some(rule) = blocked_rule {
            reasons.push(rule.clone());
            reasons.push("a planned switchover needs a usable replica of P".into());
            (
                Action::Escalate,
                RiskLevel::Blocked,
                format!("blocked: {rule}"),
            )
        } else if !p_recovered {
            let rule = "p_failing: P is failing; a planned switchover stops a healthy P's writes and proves S has them all, so it cannot run now (detect fails over when P is really down)".to_string();
            reasons.push(rule.clone());
            (Action::Escalate, RiskLevel::Blocked, rule)
        } else {
            reasons.push(
                "P is healthy and S replicates it: the switchover stops P's writes and promotes S only once S has replayed all of them"
                    .into(),
            );
            (
                Action::SwitchOver,
                RiskLevel::Low,
                "planned_switchover: P healthy, replica available; RPO 0 is proven before promotion or nothing is promoted".to_string(),
            )
        }
    } else if p_recovered {
        reasons.push("P's endpoint answers and its health check is not failing".into());
        (
            Action::Recovered,
            RiskLevel::Low,
            "p_recovered: P answers again; nothing to do".to_string(),
        )
    } else if let Some(rule) = blocked_rule {
        reasons.push(rule.clone());
        reasons.push(
            "failover is impossible or would lose an unknown amount of data: a person must act"
                .into(),
        );
        (
            Action::Escalate,
            RiskLevel::Blocked,
            format!("blocked: {rule}"),
        )
    } else {
        let (risk, rule) = if lag.is_none() {
            (
                RiskLevel::High,
                "lag_unknown: no ReplicaLag sample, data loss cannot be estimated: approving accepts an unknown loss".into(),
            )
        } else if rpo_over_target {
            (
                RiskLevel::High,
                format!(
                    "rpo_over_target: replica lag {} s exceeds the RPO target {target} s",
                    fmt_s(lag.unwrap_or_default())
                ),
            )
        } else if p_db_available {
            (
                RiskLevel::Medium,
                "p_db_healthy: P's database answers as available; the failure looks application-level and fencing must hold"
                    .into(),
            )
        } else if !s_app_ok || s_health_ok == Some(false) || !s_empty_groups.is_empty() {
            let what = if s_empty_groups.is_empty() {
                "S's app or health check is not healthy yet".to_string()
            } else {
                format!(
                    "S's target group(s) {} have no healthy targets: scale S's app before traffic moves",
                    s_empty_groups.join(", ")
                )
            };
            (RiskLevel::Medium, format!("s_not_ready: {what}"))
        } else {
            (
                RiskLevel::Low,
                format!(
                    "healthy_replica: replica available, lag {} s within {target} s",
                    fmt_s(lag.unwrap_or_default())
                ),
            )
        };
        reasons.push("P is failing and S's replica can be promoted".into());
        if rpo_over_target {
            reasons.push("approval must acknowledge possible data loss".into());
        }
        // Whichever rule set the risk, an S with nothing healthy behind its
        // load balancer is worth saying before traffic moves there.
        if !s_empty_groups.is_empty() {
            reasons.push(format!(
                "S's target group(s) {} have no healthy targets: scale S's app before traffic moves",
                s_empty_groups.join(", ")
            ));
        }
        (Action::FailOver, risk, rule)
    };

    let hypotheses = hypotheses(HypothesisInput {
        p_app_down,
        p_health_failing,
        p_db_available,
        p_db_unreachable,
        s_app_ok,
        replica_usable: matches!(action, Action::FailOver | Action::SwitchOver)
            || (p_recovered && replica_of_p && !lag.is_some_and(|l| l < 0.0)),
        lag,
        replica_found: replica.is_some(),
        p_lb,
    });
    let summary = summary(
        plan,
        action,
        risk,
        lag,
        target,
        &snap.p_app,
        p_health_failing,
        &snap.p_db,
        p_lb,
    );
    Diagnosis {
        observed_at: snap.observed_at,
        evidence: ev,
        hypotheses,
        risk,
        risk_rule,
        rpo_estimate_s,
        rpo_target_s: target,
        // A switchover never promotes with a loss: nothing to accept.
        rpo_over_target: rpo_over_target && mode == Mode::Failover,
        action,
        reasons,
        summary,
        explanation: None,
        public: None,
    }
}

/// What in the plan keeps a planned switchover from proving RPO 0.
fn switchover_blocker(plan: &Plan) -> Option<String> {
    if plan.database.kind == crate::plan::DatabaseKind::AuroraGlobal {
        return Some(
            "a planned switchover of an Aurora global database is SwitchoverGlobalCluster's job, which Handover does not drive yet".into(),
        );
    }
    if !plan.fence.end_sessions {
        return Some(
            "a planned switchover needs fence.end_sessions: true (without the restart, P's open sessions go on writing)".into(),
        );
    }
    if matches!(plan.canary, crate::plan::Canary::Http { .. }) {
        return Some(
            "a planned switchover needs a postgres canary: it reads S's replay position to prove RPO 0".into(),
        );
    }
    None
}

fn fmt_s(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// P's load balancer, over every named target group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LbVerdict {
    /// No target group named.
    NotNamed,
    /// Some group has a healthy target.
    SomeHealthy,
    /// Every group answered, none has a healthy target.
    NoneHealthy,
    /// No group's API answered (timeouts, connection failures).
    Unreachable,
    /// Anything else: errors, or a mix of empty and unanswered groups.
    Unknown,
}

fn targets_verdict(groups: &[TargetObservation]) -> LbVerdict {
    if groups.is_empty() {
        return LbVerdict::NotNamed;
    }
    let answered: Vec<_> = groups
        .iter()
        .filter_map(|t| t.counts.as_ref().ok())
        .collect();
    if answered.iter().any(|c| c.healthy > 0) {
        LbVerdict::SomeHealthy
    } else if groups
        .iter()
        .all(|t| t.counts.as_ref().is_err_and(|e| e.unreachable))
    {
        LbVerdict::Unreachable
    } else if answered.len() == groups.len() {
        LbVerdict::NoneHealthy
    } else {
        LbVerdict::Unknown
    }
}

fn target_source(region: &str, t: &TargetObservation) -> String {
    format!("elbv2:{region}:DescribeTargetHealth:{}", t.name())
}

fn describe_targets(t: &TargetObservation) -> String {
    match &t.counts {
        Ok(c) if c.total == 0 => "no targets registered: 0 healthy".into(),
        Ok(c) => format!("{} of {} targets healthy", c.healthy, c.total),
        Err(e) if e.unreachable => format!("API unreachable: {}", e.message),
        Err(e) => format!("unknown: {}", e.message),
    }
}

fn describe_probe(url: &str, r: &crate::adapters::ProbeResult) -> String {
    match (&r.status, &r.error) {
        (Some(code), _) => format!("GET {url} -> HTTP {code} in {} ms", r.latency_ms),
        (None, Some(e)) => format!("GET {url} -> {e}"),
        (None, None) => format!("GET {url} -> no answer"),
    }
}

struct HypothesisInput {
    p_app_down: bool,
    p_health_failing: Option<bool>,
    p_db_available: bool,
    p_db_unreachable: bool,
    s_app_ok: bool,
    replica_usable: bool,
    replica_found: bool,
    lag: Option<f64>,
    p_lb: LbVerdict,
}

fn hypotheses(h: HypothesisInput) -> Vec<Hypothesis> {
    let mut out = Vec::new();
    let mut add = |id: &str, title: &str, pairs: Vec<(bool, &str, bool)>| {
        // (condition, text, is "for")
        let mut f = Vec::new();
        let mut a = Vec::new();
        for (cond, text, is_for) in pairs {
            if cond {
                if is_for {
                    f.push(text.to_string())
                } else {
                    a.push(text.to_string())
                }
            }
        }
        let standing = match (f.len(), a.len()) {
            (n, 0) if n >= 2 => "likely",
            (0, _) => "unlikely",
            (n, m) if n > m => "possible",
            _ => "unlikely",
        };
        out.push(Hypothesis {
            id: id.into(),
            title: title.into(),
            evidence_for: f,
            evidence_against: a,
            standing: standing.into(),
        });
    };
    let hc_fail = h.p_health_failing == Some(true);
    let hc_ok = h.p_health_failing == Some(false);
    let lb_none = h.p_lb == LbVerdict::NoneHealthy;
    let lb_some = h.p_lb == LbVerdict::SomeHealthy;
    add(
        "regional_outage",
        "Regional outage in P",
        vec![
            (h.p_app_down, "P's own endpoint does not answer 2xx", true),
            (hc_fail, "Route 53 checkers worldwide see P unhealthy", true),
            (h.p_db_unreachable, "P's RDS API does not answer", true),
            (
                h.p_lb == LbVerdict::Unreachable,
                "P's load-balancer API does not answer",
                true,
            ),
            (h.p_db_available, "P's database reports available", false),
            (
                lb_some,
                "P's load balancer still has healthy targets",
                false,
            ),
            (
                !h.s_app_ok,
                "S does not answer either (a wider problem, or the prober's network)",
                false,
            ),
        ],
    );
    add(
        "application_failure",
        "Application-level failure in P, database healthy",
        vec![
            (h.p_app_down, "P's own endpoint does not answer 2xx", true),
            (h.p_db_available, "P's database reports available", true),
            (
                lb_none && h.p_db_available,
                "P's load balancer has no healthy targets while its database is up",
                true,
            ),
            (h.p_db_unreachable, "P's RDS API does not answer", false),
        ],
    );
    add(
        "network_partition",
        "Network partition between the prober and P",
        vec![
            (h.p_app_down, "the prober cannot reach P's endpoint", true),
            (
                hc_ok,
                "Route 53 checkers in other locations see P healthy",
                true,
            ),
            (
                lb_some,
                "P's load balancer sees healthy targets behind it",
                true,
            ),
            (hc_fail, "Route 53 checkers also see P unhealthy", false),
            (lb_none, "P's load balancer has no healthy targets", false),
        ],
    );
    add(
        "false_alarm",
        "False alarm: P is serving",
        vec![
            (!h.p_app_down, "P's endpoint answers 2xx now", true),
            (hc_ok, "Route 53 checkers see P healthy", true),
            (lb_some, "P's load balancer has healthy targets", true),
            (h.p_app_down, "P's endpoint does not answer 2xx now", false),
            (hc_fail, "Route 53 checkers see P unhealthy", false),
        ],
    );
    add(
        "replica_broken",
        "Replica already broken: failover impossible or lossy",
        vec![
            (
                h.lag.is_some_and(|l| l < 0.0),
                "ReplicaLag is -1 (replication stopped)",
                true,
            ),
            (
                !h.replica_found,
                "the replica is missing or cannot be described",
                true,
            ),
            (
                h.replica_found && !h.replica_usable,
                "the replica is not in a promotable state",
                true,
            ),
            (
                h.replica_usable,
                "the replica is available and replicating from P",
                false,
            ),
        ],
    );
    out
}

#[allow(clippy::too_many_arguments)]
fn summary(
    plan: &Plan,
    action: Action,
    risk: RiskLevel,
    lag: Option<f64>,
    target: u64,
    p_app: &crate::adapters::ProbeResult,
    p_health_failing: Option<bool>,
    p_db: &Result<Option<crate::adapters::DbInstance>, String>,
    p_lb: LbVerdict,
) -> String {
    let p = &plan.regions.primary.region;
    let s = &plan.regions.standby.region;
    let app = match (&p_app.status, &p_app.error) {
        (Some(code), _) => format!("app HTTP {code}"),
        (None, Some(e)) => format!("app {e}"),
        (None, None) => "app silent".into(),
    };
    let hc = match p_health_failing {
        Some(true) => "health check failing",
        Some(false) => "health check passing",
        None => "health check unknown",
    };
    let db = match p_db {
        Ok(Some(d)) => format!("DB {}", d.status),
        Ok(None) => "DB not found".into(),
        Err(_) => "DB API unreachable".into(),
    };
    let lb = match p_lb {
        LbVerdict::NotNamed => "",
        LbVerdict::SomeHealthy => ", LB has healthy targets",
        LbVerdict::NoneHealthy => ", LB has no healthy targets",
        LbVerdict::Unreachable | LbVerdict::Unknown => ", LB targets unknown",
    };
    let lag = match lag {
        Some(l) if l < 0.0 => "replication stopped".to_string(),
        Some(l) => format!("replica lag {} s (target {target} s)", fmt_s(l)),
        None => "replica lag unknown".into(),
    };
    let what = match action {
        Action::FailOver => format!("Recommend failing over to {s}."),
        Action::Recovered => "P is serving again: no failover.".into(),
        Action::Escalate => format!("Failover to {s} is blocked: escalate."),
        Action::SwitchOver => format!(
            "Planned switchover to {s}: P's writes stop, and S is promoted once it has replayed all of them."
        ),
    };
    let risk = format!("{risk:?}").to_lowercase();
    format!("{p}: {app}, {hc}, {db}{lb}. {s}: {lag}. Risk {risk}. {what}")
}
