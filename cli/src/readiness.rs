//! `handover readiness`: would a failover work now? Read calls only.

use crate::Context;
use handover::adapters::{CloudWatch, Rds, Route53};
use handover::failover::canary::SecretsManager;
use handover::readiness::{Sources, Verdict, evaluate, observe};
use handover::report::sources::{SecretsManagerUsernames, SsmParameters};
use std::collections::BTreeMap;

/// The command's own flags.
pub const FLAGS: &[&str] = &["--json"];

/// Exit code when a check fails (the world would not fail over as planned).
pub const NOT_READY: u8 = 5;

/// Evaluate and print; a `fail` exits [`NOT_READY`].
pub async fn readiness(
    ctx: Context,
    flags: &BTreeMap<&'static str, String>,
) -> Result<String, (u8, String)> {
    let json = flags.contains_key("--json");
    let plan = &ctx.plan;
    let (p, s) = (&plan.regions.primary, &plan.regions.standby);
    let p_rds = Rds::new(&ctx.aws, &p.region).await;
    let s_rds = Rds::new(&ctx.aws, &s.region).await;
    let lag = CloudWatch::new(&ctx.aws, &s.region).await;
    let dns = Route53::new(&ctx.aws).await;
    let records = handover::failover::switch::Route53Control::new(&ctx.aws).await;
    let parameters = SsmParameters::new(&ctx.aws, &s.region).await;
    let secrets = SecretsManager::new(&ctx.aws, &s.region).await;
    let usernames = SecretsManagerUsernames::new(&ctx.aws, &s.region);
    let sources = Sources {
        p_rds: &p_rds,
        s_rds: &s_rds,
        lag: &lag,
        dns: &dns,
        records: &records,
        parameters: &parameters,
        secrets: &secrets,
        usernames: &usernames,
        store: &ctx.store,
    };
    let snapshot = observe(plan, &sources, chrono::Utc::now()).await;
    let r = evaluate(plan, &snapshot);
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
