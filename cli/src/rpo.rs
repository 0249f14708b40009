//! `handover rpo`: measure what S never got in a failover, on both databases.
//!
//! The report written when the run ended can only estimate the loss (the
//! ReplicaLag sample before the promotion call). This command reads the
//! plan's `rpo_table` on P (the old primary) and on S (the promoted
//! replica) and measures it (see `handover::failover::rpo`). P is fenced:
//! its deny-all security group admits nobody, so the operator reaches it on
//! purpose (a tunnel, a temporary rule) and passes that address as
//! `--p-host`/`--p-port`. TLS still verifies P's RDS endpoint name, so a
//! wrong tunnel is refused before any SQL. The measurement is kept in the
//! table, and the run's report is rewritten with it next to the estimate
//! (the audit runs again on the same history; nothing else changes).

use crate::Context;
use crate::args::DbReach;
use crate::exit::{Exit, Failure};
use handover::adapters::{DbInspector, Rds};
use handover::execution::PromotionStatus;
use handover::failover::canary::{DbCredentials, Secrets, SecretsManager, Session, connect};
use handover::failover::pg_tls::RustlsConnect;
use handover::failover::rpo::measure;
use handover::plan::{Canary, Site};
use handover::report::audit::{AuditDeps, AuditOutcome, Trigger, audit_for};
use handover::report::sources::{ExecutionLookup, PAGE_SIZE, SfnHistory, fold_history};
use std::sync::Arc;
use std::time::Duration;

fn refused(m: impl std::fmt::Display) -> Failure {
    (Exit::Refused, format!("refused: {m}"))
}

fn failed(m: impl std::fmt::Display) -> Failure {
    (
        Exit::Failed,
        format!("failed (nothing was written; retry): {m}"),
    )
}

/// How the canary reaches a database, taken from the plan.
pub(crate) struct DbAccess<'a> {
    pub port: u16,
    pub database: &'a str,
    pub secret_arn: &'a str,
    pub ca_secret_arn: Option<&'a str>,
    pub require_tls: bool,
}

async fn secret(ctx: &Context, arn: &str) -> Result<String, Failure> {
    let region =
        handover::slack::secrets::region_of(arn).unwrap_or(&ctx.plan.regions.standby.region);
    SecretsManager::new(&ctx.aws, region)
        .await
        .secret_string(arn)
        .await
        .map_err(|e| failed(handover::error::chain(&e)))
}

/// Open a session to one side: its RDS endpoint (or the address given),
/// with the side's own credentials when the plan names them.
pub(crate) async fn open(
    ctx: &Context,
    label: &str,
    site: &Site,
    access: &DbAccess<'_>,
    host: Option<&String>,
    port: Option<u16>,
) -> Result<(Session, String), Failure> {
    let rds = Rds::new(&ctx.aws, &site.region).await;
    let instance = rds
        .describe(&site.db_instance_id, Duration::from_secs(10))
        .await
        .map_err(|e| failed(handover::error::chain(&e)))?
        .ok_or_else(|| {
            refused(format!(
                "{label}'s instance {} does not exist in {}",
                site.db_instance_id, site.region
            ))
        })?;
    let endpoint = instance.endpoint.clone().ok_or_else(|| {
        refused(format!(
            "RDS reports no endpoint for {label}'s instance {}",
            site.db_instance_id
        ))
    })?;
    let dial = host.cloned().unwrap_or_else(|| endpoint.clone());
    let port = port.unwrap_or(access.port);
    let arn = site.db_secret_arn.as_deref().unwrap_or(access.secret_arn);
    let creds: DbCredentials = serde_json::from_str(&secret(ctx, arn).await?).map_err(|_| {
        refused(format!(
            "secret {arn} is not the RDS credentials JSON {{\"username\": …, \"password\": …}} (the value is not shown)"
        ))
    })?;
    let tls = match (access.require_tls, access.ca_secret_arn) {
        (true, Some(ca)) => Some(
            RustlsConnect::trusting(&secret(ctx, ca).await?)
                .and_then(|c| c.verifying(&endpoint))
                .map_err(|e| refused(format!("{ca}: {e}")))?,
        ),
        (true, None) => {
            return Err(refused(
                "canary.postgres.require_tls is true but no ca_secret_arn names the CA to trust",
            ));
        }
        (false, _) => None,
    };
    let how = format!(
        "{label} {dial}:{port}{}",
        if tls.is_some() {
            format!(" (TLS verified for {endpoint})")
        } else {
            " (no TLS)".to_owned()
        }
    );
    let session = connect(&dial, port, access.database, &creds, tls, "handover-rpo")
        .await
        .map_err(|e| failed(format!("{label} ({dial}:{port}): {e}")))?;
    Ok((session, how))
}

/// Measure, keep, and rewrite the report.
pub async fn rpo(
    ctx: Context,
    execution: Option<String>,
    reach: &DbReach,
) -> Result<String, Failure> {
    let execution = crate::execution_or_last(
        &ctx.store,
        execution.as_ref(),
        "no --execution, and the primary record names no failover Handover ran",
    )
    .await?;
    let history = SfnHistory::new(&ctx.aws, &ctx.region).await;
    let facts = fold_history(&history, &execution, PAGE_SIZE)
        .await
        .map_err(|e| failed(handover::error::chain(&e)))?;
    let mut warnings = Vec::new();
    let steps = handover::report::build::steps(&facts, &mut warnings);
    let promotion = steps
        .promotion
        .filter(|p| p.status == PromotionStatus::Promoted)
        .ok_or_else(|| {
            refused(format!(
                "{execution} promoted nothing: no data was given up, there is nothing to measure"
            ))
        })?;
    let (status, _) = history
        .describe(&execution)
        .await
        .map_err(|e| failed(handover::error::chain(&e)))?;
    if !status.is_terminal() {
        return Err(refused(format!(
            "{execution} is still {}: measure after it ended",
            status.status
        )));
    }
    // The sides and the canary of the plan that ran: the current plan may
    // name other instances (after a failback, or a new plan).
    let run_plan = handover::report::build::execution_input(&facts)
        .map_err(|e| failed(handover::error::chain(&e)))?
        .plan;
    let plan = &run_plan;
    let table = ctx.plan.rpo_table.clone().or_else(|| plan.rpo_table.clone()).ok_or_else(|| {
        refused("the plan names no rpo_table (a table P's app writes, with each row's write time): there is nothing to measure on")
    })?;
    let access = match &plan.canary {
        Canary::Postgres {
            port,
            database,
            secret_arn,
            require_tls,
            ca_secret_arn,
            ..
        } => DbAccess {
            port: *port,
            database: table.database.as_deref().unwrap_or(database),
            secret_arn,
            ca_secret_arn: ca_secret_arn.as_deref(),
            require_tls: *require_tls,
        },
        Canary::Http { .. } => {
            return Err(refused(
                "the plan's canary is http: rpo reads PostgreSQL with the canary.postgres settings",
            ));
        }
    };
    let ((p, p_conn), p_how) = open(
        &ctx,
        "P",
        &plan.regions.primary,
        &access,
        reach.p_host.as_ref(),
        reach.p_port,
    )
    .await?;
    let ((s, s_conn), s_how) = open(
        &ctx,
        "S",
        &plan.regions.standby,
        &access,
        reach.s_host.as_ref(),
        reach.s_port,
    )
    .await?;
    let now = chrono::Utc::now();
    let measured = measure(
        &p,
        &s,
        &table,
        promotion.promote_started_at,
        now,
        format!("{p_how}; {s_how}"),
    )
    .await;
    drop((p, s));
    p_conn.abort();
    s_conn.abort();
    let measured = measured.map_err(failed)?;
    ctx.store
        .record_measured_rpo(&execution, &measured, now)
        .await
        .map_err(|e| failed(handover::error::chain(&e)))?;
    let estimate = if promotion.rpo_s < 0.0 {
        "unknown (accepted by the approver)".to_owned()
    } else {
        format!("{} s", handover::units::fmt_num(promotion.rpo_s))
    };
    let deps = AuditDeps {
        aws: Arc::new(ctx.aws),
        store: ctx.store,
        slack: None,
    };
    let report = match audit_for(&deps, &history, &status, now, Trigger::RpoMeasured).await {
        Ok((AuditOutcome::Audited { files, .. }, _)) => {
            format!("report rewritten: {}", files.join(", "))
        }
        Ok((other, _)) => format!("report not rewritten: {other:?}"),
        Err(e) => format!(
            "report not rewritten ({}); the next audit of this run shows the measurement",
            handover::error::chain(&e)
        ),
    };
    Ok(format!(
        "RPO measured for {execution}: {}, estimate was {estimate} ({}).\n{report}",
        measured.describe(),
        measured.read_from
    ))
}
