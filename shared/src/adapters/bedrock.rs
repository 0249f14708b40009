//! Bedrock's Converse API (bedrock:InvokeModel), for the advisory explanation.
//! Nothing the state machine decides on ever comes from here.

use super::{AwsError, bounded, call_error};
use crate::aws::Aws;
use aws_sdk_bedrockruntime::types::{
    ContentBlock, ConversationRole, ConverseOutput, InferenceConfiguration, Message,
    SystemContentBlock,
};
use std::time::Duration;
use tracing::instrument;

/// One request to a text model.
#[derive(Debug, Clone, Copy)]
pub struct Ask<'a> {
    /// Bedrock model id or inference-profile id.
    pub model_id: &'a str,
    /// The system prompt.
    pub system: &'a str,
    /// The one user message.
    pub user: &'a str,
    /// Upper bound on the answer's length.
    pub max_tokens: i32,
}

/// Ask a text model one question.
pub trait TextModel {
    /// The model's text answer (all text blocks, joined).
    fn converse(
        &self,
        ask: Ask<'_>,
        budget: Duration,
    ) -> impl std::future::Future<Output = Result<String, AwsError>> + Send;
}

/// Bedrock Runtime over the SDK, in one Region.
#[derive(Debug, Clone)]
pub struct Bedrock {
    client: aws_sdk_bedrockruntime::Client,
    region: String,
}

impl Bedrock {
    /// Bedrock Runtime in `region`.
    pub async fn new(aws: &Aws, region: &str) -> Self {
        Self::from_client(aws.bedrock(region).await, region)
    }

    /// Wrap a client (the wire tests build one over `handover_testkit::wire`).
    pub fn from_client(client: aws_sdk_bedrockruntime::Client, region: &str) -> Self {
        Self {
            client,
            region: region.to_owned(),
        }
    }
}

const OP: &str = "Converse";

impl TextModel for Bedrock {
    #[instrument(skip(self, ask), fields(model_id = ask.model_id))]
    async fn converse(&self, ask: Ask<'_>, budget: Duration) -> Result<String, AwsError> {
        let shape = |problem: String| AwsError::Shape {
            service: "bedrock",
            op: OP,
            region: self.region.clone(),
            problem,
        };
        let message = Message::builder()
            .role(ConversationRole::User)
            .content(ContentBlock::Text(ask.user.to_owned()))
            .build()
            .map_err(|e| shape(e.to_string()))?;
        bounded("bedrock", OP, &self.region, budget, async {
            let out = self
                .client
                .converse()
                .model_id(ask.model_id)
                .system(SystemContentBlock::Text(ask.system.to_owned()))
                .messages(message)
                .inference_config(
                    InferenceConfiguration::builder()
                        .max_tokens(ask.max_tokens)
                        .temperature(0.0)
                        .build(),
                )
                .send()
                .await
                .map_err(|e| call_error("bedrock", OP, &self.region, e))?;
            let Some(ConverseOutput::Message(msg)) = out.output() else {
                return Err(shape("no message in the answer".into()));
            };
            let text: Vec<&str> = msg
                .content()
                .iter()
                .filter_map(|b| b.as_text().ok().map(String::as_str))
                .collect();
            if text.is_empty() {
                return Err(shape(format!(
                    "no text in the answer (stop reason {})",
                    out.stop_reason().as_str()
                )));
            }
            Ok(text.join("\n"))
        })
        .await
    }
}
