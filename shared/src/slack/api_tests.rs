use super::*;
use crate::slack::stand_in::{Fault, SlackStandIn};

fn fast() -> RetryPolicy {
    RetryPolicy {
        attempts: 3,
        first_backoff: Duration::from_millis(10),
        max_backoff: Duration::from_millis(50),
        attempt_timeout: Duration::from_secs(2),
    }
}

fn token() -> Secret {
    Secret::new("xoxb-test-bot-token")
}

#[tokio::test]
async fn post_message_sends_the_bot_token_channel_and_blocks() {
    let slack = SlackStandIn::start().await.unwrap();
    let api = SlackApi::new(slack.api_base(), fast()).unwrap();
    let blocks = vec![json!({"type": "section", "text": {"type": "mrkdwn", "text": "hi"}})];
    let posted = api
        .post_message(&token(), "C0123456789", "fallback", &blocks)
        .await
        .unwrap();
    assert_eq!(posted.channel, "C0123456789");
    let calls = slack.messages();
    assert_eq!(calls.len(), 1);
    assert_eq!(
        calls[0].authorization.as_deref(),
        Some("Bearer xoxb-test-bot-token")
    );
    assert_eq!(calls[0].body["channel"], "C0123456789");
    assert_eq!(calls[0].body["text"], "fallback");
    assert_eq!(calls[0].body["blocks"], json!(blocks));
}

#[tokio::test]
async fn rate_limits_and_server_errors_are_retried_with_backoff() {
    let slack = SlackStandIn::start().await.unwrap();
    slack.fail_next([Fault::RateLimited(0), Fault::Status(503)]);
    let api = SlackApi::new(slack.api_base(), fast()).unwrap();
    api.post_message(&token(), "C1", "t", &[]).await.unwrap();
    let statuses: Vec<u16> = slack.calls().iter().map(|c| c.status).collect();
    assert_eq!(statuses, [429, 503, 200]);
}

#[tokio::test]
async fn slack_internal_errors_are_retried_but_permanent_ones_are_not() {
    let slack = SlackStandIn::start().await.unwrap();
    slack.fail_next([Fault::Api("internal_error".into())]);
    let api = SlackApi::new(slack.api_base(), fast()).unwrap();
    api.post_message(&token(), "C1", "t", &[]).await.unwrap();
    assert_eq!(slack.calls().len(), 2);

    slack.fail_next([Fault::Api("channel_not_found".into())]);
    let err = api
        .post_message(&token(), "C1", "t", &[])
        .await
        .unwrap_err();
    assert!(
        matches!(err, SlackError::Api { ref error, .. } if error == "channel_not_found"),
        "{err}"
    );
    assert_eq!(slack.calls().len(), 3, "no retry of a permanent error");
}

#[tokio::test]
async fn giving_up_says_how_often_it_tried_and_why() {
    let slack = SlackStandIn::start().await.unwrap();
    slack.fail_next([Fault::Status(500), Fault::Status(502), Fault::Status(503)]);
    let api = SlackApi::new(slack.api_base(), fast()).unwrap();
    let err = api
        .post_message(&token(), "C1", "t", &[])
        .await
        .unwrap_err();
    assert!(
        matches!(err, SlackError::Exhausted { attempts: 3, .. }),
        "{err}"
    );
    assert_eq!(
        crate::error::chain(&err),
        "slack chat.postMessage: gave up after 3 attempts: slack chat.postMessage: HTTP 503"
    );
}

#[tokio::test]
async fn an_unreachable_slack_is_a_network_error_without_the_url() {
    // A port nobody listens on: bind, learn the port, close.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let api = SlackApi::new(format!("http://127.0.0.1:{port}/api"), fast()).unwrap();
    let err = api
        .respond(
            &format!("http://127.0.0.1:{port}/actions/T/1/secret-part"),
            &json!({}),
            Duration::from_millis(500),
        )
        .await
        .unwrap_err();
    let text = crate::error::chain(&err);
    assert!(!text.contains("secret-part"), "{text}");
}

#[tokio::test]
async fn respond_posts_the_message_to_the_response_url() {
    let slack = SlackStandIn::start().await.unwrap();
    let api = SlackApi::new(slack.api_base(), fast()).unwrap();
    api.respond(
        &slack.response_url("1"),
        &json!({"replace_original": true, "text": "done"}),
        Duration::from_secs(1),
    )
    .await
    .unwrap();
    let r = slack.responses();
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].body["text"], "done");
    assert!(r[0].authorization.is_none(), "no bot token on response_url");
}

/// Slack answers a method the app's scopes do not cover with HTTP 200,
/// `missing_scope`, what it `needed` and what the token `provided`
/// (docs.slack.dev/reference/methods). The error names both, so the fix
/// is in the message; it is not retried.
#[tokio::test]
async fn a_method_outside_the_apps_scopes_fails_naming_the_scope() {
    let slack = SlackStandIn::start().await.unwrap();
    slack.grant_only(&["chat:write"]);
    let api = SlackApi::new(slack.api_base(), fast()).unwrap();
    let err = api
        .read(&token(), "users.info", &[("user", "U1")])
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("missing_scope (needed: users:read; the app has: chat:write"),
        "{err}"
    );
    assert_eq!(slack.calls().len(), 1, "not retried");
    // auth.test needs no scope, and a post needs only chat:write.
    api.read(&token(), "auth.test", &[]).await.unwrap();
    api.post_message(&token(), "C1", "t", &[]).await.unwrap();
}
