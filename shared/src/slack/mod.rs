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
pub mod scopes;
pub mod secrets;
pub mod signing;
pub mod stand_in;

#[cfg(test)]
pub(crate) mod fixtures;

/// Post `text` and `blocks` to the plan's channel with the bot token read
/// from Secrets Manager: `posted <ts>`, or why not (never fatal to callers
/// that only notify).
pub async fn post_to_channel<R: secrets::SecretReader + Sync>(
    api: &api::SlackApi,
    reader: &R,
    plan: &crate::plan::Plan,
    text: &str,
    blocks: &[serde_json::Value],
) -> Result<String, String> {
    let token = secrets::read_slack(
        reader,
        &plan.slack.bot_token_secret_arn,
        secrets::SlackSecret::BotToken,
    )
    .await
    .map_err(|e| crate::error::chain(&e))?;
    api.post_message(&token, &plan.slack.channel, text, blocks)
        .await
        .map(|posted| format!("posted {}", posted.ts))
        .map_err(|e| crate::error::chain(&e))
}
