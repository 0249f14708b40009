//! `handover readiness` against moto: the real binary reads the world the
//! plan names and says what would break a failover, with the fix.

use handover::plan::{AutoScalingGroupMinimum, Canary, EcsServiceMinimum, Plan};
use handover::readiness::iam::FailoverRoles;
use handover::slack::stand_in::SlackStandIn;
use handover_testkit::stack::{provision_capacity, provision_failover_roles};
use handover_testkit::world::{
    provision_databases, provision_dns, provision_fence_group, put_db_secret, put_replica_lag,
    test_postgres, test_postgres_cas, unique_plan,
};
use handover_testkit::{TEST_REGION, aws, fresh_store};
use std::process::Command;

/// `handover readiness` on `plan`, told the roles to simulate (`roles`) as
/// the stack's outputs give them.
fn readiness_with(
    plan: &Plan,
    table: &str,
    slack: &str,
    roles: Option<&FailoverRoles>,
    json: bool,
) -> (i32, String, String) {
    let file = std::env::temp_dir().join(handover_testkit::unique("plan") + ".json");
    std::fs::write(&file, serde_json::to_string(plan).unwrap()).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_handover"));
    cmd.args(["readiness", "--table", table, "--plan-file"])
        .arg(&file)
        .args(["--region", TEST_REGION])
        .env("AWS_ENDPOINT_URL", handover_testkit::endpoint())
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("SLACK_API_BASE", slack);
    if json {
        cmd.arg("--json");
    }
    if let Some(r) = roles {
        cmd.args([
            "--fence-role-arn",
            &r.fence,
            "--promote-role-arn",
            &r.promote,
        ]);
    }
    let out = cmd.output().expect("run handover");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn readiness(w: &World, json: bool) -> (i32, String, String) {
    readiness_with(&w.plan, &w.table, &w.slack.api_base(), Some(&w.roles), json)
}

/// What [`world`] made.
struct World {
    plan: Plan,
    table: String,
    slack: SlackStandIn,
    roles: FailoverRoles,
}

/// A world as the plan needs it: P and its replica, the fence group, the
/// failover records, ReplicaLag, the canary's PostgreSQL and secrets, S's
/// SSM parameter, Slack (the stand-in, with the bot token in Secrets
/// Manager), S's compute, and the fence and promote roles as the template
/// writes them.
async fn world(canary_user: &str) -> World {
    let aws = aws();
    let mut plan = unique_plan();
    // Readiness sends some thirty reads at once to one emulator process.
    // Under CI's load a read can take longer than unique_plan's 1.5 s, so
    // these tests keep the plan's default budget (5 s). No test here waits
    // for a call to time out.
    plan.timings.call_timeout_ms = handover::plan::Timings::default().call_timeout_ms;
    provision_fence_group(&aws, &mut plan).await;
    provision_capacity(&aws, &mut plan).await;
    provision_databases(&aws, &plan).await;
    let slack = SlackStandIn::start().await.unwrap();
    plan.slack.bot_token_secret_arn = aws
        .secrets(TEST_REGION)
        .await
        .create_secret()
        .name(handover_testkit::unique("slack-bot"))
        .secret_string("xoxb-readiness-test-token")
        .send()
        .await
        .unwrap()
        .arn
        .unwrap();
    provision_dns(&aws, &mut plan, "p-alb.ap-northeast-2.elb.amazonaws.com").await;
    let s = &plan.regions.standby;
    put_replica_lag(&aws, &s.region, &s.db_instance_id, 1.0, chrono::Utc::now()).await;
    let (port, password) = test_postgres();
    let (ca, _) = test_postgres_cas();
    let ca_arn = aws
        .secrets(TEST_REGION)
        .await
        .create_secret()
        .name(handover_testkit::unique("ca"))
        .secret_string(ca)
        .send()
        .await
        .unwrap()
        .arn
        .unwrap();
    let secret = put_db_secret(&aws, TEST_REGION, canary_user, &password).await;
    plan.regions.standby.db_secret_arn = None;
    if let Canary::Postgres {
        host,
        port: p,
        database,
        secret_arn,
        require_tls,
        ca_secret_arn,
        tls_server_name,
        ..
    } = &mut plan.canary
    {
        *host = Some("127.0.0.1".into());
        *p = port;
        *database = "handover".into();
        *secret_arn = secret;
        *require_tls = true;
        *ca_secret_arn = Some(ca_arn);
        *tls_server_name = Some("localhost".into());
    }
    for dep in &plan.dependencies {
        if let handover::plan::Dependency::SsmParameter { name } = dep {
            aws.ssm(TEST_REGION)
                .await
                .put_parameter()
                .name(name)
                .value("123456789012.dkr.ecr.ap-northeast-1.amazonaws.com/shop:1")
                .r#type(aws_sdk_ssm::types::ParameterType::String)
                .overwrite(true)
                .send()
                .await
                .unwrap();
        }
    }
    let store = fresh_store(&aws).await;
    store
        .init_primary(
            &plan.regions.primary.region,
            &plan.regions.primary.db_instance_id,
            chrono::Utc::now(),
        )
        .await
        .unwrap();
    let roles = provision_failover_roles(&aws, &plan, store.table()).await;
    World {
        plan,
        table: store.table().to_owned(),
        slack,
        roles,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_naming_another_user_than_the_replicas_master_fails_readiness_with_its_fix() {
    let w = world("app_user").await;
    let (code, out, err) = readiness(&w, false);
    assert_eq!(code, 5, "{out}{err}");
    assert!(out.contains("FAIL secrets.db_user"), "{out}");
    assert!(
        out.contains("names \"app_user\", S's master user is \"handover\""),
        "{out}"
    );
    assert!(out.contains("Fix: Put S's master user"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_world_the_plan_needs_is_ready_and_json_names_every_check() {
    let w = world("handover").await;
    let (code, out, err) = readiness(&w, true);
    assert_eq!(code, 0, "{out}{err}");
    let r: handover::readiness::Readiness = serde_json::from_str(&out).expect("JSON");
    let verdict = |id: &str| {
        r.checks
            .iter()
            .find(|c| c.id == id)
            .map(|c| c.verdict)
            .unwrap_or_else(|| panic!("no {id} in {out}"))
    };
    use handover::readiness::Verdict::{Pass, Warn};
    for id in [
        "rds.p_exists",
        "rds.s_replica_of_p",
        "rds.p_backups",
        "rds.replica_lag",
        "rds.s_maintenance",
        "secrets.db_user",
        "detection.health_check_target",
        "detection.probe_endpoint",
        "dns.ttl",
        "dependencies.ssm_parameter",
        "state.primary_record",
        "state.transition",
        "state.lock",
        "fence.group",
        "slack.bot_token",
        "slack.channel",
        "slack.approver",
        "iam.fence_role",
        "iam.promote_role",
        "capacity.ecs_service",
        "capacity.eks_node_group",
    ] {
        assert_eq!(verdict(id), Pass, "{id}: {out}");
    }
    // The test database is not a replica: the canary reached it over TLS
    // and says so.
    assert_eq!(verdict("canary.connect"), Warn, "{out}");
    assert!(
        out.contains("TLS certificate verified for localhost"),
        "{out}"
    );
}

/// Drift made in the real parts: an inbound rule added to the fence group
/// in EC2, the bot removed from the channel in Slack, an approver
/// deactivated. Each is caught with its fix.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fence_group_that_admits_anyone_and_a_bot_outside_the_channel_fail_readiness() {
    let w = world("handover").await;
    let (plan, slack) = (&w.plan, &w.slack);
    let aws = aws();
    aws.ec2(&plan.regions.primary.region)
        .await
        .authorize_security_group_ingress()
        .group_id(&plan.regions.primary.fence_security_group_id)
        .ip_protocol("tcp")
        .from_port(5432)
        .to_port(5432)
        .cidr_ip("10.0.0.0/8")
        .send()
        .await
        .unwrap();
    slack.leave_channel(&plan.slack.channel);
    slack.deactivate_user(&plan.slack.approvers[0].user_id);
    let (code, out, err) = readiness(&w, false);
    assert_eq!(code, 5, "{out}{err}");
    for want in [
        "FAIL fence.group: observed ",
        "allows in: tcp 5432 from 10.0.0.0/8",
        "Fix: Remove every inbound rule from the fence group",
        &format!(
            "FAIL slack.channel: observed the bot is not a member of {}",
            plan.slack.channel
        ),
        "Fix: Invite the bot to the channel",
        "WARN slack.approver",
        "is deactivated",
    ] {
        assert!(out.contains(want), "{want:?} not in:\n{out}");
    }
    // The bot token was sent as Slack expects it, and never printed.
    let calls = slack.calls();
    assert!(
        calls.iter().any(|c| c.path == "/api/auth.test"
            && c.authorization.as_deref() == Some("Bearer xoxb-readiness-test-token")),
        "{calls:?}"
    );
    assert!(!out.contains("xoxb-") && !err.contains("xoxb-"));
}

/// The app installed from the manifest the walkthrough once gave (only
/// `chat:write`): Slack refuses conversations.info and users.info with
/// `missing_scope`, and readiness fails naming the scopes to add. The
/// repository's manifest (`infra/slack-manifest.json`, which the stand-in
/// grants by default) passes the same checks in
/// `the_world_the_plan_needs_is_ready_and_json_names_every_check`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_app_without_the_read_scopes_fails_readiness_naming_them() {
    let w = world("handover").await;
    w.slack.grant_only(&["chat:write"]);
    let (code, out, err) = readiness(&w, false);
    assert_eq!(code, 5, "{out}{err}");
    for want in [
        "FAIL slack.channel",
        "missing_scope (needed: channels:read,groups:read,im:read,mpim:read; the app has: chat:write",
        "WARN slack.approver",
        "missing_scope (needed: users:read",
        "reinstall it from infra/slack-manifest.json",
    ] {
        assert!(out.contains(want), "{want:?} not in:\n{out}");
    }
    // auth.test needs no scope: the token itself still passes.
    assert!(!out.contains("slack.bot_token"), "{out}");
}

/// RDS schedules an OS update for S tonight (DescribePendingMaintenanceActions,
/// which the router serves as RDS answers it): readiness fails with the
/// command that applies it in a quiet hour; a week away it only warns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn maintenance_pending_on_s_fails_readiness_when_due_and_warns_when_later() {
    let w = world("handover").await;
    let plan = &w.plan;
    let s = plan.regions.standby.db_instance_id.clone();
    let due = |hours: i64| {
        (chrono::Utc::now() + chrono::Duration::hours(hours))
            .format("%Y-%m-%dT%H:%M:%SZ")
            .to_string()
    };
    handover_testkit::control(
        "maintenance",
        serde_json::json!({ &s: [{
            "action": "system-update",
            "description": "New Operating System update is available",
            "current_apply_date": due(5),
            "auto_applied_after_date": due(5),
        }]}),
    )
    .await;
    let (code, out, err) = readiness(&w, false);
    assert_eq!(code, 5, "{out}{err}");
    assert!(
        out.contains(&format!(
            "FAIL rds.s_maintenance: observed {s} has pending maintenance: system-update (due "
        )),
        "{out}"
    );
    assert!(out.contains("apply-pending-maintenance-action"), "{out}");
    handover_testkit::control(
        "maintenance",
        serde_json::json!({ &s: [{"action": "db-upgrade", "forced_apply_date": due(24 * 10)}] }),
    )
    .await;
    let (_, out, _) = readiness(&w, false);
    assert!(out.contains("WARN rds.s_maintenance"), "{out}");
    assert!(out.contains("db-upgrade (due "), "{out}");
    handover_testkit::control("maintenance", serde_json::json!({ &s: null })).await;
}

/// S's compute drifts in the real parts: a service whose tasks never stay
/// up (desired 2, running 0: the reference drill's CrashLoopBackOff), and
/// an Auto Scaling group scaled below the plan's minimum. A service the
/// plan names but S lacks fails too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s_compute_short_of_the_plans_minimum_fails_readiness_with_the_fix() {
    let mut w = world("handover").await;
    let aws = aws();
    let region = w.plan.regions.standby.region.clone();
    let cluster = w.plan.capacity.ecs_services[0].cluster.clone();
    let family = handover_testkit::unique("api");
    aws_sdk_ecs::Client::new(&aws.config(&region).await)
        .register_task_definition()
        .family(&family)
        .container_definitions(
            aws_sdk_ecs::types::ContainerDefinition::builder()
                .name("api")
                .image("123456789012.dkr.ecr.ap-northeast-1.amazonaws.com/api:1")
                .memory(256)
                .build(),
        )
        .send()
        .await
        .unwrap();
    handover_testkit::stack::ecs_service(&aws, &region, &cluster, "api", &family, 2, false).await;
    let group = handover_testkit::unique("web-asg");
    handover_testkit::stack::auto_scaling_group(&aws, &region, &group, 1, 4).await;
    w.plan.capacity.ecs_services.push(EcsServiceMinimum {
        cluster: cluster.clone(),
        service: "api".into(),
        min_running: 2,
    });
    w.plan.capacity.ecs_services.push(EcsServiceMinimum {
        cluster: cluster.clone(),
        service: "gone".into(),
        min_running: 1,
    });
    w.plan
        .capacity
        .auto_scaling_groups
        .push(AutoScalingGroupMinimum {
            name: group.clone(),
            min_in_service: 2,
        });
    let (code, out, err) = readiness(&w, false);
    assert_eq!(code, 5, "{out}{err}");
    for want in [
        &format!(
            "FAIL capacity.ecs_service: observed {cluster}/api is ACTIVE: 0 running, 2 pending, 2 desired"
        ),
        "Tasks are desired but do not stay running",
        &format!("FAIL capacity.ecs_service: observed no ECS service {cluster}/gone in {region}"),
        &format!(
            "FAIL capacity.auto_scaling_group: observed {group}: 1 of 1 instances in service, 1 desired, max 4"
        ),
        &format!(
            "aws autoscaling set-desired-capacity --region {region} --auto-scaling-group-name {group} --desired-capacity 2"
        ),
    ] {
        assert!(out.contains(want), "{want:?} not in:\n{out}");
    }
    // The service the world runs at its minimum still passes.
    let (_, json, _) = readiness(&w, true);
    let r: handover::readiness::Readiness = serde_json::from_str(&json).unwrap();
    assert!(
        r.checks.iter().any(|c| c.id == "capacity.ecs_service"
            && c.verdict == handover::readiness::Verdict::Pass
            && c.observed.contains("/web is ACTIVE: 2 running")),
        "{json}"
    );
}

/// The fence role's policy edited by hand after deploy (RebootDBInstance
/// dropped), and a permissions boundary that denies promotion: IAM's policy
/// simulation (served by the router from moto's IAM) fails each role,
/// naming the call and the resource. Without the roles' ARNs the CLI says
/// it did not simulate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_roles_that_would_be_refused_fail_readiness_and_unknown_roles_warn() {
    let w = world("handover").await;
    let aws = aws();
    let iam = handover_testkit::stack::iam(&aws).await;
    let (_, out, _) = readiness(&w, false);
    assert!(
        !out.contains("iam."),
        "the roles as the template writes them pass:\n{out}"
    );
    let name = |arn: &str| arn.rsplit('/').next().unwrap().to_owned();
    let (_, mut fence) = handover_testkit::stack::role_policies("FenceRole", &w.plan, &w.table)
        .into_iter()
        .next()
        .unwrap();
    for st in fence["Statement"].as_array_mut().unwrap() {
        if let Some(actions) = st["Action"].as_array_mut() {
            actions.retain(|a| a != "rds:RebootDBInstance");
        }
    }
    iam.put_role_policy()
        .role_name(name(&w.roles.fence))
        .policy_name("fence")
        .policy_document(fence.to_string())
        .send()
        .await
        .unwrap();
    handover_testkit::stack::set_boundary(
        &iam,
        "no-promotion",
        serde_json::json!({
            "Version": "2012-10-17",
            "Statement": [
                {"Effect": "Allow", "Action": "*", "Resource": "*"},
                {"Effect": "Deny", "Action": "rds:PromoteReadReplica", "Resource": "*"}
            ]
        }),
        &[&w.roles.promote],
    )
    .await;
    let (code, out, err) = readiness(&w, false);
    assert_eq!(code, 5, "{out}{err}");
    let p = &w.plan.regions.primary;
    let s = &w.plan.regions.standby;
    for want in [
        format!(
            "FAIL iam.fence_role: observed {} would be refused: rds:RebootDBInstance on arn:aws:rds:{}:123456789012:db:{}: implicitDeny",
            w.roles.fence, p.region, p.db_instance_id
        ),
        format!(
            "FAIL iam.promote_role: observed {} would be refused: rds:PromoteReadReplica on arn:aws:rds:{}:123456789012:db:{}: explicitDeny",
            w.roles.promote, s.region, s.db_instance_id
        ),
        "Restore the fence role's policy from the template".to_owned(),
    ] {
        assert!(out.contains(&want), "{want:?} not in:\n{out}");
    }
    // Only those: the fence's other calls, and the approval key's read
    // under its LeadingKeys condition, are still allowed.
    assert!(!out.contains("rds:ModifyDBInstance on"), "{out}");
    assert!(!out.contains("dynamodb:GetItem on"), "{out}");
    // Not told the roles: a warning that says so.
    let (_, out, _) = readiness_with(&w.plan, &w.table, &w.slack.api_base(), None, false);
    assert!(
        out.contains("WARN iam.fence_role: observed not simulated: this caller was not given the fence role's ARN"),
        "{out}"
    );
    // One flag without the other is a usage error that reads nothing.
    let file = std::env::temp_dir().join(handover_testkit::unique("plan") + ".json");
    std::fs::write(&file, serde_json::to_string(&w.plan).unwrap()).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_handover"))
        .args([
            "readiness",
            "--table",
            &w.table,
            "--region",
            TEST_REGION,
            "--plan-file",
        ])
        .arg(&file)
        .args(["--fence-role-arn", &w.roles.fence])
        .env("AWS_ENDPOINT_URL", handover_testkit::endpoint())
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env_remove("HANDOVER_PROMOTE_ROLE_ARN")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("give both --fence-role-arn and --promote-role-arn")
    );
}

/// An account's usual Region guard, as a permissions boundary on both
/// roles: deny everything unless aws:RequestedRegion is one of ours. IAM
/// evaluates StringNotEquals on a key the request lacks as true, so a
/// simulation that did not say each call's Region would read as refused;
/// each ask carries the Region its real call goes to, and passes. The same
/// guard without S's Region refuses the promotion there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_region_guard_is_evaluated_with_the_region_each_call_goes_to() {
    let w = world("handover").await;
    let aws = aws();
    let iam = handover_testkit::stack::iam(&aws).await;
    let p = w.plan.regions.primary.region.clone();
    let s = w.plan.regions.standby.region.clone();
    let guard = |regions: Vec<String>| {
        serde_json::json!({
            "Version": "2012-10-17",
            "Statement": [
                {"Effect": "Allow", "Action": "*", "Resource": "*"},
                {"Effect": "Deny", "Action": "*", "Resource": "*",
                 "Condition": {"StringNotEquals": {"aws:RequestedRegion": regions}}}
            ]
        })
    };
    let roles = [w.roles.fence.as_str(), w.roles.promote.as_str()];
    let ours = vec![p.clone(), s.clone(), TEST_REGION.to_owned()];
    handover_testkit::stack::set_boundary(&iam, "region-guard", guard(ours), &roles).await;
    let (_, out, _) = readiness(&w, false);
    assert!(
        !out.contains("iam."),
        "the guard allows every call in its own Region:\n{out}"
    );
    handover_testkit::stack::set_boundary(&iam, "region-guard", guard(vec![p.clone()]), &roles)
        .await;
    let (_, out, _) = readiness(&w, false);
    assert!(
        out.contains(&format!(
            "FAIL iam.promote_role: observed {} would be refused: rds:DescribeDBInstances on arn:aws:rds:{s}:",
            w.roles.promote
        )),
        "{out}"
    );
}
