//! `handover readiness` against moto: the real binary reads the world the
//! plan names and says what would break a failover, with the fix.

use handover::plan::{Canary, Plan};
use handover::slack::stand_in::SlackStandIn;
use handover_testkit::world::{
    provision_databases, provision_dns, provision_fence_group, put_db_secret, put_replica_lag,
    test_postgres, test_postgres_cas, unique_plan,
};
use handover_testkit::{TEST_REGION, aws, fresh_store};
use std::process::Command;

fn readiness(plan: &Plan, table: &str, slack: &str, json: bool) -> (i32, String, String) {
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
    let out = cmd.output().expect("run handover");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A world as the plan needs it: P and its replica, the fence group, the
/// failover records, ReplicaLag, the canary's PostgreSQL and secrets, S's
/// SSM parameter, and Slack (the stand-in, with the bot token in Secrets
/// Manager).
async fn world(canary_user: &str) -> (Plan, String, SlackStandIn) {
    let aws = aws();
    let mut plan = unique_plan();
    provision_fence_group(&aws, &mut plan).await;
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
    (plan, store.table().to_owned(), slack)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_naming_another_user_than_the_replicas_master_fails_readiness_with_its_fix() {
    let (plan, table, slack) = world("app_user").await;
    let (code, out, err) = readiness(&plan, &table, &slack.api_base(), false);
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
    let (plan, table, slack) = world("handover").await;
    let (code, out, err) = readiness(&plan, &table, &slack.api_base(), true);
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
    let (plan, table, slack) = world("handover").await;
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
    let (code, out, err) = readiness(&plan, &table, &slack.api_base(), false);
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

/// RDS schedules an OS update for S tonight (DescribePendingMaintenanceActions,
/// which the router serves as RDS answers it): readiness fails with the
/// command that applies it in a quiet hour; a week away it only warns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn maintenance_pending_on_s_fails_readiness_when_due_and_warns_when_later() {
    let (plan, table, slack) = world("handover").await;
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
    let (code, out, err) = readiness(&plan, &table, &slack.api_base(), false);
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
    let (_, out, _) = readiness(&plan, &table, &slack.api_base(), false);
    assert!(out.contains("WARN rds.s_maintenance"), "{out}");
    assert!(out.contains("db-upgrade (due "), "{out}");
    handover_testkit::control("maintenance", serde_json::json!({ &s: null })).await;
}
