//! Provisioning the emulated world a plan describes: the RDS primary in P,
//! its cross-Region read replica in S, ReplicaLag samples, fence groups.

use handover::aws::Aws;
use handover::plan::Plan;

/// Create P's primary and S's cross-Region replica as the plan names them.
/// Returns P's instance ARN.
pub async fn provision_databases(aws: &Aws, plan: &Plan) -> String {
    let (p, s) = (&plan.regions.primary, &plan.regions.standby);
    let p_rds = aws.rds(&p.region).await;
    let primary = p_rds
        .create_db_instance()
        .db_instance_identifier(&p.db_instance_id)
        .db_instance_class("db.t3.micro")
        .engine("postgres")
        .master_username("handover")
        .master_user_password("not-a-real-password")
        .allocated_storage(20)
        .backup_retention_period(7)
        .vpc_security_group_ids("sg-0app000000000000p")
        .send()
        .await
        .expect("create P's primary in moto");
    let arn = primary
        .db_instance
        .and_then(|d| d.db_instance_arn)
        .expect("primary has an ARN");
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

/// A plan with unique database identifiers and health-check ids, so tests
/// sharing one emulator never collide.
pub fn unique_plan() -> Plan {
    let mut plan = crate::example_plan();
    plan.regions.primary.db_instance_id = crate::unique("p-db");
    plan.regions.standby.db_instance_id = crate::unique("s-db");
    plan.regions.primary.health_check_id = crate::unique("hc-p");
    plan.regions.standby.health_check_id = crate::unique("hc-s");
    plan.detection.alarm = None;
    plan.detection.probe_timeout_ms = 300;
    plan.timings.call_timeout_ms = 1_500;
    plan.fence.timeout_ms = 1_500;
    plan
}
