//! Test support shared by Handover's integration tests.
//!
//! Integration tests run against the local AWS world that
//! `scripts/with-emulator.sh` starts (moto behind the Handover router). They
//! find it through `HANDOVER_TEST_AWS_ENDPOINT`. Without it they fail with a
//! message saying how to run them: an emulator test never passes by skipping.

use handover::aws::Aws;
use handover::store::{Store, create_table};
use std::sync::atomic::{AtomicU64, Ordering};

pub mod app;
pub mod blocks;
pub mod bus;
pub mod campaign;
pub mod drill;
pub mod fixtures;
pub mod lambdas;
pub mod logs;
pub mod pace;
pub mod pdb;
pub mod postgres;
pub mod process;
pub mod public;
pub mod runtime_api;
pub mod stack;
pub mod triggers;
pub mod wire;
pub mod world;

/// The Region tests use for the Handover table (Region S in the plans).
pub const TEST_REGION: &str = "ap-northeast-1";

/// The emulator endpoint. Panics (the test fails) when it is not set.
pub fn endpoint() -> String {
    match std::env::var("HANDOVER_TEST_AWS_ENDPOINT") {
        Ok(e) if !e.is_empty() => e,
        _ => panic!(
            "HANDOVER_TEST_AWS_ENDPOINT is not set: this test needs the moto emulator. \
             Run it through `make test` (or scripts/with-emulator.sh cargo test ...). \
             It does not skip{}.",
            if std::env::var("CI").as_deref() == Ok("true") {
                " under CI=true"
            } else {
                ""
            }
        ),
    }
}

/// A name unique to this process and call, for tables, buckets and executions.
pub fn unique(prefix: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("{prefix}-{}-{n}-{nanos:x}", std::process::id())
}

/// SDK clients pointed at the emulator.
pub fn aws() -> Aws {
    let endpoint = endpoint();
    // The SDK reads the endpoint and the credentials from the environment.
    // with-emulator.sh exports both, so under `make test` nothing is
    // written here: writing the environment while other test threads read
    // it is a data race. A direct run with only HANDOVER_TEST_AWS_ENDPOINT
    // set gets them written once, by the first caller.
    static SET: std::sync::Once = std::sync::Once::new();
    SET.call_once(|| {
        let endpoint_set = std::env::var("AWS_ENDPOINT_URL").as_deref() == Ok(endpoint.as_str());
        let keys_set = std::env::var("AWS_ACCESS_KEY_ID").is_ok();
        // SAFETY: only in a direct run, once, before this caller builds a client.
        unsafe {
            if !endpoint_set {
                std::env::set_var("AWS_ENDPOINT_URL", &endpoint);
            }
            if !keys_set {
                std::env::set_var("AWS_ACCESS_KEY_ID", "test");
                std::env::set_var("AWS_SECRET_ACCESS_KEY", "test");
            }
        }
    });
    Aws::new()
}

/// A fresh Handover table in the emulator, and a store on it.
pub async fn fresh_store(aws: &Aws) -> Store {
    let client = aws.dynamodb(TEST_REGION).await;
    let table = unique("handover");
    create_table(&client, &table)
        .await
        .expect("create table in moto");
    Store::new(client, table)
}

/// The router's log of the AWS calls it saw (service, Region, action,
/// target, calling function or tool, HTTP status).
pub async fn calls() -> Vec<serde_json::Value> {
    reqwest::get(format!("{}/_handover/calls", endpoint()))
        .await
        .expect("router calls")
        .json()
        .await
        .expect("router calls answer")
}

/// POST a JSON control document to the router (faults, health statuses).
pub async fn control(path: &str, body: serde_json::Value) -> serde_json::Value {
    let url = format!("{}/_handover/{path}", endpoint());
    reqwest::Client::new()
        .post(url)
        .json(&body)
        .send()
        .await
        .expect("router control call")
        .json()
        .await
        .expect("router control answer")
}

/// GET a router control document (`calls`, `model`).
async fn router_get(path: &str) -> serde_json::Value {
    let url = format!("{}/_handover/{path}", endpoint());
    reqwest::get(url)
        .await
        .unwrap_or_else(|e| panic!("router {path}: {e}"))
        .json()
        .await
        .unwrap_or_else(|e| panic!("router {path} is not JSON: {e}"))
}

/// The Converse requests the router's Bedrock stand-in has seen for `model_id`.
pub async fn converse_requests(model_id: &str) -> Vec<serde_json::Value> {
    router_get("model").await[model_id]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// An SNS topic in moto whose notifications the router keeps (an http
/// subscription on `/_handover/sns`). Returns its ARN.
pub async fn operator_topic(aws: &Aws, region: &str) -> String {
    let sns = aws.sns(region).await;
    let arn = sns
        .create_topic()
        .name(unique("handover-operators"))
        .send()
        .await
        .expect("create topic in moto")
        .topic_arn
        .expect("topic ARN");
    sns.subscribe()
        .topic_arn(&arn)
        .protocol("http")
        .endpoint(format!("{}/_handover/sns", endpoint()))
        .send()
        .await
        .expect("subscribe the router");
    arn
}

/// The notifications moto's SNS delivered to `topic_arn` (Subject, Message, …).
pub async fn topic_messages(topic_arn: &str) -> Vec<serde_json::Value> {
    router_get("sns")
        .await
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|n| n["TopicArn"] == topic_arn)
        .collect()
}

/// Every call the router has seen, as it logged them (service, region,
/// action, target, caller).
pub async fn call_log() -> Vec<serde_json::Value> {
    router_get("calls")
        .await
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// Add fault rules to the router (see `World.rules` in handover_emulator.py):
/// each `{"mode": "throttle"|"error"|"latency"|"timeout"|"lost"|"kill", ...filters}`.
pub async fn add_fault_rules(rules: serde_json::Value) {
    control("rules", serde_json::json!({ "add": rules })).await;
}

/// Remove the fault rules with these ids (other tests' rules stay).
pub async fn remove_fault_rules(ids: &[&str]) {
    control("rules", serde_json::json!({ "remove": ids })).await;
}

/// The faults the router applied so far: one entry per faulted call, with
/// the call (service, region, action, target, caller), the rule id and mode.
pub async fn fault_log() -> Vec<serde_json::Value> {
    router_get("rules").await["log"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// Make the router's RDS take AWS's time for `scope` ("*" or one DB
/// instance identifier): promotion `modifying` then `rebooting` seconds, and
/// how long a security-group change shows `adding`/`removing`.
pub async fn realistic_rds(scope: &str, modifying_s: f64, rebooting_s: f64, sg_pending_s: f64) {
    control(
        "realism",
        serde_json::json!({ scope: {
            "promote_modifying_s": modifying_s,
            "promote_rebooting_s": rebooting_s,
            "sg_pending_s": sg_pending_s,
        }}),
    )
    .await;
}

/// Make a RebootDBInstance of `scope` take `seconds` (`rebooting`, the
/// engine stopping as it begins), as RDS's does.
pub async fn realistic_reboot(scope: &str, seconds: f64) {
    stale_reboot(scope, 0.0, seconds).await;
}

/// As [`realistic_reboot`], but for `stale` seconds after RDS accepted the
/// reboot, DescribeDBInstances still shows `available` and the reboot has
/// not begun (users report this of RDS).
pub async fn stale_reboot(scope: &str, stale: f64, seconds: f64) {
    control(
        "realism",
        serde_json::json!({ scope: { "reboot_s": seconds, "reboot_stale_s": stale } }),
    )
    .await;
}

/// How many times the router saw `action` naming `target` (e.g. an RDS identifier).
pub async fn count_calls(action: &str, target: &str) -> usize {
    call_log()
        .await
        .iter()
        .filter(|c| c["action"] == action && c["target"] == target)
        .count()
}

/// A state machine in the emulator that only waits (so executions stay
/// RUNNING and can be counted). Returns its ARN.
pub async fn waiting_state_machine(aws: &Aws, region: &str) -> String {
    let client = aws.sfn(region).await;
    let definition =
        r#"{"StartAt":"Hold","States":{"Hold":{"Type":"Wait","Seconds":3600,"End":true}}}"#;
    client
        .create_state_machine()
        .name(unique("handover-test"))
        .definition(definition)
        .role_arn("arn:aws:iam::123456789012:role/handover-states")
        .send()
        .await
        .expect("create state machine in moto")
        .state_machine_arn
}

/// An execution whose first state waits for a task token, and that token.
/// The task is `events:putEvents.waitForTaskToken` (moto needs no Lambda
/// for it); the token is read from the TaskScheduled event.
pub async fn waiting_task(aws: &Aws, region: &str) -> (String, String) {
    waiting_task_with(
        aws,
        region,
        r#"{"incident_id":"shop-ap-northeast-2-20261130T141155Z"}"#,
    )
    .await
}

/// [`waiting_task`] for a run started with `input` (a Handover run's
/// execution input, when the decision reads the run's plan).
pub async fn waiting_task_with(aws: &Aws, region: &str, input: &str) -> (String, String) {
    let sfn = aws.sfn(region).await;
    use aws_sdk_sfn::types::HistoryEventType;
    use serde_json::{Value, json};
    let definition = json!({"StartAt": "RequestApproval", "States": {"RequestApproval": {
        "Type": "Task",
        "Resource": "arn:aws:states:::events:putEvents.waitForTaskToken",
        "Parameters": {"Entries": [{"Source": "handover.test", "DetailType": "approval", "Detail": {"token.$": "$$.Task.Token"}}]},
        "TimeoutSeconds": 120, "ResultPath": "$.approval", "End": true}}});
    let machine = sfn
        .create_state_machine()
        .name(unique("approval-wait"))
        .definition(definition.to_string())
        .role_arn("arn:aws:iam::123456789012:role/handover-states")
        .send()
        .await
        .unwrap()
        .state_machine_arn;
    let execution = sfn
        .start_execution()
        .state_machine_arn(machine)
        .name(unique("run"))
        .input(input)
        .send()
        .await
        .unwrap()
        .execution_arn;
    for _ in 0..100 {
        let history = sfn
            .get_execution_history()
            .execution_arn(&execution)
            .send()
            .await
            .unwrap();
        let scheduled = history
            .events()
            .iter()
            .filter(|e| e.r#type() == &HistoryEventType::TaskScheduled)
            .find_map(|e| e.task_scheduled_event_details());
        let waiting = history
            .events()
            .iter()
            .any(|e| e.r#type() == &HistoryEventType::TaskSubmitted);
        if let (Some(s), true) = (scheduled, waiting) {
            let params: Value = serde_json::from_str(s.parameters()).unwrap();
            let detail = &params["Entries"][0]["Detail"];
            let detail: Value = match detail.as_str() {
                Some(text) => serde_json::from_str(text).unwrap(),
                None => detail.clone(),
            };
            return (
                execution,
                detail["token"]
                    .as_str()
                    .expect("token in Detail")
                    .to_owned(),
            );
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("the task never started waiting for its token");
}

/// Executions of a state machine (name, input).
pub async fn executions(aws: &Aws, region: &str, state_machine_arn: &str) -> Vec<(String, String)> {
    let client = aws.sfn(region).await;
    let list = client
        .list_executions()
        .state_machine_arn(state_machine_arn)
        .send()
        .await
        .expect("list executions");
    let mut out = Vec::new();
    for e in list.executions() {
        let d = client
            .describe_execution()
            .execution_arn(e.execution_arn())
            .send()
            .await
            .expect("describe execution");
        out.push((
            e.name().to_owned(),
            d.input().unwrap_or_default().to_owned(),
        ));
    }
    out
}

/// The shipped example plan, parsed (tests adjust endpoints and ids).
pub fn example_plan() -> handover::plan::Plan {
    handover::plan::Plan::from_json(include_str!("../../infra/plan.example.jsonc"))
        .expect("example plan is valid")
}

/// Wait until `execution` is no longer RUNNING (polling every 100 ms, at most
/// `limit`) and return its description. Panics when it is still running.
pub async fn ended_execution(
    aws: &Aws,
    region: &str,
    execution: &str,
    limit: std::time::Duration,
) -> aws_sdk_sfn::operation::describe_execution::DescribeExecutionOutput {
    let sfn = aws.sfn(region).await;
    let until = std::time::Instant::now() + limit;
    loop {
        let d = sfn
            .describe_execution()
            .execution_arn(execution)
            .send()
            .await
            .expect("describe execution");
        if d.status() != &aws_sdk_sfn::types::ExecutionStatus::Running {
            return d;
        }
        assert!(
            std::time::Instant::now() < until,
            "{execution} still running after {limit:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// Credentials for a session of IAM role `role` (moto issues them for any
/// role), as an operator has after assuming their on-call role: moto's
/// `GetCallerIdentity` then answers
/// `arn:aws:sts::123456789012:assumed-role/<name>/<session>`.
pub struct RoleSession {
    /// `AWS_ACCESS_KEY_ID`.
    pub access_key_id: String,
    /// `AWS_SECRET_ACCESS_KEY`.
    pub secret_access_key: String,
    /// `AWS_SESSION_TOKEN`.
    pub session_token: String,
}

/// `sts:AssumeRole` of `role` as session `name` on the emulator.
pub async fn assume_role(aws: &Aws, role: &str, name: &str) -> RoleSession {
    let sts = aws_sdk_sts::Client::new(&aws.config(TEST_REGION).await);
    let c = sts
        .assume_role()
        .role_arn(role)
        .role_session_name(name)
        .send()
        .await
        .expect("sts:AssumeRole on the emulator")
        .credentials
        .expect("AssumeRole answers credentials");
    RoleSession {
        access_key_id: c.access_key_id,
        secret_access_key: c.secret_access_key,
        session_token: c.session_token,
    }
}

/// The `handover` CLI binary beside the running test or tool (`cargo
/// build --workspace --bins` puts it in the same target directory).
pub fn cli_binary() -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    let dir = exe.parent().expect("exe dir");
    // Test binaries live in target/<profile>/deps; tools in target/<profile>.
    let dir = if dir.ends_with("deps") {
        dir.parent().expect("profile dir")
    } else {
        dir
    };
    dir.join("handover")
}

/// The report bucket in `region` on the emulator, made if it is not there
/// yet (test binaries share one emulator; whichever runs first makes it).
pub async fn report_bucket(aws: &Aws, region: &str, bucket: &str) {
    let made = aws
        .s3(region)
        .await
        .create_bucket()
        .bucket(bucket)
        .create_bucket_configuration(
            aws_sdk_s3::types::CreateBucketConfiguration::builder()
                .location_constraint(aws_sdk_s3::types::BucketLocationConstraint::from(region))
                .build(),
        )
        .send()
        .await;
    if let Err(e) = made
        && !e
            .as_service_error()
            .is_some_and(|se| se.is_bucket_already_owned_by_you())
    {
        panic!("create bucket {bucket}: {}", handover::error::chain(&e));
    }
}
