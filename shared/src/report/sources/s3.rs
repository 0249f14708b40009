//! Storing report files (s3:PutObject).

use crate::adapters::{AwsError, call_error};
use crate::aws::Aws;
use tracing::instrument;

/// Store report files (s3:PutObject).
pub trait ReportStore {
    /// Put `body` at `key` in `bucket`.
    fn put(
        &self,
        bucket: &str,
        key: &str,
        body: Vec<u8>,
        content_type: &str,
    ) -> impl std::future::Future<Output = Result<(), AwsError>> + Send;
}

/// S3 in one Region.
#[derive(Debug, Clone)]
pub struct S3Reports {
    client: aws_sdk_s3::Client,
    region: String,
}

impl S3Reports {
    /// S3 in `region` (the bucket's Region, S).
    pub async fn new(aws: &Aws, region: &str) -> Self {
        Self {
            client: aws.s3(region).await,
            region: region.to_owned(),
        }
    }
}

impl ReportStore for S3Reports {
    #[instrument(skip(self, body), fields(region = %self.region, bytes = body.len()))]
    async fn put(
        &self,
        bucket: &str,
        key: &str,
        body: Vec<u8>,
        content_type: &str,
    ) -> Result<(), AwsError> {
        self.client
            .put_object()
            .bucket(bucket)
            .key(key)
            .content_type(content_type)
            .body(aws_sdk_s3::primitives::ByteStream::from(body))
            .send()
            .await
            .map_err(|e| call_error("s3", "PutObject", &self.region, e))?;
        Ok(())
    }
}
