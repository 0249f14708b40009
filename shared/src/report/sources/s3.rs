//! Storing report files (s3:PutObject) and reading one back (s3:GetObject).

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

/// Read a stored report file (s3:GetObject).
pub trait ReportReader {
    /// The object's bytes; `Ok(None)` when there is no such key.
    fn get(
        &self,
        bucket: &str,
        key: &str,
    ) -> impl std::future::Future<Output = Result<Option<Vec<u8>>, AwsError>> + Send;
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

impl ReportReader for S3Reports {
    #[instrument(skip(self), fields(region = %self.region))]
    async fn get(&self, bucket: &str, key: &str) -> Result<Option<Vec<u8>>, AwsError> {
        let out = match self
            .client
            .get_object()
            .bucket(bucket)
            .key(key)
            .send()
            .await
        {
            Ok(out) => out,
            Err(e) if e.as_service_error().is_some_and(|se| se.is_no_such_key()) => {
                return Ok(None);
            }
            Err(e) => return Err(call_error("s3", "GetObject", &self.region, e)),
        };
        let body = out.body.collect().await.map_err(|e| AwsError::Shape {
            service: "s3",
            op: "GetObject",
            region: self.region.clone(),
            problem: format!("reading the body: {e}"),
        })?;
        Ok(Some(body.into_bytes().to_vec()))
    }
}
