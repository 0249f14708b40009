//! A consumer of the default event bus, as an operator would build one: an
//! EventBridge rule on one source and service, with an SQS queue as its
//! target. Tests read what reached the target, not what was sent.

use handover::aws::Aws;
use serde_json::{Value, json};

/// A rule on the default bus and the queue it delivers to.
pub struct BusConsumer {
    sqs: aws_sdk_sqs::Client,
    queue_url: String,
}

impl BusConsumer {
    /// A rule in `region` matching events of `source` whose `detail.service`
    /// is `service` (tests share moto's default bus), delivering to a new queue.
    pub async fn new(aws: &Aws, region: &str, source: &str, service: &str) -> Self {
        let config = aws.config(region).await;
        let sqs = aws_sdk_sqs::Client::new(&config);
        let name = crate::unique("handover-bus");
        let queue_url = sqs
            .create_queue()
            .queue_name(&name)
            .send()
            .await
            .expect("create the queue in moto")
            .queue_url
            .expect("a queue URL");
        let queue_arn = sqs
            .get_queue_attributes()
            .queue_url(&queue_url)
            .attribute_names(aws_sdk_sqs::types::QueueAttributeName::QueueArn)
            .send()
            .await
            .expect("the queue's ARN")
            .attributes
            .and_then(|a| {
                a.get(&aws_sdk_sqs::types::QueueAttributeName::QueueArn)
                    .cloned()
            })
            .expect("a queue ARN");
        let events = aws_sdk_eventbridge::Client::new(&config);
        let pattern = json!({"source": [source], "detail": {"service": [service]}});
        events
            .put_rule()
            .name(&name)
            .event_pattern(pattern.to_string())
            .send()
            .await
            .expect("put the rule in moto");
        events
            .put_targets()
            .rule(&name)
            .targets(
                aws_sdk_eventbridge::types::Target::builder()
                    .id("queue")
                    .arn(queue_arn)
                    .build()
                    .expect("a target"),
            )
            .send()
            .await
            .expect("put the rule's target in moto");
        Self { sqs, queue_url }
    }

    /// Every event delivered so far (each an EventBridge event as the
    /// target receives it), removed from the queue.
    pub async fn events(&self) -> Vec<Value> {
        let mut out = Vec::new();
        loop {
            let got = self
                .sqs
                .receive_message()
                .queue_url(&self.queue_url)
                .max_number_of_messages(10)
                .wait_time_seconds(1)
                .send()
                .await
                .expect("receive from the queue in moto");
            let messages = got.messages.unwrap_or_default();
            if messages.is_empty() {
                return out;
            }
            for m in messages {
                let body = m.body.unwrap_or_default();
                out.push(serde_json::from_str(&body).expect("an event is JSON"));
                if let Some(handle) = m.receipt_handle {
                    self.sqs
                        .delete_message()
                        .queue_url(&self.queue_url)
                        .receipt_handle(handle)
                        .send()
                        .await
                        .expect("delete the message in moto");
                }
            }
        }
    }
}
