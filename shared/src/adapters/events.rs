//! EventBridge: one event on the account's default bus
//! (events:PutEvents), for consumers that build on Handover's results.

use super::AwsError;

/// Put one event on a bus (events:PutEvents).
pub trait BusPublisher {
    /// Put an event of `source` and `detail_type` with the JSON `detail`;
    /// returns the event id EventBridge gave it.
    fn put(
        &self,
        source: &str,
        detail_type: &str,
        detail: &str,
    ) -> impl std::future::Future<Output = Result<String, AwsError>> + Send;
}

/// The default event bus of one Region.
#[cfg(feature = "events")]
#[derive(Debug, Clone)]
pub struct DefaultBus {
    client: aws_sdk_eventbridge::Client,
    region: String,
}

#[cfg(feature = "events")]
impl DefaultBus {
    /// The default bus in `region` (the stack's, S).
    pub async fn new(aws: &crate::aws::Aws, region: &str) -> Self {
        Self {
            client: aws.eventbridge(region).await,
            region: region.to_owned(),
        }
    }
}

#[cfg(feature = "events")]
impl BusPublisher for DefaultBus {
    #[tracing::instrument(skip(self, detail), fields(region = %self.region, bytes = detail.len()))]
    async fn put(&self, source: &str, detail_type: &str, detail: &str) -> Result<String, AwsError> {
        let entry = aws_sdk_eventbridge::types::PutEventsRequestEntry::builder()
            .source(source)
            .detail_type(detail_type)
            .detail(detail)
            .build();
        let out = self
            .client
            .put_events()
            .entries(entry)
            .send()
            .await
            .map_err(|e| super::call_error("events", "PutEvents", &self.region, e))?;
        // PutEvents answers 200 with a failed entry inside (EventBridge API
        // reference, PutEvents: "FailedEntryCount").
        let first = out.entries().first();
        match first.and_then(|e| e.event_id()) {
            Some(id) if out.failed_entry_count() == 0 => Ok(id.to_owned()),
            _ => Err(AwsError::Shape {
                service: "events",
                op: "PutEvents",
                region: self.region.clone(),
                problem: format!(
                    "the event was not put: {} {}",
                    first.and_then(|e| e.error_code()).unwrap_or("no entry"),
                    first.and_then(|e| e.error_message()).unwrap_or_default()
                ),
            }),
        }
    }
}
