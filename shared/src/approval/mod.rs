//! Human approval through Slack, both halves.
//!
//! ```text
//! RequestApproval (.waitForTaskToken) ─ approval fn ─ request::Requester
//!     key = 128 random bits ─ APPROVAL#key → token (conditional put, expiry)
//!     Block Kit message, buttons value = key ─ chat.postMessage
//! click ─ API Gateway ─ slack fn ─ decide::Decider
//!     verify signature (401) → parse (400) → allow-list (403)
//!     → consume key once → SendTaskSuccess / SendTaskFailure(Handover.Rejected)
//!     → response_url: "decided by X at T", buttons removed
//! handover approve ─ SigV4 ─ API Gateway (AWS_IAM) ─ slack fn ─ iam::IamDecider
//!     principal from API Gateway (401 without) → the run's cli_approvers (403)
//!     → the same consume-once and resume (decide::Apply)
//! ```
//!
//! The task token only travels from the event to the table and from the
//! table to the callback. It is wrapped in [`TaskToken`], whose `Debug` is
//! redacted, and never appears in a message, a log line or an error.

pub mod callback;
pub mod decide;
pub mod iam;
pub mod request;

pub use callback::{CallbackError, SfnCallback, TaskCallback};
pub use decide::{Decider, Outcome, SignedRequest};
pub use request::{ApprovalRequested, ApprovalTask, RequestError, Requester};

use crate::config::{ConfigError, required};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::Deserialize;
use std::fmt;

/// A Step Functions task token. `Debug` prints `<redacted>`; there is no `Display`.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct TaskToken(String);

impl TaskToken {
    /// Wrap a token read from the table.
    pub fn new(token: impl Into<String>) -> Self {
        Self(token.into())
    }

    /// The value, for the SendTask* call and the table only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for TaskToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TaskToken(<redacted>)")
    }
}

/// Bytes of randomness in an approval key (128 bits).
pub const KEY_BYTES: usize = 16;

/// A fresh approval key: 128 random bits, URL-safe base64 (22 characters).
pub fn new_key() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; KEY_BYTES];
    getrandom::fill(&mut bytes)?;
    Ok(URL_SAFE_NO_PAD.encode(bytes))
}

/// What both functions read from the environment at cold start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// `TABLE_NAME`: the Handover table.
    pub table: String,
    /// `AWS_REGION`: the function's (and the table's and state machine's) Region.
    pub region: String,
}

impl Config {
    /// Read `TABLE_NAME` and `AWS_REGION`.
    pub fn from_env() -> Result<Self, ConfigError> {
        Ok(Self {
            table: required("TABLE_NAME")?,
            region: required("AWS_REGION")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_128_bit_url_safe_and_distinct() {
        let a = new_key().unwrap();
        let b = new_key().unwrap();
        assert_ne!(a, b);
        assert_eq!(a.len(), 22);
        assert!(crate::slack::interaction::is_key(&a), "{a}");
        assert_eq!(URL_SAFE_NO_PAD.decode(&a).unwrap().len(), 16);
    }

    #[test]
    fn a_token_never_prints() {
        let t: TaskToken = serde_json::from_str("\"AAAA-secret-token\"").unwrap();
        assert_eq!(format!("{t:?}"), "TaskToken(<redacted>)");
        assert_eq!(t.expose(), "AAAA-secret-token");
    }
}
