//! The CLI's decision, decided on the server: `POST /decisions` on the
//! approval API, behind API Gateway's `AWS_IAM` authorisation.
//!
//! API Gateway checks the caller's SigV4 signature and IAM permission
//! (`execute-api:Invoke` on the route) before the function runs, and hands
//! the function the authenticated principal
//! (`requestContext.authorizer.iam.userArn`). Everything else happens here,
//! on the server, where the operator cannot skip it:
//! - the approval is found by key, execution or incident;
//! - the run must still be running, and its own plan's `cli_approvers` must
//!   list the caller (as fence and promote check the decider), and so must
//!   the stack's plan (the function's own): a run started with a plan of
//!   someone's making cannot widen who decides it;
//! - an approve of a possible data loss must say so (`accept_data_loss`);
//! - the decision goes through [`Apply`], the same single use as a click.
//!
//! A request without a decision only shows the question; it changes
//! nothing. The task token never leaves the table: no reply carries it.

use super::callback::TaskCallback;
use super::decide::{Apply, Deciding, Outcome};
use crate::clock::Clock;
use crate::error::chain;
use crate::execution::ExecutionInput;
use crate::report::sources::ExecutionLookup;
use crate::slack::api::SlackApi;
use crate::slack::message::{self, Decided};
use crate::slack::secrets::{SecretReader, SlackSecret, read_slack};
use crate::store::Store;
use crate::store::approval::{ApprovalRecord, ApprovalSelector, Decision, PostedQuestion};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::time::Duration;
use tokio::time::{Instant, timeout};
use tracing::{info, warn};

/// The route, as the template declares it.
pub const ROUTE_PATH: &str = "/decisions";
/// The service name a request to it is signed for (SigV4).
pub const SIGNING_SERVICE: &str = "execute-api";
/// The whole request's budget: inside the function's 10 s timeout, and with
/// the cold start inside the route's 15 s integration timeout (template), so
/// the operator always gets the function's own answer, not API Gateway's 503.
pub const BUDGET: Duration = Duration::from_secs(8);
/// The most one DynamoDB or Step Functions call may take.
const CALL_CAP: Duration = Duration::from_secs(2);
/// The most the Slack message's update may take (after the decision).
const MESSAGE_UPDATE_CAP: Duration = Duration::from_millis(1500);

/// What `handover approve` / `reject` sends (JSON). Exactly one of `key`,
/// `execution` and `incident` names the approval.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecisionRequest {
    /// The approval key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// The execution ARN.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution: Option<String>,
    /// The incident id (the execution's name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incident: Option<String>,
    /// approve or reject; absent: only show the question.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<Decision>,
    /// The approver accepts the possible data loss the question names.
    #[serde(default)]
    pub accept_data_loss: bool,
}

impl DecisionRequest {
    /// Which approval, when exactly one is named.
    pub fn selector(&self) -> Result<ApprovalSelector, String> {
        let given: Vec<ApprovalSelector> = [
            self.key.clone().map(ApprovalSelector::Key),
            self.execution.clone().map(ApprovalSelector::Execution),
            self.incident.clone().map(ApprovalSelector::Incident),
        ]
        .into_iter()
        .flatten()
        .collect();
        match <[ApprovalSelector; 1]>::try_from(given) {
            Ok([one]) => Ok(one),
            Err(v) if v.is_empty() => Err("name the approval: key, execution or incident".into()),
            Err(_) => Err("name one of key, execution or incident, not several".into()),
        }
    }
}

/// How a request ended. The CLI maps it to its exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplyKind {
    /// Only the question, as asked (nothing changed).
    Question,
    /// This request decided; the run has the decision.
    Decided,
    /// A decision whose first send had an unknown outcome had reached the run.
    AlreadyDelivered,
    /// Someone decided before.
    AlreadyDecided,
    /// The run no longer waits: expired, ended, or its task closed.
    Closed,
    /// No such approval.
    Unknown,
    /// The caller may not decide this run.
    Forbidden,
    /// The request is malformed or contradicts the question.
    BadRequest,
    /// No authenticated IAM principal (the route is not behind `AWS_IAM`).
    Unauthenticated,
    /// Step Functions did not answer definitively: the same request again.
    Unsure,
    /// A dependency failed; the text says what to do.
    Failed,
}

impl ReplyKind {
    /// The HTTP status.
    pub fn status(self) -> u16 {
        match self {
            ReplyKind::Question | ReplyKind::Decided | ReplyKind::AlreadyDelivered => 200,
            ReplyKind::AlreadyDecided | ReplyKind::Closed => 409,
            ReplyKind::Unknown => 404,
            ReplyKind::Forbidden => 403,
            ReplyKind::BadRequest => 400,
            ReplyKind::Unauthenticated => 401,
            ReplyKind::Unsure | ReplyKind::Failed => 503,
        }
    }
}

/// The approval as the caller may see it: everything but the task token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalView {
    /// The key.
    pub key: String,
    /// The incident id.
    pub incident: String,
    /// The execution ARN.
    pub execution: String,
    /// The question as the approval function asked it.
    pub question: String,
    /// Approving accepts possible data loss.
    pub data_loss: bool,
    /// When the run stops waiting.
    pub expires_at: DateTime<Utc>,
    /// Decided already: by whom (name or id), what, when.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided: Option<String>,
}

/// The answer (JSON).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DecisionReply {
    /// How it ended.
    pub outcome: ReplyKind,
    /// What the operator reads.
    pub text: String,
    /// The IAM principal API Gateway authenticated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caller: Option<String>,
    /// The caller's name on the run's `cli_approvers`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approver: Option<String>,
    /// The approval (once found).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<ApprovalView>,
}

impl DecisionReply {
    /// A reply of `outcome` saying `text`.
    pub fn new(outcome: ReplyKind, text: impl Into<String>) -> Self {
        Self {
            outcome,
            text: text.into(),
            caller: None,
            approver: None,
            approval: None,
        }
    }
}

/// The approval as shown to a caller the run's plan lists (never to others).
fn view(r: &ApprovalRecord, plan: &crate::plan::Plan) -> ApprovalView {
    ApprovalView {
        key: r.key.clone(),
        incident: r.incident.clone(),
        execution: r.execution.clone(),
        question: r.question.clone(),
        data_loss: r.data_loss,
        expires_at: r.expires_at,
        decided: r.decided.as_ref().map(|(d, by, at)| {
            let name = plan.decider_name(by).unwrap_or(by);
            format!("{d} by {name} at {}", at.to_rfc3339())
        }),
    }
}

/// The server side of `handover approve` / `reject`.
pub struct IamDecider<'a, T, L, S> {
    /// The stack's plan (loaded at cold start): its `cli_approvers` bound
    /// every run's; its bot token updates the Slack message.
    pub deployed: &'a crate::plan::Plan,
    /// The Slack Web API (`chat.update` of the question once decided).
    pub slack: &'a SlackApi,
    /// Secrets Manager (the bot token, read only when a message is updated).
    pub secrets: &'a S,
    /// The Handover table.
    pub store: &'a Store,
    /// Step Functions (the decision).
    pub callback: &'a T,
    /// Step Functions (the run's status and plan).
    pub runs: &'a L,
    /// Now.
    pub clock: &'a dyn Clock,
    /// The whole request's budget.
    pub budget: Duration,
}

impl<T: TaskCallback + Sync, L: ExecutionLookup + Sync, S: SecretReader + Sync>
    IamDecider<'_, T, L, S>
{
    /// One request: `caller` is the principal API Gateway authenticated
    /// (None when the event carries none), `body` the JSON sent.
    pub async fn handle(&self, caller: Option<&str>, body: &[u8]) -> DecisionReply {
        let deadline = Instant::now() + self.budget;
        let Some(caller) = caller.filter(|c| !c.is_empty()) else {
            warn!(
                "decision refused: no IAM principal in the request (the route must use AWS_IAM authorisation)"
            );
            return DecisionReply::new(
                ReplyKind::Unauthenticated,
                "no IAM principal: this route must be called through API Gateway with AWS_IAM authorisation (a SigV4-signed request); nothing changed",
            );
        };
        let mut reply = self.decide(caller, body, deadline).await;
        reply.caller = Some(caller.to_owned());
        info!(caller = %caller, outcome = ?reply.outcome, key = reply.approval.as_ref().map_or("", |a| a.key.as_str()), text = %reply.text, "cli decision handled");
        reply
    }

    async fn decide(&self, caller: &str, body: &[u8], deadline: Instant) -> DecisionReply {
        // Before anything is read: a caller the stack's plan does not list
        // learns nothing about any approval.
        if self.deployed.cli_approver(caller).is_none() {
            warn!(caller = %caller, "cli decision from outside the stack's cli_approvers");
            return DecisionReply::new(
                ReplyKind::Forbidden,
                format!(
                    "{caller} is not on the stack's plan cli_approvers: decide as a principal it lists, or in Slack; nothing changed"
                ),
            );
        }
        let req: DecisionRequest = match serde_json::from_slice(body) {
            Ok(r) => r,
            Err(e) => {
                return DecisionReply::new(
                    ReplyKind::BadRequest,
                    format!("not a decision request: {e}; nothing changed"),
                );
            }
        };
        let which = match req.selector() {
            Ok(w) => w,
            Err(e) => return DecisionReply::new(ReplyKind::BadRequest, e),
        };
        if req.accept_data_loss && req.decision == Some(Decision::Reject) {
            return DecisionReply::new(
                ReplyKind::BadRequest,
                "accept_data_loss is for approve only",
            );
        }
        let found = timeout(CALL_CAP, self.store.approval(&which)).await;
        let record = match found {
            Ok(Ok(Some(r))) => r,
            Ok(Ok(None)) => {
                return DecisionReply::new(
                    ReplyKind::Unknown,
                    format!(
                        "no approval was asked for {} (or it was cleaned up a day after it expired)",
                        what(&which)
                    ),
                );
            }
            Ok(Err(e)) => {
                return DecisionReply::new(
                    ReplyKind::Failed,
                    format!(
                        "reading the approval: {}; nothing changed, try again",
                        chain(&e)
                    ),
                );
            }
            Err(_) => {
                return DecisionReply::new(
                    ReplyKind::Failed,
                    "reading the approval: DynamoDB did not answer in time; nothing changed, try again",
                );
            }
        };
        self.decide_on(caller, &req, &record, deadline).await
    }

    async fn decide_on(
        &self,
        caller: &str,
        req: &DecisionRequest,
        record: &ApprovalRecord,
        deadline: Instant,
    ) -> DecisionReply {
        let now = self.clock.now();
        if record.decided.is_none() && record.expires_at <= now {
            return DecisionReply::new(
                ReplyKind::Closed,
                format!(
                    "the approval for {} expired at {}: the run stopped waiting",
                    record.incident,
                    record.expires_at.format("%Y-%m-%d %H:%M:%S UTC")
                ),
            );
        }
        // The run's own plan decides who may decide, as fence and promote check it.
        let described = timeout(CALL_CAP, self.runs.describe(&record.execution)).await;
        let (status, input) = match described {
            Ok(Ok(d)) => d,
            Ok(Err(e)) => {
                return DecisionReply::new(
                    ReplyKind::Failed,
                    format!("reading the run: {}; nothing changed, try again", chain(&e)),
                );
            }
            Err(_) => {
                return DecisionReply::new(
                    ReplyKind::Failed,
                    "reading the run: Step Functions did not answer in time; nothing changed, try again",
                );
            }
        };
        // An ended run takes no decision; one already made is reported from
        // the key below (a re-run after a lost answer learns what happened).
        let ended = status.is_terminal().then(|| status.status.clone());
        if let (Some(st), None) = (&ended, &record.decided) {
            return DecisionReply::new(
                ReplyKind::Closed,
                format!(
                    "{} has ended ({st}): there is no decision to give",
                    record.execution
                ),
            );
        }
        let input: ExecutionInput = match serde_json::from_str(&input) {
            Ok(i) => i,
            Err(e) => {
                return DecisionReply::new(
                    ReplyKind::Failed,
                    format!("the run's input is not Handover's ({e}): nothing changed"),
                );
            }
        };
        let plan = &input.plan;
        let Some(approver) = plan.cli_approver(caller) else {
            let listed: Vec<&str> = plan.cli_approvers.iter().map(|a| a.arn.as_str()).collect();
            warn!(caller = %caller, incident = %record.incident, "cli decision from outside the run's cli_approvers");
            return DecisionReply::new(
                ReplyKind::Forbidden,
                format!(
                    "{caller} is not on this run's plan cli_approvers ({}): decide as one of them, or in Slack; nothing changed",
                    if listed.is_empty() {
                        "the list is empty".to_owned()
                    } else {
                        listed.join(", ")
                    }
                ),
            );
        };
        let mut reply = match (&ended, req.decision) {
            (Some(st), Some(asked)) => from_key(record, asked, caller, plan, st),
            _ => {
                self.apply(caller, &approver.name, req, record, plan, deadline)
                    .await
            }
        };
        reply.approver = Some(approver.name.clone());
        reply.approval = Some(view(record, plan));
        reply
    }

    async fn apply(
        &self,
        caller: &str,
        name: &str,
        req: &DecisionRequest,
        record: &ApprovalRecord,
        plan: &crate::plan::Plan,
        deadline: Instant,
    ) -> DecisionReply {
        let Some(decision) = req.decision else {
            return DecisionReply::new(
                ReplyKind::Question,
                format!("{name} may decide {}: nothing changed", record.incident),
            );
        };
        if req.accept_data_loss && !record.data_loss {
            return DecisionReply::new(
                ReplyKind::BadRequest,
                format!(
                    "the approval for {} accepts no data loss (the RPO estimate was within the target when it was asked): drop the data-loss acknowledgement",
                    record.incident
                ),
            );
        }
        if decision == Decision::Approve && record.data_loss && !req.accept_data_loss {
            return DecisionReply::new(
                ReplyKind::BadRequest,
                format!(
                    "approving {} accepts possible data loss (the RPO estimate is over the target or unknown): acknowledge it (--accept-data-loss)",
                    record.incident
                ),
            );
        }
        let apply = Apply {
            plan,
            store: self.store,
            callback: self.callback,
            clock: self.clock,
            call_cap: CALL_CAP,
            any_decider_resends: true,
        };
        let deciding = Deciding {
            key: &record.key,
            decision,
            approver_id: caller,
            approver_name: name,
            // Only a question that asked about data loss can be acknowledged.
            data_loss_acknowledged: decision == Decision::Approve && record.data_loss,
        };
        let outcome = apply.apply(&deciding, deadline).await;
        if let (Outcome::Decided(d) | Outcome::AlreadyDelivered(d), Some(posted)) =
            (&outcome, &record.message)
        {
            self.update_message(posted, d, deadline).await;
        }
        reply_of(outcome, decision, caller, record)
    }

    /// Replace the Slack message that asked with who decided, buttons gone,
    /// as a click does through its `response_url`. Best effort: the run
    /// has the decision already; a failure is logged.
    async fn update_message(&self, posted: &PostedQuestion, d: &Decided, deadline: Instant) {
        // The operator waits for the answer: the update gets a bounded share,
        // never the rest of the budget.
        let left = deadline
            .saturating_duration_since(Instant::now())
            .min(MESSAGE_UPDATE_CAP);
        if left < Duration::from_millis(300) {
            warn!(ts = %posted.ts, "no time left to update the Slack message");
            return;
        }
        let blocks: Vec<serde_json::Value> =
            serde_json::from_str(&posted.blocks).unwrap_or_default();
        let body = message::decided(Some(&blocks), d);
        let blocks = body["blocks"].as_array().cloned().unwrap_or_default();
        let text = body["text"].as_str().unwrap_or_default();
        let update = async {
            let token = read_slack(
                self.secrets,
                &self.deployed.slack.bot_token_secret_arn,
                SlackSecret::BotToken,
            )
            .await
            .map_err(|e| chain(&e))?;
            self.slack
                .update_message(&token, &posted.channel, &posted.ts, text, &blocks, left)
                .await
                .map_err(|e| chain(&e))
        };
        match timeout(left, update).await {
            Ok(Ok(())) => {
                info!(channel = %posted.channel, ts = %posted.ts, "slack message updated with the cli decision")
            }
            Ok(Err(e)) => warn!(error = %e, "updating the Slack message failed"),
            Err(_) => warn!("updating the Slack message timed out"),
        }
    }
}

/// What the key records, for a run that has ended (`status`): the decision
/// it took, or that none reached it.
fn from_key(
    record: &ApprovalRecord,
    asked: Decision,
    caller: &str,
    plan: &crate::plan::Plan,
    status: &str,
) -> DecisionReply {
    let Some((decision, by_id, at)) = &record.decided else {
        return DecisionReply::new(
            ReplyKind::Closed,
            format!("{} has ended ({status})", record.execution),
        );
    };
    let by = plan.decider_name(by_id).unwrap_or(by_id);
    let who = if by_id == caller {
        "you".to_owned()
    } else {
        by_id.clone()
    };
    match (record.delivered_at, *decision == asked) {
        (Some(_), true) => DecisionReply::new(
            ReplyKind::AlreadyDelivered,
            format!(
                "{} was already decided the same way: {decision} by {by} ({who}) at {}, and the run had it (it has ended: {status}). Nothing more to do.",
                record.incident,
                at.to_rfc3339()
            ),
        ),
        (Some(_), false) => DecisionReply::new(
            ReplyKind::AlreadyDecided,
            format!(
                "already decided ({decision}) by {by} ({who}) at {}, and the run had it (it has ended: {status})",
                at.to_rfc3339()
            ),
        ),
        (None, _) => DecisionReply::new(
            ReplyKind::Closed,
            format!(
                "{} has ended ({status}); the key records {decision} by {by} ({who}) at {}, not confirmed to have reached the run",
                record.execution,
                at.to_rfc3339()
            ),
        ),
    }
}

fn what(which: &ApprovalSelector) -> String {
    match which {
        ApprovalSelector::Key(k) => format!("key {k}"),
        ApprovalSelector::Execution(e) => format!("execution {e}"),
        ApprovalSelector::Incident(i) => format!("incident {i}"),
    }
}

/// [`Apply`]'s outcome in the operator's words.
fn reply_of(
    outcome: Outcome,
    asked: Decision,
    caller: &str,
    record: &ApprovalRecord,
) -> DecisionReply {
    let incident = &record.incident;
    let (kind, text) = match outcome {
        Outcome::Decided(d) if d.approver_id != caller => (
            ReplyKind::Decided,
            format!(
                "Re-sent {}'s {} of {incident} ({} at {}) as {caller}: the run has the decision, credited to them.",
                d.approver_id,
                d.decision,
                d.approver_name,
                d.at.to_rfc3339()
            ),
        ),
        Outcome::Decided(d) => (
            ReplyKind::Decided,
            format!(
                "{} {incident} by {} ({}) at {}: the run has the decision.",
                match d.decision {
                    Decision::Approve => "Approved",
                    Decision::Reject => "Rejected",
                },
                d.approver_name,
                d.approver_id,
                d.at.to_rfc3339()
            ),
        ),
        Outcome::AlreadyDelivered(d) => (
            ReplyKind::AlreadyDelivered,
            format!(
                "The {} of {} had already reached the run: it goes on. Nothing more to do.",
                d.decision,
                d.at.to_rfc3339()
            ),
        ),
        // The decision asked for is the one the run has: done, whoever made
        // it (a lost answer to this caller's own earlier request, too).
        Outcome::AlreadyDecided {
            decision,
            by,
            by_id,
            at,
            delivered: true,
        } if decision == asked => (
            ReplyKind::AlreadyDelivered,
            format!(
                "{incident} was already decided the same way: {decision} by {by} ({}) at {}, and the run has it. Nothing more to do.",
                if by_id == caller {
                    "you".to_owned()
                } else {
                    by_id
                },
                at.to_rfc3339()
            ),
        ),
        Outcome::AlreadyDecided {
            decision,
            by,
            at,
            delivered,
            ..
        } => (
            ReplyKind::AlreadyDecided,
            format!(
                "already decided ({decision}) by {by} at {}{}",
                at.to_rfc3339(),
                if delivered {
                    ""
                } else {
                    "; not yet confirmed to have reached the run: the same decision again sends it, credited to them"
                }
            ),
        ),
        Outcome::Expired { at } => (
            ReplyKind::Closed,
            format!(
                "the approval expired at {}: the run stopped waiting",
                at.to_rfc3339()
            ),
        ),
        Outcome::UnknownKey => (
            ReplyKind::Unknown,
            format!("no approval key {}", record.key),
        ),
        Outcome::TaskClosed { code } => (
            ReplyKind::Closed,
            format!(
                "the decision was recorded, but the run no longer waits for one ({code}): it timed out or ended"
            ),
        ),
        Outcome::Unsure { decision, error } => (
            ReplyKind::Unsure,
            format!(
                "Step Functions did not answer ({error}): the {decision} may or may not have reached the run. Run the same command again: it sends it again and tells you which; a run takes a decision only once"
            ),
        ),
        Outcome::Failed { stage, error } => (ReplyKind::Failed, format!("{stage}: {error}")),
        // Only the Slack path authenticates and parses.
        other @ (Outcome::Unauthenticated(_)
        | Outcome::BadRequest(_)
        | Outcome::Forbidden { .. }) => (ReplyKind::Failed, other.text()),
    };
    DecisionReply::new(kind, text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_names_exactly_one_approval() {
        let r: DecisionRequest =
            serde_json::from_str(r#"{"key":"k","decision":"approve"}"#).unwrap();
        assert_eq!(r.selector().unwrap(), ApprovalSelector::Key("k".into()));
        assert_eq!(r.decision, Some(Decision::Approve));
        let none: DecisionRequest = serde_json::from_str(r#"{"decision":"reject"}"#).unwrap();
        assert!(none.selector().unwrap_err().contains("name the approval"));
        let two: DecisionRequest = serde_json::from_str(r#"{"key":"k","incident":"i"}"#).unwrap();
        assert!(two.selector().unwrap_err().contains("not several"));
    }

    #[test]
    fn unknown_fields_and_decisions_are_refused() {
        assert!(serde_json::from_str::<DecisionRequest>(r#"{"key":"k","approver":"me"}"#).is_err());
        assert!(
            serde_json::from_str::<DecisionRequest>(r#"{"key":"k","decision":"maybe"}"#).is_err()
        );
    }

    #[test]
    fn statuses_say_what_happened() {
        assert_eq!(ReplyKind::Decided.status(), 200);
        assert_eq!(ReplyKind::Question.status(), 200);
        assert_eq!(ReplyKind::Forbidden.status(), 403);
        assert_eq!(ReplyKind::Unauthenticated.status(), 401);
        assert_eq!(ReplyKind::AlreadyDecided.status(), 409);
        assert_eq!(ReplyKind::Unsure.status(), 503);
        let reply = DecisionReply::new(ReplyKind::Closed, "ended");
        let json = serde_json::to_value(&reply).unwrap();
        assert_eq!(json["outcome"], "closed");
        assert_eq!(
            serde_json::from_value::<DecisionReply>(json).unwrap(),
            reply
        );
    }
}
