//! The `slack` side: a signed click → at most one decision sent to Step Functions.
//!
//! Order matters and is fixed: verify the signature (nothing else happens
//! on failure), parse, check the allow-list, consume the key once, then
//! resume the task. Every call is bounded so Slack gets its answer within 3 s.

use super::TaskToken;
use super::callback::{CallbackError, TaskCallback};
use crate::clock::Clock;
use crate::error::{ErrorName, chain};
use crate::execution::ApprovalResult;
use crate::plan::Plan;
use crate::slack::api::SlackApi;
use crate::slack::interaction::{self, ApprovalDecision, InteractionError};
use crate::slack::message::{self, Decided};
use crate::slack::secrets::Secret;
use crate::slack::signing::{self, SignatureError};
use crate::store::Store;
use crate::store::approval::{ConsumeOutcome, Decision, ReleaseApprovalOutcome};
use chrono::{DateTime, Utc};
use std::time::Duration;
use tokio::time::{Instant, timeout};
use tracing::{error, info, warn};

/// Slack waits 3 s; keep a margin for API Gateway and the cold path.
pub const DEFAULT_BUDGET: Duration = Duration::from_millis(2500);
/// The most one DynamoDB or Step Functions call may take.
const CALL_CAP: Duration = Duration::from_millis(900);

/// The request as API Gateway delivered it.
#[derive(Debug, Clone, Copy)]
pub struct SignedRequest<'a> {
    /// `X-Slack-Request-Timestamp`.
    pub timestamp: Option<&'a str>,
    /// `X-Slack-Signature`.
    pub signature: Option<&'a str>,
    /// `Content-Type`.
    pub content_type: Option<&'a str>,
    /// The raw body (base64-decoded if API Gateway encoded it).
    pub body: &'a [u8],
}

/// What happened, and what Slack is told.
#[derive(Debug)]
pub enum Outcome {
    /// Not signed by Slack: 401, nothing else happened.
    Unauthenticated(SignatureError),
    /// Signed, but not a Handover click: 400.
    BadRequest(InteractionError),
    /// The user (or workspace) is not allowed to decide: 403, nothing changed.
    Forbidden {
        /// Slack user id.
        user_id: String,
    },
    /// This click decided; the run got the decision.
    Decided(Decided),
    /// Someone decided before.
    AlreadyDecided {
        /// approve or reject.
        decision: Decision,
        /// Their name (or user id when not on the list any more).
        by: String,
        /// Their id as the key records it (Slack user id or IAM principal).
        by_id: String,
        /// When.
        at: DateTime<Utc>,
        /// Known to have reached the run.
        delivered: bool,
    },
    /// The key expired before anyone decided.
    Expired {
        /// When.
        at: DateTime<Utc>,
    },
    /// No such key.
    UnknownKey,
    /// The click was recorded but Step Functions no longer waits (timed out, run ended).
    TaskClosed {
        /// Step Functions' error code.
        code: String,
    },
    /// A repeated click of a decision whose first send had an unknown
    /// outcome: the run had got it (Step Functions no longer waits for it and
    /// the run goes on).
    AlreadyDelivered(Decided),
    /// Step Functions did not answer definitively (a timeout, a lost answer,
    /// a 5xx): the decision may have reached the run. The key stays with this
    /// person and decision; the same click sends it again.
    Unsure {
        /// approve or reject.
        decision: Decision,
        /// What went wrong.
        error: String,
    },
    /// A dependency failed; the text says what and what to do.
    Failed {
        /// Which step failed.
        stage: &'static str,
        /// The error, with its causes.
        error: String,
    },
}

impl Outcome {
    /// The HTTP status for Slack.
    pub fn status(&self) -> u16 {
        match self {
            Outcome::Unauthenticated(_) => 401,
            Outcome::BadRequest(_) => 400,
            Outcome::Forbidden { .. } => 403,
            Outcome::Failed { .. } | Outcome::Unsure { .. } => 503,
            _ => 200,
        }
    }

    /// What the clicking person reads (ephemeral) and the HTTP body.
    pub fn text(&self) -> String {
        match self {
            Outcome::Unauthenticated(e) => format!("request not signed by Slack: {e}"),
            Outcome::BadRequest(e) => format!("not a Handover approval click: {}", chain(e)),
            Outcome::Forbidden { user_id } => {
                format!("<@{user_id}> is not on this service's approver list: nothing was changed.")
            }
            Outcome::Decided(d) => format!(
                "{} by {} at {}.",
                if d.decision == Decision::Approve {
                    "Approved"
                } else {
                    "Rejected"
                },
                d.approver_name,
                d.at.to_rfc3339()
            ),
            Outcome::AlreadyDecided {
                decision,
                by,
                at,
                delivered,
                ..
            } => {
                format!(
                    "Already decided ({decision}) by {by} at {}.{}",
                    message::slack_date(*at),
                    if *delivered {
                        ""
                    } else {
                        " It is not confirmed to have reached the run yet: the same click by them sends it again."
                    }
                )
            }
            Outcome::Expired { at } => format!(
                "This approval request expired at {}: the run has stopped waiting.",
                message::slack_date(*at)
            ),
            Outcome::UnknownKey => {
                "This approval request is not known (it may have been cleaned up).".into()
            }
            Outcome::TaskClosed { code } => format!(
                "Your click was recorded, but the run no longer waits for a decision ({code}): it timed out or ended. Nothing else changed."
            ),
            Outcome::AlreadyDelivered(d) => format!(
                "Your {} of {} had reached the run: it goes on. Nothing more to do.",
                d.decision,
                message::slack_date(d.at)
            ),
            Outcome::Unsure { decision, error } => format!(
                "Step Functions did not answer ({error}): your {decision} may or may not have reached the run. Click the same button again: Handover sends it again and tells you which, and a run takes a decision only once."
            ),
            Outcome::Failed { stage, error } => format!(
                "Could not complete your decision ({stage}: {error}). Click the same button again."
            ),
        }
    }
}

/// Everything a decision needs, built once per container.
pub struct Decider<'a, T> {
    /// The plan: the allow-list and the optional workspace.
    pub plan: &'a Plan,
    /// The Handover table.
    pub store: &'a Store,
    /// Step Functions.
    pub callback: &'a T,
    /// The Slack Web API (for `response_url`).
    pub slack: &'a SlackApi,
    /// The signing secret.
    pub signing_secret: &'a Secret,
    /// Now (signature window and decision time).
    pub clock: &'a dyn Clock,
    /// The whole request's time budget.
    pub budget: Duration,
}

impl<T: TaskCallback + Sync> Decider<'_, T> {
    /// Handle one request from Slack, end to end.
    pub async fn handle(&self, req: SignedRequest<'_>) -> Outcome {
        let deadline = Instant::now() + self.budget;
        let secret = self.signing_secret.expose().as_bytes();
        if let Err(e) = signing::verify(secret, req.timestamp, req.signature, req.body, self.clock)
        {
            warn!(reason = %e, "slack request refused: signature");
            return Outcome::Unauthenticated(e);
        }
        let click = match interaction::parse(req.content_type, req.body) {
            Ok(c) => c,
            Err(e) => {
                warn!(reason = %chain(&e), "slack request refused: not a Handover click");
                return Outcome::BadRequest(e);
            }
        };
        let outcome = self.decide(&click, deadline).await;
        info!(key = %click.key, user = %click.user_id, decision = %click.decision, status = outcome.status(), outcome = %outcome.text(), "slack click handled");
        self.tell(&click, &outcome, deadline).await;
        outcome
    }

    async fn decide(&self, click: &ApprovalDecision, deadline: Instant) -> Outcome {
        let approver = self.plan.approver(&click.user_id);
        let team_ok = match &self.plan.slack.team_id {
            Some(team) => click.team_id.as_deref() == Some(team.as_str()),
            None => true,
        };
        let (Some(approver), true) = (approver, team_ok) else {
            warn!(user = %click.user_id, team = ?click.team_id, "click from outside the allow-list");
            return Outcome::Forbidden {
                user_id: click.user_id.clone(),
            };
        };
        let deciding = Deciding {
            key: &click.key,
            decision: click.decision,
            approver_id: &approver.user_id,
            approver_name: &approver.name,
            data_loss_acknowledged: click.decision == Decision::Approve
                && click.data_loss_acknowledged,
        };
        let apply = Apply {
            plan: self.plan,
            store: self.store,
            callback: self.callback,
            clock: self.clock,
            call_cap: CALL_CAP,
            any_decider_resends: false,
        };
        apply.apply(&deciding, deadline).await
    }

    /// Update the message through `response_url`: replaced on a decision,
    /// an ephemeral note otherwise. A failure here is logged, not fatal.
    async fn tell(&self, click: &ApprovalDecision, outcome: &Outcome, deadline: Instant) {
        let body = match outcome {
            Outcome::Decided(d) | Outcome::AlreadyDelivered(d) => {
                message::decided(click.original_blocks.as_deref(), d)
            }
            _ => message::ephemeral(&outcome.text()),
        };
        let left = deadline.saturating_duration_since(Instant::now());
        if left < Duration::from_millis(50) {
            warn!("no time left to update the Slack message");
            return;
        }
        if let Err(e) = self.slack.respond(&click.response_url, &body, left).await {
            warn!(error = %chain(&e), "updating the Slack message failed");
        }
    }
}

/// One person's decision on one key, once they are known to be allowed.
#[derive(Debug, Clone, Copy)]
pub struct Deciding<'a> {
    /// The approval key.
    pub key: &'a str,
    /// approve or reject.
    pub decision: Decision,
    /// Who: a Slack user id, or the IAM caller ARN for the CLI.
    pub approver_id: &'a str,
    /// Their name on the plan's list.
    pub approver_name: &'a str,
    /// An approve that accepts possible data loss.
    pub data_loss_acknowledged: bool,
}

/// The one path every decision takes, a Slack click or `handover approve`:
/// consume the key once, resume the task, mark it delivered, and give the
/// key back only when Step Functions refused outright.
pub struct Apply<'a, T> {
    /// The run's plan (names for "already decided by").
    pub plan: &'a Plan,
    /// The Handover table.
    pub store: &'a Store,
    /// Step Functions.
    pub callback: &'a T,
    /// Now.
    pub clock: &'a dyn Clock,
    /// The most one DynamoDB or Step Functions call may take.
    pub call_cap: Duration,
    /// Whether any allowed decider may re-send a decision whose first send
    /// had an unknown outcome (the same decision, credited to whoever made
    /// it), not only its decider or their role. The CLI's path: when Slack
    /// is down, a clicked decision stranded by a lost answer can still
    /// reach the run.
    pub any_decider_resends: bool,
}

impl<T: TaskCallback + Sync> Apply<'_, T> {
    /// Apply `d` before `deadline`.
    pub async fn apply(&self, d: &Deciding<'_>, deadline: Instant) -> Outcome {
        let now = self.clock.now();
        let consumed = timeout(
            self.share(deadline),
            self.store
                .consume_approval(d.key, d.decision, d.approver_id, now),
        )
        .await;
        let consumed = match consumed {
            Ok(Ok(c)) => c,
            Ok(Err(e)) => {
                return failed("recording the decision (the key is unchanged)", &chain(&e));
            }
            Err(_) => {
                return failed(
                    "recording the decision (timed out; it may have been recorded: decide the same way again, which sends it if so)",
                    "DynamoDB did not answer in time",
                );
            }
        };
        // Whose consumption the later writes (delivered, release) refer to:
        // this decider's, or, on a re-send, the one who consumed the key.
        let mut owner = d.approver_id.to_owned();
        let (approval, now, resend) = match consumed {
            ConsumeOutcome::Consumed(a) => (a, now, false),
            ConsumeOutcome::Unknown => return Outcome::UnknownKey,
            ConsumeOutcome::Expired { at } => return Outcome::Expired { at },
            // This person's own decision, not known to have arrived (its
            // send timed out, or the consume's answer was lost): send it
            // again rather than strand them. A token completes only once.
            ConsumeOutcome::AlreadyDecided {
                decision,
                by,
                at,
                undelivered: Some(a),
            } if decision == d.decision
                && (self.any_decider_resends || self.same_decider(&by, d.approver_id)) =>
            {
                info!(key = %d.key, user = %d.approver_id, first = %by, "a repeated decision, undelivered so far: sending it again");
                owner = by;
                (a, at, true)
            }
            ConsumeOutcome::AlreadyDecided {
                decision,
                by,
                at,
                undelivered,
            } => {
                let name = self
                    .plan
                    .decider_name(&by)
                    .map_or(by.clone(), str::to_owned);
                return Outcome::AlreadyDecided {
                    decision,
                    by: name,
                    by_id: by,
                    at,
                    delivered: undelivered.is_none(),
                };
            }
        };
        // A re-send delivers the decision the key records: the run credits
        // whoever consumed the key (another session of the same role may
        // finish what a lost answer left open), as the key does.
        let (approver_id, approver_name) = if resend {
            let name = self.plan.decider_name(&owner).unwrap_or(d.approver_name);
            (owner.clone(), name.to_owned())
        } else {
            (d.approver_id.to_owned(), d.approver_name.to_owned())
        };
        let decided = Decided {
            decision: d.decision,
            approver_id,
            approver_name,
            at: now,
            data_loss_acknowledged: d.decision == Decision::Approve && d.data_loss_acknowledged,
        };
        let result = ApprovalResult {
            decision: decided.decision,
            approver_id: decided.approver_id.clone(),
            approver_name: decided.approver_name.clone(),
            decided_at: now,
            requested_at: approval.requested_at,
            data_loss_acknowledged: decided.data_loss_acknowledged,
        };
        let json = match serde_json::to_string(&result) {
            Ok(j) => j,
            Err(e) => {
                return failed(
                    "encoding the decision (the key was consumed)",
                    &e.to_string(),
                );
            }
        };
        let token = TaskToken::new(approval.task_token.clone());
        let call = async {
            match d.decision {
                Decision::Approve => {
                    self.callback
                        .succeed(&approval.execution, &token, &json)
                        .await
                }
                // The cause is the same JSON, so the report can read who rejected and when.
                Decision::Reject => {
                    self.callback
                        .fail(
                            &approval.execution,
                            &token,
                            ErrorName::Rejected.as_str(),
                            &json,
                        )
                        .await
                }
            }
        };
        let delivered = || async {
            let left = self.share(deadline);
            match timeout(
                left,
                self.store
                    .mark_approval_delivered(d.key, &owner, d.approver_id, self.clock.now()),
            )
            .await
            {
                Ok(Ok(())) => {}
                other => {
                    warn!(result = ?other.map(|r| r.map_err(|e| chain(&e))), "could not mark the decision delivered (a repeated click will re-send it, harmlessly)")
                }
            }
        };
        let error = match timeout(self.share(deadline), call).await {
            Ok(Ok(())) => {
                info!(incident = %approval.incident, execution = %approval.execution, decision = %decided.decision, approver = %decided.approver_id, sent_by = %d.approver_id, resend, "decision sent to step functions");
                delivered().await;
                return Outcome::Decided(decided);
            }
            Ok(Err(CallbackError::TaskClosed { code })) => {
                // The run no longer waits for this token. Did this decision
                // arrive (an earlier send, or the SDK's own first attempt
                // whose answer was lost before it retried)? The history says
                // how the task that handed out this token ended.
                if let Ok(Ok(Some(end))) = timeout(
                    self.share(deadline),
                    self.callback.task_end(&approval.execution, &token),
                )
                .await
                {
                    use super::callback::TaskEnd;
                    // This decision, by this decider: not merely some
                    // SendTaskSuccess (a token can be read from the
                    // execution history and sent by anyone allowed to).
                    let this = |json: &str| {
                        serde_json::from_str::<ApprovalResult>(json).is_ok_and(|r| {
                            r.decision == decided.decision && r.approver_id == decided.approver_id
                        })
                    };
                    let arrived = match (&end, decided.decision) {
                        (TaskEnd::Succeeded(output), Decision::Approve) => this(output),
                        (TaskEnd::Failed { error, cause }, Decision::Reject) => {
                            error == ErrorName::Rejected.as_str() && this(cause)
                        }
                        _ => false,
                    };
                    if arrived {
                        delivered().await;
                        return Outcome::AlreadyDelivered(decided);
                    }
                }
                return Outcome::TaskClosed { code };
            }
            Ok(Err(CallbackError::Call(e))) if e.outcome_unknown() => {
                return Outcome::Unsure {
                    decision: decided.decision,
                    error: chain(&e),
                };
            }
            Ok(Err(e)) => chain(&e),
            Err(_) => {
                return Outcome::Unsure {
                    decision: decided.decision,
                    error: "Step Functions did not answer in time".to_owned(),
                };
            }
        };
        if resend {
            // Refused outright on a re-send: the key stays with this
            // person's decision (releasing it now could undo one that did
            // arrive the first time); the same click tries again.
            return failed(
                "sending the decision again (Step Functions refused it: decide the same way again)",
                &error,
            );
        }
        // Step Functions refused the decision. Give the key back so a click
        // can try again, but only while the task still waits: an earlier
        // attempt of this very call may have been applied with its answer
        // lost (the SDK's retry then meets throttling), and fence and
        // promote act only on what the key records.
        let waiting = timeout(
            self.share(deadline),
            self.callback.task_end(&approval.execution, &token),
        )
        .await;
        if !matches!(waiting, Ok(Ok(None))) {
            warn!(key = %d.key, end = ?waiting.map(|r| r.map_err(|e| chain(&e))), "the decision was refused, and the task is not known to still wait: the key keeps the decision");
            return failed(
                "sending the decision to Step Functions (the key keeps the decision: decide the same way again, which sends it again or says it arrived)",
                &error,
            );
        }
        let released = timeout(
            self.share(deadline),
            self.store.release_approval(d.key, &owner, now),
        )
        .await;
        match released {
            Ok(Ok(ReleaseApprovalOutcome::Released)) => failed(
                "sending the decision to Step Functions (nothing was decided; the key was released: decide again)",
                &error,
            ),
            other => {
                warn!(release = ?other.map(|r| r.map_err(|e| chain(&e))), "the consumed key could not be released");
                failed(
                    "sending the decision to Step Functions (the key was consumed: decide the same way again, which sends it again)",
                    &error,
                )
            }
        }
    }

    /// Is `first` (who consumed the key) the decider `now` again? The same
    /// Slack user, or two sessions of the same `cli_approvers` entry (a
    /// role's sessions get new names; a colleague in the same role may
    /// finish what a lost answer left open).
    fn same_decider(&self, first: &str, now: &str) -> bool {
        first == now
            || matches!(
                (self.plan.cli_approver(first), self.plan.cli_approver(now)),
                (Some(a), Some(b)) if a.arn == b.arn
            )
    }

    /// A call's share of what is left: at most `call_cap`, and never so much
    /// that nothing remains for the answer (Slack's `response_url` update).
    fn share(&self, deadline: Instant) -> Duration {
        let left = deadline.saturating_duration_since(Instant::now());
        self.call_cap
            .min(left.saturating_sub(Duration::from_millis(300)))
    }
}

fn failed(stage: &'static str, error: &str) -> Outcome {
    error!(stage, error, "slack click could not be completed");
    Outcome::Failed {
        stage,
        error: error.to_owned(),
    }
}
