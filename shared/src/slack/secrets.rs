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
        source: AwsError,
    },
    /// The secret has no string value (binary or empty).
    #[error("secret {arn} has no string value (store the value as a plain SecretString)")]
    Empty {
        /// ARN (or name) of the secret.
        arn: String,
    },
}

impl Classify for SecretError {
    fn error_name(&self) -> ErrorName {
        match self {
            SecretError::Call { source, .. } => source.error_name(),
            SecretError::Empty { .. } => ErrorName::Fatal,
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
                source: call_error("secretsmanager", "GetSecretValue", region, e),
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
fn region_of(arn: &str) -> Option<&str> {
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
