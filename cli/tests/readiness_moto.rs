//! `handover readiness` against moto: the real binary reads the world the
//! plan names and says what would break a failover, with the fix.

use handover::plan::{Canary, Plan};
use handover_testkit::world::{
    provision_databases, provision_dns, put_db_secret, put_replica_lag, test_postgres,
    test_postgres_cas, unique_plan,
};
use handover_testkit::{TEST_REGION, aws, fresh_store};
use std::process::Command;

fn readiness(plan: &Plan, table: &str, json: bool) -> (i32, String, String) {
    let file = std::env::temp_dir().join(handover_testkit::unique("plan") + ".json");
    std::fs::write(&file, serde_json::to_string(plan).unwrap()).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_handover"));
    cmd.args(["readiness", "--table", table, "--plan-file"])
        .arg(&file)
        .args(["--region", TEST_REGION])
        .env("AWS_ENDPOINT_URL", handover_testkit::endpoint())
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test");
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

/// A world as the plan needs it: P and its replica, the failover records,
/// ReplicaLag, the canary's PostgreSQL and secrets, S's SSM parameter.
async fn world(canary_user: &str) -> (Plan, String) {
    let aws = aws();
    let mut plan = unique_plan();
    provision_databases(&aws, &plan).await;
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
    (plan, store.table().to_owned())
}

#[tokio::test]
async fn a_secret_naming_another_user_than_the_replicas_master_fails_readiness_with_its_fix() {
    let (plan, table) = world("app_user").await;
    let (code, out, err) = readiness(&plan, &table, false);
    assert_eq!(code, 5, "{out}{err}");
    assert!(out.contains("FAIL secrets.db_user"), "{out}");
    assert!(
        out.contains("names \"app_user\", S's master user is \"handover\""),
        "{out}"
    );
    assert!(out.contains("Fix: Put S's master user"), "{out}");
}

#[tokio::test]
async fn the_world_the_plan_needs_is_ready_and_json_names_every_check() {
    let (plan, table) = world("handover").await;
    let (code, out, err) = readiness(&plan, &table, true);
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
        "secrets.db_user",
        "detection.health_check_target",
        "detection.probe_endpoint",
        "dns.ttl",
        "dependencies.ssm_parameter",
        "state.primary_record",
        "state.transition",
        "state.lock",
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
