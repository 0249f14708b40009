//! Approval keys: a short random key in the Slack button maps to the Step
//! Functions task token. Single use, with an expiry the code checks itself.

use super::primary::conditional_old;
use super::{Attrs, Item, Store, StoreError, TTL_ATTRIBUTE, call_error, ms, n, s};
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::types::{ReturnValue, ReturnValuesOnConditionCheckFailure};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::fmt;

/// What a person decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Go ahead with the failover.
    Approve,
    /// Do not fail over.
    Reject,
}

impl Decision {
    /// `approve` / `reject`.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Approve => "approve",
            Decision::Reject => "reject",
        }
    }
    fn status(self) -> &'static str {
        match self {
            Decision::Approve => "approved",
            Decision::Reject => "rejected",
        }
    }
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A pending approval to store. The task token never leaves the store except
/// to the SendTask* call.
#[derive(Clone, PartialEq, Eq)]
pub struct NewApproval {
    /// The random key (the button value).
    pub key: String,
    /// The Step Functions task token.
    pub task_token: String,
    /// Execution ARN.
    pub execution: String,
    /// Incident id.
    pub incident: String,
    /// When it was asked.
    pub requested_at: DateTime<Utc>,
    /// When it stops being valid.
    pub expires_at: DateTime<Utc>,
    /// The question as the person was asked it (diagnosis, risk, RPO), in
    /// plain text: `handover approve` shows the same before it decides.
    pub question: String,
    /// Approving accepts possible data loss (the RPO estimate is over the
    /// target or unknown): the decision must acknowledge it.
    pub data_loss: bool,
}

impl fmt::Debug for NewApproval {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NewApproval")
            .field("key", &self.key)
            .field("task_token", &"<redacted>")
            .field("execution", &self.execution)
            .field("incident", &self.incident)
            .field("expires_at", &self.expires_at)
            .field("data_loss", &self.data_loss)
            .finish()
    }
}

/// Which approval an operator means: its key (in the Slack message and the
/// operator notice), its execution, or its incident.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApprovalSelector {
    /// The approval key.
    Key(String),
    /// The execution ARN.
    Execution(String),
    /// The incident id (the execution's name).
    Incident(String),
}

/// A stored approval as an operator sees it: everything but the task token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalRecord {
    /// The key.
    pub key: String,
    /// Execution ARN.
    pub execution: String,
    /// Incident id.
    pub incident: String,
    /// When it was asked.
    pub requested_at: DateTime<Utc>,
    /// When it stops being valid.
    pub expires_at: DateTime<Utc>,
    /// The question as asked (empty for keys stored before it was kept).
    pub question: String,
    /// Approving accepts possible data loss.
    pub data_loss: bool,
    /// The decision, once someone decided: what, by whom, when.
    pub decided: Option<(Decision, String, DateTime<Utc>)>,
    /// When the decision was known to reach Step Functions.
    pub delivered_at: Option<DateTime<Utc>>,
    /// Who sent the delivery that reached it: the decider, or another
    /// session of the same CLI role that re-sent it.
    pub delivered_by: Option<String>,
    /// The Slack message that asked, once posted: a decision made without
    /// Slack (the CLI) updates it.
    pub message: Option<PostedQuestion>,
}

/// The Slack message that asked an approval: where it is and what it showed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostedQuestion {
    /// The channel id `chat.postMessage` answered.
    pub channel: String,
    /// The message's `ts`.
    pub ts: String,
    /// Its blocks, as JSON (the buttons go when it is updated).
    pub blocks: String,
}

/// A consumed approval: what the `slack` function needs to resume the run.
#[derive(Clone, PartialEq, Eq)]
pub struct ConsumedApproval {
    /// The task token to send the decision with.
    pub task_token: String,
    /// Execution ARN.
    pub execution: String,
    /// Incident id.
    pub incident: String,
    /// When it was asked.
    pub requested_at: DateTime<Utc>,
}

impl ConsumedApproval {
    fn from_attrs(a: &Attrs<'_>) -> Result<Self, StoreError> {
        Ok(ConsumedApproval {
            task_token: a.s("task_token")?,
            execution: a.s("execution")?,
            incident: a.s("incident")?,
            requested_at: a.time_ms("requested_ms")?,
        })
    }
}

impl fmt::Debug for ConsumedApproval {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConsumedApproval")
            .field("task_token", &"<redacted>")
            .field("execution", &self.execution)
            .field("incident", &self.incident)
            .finish()
    }
}

/// Result of [`Store::put_approval`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PutApprovalOutcome {
    /// Stored.
    Stored,
    /// A key with this value exists (a random collision or a retried call).
    KeyExists,
}

/// Result of [`Store::consume_approval`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConsumeOutcome {
    /// This request consumed the key; resume the run with the token.
    Consumed(ConsumedApproval),
    /// Someone already decided.
    AlreadyDecided {
        /// approve or reject.
        decision: Decision,
        /// Slack user id.
        by: String,
        /// When.
        at: DateTime<Utc>,
        /// The decision is not known to have reached Step Functions (its
        /// send timed out or its answer was lost): the token to send it again
        /// with, for a repeated click by the same person with the same decision.
        undelivered: Option<ConsumedApproval>,
    },
    /// The key expired before anyone decided.
    Expired {
        /// When it expired.
        at: DateTime<Utc>,
    },
    /// No such key.
    Unknown,
}

/// Result of [`Store::release_approval`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReleaseApprovalOutcome {
    /// The key is pending again: a person can click again.
    Released,
    /// The key is not in the state this consumption left it in (someone
    /// else's decision, expired and gone, or already released): unchanged.
    NotOurs,
}

fn approval_key(key: &str) -> String {
    format!("APPROVAL#{key}")
}

/// The pointer from an execution or an incident to its latest approval key.
fn pointer_key(of: &str) -> String {
    format!("APPROVAL_FOR#{of}")
}

impl Store {
    /// Store a pending approval. Conditional: never overwrites a key.
    pub async fn put_approval(&self, a: &NewApproval) -> Result<PutApprovalOutcome, StoreError> {
        let pk = approval_key(&a.key);
        let mut item = Self::key(&pk);
        item.insert("task_token".into(), s(&a.task_token));
        item.insert("execution".into(), s(&a.execution));
        item.insert("incident".into(), s(&a.incident));
        item.insert("requested_ms".into(), ms(a.requested_at));
        item.insert("expires_ms".into(), ms(a.expires_at));
        // The TTL attribute is epoch seconds; DynamoDB deletes some time after it.
        item.insert(
            TTL_ATTRIBUTE.into(),
            n(a.expires_at.timestamp() + 24 * 3600),
        );
        item.insert("status".into(), s("pending"));
        item.insert("question".into(), s(&a.question));
        item.insert("data_loss".into(), AttributeValue::Bool(a.data_loss));
        let res = self
            .client()
            .put_item()
            .table_name(self.table())
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(pk)")
            .send()
            .await;
        match res {
            Ok(_) => {
                self.put_approval_pointers(a).await?;
                Ok(PutApprovalOutcome::Stored)
            }
            Err(e)
                if matches!(
                    e.as_service_error(),
                    Some(PutItemError::ConditionalCheckFailedException(_))
                ) =>
            {
                Ok(PutApprovalOutcome::KeyExists)
            }
            Err(e) => Err(call_error("PutItem", &pk, e)),
        }
    }

    /// Point the execution and the incident at this key (the latest asked),
    /// so an operator finds it by either. Written after the key: a pointer
    /// never names a key that is not stored. If this write fails the call
    /// fails, and the retried request stores (and points at) a fresh key.
    async fn put_approval_pointers(&self, a: &NewApproval) -> Result<(), StoreError> {
        let put = |of: &str| {
            let pk = pointer_key(of);
            let mut item = Self::key(&pk);
            item.insert("key".into(), s(&a.key));
            item.insert("execution".into(), s(&a.execution));
            item.insert(
                TTL_ATTRIBUTE.into(),
                n(a.expires_at.timestamp() + 24 * 3600),
            );
            async move {
                self.client()
                    .put_item()
                    .table_name(self.table())
                    .set_item(Some(item))
                    .send()
                    .await
                    .map(|_| ())
                    .map_err(|e| call_error("PutItem", &pk, e))
            }
        };
        tokio::try_join!(put(&a.execution), put(&a.incident))?;
        Ok(())
    }

    /// The approval `which` names, without its task token. `Ok(None)`: no
    /// such key, or no approval was ever asked for that execution or incident.
    pub async fn approval(
        &self,
        which: &ApprovalSelector,
    ) -> Result<Option<ApprovalRecord>, StoreError> {
        let key = match which {
            ApprovalSelector::Key(k) => k.clone(),
            ApprovalSelector::Execution(of) | ApprovalSelector::Incident(of) => {
                let pk = pointer_key(of);
                match self.get(&pk).await? {
                    Some(item) => Attrs::new(&pk, &item).s("key")?,
                    None => return Ok(None),
                }
            }
        };
        let pk = approval_key(&key);
        let Some(item) = self.get(&pk).await? else {
            return Ok(None);
        };
        let a = Attrs::new(&pk, &item);
        // A pointer names the key its own execution or incident asked with;
        // anything else is not the approval the operator asked for.
        let (execution, incident) = (a.s("execution")?, a.s("incident")?);
        match which {
            ApprovalSelector::Execution(e) if *e != execution => return Ok(None),
            ApprovalSelector::Incident(i) if *i != incident => return Ok(None),
            _ => {}
        }
        let decision = match a.opt_s("decision")?.as_deref() {
            Some("approve") => Some(Decision::Approve),
            Some("reject") => Some(Decision::Reject),
            _ => None,
        };
        let decided = match decision {
            Some(d) => Some((d, a.s("decided_by")?, a.time_ms("decided_ms")?)),
            None => None,
        };
        Ok(Some(ApprovalRecord {
            key,
            execution,
            incident,
            requested_at: a.time_ms("requested_ms")?,
            expires_at: a.time_ms("expires_ms")?,
            question: a.opt_s("question")?.unwrap_or_default(),
            data_loss: match item.get("data_loss") {
                Some(AttributeValue::Bool(b)) => *b,
                _ => false,
            },
            decided,
            delivered_at: a.opt_time_ms("delivered_ms")?,
            delivered_by: a.opt_s("delivered_by")?,
            message: match (
                a.opt_s("slack_channel")?,
                a.opt_s("slack_ts")?,
                a.opt_s("slack_blocks")?,
            ) {
                (Some(channel), Some(ts), Some(blocks)) => Some(PostedQuestion {
                    channel,
                    ts,
                    blocks,
                }),
                _ => None,
            },
        }))
    }

    /// Record where the question was posted, so a decision made without
    /// Slack can update the message. Only on a stored key; never changes
    /// anything else about it.
    pub async fn set_approval_message(
        &self,
        key: &str,
        posted: &PostedQuestion,
    ) -> Result<(), StoreError> {
        let pk = approval_key(key);
        self.client()
            .update_item()
            .table_name(self.table())
            .set_key(Some(Self::key(&pk)))
            .update_expression("SET slack_channel = :c, slack_ts = :t, slack_blocks = :b")
            .condition_expression("attribute_exists(pk)")
            .expression_attribute_values(":c", s(&posted.channel))
            .expression_attribute_values(":t", s(&posted.ts))
            .expression_attribute_values(":b", s(&posted.blocks))
            .send()
            .await
            .map(|_| ())
            .map_err(|e| call_error("UpdateItem", &pk, e))
    }

    /// Consume `key` once: only a pending, unexpired key moves to decided.
    pub async fn consume_approval(
        &self,
        key: &str,
        decision: Decision,
        user_id: &str,
        now: DateTime<Utc>,
    ) -> Result<ConsumeOutcome, StoreError> {
        let pk = approval_key(key);
        let res = self
            .client()
            .update_item()
            .table_name(self.table())
            .set_key(Some(Self::key(&pk)))
            .update_expression(
                "SET #st = :decided, decision = :d, decided_by = :u, decided_ms = :now",
            )
            .condition_expression("attribute_exists(pk) AND #st = :pending AND expires_ms > :now")
            .expression_attribute_names("#st", "status")
            .expression_attribute_values(":decided", s(decision.status()))
            .expression_attribute_values(":d", s(decision.as_str()))
            .expression_attribute_values(":u", s(user_id))
            .expression_attribute_values(":now", ms(now))
            .expression_attribute_values(":pending", s("pending"))
            .return_values(ReturnValue::AllNew)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        match res {
            Ok(out) => {
                let item = out.attributes.unwrap_or_default();
                let a = Attrs::new(&pk, &item);
                Ok(ConsumeOutcome::Consumed(ConsumedApproval::from_attrs(&a)?))
            }
            Err(e) => match conditional_old(&e) {
                Some(None) => Ok(ConsumeOutcome::Unknown),
                Some(Some(old)) => refusal(&pk, old, now),
                None => Err(call_error("UpdateItem", &pk, e)),
            },
        }
    }

    /// Record that the decision reached Step Functions (a definitive answer),
    /// so a repeated click is only told who decided. `sent_by` is who sent
    /// it: the decider `user_id`, or another session of the same CLI role
    /// that re-sent a decision whose first send never answered (the first
    /// delivery is kept).
    pub async fn mark_approval_delivered(
        &self,
        key: &str,
        user_id: &str,
        sent_by: &str,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let pk = approval_key(key);
        let res = self
            .client()
            .update_item()
            .table_name(self.table())
            .set_key(Some(Self::key(&pk)))
            .update_expression(
                "SET delivered_ms = if_not_exists(delivered_ms, :now), delivered_by = if_not_exists(delivered_by, :by)",
            )
            .condition_expression("attribute_exists(pk) AND decided_by = :u")
            .expression_attribute_values(":u", s(user_id))
            .expression_attribute_values(":by", s(sent_by))
            .expression_attribute_values(":now", ms(now))
            .send()
            .await;
        match res {
            Ok(_) => Ok(()),
            Err(e) => match conditional_old(&e) {
                Some(_) => Ok(()), // not this person's decision: nothing to mark
                None => Err(call_error("UpdateItem", &pk, e)),
            },
        }
    }

    /// Undo one consumption whose decision never reached Step Functions, so
    /// the person can click again. Only the exact consumption (same user, same
    /// time), never someone else's decision, and never one known to have
    /// been delivered (a re-send of the same decision may have delivered it
    /// meanwhile): fence and promote act only on what the key records.
    pub async fn release_approval(
        &self,
        key: &str,
        user_id: &str,
        consumed_at: DateTime<Utc>,
    ) -> Result<ReleaseApprovalOutcome, StoreError> {
        let pk = approval_key(key);
        let res = self
            .client()
            .update_item()
            .table_name(self.table())
            .set_key(Some(Self::key(&pk)))
            .update_expression("SET #st = :pending REMOVE decision, decided_by, decided_ms")
            .condition_expression(
                "attribute_exists(pk) AND #st <> :pending AND decided_by = :u AND decided_ms = :at AND attribute_not_exists(delivered_ms)",
            )
            .expression_attribute_names("#st", "status")
            .expression_attribute_values(":pending", s("pending"))
            .expression_attribute_values(":u", s(user_id))
            .expression_attribute_values(":at", ms(consumed_at))
            .send()
            .await;
        match res {
            Ok(_) => Ok(ReleaseApprovalOutcome::Released),
            Err(e) => match conditional_old(&e) {
                Some(_) => Ok(ReleaseApprovalOutcome::NotOurs),
                None => Err(call_error("UpdateItem", &pk, e)),
            },
        }
    }
}

fn refusal(pk: &str, old: &Item, now: DateTime<Utc>) -> Result<ConsumeOutcome, StoreError> {
    let a = Attrs::new(pk, old);
    let decision = match a.opt_s("decision")?.as_deref() {
        Some("approve") => Some(Decision::Approve),
        Some("reject") => Some(Decision::Reject),
        _ => None,
    };
    if let Some(decision) = decision {
        let undelivered = match a.opt_time_ms("delivered_ms")? {
            Some(_) => None,
            None => Some(ConsumedApproval::from_attrs(&a)?),
        };
        return Ok(ConsumeOutcome::AlreadyDecided {
            decision,
            by: a.s("decided_by")?,
            at: a.time_ms("decided_ms")?,
            undelivered,
        });
    }
    let expires = a.time_ms("expires_ms")?;
    if expires <= now {
        return Ok(ConsumeOutcome::Expired { at: expires });
    }
    // Status is neither pending nor decided: treat as unknown rather than guess.
    Ok(ConsumeOutcome::Unknown)
}
