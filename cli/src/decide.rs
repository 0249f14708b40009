//! `handover approve` / `handover reject`: the decision when Slack cannot
//! ask. The operator's own AWS credentials sign (SigV4) a request to the
//! stack's decision endpoint, `POST /decisions` behind API Gateway's
//! `AWS_IAM` authorisation. Everything that makes a decision safe runs
//! there, not here: API Gateway authenticates the principal, and the slack
//! function checks the stack's and the run's plan (`cli_approvers`),
//! refuses an ended run or a stale key, and consumes the key once
//! (`handover::approval::iam`). The operator policies grant neither the
//! approval keys nor SendTaskSuccess, and fence and promote act only on the
//! decision the key records, so a decision sent around the endpoint moves
//! nothing.
//!
//! Before it decides it asks the endpoint for the question (nothing
//! changes), shows it, and asks the operator to type the decision; `--yes`
//! is for scripts. Approving a possible data loss needs
//! `--accept-data-loss` as well, as the Slack button needs its confirmation.

use crate::args::DecideArgs;
use aws_credential_types::provider::ProvideCredentials;
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity;
use handover::approval::iam::{DecisionReply, DecisionRequest, ReplyKind, SIGNING_SERVICE};
use handover::aws::{Aws, CLI_APP_NAME};
use handover::error::chain;
use handover::store::Store;
use handover::store::approval::Decision;
use std::io::{BufRead, Write};
use std::time::{Duration, SystemTime};

/// One request to the endpoint (API Gateway's own limit is 30 s; the
/// function's budget is 8 s).
const CALL_TIMEOUT: Duration = Duration::from_secs(20);

use crate::exit::{Exit, Failure};

fn refused(m: impl std::fmt::Display) -> Failure {
    (Exit::Refused, format!("refused (nothing changed): {m}"))
}

fn failed(m: impl std::fmt::Display) -> Failure {
    (Exit::Failed, format!("failed: {m}"))
}

/// Where and as whom: the Region, the endpoint, the operator's credentials.
struct Endpoint {
    aws: Aws,
    region: String,
    url: String,
    http: reqwest::Client,
}

impl Endpoint {
    /// Send `req`, signed as the operator, and read the function's answer.
    async fn send(&self, req: &DecisionRequest) -> Result<DecisionReply, Failure> {
        let body = serde_json::to_vec(req).map_err(|e| failed(format!("encoding: {e}")))?;
        let config = self.aws.config(&self.region).await;
        let provider = config.credentials_provider().ok_or_else(|| {
            failed("no AWS credentials: set a profile (AWS_PROFILE) or the environment's keys")
        })?;
        let creds = provider.provide_credentials().await.map_err(|e| {
            failed(format!(
                "no AWS credentials ({}): log in to the role your plan's cli_approvers lists",
                chain(&e)
            ))
        })?;
        let identity = Identity::from(creds);
        let user_agent = format!("handover/{} app/{CLI_APP_NAME}", env!("CARGO_PKG_VERSION"));
        let headers = [
            ("content-type", "application/json"),
            ("user-agent", user_agent.as_str()),
        ];
        let params = v4::SigningParams::builder()
            .identity(&identity)
            .region(&self.region)
            .name(SIGNING_SERVICE)
            .time(SystemTime::now())
            .settings(SigningSettings::default())
            .build()
            .map_err(|e| failed(format!("signing: {e}")))?
            .into();
        let signable = SignableRequest::new(
            "POST",
            &self.url,
            headers.iter().copied(),
            SignableBody::Bytes(&body),
        )
        .map_err(|e| (Exit::Usage, format!("--decision-url {:?}: {e}", self.url)))?;
        let (instructions, _) = sign(signable, &params)
            .map_err(|e| failed(format!("signing: {e}")))?
            .into_parts();
        let mut request = self.http.post(&self.url).timeout(CALL_TIMEOUT);
        for (k, v) in headers.iter().copied().chain(instructions.headers()) {
            request = request.header(k, v);
        }
        let resp = request.body(body).send().await.map_err(|e| {
            failed(format!(
                "the decision endpoint {} did not answer ({}): if a decision was sent it may or may not have reached the run; the same command again says which",
                self.url,
                chain(&e)
            ))
        })?;
        let status = resp.status();
        let text = resp
            .text()
            .await
            .map_err(|e| failed(format!("reading the endpoint's answer: {}", chain(&e))))?;
        if let Ok(reply) = serde_json::from_str::<DecisionReply>(&text) {
            return Ok(reply);
        }
        // API Gateway's own answers: {"message": "..."}.
        let message = serde_json::from_str::<serde_json::Value>(&text)
            .ok()
            .and_then(|v| v["message"].as_str().map(str::to_owned))
            .unwrap_or(text);
        Err(match status.as_u16() {
            401 | 403 => refused(format!(
                "API Gateway refused the request ({status}: {message}): your credentials must be current and allow execute-api:Invoke on the decision route (the stack's ResponderPolicy)"
            )),
            404 => (
                Exit::Usage,
                format!(
                    "{} is not the decision endpoint ({status}: {message}): use the stack output DecisionUrl",
                    self.url
                ),
            ),
            _ => failed(format!(
                "the decision endpoint answered {status}: {message}; the same command again is safe"
            )),
        })
    }
}

/// The endpoint must be HTTPS (plain HTTP only to this machine: the local
/// world), and an API Gateway URL's Region must be the one the request is
/// signed for: API Gateway refuses a signature scoped to another Region,
/// and during an incident `AWS_REGION` is easily P's.
fn check_endpoint(url: &str, region: &str) -> Result<(), Failure> {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let authority = rest.split(['/', '?']).next().unwrap_or_default();
    // host[:port], or [v6][:port]
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => authority.split(':').next().unwrap_or_default(),
    };
    let loopback = host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    if scheme != "https" && !(scheme == "http" && loopback) {
        return Err((
            Exit::Usage,
            format!(
                "--decision-url {url:?}: the decision endpoint is HTTPS (the stack output DecisionUrl)"
            ),
        ));
    }
    // <api-id>.execute-api.<region>.amazonaws.com[.cn]
    let parts: Vec<&str> = host.split('.').collect();
    if let [_, "execute-api", host_region, ..] = parts.as_slice()
        && *host_region != region
    {
        return Err((
            Exit::Usage,
            format!(
                "--decision-url is in {host_region}, but the request would be signed for {region}: pass --region {host_region} (the stack's Region, S)"
            ),
        ));
    }
    Ok(())
}

/// Which approval: the flag given, or the failover holding the lock.
async fn request(args: &DecideArgs, region: &str, aws: &Aws) -> Result<DecisionRequest, Failure> {
    let mut req = DecisionRequest {
        key: args.key.clone(),
        execution: args.execution.clone(),
        incident: args.incident.clone(),
        ..DecisionRequest::default()
    };
    if req.selector().is_ok() {
        return Ok(req);
    }
    let table = args
        .at
        .table
        .clone()
        .or_else(|| crate::env("TABLE_NAME"))
        .ok_or_else(|| {
            (
                Exit::Usage,
                "name the approval (--key, --execution or --incident), or give the table (--table, the stack output StateTableName) to decide for the failover holding the lock".into(),
            )
        })?;
    let store = Store::new(aws.dynamodb(region).await, table);
    let lock = store
        .lock_state()
        .await
        .map_err(|e| failed(format!("reading the lock: {}", chain(&e))))?;
    match lock.and_then(|l| l.holder) {
        Some(incident) => {
            req.incident = Some(incident);
            Ok(req)
        }
        None => Err(refused(
            "no failover holds the lock, so none is waiting: pass --key, --execution or --incident",
        )),
    }
}

/// Ask on the terminal; true when the operator typed `word`.
fn typed(prompt: &str, word: &str) -> bool {
    let mut err = std::io::stderr();
    let _ = write!(err, "{prompt}");
    let _ = err.flush();
    let mut line = String::new();
    match std::io::stdin().lock().read_line(&mut line) {
        Ok(n) if n > 0 => line.trim() == word,
        _ => false,
    }
}

/// The exit code and text of an answer that is not a decision made.
fn outcome(reply: DecisionReply) -> Result<String, Failure> {
    match reply.outcome {
        ReplyKind::Decided | ReplyKind::AlreadyDelivered => Ok(reply.text),
        ReplyKind::Question => Err(failed(format!(
            "the endpoint only showed the question: {}",
            reply.text
        ))),
        ReplyKind::AlreadyDecided | ReplyKind::Unknown | ReplyKind::Forbidden => {
            Err(refused(reply.text))
        }
        // The key may have been consumed: not "nothing changed".
        ReplyKind::Closed => Err((Exit::Refused, format!("refused: {}", reply.text))),
        ReplyKind::BadRequest => Err((Exit::Usage, reply.text)),
        ReplyKind::Unauthenticated | ReplyKind::Unsure | ReplyKind::Failed => {
            Err(failed(reply.text))
        }
    }
}

/// `handover approve` (`decision` approve) or `handover reject`.
/// `accept_loss` is `--accept-data-loss` (approve only).
pub async fn decide(
    args: &DecideArgs,
    decision: Decision,
    accept_loss: bool,
) -> Result<String, Failure> {
    let yes = args.yes;
    let region = crate::region(&args.at)?;
    let url = args
        .decision_url
        .clone()
        .or_else(|| crate::env("HANDOVER_DECISION_URL"))
        .ok_or_else(|| {
            crate::usage("no decision endpoint: pass --decision-url or set HANDOVER_DECISION_URL (the stack output DecisionUrl; the Slack message and the operator notice name it)")
        })?;
    check_endpoint(&url, &region)?;
    let aws = Aws::named(CLI_APP_NAME);
    let mut req = request(args, &region, &aws).await?;
    let endpoint = Endpoint {
        aws,
        region,
        url,
        http: reqwest::Client::new(),
    };
    // First the question, as the endpoint shows it to this principal.
    let shown = endpoint.send(&req).await?;
    if shown.outcome != ReplyKind::Question {
        return outcome(shown);
    }
    let Some(approval) = shown.approval else {
        return Err(failed("the endpoint showed no question"));
    };
    if accept_loss && !approval.data_loss {
        return Err((
            Exit::Usage,
            format!(
                "the approval for {} accepts no data loss (the RPO estimate was within the target when it was asked): drop --accept-data-loss",
                approval.incident
            ),
        ));
    }
    let mut acknowledged = accept_loss;
    if decision == Decision::Approve && approval.data_loss && !accept_loss {
        if yes {
            return Err((
                Exit::Usage,
                format!(
                    "approving {} accepts possible data loss (the RPO estimate is over the target or unknown): pass --accept-data-loss as well\n\n{}",
                    approval.incident, approval.question
                ),
            ));
        }
        eprintln!("\n{}", approval.question);
        if !typed(
            "\nApproving accepts possible data loss. Type `accept data loss` to go on: ",
            "accept data loss",
        ) {
            return Err(refused("data loss not accepted"));
        }
        acknowledged = true;
    }
    if approval.decided.is_none()
        && !yes
        && !typed(
            &format!(
                "\n{}\n\nYou are {} ({}).\nType `{decision}` to {decision} {} (anything else: nothing changes): ",
                approval.question,
                shown.approver.as_deref().unwrap_or("?"),
                shown.caller.as_deref().unwrap_or("?"),
                approval.incident
            ),
            decision.as_str(),
        )
    {
        return Err(refused("not confirmed"));
    }
    // Decide on the key just shown, whatever selected it.
    req = DecisionRequest {
        key: Some(approval.key),
        decision: Some(decision),
        accept_data_loss: acknowledged,
        ..DecisionRequest::default()
    };
    outcome(endpoint.send(&req).await?)
}
