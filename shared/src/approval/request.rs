//! The `approval` side: store a short key for the task token and ask in Slack.

use super::{TaskToken, new_key};
use crate::adapters::OperatorNotice;
use crate::clock::Clock;
use crate::error::{Classify, ErrorName, FunctionError};
use crate::execution::{Diagnosis, ExecutionState};
use crate::slack::api::{Posted, SlackApi, SlackError};
use crate::slack::message::{self, ApprovalView, CliHint};
use crate::slack::secrets::{SecretError, SecretReader};
use crate::store::approval::{NewApproval, PostedQuestion, PutApprovalOutcome};
use crate::store::{Store, StoreError};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tracing::{info, warn};

/// Fresh keys tried before giving up (a collision of 128 random bits means
/// the random source is broken, not bad luck).
const KEY_ATTEMPTS: u32 = 3;
/// The most recording the posted message may take (best effort).
const MESSAGE_RECORD_CAP: std::time::Duration = std::time::Duration::from_secs(2);

/// The task's payload, as the state machine sends it:
/// `{"token.$": "$$.Task.Token", "execution.$": "$$.Execution.Id", "state.$": "$"}`.
#[derive(Debug, Clone, Deserialize)]
pub struct ApprovalTask {
    /// The task token to resume the run with.
    pub token: TaskToken,
    /// Execution ARN.
    pub execution: String,
    /// The whole execution document; `diagnosis` must be present.
    pub state: ExecutionState,
}

/// What the function returns (Step Functions ignores it while the task waits;
/// it shows in the history, so it holds no token).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalRequested {
    /// The approval key in the buttons.
    pub key: String,
    /// Where the question was posted; None when Slack refused it and the
    /// operator topic was told instead.
    pub message: Option<Posted>,
    /// Slack's refusal, when there was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slack_error: Option<String>,
    /// The operator topic's message id, when the question went there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator_notice: Option<String>,
    /// When it was asked.
    pub requested_at: DateTime<Utc>,
    /// When the key stops being accepted.
    pub expires_at: DateTime<Utc>,
}

/// Asking failed.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// The execution document lacks what the message needs.
    #[error("approval task input")]
    Input(#[source] FunctionError),
    /// No randomness for the key.
    #[error("no random source for the approval key: {0}")]
    Random(getrandom::Error),
    /// Every fresh key already existed.
    #[error("{0} fresh approval keys all existed: the random source is broken")]
    KeyCollisions(u32),
    /// Storing the key failed.
    #[error("storing the approval key")]
    Store(#[source] StoreError),
    /// The bot token could not be read.
    #[error("reading the Slack bot token")]
    Secret(#[source] SecretError),
    /// Slack did not take the message, after retries, and the operator
    /// topic could not be told either. Nobody has been asked, so the run
    /// must not wait: the state machine catches this and escalates.
    #[error(
        "posting the approval request to Slack (nobody was asked; escalate); the operator topic: {notice}"
    )]
    Slack {
        /// Slack's refusal.
        #[source]
        source: SlackError,
        /// Why the operator topic was not told either.
        notice: String,
    },
}

impl Classify for RequestError {
    fn error_name(&self) -> ErrorName {
        match self {
            RequestError::Input(e) => e.name,
            RequestError::Store(e) => e.error_name(),
            RequestError::Secret(e) => e.error_name(),
            RequestError::Random(_)
            | RequestError::KeyCollisions(_)
            | RequestError::Slack { .. } => ErrorName::Fatal,
        }
    }
}

/// Stores the key and posts the question.
pub struct Requester<'a, S, N> {
    /// The Handover table.
    pub store: &'a Store,
    /// Secrets Manager (the bot token).
    pub secrets: &'a S,
    /// The Slack Web API.
    pub slack: &'a SlackApi,
    /// Now.
    pub clock: &'a dyn Clock,
    /// Table and Region for the CLI hint.
    pub cli: &'a CliHint,
    /// The stack's operator topic: told, with the CLI fallback, when Slack
    /// refuses the question, so the run keeps waiting for an answer.
    pub operators: &'a N,
}

impl<S: SecretReader + Sync, N: OperatorNotice + Sync> Requester<'_, S, N> {
    /// Ask for approval of `task`. Returns once the message is posted; the
    /// Step Functions task keeps waiting until the `slack` function answers.
    pub async fn request(&self, task: &ApprovalTask) -> Result<ApprovalRequested, RequestError> {
        let state = &task.state;
        let plan = &state.input.plan;
        let diagnosis: Diagnosis = state.require("diagnosis").map_err(RequestError::Input)?;
        // Read the token first: if it is missing, nothing is stored.
        let bot_token = crate::slack::secrets::read_slack(
            self.secrets,
            &plan.slack.bot_token_secret_arn,
            crate::slack::secrets::SlackSecret::BotToken,
        )
        .await
        .map_err(RequestError::Secret)?;
        let requested_at = self.clock.now();
        let expires_at = requested_at
            + chrono::Duration::seconds(
                i64::try_from(plan.timings.approval_timeout_s).unwrap_or(i64::MAX / 1000),
            );
        // Best effort: the question never waits on it.
        let readiness = match tokio::time::timeout(
            std::time::Duration::from_secs(2),
            self.store.readiness(),
        )
        .await
        {
            Ok(Ok(r)) => r.map(|r| r.readiness.age_line(requested_at)),
            Ok(Err(e)) => {
                tracing::warn!(error = %crate::error::chain(&e), "the last readiness could not be read; the question goes without it");
                None
            }
            Err(_) => {
                tracing::warn!(
                    "the last readiness did not come within 2 s; the question goes without it"
                );
                None
            }
        };
        // What the CLI shows before it decides: the question as asked here.
        let question = message::question_text(state, &diagnosis, expires_at, readiness.as_deref());
        let key = self
            .store_key(
                task,
                requested_at,
                expires_at,
                &question,
                diagnosis.rpo_over_target,
            )
            .await?;
        let view = ApprovalView {
            state,
            diagnosis: &diagnosis,
            key: &key,
            requested_at,
            expires_at,
            cli: self.cli,
            readiness: readiness.as_deref(),
        };
        let (text, blocks) = message::approval(&view);
        let slack_error = match self
            .slack
            .post_message(&bot_token, &plan.slack.channel, &text, &blocks)
            .await
        {
            Ok(posted) => {
                // Where it was asked, so a decision made without Slack (the
                // CLI) can update it. Best effort: the question is asked
                // either way, and a click updates the message itself.
                let question = PostedQuestion {
                    channel: posted.channel.clone(),
                    ts: posted.ts.clone(),
                    blocks: serde_json::to_string(&blocks).unwrap_or_default(),
                };
                match tokio::time::timeout(
                    MESSAGE_RECORD_CAP,
                    self.store.set_approval_message(&key, &question),
                )
                .await
                {
                    Ok(Ok(())) => {}
                    other => {
                        warn!(key = %key, result = ?other.map(|r| r.map_err(|e| crate::error::chain(&e))), "could not record where the question was posted: a CLI decision will not update the message")
                    }
                }
                info!(
                    incident = %state.input.incident_id,
                    key = %key,
                    channel = %posted.channel,
                    ts = %posted.ts,
                    expires_at = %expires_at,
                    rpo_over_target = diagnosis.rpo_over_target,
                    "approval requested"
                );
                return Ok(ApprovalRequested {
                    key,
                    message: Some(posted),
                    slack_error: None,
                    operator_notice: None,
                    requested_at,
                    expires_at,
                });
            }
            Err(e) => e,
        };
        // Slack refused: ask on the second channel and keep waiting. The key
        // is stored, so the CLI path decides exactly as a click would.
        let refusal = crate::error::chain(&slack_error);
        let (subject, body) = message::approval_fallback(&view, &refusal);
        // A topic nobody listens to asks nobody: then the run must escalate.
        let listeners = self.operators.confirmed_subscribers().await;
        let published = match listeners {
            Ok(0) => Err("the operator topic has no confirmed subscription".to_owned()),
            Ok(_) => self
                .operators
                .publish(&subject, &body)
                .await
                .map_err(|e| crate::error::chain(&e)),
            Err(e) => Err(crate::error::chain(&e)),
        };
        match published {
            Ok(id) => {
                warn!(
                    incident = %state.input.incident_id,
                    key = %key,
                    slack_error = %refusal,
                    notice = %id,
                    "Slack refused the approval request; the operator topic was asked instead"
                );
                Ok(ApprovalRequested {
                    key,
                    message: None,
                    slack_error: Some(refusal),
                    operator_notice: Some(id),
                    requested_at,
                    expires_at,
                })
            }
            Err(notice) => Err(RequestError::Slack {
                source: slack_error,
                notice,
            }),
        }
    }

    async fn store_key(
        &self,
        task: &ApprovalTask,
        requested_at: DateTime<Utc>,
        expires_at: DateTime<Utc>,
        question: &str,
        data_loss: bool,
    ) -> Result<String, RequestError> {
        for _ in 0..KEY_ATTEMPTS {
            let key = new_key().map_err(RequestError::Random)?;
            let approval = NewApproval {
                key: key.clone(),
                task_token: task.token.expose().to_owned(),
                execution: task.execution.clone(),
                incident: task.state.input.incident_id.clone(),
                requested_at,
                expires_at,
                question: question.to_owned(),
                data_loss,
            };
            match self
                .store
                .put_approval(&approval)
                .await
                .map_err(RequestError::Store)?
            {
                PutApprovalOutcome::Stored => return Ok(key),
                PutApprovalOutcome::KeyExists => {
                    warn!(key = %key, "approval key exists; drawing another")
                }
            }
        }
        Err(RequestError::KeyCollisions(KEY_ATTEMPTS))
    }
}
