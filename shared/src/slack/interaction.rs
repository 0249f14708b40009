//! Slack interaction requests → a checked [`ApprovalDecision`].
//!
//! Slack POSTs `application/x-www-form-urlencoded` with one field, `payload`,
//! holding a JSON `block_actions` document. Every way that can be wrong is
//! its own [`InteractionError`] (HTTP 400). Parse only after the signature
//! has been verified. The payload also carries Slack's legacy verification
//! token, which is never read, kept or logged.

use super::message::{ACTION_APPROVE, ACTION_APPROVE_DATA_LOSS, ACTION_REJECT};
use crate::store::approval::Decision;
use serde::Deserialize;
use serde_json::Value;
use std::fmt;

/// A click on one of Handover's buttons, checked.
#[derive(Clone, PartialEq)]
pub struct ApprovalDecision {
    /// The approval key (button value).
    pub key: String,
    /// Approve or reject.
    pub decision: Decision,
    /// The click came from the "accept data loss" button.
    pub data_loss_acknowledged: bool,
    /// Slack user id of the person who clicked.
    pub user_id: String,
    /// Their Slack username, as Slack sent it.
    pub user_name: Option<String>,
    /// Their workspace.
    pub team_id: Option<String>,
    /// Where to update the message (a short-lived credential: not logged).
    pub response_url: String,
    /// The channel of the message.
    pub channel_id: Option<String>,
    /// The message's blocks, to rebuild it without buttons.
    pub original_blocks: Option<Vec<Value>>,
}

impl fmt::Debug for ApprovalDecision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApprovalDecision")
            .field("key", &self.key)
            .field("decision", &self.decision)
            .field("data_loss_acknowledged", &self.data_loss_acknowledged)
            .field("user_id", &self.user_id)
            .field("team_id", &self.team_id)
            .field("response_url", &"<redacted>")
            .finish_non_exhaustive()
    }
}

/// Why an interaction request is not a Handover button click.
#[derive(Debug, thiserror::Error)]
pub enum InteractionError {
    /// The body is not a form (wrong or missing Content-Type).
    #[error("body is not application/x-www-form-urlencoded (Content-Type {0:?})")]
    NotFormEncoded(Option<String>),
    /// The body is not UTF-8.
    #[error("body is not UTF-8")]
    NotUtf8,
    /// No `payload` field in the form.
    #[error("form has no payload field")]
    MissingPayload,
    /// More than one `payload` field.
    #[error("form has {0} payload fields")]
    RepeatedPayload(usize),
    /// `payload` is not JSON.
    #[error("payload is not JSON")]
    PayloadNotJson(#[source] serde_json::Error),
    /// Not a `block_actions` interaction (a shortcut, a modal, …).
    #[error("payload type is {0:?}, expected \"block_actions\"")]
    NotBlockActions(String),
    /// A required field is missing or has the wrong type.
    #[error("payload{path}: {problem}")]
    Shape {
        /// JSON path, e.g. ` at user.id`.
        path: String,
        /// What is wrong.
        problem: String,
    },
    /// The click carries no action, or several.
    #[error("payload has {0} actions, expected exactly 1")]
    ActionCount(usize),
    /// An action Handover did not put there.
    #[error("unknown action_id {0:?}")]
    UnknownAction(String),
    /// The button value is not an approval key.
    #[error("button value is not an approval key")]
    BadKey,
    /// The response_url is not an https URL (or http on loopback).
    #[error("response_url is not an https URL")]
    BadResponseUrl,
}

#[derive(Deserialize)]
struct Payload {
    user: User,
    #[serde(default)]
    team: Option<Team>,
    response_url: String,
    actions: Vec<Action>,
    #[serde(default)]
    channel: Option<Channel>,
    #[serde(default)]
    message: Option<Message>,
}

#[derive(Deserialize)]
struct User {
    id: String,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    team_id: Option<String>,
}

#[derive(Deserialize)]
struct Team {
    id: String,
}

#[derive(Deserialize)]
struct Channel {
    id: String,
}

#[derive(Deserialize)]
struct Message {
    #[serde(default)]
    blocks: Option<Vec<Value>>,
}

#[derive(Deserialize)]
struct Action {
    action_id: String,
    #[serde(default)]
    value: Option<String>,
}

/// Parse a request body with its Content-Type into a decision.
pub fn parse(
    content_type: Option<&str>,
    body: &[u8],
) -> Result<ApprovalDecision, InteractionError> {
    let is_form = content_type
        .and_then(|c| c.split(';').next())
        .is_some_and(|m| {
            m.trim()
                .eq_ignore_ascii_case("application/x-www-form-urlencoded")
        });
    if !is_form {
        return Err(InteractionError::NotFormEncoded(
            content_type.map(str::to_owned),
        ));
    }
    std::str::from_utf8(body).map_err(|_| InteractionError::NotUtf8)?;
    let payloads: Vec<String> = form_urlencoded::parse(body)
        .filter(|(k, _)| k == "payload")
        .map(|(_, v)| v.into_owned())
        .collect();
    let payload = match payloads.as_slice() {
        [] => return Err(InteractionError::MissingPayload),
        [one] => one,
        many => return Err(InteractionError::RepeatedPayload(many.len())),
    };
    let value: Value = serde_json::from_str(payload).map_err(InteractionError::PayloadNotJson)?;
    match value.get("type").and_then(Value::as_str) {
        Some("block_actions") => {}
        Some(other) => return Err(InteractionError::NotBlockActions(other.to_owned())),
        None => {
            return Err(InteractionError::Shape {
                path: " at type".into(),
                problem: "missing".into(),
            });
        }
    }
    let p: Payload = serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        InteractionError::Shape {
            path: if path == "." {
                String::new()
            } else {
                format!(" at {path}")
            },
            problem: e.into_inner().to_string(),
        }
    })?;
    let [action] = p.actions.as_slice() else {
        return Err(InteractionError::ActionCount(p.actions.len()));
    };
    let (decision, data_loss_acknowledged) = match action.action_id.as_str() {
        ACTION_APPROVE => (Decision::Approve, false),
        ACTION_APPROVE_DATA_LOSS => (Decision::Approve, true),
        ACTION_REJECT => (Decision::Reject, false),
        other => return Err(InteractionError::UnknownAction(other.to_owned())),
    };
    let key = action
        .value
        .clone()
        .filter(|k| is_key(k))
        .ok_or(InteractionError::BadKey)?;
    if !acceptable_response_url(&p.response_url) {
        return Err(InteractionError::BadResponseUrl);
    }
    if p.user.id.trim().is_empty() {
        return Err(InteractionError::Shape {
            path: " at user.id".into(),
            problem: "empty".into(),
        });
    }
    Ok(ApprovalDecision {
        key,
        decision,
        data_loss_acknowledged,
        team_id: p.team.map(|t| t.id).or(p.user.team_id),
        user_id: p.user.id,
        user_name: p.user.username,
        response_url: p.response_url,
        channel_id: p.channel.map(|c| c.id),
        original_blocks: p.message.and_then(|m| m.blocks),
    })
}

/// Approval keys are URL-safe base64 of at least 128 bits.
pub fn is_key(k: &str) -> bool {
    (16..=64).contains(&k.len())
        && k.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Slack's response URLs are https. Plain http is accepted on loopback only,
/// where tests and drills run their Slack stand-in.
fn acceptable_response_url(raw: &str) -> bool {
    let Ok(url) = reqwest::Url::parse(raw) else {
        return false;
    };
    match url.scheme() {
        "https" => url.host().is_some(),
        "http" => url.host_str().is_some_and(|h| {
            h == "localhost"
                || h.trim_matches(['[', ']'])
                    .parse::<std::net::IpAddr>()
                    .is_ok_and(|ip| ip.is_loopback())
        }),
        _ => false,
    }
}

#[cfg(test)]
#[path = "interaction_tests.rs"]
mod tests;
