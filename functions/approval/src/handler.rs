//! Parse the task payload, store the key, post the question.

use handover::adapters::Sns;
use handover::approval::{ApprovalRequested, ApprovalTask, Config, Requester};
use handover::aws::Aws;
use handover::clock::{Clock, SystemClock};
use handover::config::required;
use handover::error::{ErrorName, FunctionError, parse_event};
use handover::slack::api::SlackApi;
use handover::slack::message::CliHint;
use handover::slack::secrets::SecretsManager;
use handover::store::Store;
use std::sync::Arc;

/// Built once per container.
pub struct Deps {
    pub store: Store,
    pub secrets: SecretsManager,
    pub slack: SlackApi,
    pub operators: Sns,
    pub cli: CliHint,
    pub clock: Box<dyn Clock>,
}

impl Deps {
    /// From `TABLE_NAME`, `AWS_REGION`, `HANDOVER_OPERATOR_TOPIC` (the
    /// stack's operator topic), `HANDOVER_DECISION_URL` (the stack's
    /// `POST /decisions`, named in the CLI commands the question carries)
    /// and `SLACK_API_BASE` (optional). The plan
    /// (channel, bot token secret, timeout) comes with each task, in the
    /// execution document.
    pub async fn from_env() -> Result<Self, FunctionError> {
        let config = Config::from_env()?;
        let aws = Arc::new(Aws::new());
        let slack = SlackApi::from_env()
            .map_err(|e| FunctionError::new(ErrorName::Fatal, handover::error::chain(&e)))?;
        let operators = Sns::new(&aws, &required("HANDOVER_OPERATOR_TOPIC")?).await;
        Ok(Deps {
            operators,
            store: Store::new(aws.dynamodb(&config.region).await, config.table.clone()),
            secrets: SecretsManager::new(aws, config.region.clone()),
            slack,
            cli: CliHint {
                table: config.table,
                region: config.region,
                decision_url: required("HANDOVER_DECISION_URL")?,
            },
            clock: Box::new(SystemClock),
        })
    }
}

/// One approval request. When Slack will not take the message, the operator
/// topic gets the question with the CLI fallback and the task keeps waiting.
/// Errors: `Handover.InvalidInput` for a malformed payload,
/// `Handover.Transient` for a throttled table or secret read, and
/// `Handover.Fatal` when neither Slack nor the operator topic took it
/// (nobody was asked: the state machine must escalate, not wait).
pub async fn handler(
    event: serde_json::Value,
    deps: &Deps,
) -> Result<ApprovalRequested, FunctionError> {
    let task: ApprovalTask = parse_event("approval task payload", event)?;
    let requester = Requester {
        store: &deps.store,
        secrets: &deps.secrets,
        slack: &deps.slack,
        clock: deps.clock.as_ref(),
        cli: &deps.cli,
        operators: &deps.operators,
    };
    Ok(requester.request(&task).await?)
}
