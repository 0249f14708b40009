//! Post-checks against moto: for each check, a state that triggers it and
//! one that does not. Run with `scripts/with-emulator.sh cargo test -p handover --test it report_postchecks_moto`.

use chrono::{Duration, Utc};
use handover::adapters::Rds;
use handover::adapters::{SecretsManagerUsernames, SsmParameters};
use handover::aws::Aws;
use handover::plan::{Dependency, Plan};
use handover::report::postcheck::{PostChecks, evaluate};
use handover::report::sources::{CheckSources, observe};
use handover::report::{RunContext, Severity};
use handover_testkit::world::{create_instance, provision_databases, unique_plan};
use handover_testkit::{aws, unique};

const FENCE_P: &str = "sg-0fence0000000000p";

async fn checks(aws: &Aws, plan: &Plan, run: RunContext) -> PostChecks {
    let p = Rds::new(aws, &plan.regions.primary.region).await;
    let s = Rds::new(aws, &plan.regions.standby.region).await;
    let ssm = SsmParameters::new(aws, &plan.regions.standby.region).await;
    let secrets = SecretsManagerUsernames::new(aws, &plan.regions.standby.region);
    let src = CheckSources {
        p_rds: &p,
        s_rds: &s,
        parameters: &ssm,
        secrets: &secrets,
    };
    let seen = observe(plan, run, &src).await;
    evaluate(plan, run, &seen)
}

fn severity(c: &PostChecks, check: &str) -> Severity {
    c.findings
        .iter()
        .find(|f| f.check == check)
        .unwrap_or_else(|| panic!("no {check} finding in {:?}", c.findings))
        .severity
}

/// A plan with its own databases, no declared dependencies and no secrets.
async fn world() -> (Aws, Plan) {
    let aws = aws();
    let mut plan = unique_plan();
    plan.dependencies.clear();
    plan.regions.standby.db_secret_arn = None;
    plan.canary = handover::plan::Canary::Http {
        url: "https://s.shop.example.com/write".into(),
    };
    provision_databases(&aws, &plan).await;
    (aws, plan)
}

async fn promote(aws: &Aws, plan: &Plan) {
    aws.rds(&plan.regions.standby.region)
        .await
        .promote_read_replica()
        .db_instance_identifier(&plan.regions.standby.db_instance_id)
        .send()
        .await
        .expect("promote in moto");
}

fn promoted_at(t: chrono::DateTime<Utc>) -> RunContext {
    RunContext {
        promoted: true,
        promote_started_at: Some(t),
    }
}

#[tokio::test]
async fn split_brain_when_p_is_writable_and_unfenced_not_once_fenced() {
    let (aws, plan) = world().await;
    promote(&aws, &plan).await;
    let run = promoted_at(Utc::now() - Duration::minutes(1));
    let c = checks(&aws, &plan, run).await;
    assert_eq!(severity(&c, "split_brain"), Severity::Critical);
    aws.rds(&plan.regions.primary.region)
        .await
        .modify_db_instance()
        .db_instance_identifier(&plan.regions.primary.db_instance_id)
        .vpc_security_group_ids(FENCE_P)
        .apply_immediately(true)
        .send()
        .await
        .expect("fence P in moto");
    let c = checks(&aws, &plan, run).await;
    assert_eq!(
        severity(&c, "split_brain"),
        Severity::Ok,
        "{:?}",
        c.findings
    );
}

/// RDS API Reference, VpcSecurityGroupMembership: while a change applies,
/// the new group shows `adding` and the old `removing`; the old one still
/// lets clients in. P is fenced only once the deny-all group alone is `active`.
#[tokio::test]
async fn a_fence_group_still_adding_or_beside_another_group_is_not_a_fence() {
    let (aws, plan) = world().await;
    let p = &plan.regions.primary;
    handover_testkit::realistic_rds(&p.db_instance_id, 0.0, 0.0, 3.0).await;
    promote(&aws, &plan).await;
    let run = promoted_at(Utc::now() - Duration::minutes(1));
    let rds = aws.rds(&p.region).await;
    rds.modify_db_instance()
        .db_instance_identifier(&p.db_instance_id)
        .vpc_security_group_ids(FENCE_P)
        .apply_immediately(true)
        .send()
        .await
        .expect("fence P in moto");
    let c = checks(&aws, &plan, run).await;
    let f = c
        .findings
        .iter()
        .find(|f| f.check == "split_brain")
        .unwrap();
    assert_eq!(f.severity, Severity::Critical, "{f:?}");
    assert!(
        f.evidence
            .iter()
            .any(|e| e.contains("not the only group in effect")),
        "{f:?}"
    );
    tokio::time::sleep(std::time::Duration::from_millis(3300)).await;
    let c = checks(&aws, &plan, run).await;
    assert_eq!(
        severity(&c, "split_brain"),
        Severity::Ok,
        "{:?}",
        c.findings
    );
    // The fence group beside another active group keeps nobody out.
    handover_testkit::realistic_rds(&p.db_instance_id, 0.0, 0.0, 0.0).await;
    rds.modify_db_instance()
        .db_instance_identifier(&p.db_instance_id)
        .vpc_security_group_ids(FENCE_P)
        .vpc_security_group_ids("sg-0app000000000000p")
        .apply_immediately(true)
        .send()
        .await
        .expect("modify P in moto");
    let c = checks(&aws, &plan, run).await;
    assert_eq!(
        severity(&c, "split_brain"),
        Severity::Critical,
        "{:?}",
        c.findings
    );
}

#[tokio::test]
async fn no_split_brain_when_nothing_was_promoted() {
    let (aws, plan) = world().await;
    let c = checks(
        &aws,
        &plan,
        RunContext {
            promoted: false,
            promote_started_at: None,
        },
    )
    .await;
    assert_eq!(severity(&c, "split_brain"), Severity::Info);
    assert_eq!(
        severity(&c, "replication"),
        Severity::Info,
        "S is still the replica, as expected"
    );
}

#[tokio::test]
async fn replication_link_left_after_promotion_is_critical_and_gone_is_ok() {
    let (aws, plan) = world().await;
    // The run says promoted, but S still replicates (the promotion did not take).
    let run = promoted_at(Utc::now());
    assert_eq!(
        severity(&checks(&aws, &plan, run).await, "replication"),
        Severity::Critical
    );
    promote(&aws, &plan).await;
    assert_eq!(
        severity(&checks(&aws, &plan, run).await, "replication"),
        Severity::Ok
    );
}

#[tokio::test]
async fn backups_pending_then_off_then_done() {
    let (aws, plan) = world().await;
    promote(&aws, &plan).await;
    let run = promoted_at(Utc::now());
    let c = checks(&aws, &plan, run).await;
    assert_eq!(
        severity(&c, "backups"),
        Severity::Warning,
        "no backup since the promotion yet"
    );
    assert!(c.first_backup.is_none());

    let s_rds = aws.rds(&plan.regions.standby.region).await;
    s_rds
        .modify_db_instance()
        .db_instance_identifier(&plan.regions.standby.db_instance_id)
        .backup_retention_period(0)
        .apply_immediately(true)
        .send()
        .await
        .expect("turn backups off in moto");
    assert_eq!(
        severity(&checks(&aws, &plan, run).await, "backups"),
        Severity::Critical
    );

    // A new primary whose automated backup completed after the promotion call.
    let mut fresh = plan.clone();
    fresh.regions.standby.db_instance_id = unique("s-new");
    let before = Utc::now() - Duration::seconds(5);
    create_instance(
        &aws,
        &fresh.regions.standby.region,
        &fresh.regions.standby.db_instance_id,
        None,
    )
    .await;
    let c = checks(&aws, &fresh, promoted_at(before)).await;
    assert_eq!(severity(&c, "backups"), Severity::Ok, "{:?}", c.findings);
    let first = c.first_backup.expect("first backup");
    assert!(first.at >= before, "{first:?}");
    assert!(first.source.starts_with("rds:Describe"), "{first:?}");
}

#[tokio::test]
async fn ssm_parameters_that_point_at_p_are_findings() {
    let (aws, mut plan) = world().await;
    let ssm = aws.ssm(&plan.regions.standby.region).await;
    let (bad, good, missing) = (
        unique("/shop/image-p"),
        unique("/shop/image-s"),
        unique("/shop/missing"),
    );
    for (name, value) in [
        (
            &bad,
            "123456789012.dkr.ecr.ap-northeast-2.amazonaws.com/shop:1",
        ),
        (
            &good,
            "123456789012.dkr.ecr.ap-northeast-1.amazonaws.com/shop:1",
        ),
    ] {
        ssm.put_parameter()
            .name(name)
            .value(value)
            .r#type(aws_sdk_ssm::types::ParameterType::String)
            .send()
            .await
            .expect("put parameter in moto");
    }
    plan.dependencies = vec![
        Dependency::SsmParameter { name: good.clone() },
        Dependency::Value {
            name: "worker image".into(),
            value: "123456789012.dkr.ecr.ap-northeast-1.amazonaws.com/w:1".into(),
        },
    ];
    let run = RunContext {
        promoted: false,
        promote_started_at: None,
    };
    let c = checks(&aws, &plan, run).await;
    assert_eq!(severity(&c, "dependency"), Severity::Ok, "{:?}", c.findings);

    plan.dependencies
        .push(Dependency::SsmParameter { name: bad.clone() });
    plan.dependencies.push(Dependency::SsmParameter {
        name: missing.clone(),
    });
    plan.dependencies.push(Dependency::Value {
        name: "api url".into(),
        value: "https://p.shop.example.com/api".into(),
    });
    let c = checks(&aws, &plan, run).await;
    let deps: Vec<&str> = c
        .findings
        .iter()
        .filter(|f| f.check == "dependency")
        .map(|f| f.title.as_str())
        .collect();
    assert_eq!(deps.len(), 3, "{deps:?}");
    assert!(
        deps.iter()
            .any(|t| t.contains(&bad) && t.contains("depends on P"))
    );
    assert!(
        deps.iter()
            .any(|t| t.contains(&missing) && t.contains("does not exist"))
    );
    assert!(deps.iter().any(|t| t.contains("api url depends on P")));
    assert!(!deps.iter().any(|t| t.contains(&good)));
}

#[tokio::test]
async fn a_db_secret_whose_username_differs_from_s_master_user_is_a_finding_and_no_password_leaks()
{
    let (aws, mut plan) = world().await;
    let secrets = aws.secrets(&plan.regions.standby.region).await;
    let arn_for = async |user: &str| {
        secrets
            .create_secret()
            .name(unique("shop/db-s"))
            .secret_string(format!(
                r#"{{"username":"{user}","password":"hunter2-very-secret"}}"#
            ))
            .send()
            .await
            .expect("create secret in moto")
            .arn
            .expect("arn")
    };
    // provision_databases creates both with master user "handover".
    plan.regions.standby.db_secret_arn = Some(arn_for("handover").await);
    let run = RunContext {
        promoted: false,
        promote_started_at: None,
    };
    let c = checks(&aws, &plan, run).await;
    assert_eq!(severity(&c, "secret_username"), Severity::Ok);

    plan.regions.standby.db_secret_arn = Some(arn_for("farmily").await);
    let c = checks(&aws, &plan, run).await;
    assert_eq!(severity(&c, "secret_username"), Severity::Warning);
    let text = format!("{:?}", c.findings);
    assert!(
        text.contains("username=farmily") && text.contains("MasterUsername=handover"),
        "{text}"
    );
    assert!(
        !text.contains("hunter2"),
        "the password never leaves the adapter"
    );
}

#[tokio::test]
async fn an_unreachable_p_is_a_warning_not_a_failure() {
    let aws = aws();
    let mut plan = unique_plan();
    // A Region of its own: router faults are per service and Region, and tests run in parallel.
    plan.regions.primary.region = "eu-south-1".into();
    plan.dependencies.clear();
    plan.regions.standby.db_secret_arn = None;
    plan.canary = handover::plan::Canary::Http {
        url: "https://s.shop.example.com/write".into(),
    };
    provision_databases(&aws, &plan).await;
    promote(&aws, &plan).await;
    let key = format!("rds:{}", plan.regions.primary.region);
    handover_testkit::control(
        "faults",
        serde_json::json!({ &key: {"mode": "timeout", "seconds": 3} }),
    )
    .await;
    let started = std::time::Instant::now();
    let c = checks(&aws, &plan, promoted_at(Utc::now())).await;
    handover_testkit::control("faults", serde_json::json!({ &key: null })).await;
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "bounded by the plan's call budget"
    );
    assert_eq!(
        severity(&c, "split_brain"),
        Severity::Warning,
        "{:?}",
        c.findings
    );
    assert!(
        c.findings
            .iter()
            .any(|f| f.evidence.iter().any(|e| e.contains("timed out"))),
        "{:?}",
        c.findings
    );
}
