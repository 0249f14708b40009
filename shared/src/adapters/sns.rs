//! SNS: telling the operators (sns:Publish on the stack's operator topic),
//! the second channel beside Slack.

use super::{AwsError, call_error};
use crate::aws::Aws;
use tracing::instrument;

/// Publish to the operator topic.
pub trait OperatorNotice {
    /// Publish `message` with `subject`; returns the SNS message id.
    fn publish(
        &self,
        subject: &str,
        message: &str,
    ) -> impl std::future::Future<Output = Result<String, AwsError>> + Send;
    /// How many confirmed subscriptions the topic has: a publish to a topic
    /// nobody (yet) listens to asks nobody.
    fn confirmed_subscribers(
        &self,
    ) -> impl std::future::Future<Output = Result<usize, AwsError>> + Send;
}

/// The stack's operator topic.
#[derive(Debug, Clone)]
pub struct Sns {
    client: aws_sdk_sns::Client,
    region: String,
    topic_arn: String,
}

impl Sns {
    /// The topic `topic_arn`, in the Region its ARN names.
    pub async fn new(aws: &Aws, topic_arn: &str) -> Self {
        let region = topic_arn.split(':').nth(3).unwrap_or_default().to_owned();
        Self {
            client: aws.sns(&region).await,
            region,
            topic_arn: topic_arn.to_owned(),
        }
    }

    /// The topic's ARN.
    pub fn topic_arn(&self) -> &str {
        &self.topic_arn
    }
}

/// SNS subjects are at most 100 printable ASCII characters.
fn subject_line(subject: &str) -> String {
    subject
        .chars()
        .map(|c| {
            if c.is_ascii() && !c.is_ascii_control() {
                c
            } else {
                '-'
            }
        })
        .take(100)
        .collect()
}

impl OperatorNotice for Sns {
    #[instrument(skip(self, message))]
    async fn publish(&self, subject: &str, message: &str) -> Result<String, AwsError> {
        let out = self
            .client
            .publish()
            .topic_arn(&self.topic_arn)
            .subject(subject_line(subject))
            .message(message)
            .send()
            .await
            .map_err(|e| call_error("sns", "Publish", &self.region, e))?;
        Ok(out.message_id.unwrap_or_default())
    }

    #[instrument(skip(self))]
    async fn confirmed_subscribers(&self) -> Result<usize, AwsError> {
        let out = self
            .client
            .list_subscriptions_by_topic()
            .topic_arn(&self.topic_arn)
            .send()
            .await
            .map_err(|e| call_error("sns", "ListSubscriptionsByTopic", &self.region, e))?;
        // An unconfirmed e-mail subscription's ARN is "PendingConfirmation".
        Ok(out
            .subscriptions()
            .iter()
            .filter(|s| s.subscription_arn().is_some_and(|a| a.starts_with("arn:")))
            .count())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subjects_fit_what_sns_accepts() {
        let s = subject_line(&format!("Handover — approval {}", "x".repeat(200)));
        assert_eq!(s.len(), 100);
        assert!(s.is_ascii());
        assert!(s.starts_with("Handover - approval"));
    }
}
