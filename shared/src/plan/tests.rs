use super::*;
use serde_json::{Value, json};

const EXAMPLE: &str = include_str!("../../../infra/plan.example.jsonc");

fn example() -> Value {
    serde_json::from_str(&strip_comments(EXAMPLE)).unwrap()
}

fn err_of(v: Value) -> String {
    Plan::from_json(&v.to_string()).unwrap_err().to_string()
}

/// Remove the field at a dotted path.
fn without(path: &str) -> Value {
    let mut v = example();
    let (parent, last) = path.rsplit_once('.').unwrap_or(("", path));
    let mut node = &mut v;
    for key in parent.split('.').filter(|k| !k.is_empty()) {
        node = &mut node[key];
    }
    node.as_object_mut()
        .unwrap()
        .remove(last)
        .expect("field exists");
    v
}

fn with(path: &str, value: Value) -> Value {
    let mut v = example();
    let mut node = &mut v;
    for key in path.split('.') {
        node = match key.parse::<usize>() {
            Ok(i) => &mut node[i],
            Err(_) => &mut node[key],
        };
    }
    *node = value;
    v
}

#[test]
fn the_shipped_example_loads() {
    let plan = Plan::from_json(EXAMPLE).unwrap();
    assert_eq!(plan.regions.primary.region, "ap-northeast-2");
    assert_eq!(plan.regions.standby.db_instance_id, "shop-db-replica");
    assert_eq!(plan.targets.rto_s, 900);
    assert_eq!(plan.targets.rpo_s, 60);
    assert_eq!(plan.detection.failures_to_trigger, 3);
    assert!(plan.approver("U0ONCALL01").is_some());
    assert!(plan.approver("U0INTRUDER").is_none());
}

#[test]
fn the_explanation_is_called_in_s_unless_the_plan_says_otherwise() {
    let plan = Plan::from_json(EXAMPLE).unwrap();
    let x = plan.explain.as_ref().unwrap();
    assert_eq!(x.region(&plan), "ap-northeast-1");
    let plan = Plan::from_value(with("explain.region", json!("us-east-1"))).unwrap();
    assert_eq!(plan.explain.as_ref().unwrap().region(&plan), "us-east-1");
    let mut v = example();
    v["explain"].as_object_mut().unwrap().remove("timeout_ms");
    let plan = Plan::from_value(v).unwrap();
    assert_eq!(plan.explain.unwrap().timeout_ms, 8_000);
}

#[test]
fn defaults_fill_optional_sections() {
    let mut v = example();
    for key in [
        "targets",
        "detection",
        "timings",
        "fence",
        "dependencies",
        "capacity",
    ] {
        v.as_object_mut().unwrap().remove(key);
    }
    let plan = Plan::from_json(&v.to_string()).unwrap();
    assert_eq!(
        plan.targets,
        Targets {
            rto_s: 900,
            rpo_s: 60
        }
    );
    assert_eq!(plan.detection.failures_to_trigger, 3);
    assert_eq!(plan.timings.approval_timeout_s, 900);
    assert_eq!(plan.fence.on_unconfirmed, OnUnconfirmed::Stop);
}

#[test]
fn every_missing_required_field_is_named_by_path() {
    for path in [
        "version",
        "service",
        "regions",
        "regions.primary",
        "regions.standby.db_instance_id",
        "regions.primary.region",
        "regions.primary.endpoint",
        "regions.standby.health_check_id",
        "regions.primary.fence_security_group_id",
        "database.kind",
        "dns.hosted_zone_id",
        "dns.record_name",
        "dns.switch_mode",
        "dns.standby_target",
        "dns.writer.cname.name",
        "canary.postgres.secret_arn",
        "slack.channel",
        "slack.approvers",
        "slack.bot_token_secret_arn",
        "slack.signing_secret_arn",
    ] {
        assert_eq!(
            err_of(without(path)),
            format!("plan.{path}: missing"),
            "removing {path}"
        );
    }
}

#[test]
fn a_service_name_that_would_truncate_the_execution_names_timestamp_is_refused() {
    let err = err_of(with("service", json!("x".repeat(41))));
    assert!(
        err.starts_with("plan.service: must be at most 40 characters"),
        "{err}"
    );
    // Characters an execution name cannot hold become `-`: still valid.
    Plan::from_value(with("service", json!("shop.api"))).unwrap();
    // The longest accepted still leaves the whole T0 in the name.
    let plan = Plan::from_value(with("service", json!("s".repeat(40)))).unwrap();
    let t0 = chrono::TimeZone::with_ymd_and_hms(&chrono::Utc, 2026, 11, 30, 14, 11, 55).unwrap();
    let name = crate::detect::incident_id(&plan.service, "ap-southeast-5", t0);
    assert!(name.ends_with("-20261130T141155Z"), "{name}");
}

/// switch waits for INSYNC within `timings.dns_sync_s`, inside its 120 s
/// Lambda timeout: 0 and more than 90 are refused, naming the field.
#[test]
fn the_dns_sync_wait_fits_switchs_lambda() {
    for bad in [0, 91] {
        assert_eq!(
            err_of(with("timings.dns_sync_s", json!(bad))),
            "plan.timings.dns_sync_s: must be 1 to 90 (switch's Lambda timeout is 120 s)"
        );
    }
    let ok = Plan::from_value(with("timings.dns_sync_s", json!(90))).unwrap();
    assert_eq!(ok.timings.dns_sync_s, 90);
    let default = Plan::from_value(with("timings.approval_timeout_s", json!(900))).unwrap();
    assert_eq!(
        default.timings.dns_sync_s, 90,
        "Route 53's 60 s and a half more"
    );
}

/// Issue 12, scenario 9, and issue 35: a lease shorter than the run lets a
/// second execution start beside a live one. The lease counts every task
/// retried to its limit; the plan's `lock_lease_s` is only its floor.
#[test]
fn the_lock_lease_outlives_the_longest_run_with_every_retry() {
    let plan = Plan::from_value(example()).unwrap();
    // Diagnose 630 (five attempts of 120 s and 30 s of waits), the approval
    // 1210 (900 s, four failed attempts of 70 s, 30 s), Recheck 630, Fence
    // 1680, Promote 1530, the polls 3360 (the 1800 s budget, one 30 s pause,
    // one poll at its worst, 1530 s), FirstWrite 41, Switch 680, Verify 4580,
    // and 600 s outside the tasks (moves between states, audit).
    assert_eq!(run_bound::failover_run_s(&plan.timings), 14_941);
    assert_eq!(
        plan.failover_lease_s(),
        14_941,
        "the plan's 7200 s is a floor"
    );
    // Readiness 2558 (17 attempts of 130 s, 348 s of waits); the catch-up
    // 782 (a reading at its worst each side of the 120 s timeout and a 2 s pause).
    assert_eq!(plan.switchover_lease_s(), 14_941 + 2_558 + 782);
    let floor = Plan::from_value(with("timings.lock_lease_s", json!(20_000))).unwrap();
    assert_eq!(floor.failover_lease_s(), 20_000);
    assert_eq!(
        err_of(with("timings.lock_lease_s", json!(172_801))),
        "plan.timings.lock_lease_s: must be at most 172800 (the state machine's TimeoutSeconds)"
    );
    // A span from an unvalidated plan never overflows the date it moves.
    let far = chrono::Utc::now() + crate::plan::span_s(u64::MAX);
    assert!(far > chrono::Utc::now());
    // An approval attempt never fails later than the approval itself ends.
    let quick = Plan::from_value(with("timings.approval_timeout_s", json!(30))).unwrap();
    assert_eq!(
        run_bound::failover_run_s(&quick.timings),
        14_941 - 1_210 + (30 + 4 * 30 + 30)
    );
    // One poll counts as one poll, not as the budget and a poll more.
    let one = Plan::from_value(with("timings.promotion_max_polls", json!(1))).unwrap();
    assert_eq!(
        run_bound::failover_run_s(&one.timings),
        14_941 - 3_360 + (30 + 1_530)
    );
    let err = err_of(with("timings.promotion_max_polls", json!(200_000)));
    assert!(
        err.starts_with("plan.timings: the longest run, every task retried to its limit, is "),
        "{err}"
    );
    let mut v = with("fence.confirm_s", json!(241));
    assert_eq!(
        err_of(v.clone()),
        "plan.fence.confirm_s: must be 1 to 240 (the fence's Lambda timeout is 300 s)"
    );
    v["fence"]["confirm_s"] = json!(240);
    v["fence"]["timeout_ms"] = json!(10_000);
    assert!(err_of(v).starts_with("plan.fence: confirm_s plus eight calls"));
    assert_eq!(
        err_of(with("timings.verify_deadline_s", json!(900))),
        "plan.timings.verify_deadline_s: must be at most 840 (verify's Lambda timeout is 900 s)"
    );
    assert_eq!(
        err_of(with("timings.call_timeout_ms", json!(60_000))),
        "plan.timings.call_timeout_ms: must be at most 20000 (the steps' Lambda timeout is 60 s)"
    );
}

#[test]
fn the_canary_host_is_optional_and_an_empty_one_is_named() {
    let plan = Plan::from_json(EXAMPLE).unwrap();
    assert!(
        matches!(
            &plan.canary,
            Canary::Postgres {
                host: None,
                tls_server_name: None,
                ..
            }
        ),
        "the example connects to S's endpoint as RDS reports it"
    );
    assert_eq!(
        err_of(with("canary.postgres.host", json!(" "))),
        "plan.canary.postgres.host: must not be empty"
    );
    assert_eq!(
        err_of(with("canary.postgres.tls_server_name", json!(""))),
        "plan.canary.postgres.tls_server_name: must not be empty"
    );
}

#[test]
fn invalid_values_are_named_by_path() {
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "rpo_table.table",
            json!("orders; DROP TABLE orders"),
            "plan.rpo_table.table: must be a plain SQL identifier",
        ),
        (
            "rpo_table.table",
            json!("a.b.c"),
            "plan.rpo_table.table: must be a plain SQL identifier",
        ),
        (
            "rpo_table.column",
            json!("1at"),
            "plan.rpo_table.column: must be a plain SQL identifier",
        ),
        (
            "rpo_table.database",
            json!(""),
            "plan.rpo_table.database: must not be empty",
        ),
        (
            "regions.standby.region",
            json!("ap-northeast-2"),
            "plan.regions.standby.region: must differ",
        ),
        (
            "regions.primary.region",
            json!("seoul"),
            "plan.regions.primary.region: not an AWS Region",
        ),
        (
            "regions.standby.db_instance_id",
            json!(""),
            "plan.regions.standby.db_instance_id: must not be empty",
        ),
        (
            "regions.primary.endpoint",
            json!("p.example.com"),
            "plan.regions.primary.endpoint: must be an http(s) URL",
        ),
        (
            "database.kind",
            json!("oracle"),
            "plan.database.kind: unknown variant `oracle`",
        ),
        (
            "database.backup_retention_days",
            json!(0),
            "plan.database.backup_retention_days: must be between 1 and 35",
        ),
        (
            "dns.switch_mode",
            json!("teleport"),
            "plan.dns.switch_mode: unknown variant",
        ),
        (
            "dns.health_path",
            json!("health"),
            "plan.dns.health_path: must start with /",
        ),
        (
            "canary.postgres.table",
            json!("x; drop table y"),
            "plan.canary.postgres.table: must be a plain SQL identifier",
        ),
        (
            "canary.postgres.port",
            json!(0),
            "plan.canary.postgres.port: must be a TCP port",
        ),
        (
            "canary.postgres.port",
            json!("5432"),
            "plan.canary.postgres.port: invalid type",
        ),
        (
            "slack.approvers",
            json!([]),
            "plan.slack.approvers: must name at least one approver",
        ),
        (
            "slack.approvers.1.user_id",
            json!("U0ONCALL01"),
            "plan.slack.approvers.1.user_id: listed twice",
        ),
        (
            "slack.approvers.0.name",
            json!(" "),
            "plan.slack.approvers.0.name: must not be empty",
        ),
        (
            "targets.rto_s",
            json!(0),
            "plan.targets.rto_s: must be at least 1",
        ),
        (
            "targets.rpo_s",
            json!(-1),
            "plan.targets.rpo_s: invalid value",
        ),
        (
            "detection.failures_to_trigger",
            json!(0),
            "plan.detection.failures_to_trigger: must be at least 1",
        ),
        (
            "detection.healthy_share_below",
            json!(1.5),
            "plan.detection.healthy_share_below: must be between 0 and 1",
        ),
        (
            "detection.rule",
            json!("vibes"),
            "plan.detection.rule: unknown variant",
        ),
        (
            "timings.promotion_poll_s",
            json!(0),
            "plan.timings.promotion_poll_s: must be at least 1",
        ),
        (
            "timings.promotion_max_polls",
            json!(0),
            "plan.timings.promotion_max_polls: must be at least 1",
        ),
        (
            "timings.approval_timeout_s",
            json!(100000),
            "plan.timings.approval_timeout_s: must be at most 86400",
        ),
        (
            "fence.on_unconfirmed",
            json!("maybe"),
            "plan.fence.on_unconfirmed: unknown variant",
        ),
        (
            "canary.postgres.ca_secret_arn",
            json!(null),
            "plan.canary.postgres.ca_secret_arn: required when require_tls is true",
        ),
        (
            "canary.postgres.ca_secret_arn",
            json!(""),
            "plan.canary.postgres.ca_secret_arn: must not be empty",
        ),
        (
            "explain.model_id",
            json!(" "),
            "plan.explain.model_id: must not be empty",
        ),
        (
            "explain.timeout_ms",
            json!(20_001),
            "plan.explain.timeout_ms: must be between 1 and 20000",
        ),
        (
            "explain.timeout_ms",
            json!(0),
            "plan.explain.timeout_ms: must be between 1 and 20000",
        ),
        (
            "explain.region",
            json!(""),
            "plan.explain.region: must not be empty",
        ),
        (
            "regions.primary.target_group_arns.0",
            json!("shop-p-web"),
            "plan.regions.primary.target_group_arns[0]: \"shop-p-web\" is not an ARN",
        ),
        (
            "regions.primary.target_group_arns.0",
            json!(
                "arn:aws:elasticloadbalancing:ap-northeast-2:123456789012:loadbalancer/app/shop/50dc6c495c0c9188"
            ),
            "plan.regions.primary.target_group_arns[0]: \"arn:aws:elasticloadbalancing:ap-northeast-2:123456789012:loadbalancer/app/shop/50dc6c495c0c9188\" is not a target group ARN",
        ),
        (
            "regions.standby.target_group_arns.0",
            json!(
                "arn:aws:elasticloadbalancing:ap-northeast-2:123456789012:targetgroup/shop-p-web/0123456789abcdef"
            ),
            "plan.regions.standby.target_group_arns[0]: \"arn:aws:elasticloadbalancing:ap-northeast-2:123456789012:targetgroup/shop-p-web/0123456789abcdef\" is in ap-northeast-2, but this site is in ap-northeast-1",
        ),
    ];
    for (path, value, want) in cases {
        let got = err_of(with(path, value.clone()));
        assert!(
            got.starts_with(want),
            "{path} = {value}: got {got:?}, want prefix {want:?}"
        );
    }
}

#[test]
fn unknown_fields_are_refused_with_their_path() {
    let v = with("regions.primary", {
        let mut p = example()["regions"]["primary"].clone();
        p["db_instanse_id"] = json!("typo");
        p
    });
    assert_eq!(
        err_of(v),
        "plan.regions.primary.db_instanse_id: unknown field (check the spelling)"
    );
}

#[test]
fn kind_specific_fields_are_required() {
    // Issue 12, scenario 11: a mode that validates and then fails is worse
    // than one refused up front.
    let mut v = with("database.kind", json!("aurora_global"));
    v["database"]["global_cluster_id"] = json!("shop-global");
    v["database"]["standby_cluster_arn"] =
        json!("arn:aws:rds:ap-northeast-1:123456789012:cluster:shop-s");
    assert_eq!(
        err_of(v),
        "plan.database.kind: aurora_global is not supported end to end yet (diagnose, the lag gate and the fence are written for RDS instances); use rds_instance"
    );
    let v = with("dns.switch_mode", json!("routing_control"));
    assert_eq!(
        err_of(v),
        "plan.dns.arc_cluster_endpoints: must name at least one cluster endpoint (required for switch_mode routing_control)"
    );
    // Issue 12, scenario 6: alias A records work with the levers that leave
    // the records alone, and are refused where switch would write a CNAME.
    let mut v = with("dns.record_type", json!("alias"));
    v["dns"]["switch_mode"] = json!("record_upsert");
    assert!(
        err_of(v)
            .starts_with("plan.dns.record_type: alias records cannot be switched by record_upsert"),
    );
    let mut v = with("dns.switch_mode", json!("routing_control"));
    v["dns"]["arc_cluster_endpoints"] =
        json!([{"endpoint": "https://arc.example", "region": "us-west-2"}]);
    assert_eq!(
        err_of(v),
        "plan.regions.primary.routing_control_arn: missing (required for switch_mode routing_control)"
    );
}

#[test]
fn not_json_at_all_is_a_plan_error() {
    let err = Plan::from_json("{ this is not json").unwrap_err();
    assert_eq!(err.path, "plan");
}

#[test]
fn comments_inside_strings_survive() {
    let text = "{\"a\": \"http://x//y\", // note\n \"b\": \"q\\\"//\"}";
    let v: Value = serde_json::from_str(&strip_comments(text)).unwrap();
    assert_eq!(v["a"], "http://x//y");
    assert_eq!(v["b"], "q\"//");
}

#[test]
fn a_plan_round_trips_through_the_execution_input() {
    let plan = Plan::from_json(EXAMPLE).unwrap();
    let back = Plan::from_value(serde_json::to_value(&plan).unwrap()).unwrap();
    assert_eq!(plan, back);
}

#[test]
fn cli_approvers_admit_a_roles_sessions_and_a_user_and_nobody_else() {
    let plan = Plan::from_json(
        &with(
            "cli_approvers",
            json!([
                {"arn": "arn:aws:iam::123456789012:role/ops/Oncall", "name": "On-call role"},
                {"arn": "arn:aws:iam::123456789012:user/alice", "name": "Alice"},
            ]),
        )
        .to_string(),
    )
    .unwrap();
    // Any session of the role, whatever the role's path.
    let role = plan
        .cli_approver("arn:aws:sts::123456789012:assumed-role/Oncall/alice@example.com")
        .unwrap();
    assert_eq!(role.name, "On-call role");
    assert_eq!(
        plan.decider_name("arn:aws:iam::123456789012:user/alice"),
        Some("Alice")
    );
    for not_listed in [
        // Another account's role of the same name.
        "arn:aws:sts::210987654321:assumed-role/Oncall/alice",
        // Another partition.
        "arn:aws-cn:sts::123456789012:assumed-role/Oncall/alice",
        // Another role, another user, the account root, a federated user.
        "arn:aws:sts::123456789012:assumed-role/Developer/alice",
        "arn:aws:iam::123456789012:user/bob",
        "arn:aws:iam::123456789012:root",
        "arn:aws:sts::123456789012:federated-user/alice",
        // A role ARN is not a caller: GetCallerIdentity never returns one.
        "arn:aws:iam::123456789012:role/ops/Oncall",
        "",
    ] {
        assert!(plan.cli_approver(not_listed).is_none(), "{not_listed}");
    }
    // Slack ids still decide as before.
    assert_eq!(plan.decider_name("U0ONCALL01"), Some("Primary on-call"));
}

#[test]
fn a_cli_approver_that_is_not_an_iam_role_or_user_is_refused_by_path() {
    for (arn, why) in [
        (
            "arn:aws:sts::123456789012:assumed-role/Oncall/s",
            "IAM role or user ARN",
        ),
        ("arn:aws:iam::1234:role/Oncall", "IAM role or user ARN"),
        (
            "arn:aws:iam::123456789012:group/ops",
            "IAM role or user ARN",
        ),
        ("Oncall", "IAM role or user ARN"),
    ] {
        let e = err_of(with("cli_approvers", json!([{"arn": arn, "name": "x"}])));
        assert!(
            e.contains("cli_approvers.0.arn") && e.contains(why),
            "{arn}: {e}"
        );
    }
    let twice = json!({"arn": "arn:aws:iam::123456789012:role/Oncall", "name": "x"});
    let e = err_of(with("cli_approvers", json!([twice, twice])));
    assert!(
        e.contains("cli_approvers.1.arn") && e.contains("twice"),
        "{e}"
    );
}

/// Issue 16: the switchover block defaults when absent, and bounds that
/// would let one reading promote, or keep P without writes for long, are
/// refused naming the field.
#[test]
fn the_switchover_block_defaults_and_its_bounds_are_checked() {
    let plan = Plan::from_json(&without("switchover").to_string()).unwrap();
    assert_eq!(plan.switchover, SwitchoverPolicy::default());
    assert_eq!(
        (
            plan.switchover.settle_s,
            plan.switchover.timeout_s,
            plan.switchover.poll_s
        ),
        (5, 120, 2)
    );
    assert!(plan.switchover_lease_s() >= plan.timings.lock_lease_s);
    for (block, says) in [
        (
            json!({"poll_s": 0}),
            "plan.switchover.poll_s: must be at least 1",
        ),
        (
            json!({"settle_s": 1, "poll_s": 2}),
            "plan.switchover.settle_s: must be at least poll_s",
        ),
        (
            json!({"settle_s": 5, "timeout_s": 6, "poll_s": 2}),
            "plan.switchover.timeout_s: must be at least settle_s + poll_s",
        ),
        (
            json!({"timeout_s": 901}),
            "plan.switchover.timeout_s: must be at most 900 s",
        ),
    ] {
        let err = err_of(with("switchover", block.clone()));
        assert!(err.starts_with(says), "{block}: {err}");
    }
    assert!(err_of(with("switchover", json!({"settle": 5}))).contains("unknown field"));
}

#[test]
fn the_reversed_plan_puts_s_first_and_restores_the_writer_recorded_at_failover() {
    let plan = Plan::from_json(&example().to_string()).unwrap();
    let lever = writer_lever(&plan.dns.writer);
    assert_eq!(
        lever,
        "route53:Z1111111111111111111:writer.shop.internal CNAME (writer)"
    );
    let previous = std::collections::BTreeMap::from([(
        lever.clone(),
        Some("shop-db.abcdefghijkl.ap-northeast-2.rds.amazonaws.com".to_owned()),
    )]);
    let r = plan.reversed(&previous).unwrap();
    assert_eq!(r.regions.primary, plan.regions.standby);
    assert_eq!(r.regions.standby, plan.regions.primary);
    assert_eq!(
        r.dns.standby_target,
        "shop-p-web-1234567890.ap-northeast-2.elb.amazonaws.com"
    );
    match &r.dns.writer {
        WriterEndpoint::Cname { standby_target, .. } => assert_eq!(
            standby_target,
            "shop-db.abcdefghijkl.ap-northeast-2.rds.amazonaws.com"
        ),
        other => panic!("the writer changed kind: {other:?}"),
    }
    // S's resources audited after a failover name nothing of P's; the
    // reversed plan is a plan of its own, valid, with no failback in it.
    assert!(r.dependencies.is_empty());
    assert!(r.failback.is_none());
    r.validate().unwrap();
    // Reversing twice is not the way back: there is no failback section left.
    assert!(r.reversed(&previous).is_err());
}

#[test]
fn a_failback_without_what_it_must_restore_is_refused_with_the_reason() {
    let plan = Plan::from_json(&example().to_string()).unwrap();
    let none = std::collections::BTreeMap::new();
    let e = plan.reversed(&none).unwrap_err().to_string();
    assert!(e.contains("not on record"), "{e}");
    let lever = writer_lever(&plan.dns.writer);
    let empty = std::collections::BTreeMap::from([(lever, None)]);
    let e = plan.reversed(&empty).unwrap_err().to_string();
    assert!(e.contains("had no value before the failover"), "{e}");
    let mut no_section = plan.clone();
    no_section.failback = None;
    let e = no_section.reversed(&none).unwrap_err().to_string();
    assert!(e.contains("plan.failback is missing"), "{e}");
}

#[test]
fn the_failback_section_is_validated_field_by_field() {
    let e = err_of(with("failback.primary_target", json!("")));
    assert!(e.contains("plan.failback.primary_target"), "{e}");
    let s_target = example()["dns"]["standby_target"].clone();
    let e = err_of(with("failback.primary_target", s_target));
    assert!(e.contains("not dns.standby_target"), "{e}");
    let e = err_of(with(
        "failback.tables",
        json!([{"table": "orders; drop", "key": "id"}]),
    ));
    assert!(e.contains("plan.failback.tables.0.table"), "{e}");
    let e = err_of(with(
        "failback.tables",
        json!([{"table": "orders", "key": "id)"}]),
    ));
    assert!(e.contains("plan.failback.tables.0.key"), "{e}");
    let e = err_of(with("failback.reprotect_timeout_s", json!(5)));
    assert!(e.contains("plan.failback.reprotect_timeout_s"), "{e}");
    let e = err_of(with("failback.lag_near_zero_s", json!(-1.0)));
    assert!(e.contains("plan.failback.lag_near_zero_s"), "{e}");
    // A canary with a fixed host (a proxy) needs P's address for the way
    // back: the plan still fails over without it, the failback refuses.
    let proxied =
        Plan::from_json(&with("canary.postgres.host", json!("proxy.shop.internal")).to_string())
            .unwrap();
    let lever = writer_lever(&proxied.dns.writer);
    let previous = std::collections::BTreeMap::from([(lever, Some("p-db".to_owned()))]);
    let e = proxied.reversed(&previous).unwrap_err().to_string();
    assert!(e.contains("plan.failback.canary_host is required"), "{e}");
    let mut v = with("canary.postgres.host", json!("proxy.shop.internal"));
    v["failback"]["canary_host"] = json!("proxy-p.shop.internal");
    v["failback"]["canary_port"] = json!(6432);
    let plan = Plan::from_json(&v.to_string()).unwrap();
    match plan.reversed(&previous).unwrap().canary {
        Canary::Postgres { host, port, .. } => {
            assert_eq!(host.as_deref(), Some("proxy-p.shop.internal"));
            assert_eq!(port, 6432);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn capacity_names_what_it_checks_with_a_minimum_of_at_least_one() {
    let plan = Plan::from_value(example()).unwrap();
    assert_eq!(plan.capacity.ecs_services[0].min_running, 2);
    assert!(
        Plan::from_value({
            let mut v = example();
            v.as_object_mut().unwrap().remove("capacity");
            v
        })
        .unwrap()
        .capacity
        .is_empty()
    );
    for (section, entry, path, why) in [
        (
            "ecs_services",
            json!({"cluster": "shop", "service": "web", "min_running": 0}),
            "capacity.ecs_services.0.min_running",
            "at least 1",
        ),
        (
            "ecs_services",
            json!({"cluster": " ", "service": "web", "min_running": 1}),
            "capacity.ecs_services.0.cluster",
            "empty",
        ),
        (
            "auto_scaling_groups",
            json!({"name": "web", "min_in_service": 0}),
            "capacity.auto_scaling_groups.0.min_in_service",
            "at least 1",
        ),
        (
            "eks_node_groups",
            json!({"cluster": "c", "node_group": "", "min_nodes": 1}),
            "capacity.eks_node_groups.0.node_group",
            "empty",
        ),
    ] {
        let e = err_of(with("capacity", json!({ section: [entry] })));
        assert!(e.contains(path) && e.contains(why), "{section}: {e}");
    }
    let twice = json!({"name": "web", "min_in_service": 1});
    let e = err_of(with(
        "capacity",
        json!({"auto_scaling_groups": [twice, twice]}),
    ));
    assert!(
        e.contains("auto_scaling_groups.1") && e.contains("twice"),
        "{e}"
    );
    // A misspelt field is refused, not ignored.
    let e = err_of(with(
        "capacity",
        json!({"ecs_services": [{"cluster": "c", "service": "s", "min_runing": 2}]}),
    ));
    assert!(
        e.contains("min_runing") || e.contains("unknown field"),
        "{e}"
    );
    // After a failover the plan is turned around: S's compute names
    // nothing on P's side, so the reversed plan checks none.
    let previous = std::collections::BTreeMap::from([(
        writer_lever(&plan.dns.writer),
        Some("shop-db.abcdefghijkl.ap-northeast-2.rds.amazonaws.com".to_owned()),
    )]);
    assert!(plan.reversed(&previous).unwrap().capacity.is_empty());
}

/// Every key of `v`, at any depth.
fn keys(v: &serde_json::Value, out: &mut std::collections::BTreeSet<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                out.insert(k.clone());
                keys(x, out);
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| keys(x, out)),
        _ => {}
    }
}

/// docs/reference/plan.md names every field a plan holds (as `field`, or
/// as "field" inside a JSON shape): the example plan's and the drill
/// plan's, read into the plan types and written back with every key they
/// keep. A field added to the types and set in either plan fails here
/// until the reference names it.
#[test]
fn the_plan_reference_names_every_field() {
    let doc = include_str!("../../../docs/reference/plan.md");
    for text in [
        include_str!("../../../infra/plan.example.jsonc"),
        include_str!("../../../drill/plan.json"),
    ] {
        let plan = Plan::from_json(text).expect("the plan parses");
        let mut found = std::collections::BTreeSet::new();
        keys(&serde_json::to_value(&plan).unwrap(), &mut found);
        let missing: Vec<_> = found
            .iter()
            .filter(|k| !doc.contains(&format!("`{k}`")) && !doc.contains(&format!("\"{k}\"")))
            .collect();
        assert!(
            missing.is_empty(),
            "docs/reference/plan.md does not name {missing:?}"
        );
    }
}
