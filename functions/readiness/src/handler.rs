//! Parse the scheduled event, evaluate, keep the result, post a change once.

use handover::adapters::{DefaultBus, OperatorNotice, Sns};
use handover::aws::Aws;
use handover::config::{PlanSource, required};
use handover::error::{ErrorName, FunctionError};
use handover::plan::Plan;
use handover::readiness::iam::FailoverRoles;
use handover::readiness::publish::{self, PublishError};
use handover::readiness::{Readiness, Verdict, evaluate_now, output};
use handover::report::sources::S3Reports;
use handover::slack::api::SlackApi;
use handover::slack::secrets::SecretsManager;
use handover::store::Store;
use handover::store::readiness::ReadinessChange;
use serde::Serialize;
use std::sync::Arc;
use tracing::{info, warn};

/// Built once per container.
pub struct Deps {
    aws: Arc<Aws>,
    plan: Plan,
    store: Store,
    slack: SlackApi,
    slack_secrets: SecretsManager,
    operators: Sns,
    roles: FailoverRoles,
    /// The stack's name: the `Stack` dimension of the metrics.
    stack: String,
    /// The report bucket (the plan's `report.bucket`, the stack's).
    reports: S3Reports,
    /// The default event bus of S's Region.
    bus: DefaultBus,
}

impl Deps {
    /// From `AWS_REGION`, `TABLE_NAME`, the plan (`PLAN_PARAMETER` or
    /// `PLAN_FILE`), `HANDOVER_OPERATOR_TOPIC`, the fence and promote roles
    /// to simulate (`HANDOVER_FENCE_ROLE_ARN`, `HANDOVER_PROMOTE_ROLE_ARN`),
    /// `HANDOVER_STACK_NAME` and `SLACK_API_BASE` (optional).
    pub async fn from_env() -> Result<Self, FunctionError> {
        let aws = Arc::new(Aws::new());
        let region = required("AWS_REGION")?;
        let plan = PlanSource::from_env()?.load_bound(&aws).await?;
        let slack = SlackApi::from_env()
            .map_err(|e| FunctionError::new(ErrorName::Fatal, handover::error::chain(&e)))?;
        let roles = FailoverRoles {
            fence: required(handover::readiness::iam::FENCE_ROLE_ENV)?,
            promote: required(handover::readiness::iam::PROMOTE_ROLE_ENV)?,
        };
        Ok(Deps {
            roles,
            stack: required("HANDOVER_STACK_NAME")?,
            reports: S3Reports::new(&aws, &region).await,
            bus: DefaultBus::new(&aws, &region).await,
            store: Store::new(aws.dynamodb(&region).await, required("TABLE_NAME")?),
            operators: Sns::new(&aws, &required("HANDOVER_OPERATOR_TOPIC")?).await,
            slack_secrets: SecretsManager::new(aws.clone(), region),
            slack,
            plan,
            aws,
        })
    }
}

/// What one evaluation did.
#[derive(Debug, Serialize)]
pub struct Outcome {
    /// `readiness: 0 fail, 1 warn, 15 pass`.
    pub summary: String,
    /// Did the verdicts change since the last evaluation?
    pub changed: bool,
    /// The Slack post (`posted <ts>` / `not posted: …`), on a change only.
    pub slack: Option<String>,
    /// The SNS message id (or why not), on a change only.
    pub sns: Option<String>,
    /// Checks that fail (a planned switchover's Choice state reads it).
    pub fail: usize,
    /// Checks that warn.
    pub warn: usize,
    /// Every check that is not a pass, with its fix (`FAIL id: observed. Fix: …`).
    pub not_passing: Vec<String>,
    /// Where the report went (`s3://bucket/readiness/latest.json`); None
    /// for a switchover's gate, which stores nothing.
    pub stored: Option<String>,
    /// The "Handover Readiness Changed" event's id, on a change only.
    pub event: Option<String>,
}

/// What started this evaluation.
#[derive(Debug, Clone, PartialEq)]
pub enum Trigger {
    /// The 30-minute schedule (EventBridge Scheduler).
    Schedule,
    /// The stack was deployed: CloudFormation's status change, once.
    Deployed {
        /// The stack ARN.
        stack: String,
        /// `CREATE_COMPLETE` or `UPDATE_COMPLETE`.
        status: String,
    },
    /// A planned switchover's first step: its own plan must be ready
    /// (`{"execution.$": "$$.Execution.Id", "mode": "gate", "state.$": "$"}`).
    Switchover {
        /// The execution.
        execution: String,
        /// Its incident id (the lock's holder).
        incident: String,
        /// The plan the run carries.
        plan: Box<Plan>,
    },
}

/// The two payloads the template delivers: EventBridge Scheduler's, and
/// CloudFormation's "CloudFormation Stack Status Change" for a completed
/// create or update (the `AfterDeploy` rule). Anything else is
/// `Handover.InvalidInput`, naming what arrived.
pub fn trigger_of(event: serde_json::Value) -> Result<Trigger, FunctionError> {
    if event.get("state").is_some() {
        let task = handover::execution::TaskInput::from_event(event)?;
        if task.mode.as_deref() != Some("gate")
            || task.state.input.mode != handover::execution::Mode::Switchover
        {
            return Err(FunctionError::invalid_input(format!(
                "a task payload for readiness must be a planned switchover's gate (mode \"gate\"), got mode {:?} of a {}",
                task.mode,
                task.state.input.mode.as_str()
            )));
        }
        return Ok(Trigger::Switchover {
            execution: task.execution,
            incident: task.state.input.incident_id.clone(),
            plan: Box::new(task.state.input.plan),
        });
    }
    if event["source"] != "aws.cloudformation" {
        handover::scheduler::SchedulerEvent::parse(event, "readiness")?;
        return Ok(Trigger::Schedule);
    }
    if event["detail-type"] != "CloudFormation Stack Status Change" {
        return Err(FunctionError::invalid_input(format!(
            "a CloudFormation event of detail-type {} (readiness takes \"CloudFormation Stack Status Change\")",
            event["detail-type"]
        )));
    }
    let detail = &event["detail"];
    let (Some(stack), Some(status)) = (
        detail["stack-id"].as_str(),
        detail["status-details"]["status"].as_str(),
    ) else {
        return Err(FunctionError::invalid_input(
            "CloudFormation Stack Status Change without detail.stack-id and detail.status-details.status",
        ));
    };
    if !matches!(status, "CREATE_COMPLETE" | "UPDATE_COMPLETE") {
        return Err(FunctionError::invalid_input(format!(
            "stack {stack} is {status}: readiness runs after a completed create or update only"
        )));
    }
    Ok(Trigger::Deployed {
        stack: stack.to_owned(),
        status: status.to_owned(),
    })
}

/// One evaluation, on the schedule or right after a deploy; any other
/// payload is `Handover.InvalidInput` and reads nothing.
pub async fn handler(event: serde_json::Value, deps: &Deps) -> Result<Outcome, FunctionError> {
    let trigger = trigger_of(event)?;
    let plan = match &trigger {
        Trigger::Deployed { stack, status } => {
            info!(stack, status, "the stack was deployed: readiness runs now");
            &deps.plan
        }
        Trigger::Switchover {
            execution, plan, ..
        } => {
            info!(
                execution,
                "a planned switchover asks: readiness runs on its plan"
            );
            plan.as_ref()
        }
        Trigger::Schedule => &deps.plan,
    };
    let now = chrono::Utc::now();
    let slack = handover::readiness::SlackReader {
        api: &deps.slack,
        secrets: &deps.slack_secrets,
    };
    // A switchover's gate is asked by the run that holds the lock: its
    // incident id is the lock's holder.
    let own_run = match &trigger {
        Trigger::Switchover { incident, .. } => Some(incident.as_str()),
        _ => None,
    };
    let r = evaluate_now(
        &deps.aws,
        &slack,
        plan,
        &deps.store,
        Some(&deps.roles),
        now,
        own_run,
    )
    .await;
    let not_passing: Vec<String> = r
        .checks
        .iter()
        .filter(|c| c.verdict != Verdict::Pass)
        .map(|c| {
            format!(
                "{} {}: {}. Fix: {}",
                c.verdict.label().to_uppercase(),
                c.id,
                c.observed,
                c.fix
            )
        })
        .collect();
    // What an evaluation that announced nothing answers.
    let quiet = Outcome {
        summary: r.summary(),
        changed: false,
        slack: None,
        sns: None,
        fail: r.count(Verdict::Fail),
        warn: r.count(Verdict::Warn),
        not_passing,
        stored: None,
        event: None,
    };
    // The gate answers its run only: the stored result (what the approval
    // message and the report quote, and what a change is announced
    // against) stays the schedule's, evaluated on the stack's plan with no
    // run holding the lock.
    if own_run.is_some() {
        info!(summary = %r.summary(), "readiness evaluated for a planned switchover's gate");
        return Ok(quiet);
    }
    let stored = deps.store.readiness().await?;
    // Metrics first: printing them cannot fail, and the stack's alarms
    // (failing twice, the heartbeat) must see every evaluation.
    let previous_failed = stored
        .as_ref()
        .is_some_and(|p| p.readiness.count(Verdict::Fail) > 0);
    for line in output::emf_lines(&r, previous_failed, &deps.stack, now.timestamp_millis()) {
        println!("{line}");
    }
    // An output that failed is retried or rewritten next time, and fails
    // this evaluation at the end (the Errors alarm), after everything else.
    let mut failed: Vec<String> = Vec::new();
    if let Some(detail) = stored.and_then(|p| p.event_pending)
        && let Err(e) = put_pending(deps, &detail).await
    {
        failed.push(e);
    }
    let change = deps.store.record_readiness(&r, now).await?;
    info!(summary = %r.summary(), changed = matches!(change, ReadinessChange::Changed { .. }), "readiness evaluated");
    let mut outcome = quiet;
    if let ReadinessChange::Changed { previous } = change {
        let previous = previous.map(|p| *p);
        let (slack, sns) = announce(deps, plan, &r, previous.as_ref(), &mut failed).await?;
        outcome.changed = true;
        (outcome.slack, outcome.sns) = (Some(slack), Some(sns));
        outcome.event = put_event(deps, plan, previous.as_ref(), &r, &mut failed).await;
    }
    // The files last: four writes that may be slow must not hold up the
    // claim and the announcement within the function's timeout.
    match publish::store(&deps.reports, &plan.report.bucket, &r, &plan.service).await {
        Ok(at) => outcome.stored = Some(at),
        Err(e) => failed.push(published(e)),
    }
    if failed.is_empty() {
        Ok(outcome)
    } else {
        Err(FunctionError::new(ErrorName::Transient, failed.join("; ")))
    }
}

/// Tell the people of a change: Slack and the operator topic. Marked
/// posted when either reached them; when neither did, a later evaluation
/// announces it again. Returns what each said.
async fn announce(
    deps: &Deps,
    plan: &Plan,
    r: &Readiness,
    previous: Option<&Readiness>,
    failed: &mut Vec<String>,
) -> Result<(String, String), FunctionError> {
    let text = announcement(plan, r, previous.map(Readiness::summary).as_deref());
    let (slack, slack_ok) = post(deps, &text).await;
    let subject = format!("Handover {}: {}", plan.service, r.summary());
    let (sns, sns_ok) = match deps.operators.publish(&subject, &text).await {
        Ok(id) => (format!("published {id}"), true),
        Err(e) => {
            warn!(error = %handover::error::chain(&e), "readiness change not published to SNS");
            (
                format!("not published: {}", handover::error::chain(&e)),
                false,
            )
        }
    };
    if slack_ok || sns_ok {
        deps.store.mark_readiness_posted(r).await?;
    } else {
        failed.push(format!(
            "the readiness change reached nobody: Slack {slack}; SNS {sns}"
        ));
    }
    Ok((slack, sns))
}

/// Put the change on the bus; one that fails is kept and put by the next
/// evaluation. Returns the event id.
async fn put_event(
    deps: &Deps,
    plan: &Plan,
    previous: Option<&Readiness>,
    r: &Readiness,
    failed: &mut Vec<String>,
) -> Option<String> {
    let detail = output::change_detail(previous, r, &plan.service);
    let json = serde_json::to_string(&detail).unwrap_or_default();
    match publish::put_detail(&deps.bus, &json).await {
        Ok(id) => Some(id),
        Err(e) => {
            failed.push(published(e));
            if let Err(e) = deps.store.keep_pending_event(&json).await {
                failed.push(format!(
                    "the event was not kept to put again: {}",
                    handover::error::chain(&e)
                ));
            }
            None
        }
    }
}

/// Put an event an earlier evaluation could not, then forget it.
async fn put_pending(deps: &Deps, detail: &str) -> Result<(), String> {
    publish::put_detail(&deps.bus, detail)
        .await
        .map_err(published)?;
    deps.store
        .clear_pending_event(detail)
        .await
        .map_err(|e| handover::error::chain(&e))
}

/// An output that did not reach its store, logged and said.
fn published(e: PublishError) -> String {
    let text = handover::error::chain(&e);
    warn!(error = %text, "a readiness output was not written");
    text
}

/// The message of a change: the summary, what it was, and every check that
/// is not a pass with its fix.
pub fn announcement(plan: &Plan, r: &Readiness, previous: Option<&str>) -> String {
    let head = match r.worst() {
        Verdict::Fail => format!(
            ":x: *{}: a failover would not work as planned* ({})",
            plan.service,
            r.summary()
        ),
        Verdict::Warn => format!(
            ":warning: *{}: failover readiness changed* ({})",
            plan.service,
            r.summary()
        ),
        Verdict::Pass => format!(
            ":white_check_mark: *{}: ready to fail over* ({})",
            plan.service,
            r.summary()
        ),
    };
    let was = previous.map_or_else(
        || "first evaluation".to_owned(),
        |p| format!("was {}", p.trim_start_matches("readiness: ")),
    );
    let mut lines = vec![format!("{head}, {was}")];
    for c in r.checks.iter().filter(|c| c.verdict != Verdict::Pass) {
        lines.push(format!(
            "• {} `{}`: {}. Fix: {}",
            c.verdict.label().to_uppercase(),
            c.id,
            c.observed,
            c.fix
        ));
    }
    lines.join("\n")
}

async fn post(deps: &Deps, text: &str) -> (String, bool) {
    let blocks =
        vec![serde_json::json!({"type": "section", "text": {"type": "mrkdwn", "text": text}})];
    let result = handover::slack::post_to_channel(
        &deps.slack,
        &deps.slack_secrets,
        &deps.plan,
        text,
        &blocks,
    )
    .await;
    match result {
        Ok(posted) => (posted, true),
        Err(e) => {
            warn!(error = %e, "readiness change not posted to Slack");
            (format!("not posted: {e}"), false)
        }
    }
}

#[cfg(test)]
mod tests {
    use handover_testkit::fixtures::refused_without;

    /// EventBridge Scheduler's payload for the template's schedule (shape:
    /// the recorded Scheduler event in functions/detect/events/README.md).
    const EVENT: &str = include_str!("../events/scheduled.json");
    /// CloudFormation's stack status change (shape: the CloudFormation User
    /// Guide, "Stack Status Change event detail"; see events/README.md).
    const DEPLOYED: &str = include_str!("../events/stack-status-change.json");

    #[test]
    fn a_completed_deploy_runs_readiness_and_other_stack_events_are_refused() {
        use super::{Trigger, trigger_of};
        let v: serde_json::Value = serde_json::from_str(DEPLOYED).unwrap();
        assert_eq!(
            trigger_of(v.clone()).unwrap(),
            Trigger::Deployed {
                stack: v["detail"]["stack-id"].as_str().unwrap().into(),
                status: "UPDATE_COMPLETE".into()
            }
        );
        let mut failed = v.clone();
        failed["detail"]["status-details"]["status"] =
            serde_json::json!("UPDATE_ROLLBACK_COMPLETE");
        let e = trigger_of(failed).unwrap_err();
        assert!(e.message.contains("completed create or update only"), "{e}");
        let mut other = v.clone();
        other["detail-type"] = serde_json::json!("CloudFormation Resource Status Change");
        assert!(
            trigger_of(other)
                .unwrap_err()
                .message
                .contains("detail-type")
        );
        let mut bare = v;
        bare["detail"] = serde_json::json!({});
        assert!(trigger_of(bare).unwrap_err().message.contains("stack-id"));
    }

    #[test]
    fn the_schedulers_payload_parses_and_a_rule_payload_is_refused_saying_why() {
        let v: serde_json::Value = serde_json::from_str(EVENT).unwrap();
        handover::scheduler::SchedulerEvent::parse(v.clone(), "readiness").unwrap();
        let mut rule = v;
        rule["source"] = serde_json::json!("aws.events");
        rule["detail"] = serde_json::json!({});
        let e = handover::scheduler::SchedulerEvent::parse(rule, "readiness").unwrap_err();
        assert!(e.message.contains("EventBridge Scheduler"), "{e}");
        let _ = refused_without;
    }
}
