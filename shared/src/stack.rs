//! One source of truth between the stack and the plan.
//!
//! The stack's IAM policies are written from its parameters; the code acts on
//! the plan. Where both name the same thing, they must agree, or a function
//! would be refused by its own role in the middle of an incident. The stack
//! passes what it grants (and the names of what it creates) to every function
//! as `HANDOVER_*` environment variables; [`StackBinding::bind`] runs at cold
//! start, right after the plan is loaded:
//!
//! - **the stack owns** the report bucket: a plan that leaves
//!   `report.bucket` empty gets the stack's, one that names another fails;
//! - **the plan owns** the description of the world (Regions, DB ids, health
//!   checks, zones, secrets, alarm, target groups, model); the stack's
//!   parameters only grant access to it, so each must equal its plan field.
//!
//! A disagreement is one error naming the plan field, the stack parameter and
//! both values.

use crate::plan::{Canary, Plan, WriterEndpoint};
use std::collections::BTreeSet;

/// A `HANDOVER_*` variable of the template is not set.
#[derive(Debug, thiserror::Error)]
#[error("environment variable {0} is not set")]
pub struct Unset(pub &'static str);

/// One stack value and the plan field it must equal.
#[derive(Debug, PartialEq, Eq)]
struct Field {
    /// The environment variable the template sets.
    env: &'static str,
    /// The stack parameter (or resource) behind it, for the message.
    parameter: &'static str,
    /// What the template's `!Ref` names (checked against the template by the harness).
    reference: &'static str,
}

/// `HANDOVER_PRIMARY_REGION` ← `PrimaryRegion`, … (see `infra/template.yaml`, Globals).
const FIELDS: &[Field] = &[
    Field {
        env: "HANDOVER_PRIMARY_REGION",
        parameter: "PrimaryRegion",
        reference: "PrimaryRegion",
    },
    Field {
        env: "HANDOVER_STANDBY_REGION",
        parameter: "AWS::Region (the stack's Region)",
        reference: "AWS::Region",
    },
    Field {
        env: "HANDOVER_PRIMARY_DB",
        parameter: "PrimaryDbInstanceId",
        reference: "PrimaryDbInstanceId",
    },
    Field {
        env: "HANDOVER_STANDBY_DB",
        parameter: "StandbyDbInstanceId",
        reference: "StandbyDbInstanceId",
    },
    Field {
        env: "HANDOVER_PRIMARY_HEALTH_CHECK",
        parameter: "PrimaryHealthCheckId",
        reference: "PrimaryHealthCheckId",
    },
    Field {
        env: "HANDOVER_STANDBY_HEALTH_CHECK",
        parameter: "StandbyHealthCheckId",
        reference: "StandbyHealthCheckId",
    },
    Field {
        env: "HANDOVER_PUBLIC_ZONE",
        parameter: "PublicHostedZoneId",
        reference: "PublicHostedZoneId",
    },
    Field {
        env: "HANDOVER_WRITER_ZONE",
        parameter: "WriterHostedZoneId",
        reference: "WriterHostedZoneId",
    },
    Field {
        env: "HANDOVER_WRITER_PARAMETER",
        parameter: "WriterParameterName",
        reference: "WriterParameterName",
    },
    Field {
        env: "HANDOVER_SLACK_BOT_TOKEN_SECRET",
        parameter: "SlackBotTokenSecretArn",
        reference: "SlackBotTokenSecretArn",
    },
    Field {
        env: "HANDOVER_SLACK_SIGNING_SECRET",
        parameter: "SlackSigningSecretArn",
        reference: "SlackSigningSecretArn",
    },
    Field {
        env: "HANDOVER_DB_SECRET",
        parameter: "DbSecretArn",
        reference: "DbSecretArn",
    },
    Field {
        env: "HANDOVER_DB_CA_SECRET",
        parameter: "DbCaSecretArn",
        reference: "DbCaSecretArn",
    },
    Field {
        env: "HANDOVER_DETECTION_ALARM",
        parameter: "DetectionAlarmName",
        reference: "DetectionAlarmName",
    },
    Field {
        env: "HANDOVER_TARGET_GROUPS",
        parameter: "TargetGroupArns",
        reference: "TargetGroupArns",
    },
    Field {
        env: "HANDOVER_ROUTING_CONTROLS",
        parameter: "RoutingControlArns",
        reference: "RoutingControlArns",
    },
    Field {
        env: "HANDOVER_EXPLAIN_MODEL",
        parameter: "ExplainModelId",
        reference: "ExplainModelId",
    },
    Field {
        env: "HANDOVER_AURORA_GLOBAL_CLUSTER",
        parameter: "AuroraGlobalClusterId",
        reference: "AuroraGlobalClusterId",
    },
    Field {
        env: "HANDOVER_REPORT_BUCKET",
        parameter: "ReportBucket (created by the stack)",
        reference: "ReportBucket",
    },
];

/// Where Route 53 health-check alarms must live, and so where the stack grants
/// `cloudwatch:DescribeAlarms`.
pub const ALARM_REGION: &str = "us-east-1";

/// What the stack granted and created, as one function's environment says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StackBinding {
    values: Vec<(&'static Field, String)>,
}

/// The plan and the stack disagree (or the stack's environment is incomplete).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{plan_field} is {plan_value:?} but the stack's {parameter} is {stack_value:?}: \
     the function's role is written for the stack's value; make them equal (redeploy or fix the plan)"
)]
pub struct Mismatch {
    /// `plan.regions.primary.db_instance_id`.
    pub plan_field: String,
    /// What the plan says.
    pub plan_value: String,
    /// `PrimaryDbInstanceId`.
    pub parameter: &'static str,
    /// What the stack says.
    pub stack_value: String,
}

impl StackBinding {
    /// Every `HANDOVER_*` variable of the template must be present (an empty
    /// value means the stack grants none of it).
    pub fn from_env() -> Result<Self, Unset> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// From any lookup (tests).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, Unset> {
        let mut values = Vec::with_capacity(FIELDS.len());
        for f in FIELDS {
            let v = get(f.env).ok_or(Unset(f.env))?;
            values.push((f, v.trim().to_owned()));
        }
        Ok(StackBinding { values })
    }

    fn get(&self, env: &str) -> (&'static Field, &str) {
        let (f, v) = self
            .values
            .iter()
            .find(|(f, _)| f.env == env)
            .expect("every field is read in from_lookup");
        (f, v.as_str())
    }

    /// Check `plan` against the stack and fill in what the stack owns.
    pub fn bind(&self, plan: &mut Plan) -> Result<(), Mismatch> {
        let p = &plan.regions.primary;
        let s = &plan.regions.standby;
        self.same(
            "HANDOVER_PRIMARY_REGION",
            "plan.regions.primary.region",
            &p.region,
        )?;
        self.same(
            "HANDOVER_STANDBY_REGION",
            "plan.regions.standby.region",
            &s.region,
        )?;
        self.same(
            "HANDOVER_PRIMARY_DB",
            "plan.regions.primary.db_instance_id",
            &p.db_instance_id,
        )?;
        self.same(
            "HANDOVER_STANDBY_DB",
            "plan.regions.standby.db_instance_id",
            &s.db_instance_id,
        )?;
        self.same(
            "HANDOVER_PRIMARY_HEALTH_CHECK",
            "plan.regions.primary.health_check_id",
            &p.health_check_id,
        )?;
        self.same(
            "HANDOVER_STANDBY_HEALTH_CHECK",
            "plan.regions.standby.health_check_id",
            &s.health_check_id,
        )?;
        self.same(
            "HANDOVER_PUBLIC_ZONE",
            "plan.dns.hosted_zone_id",
            &plan.dns.hosted_zone_id,
        )?;
        let (zone, parameter) = match &plan.dns.writer {
            WriterEndpoint::Cname { hosted_zone_id, .. } => (hosted_zone_id.as_str(), ""),
            WriterEndpoint::SsmParameter { name, .. } => ("", name.as_str()),
        };
        self.same(
            "HANDOVER_WRITER_ZONE",
            "plan.dns.writer.cname.hosted_zone_id",
            zone,
        )?;
        self.same(
            "HANDOVER_WRITER_PARAMETER",
            "plan.dns.writer.ssm_parameter.name",
            parameter,
        )?;
        self.same(
            "HANDOVER_SLACK_BOT_TOKEN_SECRET",
            "plan.slack.bot_token_secret_arn",
            &plan.slack.bot_token_secret_arn,
        )?;
        self.same(
            "HANDOVER_SLACK_SIGNING_SECRET",
            "plan.slack.signing_secret_arn",
            &plan.slack.signing_secret_arn,
        )?;
        let (db_secret, ca_secret) = match &plan.canary {
            Canary::Postgres {
                secret_arn,
                ca_secret_arn,
                ..
            } => (secret_arn.as_str(), ca_secret_arn.as_deref().unwrap_or("")),
            Canary::Http { .. } => ("", ""),
        };
        self.same(
            "HANDOVER_DB_SECRET",
            "plan.canary.postgres.secret_arn",
            db_secret,
        )?;
        // audit reads S's credentials secret (the MasterUsername check) under
        // the same grant.
        if let Some(arn) = s.db_secret_arn.as_deref().filter(|a| !a.trim().is_empty()) {
            self.same(
                "HANDOVER_DB_SECRET",
                "plan.regions.standby.db_secret_arn",
                arn,
            )?;
        }
        self.same(
            "HANDOVER_DB_CA_SECRET",
            "plan.canary.postgres.ca_secret_arn",
            ca_secret,
        )?;
        let alarm = plan.detection.alarm.as_ref();
        self.same(
            "HANDOVER_DETECTION_ALARM",
            "plan.detection.alarm.name",
            alarm.map_or("", |a| a.name.as_str()),
        )?;
        if let Some(a) = alarm
            && a.region != ALARM_REGION
        {
            return Err(Mismatch {
                plan_field: "plan.detection.alarm.region".into(),
                plan_value: a.region.clone(),
                parameter: "DetectRole (grants DescribeAlarms in us-east-1, where Route 53 health-check metrics live)",
                stack_value: ALARM_REGION.into(),
            });
        }
        let groups: Vec<&str> = p
            .target_group_arns
            .iter()
            .chain(&s.target_group_arns)
            .map(String::as_str)
            .collect();
        self.same_set(
            "HANDOVER_TARGET_GROUPS",
            "plan.regions.*.target_group_arns",
            &groups,
        )?;
        let controls: Vec<&str> = [&p.routing_control_arn, &s.routing_control_arn]
            .into_iter()
            .flatten()
            .map(String::as_str)
            .collect();
        self.same_set(
            "HANDOVER_ROUTING_CONTROLS",
            "plan.regions.*.routing_control_arn",
            &controls,
        )?;
        // The stack grants the foundation model; the plan may name a
        // cross-Region inference profile for it (`apac.<model>`), which the
        // template's `inference-profile/*<model>` grant covers.
        let model = plan.explain.as_ref().map_or("", |x| x.model_id.as_str());
        let (_, granted) = self.get("HANDOVER_EXPLAIN_MODEL");
        let profile_of_granted = !granted.is_empty()
            && model
                .split_once('.')
                .is_some_and(|(prefix, rest)| rest == granted && !prefix.contains(':'));
        if !profile_of_granted {
            self.same("HANDOVER_EXPLAIN_MODEL", "plan.explain.model_id", model)?;
        }
        self.same(
            "HANDOVER_AURORA_GLOBAL_CLUSTER",
            "plan.database.global_cluster_id",
            plan.database.global_cluster_id.as_deref().unwrap_or(""),
        )?;
        // The stack owns the report bucket.
        let (field, bucket) = self.get("HANDOVER_REPORT_BUCKET");
        if bucket.is_empty() {
            return Err(Mismatch {
                plan_field: "plan.report.bucket".into(),
                plan_value: plan.report.bucket.clone(),
                parameter: field.parameter,
                stack_value: String::new(),
            });
        }
        if plan.report.bucket.is_empty() {
            plan.report.bucket = bucket.to_owned();
        } else if plan.report.bucket != bucket {
            return Err(Mismatch {
                plan_field: "plan.report.bucket".into(),
                plan_value: plan.report.bucket.clone(),
                parameter: field.parameter,
                stack_value: bucket.into(),
            });
        }
        Ok(())
    }

    fn same(&self, env: &str, plan_field: &str, plan_value: &str) -> Result<(), Mismatch> {
        let (field, stack_value) = self.get(env);
        if plan_value.trim() == stack_value {
            return Ok(());
        }
        Err(Mismatch {
            plan_field: plan_field.into(),
            plan_value: plan_value.into(),
            parameter: field.parameter,
            stack_value: stack_value.into(),
        })
    }

    fn same_set(&self, env: &str, plan_field: &str, plan_values: &[&str]) -> Result<(), Mismatch> {
        let (field, stack_value) = self.get(env);
        let stack: BTreeSet<&str> = stack_value
            .split(',')
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .collect();
        let plan: BTreeSet<&str> = plan_values.iter().copied().collect();
        if stack == plan {
            return Ok(());
        }
        let join = |s: &BTreeSet<&str>| s.iter().copied().collect::<Vec<_>>().join(",");
        Err(Mismatch {
            plan_field: plan_field.into(),
            plan_value: join(&plan),
            parameter: field.parameter,
            stack_value: join(&stack),
        })
    }

    /// The environment a stack built for `plan` would give its functions
    /// (the harness starts the functions with it, as the template does).
    pub fn environment_for(plan: &Plan) -> Vec<(&'static str, String)> {
        let p = &plan.regions.primary;
        let s = &plan.regions.standby;
        let (zone, parameter) = match &plan.dns.writer {
            WriterEndpoint::Cname { hosted_zone_id, .. } => (hosted_zone_id.clone(), String::new()),
            WriterEndpoint::SsmParameter { name, .. } => (String::new(), name.clone()),
        };
        let (db_secret, ca_secret) = match &plan.canary {
            Canary::Postgres {
                secret_arn,
                ca_secret_arn,
                ..
            } => (
                secret_arn.clone(),
                ca_secret_arn.clone().unwrap_or_default(),
            ),
            Canary::Http { .. } => (String::new(), String::new()),
        };
        let groups: Vec<&str> = p
            .target_group_arns
            .iter()
            .chain(&s.target_group_arns)
            .map(String::as_str)
            .collect();
        let controls: Vec<&str> = [&p.routing_control_arn, &s.routing_control_arn]
            .into_iter()
            .flatten()
            .map(String::as_str)
            .collect();
        vec![
            ("HANDOVER_PRIMARY_REGION", p.region.clone()),
            ("HANDOVER_STANDBY_REGION", s.region.clone()),
            ("HANDOVER_PRIMARY_DB", p.db_instance_id.clone()),
            ("HANDOVER_STANDBY_DB", s.db_instance_id.clone()),
            ("HANDOVER_PRIMARY_HEALTH_CHECK", p.health_check_id.clone()),
            ("HANDOVER_STANDBY_HEALTH_CHECK", s.health_check_id.clone()),
            ("HANDOVER_PUBLIC_ZONE", plan.dns.hosted_zone_id.clone()),
            ("HANDOVER_WRITER_ZONE", zone),
            ("HANDOVER_WRITER_PARAMETER", parameter),
            (
                "HANDOVER_SLACK_BOT_TOKEN_SECRET",
                plan.slack.bot_token_secret_arn.clone(),
            ),
            (
                "HANDOVER_SLACK_SIGNING_SECRET",
                plan.slack.signing_secret_arn.clone(),
            ),
            ("HANDOVER_DB_SECRET", db_secret),
            ("HANDOVER_DB_CA_SECRET", ca_secret),
            (
                "HANDOVER_DETECTION_ALARM",
                plan.detection
                    .alarm
                    .as_ref()
                    .map(|a| a.name.clone())
                    .unwrap_or_default(),
            ),
            ("HANDOVER_TARGET_GROUPS", groups.join(",")),
            ("HANDOVER_ROUTING_CONTROLS", controls.join(",")),
            (
                "HANDOVER_EXPLAIN_MODEL",
                plan.explain
                    .as_ref()
                    .map(|x| x.model_id.clone())
                    .unwrap_or_default(),
            ),
            (
                "HANDOVER_AURORA_GLOBAL_CLUSTER",
                plan.database.global_cluster_id.clone().unwrap_or_default(),
            ),
            ("HANDOVER_REPORT_BUCKET", plan.report.bucket.clone()),
        ]
    }

    /// Every variable the binding reads, with the template resource or
    /// parameter its `!Ref` must name (for the template check).
    pub fn variables() -> impl Iterator<Item = (&'static str, &'static str)> {
        FIELDS.iter().map(|f| (f.env, f.reference))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example plan, with a report bucket for the stack to agree on.
    fn plan() -> Plan {
        let mut p = Plan::from_json(include_str!("../../infra/plan.example.jsonc")).unwrap();
        p.report.bucket = "shop-reports".into();
        p
    }

    fn binding(plan: &Plan, change: &[(&str, &str)]) -> StackBinding {
        let env = StackBinding::environment_for(plan);
        StackBinding::from_lookup(|name| {
            change
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
                .or_else(|| env.iter().find(|(k, _)| *k == name).map(|(_, v)| v.clone()))
        })
        .unwrap()
    }

    #[test]
    fn a_plan_that_matches_its_stack_binds() {
        let mut p = plan();
        p.report.bucket.clear();
        binding(&p, &[("HANDOVER_REPORT_BUCKET", "handover-reports")])
            .bind(&mut p)
            .unwrap();
        assert_eq!(p.report.bucket, "handover-reports");
    }

    #[test]
    fn a_db_id_that_differs_from_the_stack_names_the_field_and_both_values() {
        let mut p = plan();
        let err = binding(&p, &[("HANDOVER_PRIMARY_DB", "shop-db-old")])
            .bind(&mut p)
            .unwrap_err();
        assert_eq!(err.plan_field, "plan.regions.primary.db_instance_id");
        let text = err.to_string();
        assert!(text.contains("\"shop-db\""), "{text}");
        assert!(text.contains("\"shop-db-old\""), "{text}");
        assert!(text.contains("PrimaryDbInstanceId"), "{text}");
    }

    #[test]
    fn a_secret_arn_without_its_suffix_is_a_mismatch() {
        let mut p = plan();
        let full = p.slack.signing_secret_arn.clone();
        let short = full.rsplit_once('-').unwrap().0.to_owned();
        let err = binding(&p, &[("HANDOVER_SLACK_SIGNING_SECRET", &short)])
            .bind(&mut p)
            .unwrap_err();
        assert_eq!(err.plan_field, "plan.slack.signing_secret_arn");
    }

    #[test]
    fn the_stack_owns_the_report_bucket() {
        let mut p = plan();
        p.report.bucket = "shop-reports".into();
        let stack = binding(
            &p,
            &[("HANDOVER_REPORT_BUCKET", "handover-reportbucket-abc")],
        );
        let err = stack.clone().bind(&mut p.clone()).unwrap_err();
        assert_eq!(err.plan_field, "plan.report.bucket");
        p.report.bucket.clear();
        stack.bind(&mut p).unwrap();
        assert_eq!(p.report.bucket, "handover-reportbucket-abc");
    }

    #[test]
    fn target_groups_compare_as_sets_and_a_feature_the_stack_does_not_grant_is_refused() {
        let mut p = plan();
        let groups = StackBinding::environment_for(&p)
            .into_iter()
            .find(|(k, _)| *k == "HANDOVER_TARGET_GROUPS")
            .unwrap()
            .1;
        let reversed: Vec<&str> = groups.split(',').rev().collect();
        binding(&p, &[("HANDOVER_TARGET_GROUPS", &reversed.join(", "))])
            .bind(&mut p)
            .unwrap();
        let err = binding(&p, &[("HANDOVER_EXPLAIN_MODEL", "")])
            .bind(&mut p)
            .unwrap_err();
        assert_eq!(err.plan_field, "plan.explain.model_id");
    }

    #[test]
    fn an_inference_profile_of_the_granted_model_binds_and_another_model_does_not() {
        let mut p = plan();
        let granted = p.explain.as_ref().unwrap().model_id.clone();
        p.explain.as_mut().unwrap().model_id = format!("apac.{granted}");
        binding(&p, &[("HANDOVER_EXPLAIN_MODEL", &granted)])
            .bind(&mut p)
            .unwrap();
        p.explain.as_mut().unwrap().model_id = "apac.amazon.nova-pro-v1:0".into();
        let err = binding(&p, &[("HANDOVER_EXPLAIN_MODEL", &granted)])
            .bind(&mut p)
            .unwrap_err();
        assert_eq!(err.plan_field, "plan.explain.model_id");
    }

    #[test]
    fn the_standby_secret_audit_reads_must_be_the_one_the_stack_grants() {
        let mut p = plan();
        p.regions.standby.db_secret_arn =
            Some("arn:aws:secretsmanager:ap-northeast-1:123456789012:secret:other-Zz99Zz".into());
        let err = binding(&p, &[]).bind(&mut p).unwrap_err();
        assert_eq!(err.plan_field, "plan.regions.standby.db_secret_arn");
    }

    #[test]
    fn an_alarm_outside_us_east_1_is_refused() {
        let mut p = plan();
        p.detection.alarm.as_mut().unwrap().region = "ap-northeast-2".into();
        let err = binding(&p, &[]).bind(&mut p).unwrap_err();
        assert_eq!(err.plan_field, "plan.detection.alarm.region");
    }

    #[test]
    fn a_missing_variable_is_named() {
        let err = StackBinding::from_lookup(|n| (n != "HANDOVER_STANDBY_DB").then(String::new))
            .unwrap_err();
        assert!(err.to_string().contains("HANDOVER_STANDBY_DB"), "{err}");
    }
}
