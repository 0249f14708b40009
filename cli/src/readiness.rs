//! `handover readiness`: would a failover work now? Read calls only.

use crate::Context;
use crate::exit::{Exit, Failure};
use handover::readiness::{Verdict, evaluate_now, output};
use handover::report::sources::{ReportReader, S3Reports};

/// The command's own flags, as clap parsed them (see `args.rs`).
#[derive(Debug, Default)]
pub struct Flags {
    /// `--json`.
    pub json: bool,
    /// `--fence-role-arn`.
    pub fence_role_arn: Option<String>,
    /// `--promote-role-arn`.
    pub promote_role_arn: Option<String>,
    /// `--last`.
    pub last: bool,
    /// `--bucket`.
    pub bucket: Option<String>,
}

/// Evaluate and print; a `fail` exits [`Exit::NotReady`].
pub async fn readiness(ctx: Context, flags: Flags) -> Result<String, Failure> {
    let json = flags.json;
    if flags.last {
        return last(&ctx, &flags, json).await;
    }
    if flags.bucket.is_some() {
        return Err((Exit::Usage, "--bucket goes with --last".into()));
    }
    // The roles to simulate: the flags, else the variables the readiness
    // function has (the stack's outputs FenceRoleArn and PromoteRoleArn).
    let roles = match (
        flags
            .fence_role_arn
            .clone()
            .or_else(|| crate::env(handover::readiness::iam::FENCE_ROLE_ENV)),
        flags
            .promote_role_arn
            .clone()
            .or_else(|| crate::env(handover::readiness::iam::PROMOTE_ROLE_ENV)),
    ) {
        (Some(fence), Some(promote)) => {
            Some(handover::readiness::iam::FailoverRoles { fence, promote })
        }
        (None, None) => None,
        _ => {
            return Err((
                Exit::Usage,
                "give both --fence-role-arn and --promote-role-arn (the stack's outputs FenceRoleArn and PromoteRoleArn), or neither".into(),
            ));
        }
    };
    let api = handover::slack::api::SlackApi::from_env().map_err(|e| {
        (
            Exit::Failed,
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
        Err((Exit::NotReady, text))
    } else {
        Ok(text)
    }
}

/// `--last`: the latest evaluation the readiness function stored
/// (`readiness/latest.json` in the report bucket), evaluating nothing.
async fn last(ctx: &Context, flags: &Flags, json: bool) -> Result<String, Failure> {
    if flags.fence_role_arn.is_some() || flags.promote_role_arn.is_some() {
        return Err((
            Exit::Usage,
            "--last reads the stored result: the role flags do not apply".into(),
        ));
    }
    // The plan in SSM may leave the bucket to the stack (filled in at the
    // functions' cold start); the operator names it, or the environment does.
    let bucket = flags
        .bucket
        .clone()
        .or_else(|| Some(ctx.plan.report.bucket.clone()).filter(|b| !b.is_empty()))
        .or_else(|| crate::env("HANDOVER_REPORT_BUCKET"))
        .ok_or_else(|| {
            (
                Exit::Usage,
                "no report bucket: pass --bucket (the stack output ReportBucketName) or set HANDOVER_REPORT_BUCKET".to_owned(),
            )
        })?;
    let key = output::latest_json_key();
    let s3 = S3Reports::new(&ctx.aws, &ctx.plan.regions.standby.region).await;
    let body = match s3.get(&bucket, &key).await {
        Ok(Some(bytes)) => bytes,
        Ok(None) => {
            return Err((
                Exit::Refused,
                format!(
                    "refused: no readiness result at s3://{bucket}/{key} (the function has not run yet): `handover readiness` evaluates now"
                ),
            ));
        }
        // Without s3:ListBucket, S3 answers a missing key with AccessDenied.
        Err(e) if matches!(e.code(), Some("AccessDenied" | "NoSuchBucket")) => {
            return Err((
                Exit::Refused,
                format!(
                    "refused: s3://{bucket}/{key} could not be read ({}: a wrong bucket, no result yet, or not granted)",
                    e.code().unwrap_or_default()
                ),
            ));
        }
        Err(e) => {
            return Err((
                Exit::Failed,
                format!(
                    "failed (nothing was written; retry): {}",
                    handover::error::chain(&e)
                ),
            ));
        }
    };
    let doc: output::Document = serde_json::from_slice(&body).map_err(|e| {
        (
            Exit::Failed,
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
        Err((Exit::NotReady, text))
    } else {
        Ok(text)
    }
}

/// A stored result older than this (two scheduled evaluations and some)
/// says nothing of now.
const STALE_AFTER_MIN: i64 = 65;
