//! Turn the API Gateway event into a decision, on one of two routes:
//! `POST /slack/interactions` (a click Slack signed: verify, decide, answer
//! Slack) and `POST /decisions` (`handover approve` / `reject`, signed with
//! SigV4 and authenticated by API Gateway's `AWS_IAM` authoriser: the
//! principal it names decides). A request on one route never takes the
//! other's path.

use aws_lambda_events::apigw::{ApiGatewayV2httpRequest, ApiGatewayV2httpResponse};
use aws_lambda_events::encodings::Body;
use aws_lambda_events::http::header::CONTENT_TYPE;
use aws_lambda_events::http::{HeaderValue, Method};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use handover::approval::decide::DEFAULT_BUDGET;
use handover::approval::iam::{self, IamDecider};
use handover::approval::{Config, Decider, SfnCallback, SignedRequest, TaskCallback};
use handover::aws::Aws;
use handover::clock::{Clock, SystemClock};
use handover::error::{ErrorName, FunctionError, chain, parse_event};
use handover::live_plan::{LivePlan, PlanReader, StackPlan};
use handover::plan::Plan;
use handover::report::sources::SfnHistory;
use handover::slack::api::SlackApi;
use handover::slack::secrets::{Secret, SecretsManager, SlackSecret, read_slack};
use handover::slack::signing::{SIGNATURE_HEADER, TIMESTAMP_HEADER};
use handover::store::Store;
use std::sync::Arc;
use std::time::Duration;

/// Built once per container: the plan (read again each minute), the
/// signing secret, the clients.
pub struct Deps<T = SfnCallback, R = StackPlan> {
    pub plan: LivePlan<R>,
    pub store: Store,
    pub callback: T,
    pub runs: SfnHistory,
    pub secrets: SecretsManager,
    pub slack: SlackApi,
    /// Read at cold start, or at the first click if that failed: the CLI's
    /// route must not depend on Slack's secret.
    pub signing_secret: tokio::sync::OnceCell<Secret>,
    pub clock: Box<dyn Clock>,
    pub budget: Duration,
}

impl Deps {
    /// From `TABLE_NAME`, `AWS_REGION`, the plan (`PLAN_PARAMETER` or
    /// `PLAN_FILE`) and `SLACK_API_BASE` (optional). The signing secret named
    /// by the plan is read here, once; if it cannot be, the CLI's decisions
    /// still work and each click tries again.
    pub async fn from_env() -> Result<Self, FunctionError> {
        let config = Config::from_env()?;
        let aws = Arc::new(Aws::new());
        let plan = LivePlan::load(StackPlan::from_env(aws.clone())?, &SystemClock).await?;
        let signing_secret_arn = plan
            .current(&SystemClock)
            .await?
            .slack
            .signing_secret_arn
            .clone();
        let secrets = SecretsManager::new(aws.clone(), config.region.clone());
        let signing_secret = tokio::sync::OnceCell::new();
        // Bounded: Lambda gives init 10 s, and the CLI's route must come up
        // even when Secrets Manager is slow.
        let read = tokio::time::timeout(
            SECRET_AT_INIT,
            read_slack(&secrets, &signing_secret_arn, SlackSecret::SigningSecret),
        )
        .await;
        match read {
            Ok(Ok(secret)) => {
                let _ = signing_secret.set(secret);
            }
            Ok(Err(e)) => {
                tracing::error!(error = %chain(&e), "the Slack signing secret cannot be read: clicks fail until it can; handover approve still decides")
            }
            Err(_) => tracing::error!(
                "the Slack signing secret did not arrive in time: clicks read it again; handover approve still decides"
            ),
        }
        let slack =
            SlackApi::from_env().map_err(|e| FunctionError::new(ErrorName::Fatal, chain(&e)))?;
        Ok(Deps {
            store: Store::new(aws.dynamodb(&config.region).await, config.table),
            runs: SfnHistory::new(&aws, &config.region).await,
            secrets,
            callback: SfnCallback::new(aws, config.region),
            slack,
            signing_secret,
            plan,
            clock: Box::new(SystemClock),
            budget: DEFAULT_BUDGET,
        })
    }
}

/// One request, from Slack or the CLI. The answer is always an HTTP response (401, 400,
/// 403, 503 or 200); only an event that is not an API Gateway HTTP API event
/// at all is an error (`Handover.InvalidInput`).
pub async fn handler<T: TaskCallback + Sync, R: PlanReader>(
    event: serde_json::Value,
    deps: &Deps<T, R>,
) -> Result<ApiGatewayV2httpResponse, FunctionError> {
    let req: ApiGatewayV2httpRequest = parse_event("API Gateway HTTP API event", event)?;
    if req.request_context.http.method != Method::POST {
        return Ok(reply(405, "decisions are POSTed"));
    }
    let body = match (&req.body, req.is_base64_encoded) {
        (None, _) => Vec::new(),
        (Some(b), false) => b.as_bytes().to_vec(),
        (Some(b), true) => match STANDARD.decode(b) {
            Ok(bytes) => bytes,
            Err(_) => return Ok(reply(400, "body is flagged base64 but is not valid base64")),
        },
    };
    // The stack's plan as it is in SSM within the last minute: a removed
    // approver is no longer one. One that cannot be read refuses both routes.
    let plan = deps.plan.current(deps.clock.as_ref()).await;
    if req.route_key.as_deref() == Some(DECISION_ROUTE) {
        return Ok(match plan {
            Ok(plan) => decision(&req, &body, deps, &plan).await,
            Err(e) => json_reply(&iam::DecisionReply::new(
                iam::ReplyKind::Failed,
                no_plan(&e),
            )),
        });
    }
    // A function error, as for an unreadable signing secret: Slack shows
    // the click as failed, and the Errors alarm tells the operators.
    let plan = match plan {
        Ok(plan) => plan,
        Err(e) => {
            use handover::error::Classify;
            return Err(FunctionError::new(e.error_name(), no_plan(&e)));
        }
    };
    let header = |name| req.headers.get(name).and_then(|v| v.to_str().ok());
    let signing_secret = match deps
        .signing_secret
        .get_or_try_init(|| {
            read_slack(
                &deps.secrets,
                &plan.slack.signing_secret_arn,
                SlackSecret::SigningSecret,
            )
        })
        .await
    {
        Ok(s) => s,
        // A function error, not a quiet answer: Slack shows the click as
        // failed, and the function's Errors alarm tells the operators.
        Err(e) => {
            return Err(FunctionError::new(
                ErrorName::Transient,
                format!(
                    "the Slack signing secret cannot be read ({}): clicks fail until it can; decide with handover approve",
                    chain(&e)
                ),
            ));
        }
    };
    let decider = Decider {
        plan: &plan,
        store: &deps.store,
        callback: &deps.callback,
        slack: &deps.slack,
        signing_secret,
        clock: deps.clock.as_ref(),
        budget: deps.budget,
    };
    let outcome = decider
        .handle(SignedRequest {
            timestamp: header(TIMESTAMP_HEADER),
            signature: header(SIGNATURE_HEADER),
            content_type: header(CONTENT_TYPE.as_str()),
            body: &body,
        })
        .await;
    // Slack shows nothing from a 200 body for block actions; the person
    // reads the outcome through response_url. Errors keep their reason.
    let status = outcome.status();
    let text = if status == 200 {
        String::new()
    } else {
        outcome.text()
    };
    Ok(reply(status, &text))
}

/// The most the cold start waits for the signing secret.
const SECRET_AT_INIT: Duration = Duration::from_secs(3);

/// The CLI's route, as the template declares it.
const DECISION_ROUTE: &str = "POST /decisions";

/// `POST /decisions`: the principal is API Gateway's (`authorizer.iam`),
/// never a header or the body; without one nothing happens.
async fn decision<T: TaskCallback + Sync, R>(
    req: &ApiGatewayV2httpRequest,
    body: &[u8],
    deps: &Deps<T, R>,
    plan: &Plan,
) -> ApiGatewayV2httpResponse {
    let caller = req
        .request_context
        .authorizer
        .as_ref()
        .and_then(|a| a.iam.as_ref())
        .and_then(|iam| iam.user_arn.as_deref());
    let decider = IamDecider {
        deployed: plan,
        slack: &deps.slack,
        secrets: &deps.secrets,
        store: &deps.store,
        callback: &deps.callback,
        runs: &deps.runs,
        clock: deps.clock.as_ref(),
        budget: iam::BUDGET,
    };
    json_reply(&decider.handle(caller, body).await)
}

/// The refusal when there is no current plan. The reason goes to the log
/// only: the caller may not have been authenticated yet.
fn no_plan(e: &handover::config::ConfigError) -> String {
    tracing::error!(error = %chain(e), "no current plan: decisions refused");
    "Handover cannot read its plan now: nothing changed. Try again in a minute.".into()
}

/// The decision route's answer, as JSON.
fn json_reply(answer: &iam::DecisionReply) -> ApiGatewayV2httpResponse {
    let mut resp = reply(answer.outcome.status(), "");
    resp.headers
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp.body = Some(Body::Text(
        serde_json::to_string(answer).unwrap_or_else(|_| "{}".to_owned()),
    ));
    resp
}

fn reply(status: u16, text: &str) -> ApiGatewayV2httpResponse {
    let mut resp = ApiGatewayV2httpResponse::default();
    resp.status_code = i64::from(status);
    resp.headers.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    resp.body = (!text.is_empty()).then(|| Body::Text(text.to_owned()));
    resp
}
