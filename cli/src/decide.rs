//! `handover approve` / `handover reject`: the decision when Slack cannot
//! ask. The same single-use key as a click (`handover::approval::decide::Apply`),
//! the operator's IAM principal (`sts:GetCallerIdentity`) recorded as the
//! approver, and only a principal on the run's own plan (`cli_approvers`).
//!
//! Before it acts it shows the question as the approval function asked it
//! (diagnosis, risk, RPO, data loss) and asks the operator to type the
//! decision; `--yes` is for scripts. Approving a run whose approval accepts
//! possible data loss needs `--accept-data-loss` as well, as the Slack
//! button needs its confirmation.

use crate::TableContext;
use handover::approval::callback::SfnCallback;
use handover::approval::decide::{Apply, Deciding, Outcome};
use handover::clock::SystemClock;
use handover::error::chain;
use handover::execution::ExecutionInput;
use handover::report::sources::{ExecutionLookup, SfnHistory};
use handover::store::approval::{ApprovalRecord, ApprovalSelector, Decision};
use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::sync::Arc;
use std::time::Duration;

/// The command's own flags.
pub const FLAGS: &[&str] = &[
    "--key",
    "--execution",
    "--incident",
    "--yes",
    "--accept-data-loss",
];

/// One DynamoDB or Step Functions call from an operator's laptop.
const CALL_CAP: Duration = Duration::from_secs(10);
/// The whole decision, found to sent.
const BUDGET: Duration = Duration::from_secs(45);

type Failure = (u8, String);

fn refused(m: impl std::fmt::Display) -> Failure {
    (3, format!("refused (nothing changed): {m}"))
}

fn failed(m: impl std::fmt::Display) -> Failure {
    (4, format!("failed: {m}"))
}

/// Which approval: the flag given, or the failover holding the lock.
async fn selector(
    ctx: &TableContext,
    flags: &BTreeMap<&'static str, String>,
) -> Result<ApprovalSelector, Failure> {
    let given: Vec<ApprovalSelector> = [
        flags.get("--key").cloned().map(ApprovalSelector::Key),
        flags
            .get("--execution")
            .cloned()
            .map(ApprovalSelector::Execution),
        flags
            .get("--incident")
            .cloned()
            .map(ApprovalSelector::Incident),
    ]
    .into_iter()
    .flatten()
    .collect();
    match given.as_slice() {
        [one] => Ok(one.clone()),
        [] => {
            let lock = ctx
                .store
                .lock_state()
                .await
                .map_err(|e| failed(format!("reading the lock: {}", chain(&e))))?;
            match lock.and_then(|l| l.holder) {
                Some(incident) => Ok(ApprovalSelector::Incident(incident)),
                None => Err(refused(
                    "no failover holds the lock, so none is waiting: pass --key, --execution or --incident",
                )),
            }
        }
        _ => Err((
            2,
            "give one of --key, --execution or --incident, not several".into(),
        )),
    }
}

fn what(which: &ApprovalSelector) -> String {
    match which {
        ApprovalSelector::Key(k) => format!("key {k}"),
        ApprovalSelector::Execution(e) => format!("execution {e}"),
        ApprovalSelector::Incident(i) => format!("incident {i}"),
    }
}

/// Ask on the terminal; true when the operator typed the decision's word.
fn confirmed(record: &ApprovalRecord, decision: Decision) -> bool {
    let mut err = std::io::stderr();
    let _ = writeln!(
        err,
        "\n{}\n\nType `{decision}` to {decision} {} (anything else: nothing changes): ",
        record.question, record.incident
    );
    let _ = err.flush();
    let mut line = String::new();
    match std::io::stdin().lock().read_line(&mut line) {
        Ok(n) if n > 0 => line.trim() == decision.as_str(),
        _ => false,
    }
}

/// `handover approve` (`decision` approve) or `handover reject`.
pub async fn decide(
    ctx: TableContext,
    decision: Decision,
    flags: &BTreeMap<&'static str, String>,
) -> Result<String, Failure> {
    let yes = flags.contains_key("--yes");
    let accept_loss = flags.contains_key("--accept-data-loss");
    if accept_loss && decision == Decision::Reject {
        return Err((2, "--accept-data-loss is for approve only".into()));
    }
    let which = selector(&ctx, flags).await?;
    let record = ctx
        .store
        .approval(&which)
        .await
        .map_err(|e| failed(format!("reading the approval: {}", chain(&e))))?
        .ok_or_else(|| {
            refused(format!(
                "no approval was asked for {} (or it was cleaned up a day after it expired)",
                what(&which)
            ))
        })?;
    let now = chrono::Utc::now();
    if record.decided.is_none() && record.expires_at <= now {
        return Err(refused(format!(
            "the approval for {} expired at {}: the run stopped waiting",
            record.incident,
            record.expires_at.format("%Y-%m-%d %H:%M:%S UTC")
        )));
    }
    // The run's own plan decides who may decide, as fence and promote check it.
    let history = SfnHistory::new(&ctx.aws, &ctx.region).await;
    let (status, input) = history
        .describe(&record.execution)
        .await
        .map_err(|e| failed(format!("reading the run: {}", chain(&e))))?;
    if status.is_terminal() {
        return Err(refused(format!(
            "{} has ended ({}): there is no decision to give",
            record.execution, status.status
        )));
    }
    let input: ExecutionInput = serde_json::from_str(&input)
        .map_err(|e| failed(format!("the run's input is not Handover's: {e}")))?;
    let plan = &input.plan;
    let sts = aws_sdk_sts::Client::new(&ctx.aws.config(&ctx.region).await);
    let caller = sts
        .get_caller_identity()
        .send()
        .await
        .map_err(|e| {
            failed(format!(
                "sts:GetCallerIdentity (who are you?): {}",
                handover::error::chain(&e)
            ))
        })?
        .arn
        .unwrap_or_default();
    let Some(approver) = plan.cli_approver(&caller) else {
        let listed: Vec<&str> = plan.cli_approvers.iter().map(|a| a.arn.as_str()).collect();
        return Err(refused(format!(
            "{caller} is not on this run's plan cli_approvers ({}): decide as one of them, or in Slack",
            if listed.is_empty() {
                "the list is empty".to_owned()
            } else {
                listed.join(", ")
            }
        )));
    };
    if accept_loss && !record.data_loss {
        return Err((
            2,
            format!(
                "the approval for {} accepts no data loss (the RPO estimate was within the target when it was asked): drop --accept-data-loss",
                record.incident
            ),
        ));
    }
    if decision == Decision::Approve && record.data_loss && !accept_loss {
        if yes {
            return Err((
                2,
                format!(
                    "approving {} accepts possible data loss (the RPO estimate is over the target or unknown): pass --accept-data-loss as well\n\n{}",
                    record.incident, record.question
                ),
            ));
        }
        eprintln!("\n{}", record.question);
        eprint!("\nApproving accepts possible data loss. Type `accept data loss` to go on: ");
        let _ = std::io::stderr().flush();
        let mut line = String::new();
        let ok = std::io::stdin().lock().read_line(&mut line).is_ok()
            && line.trim() == "accept data loss";
        if !ok {
            return Err(refused("data loss not accepted"));
        }
    }
    if record.decided.is_none() && !yes && !confirmed(&record, decision) {
        return Err(refused("not confirmed"));
    }
    let aws = Arc::new(handover::aws::Aws::named(handover::aws::CLI_APP_NAME));
    let callback = SfnCallback::new(aws, ctx.region.clone());
    let apply = Apply {
        plan,
        store: &ctx.store,
        callback: &callback,
        clock: &SystemClock,
        call_cap: CALL_CAP,
    };
    let deciding = Deciding {
        key: &record.key,
        decision,
        approver_id: &caller,
        approver_name: &approver.name,
        // Only a question that asked about data loss can be acknowledged.
        data_loss_acknowledged: decision == Decision::Approve && record.data_loss,
    };
    let deadline = tokio::time::Instant::now() + BUDGET;
    let outcome = apply.apply(&deciding, deadline).await;
    let verb = match decision {
        Decision::Approve => "Approved",
        Decision::Reject => "Rejected",
    };
    match outcome {
        Outcome::Decided(d) if d.approver_id != caller => Ok(format!(
            "Re-sent {}'s {} of {} ({} at {}) as {caller}: the run has the decision, credited to them.",
            d.approver_id,
            d.decision,
            record.incident,
            d.approver_name,
            d.at.to_rfc3339()
        )),
        Outcome::Decided(d) => Ok(format!(
            "{verb} {} by {} ({}) at {}: the run has the decision.",
            record.incident,
            d.approver_name,
            d.approver_id,
            d.at.to_rfc3339()
        )),
        Outcome::AlreadyDelivered(d) => Ok(format!(
            "Your {} of {} had already reached the run: it goes on. Nothing more to do.",
            d.decision,
            d.at.to_rfc3339()
        )),
        Outcome::AlreadyDecided {
            decision,
            by,
            at,
            delivered,
        } => Err(refused(format!(
            "already decided ({decision}) by {by} at {}{}",
            at.to_rfc3339(),
            if delivered {
                ""
            } else {
                "; not yet confirmed to have reached the run: the same decision by the same principal (any session of the same listed role) sends it again"
            }
        ))),
        Outcome::Expired { at } => Err(refused(format!(
            "the approval expired at {}: the run stopped waiting",
            at.to_rfc3339()
        ))),
        Outcome::UnknownKey => Err(refused(format!("no approval key {}", record.key))),
        Outcome::TaskClosed { code } => Err(refused(format!(
            "your decision was recorded, but the run no longer waits for one ({code}): it timed out or ended"
        ))),
        Outcome::Unsure { decision, error } => Err(failed(format!(
            "Step Functions did not answer ({error}): your {decision} may or may not have reached the run. Run the same command again: it sends it again and tells you which; a run takes a decision only once"
        ))),
        Outcome::Failed { stage, error } => Err(failed(format!("{stage}: {error}"))),
        // Only the Slack path authenticates and parses.
        other @ (Outcome::Unauthenticated(_)
        | Outcome::BadRequest(_)
        | Outcome::Forbidden { .. }) => Err(failed(other.text())),
    }
}
