//! The world the handler tests run in: a fresh table in moto, a Slack
//! stand-in, Step Functions tasks that really wait, and clicks signed
//! exactly as Slack signs them.

use aws_lambda_events::apigw::ApiGatewayV2httpResponse;
use aws_lambda_events::encodings::Body;
use aws_sdk_sfn::types::ExecutionStatus;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use chrono::Utc;
use handover::approval::decide::DEFAULT_BUDGET;
use handover::approval::{CallbackError, TaskToken, new_key};
use handover::approval::{SfnCallback, TaskCallback};
use handover::aws::Aws;
use handover::clock::{Clock, SystemClock};
use handover::live_plan::{PlanReader, StackPlan};
use handover::report::sources::SfnHistory;
use handover::slack::api::RetryPolicy;
use handover::slack::api::SlackApi;
use handover::slack::secrets::Secret;
use handover::slack::stand_in::{SlackStandIn, click_body, signed_headers};
use handover::store::approval::NewApproval;
use handover_testkit::{TEST_REGION, aws, example_plan, fresh_store, unique};
use serde_json::{Value, json};
use slack::handler::*;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

pub const SIGNING_SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
pub const FIXTURE: &str = include_str!("../../events/interaction.json");

/// The real Step Functions callback, counting calls.
pub struct Counting {
    pub inner: SfnCallback,
    pub successes: AtomicUsize,
    pub failures: AtomicUsize,
    /// The (error, cause) of the last SendTaskFailure.
    pub last_failure: std::sync::Mutex<Option<(String, String)>>,
}

impl TaskCallback for Counting {
    async fn succeed(
        &self,
        execution: &str,
        token: &TaskToken,
        output: &str,
    ) -> Result<(), CallbackError> {
        self.successes.fetch_add(1, Ordering::SeqCst);
        self.inner.succeed(execution, token, output).await
    }
    async fn fail(
        &self,
        execution: &str,
        token: &TaskToken,
        error: &str,
        cause: &str,
    ) -> Result<(), CallbackError> {
        self.failures.fetch_add(1, Ordering::SeqCst);
        *self.last_failure.lock().unwrap() = Some((error.to_owned(), cause.to_owned()));
        self.inner.fail(execution, token, error, cause).await
    }
    async fn task_end(
        &self,
        execution: &str,
        token: &TaskToken,
    ) -> Result<Option<handover::approval::callback::TaskEnd>, CallbackError> {
        self.inner.task_end(execution, token).await
    }
}

pub struct World<R = StackPlan> {
    pub deps: Deps<Counting, R>,
    pub slack: SlackStandIn,
    pub aws: Arc<Aws>,
}

pub async fn world() -> World {
    world_with(
        handover::live_plan::LivePlan::fixed(example_plan()),
        Box::new(SystemClock),
    )
    .await
}

/// The world with the stack's plan read by `plan`, at `clock`.
pub async fn world_with<R: PlanReader>(
    plan: handover::live_plan::LivePlan<R>,
    clock: Box<dyn Clock>,
) -> World<R> {
    let aws = Arc::new(aws());
    let slack = SlackStandIn::start().await.expect("slack stand-in");
    let retry = RetryPolicy {
        attempts: 2,
        first_backoff: Duration::from_millis(10),
        max_backoff: Duration::from_millis(20),
        attempt_timeout: Duration::from_secs(1),
    };
    let deps = Deps {
        plan,
        store: fresh_store(&aws).await,
        callback: Counting {
            inner: SfnCallback::new(aws.clone(), TEST_REGION),
            successes: AtomicUsize::new(0),
            failures: AtomicUsize::new(0),
            last_failure: std::sync::Mutex::new(None),
        },
        runs: SfnHistory::new(&aws, TEST_REGION).await,
        secrets: handover::slack::secrets::SecretsManager::new(aws.clone(), TEST_REGION),
        slack: SlackApi::new(slack.api_base(), retry).unwrap(),
        signing_secret: tokio::sync::OnceCell::new_with(Some(Secret::new(SIGNING_SECRET))),
        clock,
        budget: DEFAULT_BUDGET,
    };
    World { deps, slack, aws }
}

impl<R: PlanReader> World<R> {
    pub fn successes(&self) -> usize {
        self.deps.callback.successes.load(Ordering::SeqCst)
    }
    pub fn failures(&self) -> usize {
        self.deps.callback.failures.load(Ordering::SeqCst)
    }

    /// A pending approval for `token`, as the approval function stores it.
    pub async fn pending(
        &self,
        execution: &str,
        token: &str,
        expires_in: chrono::Duration,
    ) -> String {
        let key = new_key().unwrap();
        let now = Utc::now();
        self.deps
            .store
            .put_approval(&NewApproval {
                key: key.clone(),
                task_token: token.into(),
                execution: execution.into(),
                incident: "shop-ap-northeast-2-20261130T141155Z".into(),
                requested_at: now - chrono::Duration::minutes(1),
                expires_at: now + expires_in,
                question: "FAILOVER approval: shop".into(),
                data_loss: false,
            })
            .await
            .unwrap();
        key
    }

    /// A signed click by `user` of `team` on `action` for `key`, now.
    pub fn click(&self, user: &str, team: &str, action: &str, key: &str) -> Value {
        let body = click_body(
            user,
            team,
            action,
            key,
            &self.slack.response_url(&unique("r")),
        );
        signed_event(&body, Utc::now().timestamp(), SIGNING_SECRET.as_bytes())
    }

    pub async fn send(&self, event: Value) -> ApiGatewayV2httpResponse {
        handler(event, &self.deps).await.expect("an HTTP answer")
    }

    /// An execution whose first state waits for a task token, and that token.
    /// The task is `events:putEvents.waitForTaskToken` (moto needs no Lambda
    /// for it); the token is read from the TaskScheduled event.
    pub async fn waiting_task(&self) -> (String, String) {
        self.waiting_task_in(TEST_REGION).await
    }

    /// [`World::waiting_task`] in `region` (a Region no other test calls
    /// Step Functions in can take injected faults of its own).
    pub async fn waiting_task_in(&self, region: &str) -> (String, String) {
        handover_testkit::waiting_task(&self.aws, region).await
    }

    /// Wait for the execution to end; (status, output, error, cause).
    pub async fn finished(
        &self,
        execution: &str,
    ) -> (ExecutionStatus, Value, Option<String>, Option<String>) {
        let d = handover_testkit::ended_execution(
            &self.aws,
            region_of(execution),
            execution,
            Duration::from_secs(10),
        )
        .await;
        let output = d
            .output()
            .map_or(Value::Null, |o| serde_json::from_str(o).unwrap());
        (
            d.status().clone(),
            output,
            d.error().map(str::to_owned),
            d.cause().map(str::to_owned),
        )
    }

    pub async fn status(&self, execution: &str) -> ExecutionStatus {
        let sfn = self.aws.sfn(region_of(execution)).await;
        let d = sfn
            .describe_execution()
            .execution_arn(execution)
            .send()
            .await
            .unwrap();
        d.status().clone()
    }
}

/// The Region in an execution ARN.
fn region_of(execution: &str) -> &str {
    execution.split(':').nth(3).expect("an execution ARN")
}

/// An API Gateway HTTP API event (from the fixture) carrying `body`, signed
/// with `secret` at `timestamp`, base64-encoded as API Gateway delivers forms.
pub fn signed_event(body: &str, timestamp: i64, secret: &[u8]) -> Value {
    let (ts, sig) = signed_headers(secret, timestamp, body.as_bytes());
    let mut event: Value = serde_json::from_str(FIXTURE).unwrap();
    event["headers"]["x-slack-request-timestamp"] = json!(ts);
    event["headers"]["x-slack-signature"] = json!(sig);
    event["headers"]["content-length"] = json!(body.len().to_string());
    event["body"] = json!(STANDARD.encode(body));
    event["isBase64Encoded"] = json!(true);
    event
}

/// The text of a response.
pub fn text(resp: &ApiGatewayV2httpResponse) -> String {
    match &resp.body {
        Some(Body::Text(t)) => t.clone(),
        Some(Body::Binary(b)) => String::from_utf8_lossy(b).into_owned(),
        _ => String::new(),
    }
}

/// Run `f` capturing JSON logs at TRACE, except the AWS SDK's wire tracing
/// (`aws_smithy_runtime*`), capped at DEBUG: at TRACE the SDK prints whole
/// DynamoDB response bodies, and the approval item holds the task token.
/// Seen in this suite with `handover_testkit::logs::capture` (TRACE for all):
/// `aws_smithy_runtime::client::orchestrator` logs "read HTTP response body"
/// and `output_or_error` with the consumed item, token included. Production
/// must apply the same cap in `telemetry::init_logging`.
pub async fn capture_capped<F: Future>(f: F) -> (F::Output, String) {
    let captured = handover_testkit::logs::Captured::default();
    let filter = tracing_subscriber::EnvFilter::new(
        "trace,aws_smithy_runtime=debug,aws_smithy_runtime_api=debug",
    );
    let subscriber = tracing_subscriber::fmt()
        .json()
        .with_env_filter(filter)
        .with_writer(captured.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let out = f.await;
    (out, captured.text())
}
