//! `handover readiness`: would a failover work now? Read calls only.

use crate::Context;
use handover::readiness::{Verdict, evaluate_now, output};
use handover::report::sources::{ReportReader, S3Reports};
use std::collections::BTreeMap;

/// The command's own flags.
pub const FLAGS: &[&str] = &[
    "--json",
    "--fence-role-arn",
    "--promote-role-arn",
    "--last",
    "--bucket",
];

/// Exit code when a check fails (the world would not fail over as planned).
pub const NOT_READY: u8 = 5;

/// Evaluate and print; a `fail` exits [`NOT_READY`].
pub async fn readiness(
    ctx: Context,
    flags: &BTreeMap<&'static str, String>,
) -> Result<String, (u8, String)> {
    let json = flags.contains_key("--json");
    if flags.contains_key("--last") {
        return last(&ctx, flags, json).await;
    }
    if flags.contains_key("--bucket") {
        return Err((2, "--bucket goes with --last".into()));
    }
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

/// `--last`: the latest evaluation the readiness function stored
/// (`readiness/latest.json` in the report bucket), evaluating nothing.
async fn last(
    ctx: &Context,
    flags: &BTreeMap<&'static str, String>,
    json: bool,
) -> Result<String, (u8, String)> {
    if flags.contains_key("--fence-role-arn") || flags.contains_key("--promote-role-arn") {
        return Err((
            2,
            "--last reads the stored result: the role flags do not apply".into(),
        ));
    }
    // The plan in SSM may leave the bucket to the stack (filled in at the
    // functions' cold start); the operator names it, or the environment does.
    let bucket = flags
        .get("--bucket")
        .cloned()
        .or_else(|| Some(ctx.plan.report.bucket.clone()).filter(|b| !b.is_empty()))
        .or_else(|| crate::env("HANDOVER_REPORT_BUCKET"))
        .ok_or_else(|| {
            (
                2,
                "no report bucket: pass --bucket (the stack output ReportBucketName) or set HANDOVER_REPORT_BUCKET".to_owned(),
            )
        })?;
    let key = output::latest_json_key();
    let s3 = S3Reports::new(&ctx.aws, &ctx.plan.regions.standby.region).await;
    let body = match s3.get(&bucket, &key).await {
        Ok(Some(bytes)) => bytes,
        Ok(None) => {
            return Err((
                3,
                format!(
                    "refused: no readiness result at s3://{bucket}/{key} (the function has not run yet): `handover readiness` evaluates now"
                ),
            ));
        }
        // Without s3:ListBucket, S3 answers a missing key with AccessDenied.
        Err(e) if matches!(e.code(), Some("AccessDenied" | "NoSuchBucket")) => {
            return Err((
                3,
                format!(
                    "refused: s3://{bucket}/{key} could not be read ({}: a wrong bucket, no result yet, or not granted)",
                    e.code().unwrap_or_default()
                ),
            ));
        }
        Err(e) => {
            return Err((
                4,
                format!(
                    "failed (nothing was written; retry): {}",
                    handover::error::chain(&e)
                ),
            ));
        }
    };
    let doc: output::Document = serde_json::from_slice(&body).map_err(|e| {
        (
            4,
            format!("s3://{bucket}/{key} is not a readiness result: {e}"),
        )
    })?;
    let age = (chrono::Utc::now() - doc.readiness.at).num_minutes().max(0);
    let stale = age > STALE_AFTER_MIN;
    let text = if json {
        let mut v = serde_json::to_value(&doc).unwrap_or_default();
        v["stored_at"] = format!("s3://{bucket}/{key}").into();
        v["age_min"] = age.into();
        v["stale"] = stale.into();
        serde_json::to_string_pretty(&v).unwrap_or_default()
    } else {
        let mut text = format!(
            "{}\n(stored at s3://{bucket}/{key}; {age} min old)",
            doc.readiness.text()
        );
        if stale {
            text.push_str(&format!(
                "\nSTALE: no evaluation for {age} min (the schedule runs every 30): readiness may not be running; this result says nothing of now"
            ));
        }
        text
    };
    // A stale result is no evidence of readiness.
    if doc.worst == Verdict::Fail || stale {
        Err((NOT_READY, text))
    } else {
        Ok(text)
    }
}

/// A stored result older than this (two scheduled evaluations and some)
/// says nothing of now.
const STALE_AFTER_MIN: i64 = 65;
