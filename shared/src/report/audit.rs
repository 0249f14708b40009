//! The audit step: on every terminal status of a Handover execution, read
//! the history, run the post-checks, build and store the report, emit the
//! metrics, release the lock (with the cooldown) and reset P's probe run.
//!
//! The lock is released even when the report cannot be stored: the error is
//! returned afterwards, so EventBridge's retry rewrites the report and finds
//! the lock already released (`not_holder`), which is harmless.

use super::build::{build, execution_input};
use super::model::Report;
use super::output::{emf_lines, files};
use super::postcheck::{RunContext, evaluate};
use super::render;
use super::sources::{
    CheckSources, ExecutionHistory, PAGE_SIZE, ReportReader, ReportStore, S3Reports, fold_history,
    observe,
};
use super::{ReportError, numbers};
use crate::adapters::{AwsError, Rds, SecretsManagerUsernames, SsmParameters};
use crate::aws::Aws;
use crate::error::{Classify, ErrorName};
use crate::slack::api::SlackApi;
use crate::slack::secrets::SecretsManager;
use crate::store::lock::ReleaseOutcome;
use crate::store::{Store, StoreError};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use tracing::{error, info, warn};

/// `detail` of an EventBridge "Step Functions Execution Status Change" event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecutionStatusChange {
    /// Execution ARN.
    pub execution_arn: String,
    /// State machine ARN.
    pub state_machine_arn: String,
    /// Execution name (the incident id).
    pub name: String,
    /// `RUNNING`, `SUCCEEDED`, `FAILED`, `TIMED_OUT`, `ABORTED`, …
    pub status: String,
    /// Start, epoch milliseconds.
    #[serde(default)]
    pub start_date: Option<i64>,
    /// Stop, epoch milliseconds.
    #[serde(default)]
    pub stop_date: Option<i64>,
    /// Error of a failed run.
    #[serde(default)]
    pub error: Option<String>,
    /// Cause of a failed run.
    #[serde(default)]
    pub cause: Option<String>,
    /// The run's input (EventBridge includes it while it is small enough,
    /// `inputDetails.included`).
    #[serde(default)]
    pub input: Option<String>,
}

impl ExecutionStatusChange {
    /// Is the status terminal?
    pub fn is_terminal(&self) -> bool {
        matches!(
            self.status.as_str(),
            "SUCCEEDED" | "FAILED" | "TIMED_OUT" | "ABORTED"
        )
    }

    /// When the execution stopped, if the event says.
    pub fn stopped_at(&self) -> Option<DateTime<Utc>> {
        self.stop_date
            .and_then(DateTime::<Utc>::from_timestamp_millis)
    }

    /// The Region in the execution ARN (`arn:aws:states:<region>:…`).
    pub fn region(&self) -> Option<&str> {
        self.execution_arn
            .split(':')
            .nth(3)
            .filter(|r| !r.is_empty())
    }
}

/// The audit failed.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// An AWS call failed.
    #[error(transparent)]
    Aws(#[from] AwsError),
    /// The report could not be built.
    #[error(transparent)]
    Report(#[from] ReportError),
    /// The state store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl Classify for AuditError {
    fn error_name(&self) -> ErrorName {
        match self {
            AuditError::Aws(e) => e.error_name(),
            AuditError::Report(e) => e.error_name(),
            AuditError::Store(e) => e.error_name(),
        }
    }
}

/// What an audit did.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum AuditOutcome {
    /// Nothing to audit: a non-terminal status, or a backup event with
    /// nothing to fill in.
    Skipped {
        /// The status seen, or why nothing was done.
        status: String,
    },
    /// Report written, lock released.
    Audited {
        /// Incident.
        incident_id: String,
        /// Terminal status.
        status: String,
        /// `s3://bucket/key` of the three files.
        files: Vec<String>,
        /// The lock release.
        lock: ReleaseOutcome,
        /// Was P's probe run reset?
        probe_reset: bool,
        /// Findings of severity warning or above.
        findings_to_act_on: usize,
        /// The Slack summary: `posted <ts>`, `not posted: <why>`, or absent when not configured.
        slack: Option<String>,
        /// What the run left in the primary record, undone or completed.
        compensation: crate::failover::compensate::Compensation,
    },
    /// The sweep compensated again for a transition an ended, audited run
    /// left (e.g. a promotion that finished after the run gave up on it).
    Reconciled {
        /// The run that left it.
        execution: String,
        /// What compensation did this time.
        compensation: crate::failover::compensate::Compensation,
    },
}

/// What the audit needs, built once per container.
#[derive(Debug)]
pub struct AuditDeps {
    /// SDK clients per Region.
    pub aws: Arc<Aws>,
    /// The state store.
    pub store: Store,
    /// Slack Web API and the bot token's reader, for the summary (`None`: no summary).
    pub slack: Option<(SlackApi, SecretsManager)>,
}

/// Why the audit runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// The execution reached a terminal status.
    RunEnded,
    /// The new primary's first backup finished: the report is rewritten
    /// with the conservative RTO (see [`super::reaudit`]).
    FirstBackup,
    /// The run ended and its audit never completed (see [`super::sweep`]).
    Sweep,
    /// An operator measured what S never got (`handover rpo`): the report
    /// is rewritten with the measured RPO next to the estimate.
    RpoMeasured,
}

/// Post one plain message to the plan's channel (a failure is logged).
pub(crate) async fn notify(
    deps: &AuditDeps,
    plan: &crate::plan::Plan,
    text: &str,
) -> Option<String> {
    let blocks =
        vec![serde_json::json!({"type": "section", "text": {"type": "mrkdwn", "text": text}})];
    post(deps, plan, text, &blocks).await
}

/// Post `text` and `blocks` with the bot token: `posted <ts>`, `not posted:
/// <why>`, or None when Slack is not configured. Never fatal.
async fn post(
    deps: &AuditDeps,
    plan: &crate::plan::Plan,
    text: &str,
    blocks: &[serde_json::Value],
) -> Option<String> {
    let (api, secrets) = deps.slack.as_ref()?;
    let result = crate::slack::post_to_channel(api, secrets, plan, text, blocks).await;
    Some(match result {
        Ok(posted) => posted,
        Err(e) => {
            warn!(error = %e, "Slack message not posted");
            format!("not posted: {e}")
        }
    })
}

/// Post the summary; a failure is logged and reported, never fatal.
async fn post_summary(
    deps: &AuditDeps,
    plan: &crate::plan::Plan,
    report: &Report,
    location: &str,
    trigger: Trigger,
) -> Option<String> {
    deps.slack.as_ref()?;
    let (mut text, mut blocks) = render::slack_summary(report, location);
    let note = match trigger {
        Trigger::RunEnded => None,
        // Nobody should read this as a second failover.
        Trigger::FirstBackup => Some((
            "Updated report",
            "*Updated report.* The new primary's first backup finished, so the conservative RTO is now measured. Nothing else ran.",
        )),
        Trigger::RpoMeasured => Some((
            "Updated report",
            "*Updated report.* An operator measured on both databases what S never got (`handover rpo`); the RPO is now measured, next to the estimate. Nothing else ran.",
        )),
        Trigger::Sweep => Some((
            "Late audit",
            "*Late audit.* This run ended without its audit completing (its event's deliveries all failed); Handover's sweep audited it now, undoing or completing what it left and releasing the lock.",
        )),
    };
    if let Some((prefix, context)) = note {
        text = format!("{prefix}: {text}");
        blocks.insert(
            0,
            serde_json::json!({"type": "context", "elements": [{"type": "mrkdwn", "text": context}]}),
        );
    }
    post(deps, plan, &text, &blocks).await
}

/// The cooldown after `input`'s run: the plan's, except after a planned
/// switchover. That run was an operator's choice, not an alarm that could
/// flap; when it promoted nothing (not ready, rejected, S not caught up)
/// P is healthy and unfenced again, and a real failure of P just after must
/// not be held off; when it promoted, P has no replica and detect starts
/// no failover anyway.
pub fn run_cooldown(input: &crate::execution::ExecutionInput) -> chrono::Duration {
    match input.mode {
        crate::execution::Mode::Failover => cooldown_of(&input.plan),
        // Two detect ticks: P's probe run counted failures while it was
        // fenced, and just after the unfence a tick could otherwise start
        // a failover against a P that is coming back.
        crate::execution::Mode::Switchover => cooldown_of(&input.plan).min(SWITCHOVER_COOLDOWN),
    }
}

/// The longest cooldown after a planned switchover.
pub const SWITCHOVER_COOLDOWN: chrono::Duration = chrono::Duration::seconds(120);

/// The plan's cooldown after a run, as a duration.
pub fn cooldown_of(plan: &crate::plan::Plan) -> chrono::Duration {
    crate::plan::span_s(plan.timings.cooldown_s)
}

/// Run the audit for one status change. `now` stamps the report and the release.
pub async fn audit<H: ExecutionHistory>(
    deps: &AuditDeps,
    history: &H,
    event: &ExecutionStatusChange,
    now: DateTime<Utc>,
) -> Result<(AuditOutcome, Option<Report>), AuditError> {
    audit_for(deps, history, event, now, Trigger::RunEnded).await
}

/// [`audit`], saying why it runs (the Slack summary says so).
/// The report stored for the run `input` started, if it can be read.
async fn stored_report(aws: &Aws, input: &crate::execution::ExecutionInput) -> Option<Report> {
    let plan = &input.plan;
    let key = format!("{}{}/report.json", plan.report.prefix, input.incident_id);
    match S3Reports::new(aws, &plan.regions.standby.region)
        .await
        .get(&plan.report.bucket, &key)
        .await
    {
        Ok(Some(bytes)) => match serde_json::from_slice::<Report>(&bytes) {
            Ok(r) => Some(r),
            Err(e) => {
                warn!(error = %e, "the stored report is unreadable: no observations of the public name");
                None
            }
        },
        other => {
            warn!(found = ?other.as_ref().map(|o| o.is_some()), "the stored report could not be read: no observations of the public name");
            None
        }
    }
}

/// The report of an ended execution rebuilt from its history, writing
/// nothing (`handover report --render`): no lock release, no
/// compensation, no S3 write, no Slack. The observations of the public
/// name and the readiness line come from the stored report (detect's probe
/// run is reset once the audit ran); the post-checks read the world now.
pub async fn render_from_history<H: ExecutionHistory>(
    aws: &Aws,
    store: &Store,
    history: &H,
    execution_arn: &str,
    now: DateTime<Utc>,
) -> Result<Report, AuditError> {
    let mut facts = fold_history(history, execution_arn, PAGE_SIZE).await?;
    let input = execution_input(&facts)?;
    let plan = &input.plan;
    if let Some(r) = stored_report(aws, &input).await {
        facts.last_readiness_line = r.summary.last_readiness;
        facts.observations = r.observations;
    }
    facts.measured_rpo = store.measured_rpo(execution_arn).await?;
    let mut warnings = Vec::new();
    let steps = super::build::steps(&facts, &mut warnings);
    let run = RunContext {
        promoted: steps.promoted_at().is_some(),
        promote_started_at: steps.promotion.as_ref().map(|p| p.promote_started_at),
    };
    let (p_rds, s_rds) = (
        Rds::new(aws, &plan.regions.primary.region).await,
        Rds::new(aws, &plan.regions.standby.region).await,
    );
    let parameters = SsmParameters::new(aws, &plan.regions.standby.region).await;
    let secrets = SecretsManagerUsernames::new(aws, &plan.regions.standby.region);
    let sources = CheckSources {
        p_rds: &p_rds,
        s_rds: &s_rds,
        parameters: &parameters,
        secrets: &secrets,
    };
    let checks = evaluate(plan, run, &observe(plan, run, &sources).await);
    Ok(build(execution_arn, &facts, &checks, now)?)
}

pub async fn audit_for<H: ExecutionHistory>(
    deps: &AuditDeps,
    history: &H,
    event: &ExecutionStatusChange,
    now: DateTime<Utc>,
    trigger: Trigger,
) -> Result<(AuditOutcome, Option<Report>), AuditError> {
    if !event.is_terminal() {
        info!(status = %event.status, execution = %event.execution_arn, "not a terminal status; nothing to audit");
        return Ok((
            AuditOutcome::Skipped {
                status: event.status.clone(),
            },
            None,
        ));
    }
    // The lock first, before anything that can fail (reading the history,
    // S3, the post-checks): the event carries the run's input, hence the
    // incident and the cooldown. A new run that this lets start early finds
    // this run's transition still held and is refused at the fence until
    // compensation below has undone it. A planned switchover's lock waits
    // for that compensation: its P is healthy but fenced, and a failover
    // asked for meanwhile would ask a person about a P that comes back.
    let early_release = match event
        .input
        .as_deref()
        .and_then(|i| serde_json::from_str::<crate::execution::ExecutionInput>(i).ok())
        .filter(|i| i.mode == crate::execution::Mode::Failover)
    {
        Some(input) => match deps
            .store
            .release_lock(&input.incident_id, now, run_cooldown(&input))
            .await
        {
            Ok(outcome) => Some(outcome),
            Err(e) => {
                warn!(error = %crate::error::chain(&e), "could not release the lock first; trying again after the report");
                None
            }
        },
        None => None,
    };
    let mut facts = fold_history(history, &event.execution_arn, PAGE_SIZE).await?;
    let input = execution_input(&facts)?;
    let plan = &input.plan;
    // The public name as detect saw it after the run started lives in the
    // probe run (reset below); the re-audit finds it in the first report.
    // A re-audit also keeps the readiness the first report gave, not today's.
    let mut reaudit = false;
    facts.observations = match trigger {
        Trigger::FirstBackup | Trigger::RpoMeasured => {
            reaudit = true;
            match stored_report(&deps.aws, &input).await {
                Some(r) => {
                    facts.last_readiness_line = r.summary.last_readiness;
                    r.observations
                }
                None => Vec::new(),
            }
        }
        Trigger::RunEnded | Trigger::Sweep => {
            match deps.store.probe_run(&input.primary.region).await {
                Ok(run) => run
                    .evidence
                    .iter()
                    .filter_map(|e| serde_json::from_str::<crate::detect::TickEvidence>(e).ok())
                    .filter_map(|t| t.public)
                    .collect(),
                Err(e) => {
                    warn!(error = %crate::error::chain(&e), "the probe run's observations could not be read");
                    Vec::new()
                }
            }
        }
    };
    // What S never got, if an operator measured it since (`handover rpo`).
    facts.measured_rpo = match deps.store.measured_rpo(&event.execution_arn).await {
        Ok(m) => m,
        Err(e) => {
            warn!(error = %crate::error::chain(&e), "the measured RPO could not be read; the report gives the estimate");
            None
        }
    };
    facts.readiness = match deps.store.readiness().await {
        _ if reaudit => None,
        Ok(r) => r.map(|r| r.readiness),
        Err(e) => {
            warn!(error = %crate::error::chain(&e), "the last readiness could not be read; the report goes without it");
            None
        }
    };
    let mut warnings = Vec::new();
    let steps = super::build::steps(&facts, &mut warnings);
    let run = RunContext {
        promoted: steps.promoted_at().is_some(),
        promote_started_at: steps.promotion.as_ref().map(|p| p.promote_started_at),
    };
    let (p_rds, s_rds) = (
        Rds::new(&deps.aws, &plan.regions.primary.region).await,
        Rds::new(&deps.aws, &plan.regions.standby.region).await,
    );
    // Before the post-checks read P and S: undo what the run left half-done
    // before the promotion, or complete what it did after (see
    // failover::compensate). This runs for TIMED_OUT and ABORTED too; the
    // undoing waits while a task the run started may still act.
    let acting_until = crate::failover::compensate::acting_until(&facts, event.stopped_at(), now);
    let compensation = crate::failover::compensate::compensate(
        plan,
        &deps.store,
        &event.execution_arn,
        acting_until,
        &p_rds,
        &s_rds,
        now,
    )
    .await;
    use crate::failover::compensate::Compensation;
    match (&compensation, acting_until) {
        (Compensation::Deferred { until }, _) => {
            let text = format!(
                ":warning: *The run ended {} with nothing promoted that Handover can see, and a task it started may still be acting* ({}). P is left as the run left it (fenced, if the fence ran), and the transition stays held until {}. Audit's sweep then reads the world again, within 5 minutes: it restores P's security groups if S is still a replica, or, if S was promoted meanwhile, records S as primary and tells you to switch traffic. Nothing is safe to undo before then; after it, `handover release` does the same at once.",
                event.status,
                input.incident_id,
                until.format("%H:%M:%S UTC")
            );
            notify(deps, plan, &text).await;
        }
        // Stopped while its fence or promote invocation ran, before that
        // invocation claimed anything: it may yet fence P, and only the
        // sweep would notice.
        (Compensation::Nothing, Some(until))
            if facts.states.iter().any(|s| {
                matches!(s.name.as_str(), "Fence" | "Promote")
                    && (s.exited_at.is_none() || s.failed)
            }) =>
        {
            let text = format!(
                ":warning: *The run ended {} while its fence or promote task may still be running* ({}). That invocation may yet fence P. If it does, audit's sweep restores P's security groups after {}, within 5 minutes; `handover status` shows whether a transition is held.",
                event.status,
                input.incident_id,
                until.format("%H:%M:%S UTC")
            );
            notify(deps, plan, &text).await;
        }
        _ => {}
    }
    if let crate::failover::compensate::Compensation::Completed { epoch } = &compensation {
        let switched = steps.switch.is_some();
        error!(execution = %event.execution_arn, epoch, switched, alert = true, "the run ended after promoting S: the record now names S");
        if !switched {
            let text = format!(
                ":rotating_light: *The run ended after S was promoted* ({}, {}). The primary record now names S (epoch {epoch}) and P stays fenced, but *the run never switched traffic and the writer endpoint*: move them to S now, then verify a write.",
                input.incident_id, event.status
            );
            notify(deps, plan, &text).await;
        }
    }
    let parameters = SsmParameters::new(&deps.aws, &plan.regions.standby.region).await;
    let secrets = SecretsManagerUsernames::new(&deps.aws, &plan.regions.standby.region);
    let sources = CheckSources {
        p_rds: &p_rds,
        s_rds: &s_rds,
        parameters: &parameters,
        secrets: &secrets,
    };
    let observed = observe(plan, run, &sources).await;
    let checks = evaluate(plan, run, &observed);
    let report = build(&event.execution_arn, &facts, &checks, now)?;

    let s3 = S3Reports::new(&deps.aws, &plan.regions.standby.region).await;
    let prefix = format!("{}{}/", plan.report.prefix, input.incident_id);
    let mut written = Vec::new();
    let mut put_error = None;
    for (name, content_type, body) in files(&report) {
        let key = format!("{prefix}{name}");
        match s3
            .put(&plan.report.bucket, &key, body.into_bytes(), content_type)
            .await
        {
            Ok(()) => written.push(format!("s3://{}/{key}", plan.report.bucket)),
            Err(e) => {
                warn!(key = %key, error = %crate::error::chain(&e), "report file not stored");
                put_error.get_or_insert(e);
            }
        }
    }
    // Metrics are Lambda's stdout (EMF); the CLI's stdout is a terminal.
    if trigger != Trigger::RpoMeasured {
        for line in emf_lines(&report, now.timestamp_millis()) {
            println!("{line}");
        }
    }
    let location = format!("s3://{}/{prefix}report.html", plan.report.bucket);
    let slack = post_summary(deps, plan, &report, &location, trigger).await;
    let lock = match early_release {
        Some(outcome) => outcome,
        None => {
            deps.store
                .release_lock(&input.incident_id, now, run_cooldown(&input))
                .await?
        }
    };
    let probe_reset = deps
        .store
        .reset_probe(&input.primary.region, input.t0)
        .await?;
    let m = &report.numbers;
    info!(
        incident = %input.incident_id,
        status = %event.status,
        read_rto_s = m.read_rto.value_s,
        write_rto_s = m.write_rto.value_s,
        rpo_s = m.rpo.value_s,
        write_rto = %m.write_rto.value_s.map_or("—".into(), numbers::clock),
        lock = ?lock,
        probe_reset,
        "audit done"
    );
    if let Some(e) = put_error {
        return Err(e.into());
    }
    let findings_to_act_on = report
        .findings
        .iter()
        .filter(|f| f.severity >= super::model::Severity::Warning)
        .count();
    Ok((
        AuditOutcome::Audited {
            incident_id: input.incident_id.clone(),
            status: event.status.clone(),
            files: written,
            lock,
            probe_reset,
            findings_to_act_on,
            slack,
            compensation,
        },
        Some(report),
    ))
}
