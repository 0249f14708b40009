//! Post-checks for cross-Region dependencies: plan-declared S values and
//! SSM parameters that mention P, alarms outside us-east-1, DB secrets whose
//! username differs from S's master user.

use super::model::{Finding, Severity, finding};
use super::observed::Observed;
use crate::aws::GLOBAL_METRICS_REGION;
use crate::dependencies::{mention, mentions, p_markers};
use crate::plan::{Dependency, Plan};

pub(crate) fn dependencies(plan: &Plan, seen: &Observed) -> Vec<Finding> {
    const C: &str = "dependency";
    let markers = p_markers(plan);
    let mut out = Vec::new();
    let action =
        "Point S's resource at S (replicate the image to S's ECR, use S's endpoints and ARNs).";
    for dep in &plan.dependencies {
        if let Dependency::Value { name, value } = dep
            && let Some(m) = mentions(value, &markers)
        {
            out.push(finding(
                C,
                Severity::Warning,
                format!("{name} depends on P"),
                vec![mention(m)],
                Some(action),
            ));
        }
    }
    for (name, value) in &seen.parameters {
        match value {
            Ok(Some(v)) => {
                if let Some(m) = mentions(v, &markers) {
                    out.push(finding(
                        C,
                        Severity::Warning,
                        format!("SSM parameter {name} in S depends on P"),
                        vec![mention(m)],
                        Some(action),
                    ));
                }
            }
            Ok(None) => out.push(finding(
                C,
                Severity::Warning,
                format!("SSM parameter {name} does not exist in S"),
                vec![format!(
                    "ssm:GetParameter {name} in {}: not found",
                    plan.regions.standby.region
                )],
                Some("Create it in S or remove it from the plan's dependencies."),
            )),
            Err(e) => out.push(finding(
                C,
                Severity::Info,
                format!("SSM parameter {name} could not be read"),
                vec![e.clone()],
                None,
            )),
        }
    }
    if let Some(alarm) = &plan.detection.alarm
        && alarm.region != GLOBAL_METRICS_REGION
    {
        out.push(finding("alarm_region", Severity::Warning, format!("Alarm {} is in {}: Route 53 health-check metrics exist only in {GLOBAL_METRICS_REGION}", alarm.name, alarm.region), vec![format!("plan.detection.alarm.region = {}", alarm.region)], Some("Recreate the alarm in us-east-1; elsewhere it stays INSUFFICIENT_DATA and never notifies.")));
    }
    if out.is_empty() {
        out.push(finding(
            C,
            Severity::Ok,
            "No declared S resource references P",
            vec![format!(
                "checked {} declared dependencies for {}",
                plan.dependencies.len(),
                markers.join(", ")
            )],
            None,
        ));
    }
    out
}

pub(crate) fn secret_usernames(plan: &Plan, seen: &Observed) -> Vec<Finding> {
    const C: &str = "secret_username";
    let master = match &seen.s_db {
        Ok(Some(s)) => s.master_username.clone(),
        _ => None,
    };
    seen.secret_usernames
        .iter()
        .filter_map(|(arn, user)| match (user, &master) {
            (Ok(Some(u)), Some(m)) if u != m => Some(finding(
                C,
                Severity::Warning,
                format!("DB secret for S names user {u:?}, but S's master user is {m:?}"),
                vec![format!("secret {arn}: username={u}"), format!("{}: MasterUsername={m}", plan.regions.standby.db_instance_id)],
                Some("Fix the secret's username to match S's database (apps in S fail to log in otherwise), then restart them."),
            )),
            (Ok(Some(u)), Some(_)) => Some(finding(C, Severity::Ok, format!("DB secret for S matches S's master user {u:?}"), vec![format!("secret {arn}")], None)),
            (Ok(None), _) => Some(finding(C, Severity::Warning, "DB secret for S has no username", vec![format!("secret {arn}")], Some("Add the username to the secret."))),
            (Err(e), _) => Some(finding(C, Severity::Info, "DB secret for S could not be read", vec![format!("secret {arn}: {e}")], None)),
            (Ok(Some(_)), None) => None,
        })
        .collect()
}
