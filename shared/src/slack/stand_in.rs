//! A loopback Slack for tests and drills, and clicks signed exactly as Slack
//! signs them.
//!
//! [`SlackStandIn`] serves `POST /api/chat.postMessage`, `chat.update` (of a
//! message it posted), the read methods
//! readiness calls (`auth.test`, `conversations.info`, `users.info`, shaped
//! as docs.slack.dev/reference/methods documents them) and
//! `POST /actions/...` (response URLs) on a free 127.0.0.1 port, records every
//! request, and can be told to fail the next calls (HTTP status, 429 with
//! `Retry-After`, or a Slack `{"ok": false}` error). It grants the bot the
//! scopes of the repository's app manifest ([`super::scopes`]) and answers
//! a method those do not cover with `missing_scope`, as Slack does.
//! [`serve`] is the small HTTP/1.1 server underneath; tests reuse it for
//! other loopback endpoints.

use super::message::BLOCK_ACTIONS;
use super::signing;
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// One HTTP request as the stand-in received it.
#[derive(Debug, Clone)]
pub struct HttpRequest {
    /// `POST`, `GET`, …
    pub method: String,
    /// Path and query.
    pub path: String,
    /// Header names (lower case) and values.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

impl HttpRequest {
    /// A header's value (name compared case-insensitively).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// An answer.
#[derive(Debug, Clone)]
pub struct HttpResponse {
    /// HTTP status.
    pub status: u16,
    /// Extra headers.
    pub headers: Vec<(String, String)>,
    /// JSON body.
    pub body: Value,
}

impl HttpResponse {
    /// `status` with a JSON body.
    pub fn json(status: u16, body: Value) -> Self {
        Self {
            status,
            headers: Vec::new(),
            body,
        }
    }
}

/// A running loopback server. Dropping it stops accepting connections.
#[derive(Debug)]
pub struct Server {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Serve `handler` on a free 127.0.0.1 port (one request per connection).
pub async fn serve<F, Fut>(handler: F) -> std::io::Result<Server>
where
    F: Fn(HttpRequest) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = HttpResponse> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr: SocketAddr = listener.local_addr()?;
    let handler = Arc::new(handler);
    let task = tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            let handler = handler.clone();
            tokio::spawn(async move {
                let _ = answer(sock, &*handler).await;
            });
        }
    });
    Ok(Server {
        url: format!("http://{addr}"),
        task,
    })
}

async fn answer<F, Fut>(mut sock: TcpStream, handler: &F) -> std::io::Result<()>
where
    F: Fn(HttpRequest) -> Fut,
    Fut: Future<Output = HttpResponse>,
{
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        let n = sock.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next().unwrap_or_default().split(' ');
    let (method, path) = (
        first.next().unwrap_or_default().to_owned(),
        first.next().unwrap_or_default().to_owned(),
    );
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let len: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end..].to_vec();
    while body.len() < len {
        let n = sock.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    let resp = handler(HttpRequest {
        method,
        path,
        headers,
        body,
    })
    .await;
    let body = resp.body.to_string();
    let mut out = format!(
        "HTTP/1.1 {} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
        resp.status,
        body.len()
    );
    for (k, v) in &resp.headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str("\r\n");
    out.push_str(&body);
    sock.write_all(out.as_bytes()).await?;
    sock.shutdown().await
}

/// A scripted failure for the next call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// Answer with this HTTP status.
    Status(u16),
    /// HTTP 429 with `Retry-After: seconds`.
    RateLimited(u64),
    /// HTTP 200 `{"ok": false, "error": ...}`.
    Api(String),
}

/// A request Slack received, with what it answered.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// Request path, e.g. `/api/chat.postMessage`.
    pub path: String,
    /// The `Authorization` header.
    pub authorization: Option<String>,
    /// The JSON body (`Null` if it was not JSON).
    pub body: Value,
    /// The HTTP status answered.
    pub status: u16,
}

#[derive(Default)]
struct State {
    calls: Vec<Recorded>,
    faults: VecDeque<Fault>,
    posted: u64,
    /// Channels the bot is not a member of.
    left: std::collections::BTreeSet<String>,
    /// Users deactivated in the workspace (`deleted: true`).
    deactivated: std::collections::BTreeSet<String>,
    /// Users the workspace does not know (`user_not_found`).
    unknown: std::collections::BTreeSet<String>,
    /// The bot token's scopes (the manifest's, unless a test narrows them).
    scopes: Vec<String>,
}

/// The bot's workspace and user, as `auth.test` answers them.
pub const STAND_IN_TEAM: &str = "T0TEAM0001";
/// The bot user's id.
pub const STAND_IN_BOT_USER: &str = "U0HANDOVERBOT";

/// The Slack stand-in.
pub struct SlackStandIn {
    server: Server,
    state: Arc<Mutex<State>>,
}

impl SlackStandIn {
    /// Start on a free loopback port.
    pub async fn start() -> std::io::Result<Self> {
        let state = Arc::new(Mutex::new(State {
            scopes: super::scopes::manifest_bot_scopes(),
            ..State::default()
        }));
        let shared = state.clone();
        let server = serve(move |req| {
            let state = shared.clone();
            async move { slack(&state, req) }
        })
        .await?;
        Ok(Self { server, state })
    }

    /// The value for `SLACK_API_BASE`.
    pub fn api_base(&self) -> String {
        format!("{}/api", self.server.url)
    }

    /// A response URL on this stand-in, like Slack's `hooks.slack.com/actions/...`.
    pub fn response_url(&self, id: &str) -> String {
        format!("{}/actions/T0TEAM0001/{id}/stand-in", self.server.url)
    }

    /// The bot leaves `channel` (conversations.info answers `is_member: false`).
    pub fn leave_channel(&self, channel: &str) {
        self.lock().left.insert(channel.to_owned());
    }

    /// Deactivate `user` (users.info answers `deleted: true`).
    pub fn deactivate_user(&self, user: &str) {
        self.lock().deactivated.insert(user.to_owned());
    }

    /// Forget `user` (users.info answers `user_not_found`).
    pub fn remove_user(&self, user: &str) {
        self.lock().unknown.insert(user.to_owned());
    }

    /// Install the app with only `scopes` (an older or hand-edited manifest).
    pub fn grant_only(&self, scopes: &[&str]) {
        self.lock().scopes = scopes.iter().map(|s| (*s).to_owned()).collect();
    }

    /// Fail the next calls, one fault per call, in order.
    pub fn fail_next(&self, faults: impl IntoIterator<Item = Fault>) {
        self.lock().faults.extend(faults);
    }

    /// Every request so far.
    pub fn calls(&self) -> Vec<Recorded> {
        self.lock().calls.clone()
    }

    /// Successful chat.postMessage calls.
    pub fn messages(&self) -> Vec<Recorded> {
        self.calls_to("/api/chat.postMessage")
    }

    /// Successful response_url calls.
    pub fn responses(&self) -> Vec<Recorded> {
        self.calls_to("/actions/")
    }

    fn calls_to(&self, prefix: &str) -> Vec<Recorded> {
        self.calls()
            .into_iter()
            .filter(|c| c.path.starts_with(prefix) && c.status == 200)
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn slack(state: &Mutex<State>, req: HttpRequest) -> HttpResponse {
    let mut s = state.lock().unwrap_or_else(|p| p.into_inner());
    let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
    let unscoped = missing_scope(&s.scopes, &req);
    let mut resp = match (s.faults.pop_front(), unscoped) {
        (Some(Fault::Status(code)), _) => {
            HttpResponse::json(code, json!({"ok": false, "error": "injected"}))
        }
        (Some(Fault::RateLimited(secs)), _) => HttpResponse {
            status: 429,
            headers: vec![("retry-after".into(), secs.to_string())],
            body: json!({"ok": false, "error": "ratelimited"}),
        },
        (Some(Fault::Api(error)), _) => {
            HttpResponse::json(200, json!({"ok": false, "error": error}))
        }
        (None, Some(refusal)) => refusal,
        (None, None) => answer_method(&mut s, &req, &body),
    };
    // Every Web API answer names the token's scopes (api.slack.com/scopes).
    if req.path.starts_with("/api/") {
        resp.headers
            .push(("x-oauth-scopes".into(), s.scopes.join(",")));
    }
    let authorization = req.header("authorization").map(str::to_owned);
    s.calls.push(Recorded {
        path: req.path,
        authorization,
        body,
        status: resp.status,
    });
    resp
}

/// The stand-in's answer to one method, shaped as Slack documents it.
fn answer_method(s: &mut State, req: &HttpRequest, body: &Value) -> HttpResponse {
    match req.path.as_str() {
        "/api/chat.postMessage" => {
            if req
                .header("authorization")
                .is_none_or(|a| !a.starts_with("Bearer "))
            {
                HttpResponse::json(200, json!({"ok": false, "error": "not_authed"}))
            } else {
                s.posted += 1;
                let ts = format!("1764511915.{:06}", s.posted);
                HttpResponse::json(
                    200,
                    json!({"ok": true, "channel": body["channel"], "ts": ts}),
                )
            }
        }
        // docs.slack.dev/reference/methods/chat.update: a message this
        // stand-in posted, by the channel id and ts it answered.
        "/api/chat.update" => {
            let posted = body["ts"]
                .as_str()
                .and_then(|ts| ts.strip_prefix("1764511915."))
                .and_then(|n| n.parse::<u64>().ok())
                .is_some_and(|n| (1..=s.posted).contains(&n));
            if req
                .header("authorization")
                .is_none_or(|a| !a.starts_with("Bearer "))
            {
                HttpResponse::json(200, json!({"ok": false, "error": "not_authed"}))
            } else if !posted {
                HttpResponse::json(200, json!({"ok": false, "error": "message_not_found"}))
            } else {
                HttpResponse::json(
                    200,
                    json!({"ok": true, "channel": body["channel"], "ts": body["ts"], "text": body["text"]}),
                )
            }
        }
        p if p.starts_with("/actions/") => HttpResponse::json(200, json!({"ok": true})),
        p if p.starts_with("/api/")
            && req
                .header("authorization")
                .is_none_or(|a| !a.starts_with("Bearer ")) =>
        {
            HttpResponse::json(200, json!({"ok": false, "error": "not_authed"}))
        }
        // docs.slack.dev/reference/methods/auth.test
        "/api/auth.test" => HttpResponse::json(
            200,
            json!({"ok": true, "url": "https://handover.slack.com/", "team": "Handover",
                   "user": "handover", "team_id": STAND_IN_TEAM, "user_id": STAND_IN_BOT_USER,
                   "bot_id": "B0HANDOVER", "is_enterprise_install": false}),
        ),
        // docs.slack.dev/reference/methods/conversations.info
        "/api/conversations.info" => {
            let channel = form_arg(&req.body, "channel").unwrap_or_default();
            if channel.is_empty() {
                HttpResponse::json(200, json!({"ok": false, "error": "channel_not_found"}))
            } else {
                HttpResponse::json(
                    200,
                    json!({"ok": true, "channel": {"id": channel, "name": "incidents",
                           "is_channel": true, "is_private": false, "is_archived": false,
                           "is_member": !s.left.contains(&channel)}}),
                )
            }
        }
        // docs.slack.dev/reference/methods/users.info
        "/api/users.info" => {
            let user = form_arg(&req.body, "user").unwrap_or_default();
            if user.is_empty() || s.unknown.contains(&user) {
                HttpResponse::json(200, json!({"ok": false, "error": "user_not_found"}))
            } else {
                HttpResponse::json(
                    200,
                    json!({"ok": true, "user": {"id": user, "team_id": STAND_IN_TEAM,
                           "name": format!("user-{user}"), "deleted": s.deactivated.contains(&user),
                           "is_bot": false}}),
                )
            }
        }
        _ => HttpResponse::json(404, json!({"ok": false, "error": "unknown_method"})),
    }
}

/// Slack's answer to a method the token's scopes do not cover
/// (docs.slack.dev/reference/methods, "missing_scope": HTTP 200 with the
/// scopes `needed` and the ones `provided`). A call without a bearer token
/// is answered `not_authed` first, as Slack does.
fn missing_scope(scopes: &[String], req: &HttpRequest) -> Option<HttpResponse> {
    let method = req.path.strip_prefix("/api/")?.split('?').next()?;
    req.header("authorization")?.strip_prefix("Bearer ")?;
    let needed = super::scopes::missing(method, scopes)?;
    Some(HttpResponse::json(
        200,
        json!({"ok": false, "error": "missing_scope", "needed": needed,
               "provided": scopes.join(",")}),
    ))
}

/// One argument of a form-encoded body.
fn form_arg(body: &[u8], name: &str) -> Option<String> {
    form_urlencoded::parse(body)
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
}

/// A click as Slack sends it: the form body of a `block_actions` payload for
/// `action_id` with value `key`, from `user_id` in `team_id`.
pub fn click_body(
    user_id: &str,
    team_id: &str,
    action_id: &str,
    key: &str,
    response_url: &str,
) -> String {
    let payload = json!({
        "type": "block_actions",
        "user": {"id": user_id, "username": format!("user-{user_id}"), "team_id": team_id},
        "team": {"id": team_id, "domain": "handover"},
        "api_app_id": "A0HANDOVER",
        "container": {"type": "message", "message_ts": "1764511915.000001", "is_ephemeral": false},
        "channel": {"id": "C0123456789", "name": "incidents"},
        "message": {"type": "message", "blocks": [{"type": "actions", "block_id": BLOCK_ACTIONS}]},
        "response_url": response_url,
        "actions": [{"type": "button", "action_id": action_id, "block_id": BLOCK_ACTIONS, "value": key}],
    });
    form_urlencoded::Serializer::new(String::new())
        .append_pair("payload", &payload.to_string())
        .finish()
}

/// The `X-Slack-Request-Timestamp` and `X-Slack-Signature` values for `body` at `timestamp`.
pub fn signed_headers(secret: &[u8], timestamp: i64, body: &[u8]) -> (String, String) {
    (
        timestamp.to_string(),
        signing::sign(secret, timestamp, body),
    )
}
