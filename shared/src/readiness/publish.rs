//! Writing what [`super::output`] renders: the files to the report bucket
//! (s3:PutObject) and the change to the default bus (events:PutEvents).

use super::Readiness;
use super::output::{self, EVENT_DETAIL_TYPE, EVENT_SOURCE};
use crate::adapters::{AwsError, BusPublisher};
use crate::report::sources::ReportStore;

/// A readiness output that did not reach its store.
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    /// A file was not stored.
    #[error("the readiness report was not stored at s3://{bucket}/{key}")]
    Store {
        /// The report bucket.
        bucket: String,
        /// The key that failed (earlier ones were written).
        key: String,
        /// The S3 error.
        #[source]
        source: AwsError,
    },
    /// The change event was not put on the bus.
    #[error("the readiness change was not put on EventBridge")]
    Event(#[source] AwsError),
}

/// Write the evaluation's files to `bucket`: the dated copies, then
/// `latest.*`. Returns the URL of `latest.json`.
pub async fn store<S: ReportStore>(
    s3: &S,
    bucket: &str,
    r: &Readiness,
    service: &str,
) -> Result<String, PublishError> {
    for f in output::files(r, service) {
        s3.put(bucket, &f.key, f.body.into_bytes(), f.content_type)
            .await
            .map_err(|source| PublishError::Store {
                bucket: bucket.to_owned(),
                key: f.key.clone(),
                source,
            })?;
    }
    Ok(format!("s3://{bucket}/{}", output::latest_json_key()))
}

/// Put "Handover Readiness Changed" on the bus: the checks whose verdict
/// changed since `previous`. Returns the event id.
pub async fn put_change<B: BusPublisher>(
    bus: &B,
    previous: Option<&Readiness>,
    r: &Readiness,
    service: &str,
) -> Result<String, PublishError> {
    let detail = output::change_detail(previous, r, service);
    // A struct of strings, numbers and enums always serialises.
    let json = serde_json::to_string(&detail).unwrap_or_default();
    put_detail(bus, &json).await
}

/// Put a "Handover Readiness Changed" event with this `detail` (JSON).
pub async fn put_detail<B: BusPublisher>(bus: &B, detail: &str) -> Result<String, PublishError> {
    bus.put(EVENT_SOURCE, EVENT_DETAIL_TYPE, detail)
        .await
        .map_err(PublishError::Event)
}
