//! Configuration in S that the dependency checks read: SSM parameters
//! (ssm:GetParameter) and the username of DB secrets (secretsmanager:GetSecretValue).

use crate::adapters::{AwsError, call_error};
use crate::aws::Aws;
use tracing::instrument;

/// Read SSM parameters (ssm:GetParameter).
pub trait ParameterReader {
    /// The value of `name`; `Ok(None)` when it does not exist.
    fn parameter(
        &self,
        name: &str,
    ) -> impl std::future::Future<Output = Result<Option<String>, AwsError>> + Send;
}

/// SSM Parameter Store in one Region.
#[derive(Debug, Clone)]
pub struct SsmParameters {
    client: aws_sdk_ssm::Client,
    region: String,
}

impl SsmParameters {
    /// SSM in `region`.
    pub async fn new(aws: &Aws, region: &str) -> Self {
        Self {
            client: aws.ssm(region).await,
            region: region.to_owned(),
        }
    }
}

impl ParameterReader for SsmParameters {
    #[instrument(skip(self), fields(region = %self.region))]
    async fn parameter(&self, name: &str) -> Result<Option<String>, AwsError> {
        match self
            .client
            .get_parameter()
            .name(name)
            .with_decryption(true)
            .send()
            .await
        {
            Ok(out) => Ok(out.parameter.and_then(|p| p.value)),
            Err(e) => {
                let err = call_error("ssm", "GetParameter", &self.region, e);
                if err.code() == Some("ParameterNotFound") {
                    Ok(None)
                } else {
                    Err(err)
                }
            }
        }
    }
}

/// The username inside DB secrets (secretsmanager:GetSecretValue). The
/// secret is parsed and dropped at once; only `username` leaves this adapter.
pub trait SecretUsernames {
    /// `username` of the JSON secret `arn`; `Ok(None)` when it has none.
    fn username(
        &self,
        arn: &str,
    ) -> impl std::future::Future<Output = Result<Option<String>, AwsError>> + Send;
}

/// Secrets Manager, in the Region each ARN names.
#[cfg(feature = "secrets")]
#[derive(Debug, Clone, Copy)]
pub struct SecretsManagerUsernames<'a> {
    aws: &'a Aws,
    default_region: &'a str,
}

#[cfg(feature = "secrets")]
impl<'a> SecretsManagerUsernames<'a> {
    /// Secrets Manager; ARNs without a Region use `default_region`.
    pub fn new(aws: &'a Aws, default_region: &'a str) -> Self {
        Self {
            aws,
            default_region,
        }
    }
}

#[cfg(feature = "secrets")]
impl SecretUsernames for SecretsManagerUsernames<'_> {
    #[instrument(skip(self))]
    async fn username(&self, arn: &str) -> Result<Option<String>, AwsError> {
        let region = arn
            .split(':')
            .nth(3)
            .filter(|r| !r.is_empty())
            .unwrap_or(self.default_region);
        let out = self
            .aws
            .secrets(region)
            .await
            .get_secret_value()
            .secret_id(arn)
            .send()
            .await
            .map_err(|e| call_error("secretsmanager", "GetSecretValue", region, e))?;
        let username = out
            .secret_string()
            .and_then(|s| serde_json::from_str::<serde_json::Value>(s).ok())
            .and_then(|v| {
                v.get("username")
                    .and_then(|u| u.as_str())
                    .map(str::to_owned)
            });
        Ok(username)
    }
}
