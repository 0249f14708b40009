//! Provisioning the emulated world a plan describes: the RDS primary in P,
//! its cross-Region read replica in S, ReplicaLag samples, fence groups.

use crate::pace::{self, Pace};
use handover::aws::Aws;
use handover::plan::Plan;
use serde_json::json;

/// Create P's primary and S's cross-Region replica as the plan names them.
/// Returns P's instance ARN.
pub async fn provision_databases(aws: &Aws, plan: &Plan) -> String {
    let (p, s) = (&plan.regions.primary, &plan.regions.standby);
    let arn = create_instance(
        aws,
        &p.region,
        &p.db_instance_id,
        Some("sg-0app000000000000p"),
    )
    .await;
    aws.rds(&s.region)
        .await
        .create_db_instance_read_replica()
        .db_instance_identifier(&s.db_instance_id)
        .source_db_instance_identifier(&arn)
        .db_instance_class("db.t3.micro")
        .vpc_security_group_ids("sg-0app000000000000s")
        .send()
        .await
        .expect("create S's cross-Region replica in moto");
    arn
}

/// A standalone PostgreSQL instance `id` in `region` with 7 days of backups;
/// moto takes its first automated backup as it creates it. Returns its ARN.
pub async fn create_instance(
    aws: &Aws,
    region: &str,
    id: &str,
    security_group: Option<&str>,
) -> String {
    aws.rds(region)
        .await
        .create_db_instance()
        .db_instance_identifier(id)
        .db_instance_class("db.t3.micro")
        .engine("postgres")
        .master_username("handover")
        .master_user_password("not-a-real-password")
        .allocated_storage(20)
        .backup_retention_period(7)
        .set_vpc_security_group_ids(security_group.map(|g| vec![g.to_owned()]))
        .send()
        .await
        .unwrap_or_else(|e| panic!("create {id} in moto: {e:?}"))
        .db_instance
        .and_then(|d| d.db_instance_arn)
        .expect("the instance has an ARN")
}

/// Publish a ReplicaLag sample for `db_instance_id` in `region` at `at`.
pub async fn put_replica_lag(
    aws: &Aws,
    region: &str,
    db_instance_id: &str,
    seconds: f64,
    at: chrono::DateTime<chrono::Utc>,
) {
    use aws_sdk_cloudwatch::primitives::DateTime;
    use aws_sdk_cloudwatch::types::{Dimension, MetricDatum, StandardUnit};
    aws.cloudwatch(region)
        .await
        .put_metric_data()
        .namespace("AWS/RDS")
        .metric_data(
            MetricDatum::builder()
                .metric_name("ReplicaLag")
                .dimensions(
                    Dimension::builder()
                        .name("DBInstanceIdentifier")
                        .value(db_instance_id)
                        .build(),
                )
                .value(seconds)
                .unit(StandardUnit::Seconds)
                .timestamp(DateTime::from_millis(at.timestamp_millis()))
                .build(),
        )
        .send()
        .await
        .expect("put ReplicaLag in moto");
}

/// A load-balancer target group in `region` with `healthy` registered
/// targets; returns its ARN. moto reports every registered target healthy,
/// so "nothing healthy" is a group with no targets, which is also what an
/// ALB reports once every target has failed and been replaced or drained.
/// The group has target type `lambda`, the one type moto creates without a
/// VPC; DescribeTargetHealth answers the same for every type.
pub async fn provision_target_group(aws: &Aws, region: &str, healthy: usize) -> String {
    use aws_sdk_elasticloadbalancingv2::types::TargetTypeEnum;
    let elb = aws.elbv2(region).await;
    // At most 32 characters: letters, digits and hyphens.
    let name: String = crate::unique("tg")
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
        .take(32)
        .collect();
    let arn = elb
        .create_target_group()
        .name(name.trim_end_matches('-'))
        .target_type(TargetTypeEnum::Lambda)
        .send()
        .await
        .expect("create a target group in moto")
        .target_groups()
        .first()
        .and_then(|g| g.target_group_arn())
        .expect("target group ARN")
        .to_owned();
    register_targets(aws, region, &arn, healthy).await;
    arn
}

/// Register `healthy` targets (the app's functions) in a target group.
pub async fn register_targets(aws: &Aws, region: &str, target_group_arn: &str, healthy: usize) {
    use aws_sdk_elasticloadbalancingv2::types::TargetDescription;
    if healthy == 0 {
        return;
    }
    let mut register = aws
        .elbv2(region)
        .await
        .register_targets()
        .target_group_arn(target_group_arn);
    for i in 0..healthy {
        register = register.targets(
            TargetDescription::builder()
                .id(format!(
                    "arn:aws:lambda:{region}:123456789012:function:app-{i}"
                ))
                .build(),
        );
    }
    register.send().await.expect("register targets in moto");
}

/// Deregister every target of a target group: its load balancer then has
/// no healthy host (how a drill breaks P's app at the load balancer too).
pub async fn deregister_all_targets(aws: &Aws, region: &str, target_group_arn: &str) {
    use aws_sdk_elasticloadbalancingv2::types::TargetDescription;
    let elb = aws.elbv2(region).await;
    let health = elb
        .describe_target_health()
        .target_group_arn(target_group_arn)
        .send()
        .await
        .expect("describe target health in moto");
    let ids: Vec<TargetDescription> = health
        .target_health_descriptions()
        .iter()
        .filter_map(|d| d.target().and_then(|t| t.id()))
        .map(|id| TargetDescription::builder().id(id).build())
        .collect();
    if !ids.is_empty() {
        elb.deregister_targets()
            .target_group_arn(target_group_arn)
            .set_targets(Some(ids))
            .send()
            .await
            .expect("deregister targets in moto");
    }
}

/// A plan with unique database identifiers and health-check ids, so tests
/// sharing one emulator never collide.
pub fn unique_plan() -> Plan {
    let mut plan = crate::example_plan();
    plan.regions.primary.db_instance_id = crate::unique("p-db");
    plan.regions.standby.db_instance_id = crate::unique("s-db");
    plan.regions.primary.health_check_id = crate::unique("hc-p");
    plan.regions.standby.health_check_id = crate::unique("hc-s");
    plan.detection.alarm = None;
    // Tests that want target groups or a model provision and set them.
    plan.regions.primary.target_group_arns.clear();
    plan.regions.standby.target_group_arns.clear();
    plan.explain = None;
    // Tests that want S's compute provision it (crate::stack::provision_capacity).
    plan.capacity = Default::default();
    plan.detection.probe_timeout_ms = 300;
    plan.report.bucket = "handover-test-reports".into();
    plan.timings.call_timeout_ms = 1_500;
    plan.fence.timeout_ms = 1_500;
    plan
}

/// The execution document of a run started at epoch 1 on `plan`, with the
/// given step outputs already in place (e.g. `approval`, `fence`).
pub fn run_state(plan: &Plan, steps: serde_json::Value) -> handover::execution::ExecutionState {
    handover::execution::ExecutionState {
        input: run_input(plan, &crate::unique("incident")),
        steps: steps.as_object().cloned().unwrap_or_default(),
    }
}

/// The input detect would start a run of `plan` with: P down since three
/// minutes ago, the primary record at epoch 1.
pub fn run_input(plan: &Plan, incident: &str) -> handover::execution::ExecutionInput {
    use handover::execution::{ExecutionInput, Side};
    let now = chrono::Utc::now();
    ExecutionInput {
        incident_id: incident.to_owned(),
        mode: handover::execution::Mode::Failover,
        drill: true,
        t0: now - chrono::Duration::minutes(3),
        detected_at: now,
        primary: Side {
            region: plan.regions.primary.region.clone(),
            db_instance_id: plan.regions.primary.db_instance_id.clone(),
            epoch: Some(1),
        },
        standby: Side {
            region: plan.regions.standby.region.clone(),
            db_instance_id: plan.regions.standby.db_instance_id.clone(),
            epoch: None,
        },
        evidence: vec![],
        plan: plan.clone(),
        failback: None,
    }
}

/// An approval as the slack function sends it.
pub fn approval(data_loss_acknowledged: bool) -> serde_json::Value {
    let now = chrono::Utc::now();
    serde_json::json!({
        "decision": "approve",
        "approver_id": "U0ONCALL01",
        "approver_name": "Primary on-call",
        "decided_at": now,
        "requested_at": now - chrono::Duration::minutes(1),
        "data_loss_acknowledged": data_loss_acknowledged,
    })
}

/// The on-call role the CLI tests decide as (`cli_approvers`).
pub const ONCALL_ROLE: &str = "arn:aws:iam::123456789012:role/handover-oncall";

/// `plan` whose `cli_approvers` list only [`ONCALL_ROLE`], as "On-call (CLI)".
pub fn listing_oncall(mut plan: Plan) -> Plan {
    plan.cli_approvers = vec![handover::plan::CliApprover {
        arn: ONCALL_ROLE.into(),
        name: "On-call (CLI)".into(),
    }];
    plan
}

/// A run of `plan` really waiting on its approval task's token, and its key
/// stored as the approval function stores it.
pub struct WaitingApproval {
    /// The execution ARN.
    pub execution: String,
    /// The incident id (the execution's input).
    pub incident: String,
    /// The approval key.
    pub key: String,
    /// The task token (for asserting it never leaks).
    pub token: String,
}

/// Start a run of `plan` whose first task waits for its token
/// ([`crate::waiting_task_with`], with a Handover execution input) and
/// store its approval key: `data_loss` as the question asked, expiring in
/// `expires_in` seconds (negative: already expired).
pub async fn waiting_approval(
    aws: &Aws,
    store: &handover::store::Store,
    plan: &Plan,
    data_loss: bool,
    expires_in: i64,
) -> WaitingApproval {
    let incident = crate::unique("shop-inc");
    let input = serde_json::to_string(&run_input(plan, &incident)).expect("input");
    let (execution, token) = crate::waiting_task_with(aws, crate::TEST_REGION, &input).await;
    let key = handover::approval::new_key().expect("random key");
    let now = chrono::Utc::now();
    store
        .put_approval(&handover::store::approval::NewApproval {
            key: key.clone(),
            task_token: token.clone(),
            execution: execution.clone(),
            incident: incident.clone(),
            requested_at: now,
            expires_at: now + chrono::Duration::seconds(expires_in),
            question: format!("FAILOVER approval: {} — {incident}", plan.service),
            data_loss,
        })
        .await
        .expect("store the approval key");
    WaitingApproval {
        execution,
        incident,
        key,
        token,
    }
}

/// The approval key the approval function would have asked with for
/// `execution`, consumed as `approval` (a run's `$.approval`) records the
/// decision: what fence and promote check the run's approval against. The
/// question asked about data loss when the approval acknowledges one.
/// Returns the key.
pub async fn record_approval(
    store: &handover::store::Store,
    execution: &str,
    approval: &serde_json::Value,
) -> String {
    use handover::store::approval::{Decision, NewApproval};
    let key = handover::approval::new_key().expect("random key");
    let now = chrono::Utc::now();
    let incident = execution.rsplit(':').next().unwrap_or(execution);
    store
        .put_approval(&NewApproval {
            key: key.clone(),
            task_token: format!("token-of-{incident}"),
            execution: execution.to_owned(),
            incident: incident.to_owned(),
            requested_at: now - chrono::Duration::minutes(1),
            expires_at: now + chrono::Duration::minutes(15),
            question: format!("FAILOVER approval — {incident}"),
            data_loss: approval["data_loss_acknowledged"] == true,
        })
        .await
        .expect("store the approval key");
    let decision: Decision =
        serde_json::from_value(approval["decision"].clone()).expect("an approval's decision");
    store
        .consume_approval(
            &key,
            decision,
            approval["approver_id"].as_str().expect("approver_id"),
            now,
        )
        .await
        .expect("consume the approval key");
    key
}

/// Create the public zone with failover records (P primary with P's health
/// check, S secondary), both health checks, and the private zone with the
/// writer CNAME pointing at P. Fills the plan's ids in.
pub async fn provision_dns(aws: &Aws, plan: &mut Plan, p_target: &str) {
    use aws_sdk_route53::types::{
        Change, ChangeAction, ChangeBatch, HealthCheckConfig, HealthCheckType, ResourceRecord,
        ResourceRecordSet, ResourceRecordSetFailover, RrType,
    };
    let r53 = aws.route53().await;
    let check = |region: &str, fqdn: String| {
        let r53 = r53.clone();
        let reference = crate::unique(region);
        async move {
            r53.create_health_check()
                .caller_reference(reference)
                .health_check_config(
                    HealthCheckConfig::builder()
                        .r#type(HealthCheckType::Https)
                        .fully_qualified_domain_name(fqdn)
                        .resource_path("/health")
                        .build()
                        .unwrap(),
                )
                .send()
                .await
                .expect("create health check")
                .health_check
                .expect("health check")
                .id
        }
    };
    plan.regions.primary.health_check_id = check("p", "p.shop.example.com".into()).await;
    plan.regions.standby.health_check_id = check("s", "s.shop.example.com".into()).await;
    let zone = |name: String| {
        let r53 = r53.clone();
        async move {
            r53.create_hosted_zone()
                .name(name)
                .caller_reference(crate::unique("zone"))
                .send()
                .await
                .expect("create zone")
                .hosted_zone
                .expect("zone")
                .id
                .trim_start_matches("/hostedzone/")
                .to_owned()
        }
    };
    let public = zone(format!("{}.example.com", crate::unique("shop"))).await;
    let private = zone(format!("{}.internal", crate::unique("shop"))).await;
    let public_name = r53
        .get_hosted_zone()
        .id(&public)
        .send()
        .await
        .unwrap()
        .hosted_zone
        .unwrap()
        .name;
    let private_name = r53
        .get_hosted_zone()
        .id(&private)
        .send()
        .await
        .unwrap()
        .hosted_zone
        .unwrap()
        .name;
    plan.dns.hosted_zone_id = public.clone();
    plan.dns.record_name = format!("app.{public_name}");
    let record =
        |name: &str, value: &str, failover: Option<(&str, ResourceRecordSetFailover, &str)>| {
            let mut b = ResourceRecordSet::builder()
                .name(name)
                .r#type(RrType::Cname)
                .ttl(60)
                .resource_records(ResourceRecord::builder().value(value).build().unwrap());
            if let Some((id, role, check)) = failover {
                b = b.set_identifier(id).failover(role).health_check_id(check);
            }
            Change::builder()
                .action(ChangeAction::Create)
                .resource_record_set(b.build().unwrap())
                .build()
                .unwrap()
        };
    r53.change_resource_record_sets()
        .hosted_zone_id(&public)
        .change_batch(
            ChangeBatch::builder()
                .changes(record(
                    &plan.dns.record_name,
                    p_target,
                    Some((
                        "p",
                        ResourceRecordSetFailover::Primary,
                        &plan.regions.primary.health_check_id,
                    )),
                ))
                .changes(record(
                    &plan.dns.record_name,
                    &plan.dns.standby_target,
                    Some((
                        "s",
                        ResourceRecordSetFailover::Secondary,
                        &plan.regions.standby.health_check_id,
                    )),
                ))
                .build()
                .unwrap(),
        )
        .send()
        .await
        .expect("failover records");
    let writer = format!("writer.{private_name}");
    r53.change_resource_record_sets()
        .hosted_zone_id(&private)
        .change_batch(
            ChangeBatch::builder()
                .changes(record(
                    &writer,
                    "p-db.ap-northeast-2.rds.amazonaws.com",
                    None,
                ))
                .build()
                .unwrap(),
        )
        .send()
        .await
        .expect("writer record");
    if let handover::plan::WriterEndpoint::Cname {
        hosted_zone_id,
        name,
        ..
    } = &mut plan.dns.writer
    {
        *hosted_zone_id = private;
        *name = writer;
    }
}

/// Store `{"username","password"}` in Secrets Manager; returns the ARN.
pub async fn put_db_secret(aws: &Aws, region: &str, username: &str, password: &str) -> String {
    aws.secrets(region)
        .await
        .create_secret()
        .name(crate::unique("db-secret"))
        .secret_string(serde_json::json!({"username": username, "password": password}).to_string())
        .send()
        .await
        .expect("create secret")
        .arn
        .expect("secret ARN")
}

/// `HANDOVER_TEST_PG` parsed: (port, password). Panics with a clear message when absent.
pub fn test_postgres() -> (u16, String) {
    (
        test_pg_field("port").parse().expect("port"),
        test_pg_field("password"),
    )
}

/// One `key=value` of HANDOVER_TEST_PG (set by scripts/with-emulator.sh).
fn test_pg_field(key: &str) -> String {
    let spec = std::env::var("HANDOVER_TEST_PG")
        .expect("HANDOVER_TEST_PG is not set: run through scripts/with-emulator.sh (make test), which starts PostgreSQL");
    spec.split_whitespace()
        .find_map(|kv| kv.strip_prefix(&format!("{key}=")).map(str::to_owned))
        .unwrap_or_else(|| panic!("HANDOVER_TEST_PG lacks {key}"))
}

/// The test PostgreSQL's TLS material: the PEM of the CA that signed its
/// certificate (for `localhost` and 127.0.0.1), and of a CA that did not.
pub fn test_postgres_cas() -> (String, String) {
    let pem = |key: &str| {
        let path = test_pg_field(key);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    };
    (pem("ca"), pem("other_ca"))
}

/// Store `plan` as the SSM parameter the stack's `PlanParameterName` names
/// (Advanced tier above Standard's 4 KB, as an operator must) and return
/// its name.
pub async fn put_plan_parameter(aws: &Aws, region: &str, plan: &Plan) -> String {
    let name = format!("/handover/{}/plan", crate::unique("stack"));
    let value = serde_json::to_string(plan).expect("plan JSON");
    let tier = if value.len() > 4096 {
        aws_sdk_ssm::types::ParameterTier::Advanced
    } else {
        aws_sdk_ssm::types::ParameterTier::Standard
    };
    aws.ssm(region)
        .await
        .put_parameter()
        .name(&name)
        .value(value)
        .r#type(aws_sdk_ssm::types::ParameterType::String)
        .tier(tier)
        .send()
        .await
        .expect("put the plan parameter in moto");
    name
}

/// The environment the stack gives its functions, for a stack deployed for
/// `plan`: the stack binding ([`handover::stack::StackBinding`]), the table,
/// the plan parameter, the state machine, the operator topic, the roles
/// readiness simulates ([`crate::stack::provision_failover_roles`]), the
/// stack name and the `Drill` parameter. `Lambdas::start`
/// checks that it covers every variable the template sets.
pub fn stack_environment(
    plan: &Plan,
    table: &str,
    plan_parameter: &str,
    state_machine: &str,
    operator_topic: &str,
    roles: &handover::readiness::iam::FailoverRoles,
    drill: bool,
) -> Vec<(&'static str, String)> {
    let mut env = handover::stack::StackBinding::environment_for(plan);
    env.extend([
        ("TABLE_NAME", table.to_owned()),
        (
            handover::readiness::iam::FENCE_ROLE_ENV,
            roles.fence.clone(),
        ),
        (
            handover::readiness::iam::PROMOTE_ROLE_ENV,
            roles.promote.clone(),
        ),
        ("PLAN_PARAMETER", plan_parameter.to_owned()),
        ("STATE_MACHINE_ARN", state_machine.to_owned()),
        ("HANDOVER_STACK_NAME", "handover-local".to_owned()),
        ("HANDOVER_DRILL", drill.to_string()),
        ("HANDOVER_OPERATOR_TOPIC", operator_topic.to_owned()),
        ("HANDOVER_DECISION_URL", crate::triggers::decision_url()),
    ]);
    env
}

/// The security groups moto's RDS shows on P's instance (fenced or not).
pub async fn p_security_groups(aws: &Aws, plan: &Plan) -> Vec<String> {
    let p = &plan.regions.primary;
    let d = aws
        .rds(&p.region)
        .await
        .describe_db_instances()
        .db_instance_identifier(&p.db_instance_id)
        .send()
        .await
        .expect("describe P in moto");
    d.db_instances()
        .first()
        .map(|d| {
            d.vpc_security_groups()
                .iter()
                .filter_map(|g| g.vpc_security_group_id().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The fence group as EC2 holds it in P's Region: a VPC and a security
/// group with no inbound rule (moto gives it the default egress rule, as
/// EC2 does). The plan names it, as an operator sets
/// `regions.primary.fence_security_group_id`. Returns the VPC.
pub async fn provision_fence_group(aws: &Aws, plan: &mut Plan) -> String {
    let ec2 = aws.ec2(&plan.regions.primary.region).await;
    let vpc = ec2
        .create_vpc()
        .cidr_block("10.20.0.0/16")
        .send()
        .await
        .expect("create the VPC in moto")
        .vpc
        .and_then(|v| v.vpc_id)
        .expect("a VPC id");
    let group = ec2
        .create_security_group()
        .group_name(crate::unique("handover-fence"))
        .description("Handover fence: no inbound rule")
        .vpc_id(&vpc)
        .send()
        .await
        .expect("create the fence group in moto")
        .group_id
        .expect("a group id");
    plan.regions.primary.fence_security_group_id = group;
    // S's too, in S's own VPC: the switch back of a failback fences S.
    let ec2 = aws.ec2(&plan.regions.standby.region).await;
    let s_vpc = ec2
        .create_vpc()
        .cidr_block("10.30.0.0/16")
        .send()
        .await
        .expect("create S's VPC in moto")
        .vpc
        .and_then(|v| v.vpc_id)
        .expect("a VPC id");
    plan.regions.standby.fence_security_group_id = ec2
        .create_security_group()
        .group_name(crate::unique("handover-fence"))
        .description("Handover fence: no inbound rule")
        .vpc_id(&s_vpc)
        .send()
        .await
        .expect("create S's fence group in moto")
        .group_id
        .expect("a group id");
    vpc
}

/// Give the plan's two instances, and Route 53, AWS's timings at `pace`
/// (the drill's and the campaign's world; the figures are in `pace.rs`).
pub async fn realistic_pair(plan: &Plan, pace: Pace) {
    let rds = json!({
        "promote_modifying_s": pace.secs(&pace::PROMOTE_MODIFYING),
        "promote_rebooting_s": pace.secs(&pace::PROMOTE_REBOOTING),
        "sg_pending_s": pace.secs(&pace::SG_PENDING),
        "reboot_s": pace.secs(&pace::REBOOT),
        "first_backup_s": pace.secs(&pace::FIRST_BACKUP),
    });
    for id in [
        &plan.regions.primary.db_instance_id,
        &plan.regions.standby.db_instance_id,
    ] {
        crate::control("realism", json!({ id: rds.clone() })).await;
    }
    let insync = json!({ "route53_insync_s": pace.secs(&pace::RECORD_INSYNC) });
    let writer_zone = match &plan.dns.writer {
        handover::plan::WriterEndpoint::Cname { hosted_zone_id, .. } => Some(hosted_zone_id),
        _ => None,
    };
    for zone in std::iter::once(&plan.dns.hosted_zone_id).chain(writer_zone) {
        crate::control("realism", json!({ zone: insync.clone() })).await;
    }
}
