//! Slack's secrets (bot token, signing secret) from Secrets Manager, read
//! once per container and kept in memory.
//!
//! The values travel as [`Secret`], whose `Debug` is redacted and which has
//! no `Display`, so a secret cannot reach a log line by accident.

use crate::adapters::{AwsError, call_error};
use crate::aws::Aws;
use crate::error::{Classify, ErrorName};
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use tokio::sync::Mutex;
use tracing::instrument;

/// A secret value. `Debug` prints `<redacted>`; read it with [`Secret::expose`].
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wrap a value (tests, drills, and the Secrets Manager adapter).
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The value, for the one call that needs it (an HMAC key, a header).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// Reading a secret failed.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    /// The GetSecretValue call failed.
    #[error("reading secret {arn}")]
    Call {
        /// ARN (or name) of the secret.
        arn: String,
        /// The call's error.
        #[source]
        source: Box<AwsError>,
    },
    /// The secret has no string value (binary or empty).
    #[error("secret {arn} has no string value (store the value as a plain SecretString)")]
    Empty {
        /// ARN (or name) of the secret.
        arn: String,
    },
    /// The value is not in a shape Handover reads. The value is never shown.
    #[error("secret {arn} is not {expected} (the value is not shown)")]
    Shape {
        /// ARN (or name) of the secret.
        arn: String,
        /// What it should be.
        expected: &'static str,
    },
}

/// The Slack secrets, as people store them: the console's "Other type of
/// secret" stores key/value JSON by default, "Plaintext" the bare value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlackSecret {
    /// The bot token, `xoxb-…`: plaintext, or JSON with `bot_token` or `SLACK_BOT_TOKEN`.
    BotToken,
    /// The app's signing secret: plaintext, or JSON with `signing_secret` or `SLACK_SIGNING_SECRET`.
    SigningSecret,
}

impl SlackSecret {
    /// The JSON keys accepted, in order of preference.
    pub fn keys(self) -> &'static [&'static str] {
        match self {
            SlackSecret::BotToken => &["bot_token", "SLACK_BOT_TOKEN"],
            SlackSecret::SigningSecret => &["signing_secret", "SLACK_SIGNING_SECRET"],
        }
    }

    fn expected(self) -> &'static str {
        match self {
            SlackSecret::BotToken => {
                "a Slack bot token: the plaintext xoxb-… value, or key/value JSON with \"bot_token\" (or \"SLACK_BOT_TOKEN\") holding it"
            }
            SlackSecret::SigningSecret => {
                "a Slack signing secret: the plaintext value, or key/value JSON with \"signing_secret\" (or \"SLACK_SIGNING_SECRET\") holding it"
            }
        }
    }

    /// The value inside `raw`, or [`SecretError::Shape`] naming `arn` and the shape.
    pub fn extract(self, arn: &str, raw: &Secret) -> Result<Secret, SecretError> {
        let bad = || SecretError::Shape {
            arn: arn.to_owned(),
            expected: self.expected(),
        };
        let text = raw.expose().trim();
        let value = if text.starts_with('{') {
            let map: serde_json::Map<String, serde_json::Value> =
                serde_json::from_str(text).map_err(|_| bad())?;
            self.keys()
                .iter()
                .find_map(|k| map.get(*k).and_then(|v| v.as_str()))
                .map(str::trim)
                .ok_or_else(bad)?
                .to_owned()
        } else {
            text.to_owned()
        };
        let well_formed = !value.is_empty()
            && !value.chars().any(char::is_whitespace)
            && (self != SlackSecret::BotToken || value.starts_with("xoxb-"));
        if !well_formed {
            return Err(bad());
        }
        Ok(Secret(value))
    }
}

/// Read a Slack secret and take its value out of the shape it is stored in.
pub async fn read_slack<R: SecretReader + Sync>(
    reader: &R,
    arn: &str,
    kind: SlackSecret,
) -> Result<Secret, SecretError> {
    kind.extract(arn, &reader.read(arn).await?)
}

impl Classify for SecretError {
    fn error_name(&self) -> ErrorName {
        match self {
            SecretError::Call { source, .. } => source.error_name(),
            SecretError::Empty { .. } | SecretError::Shape { .. } => ErrorName::Fatal,
        }
    }
}

/// Read secrets (secretsmanager:GetSecretValue).
pub trait SecretReader {
    /// The current string value of `arn`.
    fn read(&self, arn: &str) -> impl Future<Output = Result<Secret, SecretError>> + Send;
}

/// Secrets Manager, cached by ARN for the life of the container.
#[derive(Debug, Clone)]
pub struct SecretsManager {
    aws: Arc<Aws>,
    default_region: String,
    cache: Arc<Mutex<HashMap<String, Secret>>>,
}

impl SecretsManager {
    /// Secrets Manager through `aws`. The Region comes from each secret's
    /// ARN; a plain name is looked up in `default_region`.
    pub fn new(aws: Arc<Aws>, default_region: impl Into<String>) -> Self {
        Self {
            aws,
            default_region: default_region.into(),
            cache: Arc::default(),
        }
    }

    async fn fetch(&self, arn: &str) -> Result<Secret, SecretError> {
        let region = region_of(arn).unwrap_or(&self.default_region);
        let out = self
            .aws
            .secrets(region)
            .await
            .get_secret_value()
            .secret_id(arn)
            .send()
            .await
            .map_err(|e| SecretError::Call {
                arn: arn.to_owned(),
                source: Box::new(call_error("secretsmanager", "GetSecretValue", region, e)),
            })?;
        match out.secret_string {
            Some(v) if !v.trim().is_empty() => Ok(Secret(v.trim().to_owned())),
            _ => Err(SecretError::Empty {
                arn: arn.to_owned(),
            }),
        }
    }
}

impl SecretReader for SecretsManager {
    #[instrument(skip(self))]
    async fn read(&self, arn: &str) -> Result<Secret, SecretError> {
        let mut cache = self.cache.lock().await;
        if let Some(s) = cache.get(arn) {
            return Ok(s.clone());
        }
        let secret = self.fetch(arn).await?;
        cache.insert(arn.to_owned(), secret.clone());
        Ok(secret)
    }
}

/// `arn:aws:secretsmanager:<region>:<account>:secret:<name>` → the Region.
pub fn region_of(arn: &str) -> Option<&str> {
    let mut parts = arn.split(':');
    match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some("arn"), Some(_), Some("secretsmanager"), Some(region)) if !region.is_empty() => {
            Some(region)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slack_secrets_are_read_as_plaintext_or_as_the_consoles_key_value_json() {
        let arn = "arn:aws:secretsmanager:ap-northeast-1:123456789012:secret:handover/bot-AbC123";
        for raw in [
            "xoxb-1-2-abc",
            "  xoxb-1-2-abc\n",
            r#"{"bot_token": "xoxb-1-2-abc"}"#,
            r#"{"SLACK_BOT_TOKEN": "xoxb-1-2-abc", "other": 1}"#,
        ] {
            let v = SlackSecret::BotToken
                .extract(arn, &Secret::new(raw))
                .unwrap();
            assert_eq!(v.expose(), "xoxb-1-2-abc", "{raw}");
        }
        let v = SlackSecret::SigningSecret
            .extract(
                arn,
                &Secret::new(r#"{"signing_secret":"8f742231b10e8888abcd99yyyzzz85a5"}"#),
            )
            .unwrap();
        assert_eq!(v.expose(), "8f742231b10e8888abcd99yyyzzz85a5");
    }

    #[test]
    fn a_slack_secret_in_the_wrong_shape_names_the_secret_and_the_shape_never_the_value() {
        let arn = "arn:aws:secretsmanager:ap-northeast-1:123456789012:secret:handover/bot-AbC123";
        for raw in [
            r#"{"token": "xoxp-user-token-hunter2"}"#,
            "xoxp-user-token-hunter2",
            r#"{"bot_token": "xoxb-hunter2 with spaces"}"#,
            "{not json hunter2",
        ] {
            let err = SlackSecret::BotToken
                .extract(arn, &Secret::new(raw))
                .unwrap_err();
            let text = err.to_string();
            assert!(text.contains(arn), "{text}");
            assert!(text.contains("bot_token"), "{text}");
            assert!(!text.contains("hunter2"), "the value leaked: {text}");
        }
    }

    #[test]
    fn debug_never_shows_the_value() {
        let s = Secret::new("xoxb-very-secret");
        assert_eq!(format!("{s:?}"), "Secret(<redacted>)");
        assert!(!format!("{:?}", Some(&s)).contains("xoxb"));
    }

    #[test]
    fn region_comes_from_the_arn() {
        assert_eq!(
            region_of("arn:aws:secretsmanager:ap-northeast-1:123456789012:secret:handover/slack"),
            Some("ap-northeast-1")
        );
        assert_eq!(region_of("handover/slack"), None);
        assert_eq!(region_of("arn:aws:ssm:ap-northeast-1:1:parameter/x"), None);
    }
}
