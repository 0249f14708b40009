//! Reading the execution history (states:GetExecutionHistory), page by page.

use crate::adapters::{AwsError, call_error};
use crate::aws::Aws;
use crate::report::facts::RunFacts;
use crate::report::history::HistoryEvent;
use chrono::{DateTime, Utc};
use tracing::instrument;

/// GetExecutionHistory's largest page.
pub const PAGE_SIZE: i32 = 1000;

/// One page of history.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HistoryPage {
    /// Events, in order.
    pub events: Vec<HistoryEvent>,
    /// Token of the next page, if any.
    pub next_token: Option<String>,
}

/// Read an execution's history (states:GetExecutionHistory).
pub trait ExecutionHistory {
    /// One page of at most `max` events, after `token`.
    fn page(
        &self,
        execution_arn: &str,
        token: Option<String>,
        max: i32,
    ) -> impl std::future::Future<Output = Result<HistoryPage, AwsError>> + Send;
}

/// Read the whole history page by page and fold it into [`RunFacts`]; only
/// one page is held at a time.
pub async fn fold_history<H: ExecutionHistory>(
    history: &H,
    execution_arn: &str,
    page_size: i32,
) -> Result<RunFacts, AwsError> {
    let mut facts = RunFacts::default();
    let mut token = None;
    loop {
        let page = history.page(execution_arn, token.take(), page_size).await?;
        for e in &page.events {
            facts.push(e);
        }
        match page.next_token {
            Some(t) if !t.is_empty() => token = Some(t),
            _ => return Ok(facts),
        }
    }
}

/// Step Functions history over the SDK.
#[derive(Debug, Clone)]
pub struct SfnHistory {
    client: aws_sdk_sfn::Client,
    region: String,
}

impl SfnHistory {
    /// Step Functions in `region`.
    pub async fn new(aws: &Aws, region: &str) -> Self {
        Self {
            client: aws.sfn(region).await,
            region: region.to_owned(),
        }
    }
}

fn sfn_time(t: &aws_smithy_types::DateTime) -> DateTime<Utc> {
    t.to_millis()
        .ok()
        .and_then(DateTime::<Utc>::from_timestamp_millis)
        .unwrap_or_default()
}

/// Our event from the SDK's.
pub fn from_sdk(e: &aws_sdk_sfn::types::HistoryEvent) -> HistoryEvent {
    let entered = e.state_entered_event_details();
    let exited = e.state_exited_event_details();
    let failure = [
        e.task_failed_event_details()
            .map(|d| (d.error(), d.cause(), Some(d.resource()))),
        e.task_timed_out_event_details()
            .map(|d| (d.error(), d.cause(), Some(d.resource()))),
        e.task_start_failed_event_details()
            .map(|d| (d.error(), d.cause(), Some(d.resource()))),
        e.task_submit_failed_event_details()
            .map(|d| (d.error(), d.cause(), Some(d.resource()))),
        e.lambda_function_failed_event_details()
            .map(|d| (d.error(), d.cause(), None)),
        e.lambda_function_timed_out_event_details()
            .map(|d| (d.error(), d.cause(), None)),
        e.lambda_function_start_failed_event_details()
            .map(|d| (d.error(), d.cause(), None)),
        e.lambda_function_schedule_failed_event_details()
            .map(|d| (d.error(), d.cause(), None)),
        e.activity_failed_event_details()
            .map(|d| (d.error(), d.cause(), None)),
        e.activity_timed_out_event_details()
            .map(|d| (d.error(), d.cause(), None)),
        e.execution_failed_event_details()
            .map(|d| (d.error(), d.cause(), None)),
        e.execution_aborted_event_details()
            .map(|d| (d.error(), d.cause(), None)),
        e.execution_timed_out_event_details()
            .map(|d| (d.error(), d.cause(), None)),
    ]
    .into_iter()
    .flatten()
    .next();
    let resource = failure
        .and_then(|f| f.2)
        .or_else(|| e.task_scheduled_event_details().map(|d| d.resource()));
    HistoryEvent {
        id: e.id(),
        previous_event_id: e.previous_event_id(),
        timestamp: sfn_time(e.timestamp()),
        kind: e.r#type().as_str().to_owned(),
        state: entered
            .map(|d| d.name())
            .or(exited.map(|d| d.name()))
            .map(str::to_owned),
        input: e
            .execution_started_event_details()
            .and_then(|d| d.input())
            .map(str::to_owned),
        output: exited
            .and_then(|d| d.output())
            .or_else(|| {
                e.execution_succeeded_event_details()
                    .and_then(|d| d.output())
            })
            .map(str::to_owned),
        error: failure.and_then(|f| f.0).map(str::to_owned),
        cause: failure.and_then(|f| f.1).map(str::to_owned),
        resource: resource.map(str::to_owned),
    }
}

/// One execution's status and input (states:DescribeExecution).
pub trait ExecutionLookup {
    /// The execution as a status change (its current status), and its input.
    fn describe(
        &self,
        execution_arn: &str,
    ) -> impl std::future::Future<
        Output = Result<(crate::report::audit::ExecutionStatusChange, String), AwsError>,
    > + Send;
}

impl ExecutionLookup for SfnHistory {
    #[instrument(skip(self), fields(region = %self.region))]
    async fn describe(
        &self,
        execution_arn: &str,
    ) -> Result<(crate::report::audit::ExecutionStatusChange, String), AwsError> {
        let out = self
            .client
            .describe_execution()
            .execution_arn(execution_arn)
            .send()
            .await
            .map_err(|e| call_error("states", "DescribeExecution", &self.region, e))?;
        let ms = |t: &aws_smithy_types::DateTime| t.to_millis().ok();
        let status = crate::report::audit::ExecutionStatusChange {
            execution_arn: out.execution_arn().to_owned(),
            state_machine_arn: out.state_machine_arn().to_owned(),
            name: out.name().unwrap_or_default().to_owned(),
            status: out.status().as_str().to_owned(),
            start_date: ms(out.start_date()),
            stop_date: out.stop_date().and_then(ms),
            error: out.error().map(str::to_owned),
            cause: out.cause().map(str::to_owned),
            input: out.input().map(str::to_owned),
        };
        Ok((status, out.input().unwrap_or_default().to_owned()))
    }
}

impl ExecutionHistory for SfnHistory {
    #[instrument(skip(self), fields(region = %self.region))]
    async fn page(
        &self,
        execution_arn: &str,
        token: Option<String>,
        max: i32,
    ) -> Result<HistoryPage, AwsError> {
        let out = self
            .client
            .get_execution_history()
            .execution_arn(execution_arn)
            .max_results(max)
            .include_execution_data(true)
            .set_next_token(token)
            .send()
            .await
            .map_err(|e| call_error("states", "GetExecutionHistory", &self.region, e))?;
        Ok(HistoryPage {
            events: out.events().iter().map(from_sdk).collect(),
            next_token: out.next_token().map(str::to_owned),
        })
    }
}
