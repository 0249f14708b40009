//! A small Slack Web API client: `chat.postMessage` with the bot token, and
//! POSTs to an interaction's `response_url`.
//!
//! The base URL comes from `SLACK_API_BASE` (default `https://slack.com/api`)
//! so tests and drills point it at a loopback stand-in. Calls that can
//! succeed later (HTTP 429, 5xx, network errors, Slack's `ratelimited` and
//! `internal_error`) are retried with exponential backoff, honouring
//! `Retry-After`; every attempt has its own timeout.

use super::secrets::Secret;
use crate::error::chain;
use reqwest::header::{AUTHORIZATION, HeaderValue, RETRY_AFTER};
use serde_json::{Value, json};
use std::time::Duration;
use tracing::{instrument, warn};

/// Slack's public Web API.
pub const DEFAULT_API_BASE: &str = "https://slack.com/api";

/// How hard to try.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included.
    pub attempts: u32,
    /// Wait before the second attempt; it doubles each time.
    pub first_backoff: Duration,
    /// Longest wait between attempts (also caps `Retry-After`).
    pub max_backoff: Duration,
    /// Timeout of one attempt.
    pub attempt_timeout: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            attempts: 4,
            first_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(4),
            attempt_timeout: Duration::from_secs(5),
        }
    }
}

/// A Slack call failed.
#[derive(Debug, thiserror::Error)]
pub enum SlackError {
    /// No answer: connection refused, TLS, timeout.
    #[error("slack {method}: no answer")]
    Network {
        /// `chat.postMessage` or `response_url`.
        method: &'static str,
        /// The transport error (without the URL).
        #[source]
        source: reqwest::Error,
    },
    /// An HTTP status other than 200.
    #[error("slack {method}: HTTP {status}")]
    Status {
        /// The call.
        method: &'static str,
        /// HTTP status.
        status: u16,
    },
    /// Slack answered `{"ok": false, "error": ...}`.
    #[error("slack {method}: {error}")]
    Api {
        /// The call.
        method: &'static str,
        /// Slack's error code, e.g. `channel_not_found`.
        error: String,
    },
    /// The answer was not what the API documents.
    #[error("slack {method}: unexpected answer: {problem}")]
    Answer {
        /// The call.
        method: &'static str,
        /// What was wrong.
        problem: String,
    },
    /// Every attempt failed; the last error is the source.
    #[error("slack {method}: gave up after {attempts} attempts")]
    Exhausted {
        /// The call.
        method: &'static str,
        /// Attempts made.
        attempts: u32,
        /// The last failure.
        #[source]
        last: Box<SlackError>,
    },
    /// The HTTP client could not be built.
    #[error("slack client")]
    Client(#[source] reqwest::Error),
}

impl SlackError {
    fn retryable(&self) -> bool {
        match self {
            SlackError::Network { .. } => true,
            SlackError::Status { status, .. } => *status == 429 || *status >= 500,
            SlackError::Api { error, .. } => matches!(
                error.as_str(),
                "ratelimited"
                    | "internal_error"
                    | "fatal_error"
                    | "service_unavailable"
                    | "request_timeout"
            ),
            _ => false,
        }
    }
}

/// Where a message landed.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Posted {
    /// Channel id.
    pub channel: String,
    /// Message timestamp (its id within the channel).
    pub ts: String,
}

/// The client. Build once per container; it keeps a connection pool.
#[derive(Debug, Clone)]
pub struct SlackApi {
    http: reqwest::Client,
    base: String,
    retry: RetryPolicy,
}

impl SlackApi {
    /// A client for the API at `base` (e.g. `https://slack.com/api`).
    pub fn new(base: impl Into<String>, retry: RetryPolicy) -> Result<Self, SlackError> {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(2))
            .redirect(reqwest::redirect::Policy::none())
            .user_agent("handover/1")
            .build()
            .map_err(SlackError::Client)?;
        Ok(Self {
            http,
            base: base.into().trim_end_matches('/').to_owned(),
            retry,
        })
    }

    /// `SLACK_API_BASE` or [`DEFAULT_API_BASE`], default retries.
    pub fn from_env() -> Result<Self, SlackError> {
        let base =
            crate::config::optional("SLACK_API_BASE").unwrap_or_else(|| DEFAULT_API_BASE.into());
        Self::new(base, RetryPolicy::default())
    }

    /// Post `blocks` (with `text` as the notification fallback) to `channel`.
    #[instrument(skip(self, token, text, blocks))]
    pub async fn post_message(
        &self,
        token: &Secret,
        channel: &str,
        text: &str,
        blocks: &[Value],
    ) -> Result<Posted, SlackError> {
        const METHOD: &str = "chat.postMessage";
        let body =
            json!({ "channel": channel, "text": text, "blocks": blocks, "unfurl_links": false });
        let answer = self.write(METHOD, token, &body, self.retry).await?;
        match (answer["channel"].as_str(), answer["ts"].as_str()) {
            (Some(channel), Some(ts)) => Ok(Posted {
                channel: channel.to_owned(),
                ts: ts.to_owned(),
            }),
            _ => Err(SlackError::Answer {
                method: METHOD,
                problem: "ok without channel and ts".into(),
            }),
        }
    }

    /// Replace the message `ts` in `channel` (the channel id
    /// `chat.postMessage` answered) with `blocks` and `text`
    /// (docs.slack.dev/reference/methods/chat.update), within `budget`.
    #[instrument(skip(self, token, text, blocks))]
    pub async fn update_message(
        &self,
        token: &Secret,
        channel: &str,
        ts: &str,
        text: &str,
        blocks: &[Value],
        budget: Duration,
    ) -> Result<(), SlackError> {
        let body = json!({ "channel": channel, "ts": ts, "text": text, "blocks": blocks });
        let policy = RetryPolicy {
            attempts: 2,
            first_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(200),
            attempt_timeout: self.retry.attempt_timeout.min(budget),
        };
        self.write("chat.update", token, &body, policy)
            .await
            .map(|_| ())
    }

    /// A write method of the Web API: a JSON body with the bot token as
    /// bearer; the whole answer when `ok`.
    async fn write(
        &self,
        method: &'static str,
        token: &Secret,
        body: &Value,
        policy: RetryPolicy,
    ) -> Result<Value, SlackError> {
        let bearer = bearer(token, method)?;
        let url = format!("{}/{method}", self.base);
        let (url, bearer) = (&url, &bearer);
        self.with_retries(method, policy, || async move {
            let resp = self
                .http
                .post(url)
                .header(AUTHORIZATION, bearer.clone())
                .json(body)
                .timeout(policy.attempt_timeout)
                .send()
                .await
                .map_err(|e| network(method, e))?;
            let retry_after = retry_after(&resp);
            let status = resp.status().as_u16();
            if status != 200 {
                return Err((SlackError::Status { method, status }, retry_after));
            }
            let answer: Value = resp.json().await.map_err(|e| network(method, e))?;
            if answer["ok"] != Value::Bool(true) {
                let error = api_error(&answer);
                return Err((SlackError::Api { method, error }, retry_after));
            }
            Ok(answer)
        })
        .await
    }

    /// Call a read method of the Web API (`auth.test`, `conversations.info`,
    /// `users.info`) with form-encoded `args` and the bot token as bearer,
    /// as the Web API documents for every method; the whole answer when
    /// `ok`. Reads are checks, not the incident's path: two attempts of at
    /// most 3 s each, so a Slack outage costs readiness seconds, not a minute.
    #[instrument(skip(self, token))]
    pub async fn read(
        &self,
        token: &Secret,
        method: &'static str,
        args: &[(&str, &str)],
    ) -> Result<Value, SlackError> {
        let bearer = bearer(token, method)?;
        let url = format!("{}/{method}", self.base);
        let form = form_urlencoded::Serializer::new(String::new())
            .extend_pairs(args)
            .finish();
        let (url, bearer, form) = (&url, &bearer, &form);
        let policy = RetryPolicy {
            attempts: 2,
            first_backoff: Duration::from_millis(200),
            max_backoff: Duration::from_secs(1),
            attempt_timeout: self.retry.attempt_timeout.min(Duration::from_secs(3)),
        };
        self.with_retries(method, policy, || async move {
            let resp = self
                .http
                .post(url)
                .header(AUTHORIZATION, bearer.clone())
                .header(
                    reqwest::header::CONTENT_TYPE,
                    "application/x-www-form-urlencoded",
                )
                .body(form.clone())
                .timeout(policy.attempt_timeout)
                .send()
                .await
                .map_err(|e| network(method, e))?;
            let retry_after = retry_after(&resp);
            let status = resp.status().as_u16();
            if status != 200 {
                return Err((SlackError::Status { method, status }, retry_after));
            }
            let answer: Value = resp.json().await.map_err(|e| network(method, e))?;
            if answer["ok"] != Value::Bool(true) {
                let error = api_error(&answer);
                return Err((SlackError::Api { method, error }, retry_after));
            }
            Ok(answer)
        })
        .await
    }

    /// POST `message` to an interaction's `response_url` (update or replace
    /// the original, or an ephemeral note), all within `budget`.
    #[instrument(skip_all)]
    pub async fn respond(
        &self,
        response_url: &str,
        message: &Value,
        budget: Duration,
    ) -> Result<(), SlackError> {
        const METHOD: &str = "response_url";
        let policy = RetryPolicy {
            attempts: 2,
            first_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(200),
            attempt_timeout: budget,
        };
        let call = self.with_retries(METHOD, policy, || async move {
            let resp = self
                .http
                .post(response_url)
                .json(message)
                .timeout(budget)
                .send()
                .await
                .map_err(|e| network(METHOD, e))?;
            let retry_after = retry_after(&resp);
            match resp.status().as_u16() {
                200 => Ok(()),
                status => Err((
                    SlackError::Status {
                        method: METHOD,
                        status,
                    },
                    retry_after,
                )),
            }
        });
        match tokio::time::timeout(budget, call).await {
            Ok(r) => r,
            Err(_) => Err(SlackError::Status {
                method: METHOD,
                status: 504,
            }),
        }
    }

    async fn with_retries<T, F, Fut>(
        &self,
        method: &'static str,
        policy: RetryPolicy,
        mut attempt: F,
    ) -> Result<T, SlackError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, (SlackError, Option<Duration>)>>,
    {
        let mut backoff = policy.first_backoff;
        let mut n = 0;
        loop {
            n += 1;
            let (err, retry_after) = match attempt().await {
                Ok(v) => return Ok(v),
                Err(e) => e,
            };
            if !err.retryable() {
                return Err(err);
            }
            if n >= policy.attempts {
                return Err(SlackError::Exhausted {
                    method,
                    attempts: n,
                    last: Box::new(err),
                });
            }
            let wait = retry_after.unwrap_or(backoff).min(policy.max_backoff);
            warn!(method, attempt = n, wait_ms = wait.as_millis() as u64, error = %chain(&err), "slack call failed; retrying");
            tokio::time::sleep(wait).await;
            backoff = (backoff * 2).min(policy.max_backoff);
        }
    }
}

/// Slack's error code, with the scopes it needed when it was
/// `missing_scope` (the app was installed without them).
fn api_error(answer: &Value) -> String {
    let error = answer["error"].as_str().unwrap_or("unknown");
    match answer["needed"].as_str() {
        Some(needed) if error == "missing_scope" => format!(
            "missing_scope (needed: {needed}; the app has: {}; reinstall it from infra/slack-manifest.json)",
            answer["provided"].as_str().unwrap_or("")
        ),
        _ => error.to_owned(),
    }
}

/// The bot token as an `Authorization` value, marked sensitive (never logged).
fn bearer(token: &Secret, method: &'static str) -> Result<HeaderValue, SlackError> {
    let mut v = HeaderValue::from_str(&format!("Bearer {}", token.expose())).map_err(|_| {
        SlackError::Answer {
            method,
            problem: "the bot token is not a valid header value".into(),
        }
    })?;
    v.set_sensitive(true);
    Ok(v)
}

/// A transport error with the URL removed: a `response_url` is a credential.
fn network(method: &'static str, e: reqwest::Error) -> (SlackError, Option<Duration>) {
    (
        SlackError::Network {
            method,
            source: e.without_url(),
        },
        None,
    )
}

fn retry_after(resp: &reqwest::Response) -> Option<Duration> {
    resp.headers()
        .get(RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse::<u64>()
        .ok()
        .map(Duration::from_secs)
}

#[cfg(test)]
#[path = "api_tests.rs"]
mod tests;
