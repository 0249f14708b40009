//! The one place SDK clients are built.
//!
//! Configuration comes from the environment as the AWS SDK reads it: the
//! Lambda role's credentials in AWS, and `AWS_ENDPOINT_URL` (or the
//! per-service `AWS_ENDPOINT_URL_<SERVICE>`) for an emulator. There is no
//! local-mode branch: an emulator is just another endpoint.

use aws_config::{BehaviorVersion, Region, SdkConfig};
pub use aws_smithy_runtime_api::client::result::SdkError;
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::sync::Mutex;

/// The Region whose API answers for Route 53 health-check metrics and alarms.
pub const GLOBAL_METRICS_REGION: &str = "us-east-1";

/// Loads one [`SdkConfig`] per Region, once, and hands out clients.
///
/// Handover talks to two Regions (and us-east-1 for Route 53 metrics), so
/// clients are per Region. Build this once at cold start, outside the handler.
#[derive(Debug, Default)]
pub struct Aws {
    configs: Mutex<BTreeMap<String, SdkConfig>>,
    app: Option<&'static str>,
}

/// The CLI's name in the user agent (`app/handover-cli`): CloudTrail and
/// the test router tell its calls from the functions'.
pub const CLI_APP_NAME: &str = "handover-cli";

/// The loader every client's config comes from: the SDK's defaults (the
/// environment's credentials, endpoint and retry settings), `region`, bounded
/// timeouts, and `app/<function>` in the user agent, so CloudTrail (and the
/// test router) can tell which Handover function made a call. `app` names
/// it; else the Lambda function running (`AWS_LAMBDA_FUNCTION_NAME`). Wire
/// tests load it with their own HTTP client, so they see these settings.
pub fn loader(region: &str, app: Option<&str>) -> aws_config::ConfigLoader {
    let mut loader =
        aws_config::defaults(BehaviorVersion::latest()).region(Region::new(region.to_owned()));
    if let Some(app) = app
        .map(str::to_owned)
        .or_else(|| std::env::var("AWS_LAMBDA_FUNCTION_NAME").ok())
        .and_then(|name| {
            aws_config::AppName::new(
                name.chars()
                    .filter(|c| c.is_ascii_alphanumeric() || "-_.".contains(*c))
                    .collect::<String>(),
            )
            .ok()
        })
    {
        loader = loader.app_name(app);
    }
    loader.timeout_config(
        aws_config::timeout::TimeoutConfig::builder()
            .connect_timeout(Duration::from_secs(3))
            .operation_attempt_timeout(Duration::from_secs(10))
            .build(),
    )
}

impl Aws {
    /// An empty cache; configs load on first use. The user agent names the
    /// Lambda function running (`AWS_LAMBDA_FUNCTION_NAME`), if any.
    pub fn new() -> Self {
        Self::default()
    }

    /// As [`Aws::new`], with `app` as the user agent's app name (the CLI).
    pub fn named(app: &'static str) -> Self {
        Self {
            app: Some(app),
            ..Self::default()
        }
    }

    /// The shared SDK config for `region`, with bounded timeouts.
    pub async fn config(&self, region: &str) -> SdkConfig {
        let mut configs = self.configs.lock().await;
        if let Some(c) = configs.get(region) {
            return c.clone();
        }
        let config = loader(region, self.app).load().await;
        configs.insert(region.to_owned(), config.clone());
        config
    }

    /// DynamoDB in `region`.
    pub async fn dynamodb(&self, region: &str) -> aws_sdk_dynamodb::Client {
        aws_sdk_dynamodb::Client::new(&self.config(region).await)
    }
    /// Step Functions in `region`.
    pub async fn sfn(&self, region: &str) -> aws_sdk_sfn::Client {
        aws_sdk_sfn::Client::new(&self.config(region).await)
    }
    /// EC2 in `region` (readiness reads the fence group).
    #[cfg(feature = "ec2")]
    pub async fn ec2(&self, region: &str) -> aws_sdk_ec2::Client {
        aws_sdk_ec2::Client::new(&self.config(region).await)
    }
    /// EventBridge in `region` (readiness's change event on the default bus).
    #[cfg(feature = "events")]
    pub async fn eventbridge(&self, region: &str) -> aws_sdk_eventbridge::Client {
        aws_sdk_eventbridge::Client::new(&self.config(region).await)
    }
    /// RDS in `region`.
    #[cfg(feature = "rds")]
    pub async fn rds(&self, region: &str) -> aws_sdk_rds::Client {
        aws_sdk_rds::Client::new(&self.config(region).await)
    }
    /// Route 53 (a global service; its control plane is in us-east-1).
    pub async fn route53(&self) -> aws_sdk_route53::Client {
        aws_sdk_route53::Client::new(&self.config(GLOBAL_METRICS_REGION).await)
    }
    /// CloudWatch in `region`.
    pub async fn cloudwatch(&self, region: &str) -> aws_sdk_cloudwatch::Client {
        aws_sdk_cloudwatch::Client::new(&self.config(region).await)
    }
    /// Elastic Load Balancing (v2) in `region`.
    #[cfg(feature = "elbv2")]
    pub async fn elbv2(&self, region: &str) -> aws_sdk_elasticloadbalancingv2::Client {
        aws_sdk_elasticloadbalancingv2::Client::new(&self.config(region).await)
    }
    /// Bedrock Runtime in `region`.
    #[cfg(feature = "bedrock")]
    pub async fn bedrock(&self, region: &str) -> aws_sdk_bedrockruntime::Client {
        aws_sdk_bedrockruntime::Client::new(&self.config(region).await)
    }
    /// SSM Parameter Store in `region`.
    pub async fn ssm(&self, region: &str) -> aws_sdk_ssm::Client {
        aws_sdk_ssm::Client::new(&self.config(region).await)
    }
    /// SNS in `region`.
    #[cfg(feature = "sns")]
    pub async fn sns(&self, region: &str) -> aws_sdk_sns::Client {
        aws_sdk_sns::Client::new(&self.config(region).await)
    }
    /// Secrets Manager in `region`.
    #[cfg(feature = "secrets")]
    pub async fn secrets(&self, region: &str) -> aws_sdk_secretsmanager::Client {
        aws_sdk_secretsmanager::Client::new(&self.config(region).await)
    }
    /// S3 in `region` (see [`s3_client`]).
    #[cfg(feature = "s3")]
    pub async fn s3(&self, region: &str) -> aws_sdk_s3::Client {
        s3_client(&self.config(region).await)
    }
}

/// An S3 client for `config`. It addresses buckets as AWS recommends
/// (virtual-hosted, `bucket.s3.<region>.amazonaws.com`) and path-style only
/// under an endpoint override (`AWS_ENDPOINT_URL`, or S3's own
/// `AWS_ENDPOINT_URL_S3`), where an emulator serves one host. An S3
/// endpoint set only in a shared-config `services` section is not seen as
/// an override: Handover's worlds set the variables.
#[cfg(feature = "s3")]
pub fn s3_client(config: &SdkConfig) -> aws_sdk_s3::Client {
    let overridden =
        config.endpoint_url().is_some() || std::env::var_os("AWS_ENDPOINT_URL_S3").is_some();
    let conf = aws_sdk_s3::config::Builder::from(config)
        .force_path_style(overridden)
        .build();
    aws_sdk_s3::Client::from_conf(conf)
}

/// Was this SDK error a throttle, timeout or server fault (worth retrying)?
pub fn is_transient<E>(err: &SdkError<E, aws_smithy_runtime_api::http::Response>) -> bool
where
    E: aws_smithy_types::error::metadata::ProvideErrorMetadata,
{
    match err {
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) | SdkError::ResponseError(_) => {
            true
        }
        SdkError::ServiceError(se)
            if se.raw().status().is_server_error() || se.raw().status().as_u16() == 429 =>
        {
            true
        }
        SdkError::ServiceError(se) => matches!(
            se.err().code(),
            Some(
                "ThrottlingException"
                    | "Throttling"
                    | "ProvisionedThroughputExceededException"
                    | "RequestLimitExceeded"
                    | "InternalServerError"
                    | "InternalFailure"
                    | "ServiceUnavailable"
                    | "TooManyRequestsException"
                    | "PriorRequestNotComplete"
            )
        ),
        _ => false,
    }
}
