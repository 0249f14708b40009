//! Slack: request signing, interaction payloads, Block Kit messages, the Web API.
//!
//! - [`signing`]: verify Slack's v0 request signatures (and sign, for tests and drills).
//! - [`interaction`]: a signed form body → a checked [`interaction::ApprovalDecision`].
//! - [`message`]: the Block Kit approval request, the "decided by" replacement, ephemeral notes.
//! - [`api`]: `chat.postMessage` and `response_url`, with retries and bounded timeouts.
//! - [`secrets`]: the bot token and signing secret from Secrets Manager, cached, never printed.
//! - [`stand_in`]: a loopback Slack that records calls, for tests and drills.

pub mod api;
pub mod interaction;
pub mod message;
pub mod secrets;
pub mod signing;
pub mod stand_in;

#[cfg(test)]
pub(crate) mod fixtures;
