//! Where S's configuration still depends on P: the plan's declared
//! dependencies and S's DB secrets, read for readiness and the report.
//!
//! Only what matched is ever shown, never a value. An SSM parameter is read
//! with decryption and may hold a credential.

use crate::adapters::{ParameterReader, SecretUsernames};
use crate::plan::{Canary, Dependency, Plan};

/// Strings that show a dependency on P: its Region code, ECR registry host and endpoint host.
pub fn p_markers(plan: &Plan) -> Vec<String> {
    let p = &plan.regions.primary;
    let mut out = vec![
        p.region.clone(),
        format!("dkr.ecr.{}.amazonaws.com", p.region),
    ];
    if let Some(host) = p
        .endpoint
        .split("://")
        .nth(1)
        .and_then(|r| r.split(['/', ':']).next())
        && !host.is_empty()
    {
        out.push(host.to_owned());
    }
    out
}

/// The first of `markers` that `value` contains.
pub fn mentions<'a>(value: &str, markers: &'a [String]) -> Option<&'a str> {
    markers
        .iter()
        .find(|m| value.contains(m.as_str()))
        .map(String::as_str)
}

/// What is said of a value that names P: the marker it contains, never
/// the value. An SSM parameter is read with decryption and may hold a
/// credential (`postgres://app:pw@….rds.amazonaws.com/…`).
pub fn mention(marker: &str) -> String {
    format!("its value mentions {marker:?} (the value itself is not shown)")
}

/// DB secrets for S named in the plan (S's own, the canary's), deduplicated.
pub fn standby_db_secrets(plan: &Plan) -> Vec<String> {
    let mut out: Vec<String> = plan.regions.standby.db_secret_arn.iter().cloned().collect();
    if let Canary::Postgres { secret_arn, .. } = &plan.canary
        && !out.contains(secret_arn)
    {
        out.push(secret_arn.clone());
    }
    out
}

/// The plan's declared SSM parameters in S, each with its value (errors as text).
pub async fn dependency_parameters<P: ParameterReader>(
    plan: &Plan,
    reader: &P,
) -> Vec<(String, Result<Option<String>, String>)> {
    let mut out = Vec::new();
    for dep in &plan.dependencies {
        if let Dependency::SsmParameter { name } = dep {
            let value = reader
                .parameter(name)
                .await
                .map_err(|e| crate::error::chain(&e));
            out.push((name.clone(), value));
        }
    }
    out
}

/// Each DB secret for S with the username it names (errors as text).
pub async fn standby_secret_usernames<S: SecretUsernames>(
    plan: &Plan,
    reader: &S,
) -> Vec<(String, Result<Option<String>, String>)> {
    let mut out = Vec::new();
    for arn in standby_db_secrets(plan) {
        let user = reader
            .username(&arn)
            .await
            .map_err(|e| crate::error::chain(&e));
        out.push((arn, user));
    }
    out
}
