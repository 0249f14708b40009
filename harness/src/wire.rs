//! Exact-request tests on the wire, for what moto cannot serve (Aurora
//! global clusters, Bedrock Converse).
//!
//! [`Replay`] is the SDK's HTTP client: it records every request as it would
//! leave for AWS (method, path, headers, body) and answers each from a
//! [`Canned`] response written in the service's documented wire shape (the
//! RDS Query API's XML, Bedrock's JSON, their error headers). The client
//! config is the one the functions load ([`handover::aws::loader`]), so the
//! SDK's retries and timeouts are the production ones; only credentials are
//! static.
//!
//! Why not `aws-smithy-mocks`: its `test-util` features change the feature
//! set of every SDK crate for the test build, so the function binaries the
//! path tests and drills run had to be built a second time (about 270 s of
//! `make test` on 2 cores). A wire answer is also the closer fixture.

use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpClient,
    SharedHttpConnector,
};
use aws_smithy_runtime_api::client::orchestrator::{HttpRequest, HttpResponse};
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_runtime_api::http::StatusCode;
use aws_smithy_types::body::SdkBody;
use std::sync::{Arc, Mutex};

/// One request as it went out.
#[derive(Debug, Clone)]
pub struct Sent {
    /// `POST`, `GET`, …
    pub method: String,
    /// The full URI.
    pub uri: String,
    /// Header names (lower case) and values.
    pub headers: Vec<(String, String)>,
    /// The body as text.
    pub body: String,
}

impl Sent {
    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The form fields of a Query API body (`Action=…&Version=…&…`).
    pub fn form(&self) -> Vec<(String, String)> {
        form_urlencoded::parse(self.body.as_bytes())
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect()
    }

    /// One form field.
    pub fn field(&self, name: &str) -> Option<String> {
        self.form()
            .into_iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v)
    }

    /// The body as JSON (REST-JSON and JSON protocols).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or(serde_json::Value::Null)
    }
}

/// An answer, as the service sends it.
#[derive(Debug, Clone)]
pub struct Canned {
    /// HTTP status.
    pub status: u16,
    /// Headers.
    pub headers: Vec<(&'static str, String)>,
    /// Body.
    pub body: String,
}

impl Canned {
    /// 200 with an XML body (the Query protocol: RDS).
    pub fn xml(body: impl Into<String>) -> Self {
        Self {
            status: 200,
            headers: vec![("content-type", "text/xml".into())],
            body: body.into(),
        }
    }

    /// 200 with a JSON body.
    pub fn json(body: &serde_json::Value) -> Self {
        Self {
            status: 200,
            headers: vec![("content-type", "application/json".into())],
            body: body.to_string(),
        }
    }

    /// An error of a REST-JSON service: `status`, `x-amzn-ErrorType` naming
    /// it, and `{"message": …}`.
    pub fn json_error(status: u16, error_type: &str, message: &str) -> Self {
        Self {
            status,
            headers: vec![
                ("content-type", "application/json".into()),
                ("x-amzn-errortype", error_type.to_owned()),
            ],
            body: serde_json::json!({ "message": message }).to_string(),
        }
    }
}

type Responder = Box<dyn Fn(&Sent) -> Option<Canned> + Send + Sync>;

#[derive(Default)]
struct State {
    sent: Vec<Sent>,
    /// Answers by rule, first match wins; each rule answers as often as asked.
    rules: Vec<Responder>,
    /// Answers in order, used before the rules.
    queue: std::collections::VecDeque<Canned>,
}

/// The recording, answering HTTP client.
#[derive(Clone, Default)]
pub struct Replay {
    state: Arc<Mutex<State>>,
}

impl std::fmt::Debug for Replay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replay").finish_non_exhaustive()
    }
}

impl Replay {
    /// No answers yet: every request gets a 599 until some are added.
    pub fn new() -> Self {
        Self::default()
    }

    /// Answer the next request with `canned` (in order, before any rule).
    pub fn then(self, canned: Canned) -> Self {
        self.state.lock().unwrap().queue.push_back(canned);
        self
    }

    /// Answer every request `rule` returns an answer for.
    pub fn when(self, rule: impl Fn(&Sent) -> Option<Canned> + Send + Sync + 'static) -> Self {
        self.state.lock().unwrap().rules.push(Box::new(rule));
        self
    }

    /// Answer every request whose Query `Action` is `action` with `canned`.
    pub fn on_action(self, action: &'static str, canned: Canned) -> Self {
        self.when(move |s| (s.field("Action").as_deref() == Some(action)).then(|| canned.clone()))
    }

    /// Every request so far, in order.
    pub fn sent(&self) -> Vec<Sent> {
        self.state.lock().unwrap().sent.clone()
    }

    /// The requests whose Query `Action` was `action`.
    pub fn actions(&self, action: &str) -> Vec<Sent> {
        self.sent()
            .into_iter()
            .filter(|s| s.field("Action").as_deref() == Some(action))
            .collect()
    }

    /// The SDK config the functions load for `region`, sending through this
    /// client, with static credentials.
    pub async fn config(&self, region: &str) -> aws_config::SdkConfig {
        handover::aws::loader(region, Some("handover-wire-test"))
            .http_client(SharedHttpClient::new(self.clone()))
            .credentials_provider(aws_sdk_rds::config::Credentials::new(
                "AKIDWIRETEST",
                "wire-test-secret",
                None,
                None,
                "wire-test",
            ))
            // An emulator endpoint in the environment must not reroute the
            // request: it never leaves this process anyway.
            .endpoint_url(format!("https://wire-test.{region}.amazonaws.com"))
            .load()
            .await
    }

    fn answer(&self, sent: Sent) -> Canned {
        let mut state = self.state.lock().unwrap();
        let canned = state
            .queue
            .pop_front()
            .or_else(|| state.rules.iter().find_map(|r| r(&sent)));
        state.sent.push(sent);
        canned.unwrap_or(Canned {
            status: 599,
            headers: Vec::new(),
            body: "the wire test has no answer for this request".into(),
        })
    }
}

impl HttpConnector for Replay {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let sent = Sent {
            method: request.method().to_owned(),
            uri: request.uri().to_owned(),
            headers: request
                .headers()
                .iter()
                .map(|(k, v)| (k.to_ascii_lowercase(), v.to_owned()))
                .collect(),
            body: request
                .body()
                .bytes()
                .map(|b| String::from_utf8_lossy(b).into_owned())
                .unwrap_or_default(),
        };
        let canned = self.answer(sent);
        let status = StatusCode::try_from(canned.status).expect("a valid status");
        let mut response = HttpResponse::new(status, SdkBody::from(canned.body));
        for (k, v) in canned.headers {
            response.headers_mut().insert(k, v);
        }
        HttpConnectorFuture::ready(Ok(response))
    }
}

impl HttpClient for Replay {
    fn http_connector(
        &self,
        _settings: &HttpConnectorSettings,
        _components: &RuntimeComponents,
    ) -> SharedHttpConnector {
        SharedHttpConnector::new(self.clone())
    }
}
