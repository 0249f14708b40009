//! Each check on the drift it catches, and the healthy world passing.

use super::*;
use crate::dependencies::standby_db_secrets;
use crate::store::primary::{Phase, Transition};
use chrono::TimeZone;

fn plan() -> Plan {
    Plan::from_json(include_str!("../../../infra/plan.example.jsonc")).unwrap()
}

fn at(m: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, 1, 12, m, 0).unwrap()
}

fn instance(id: &str, source: Option<&str>) -> DbInstance {
    DbInstance {
        id: id.into(),
        arn: format!("arn:aws:rds:ap-northeast-1:123456789012:db:{id}"),
        status: "available".into(),
        replication_source: source.map(str::to_owned),
        replicas: Vec::new(),
        security_groups: vec!["sg-app".into()],
        unsettled_security_groups: Vec::new(),
        master_username: Some("shop_admin".into()),
        backup_retention_days: 7,
        latest_restorable_time: None,
        endpoint: Some(format!(
            "{id}.abcdefghijkl.ap-northeast-1.rds.amazonaws.com"
        )),
        vpc_id: None,
        // RDS lists a replica's replication in StatusInfos.
        read_replication: source.map(|_| replication("replicating")),
    }
}

fn replication(status: &str) -> crate::adapters::rds::ReadReplication {
    crate::adapters::rds::ReadReplication {
        status: status.into(),
        message: None,
    }
}

/// The world as the example plan needs it.
fn healthy(plan: &Plan) -> Snapshot {
    let (p, s) = (&plan.regions.primary, &plan.regions.standby);
    Snapshot {
        at: at(30),
        p_db: Ok(Some(instance(&p.db_instance_id, None))),
        s_db: Ok(Some(instance(
            &s.db_instance_id,
            Some(&format!("arn:aws:rds:{}:123456789012:db:{}", p.region, p.db_instance_id)),
        ))),
        lag: Ok(Some(LagSample {
            seconds: 2.0,
            at: at(29),
        })),
        s_maintenance: Ok(Vec::new()),
        secret_usernames: standby_db_secrets(plan)
            .into_iter()
            .map(|arn| (arn, Ok(Some("shop_admin".to_owned()))))
            .collect(),
        canary: Some(Ok((
            "connected to shop-db-replica…:5432/shop as shop_admin, SELECT pg_is_in_recovery() = true".into(),
            true,
        ))),
        p_health_check: Ok(Some(HealthCheckTarget {
            fqdn: Some("p-alb.ap-northeast-2.elb.amazonaws.com".into()),
            ip: None,
            path: Some("/health".into()),
            kind: "HTTPS".into(),
        })),
        ttls: Ok(vec![("primary".into(), Some(60)), ("secondary".into(), Some(60))]),
        parameters: vec![(
            "/shop/app/image".into(),
            Ok(Some("123456789012.dkr.ecr.ap-northeast-1.amazonaws.com/shop:1".into())),
        )],
        primary: Ok(Some(PrimaryRecord {
            region: p.region.clone(),
            db_instance_id: p.db_instance_id.clone(),
            epoch: 1,
            transition: None,
            last_execution: None,
            updated_at: at(0),
            promoted_at: None,
            last_transition: None,
            switch_previous: Default::default(),
            last_switch_previous: Default::default(),
            unfence_pending: None,
            unfencing: None,
        })),
        lock: Ok(Some(LockState {
            holder: None,
            lease_until: None,
            cooldown_until: None,
            last_incident: None,
            execution: None,
        })),
        fence_group: Ok(Some(FenceGroup {
            id: p.fence_security_group_id.clone(),
            vpc_id: Some("vpc-0p".into()),
            ingress: Vec::new(),
        })),
        slack: SlackFacts {
            bot: Ok(("T0TEAM0001".into(), "U0HANDOVERBOT".into())),
            in_channel: Ok(true),
            approvers: plan
                .slack
                .approvers
                .iter()
                .map(|a| (a.user_id.clone(), Ok(Some(false))))
                .collect(),
        },
        capacity: capacity::CapacityFacts {
            ecs_services: vec![Ok(Some(ecs("ACTIVE", 2, 2)))],
            auto_scaling_groups: Vec::new(),
            eks_node_groups: vec![(
                Ok(Some(nodes("ACTIVE", 2, 4))),
                vec![("eks-workers-1".into(), Ok(Some(asg(2, 4, 2))))],
            )],
        },
        iam: iam::IamFacts {
            fence: Some((FENCE.into(), Ok(Some(decisions(plan, Role::Fence, None))))),
            promote: Some((PROMOTE.into(), Ok(Some(decisions(plan, Role::Promote, None))))),
        },
    }
}

use iam::Role;
const FENCE: &str = "arn:aws:iam::123456789012:role/handover-fence";
const PROMOTE: &str = "arn:aws:iam::123456789012:role/handover-promote";

/// What the simulator answers for `role`: every asked call allowed, but
/// `refused` (an action) refused.
fn decisions(plan: &Plan, role: Role, refused: Option<&str>) -> Vec<iam::Decision> {
    let arn = if role == Role::Fence { FENCE } else { PROMOTE };
    iam::asks(
        plan,
        arn,
        "handover-state",
        &plan.regions.standby.region,
        role,
    )
    .into_iter()
    .flat_map(|ask| {
        ask.actions.into_iter().map(move |a| iam::Decision {
            action: a.into(),
            resource: ask.resource.clone(),
            decision: if Some(a) == refused {
                "implicitDeny"
            } else {
                "allowed"
            }
            .into(),
            missing_context: Vec::new(),
        })
    })
    .collect()
}

fn ecs(status: &str, desired: i32, running: i32) -> capacity::EcsService {
    capacity::EcsService {
        status: status.into(),
        desired,
        running,
        pending: desired - running,
    }
}

fn asg(desired: i32, max: i32, in_service: i32) -> capacity::AutoScalingGroup {
    capacity::AutoScalingGroup {
        desired,
        max,
        in_service,
        instances: in_service,
    }
}

fn nodes(status: &str, desired: i32, max: i32) -> capacity::NodeGroup {
    capacity::NodeGroup {
        status: status.into(),
        desired,
        max,
        issues: Vec::new(),
        auto_scaling_groups: vec!["eks-workers-1".into()],
    }
}

fn verdict(r: &Readiness, id: &str) -> (Verdict, String) {
    let c = r
        .checks
        .iter()
        .find(|c| c.id == id && c.verdict != Verdict::Pass)
        .or_else(|| r.checks.iter().find(|c| c.id == id))
        .unwrap_or_else(|| panic!("no check {id}: {:#?}", r.checks));
    (c.verdict, c.fix.clone())
}

#[test]
fn the_world_the_plan_needs_passes_every_check_it_can_make() {
    let plan = plan();
    let r = evaluate(&plan, &healthy(&plan));
    let not_pass: Vec<&Check> = r
        .checks
        .iter()
        .filter(|c| c.verdict != Verdict::Pass)
        .collect();
    assert!(not_pass.is_empty(), "{not_pass:#?}");
    assert!(
        r.summary().starts_with("readiness: 0 fail, 0 warn, "),
        "{}",
        r.summary()
    );
    for id in [
        "fence.group",
        "slack.bot_token",
        "slack.channel",
        "slack.approver",
    ] {
        assert!(r.checks.iter().any(|c| c.id == id), "{id} is checked");
    }
    assert!(
        r.checks
            .iter()
            .all(|c| c.verdict != Verdict::Pass || c.fix.is_empty())
    );
}

/// Seed one drift, expect `id` with `verdict` and a fix naming `fix`.
fn drift(id: &str, want: Verdict, fix: &str, seed: impl FnOnce(&mut Plan, &mut Snapshot)) {
    let mut plan = plan();
    let mut s = healthy(&plan);
    seed(&mut plan, &mut s);
    let r = evaluate(&plan, &s);
    let (v, f) = verdict(&r, id);
    assert_eq!(v, want, "{id}: {}", r.text());
    assert!(f.contains(fix), "{id}: the fix {f:?} does not say {fix:?}");
    assert!(r.text().contains(id), "{}", r.text());
}

#[test]
fn the_secrets_user_other_than_the_replicas_master_user_fails() {
    // The seed's CrashLoopBackOff: the DR secret named another user.
    drift("secrets.db_user", Verdict::Fail, "master user", |_, s| {
        s.secret_usernames[0].1 = Ok(Some("app_user".into()));
    });
}

#[test]
fn a_health_check_on_the_failover_name_fails() {
    drift(
        "detection.health_check_target",
        Verdict::Fail,
        "P's own endpoint",
        |plan, s| {
            s.p_health_check = Ok(Some(HealthCheckTarget {
                fqdn: Some(plan.dns.record_name.clone()),
                ip: None,
                path: Some("/health".into()),
                kind: "HTTPS".into(),
            }));
        },
    );
}

#[test]
fn a_probe_of_the_failover_name_fails() {
    drift(
        "detection.probe_endpoint",
        Verdict::Fail,
        "P's own endpoint",
        |plan, _| {
            plan.regions.primary.endpoint = format!("https://{}/health", plan.dns.record_name);
        },
    );
}

#[test]
fn an_alarm_outside_us_east_1_fails() {
    drift(
        "detection.alarm_region",
        Verdict::Fail,
        "us-east-1",
        |plan, _| {
            if let Some(a) = plan.detection.alarm.as_mut() {
                a.region = "ap-northeast-2".into();
            }
        },
    );
}

#[test]
fn s_pulling_its_image_from_ps_ecr_fails() {
    drift(
        "dependencies.ssm_parameter",
        Verdict::Fail,
        "S's ECR",
        |_, s| {
            s.parameters[0].1 = Ok(Some(
                "123456789012.dkr.ecr.ap-northeast-2.amazonaws.com/shop:1".into(),
            ));
        },
    );
}

#[test]
fn replica_lag_over_the_rpo_target_fails_and_half_of_it_warns() {
    drift("rds.replica_lag", Verdict::Fail, "RPO target", |_, s| {
        s.lag = Ok(Some(LagSample {
            seconds: 95.0,
            at: at(29),
        }));
    });
    drift(
        "rds.replica_lag",
        Verdict::Warn,
        "half the RPO target",
        |_, s| {
            s.lag = Ok(Some(LagSample {
                seconds: 40.0,
                at: at(29),
            }));
        },
    );
    // For PostgreSQL, RDS says replication stopped in S's status, while
    // its ReplicaLag may still read low (RDS API Reference,
    // DBInstanceStatusInfo).
    drift(
        "rds.replica_lag",
        Verdict::Fail,
        "RDS-EVENT-0045",
        |_, s| {
            if let Ok(Some(d)) = s.s_db.as_mut() {
                d.read_replication = Some(crate::adapters::rds::ReadReplication {
                    message: Some("Replication has stopped.".into()),
                    ..replication("error")
                });
            }
        },
    );
    drift("rds.replica_lag", Verdict::Fail, "broken", |_, s| {
        s.lag = Ok(Some(LagSample {
            seconds: -1.0,
            at: at(29),
        }));
    });
}

#[test]
fn maintenance_due_on_s_within_a_day_fails_and_later_warns() {
    use crate::adapters::PendingMaintenance;
    let pending = |due_h: Option<i64>| PendingMaintenance {
        action: "system-update".into(),
        description: Some("New Operating System update is available".into()),
        current_apply: due_h.map(|h| at(30) + chrono::Duration::hours(h)),
        forced_apply: None,
    };
    // Applied in S's window tonight: S may be mid-upgrade when needed.
    drift(
        "rds.s_maintenance",
        Verdict::Fail,
        "apply-pending-maintenance-action",
        |_, s| {
            s.s_maintenance = Ok(vec![pending(Some(6))]);
        },
    );
    // Scheduled next week, or not scheduled at all: worth knowing.
    drift("rds.s_maintenance", Verdict::Warn, "quiet hour", |_, s| {
        s.s_maintenance = Ok(vec![pending(Some(24 * 7))]);
    });
    drift("rds.s_maintenance", Verdict::Warn, "quiet hour", |_, s| {
        s.s_maintenance = Ok(vec![pending(None)]);
    });
    // A forced date already passed counts, whatever the opt-in says.
    drift("rds.s_maintenance", Verdict::Fail, "quiet hour", |_, s| {
        let mut a = pending(Some(24 * 30));
        a.forced_apply = Some(at(0));
        s.s_maintenance = Ok(vec![a]);
    });
    drift(
        "rds.s_maintenance",
        Verdict::Warn,
        "Grant the read call",
        |_, s| {
            s.s_maintenance = Err("rds:DescribePendingMaintenanceActions: AccessDenied".into());
        },
    );
}

#[test]
fn a_stale_transition_fails_and_a_live_one_warns() {
    let transition = Transition {
        phase: Phase::Fencing,
        execution: "arn:aws:states:ap-northeast-1:123456789012:execution:handover:old".into(),
        to_region: "ap-northeast-1".into(),
        since: at(1),
        promote_claimed_at: None,
        promote_called_at: None,
        fence_previous_groups: None,
        fence: None,
        fence_reboot_at: None,
        rpo: None,
    };
    let t = transition.clone();
    drift("state.transition", Verdict::Fail, "sweep", move |_, s| {
        if let Ok(Some(r)) = s.primary.as_mut() {
            r.transition = Some(t);
        }
    });
    drift("state.transition", Verdict::Warn, "sweep", move |_, s| {
        if let Ok(Some(r)) = s.primary.as_mut() {
            r.transition = Some(transition);
        }
        s.lock = Ok(Some(LockState {
            holder: Some("inc".into()),
            lease_until: Some(at(45)),
            cooldown_until: None,
            last_incident: None,
            execution: None,
        }));
    });
}

#[test]
fn a_lock_past_its_lease_fails() {
    drift("state.lock", Verdict::Fail, "sweep", |_, s| {
        s.lock = Ok(Some(LockState {
            holder: Some("inc".into()),
            lease_until: Some(at(10)),
            cooldown_until: None,
            last_incident: None,
            execution: None,
        }));
    });
}

#[test]
fn s_standing_alone_fails_and_the_record_against_rds_is_checked() {
    drift("rds.s_replica_of_p", Verdict::Fail, "re-protect", |_, s| {
        if let Ok(Some(d)) = s.s_db.as_mut() {
            d.replication_source = None;
        }
    });
    // RDS shows S as the writer (P a replica of it) while the record names P.
    drift(
        "state.primary_record",
        Verdict::Fail,
        "outside Handover",
        |_, s| {
            if let Ok(Some(d)) = s.s_db.as_mut() {
                d.replication_source = None;
            }
            if let Ok(Some(d)) = s.p_db.as_mut() {
                d.replication_source = Some("shop-db-replica".into());
            }
        },
    );
}

#[test]
fn a_canary_that_cannot_reach_s_fails_and_a_writable_s_warns() {
    drift(
        "canary.connect",
        Verdict::Fail,
        "verify cannot prove a write",
        |_, s| {
            s.canary = Some(Err("connect: connection refused".into()));
        },
    );
    drift("canary.connect", Verdict::Warn, "second writer", |_, s| {
        s.canary = Some(Ok(("SELECT pg_is_in_recovery() = false".into(), false)));
    });
}

#[test]
fn a_long_ttl_warns_and_missing_records_fail() {
    drift("dns.ttl", Verdict::Warn, "60 s or less", |_, s| {
        s.ttls = Ok(vec![
            ("primary".into(), Some(300)),
            ("secondary".into(), Some(60)),
        ]);
    });
    drift("dns.ttl", Verdict::Fail, "failover records", |_, s| {
        s.ttls = Ok(Vec::new());
    });
}

#[test]
fn an_unreadable_source_warns_instead_of_passing() {
    drift(
        "rds.replica_lag",
        Verdict::Warn,
        "Grant the read call",
        |_, s| {
            s.lag = Err("cloudwatch GetMetricData: AccessDenied".into());
        },
    );
}

#[test]
fn a_fence_group_that_admits_anyone_fails_and_so_does_a_missing_one_or_another_vpcs() {
    drift(
        "fence.group",
        Verdict::Fail,
        "Remove every inbound rule",
        |_, s| {
            if let Ok(Some(g)) = &mut s.fence_group {
                g.ingress = vec!["tcp 5432 from 10.0.0.0/8".into()];
            }
        },
    );
    drift(
        "fence.group",
        Verdict::Fail,
        "Create a security group with no inbound rule",
        |_, s| {
            s.fence_group = Ok(None);
        },
    );
    drift("fence.group", Verdict::Fail, "in P's VPC", |_, s| {
        if let Ok(Some(d)) = &mut s.p_db {
            d.vpc_id = Some("vpc-0other".into());
        }
    });
    drift(
        "fence.group",
        Verdict::Warn,
        "so the fence group's VPC can be compared",
        |_, s| {
            s.p_db = Err("rds DescribeDBInstances: AccessDenied".into());
        },
    );
    drift(
        "fence.group",
        Verdict::Warn,
        "Grant the read call",
        |_, s| {
            s.fence_group = Err("ec2 DescribeSecurityGroups: AccessDenied".into());
        },
    );
    // Same VPC as P: named in what was observed.
    let plan = plan();
    let mut s = healthy(&plan);
    if let Ok(Some(d)) = &mut s.p_db {
        d.vpc_id = Some("vpc-0p".into());
    }
    let r = evaluate(&plan, &s);
    let c = r.checks.iter().find(|c| c.id == "fence.group").unwrap();
    assert_eq!(c.verdict, Verdict::Pass);
    assert!(c.observed.contains("in P's VPC vpc-0p"), "{}", c.observed);
}

#[test]
fn a_bot_outside_the_channel_or_with_a_bad_token_fails() {
    drift(
        "slack.channel",
        Verdict::Fail,
        "Invite the bot to the channel",
        |_, s| {
            s.slack.in_channel = Ok(false);
        },
    );
    drift(
        "slack.bot_token",
        Verdict::Fail,
        "fix the bot token",
        |plan, s| {
            s.slack = SlackFacts::unreadable(plan, "slack auth.test: invalid_auth");
        },
    );
    drift(
        "slack.bot_token",
        Verdict::Fail,
        "another workspace",
        |_, s| {
            s.slack.bot = Ok(("T0OTHER".into(), "U0HANDOVERBOT".into()));
        },
    );
}

#[test]
fn a_deactivated_or_unknown_approver_warns_and_none_left_fails() {
    drift(
        "slack.approver",
        Verdict::Warn,
        "a deactivated person cannot click",
        |_, s| {
            s.slack.approvers[0].1 = Ok(Some(true));
        },
    );
    drift("slack.approver", Verdict::Warn, "Copy member ID", |_, s| {
        s.slack.approvers[0].1 = Ok(None);
    });
    drift(
        "slack.approvers_left",
        Verdict::Fail,
        "Nobody can approve in Slack",
        |_, s| {
            for a in &mut s.slack.approvers {
                a.1 = Ok(Some(true));
            }
        },
    );
}

/// Issue 16: a planned switchover's gate runs while that run holds the
/// lock: its own lock passes; a lock another run holds, or none at all (a
/// run started without `handover switchover`), fails the gate. For the
/// schedule, a held lock is a run going on: a warning.
#[test]
fn the_gate_passes_only_with_the_lock_held_by_the_switchover_asking() {
    let plan = plan();
    let mut s = healthy(&plan);
    s.lock = Ok(Some(LockState {
        holder: Some("shop-switchover-20261202T060000Z".into()),
        lease_until: Some(s.at + chrono::Duration::minutes(30)),
        cooldown_until: None,
        last_incident: None,
        execution: None,
    }));
    let own = evaluate_for(&plan, &s, Some("shop-switchover-20261202T060000Z"));
    assert_eq!(
        verdict(&own, "state.lock").0,
        Verdict::Pass,
        "{}",
        own.text()
    );
    let other = evaluate_for(&plan, &s, Some("shop-ap-northeast-2-20261202T055900Z"));
    let (v, fix) = verdict(&other, "state.lock");
    assert_eq!(v, Verdict::Fail);
    assert!(fix.contains("handover switchover"), "{fix}");
    assert_eq!(verdict(&evaluate(&plan, &s), "state.lock").0, Verdict::Warn);
    let free = healthy(&plan);
    let r = evaluate_for(&plan, &free, Some("shop-switchover-20261202T060000Z"));
    assert_eq!(verdict(&r, "state.lock").0, Verdict::Fail, "{}", r.text());
    assert_eq!(
        verdict(&evaluate(&plan, &free), "state.lock").0,
        Verdict::Pass
    );
}

#[test]
fn s_capacity_short_of_the_plan_fails_with_the_fix_that_fits_why() {
    let plan = plan();
    let mut s = healthy(&plan);
    let ecs_fix = |s: &Snapshot| {
        let r = evaluate(&plan, s);
        verdict(&r, "capacity.ecs_service")
    };
    // Desired, never running: the reference drill's CrashLoopBackOff.
    s.capacity.ecs_services[0] = Ok(Some(ecs("ACTIVE", 2, 0)));
    let (v, fix) = ecs_fix(&s);
    assert_eq!(v, Verdict::Fail);
    assert!(
        fix.contains("do not stay running") && fix.contains("--desired-status STOPPED"),
        "{fix}"
    );
    // Scaled below the minimum.
    s.capacity.ecs_services[0] = Ok(Some(ecs("ACTIVE", 1, 1)));
    let (v, fix) = ecs_fix(&s);
    assert_eq!(v, Verdict::Fail);
    assert!(
        fix.contains("update-service") && fix.contains("--desired-count 2"),
        "{fix}"
    );
    // Being deleted, or gone.
    s.capacity.ecs_services[0] = Ok(Some(ecs("DRAINING", 2, 2)));
    assert_eq!(ecs_fix(&s).0, Verdict::Fail);
    s.capacity.ecs_services[0] = Ok(None);
    let (v, fix) = ecs_fix(&s);
    assert_eq!(v, Verdict::Fail);
    assert!(fix.contains("plan.capacity.ecs_services"), "{fix}");
    // Unreadable: a warning, never a pass.
    s.capacity.ecs_services[0] =
        Err("ecs:DescribeServices in ap-northeast-1 failed: AccessDeniedException".into());
    assert_eq!(ecs_fix(&s).0, Verdict::Warn);

    // A node group whose nodes are not in service, one that cannot grow,
    // a degraded one, and one whose Auto Scaling group cannot be read.
    let mut s = healthy(&plan);
    let node_check = |s: &Snapshot| {
        let r = evaluate(&plan, s);
        let c = r
            .checks
            .iter()
            .find(|c| c.id == "capacity.eks_node_group")
            .unwrap()
            .clone();
        (c.verdict, c.observed, c.fix)
    };
    s.capacity.eks_node_groups[0].1[0].1 = Ok(Some(asg(2, 4, 1)));
    let (v, observed, fix) = node_check(&s);
    assert_eq!(v, Verdict::Fail);
    assert!(
        observed.contains("1 nodes in service, 2 desired"),
        "{observed}"
    );
    assert!(fix.contains("describe-scaling-activities"), "{fix}");
    s.capacity.eks_node_groups[0].0 = Ok(Some(nodes("ACTIVE", 1, 1)));
    let (v, _, fix) = node_check(&s);
    assert_eq!(v, Verdict::Fail);
    assert!(
        fix.contains("update-nodegroup-config") && fix.contains("desiredSize=2"),
        "{fix}"
    );
    s.capacity.eks_node_groups[0].0 = Ok(Some(capacity::NodeGroup {
        issues: vec!["AsgInstanceLaunchFailures: no capacity".into()],
        ..nodes("DEGRADED", 2, 4)
    }));
    let (v, observed, _) = node_check(&s);
    assert_eq!(v, Verdict::Fail);
    assert!(observed.contains("AsgInstanceLaunchFailures"), "{observed}");
    s.capacity.eks_node_groups[0] = (
        Ok(Some(nodes("ACTIVE", 2, 4))),
        vec![("eks-workers-1".into(), Ok(None))],
    );
    let (v, observed, _) = node_check(&s);
    assert_eq!(v, Verdict::Warn, "{observed}");

    // An Auto Scaling group named on its own.
    let mut plan = plan.clone();
    plan.capacity.auto_scaling_groups = vec![crate::plan::AutoScalingGroupMinimum {
        name: "shop-web".into(),
        min_in_service: 3,
    }];
    let mut s = healthy(&plan);
    s.capacity.auto_scaling_groups = vec![Ok(Some(asg(3, 2, 2)))];
    let r = evaluate(&plan, &s);
    let (v, fix) = verdict(&r, "capacity.auto_scaling_group");
    assert_eq!(v, Verdict::Fail);
    assert!(fix.contains("--max-size 3"), "{fix}");
    s.capacity.auto_scaling_groups = vec![Ok(Some(asg(3, 4, 3)))];
    assert_eq!(
        verdict(&evaluate(&plan, &s), "capacity.auto_scaling_group").0,
        Verdict::Pass
    );
}

#[test]
fn a_call_the_simulator_refuses_fails_the_role_and_unknown_roles_warn() {
    let plan = plan();
    let mut s = healthy(&plan);
    s.iam.promote = Some((
        PROMOTE.into(),
        Ok(Some(decisions(
            &plan,
            Role::Promote,
            Some("rds:PromoteReadReplica"),
        ))),
    ));
    let r = evaluate(&plan, &s);
    let c = r
        .checks
        .iter()
        .find(|c| c.id == "iam.promote_role")
        .unwrap();
    assert_eq!(c.verdict, Verdict::Fail);
    assert!(
        c.observed
            .contains("rds:PromoteReadReplica on arn:aws:rds:ap-northeast-1:123456789012:db:")
            && c.observed.contains("implicitDeny"),
        "{}",
        c.observed
    );
    assert_eq!(verdict(&r, "iam.fence_role").0, Verdict::Pass);
    // A role that is gone.
    s.iam.fence = Some((FENCE.into(), Ok(None)));
    let (v, fix) = verdict(&evaluate(&plan, &s), "iam.fence_role");
    assert_eq!(v, Verdict::Fail);
    assert!(fix.contains("redeploy"), "{fix}");
    // A caller not told the roles (the CLI without --fence-role-arn): a
    // warning that says so, never a pass.
    s.iam = iam::IamFacts::default();
    let r = evaluate(&plan, &s);
    for id in ["iam.fence_role", "iam.promote_role"] {
        let c = r.checks.iter().find(|c| c.id == id).unwrap();
        assert_eq!(c.verdict, Verdict::Warn, "{id}");
        assert!(c.observed.starts_with("not simulated"), "{}", c.observed);
    }
}

#[test]
fn the_simulation_asks_for_the_plans_own_resources() {
    let plan = plan();
    let fence = iam::asks(
        &plan,
        "arn:aws-cn:iam::210987654321:role/f",
        "t",
        "cn-north-1",
        Role::Fence,
    );
    assert_eq!(
        fence[0].resource,
        format!(
            "arn:aws-cn:rds:{}:210987654321:db:{}",
            plan.regions.primary.region, plan.regions.primary.db_instance_id
        )
    );
    assert_eq!(
        fence[1].resource,
        "arn:aws-cn:dynamodb:cn-north-1:210987654321:table/t"
    );
    let promote = iam::asks(
        &plan,
        "arn:aws:iam::123456789012:role/p",
        "t",
        "ap-northeast-1",
        Role::Promote,
    );
    // Every ask carries the Region the real call goes to, so a condition
    // on aws:RequestedRegion is evaluated as the real call meets it.
    let region = |a: &iam::Ask| {
        a.context
            .iter()
            .find(|(k, _)| *k == "aws:RequestedRegion")
            .map(|(_, v)| v.clone())
    };
    assert_eq!(
        region(&fence[0]),
        Some(vec![plan.regions.primary.region.clone()])
    );
    assert_eq!(region(&fence[1]), Some(vec!["cn-north-1".to_owned()]));
    assert_eq!(region(&fence[2]), Some(vec!["cn-north-1".to_owned()]));
    assert_eq!(
        region(&promote[0]),
        Some(vec![plan.regions.standby.region.clone()])
    );
    assert!(promote.iter().chain(&fence).all(|a| {
        a.context
            .iter()
            .any(|(k, v)| *k == "aws:PrincipalAccount" && v.len() == 1)
    }));
    assert!(promote[0].actions.contains(&"rds:PromoteReadReplica"));
    assert!(
        promote[0]
            .resource
            .ends_with(&format!("db:{}", plan.regions.standby.db_instance_id))
    );
}

/// A dependency is read with decryption and may hold a credential. No check
/// quotes its value, so the value reaches none of readiness's outputs: the
/// S3 files, the EMF lines, the event, the stored result (DynamoDB) and
/// the text Slack and SNS get.
#[test]
fn a_credential_in_a_dependency_reaches_no_output() {
    const SECRET: &str = "s3cr3t-pw";
    let url = format!("postgres://app:{SECRET}@shop.c1.ap-northeast-2.rds.amazonaws.com:5432/app");
    let mut plan = plan();
    plan.dependencies.push(Dependency::Value {
        name: "app database URL".into(),
        value: url.clone(),
    });
    let mut s = healthy(&plan);
    s.parameters
        .push(("/shop/app/database_url".into(), Ok(Some(url))));
    let r = evaluate(&plan, &s);
    for name in ["/shop/app/database_url", "app database URL"] {
        let c = r
            .checks
            .iter()
            .find(|c| c.observed.starts_with(name))
            .unwrap_or_else(|| panic!("no check of {name}: {}", r.text()));
        assert_eq!(c.verdict, Verdict::Fail, "{c:?}");
        assert!(c.observed.contains("ap-northeast-2"), "{c:?}");
    }
    let mut outputs: Vec<String> = output::files(&r, "shop")
        .into_iter()
        .map(|f| f.body)
        .collect();
    outputs.extend(output::emf_lines(&r, true, "prod", 0));
    outputs.push(serde_json::to_string(&output::change_detail(None, &r, "shop")).unwrap());
    outputs.push(serde_json::to_string(&r).unwrap());
    outputs.push(r.text());
    for o in &outputs {
        assert!(!o.contains(SECRET), "the credential leaked: {o}");
    }
}
