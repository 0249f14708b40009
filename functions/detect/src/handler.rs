//! Parse the scheduled event, run one tick, report what it did.

use handover::adapters::{CloudWatch, HttpProbe, Route53, Sfn};
use handover::aws::Aws;
use handover::config::{ConfigError, optional, required};
use handover::detect::{Detector, Signals, TickReport};
use handover::error::FunctionError;
use handover::live_plan::{LivePlan, StackPlan};
use handover::store::Store;
use std::sync::Arc;

/// Built once per container. The plan is read again once a minute old
/// (detect stays warm for hours): each run starts with the plan as it is.
pub struct Deps {
    pub plan: LivePlan,
    pub aws: Arc<Aws>,
    pub store: Store,
    pub probe: HttpProbe,
    pub route53: Route53,
    pub sfn: Sfn,
    pub drill: bool,
    pub stack: String,
    pub clock: Box<dyn handover::clock::Clock + Send + Sync>,
    pub control: handover::adapters::traffic::Route53Control,
    pub http: reqwest::Client,
}

impl Deps {
    /// From `TABLE_NAME`, `STATE_MACHINE_ARN`, `AWS_REGION`, the plan
    /// (`PLAN_PARAMETER` or `PLAN_FILE`) and `HANDOVER_DRILL` (`true` marks runs as drills).
    pub async fn from_env() -> Result<Self, FunctionError> {
        let aws = Arc::new(Aws::new());
        let region = required("AWS_REGION")?;
        let clock = handover::clock::SystemClock;
        let plan = LivePlan::load(StackPlan::from_env(aws.clone())?, &clock).await?;
        let drill = match optional("HANDOVER_DRILL").as_deref() {
            None | Some("false") => false,
            Some("true") => true,
            Some(other) => {
                return Err(ConfigError::Invalid {
                    name: "HANDOVER_DRILL",
                    problem: format!("{other:?} is not true or false"),
                }
                .into());
            }
        };
        Ok(Deps {
            store: Store::new(aws.dynamodb(&region).await, required("TABLE_NAME")?),
            probe: HttpProbe::new().map_err(|e| {
                FunctionError::new(handover::error::ErrorName::Fatal, e.to_string())
            })?,
            route53: Route53::new(&aws).await,
            sfn: Sfn::new(&aws, &region, &required("STATE_MACHINE_ARN")?).await,
            stack: required("HANDOVER_STACK_NAME")?,
            clock: Box::new(clock),
            control: handover::adapters::traffic::Route53Control::new(&aws).await,
            http: public_http()?,
            plan,
            aws,
            drill,
        })
    }
}

/// The client for GETs through the public name.
pub fn public_http() -> Result<reqwest::Client, FunctionError> {
    reqwest::Client::builder()
        .user_agent("handover-detect/1")
        .build()
        .map_err(|e| FunctionError::new(handover::error::ErrorName::Fatal, e.to_string()))
}

/// One tick. Only EventBridge Scheduler's payload is accepted (the template's
/// one trigger for detect); anything else is `Handover.InvalidInput` and
/// starts nothing.
pub async fn handler(event: serde_json::Value, deps: &Deps) -> Result<TickReport, FunctionError> {
    let event = handover::scheduler::SchedulerEvent::parse(event, "detect")?;
    let tick = event.time;
    let public = handover::public::PublicName {
        dns: &deps.control,
        http: &deps.http,
    };
    let plan = deps.plan.current(deps.clock.as_ref()).await?;
    // The plan names the alarm's Region (us-east-1 for Route 53's metrics).
    let alarms = match &plan.detection.alarm {
        Some(a) => Some(CloudWatch::new(&deps.aws, &a.region).await),
        None => None,
    };
    let detector = Detector {
        plan: &plan,
        store: &deps.store,
        signals: Signals {
            endpoint: &deps.probe,
            health: &deps.route53,
            alarms: alarms.as_ref(),
        },
        starter: &deps.sfn,
        drill: deps.drill,
        stack: &deps.stack,
        public: Some(&public),
    };
    Ok(detector.tick(tick, deps.clock.now()).await?)
}
