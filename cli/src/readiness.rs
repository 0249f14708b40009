//! `handover readiness`: would a failover work now? Read calls only.

use crate::Context;
use handover::readiness::{Verdict, evaluate_now};
use std::collections::BTreeMap;

/// The command's own flags.
pub const FLAGS: &[&str] = &["--json", "--fence-role-arn", "--promote-role-arn"];

/// Exit code when a check fails (the world would not fail over as planned).
pub const NOT_READY: u8 = 5;

/// Evaluate and print; a `fail` exits [`NOT_READY`].
pub async fn readiness(
    ctx: Context,
    flags: &BTreeMap<&'static str, String>,
) -> Result<String, (u8, String)> {
    let json = flags.contains_key("--json");
    // The roles to simulate: the flags, else the variables the readiness
    // function has (the stack's outputs FenceRoleArn and PromoteRoleArn).
    let roles = match (
        flags
            .get("--fence-role-arn")
            .cloned()
            .or_else(|| crate::env(handover::readiness::iam::FENCE_ROLE_ENV)),
        flags
            .get("--promote-role-arn")
            .cloned()
            .or_else(|| crate::env(handover::readiness::iam::PROMOTE_ROLE_ENV)),
    ) {
        (Some(fence), Some(promote)) => {
            Some(handover::readiness::iam::FailoverRoles { fence, promote })
        }
        (None, None) => None,
        _ => {
            return Err((
                2,
                "give both --fence-role-arn and --promote-role-arn (the stack's outputs FenceRoleArn and PromoteRoleArn), or neither".into(),
            ));
        }
    };
    let api = handover::slack::api::SlackApi::from_env().map_err(|e| {
        (
            4,
            format!("the Slack client: {}", handover::error::chain(&e)),
        )
    })?;
    let secrets = handover::slack::secrets::SecretsManager::new(
        std::sync::Arc::new(handover::aws::Aws::named(handover::aws::CLI_APP_NAME)),
        ctx.plan.regions.standby.region.clone(),
    );
    let slack = handover::readiness::SlackReader {
        api: &api,
        secrets: &secrets,
    };
    let r = evaluate_now(
        &ctx.aws,
        &slack,
        &ctx.plan,
        &ctx.store,
        roles.as_ref(),
        chrono::Utc::now(),
        None,
    )
    .await;
    let text = if json {
        serde_json::to_string_pretty(&r).unwrap_or_default()
    } else {
        r.text()
    };
    if r.worst() == Verdict::Fail {
        Err((NOT_READY, text))
    } else {
        Ok(text)
    }
}
