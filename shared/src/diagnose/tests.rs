//! The rules as a table: the same evidence gives the same assessment.

use super::*;
use crate::execution::{Action, RiskLevel};
use chrono::TimeZone;

fn plan() -> Plan {
    Plan::from_json(include_str!("../../../infra/plan.example.jsonc")).unwrap()
}

fn t() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 30, 14, 13, 0).unwrap()
}

fn probe(status: Option<u16>) -> ProbeResult {
    ProbeResult {
        status,
        error: status.is_none().then(|| "timed out after 3000 ms".into()),
        latency_ms: 12,
        at: t(),
    }
}

fn db(id: &str, status: &str, source: Option<&str>) -> DbInstance {
    DbInstance {
        id: id.into(),
        arn: format!("arn:aws:rds:x:123456789012:db:{id}"),
        status: status.into(),
        replication_source: source.map(str::to_owned),
        replicas: vec![],
        security_groups: vec!["sg-app".into()],
        unsettled_security_groups: vec![],
        master_username: Some("admin".into()),
        backup_retention_days: 0,
        latest_restorable_time: None,
        endpoint: None,
        vpc_id: None,
        read_replication: None,
    }
}

/// P fully down, S healthy with `lag` seconds of lag.
pub(super) fn down(lag: f64) -> Snapshot {
    Snapshot {
        observed_at: t(),
        p_app: probe(None),
        s_app: probe(Some(200)),
        p_health: Ok(0.0),
        s_health: Ok(1.0),
        p_db: Err("rds:DescribeDBInstances in ap-northeast-2 timed out after 5000 ms".into()),
        s_db: Ok(Some(db(
            "shop-db-replica",
            "available",
            Some("arn:aws:rds:ap-northeast-2:123456789012:db:shop-db"),
        ))),
        lag: Ok(Some(LagSample {
            seconds: lag,
            at: t(),
        })),
        p_targets: vec![],
        s_targets: vec![],
    }
}

/// A target group read: `Ok((healthy, total))`, or `Err((message, unreachable))`.
fn tg(region: &str, name: &str, counts: Result<(usize, usize), (&str, bool)>) -> TargetObservation {
    TargetObservation {
        arn: format!(
            "arn:aws:elasticloadbalancing:{region}:123456789012:targetgroup/{name}/73e2d6bc24d8a067"
        ),
        counts: counts
            .map(|(healthy, total)| TargetCounts { healthy, total })
            .map_err(|(message, unreachable)| ReadError {
                message: message.into(),
                unreachable,
            }),
    }
}

fn standing(d: &Diagnosis, id: &str) -> String {
    hypothesis(d, id).standing.clone()
}

fn hypothesis<'a>(d: &'a Diagnosis, id: &str) -> &'a crate::execution::Hypothesis {
    d.hypotheses
        .iter()
        .find(|h| h.id == id)
        .unwrap_or_else(|| panic!("no hypothesis {id}"))
}

/// The first evidence item whose source starts with `prefix`.
fn evidence<'a>(d: &'a Diagnosis, prefix: &str) -> &'a crate::execution::Evidence {
    d.evidence
        .iter()
        .find(|e| e.source.starts_with(prefix))
        .unwrap_or_else(|| panic!("no evidence from {prefix}: {:?}", d.evidence))
}

#[test]
fn rule_table() {
    struct Case {
        name: &'static str,
        snap: Snapshot,
        action: Action,
        risk: RiskLevel,
        rule_prefix: &'static str,
        over: bool,
    }
    let cases = vec![
        Case {
            name: "healthy replica, lag 5 s",
            snap: down(5.0),
            action: Action::FailOver,
            risk: RiskLevel::Low,
            rule_prefix: "healthy_replica",
            over: false,
        },
        Case {
            name: "lag 300 s",
            snap: down(300.0),
            action: Action::FailOver,
            risk: RiskLevel::High,
            rule_prefix: "rpo_over_target",
            over: true,
        },
        Case {
            name: "lag -1",
            snap: down(-1.0),
            action: Action::Escalate,
            risk: RiskLevel::Blocked,
            rule_prefix: "blocked: ReplicaLag is -1",
            over: true,
        },
        Case {
            name: "replica missing",
            snap: Snapshot {
                s_db: Ok(None),
                ..down(5.0)
            },
            action: Action::Escalate,
            risk: RiskLevel::Blocked,
            rule_prefix: "blocked: no replica",
            over: false,
        },
        Case {
            name: "replica not of P",
            snap: Snapshot {
                s_db: Ok(Some(db("shop-db-replica", "available", None))),
                ..down(5.0)
            },
            action: Action::Escalate,
            risk: RiskLevel::Blocked,
            rule_prefix: "blocked: shop-db-replica is not a replica of shop-db",
            over: false,
        },
        Case {
            name: "replica storage-full",
            snap: Snapshot {
                s_db: Ok(Some(db("shop-db-replica", "storage-full", Some("shop-db")))),
                ..down(5.0)
            },
            action: Action::Escalate,
            risk: RiskLevel::Blocked,
            rule_prefix: "blocked: replica status is storage-full",
            over: false,
        },
        Case {
            name: "S's RDS API unreachable",
            snap: Snapshot {
                s_db: Err("timed out".into()),
                ..down(5.0)
            },
            action: Action::Escalate,
            risk: RiskLevel::Blocked,
            rule_prefix: "blocked: replica status unknown",
            over: false,
        },
        Case {
            name: "no lag sample",
            snap: Snapshot {
                lag: Ok(None),
                ..down(5.0)
            },
            action: Action::FailOver,
            risk: RiskLevel::High,
            rule_prefix: "lag_unknown",
            over: true,
        },
        Case {
            name: "P recovered",
            snap: Snapshot {
                p_app: probe(Some(200)),
                p_health: Ok(1.0),
                ..down(5.0)
            },
            action: Action::Recovered,
            risk: RiskLevel::Low,
            rule_prefix: "p_recovered",
            over: false,
        },
        Case {
            name: "P's DB healthy, only the app down",
            snap: Snapshot {
                p_db: Ok(Some(db("shop-db", "available", None))),
                ..down(5.0)
            },
            action: Action::FailOver,
            risk: RiskLevel::Medium,
            rule_prefix: "p_db_healthy",
            over: false,
        },
        Case {
            name: "S's target group has no healthy target",
            snap: Snapshot {
                s_targets: vec![
                    tg("ap-northeast-1", "shop-s-web", Ok((0, 2))),
                    tg("ap-northeast-1", "shop-s-api", Ok((2, 2))),
                ],
                ..down(5.0)
            },
            action: Action::FailOver,
            risk: RiskLevel::Medium,
            rule_prefix: "s_not_ready: S's target group(s) shop-s-web have no healthy targets",
            over: false,
        },
        Case {
            name: "S's ELB API unreachable is not a reason to hold back",
            snap: Snapshot {
                s_targets: vec![tg("ap-northeast-1", "shop-s-web", Err(("timed out", true)))],
                ..down(5.0)
            },
            action: Action::FailOver,
            risk: RiskLevel::Low,
            rule_prefix: "healthy_replica",
            over: false,
        },
        Case {
            name: "S app not ready",
            snap: Snapshot {
                s_app: probe(Some(503)),
                ..down(5.0)
            },
            action: Action::FailOver,
            risk: RiskLevel::Medium,
            rule_prefix: "s_not_ready",
            over: false,
        },
    ];
    let plan = plan();
    for c in cases {
        let d = rules::assess(&plan, &c.snap);
        assert_eq!(d.action, c.action, "{}", c.name);
        assert_eq!(d.risk, c.risk, "{}", c.name);
        assert!(
            d.risk_rule.starts_with(c.rule_prefix),
            "{}: {}",
            c.name,
            d.risk_rule
        );
        assert_eq!(d.rpo_over_target, c.over, "{}", c.name);
        assert_eq!(d.rpo_target_s, 60);
        assert_eq!(d.hypotheses.len(), 5, "{}", c.name);
        assert!(!d.summary.is_empty());
        // Deterministic: the same snapshot gives the same diagnosis.
        assert_eq!(d, rules::assess(&plan, &c.snap), "{}", c.name);
    }
}

#[test]
fn the_rpo_estimate_is_the_lag() {
    let d = rules::assess(&plan(), &down(5.0));
    assert_eq!(d.rpo_estimate_s, Some(5.0));
    assert!(
        d.summary.contains("replica lag 5 s (target 60 s)"),
        "{}",
        d.summary
    );
    assert!(
        d.summary
            .contains("Recommend failing over to ap-northeast-1"),
        "{}",
        d.summary
    );
}

#[test]
fn hypotheses_follow_the_evidence() {
    let plan = plan();
    let outage = rules::assess(&plan, &down(5.0));
    assert_eq!(standing(&outage, "regional_outage"), "likely");
    assert_eq!(standing(&outage, "false_alarm"), "unlikely");
    assert_eq!(standing(&outage, "replica_broken"), "unlikely");

    let app_only = rules::assess(
        &plan,
        &Snapshot {
            p_db: Ok(Some(db("shop-db", "available", None))),
            ..down(5.0)
        },
    );
    assert_eq!(standing(&app_only, "application_failure"), "likely");
    assert_ne!(standing(&app_only, "regional_outage"), "likely");

    let partition = rules::assess(
        &plan,
        &Snapshot {
            p_health: Ok(1.0),
            ..down(5.0)
        },
    );
    assert_eq!(standing(&partition, "network_partition"), "likely");

    let broken = rules::assess(&plan, &down(-1.0));
    assert_eq!(standing(&broken, "replica_broken"), "likely");
}

#[test]
fn every_evidence_item_names_its_source() {
    let d = rules::assess(&plan(), &down(5.0));
    let sources: Vec<&str> = d.evidence.iter().map(|e| e.source.as_str()).collect();
    assert!(
        sources.contains(&"rds:ap-northeast-2:DescribeDBInstances:shop-db"),
        "{sources:?}"
    );
    assert!(
        sources.contains(&"cloudwatch:ap-northeast-1:ReplicaLag:shop-db-replica"),
        "{sources:?}"
    );
    let p_db = evidence(&d, "rds:ap-northeast-2");
    assert!(
        p_db.observation.contains("timed out"),
        "a timeout is evidence: {}",
        p_db.observation
    );
    assert_eq!(p_db.supports_p_down, Some(true));
}

#[test]
fn target_groups_are_evidence_and_move_the_hypotheses() {
    let plan = plan();
    // The prober cannot reach P, yet P's load balancer sees healthy targets
    // and the checkers are split: a partition, not an outage.
    let partition = rules::assess(
        &plan,
        &Snapshot {
            p_health: Ok(1.0),
            p_targets: vec![tg("ap-northeast-2", "shop-p-web", Ok((3, 3)))],
            ..down(5.0)
        },
    );
    assert_eq!(standing(&partition, "network_partition"), "likely");
    let lb = evidence(
        &partition,
        "elbv2:ap-northeast-2:DescribeTargetHealth:shop-p-web",
    );
    assert_eq!(
        lb.source,
        "elbv2:ap-northeast-2:DescribeTargetHealth:shop-p-web"
    );
    assert_eq!(lb.observation, "3 of 3 targets healthy");
    assert_eq!(lb.supports_p_down, Some(false));
    assert!(
        partition.summary.contains("LB has healthy targets"),
        "{}",
        partition.summary
    );

    // The database is up and the load balancer has nothing healthy behind
    // it: the app is the problem.
    let app = rules::assess(
        &plan,
        &Snapshot {
            p_db: Ok(Some(db("shop-db", "available", None))),
            p_targets: vec![tg("ap-northeast-2", "shop-p-web", Ok((0, 0)))],
            ..down(5.0)
        },
    );
    let h = hypothesis(&app, "application_failure");
    assert!(
        h.evidence_for
            .iter()
            .any(|e| e.contains("no healthy targets while its database is up")),
        "{h:?}"
    );
    assert_eq!(standing(&app, "network_partition"), "unlikely");
    let lb = evidence(&app, "elbv2:ap-northeast-2");
    assert_eq!(lb.observation, "no targets registered: 0 healthy");
    assert_eq!(lb.supports_p_down, Some(true));

    // P's ELB API silent: one more sign of a regional outage.
    let silent = rules::assess(
        &plan,
        &Snapshot {
            p_targets: vec![tg(
                "ap-northeast-2",
                "shop-p-web",
                Err(("timed out after 5000 ms", true)),
            )],
            ..down(5.0)
        },
    );
    let lb = evidence(&silent, "elbv2:ap-northeast-2");
    assert_eq!(lb.supports_p_down, Some(true));
    assert!(
        lb.observation.starts_with("API unreachable"),
        "{}",
        lb.observation
    );
    let region = hypothesis(&silent, "regional_outage");
    assert!(
        region
            .evidence_for
            .contains(&"P's load-balancer API does not answer".to_string()),
        "{region:?}"
    );
    // A group that does not exist is a plan mistake, not a sign about P.
    let missing = rules::assess(
        &plan,
        &Snapshot {
            p_targets: vec![tg(
                "ap-northeast-2",
                "shop-p-web",
                Err(("TargetGroupNotFound", false)),
            )],
            ..down(5.0)
        },
    );
    let lb = evidence(&missing, "elbv2:ap-northeast-2");
    assert_eq!(lb.supports_p_down, None);
    assert_eq!(lb.observation, "unknown: TargetGroupNotFound");
    assert!(
        !missing
            .hypotheses
            .iter()
            .flat_map(|h| &h.evidence_for)
            .any(|e| e.contains("load-balancer API")),
        "{:?}",
        missing.hypotheses
    );

    // S's empty group is a reason even when another rule sets the risk.
    let both = rules::assess(
        &plan,
        &Snapshot {
            s_targets: vec![tg("ap-northeast-1", "shop-s-web", Ok((0, 1)))],
            ..down(300.0)
        },
    );
    assert!(
        both.risk_rule.starts_with("rpo_over_target"),
        "{}",
        both.risk_rule
    );
    assert!(
        both.reasons
            .iter()
            .any(|r| r.contains("shop-s-web have no healthy targets")),
        "{:?}",
        both.reasons
    );

    // No target groups named: nothing about load balancers is claimed.
    let none = rules::assess(&plan, &down(5.0));
    assert!(!none.evidence.iter().any(|e| e.source.starts_with("elbv2:")));
    assert!(!none.summary.contains("LB"), "{}", none.summary);
}

/// Issue 16: a planned switchover goes ahead only from a healthy P with a
/// usable replica, asks no data-loss acknowledgement (it never promotes
/// with a loss), and escalates otherwise, saying why.
#[test]
fn a_planned_switchover_needs_a_healthy_p_and_a_usable_replica() {
    use crate::execution::Mode;
    let plan = plan();
    let healthy = Snapshot {
        p_app: probe(Some(200)),
        p_health: Ok(1.0),
        ..down(5.0)
    };
    let d = rules::assess_as(&plan, &healthy, Mode::Switchover);
    assert_eq!(d.action, Action::SwitchOver, "{}", d.risk_rule);
    assert!(d.risk_rule.starts_with("planned_switchover"));
    assert!(
        d.summary.contains("Planned switchover to ap-northeast-1"),
        "{}",
        d.summary
    );
    // No ReplicaLag sample: a failover would ask to accept an unknown loss;
    // a switchover proves RPO 0 itself, so there is nothing to accept.
    let unknown = rules::assess_as(
        &plan,
        &Snapshot {
            lag: Ok(None),
            ..healthy.clone()
        },
        Mode::Switchover,
    );
    assert_eq!(unknown.action, Action::SwitchOver);
    assert!(!unknown.rpo_over_target);
    // P failing: that is a failover's case.
    let failing = rules::assess_as(&plan, &down(5.0), Mode::Switchover);
    assert_eq!(failing.action, Action::Escalate);
    assert!(
        failing.risk_rule.starts_with("p_failing"),
        "{}",
        failing.risk_rule
    );
    // A replica that is not P's: blocked, as for a failover.
    let not_a_replica = rules::assess_as(
        &plan,
        &Snapshot {
            s_db: Ok(Some(db("shop-db-replica", "available", None))),
            ..healthy.clone()
        },
        Mode::Switchover,
    );
    assert_eq!(not_a_replica.action, Action::Escalate);
    assert!(
        not_a_replica
            .risk_rule
            .starts_with("blocked: shop-db-replica is not a replica"),
        "{}",
        not_a_replica.risk_rule
    );
    // The same snapshot for a failover is P recovered: no run at all.
    assert_eq!(rules::assess(&plan, &healthy).action, Action::Recovered);
    // What would keep it from proving RPO 0 blocks it before anyone is asked.
    let mut no_restart = plan.clone();
    no_restart.fence.end_sessions = false;
    let mut http = plan.clone();
    http.canary = crate::plan::Canary::Http {
        url: "https://app.example.com/canary".into(),
    };
    let mut aurora = plan.clone();
    aurora.database.kind = crate::plan::DatabaseKind::AuroraGlobal;
    for (p, says) in [
        (no_restart, "fence.end_sessions"),
        (http, "a postgres canary"),
        (aurora, "SwitchoverGlobalCluster"),
    ] {
        let d = rules::assess_as(&p, &healthy, Mode::Switchover);
        assert_eq!(d.action, Action::Escalate, "{says}");
        assert!(d.risk_rule.contains(says), "{}", d.risk_rule);
    }
}
