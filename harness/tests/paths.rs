//! Path tests: moto executes the real statemachine.asl.json; every Lambda task
//! is a real binary behind `cargo lambda watch`; approvals arrive as signed
//! Slack clicks through the slack function's API Gateway route.
//!
//! The functions' environment (table, plan file for the Slack allow-list) is
//! fixed when cargo lambda starts, so the paths share one table and run one
//! at a time; each gets its own databases, DNS, apps and state machine.

use chrono::Utc;
use handover::aws::Aws;
use handover::plan::{Canary, Plan};
use handover::slack::message::{ACTION_APPROVE, ACTION_APPROVE_DATA_LOSS, ACTION_REJECT};
use handover::slack::stand_in::SlackStandIn;
use handover::store::Store;
use handover_testkit::app::App;
use handover_testkit::blocks::collect_buttons;
use handover_testkit::lambdas::{Lambdas, definition};
use handover_testkit::world::{
    provision_databases, provision_dns, put_db_secret, put_replica_lag, run_input, test_postgres,
    unique_plan,
};
use handover_testkit::{TEST_REGION, aws, control, unique};
use serde_json::{Value, json};
use std::time::Duration;
use tokio::sync::{Mutex, MutexGuard, OnceCell};

#[path = "paths/cli_decisions.rs"]
mod cli_decisions;

const SIGNING_SECRET: &str = "e2e-signing-secret-not-for-production";
const BOT_TOKEN: &str = "xoxb-e2e-bot-token-not-for-production";

struct World {
    aws: Aws,
    /// The fence and promote roles the stack made (readiness simulates them).
    roles: handover::readiness::iam::FailoverRoles,
    lambdas: Lambdas,
    slack: SlackStandIn,
    store: Store,
    bot_secret: String,
    signing_secret: String,
    operator_topic: String,
}

static WORLD: OnceCell<Mutex<World>> = OnceCell::const_new();

/// Each #[tokio::test] has its own runtime, which stops when the test ends;
/// the shared stand-ins live on this one instead.
static RUNTIME: std::sync::LazyLock<tokio::runtime::Runtime> = std::sync::LazyLock::new(|| {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
});

async fn world() -> MutexGuard<'static, World> {
    WORLD
        .get_or_init(|| async {
            let aws = aws();
            let table = unique("handover-e2e");
            let client = aws.dynamodb(TEST_REGION).await;
            handover::store::create_table(&client, &table)
                .await
                .unwrap();
            let store = Store::new(client, &table);
            let secrets = aws.secrets(TEST_REGION).await;
            let mk = |name: String, value: &str| {
                let secrets = secrets.clone();
                let value = value.to_owned();
                async move {
                    secrets
                        .create_secret()
                        .name(name)
                        .secret_string(value)
                        .send()
                        .await
                        .unwrap()
                        .arn
                        .unwrap()
                }
            };
            // audit writes its report to the plan's bucket.
            handover_testkit::report_bucket(&aws, TEST_REGION, "handover-test-reports").await;
            let bot_secret = mk(unique("slack-bot"), BOT_TOKEN).await;
            let signing_secret = mk(unique("slack-signing"), SIGNING_SECRET).await;
            let slack = RUNTIME.spawn(SlackStandIn::start()).await.unwrap().unwrap();
            // The slack function reads the allow-list and secret ARNs from its plan at cold start.
            let mut plan = unique_plan();
            plan.slack.bot_token_secret_arn = bot_secret.clone();
            plan.slack.signing_secret_arn = signing_secret.clone();
            let plan_parameter =
                handover_testkit::world::put_plan_parameter(&aws, TEST_REGION, &plan).await;
            // detect is not invoked by the path tests (they start runs
            // themselves), but the stack gives every function its ARN.
            let state_machine = handover_testkit::waiting_state_machine(&aws, TEST_REGION).await;
            let operator_topic = handover_testkit::operator_topic(&aws, TEST_REGION).await;
            let roles =
                handover_testkit::stack::provision_failover_roles(&aws, &plan, &table).await;
            let mut env = handover_testkit::world::stack_environment(
                &plan,
                &table,
                &plan_parameter,
                &state_machine,
                &operator_topic,
                &roles,
                false,
            );
            env.push(("SLACK_API_BASE", slack.api_base()));
            let lambdas = Lambdas::start(&env).await;
            Mutex::new(World {
                aws,
                roles,
                lambdas,
                slack,
                store,
                bot_secret,
                signing_secret,
                operator_topic,
            })
        })
        .await
        .lock()
        .await
}

struct Run {
    arn: String,
    incident: String,
    plan: Plan,
    _apps: std::sync::Arc<(App, App)>,
    state_machine: String,
}

/// A fresh plan for one path: the world's Slack secrets and short timings.
fn path_plan(w: &World) -> Plan {
    let mut plan = unique_plan();
    plan.slack.bot_token_secret_arn = w.bot_secret.clone();
    plan.slack.signing_secret_arn = w.signing_secret.clone();
    plan.timings.approval_timeout_s = 60;
    plan.timings.promotion_poll_s = 1;
    plan.timings.promotion_max_polls = 10;
    plan.timings.verify_deadline_s = 10;
    plan
}

/// P's and S's apps as the plan's endpoints and read check, and the
/// public name's DNS.
async fn serve_apps(aws: &Aws, plan: &mut Plan, p_app: &App, s_app: &App) {
    plan.regions.primary.endpoint = format!("{}/health", p_app.url);
    plan.regions.standby.endpoint = format!("{}/health", s_app.url);
    plan.dns.read_url = Some(format!("{}/health", s_app.url));
    provision_dns(aws, plan, "p-alb.ap-northeast-2.elb.amazonaws.com").await;
}

/// One primary record per path (the table is shared): the record and the
/// lock go, and P is primary at epoch 1.
async fn fresh_record(w: &World, plan: &Plan) {
    let ddb = w.aws.dynamodb(TEST_REGION).await;
    for pk in ["PRIMARY", "LOCK"] {
        ddb.delete_item()
            .table_name(w.store.table())
            .key("pk", aws_sdk_dynamodb::types::AttributeValue::S(pk.into()))
            .key(
                "sk",
                aws_sdk_dynamodb::types::AttributeValue::S("STATE".into()),
            )
            .send()
            .await
            .unwrap();
    }
    w.store
        .init_primary(
            &plan.regions.primary.region,
            &plan.regions.primary.db_instance_id,
            Utc::now(),
        )
        .await
        .unwrap();
}

/// A state machine of the real definition, for one path.
async fn state_machine(sfn: &aws_sdk_sfn::Client) -> String {
    sfn.create_state_machine()
        .name(unique("handover"))
        .definition(definition(TEST_REGION))
        .role_arn("arn:aws:iam::123456789012:role/handover-states")
        .send()
        .await
        .unwrap()
        .state_machine_arn
}

/// Provision a fresh world for one path and start its execution.
async fn start(w: &World, lag: f64, tweak: impl FnOnce(&mut Plan)) -> Run {
    start_with(w, Some(lag), tweak).await
}

/// `lag: None`: CloudWatch holds no ReplicaLag sample of S.
async fn start_with(w: &World, lag: Option<f64>, tweak: impl FnOnce(&mut Plan)) -> Run {
    let aws = &w.aws;
    let mut plan = path_plan(w);
    let p_app = App::start(503).await;
    let s_app = App::start(200).await;
    serve_apps(aws, &mut plan, &p_app, &s_app).await;
    provision_databases(aws, &plan).await;
    if let Some(lag) = lag {
        put_replica_lag(
            aws,
            &plan.regions.standby.region,
            &plan.regions.standby.db_instance_id,
            lag,
            Utc::now(),
        )
        .await;
    }
    let (port, password) = test_postgres();
    plan.canary = Canary::Postgres {
        host: Some("127.0.0.1".into()),
        port,
        database: "handover".into(),
        secret_arn: put_db_secret(aws, &plan.regions.standby.region, "handover", &password).await,
        table: "handover_canary".into(),
        require_tls: false,
        ca_secret_arn: None,
        tls_server_name: None,
    };
    tweak(&mut plan);
    plan.validate().unwrap();
    control("health", json!({ &plan.regions.primary.health_check_id: false, &plan.regions.standby.health_check_id: true })).await;
    fresh_record(w, &plan).await;
    let sfn = aws.sfn(TEST_REGION).await;
    let sm = state_machine(&sfn).await;
    let (arn, incident) = start_execution(aws, &sm, &plan).await;
    Run {
        arn,
        incident,
        plan,
        _apps: std::sync::Arc::new((p_app, s_app)),
        state_machine: sm,
    }
}

/// Wait for the approval message of `run` and return its button keys by action id.
async fn buttons(w: &World, run: &Run) -> Vec<(String, String)> {
    for _ in 0..600 {
        for m in w.slack.messages() {
            let text = m.body.to_string();
            if text.contains(&run.incident) {
                let mut out = Vec::new();
                collect_buttons(&m.body, &mut out);
                return out;
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("no approval message for {} within 120 s", run.incident);
}

/// Click a button as `user`: a block_actions request signed exactly as Slack
/// signs it, delivered as the template's HTTP API route delivers it.
async fn click(w: &World, action: &str, key: &str, user: &str) -> (u16, String) {
    handover_testkit::lambdas::slack_click(
        SIGNING_SECRET,
        user,
        action,
        key,
        &w.slack.response_url(&unique("r")),
    )
    .await
}

async fn approve(w: &World, run: &Run) {
    let keys = buttons(w, run).await;
    let (action, key) = keys
        .iter()
        .find(|(a, _)| a == ACTION_APPROVE || a == ACTION_APPROVE_DATA_LOSS)
        .expect("an approve button")
        .clone();
    let (status, body) = click(w, &action, &key, "U0ONCALL01").await;
    assert_eq!(status, 200, "{body}");
}

struct Ended {
    status: String,
    states: Vec<String>,
    output: Value,
    error: Option<String>,
    cause: Option<String>,
}

async fn ended(w: &World, run: &Run) -> Ended {
    let d =
        handover_testkit::ended_execution(&w.aws, TEST_REGION, &run.arn, Duration::from_secs(180))
            .await;
    let sfn = w.aws.sfn(TEST_REGION).await;
    let mut states = Vec::new();
    let mut token = None;
    loop {
        let h = sfn
            .get_execution_history()
            .execution_arn(&run.arn)
            .max_results(1000)
            .set_next_token(token)
            .send()
            .await
            .unwrap();
        for e in h.events() {
            if let Some(d) = e.state_entered_event_details() {
                states.push(d.name().to_owned());
            }
        }
        token = h.next_token;
        if token.is_none() {
            break;
        }
    }
    Ended {
        status: d.status.as_str().to_owned(),
        states,
        output: d
            .output
            .as_deref()
            .map(|o| serde_json::from_str(o).unwrap())
            .unwrap_or(Value::Null),
        error: d.error,
        cause: d.cause,
    }
}

fn path(e: &Ended) -> String {
    e.states.join(" > ")
}

#[tokio::test]
async fn path_approve_fence_promote_switch_verify_succeeds() {
    let w = world().await;
    let run = start(&w, 5.0, |_| {}).await;
    approve(&w, &run).await;
    let e = ended(&w, &run).await;
    assert_eq!(
        e.status,
        "SUCCEEDED",
        "{} {:?} {:?}\n{}",
        path(&e),
        e.error,
        e.cause,
        w.lambdas.output()
    );
    assert!(path(&e).starts_with("Diagnose > Triage > RequestApproval > Recheck > RecheckChoice > Fence > FenceChoice > Promote > WaitPromotion > PromotionStatus"), "{}", path(&e));
    assert!(
        path(&e).ends_with("Switch > Verify > FailedOver > Done"),
        "{}",
        path(&e)
    );
    let o = &e.output;
    assert_eq!(o["outcome"], "failed_over");
    assert_eq!(o["approval"]["approver_id"], "U0ONCALL01");
    assert_eq!(o["fence"]["outcome"], "confirmed");
    assert_eq!(o["promotion"]["status"], "promoted");
    assert_eq!(o["promotion"]["rpo_s"], 5.0);
    assert_eq!(o["promotion"]["epoch"], 2);
    assert!(o["switch"]["switched_at"].is_string());
    assert_eq!(o["verify"]["write"]["ok"], true);
    let rec = w.store.primary().await.unwrap().unwrap();
    assert_eq!(
        (rec.region.as_str(), rec.epoch),
        (run.plan.regions.standby.region.as_str(), 2)
    );
}

/// No ReplicaLag sample at all (CloudWatch silent): the approval offers no
/// plain Approve, only "accept unknown data loss"; that click fails over and
/// the run records the RPO as unknown.
#[tokio::test]
async fn path_unknown_lag_fails_over_only_on_an_accepted_unknown_loss() {
    let w = world().await;
    let run = start_with(&w, None, |_| {}).await;
    let keys = buttons(&w, &run).await;
    assert!(
        !keys.iter().any(|(a, _)| a == ACTION_APPROVE),
        "a plain approve with the loss unknown: {keys:?}"
    );
    let (action, key) = keys
        .iter()
        .find(|(a, _)| a == ACTION_APPROVE_DATA_LOSS)
        .expect("the accept-unknown-loss button")
        .clone();
    assert_eq!(click(&w, &action, &key, "U0ONCALL01").await.0, 200);
    let e = ended(&w, &run).await;
    assert_eq!(
        e.status,
        "SUCCEEDED",
        "{} {:?} {:?}",
        path(&e),
        e.error,
        e.cause
    );
    let o = &e.output;
    assert_eq!(o["approval"]["data_loss_acknowledged"], true);
    assert_eq!(o["promotion"]["status"], "promoted");
    assert_eq!(o["promotion"]["rpo_s"], -1.0, "recorded as unknown");
}

#[tokio::test]
async fn path_reject_ends_failed_with_who_rejected_and_nothing_promoted() {
    let w = world().await;
    let run = start(&w, 5.0, |_| {}).await;
    let keys = buttons(&w, &run).await;
    let key = keys
        .iter()
        .find(|(a, _)| a == ACTION_REJECT)
        .unwrap()
        .1
        .clone();
    assert_eq!(click(&w, ACTION_REJECT, &key, "U0ONCALL02").await.0, 200);
    let e = ended(&w, &run).await;
    assert_eq!(e.status, "FAILED", "{}", path(&e));
    assert_eq!(e.error.as_deref(), Some("Handover.Rejected"));
    assert!(
        e.cause
            .as_deref()
            .unwrap_or_default()
            .contains("U0ONCALL02"),
        "{:?}",
        e.cause
    );
    assert!(!e.states.contains(&"Fence".to_string()));
    assert_eq!(w.store.primary().await.unwrap().unwrap().epoch, 1);
}

#[tokio::test]
async fn path_approval_timeout_ends_failed_and_changes_nothing() {
    let w = world().await;
    let run = start(&w, 5.0, |p| p.timings.approval_timeout_s = 3).await;
    let e = ended(&w, &run).await;
    assert_eq!(e.status, "FAILED", "{}", path(&e));
    assert_eq!(
        e.error.as_deref(),
        Some("Handover.ApprovalTimedOut"),
        "{}",
        path(&e)
    );
    assert!(
        path(&e).ends_with("RequestApproval > ApprovalTimedOut"),
        "{}",
        path(&e)
    );
    assert_eq!(w.store.primary().await.unwrap().unwrap().epoch, 1);
}

#[tokio::test]
async fn path_recheck_finds_p_recovered_and_aborts() {
    let w = world().await;
    let run = start(&w, 5.0, |_| {}).await;
    let keys = buttons(&w, &run).await;
    // P comes back while the person reads the message.
    run._apps.0.set_status(200);
    control(
        "health",
        json!({ &run.plan.regions.primary.health_check_id: true }),
    )
    .await;
    let (action, key) = keys
        .iter()
        .find(|(a, _)| a.starts_with("handover_approve"))
        .unwrap()
        .clone();
    assert_eq!(click(&w, &action, &key, "U0ONCALL01").await.0, 200);
    let e = ended(&w, &run).await;
    assert_eq!(e.error.as_deref(), Some("Handover.Aborted"), "{}", path(&e));
    assert!(
        path(&e).ends_with("Recheck > RecheckChoice > Aborted"),
        "{}",
        path(&e)
    );
    assert!(e.cause.unwrap_or_default().contains("no failover"));
}

#[tokio::test]
async fn path_blocked_replica_escalates_without_asking() {
    let w = world().await;
    let run = start(&w, -1.0, |_| {}).await;
    let e = ended(&w, &run).await;
    assert_eq!(
        e.error.as_deref(),
        Some("Handover.Escalated"),
        "{}",
        path(&e)
    );
    assert_eq!(path(&e), "Diagnose > Triage > Escalate");
}

#[tokio::test]
async fn path_verify_deadline_missed_fails_with_verify_failed() {
    let w = world().await;
    let run = start(&w, 5.0, |p| {
        p.timings.verify_deadline_s = 2;
        if let Canary::Postgres { database, .. } = &mut p.canary {
            *database = "handover_ro".into(); // the writer still refuses writes
        }
    })
    .await;
    approve(&w, &run).await;
    let e = ended(&w, &run).await;
    assert_eq!(
        e.error.as_deref(),
        Some("Handover.VerifyFailed"),
        "{} {:?}",
        path(&e),
        e.cause
    );
    assert!(path(&e).ends_with("Verify > VerifyFailed"), "{}", path(&e));
    assert!(e.cause.unwrap_or_default().contains("read-only"));
}

async fn clear_faults() {
    control(
        "faults",
        json!({"rds:ap-northeast-2": null, "rds:ap-northeast-1": null, "route53:*": null}),
    )
    .await;
}

#[tokio::test]
async fn path_fence_unconfirmed_under_stop_fails_and_promotes_nothing() {
    let w = world().await;
    clear_faults().await;
    let run = start(&w, 5.0, |p| {
        p.fence.on_unconfirmed = handover::plan::OnUnconfirmed::Stop
    })
    .await;
    // P's RDS API stops answering before the fence runs.
    control(
        "faults",
        json!({"rds:ap-northeast-2": {"mode": "timeout", "seconds": 3}}),
    )
    .await;
    approve(&w, &run).await;
    let e = ended(&w, &run).await;
    clear_faults().await;
    assert_eq!(
        e.error.as_deref(),
        Some("Handover.FenceUnconfirmed"),
        "{} {:?}",
        path(&e),
        e.cause
    );
    assert!(
        path(&e).ends_with("Fence > FenceChoice > FenceUnconfirmed"),
        "{}",
        path(&e)
    );
    assert!(e.cause.unwrap_or_default().contains("timed out"));
    let rec = w.store.primary().await.unwrap().unwrap();
    assert_eq!(rec.epoch, 1, "nothing promoted");
}

#[tokio::test]
async fn path_fence_unconfirmed_under_proceed_goes_on_to_succeed() {
    let w = world().await;
    clear_faults().await;
    let run = start(&w, 5.0, |p| {
        p.fence.on_unconfirmed = handover::plan::OnUnconfirmed::Proceed
    })
    .await;
    control(
        "faults",
        json!({"rds:ap-northeast-2": {"mode": "timeout", "seconds": 3}}),
    )
    .await;
    approve(&w, &run).await;
    let e = ended(&w, &run).await;
    clear_faults().await;
    assert_eq!(
        e.status,
        "SUCCEEDED",
        "{} {:?} {:?}",
        path(&e),
        e.error,
        e.cause
    );
    assert_eq!(e.output["fence"]["outcome"], "unconfirmed");
    assert_eq!(e.output["fence"]["policy"], "proceed");
}

#[tokio::test]
async fn path_refused_when_another_execution_moved_the_epoch() {
    let w = world().await;
    clear_faults().await;
    let run = start(&w, 5.0, |_| {}).await;
    buttons(&w, &run).await;
    // While the person reads, another execution completes a failover on epoch 1.
    let s = &run.plan.regions.standby;
    w.store
        .begin_fencing(1, "arn:other", &s.region, Utc::now())
        .await
        .unwrap();
    w.store
        .claim_promotion(1, "arn:other", (1.0, Utc::now()), Utc::now())
        .await
        .unwrap();
    w.store
        .complete_promotion(1, "arn:other", &s.region, &s.db_instance_id, Utc::now())
        .await
        .unwrap();
    approve(&w, &run).await;
    let e = ended(&w, &run).await;
    assert_eq!(
        e.error.as_deref(),
        Some("Handover.Refused"),
        "{} {:?}",
        path(&e),
        e.cause
    );
    assert!(path(&e).ends_with("Fence > Refused"), "{}", path(&e));
    assert!(e.cause.unwrap_or_default().contains("epoch moved to 2"));
}

#[tokio::test]
async fn path_a_transient_error_is_retried_and_the_run_succeeds() {
    let w = world().await;
    clear_faults().await;
    let run = start(&w, 5.0, |_| {}).await;
    // Route 53 answers the switch function with 503s until its first
    // invocation has failed as Handover.Transient; then it recovers and the
    // state machine's Retry runs the function again.
    control(
        "faults",
        json!({"route53:*": {"mode": "error", "caller": "switch"}}),
    )
    .await;
    approve(&w, &run).await;
    let sfn = w.aws.sfn(TEST_REGION).await;
    for _ in 0..600 {
        let h = sfn
            .get_execution_history()
            .execution_arn(&run.arn)
            .max_results(1000)
            .send()
            .await
            .unwrap();
        if h.events()
            .iter()
            .any(|e| e.lambda_function_failed_event_details().is_some())
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    clear_faults().await;
    let e = ended(&w, &run).await;
    assert_eq!(
        e.status,
        "SUCCEEDED",
        "{} {:?} {:?}",
        path(&e),
        e.error,
        e.cause
    );
    let h = sfn
        .get_execution_history()
        .execution_arn(&run.arn)
        .max_results(1000)
        .send()
        .await
        .unwrap();
    // A Lambda-ARN task's failure is a LambdaFunctionFailed event.
    let transient = h
        .events()
        .iter()
        .filter_map(|ev| {
            ev.lambda_function_failed_event_details()
                .and_then(|d| d.error())
                .or_else(|| ev.task_failed_event_details().and_then(|d| d.error()))
        })
        .filter(|e| *e == "Handover.Transient")
        .count();
    let kinds: Vec<String> = h
        .events()
        .iter()
        .map(|e| e.r#type().as_str().to_owned())
        .collect();
    assert_eq!(
        transient, 1,
        "one failed attempt, then the Retry succeeded: {kinds:?}"
    );
}

/// Issue 34: S's RDS throttled for a minute after the fence. With four
/// attempts from 2 s the Promote step gave up within 15 to 30 s, the run
/// failed and P was unfenced and held off for the cooldown. Its retries
/// now last minutes: the run promotes S once the throttling ends.
#[tokio::test]
async fn path_s_rds_throttled_for_a_minute_after_the_fence_still_promotes() {
    let w = world().await;
    clear_faults().await;
    let run = start(&w, 5.0, |_| {}).await;
    let id = unique("throttled-s");
    handover_testkit::add_fault_rules(json!([{"id": id, "mode": "throttle", "service": "rds",
        "region": TEST_REGION, "caller": "promote", "count": 1_000_000}]))
    .await;
    approve(&w, &run).await;
    let throttled = || async {
        handover_testkit::fault_log()
            .await
            .iter()
            .filter(|f| f["rule"] == id.as_str())
            .count()
    };
    for _ in 0..600 {
        if throttled().await > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(throttled().await > 0, "promote never reached S's RDS");
    tokio::time::sleep(Duration::from_secs(60)).await;
    handover_testkit::remove_fault_rules(&[&id]).await;
    let refused = throttled().await;
    let e = ended(&w, &run).await;
    assert_eq!(
        e.status,
        "SUCCEEDED",
        "{} {:?} {:?}",
        path(&e),
        e.error,
        e.cause
    );
    assert!(
        refused >= 5,
        "{refused} throttled calls: the minute was real"
    );
    let rec = w.store.primary().await.unwrap().unwrap();
    assert_eq!(rec.epoch, 2, "S promoted once");
}

/// The fence's process dies right after ModifyDBInstance returns (as an
/// out-of-memory kill or a host failure does). Lambda answers the
/// invocation with Runtime.ExitError, the state machine retries the step,
/// and the retried fence reads the transition and the world: it records
/// the groups from before (not the deny-all group it already set), confirms,
/// and the run fails over with one modify and one promotion.
#[tokio::test]
async fn path_the_fence_process_killed_after_its_modify_is_retried_and_the_run_succeeds() {
    let w = world().await;
    clear_faults().await;
    let run = start(&w, 5.0, |_| {}).await;
    let p_db = run.plan.regions.primary.db_instance_id.clone();
    let before = p_groups(&w, &run).await;
    let id = unique("kill-fence");
    handover_testkit::add_fault_rules(json!([
        {"id": id, "mode": "kill", "caller": "fence", "service": "rds", "action": "ModifyDBInstance", "target": p_db, "count": 1},
    ]))
    .await;
    approve(&w, &run).await;
    let e = ended(&w, &run).await;
    let killed = handover_testkit::fault_log()
        .await
        .into_iter()
        .find(|f| f["rule"] == id.as_str())
        .expect("the kill happened");
    assert!(
        !killed["killed"].as_array().is_some_and(|k| k.is_empty()),
        "a fence process was killed: {killed}"
    );
    assert_eq!(
        e.status,
        "SUCCEEDED",
        "{} {:?} {:?}\n{}",
        path(&e),
        e.error,
        e.cause,
        w.lambdas.output()
    );
    let h = w
        .aws
        .sfn(TEST_REGION)
        .await
        .get_execution_history()
        .execution_arn(&run.arn)
        .max_results(1000)
        .send()
        .await
        .unwrap();
    let exits = h
        .events()
        .iter()
        .filter_map(|ev| {
            ev.lambda_function_failed_event_details()
                .and_then(|d| d.error())
        })
        .filter(|e| *e == "Runtime.ExitError")
        .count();
    assert_eq!(exits, 1, "one attempt died, the Retry ran it again");
    assert_eq!(
        handover_testkit::count_calls("ModifyDBInstance", &p_db).await,
        1,
        "the retry saw the deny-all group already set"
    );
    assert_eq!(
        handover_testkit::count_calls(
            "PromoteReadReplica",
            &run.plan.regions.standby.db_instance_id
        )
        .await,
        1
    );
    assert_eq!(
        e.output["fence"]["previous_security_groups"],
        json!(before),
        "failback restores what P had, not the fence group"
    );
}

/// Slack refuses the question (the stand-in is down for it): the operator
/// topic gets it with the CLI fallback, the run keeps waiting, and an
/// operator on the plan's `cli_approvers` runs the notice's `handover
/// approve` with their own (assumed-role) credentials. The run fails over,
/// with the IAM session recorded as the approver.
#[tokio::test]
async fn path_slack_down_the_cli_approves_as_the_iam_principal_and_the_run_succeeds() {
    use handover::slack::stand_in::Fault;
    let w = world().await;
    w.slack.fail_next([Fault::Api("channel_not_found".into())]);
    let run = start(&w, 5.0, |_| {}).await;
    let notice = {
        let mut found = None;
        for _ in 0..600 {
            found = handover_testkit::topic_messages(&w.operator_topic)
                .await
                .into_iter()
                .find(|n| {
                    n["Message"]
                        .as_str()
                        .is_some_and(|m| m.contains(&run.incident))
                });
            if found.is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        found.expect("an operator notice within 120 s")
    };
    let body = notice["Message"].as_str().unwrap();
    assert!(body.contains("channel_not_found"), "{body}");
    let command = body
        .lines()
        .find(|l| l.starts_with("handover approve --key "))
        .expect("the notice has the approve command");
    let args: Vec<&str> = command.split_whitespace().skip(1).collect();
    assert!(
        command.contains(&format!(
            "--decision-url {} --region {TEST_REGION}",
            handover_testkit::triggers::decision_url()
        )),
        "{command}"
    );
    let key = args[2];
    let item = w
        .store
        .approval(&handover::store::approval::ApprovalSelector::Key(
            key.to_owned(),
        ))
        .await
        .unwrap()
        .expect("the notice's key is stored");
    assert_eq!(item.incident, run.incident);
    let oncall = "arn:aws:iam::123456789012:role/handover-oncall";
    let session = handover_testkit::assume_role(&w.aws, oncall, "alice@example.com").await;
    let mut cli = std::process::Command::new(handover_testkit::cli_binary());
    cli.args(&args)
        .arg("--yes")
        .env_remove("HANDOVER_DECISION_URL")
        .env_remove("TABLE_NAME")
        .env("AWS_ENDPOINT_URL", handover_testkit::endpoint())
        .env("AWS_ACCESS_KEY_ID", &session.access_key_id)
        .env("AWS_SECRET_ACCESS_KEY", &session.secret_access_key)
        .env("AWS_SESSION_TOKEN", &session.session_token);
    let out = tokio::task::spawn_blocking(move || cli.output())
        .await
        .unwrap()
        .expect("run handover approve (scripts/paths.sh builds it)");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    let e = ended(&w, &run).await;
    assert_eq!(
        e.status,
        "SUCCEEDED",
        "{} {:?} {:?}",
        path(&e),
        e.error,
        e.cause
    );
    let principal = "arn:aws:sts::123456789012:assumed-role/handover-oncall/alice@example.com";
    assert_eq!(e.output["approval"]["approver_id"], principal);
    assert_eq!(e.output["approval"]["approver_name"], "On-call (CLI)");
    assert!(
        stdout.contains(principal),
        "the CLI says who decided: {stdout}"
    );
}

/// Issue 12, scenario 1: the lag rises from 5 s at approval to 300 s by the
/// re-check, and the approval accepted no data loss. promote would refuse
/// after the fence, leaving the service with no writer; the re-check stops
/// the run before the fence instead, and P keeps serving writes.
#[tokio::test]
async fn path_lag_rising_past_the_target_after_approval_stops_before_the_fence() {
    let w = world().await;
    let run = start(&w, 5.0, |_| {}).await;
    let keys = buttons(&w, &run).await;
    let s = &run.plan.regions.standby;
    put_replica_lag(
        &w.aws,
        &s.region,
        &s.db_instance_id,
        300.0,
        Utc::now() + chrono::Duration::seconds(1),
    )
    .await;
    let (action, key) = keys
        .iter()
        .find(|(a, _)| a == ACTION_APPROVE)
        .expect("a plain approve (5 s was within the target)")
        .clone();
    assert_eq!(click(&w, &action, &key, "U0ONCALL01").await.0, 200);
    let e = ended(&w, &run).await;
    assert_eq!(e.error.as_deref(), Some("Handover.Aborted"), "{}", path(&e));
    assert!(
        path(&e).ends_with("Recheck > RecheckChoice > Aborted"),
        "{}",
        path(&e)
    );
    let cause = e.cause.unwrap_or_default();
    assert!(cause.contains("Stopped before the fence"), "{cause}");
    assert!(cause.contains("300 s"), "{cause}");
    // Nothing was fenced, nothing claimed.
    let groups = p_groups(&w, &run).await;
    assert!(
        !groups.contains(&run.plan.regions.primary.fence_security_group_id),
        "{groups:?}"
    );
    assert!(
        w.store
            .primary()
            .await
            .unwrap()
            .unwrap()
            .transition
            .is_none()
    );
}

/// Start one execution of `plan` on `state_machine`, as detect would: a new
/// incident name, the run input. Returns (execution ARN, incident).
async fn start_execution(aws: &Aws, state_machine: &str, plan: &Plan) -> (String, String) {
    let incident = unique("inc");
    let input = run_input(plan, &incident);
    let arn = aws
        .sfn(TEST_REGION)
        .await
        .start_execution()
        .state_machine_arn(state_machine)
        .name(&incident)
        .input(serde_json::to_string(&input).unwrap())
        .send()
        .await
        .unwrap()
        .execution_arn;
    (arn, incident)
}

/// The next incident of the same service: a new execution on the same plan,
/// table and record (nothing reset).
async fn start_again(w: &World, run: &Run) -> Run {
    let (arn, incident) = start_execution(&w.aws, &run.state_machine, &run.plan).await;
    Run {
        arn,
        incident,
        plan: run.plan.clone(),
        _apps: run._apps.clone(),
        state_machine: run.state_machine.clone(),
    }
}

/// Deliver `run`'s terminal status to audit as the template's EventBridge
/// rule does, and return what audit reports.
async fn audit(w: &World, run: &Run) -> Value {
    let d = w
        .aws
        .sfn(TEST_REGION)
        .await
        .describe_execution()
        .execution_arn(&run.arn)
        .send()
        .await
        .unwrap();
    let ms = |t: &aws_sdk_sfn::primitives::DateTime| t.to_millis().ok();
    let event = handover_testkit::triggers::rule_event(
        "AuditFunction",
        TEST_REGION,
        "aws.states",
        "Step Functions Execution Status Change",
        std::slice::from_ref(&run.arn),
        json!({
            "executionArn": run.arn, "stateMachineArn": run.state_machine, "name": d.name(),
            "status": d.status().as_str(), "startDate": ms(d.start_date()), "stopDate": d.stop_date().and_then(ms),
            "input": d.input(), "inputDetails": {"included": true}, "output": d.output(), "outputDetails": {"included": true},
            "error": d.error(), "cause": d.cause(),
        }),
        &[("Workflow", &run.state_machine)],
    );
    handover_testkit::lambdas::invoke("audit", &event)
        .await
        .expect("audit")
}

async fn p_groups(w: &World, run: &Run) -> Vec<String> {
    handover_testkit::world::p_security_groups(&w.aws, &run.plan).await
}

/// Issue 12, scenario 2: a run that fails after a confirmed fence and before
/// any promotion call used to leave P fenced and the transition held, so
/// every later run was refused at Fence. audit now compensates: P's groups
/// come back, the transition is released, and the next incident fails over.
#[tokio::test]
async fn path_a_run_failing_after_the_fence_is_compensated_and_the_next_incident_fails_over() {
    let w = world().await;
    clear_faults().await;
    let run = start(&w, 5.0, |_| {}).await;
    let before = p_groups(&w, &run).await;
    // S's RDS API refuses promote (a 400 no retry changes; a 5xx is now
    // retried for minutes): the fence is confirmed, the promotion never
    // called.
    let refuse = unique("refuse-promote");
    handover_testkit::add_fault_rules(json!([{"id": refuse, "mode": "error", "service": "rds",
        "region": TEST_REGION, "caller": "promote", "status": 400, "code": "AccessDenied",
        "message": "not authorized", "count": 1_000_000}]))
    .await;
    approve(&w, &run).await;
    let e = ended(&w, &run).await;
    handover_testkit::remove_fault_rules(&[&refuse]).await;
    clear_faults().await;
    assert_eq!(
        e.status,
        "FAILED",
        "{} {:?} {:?}",
        path(&e),
        e.error,
        e.cause
    );
    assert!(
        path(&e).contains("Fence > FenceChoice > Promote"),
        "{}",
        path(&e)
    );
    let fence_group = run.plan.regions.primary.fence_security_group_id.clone();
    assert_eq!(
        p_groups(&w, &run).await,
        vec![fence_group.clone()],
        "P is fenced"
    );
    assert!(
        w.store
            .primary()
            .await
            .unwrap()
            .unwrap()
            .transition
            .is_some()
    );

    let outcome = audit(&w, &run).await;
    assert_eq!(outcome["compensation"]["outcome"], "released", "{outcome}");
    assert_eq!(p_groups(&w, &run).await, before, "P's groups are restored");
    let rec = w.store.primary().await.unwrap().unwrap();
    assert!(rec.transition.is_none(), "{rec:?}");
    assert_eq!(rec.epoch, 1);

    // The cooldown the audit set would hold detect; the state machine does not
    // look at the lock, so the next run shows the record is usable again.
    let next = start_again(&w, &run).await;
    approve(&w, &next).await;
    let e = ended(&w, &next).await;
    assert_eq!(
        e.status,
        "SUCCEEDED",
        "{} {:?} {:?}",
        path(&e),
        e.error,
        e.cause
    );
    assert_eq!(w.store.primary().await.unwrap().unwrap().epoch, 2);
}

/// Issue 12, scenario 2, FenceUnconfirmed: the fence's ModifyDBInstance is
/// applied but its answer is lost, and P's describes time out, so the fence
/// cannot confirm and the plan says stop. P is really fenced with no
/// promotion: audit restores P's groups and releases the transition, and the
/// next incident fails over.
#[tokio::test]
async fn path_an_unconfirmed_fence_whose_modify_applied_is_undone_and_the_next_incident_fails_over()
{
    let w = world().await;
    clear_faults().await;
    control("rules", json!({"clear": true})).await;
    let run = start(&w, 5.0, |p| {
        p.fence.on_unconfirmed = handover::plan::OnUnconfirmed::Stop;
        p.fence.confirm_s = 5;
    })
    .await;
    let before = p_groups(&w, &run).await;
    let p = &run.plan.regions.primary;
    handover_testkit::add_fault_rules(json!([
        {"id": "lost-modify", "mode": "lost", "service": "rds", "action": "ModifyDBInstance",
         "caller": "fence", "target": p.db_instance_id},
        // The describe before the modify (recording P's groups) answers.
        {"id": "p-describe", "mode": "timeout", "seconds": 2.0, "service": "rds", "skip": 1,
         "action": "DescribeDBInstances", "caller": "fence", "target": p.db_instance_id},
    ]))
    .await;
    approve(&w, &run).await;
    let e = ended(&w, &run).await;
    control("rules", json!({"clear": true})).await;
    assert_eq!(
        e.error.as_deref(),
        Some("Handover.FenceUnconfirmed"),
        "{} {:?}",
        path(&e),
        e.cause
    );
    let fence_group = p.fence_security_group_id.clone();
    assert!(
        p_groups(&w, &run).await.contains(&fence_group),
        "the lost modify was applied: P is fenced"
    );
    let outcome = audit(&w, &run).await;
    assert_eq!(outcome["compensation"]["outcome"], "released", "{outcome}");
    assert_eq!(p_groups(&w, &run).await, before, "P's groups are restored");
    let rec = w.store.primary().await.unwrap().unwrap();
    assert!(rec.transition.is_none(), "{rec:?}");
    let next = start_again(&w, &run).await;
    approve(&w, &next).await;
    let e = ended(&w, &next).await;
    assert_eq!(
        e.status,
        "SUCCEEDED",
        "{} {:?} {:?}",
        path(&e),
        e.error,
        e.cause
    );
}

/// Issue 12, scenario 2, PromotionStuck: the promotion was called and RDS
/// takes longer than the run polls. P must stay fenced (S may still become a
/// writer) and audit leaves the transition for a person. When S's promotion
/// finishes, audit's sweep (its own schedule, delivered as EventBridge
/// Scheduler does) completes it: the record names S, nothing is left.
#[tokio::test]
async fn path_a_stuck_promotion_stays_fenced_and_the_sweep_completes_it_once_s_is_promoted() {
    let w = world().await;
    clear_faults().await;
    control("rules", json!({"clear": true})).await;
    let run = start(&w, 5.0, |p| {
        p.timings.promotion_poll_s = 1;
        p.timings.promotion_max_polls = 2;
    })
    .await;
    let s = run.plan.regions.standby.clone();
    handover_testkit::realistic_rds(&s.db_instance_id, 8.0, 1.0, 0.0).await;
    approve(&w, &run).await;
    let e = ended(&w, &run).await;
    assert_eq!(
        e.error.as_deref(),
        Some("Handover.PromotionStuck"),
        "{} {:?}",
        path(&e),
        e.cause
    );
    let outcome = audit(&w, &run).await;
    assert_eq!(
        outcome["compensation"]["outcome"], "unresolved",
        "{outcome}"
    );
    let fence_group = run.plan.regions.primary.fence_security_group_id.clone();
    assert_eq!(
        p_groups(&w, &run).await,
        vec![fence_group.clone()],
        "P stays fenced"
    );
    assert!(
        w.store
            .primary()
            .await
            .unwrap()
            .unwrap()
            .transition
            .is_some()
    );
    // S finishes its promotion after the run gave up on it.
    let rds = handover::adapters::rds::Rds::new(&w.aws, &s.region).await;
    for _ in 0..100 {
        let d = handover::adapters::rds::DbInspector::describe(
            &rds,
            &s.db_instance_id,
            Duration::from_secs(5),
        )
        .await
        .unwrap()
        .unwrap();
        if d.replication_source.is_none() && d.status == "available" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let tick =
        handover_testkit::triggers::scheduled_payload("AuditFunction", TEST_REGION, Utc::now());
    let swept = handover_testkit::lambdas::invoke("audit", &tick)
        .await
        .unwrap();
    assert_eq!(swept["outcome"], "reconciled", "{swept}");
    assert_eq!(swept["compensation"]["outcome"], "completed", "{swept}");
    // People are told that nothing switched.
    assert!(
        w.slack
            .messages()
            .iter()
            .any(|m| m.body.to_string().contains("were NOT switched")),
        "no alert that traffic and the writer did not move"
    );
    let rec = w.store.primary().await.unwrap().unwrap();
    assert_eq!((rec.region.as_str(), rec.epoch), (s.region.as_str(), 2));
    assert!(rec.transition.is_none(), "{rec:?}");
    assert_eq!(
        p_groups(&w, &run).await,
        vec![fence_group],
        "P stays fenced"
    );
    // The next sweep finds nothing left.
    let swept = handover_testkit::lambdas::invoke("audit", &tick)
        .await
        .unwrap();
    assert_eq!(swept["outcome"], "skipped", "{swept}");
}

/// A planned switchover's world: P healthy (its app answers 200, its
/// health check passes), P's database real with its app writing, and S's
/// database P's real streaming replica behind S's instance (the canary's).
struct Switchover {
    run: Run,
    p: handover_testkit::pdb::PDatabase,
    s: std::sync::Arc<handover_testkit::pdb::SDatabase>,
    _lag: tokio::task::JoinHandle<()>,
}

impl Drop for Switchover {
    fn drop(&mut self) {
        self._lag.abort();
    }
}

/// Provision it, cut the replication link when `partitioned`, and start the
/// run as `handover switchover` does (mode `switchover`, the lock is the CLI's).
async fn start_switchover(
    w: &World,
    partitioned: bool,
    tweak: impl FnOnce(&mut Plan),
) -> Switchover {
    let aws = &w.aws;
    let mut plan = path_plan(w);
    plan.switchover = handover::plan::SwitchoverPolicy {
        settle_s: 2,
        timeout_s: 30,
        poll_s: 1,
    };
    let p_app = App::start(200).await;
    let s_app = App::start(200).await;
    serve_apps(aws, &mut plan, &p_app, &s_app).await;
    // Readiness must pass on this plan, so the world is as an operator
    // sets it up: the fence group exists in P's Region, and the S-side
    // parameter the plan audits names S's image.
    handover_testkit::world::provision_fence_group(aws, &mut plan).await;
    aws.ssm(&plan.regions.standby.region)
        .await
        .put_parameter()
        .name("/shop/app/image")
        .value("123456789012.dkr.ecr.ap-northeast-1.amazonaws.com/shop:2026-11-30")
        .r#type(aws_sdk_ssm::types::ParameterType::String)
        .overwrite(true)
        .send()
        .await
        .unwrap();
    provision_databases(aws, &plan).await;
    // The stack deployed for this plan: its roles grant on these databases
    // (readiness simulates them).
    handover_testkit::stack::apply_failover_policies(aws, &w.roles, &plan, w.store.table()).await;
    let dir = std::env::temp_dir().join(unique("handover-switchover"));
    let (p, s) =
        handover_testkit::pdb::pair(&dir, &plan, "canary", handover_testkit::pace::Pace::Fast)
            .await
            .expect("P's database and S's streaming replica");
    let s = std::sync::Arc::new(s);
    let lag = handover_testkit::pdb::publish_lag(&plan.regions.standby, s.clone(), None);
    let secret = put_db_secret(aws, &plan.regions.standby.region, "handover", s.password()).await;
    plan.regions.standby.db_secret_arn = Some(secret.clone());
    plan.canary = Canary::Postgres {
        host: Some("127.0.0.1".into()),
        port: s.port,
        database: "canary".into(),
        secret_arn: secret,
        table: "handover_canary".into(),
        require_tls: false,
        ca_secret_arn: None,
        tls_server_name: None,
    };
    tweak(&mut plan);
    plan.validate().unwrap();
    control("health", json!({ &plan.regions.primary.health_check_id: true, &plan.regions.standby.health_check_id: true })).await;
    fresh_record(w, &plan).await;
    // A first ReplicaLag sample before anyone reads it.
    tokio::time::sleep(Duration::from_millis(300)).await;
    if partitioned {
        p.partition(true);
    }
    let sfn = aws.sfn(TEST_REGION).await;
    let sm = state_machine(&sfn).await;
    let incident = unique("switchover");
    let mut input = run_input(&plan, &incident);
    input.mode = handover::execution::Mode::Switchover;
    input.t0 = Utc::now();
    // The lock first, as `handover switchover` takes it.
    let arn = handover::adapters::sfn::execution_arn(&sm, &incident);
    w.store
        .acquire_lock(&incident, &arn, Utc::now(), chrono::Duration::hours(1))
        .await
        .unwrap();
    let started = sfn
        .start_execution()
        .state_machine_arn(&sm)
        .name(&incident)
        .input(serde_json::to_string(&input).unwrap())
        .send()
        .await
        .unwrap()
        .execution_arn;
    assert_eq!(started, arn);
    Switchover {
        run: Run {
            arn,
            incident,
            plan,
            _apps: std::sync::Arc::new((p_app, s_app)),
            state_machine: sm,
        },
        p,
        s,
        _lag: lag,
    }
}

/// The run's readiness gate passed: its output says 0 fail (or the test
/// stops here with every check that did not pass).
async fn readiness_passed(w: &World, run: &Run) {
    let out = state_outputs(w, run, "Readiness", 1).await;
    let r = &out.last().unwrap()["readiness"];
    assert_eq!(r["fail"], 0, "readiness failed: {:#}", r["not_passing"]);
}

/// The outputs of `state`, once it has exited `times` times.
async fn state_outputs(w: &World, run: &Run, state: &str, times: usize) -> Vec<Value> {
    let sfn = w.aws.sfn(TEST_REGION).await;
    for _ in 0..600 {
        let h = sfn
            .get_execution_history()
            .execution_arn(&run.arn)
            .max_results(1000)
            .send()
            .await
            .unwrap();
        let outputs: Vec<Value> = h
            .events()
            .iter()
            .filter_map(|e| e.state_exited_event_details())
            .filter(|d| d.name() == state)
            .filter_map(|d| d.output())
            .filter_map(|o| serde_json::from_str::<Value>(o).ok())
            .collect();
        if outputs.len() >= times {
            return outputs;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("{state} did not exit {times} times within 120 s");
}

/// The last `$.catch_up` the run recorded, once `CatchUp` has run `readings` times.
async fn catch_up_after(w: &World, run: &Run, readings: usize) -> Value {
    let outputs = state_outputs(w, run, "CatchUp", readings).await;
    outputs.last().unwrap()["catch_up"].clone()
}

/// Issue 16: a planned switchover while S lags (the replication link is
/// cut, P goes on writing): after the fence the catch-up waits, reading S's
/// WAL receiver; once the link heals S replays the rest, the condition
/// holds for settle_s, and only then is S promoted. RPO 0, checked on both
/// real databases: S has every order P committed.
#[tokio::test]
async fn path_a_switchover_with_lag_waits_then_promotes_with_rpo_0() {
    let w = world().await;
    clear_faults().await;
    let so = start_switchover(&w, true, |_| {}).await;
    let run = &so.run;
    readiness_passed(&w, run).await;
    approve(&w, run).await;
    // The fence is confirmed and S is behind: the catch-up waits.
    let waiting = catch_up_after(&w, run, 3).await;
    assert_eq!(waiting["status"], "waiting", "{waiting}");
    assert!(waiting["held_since"].is_null(), "{waiting}");
    // S really is missing writes P committed: promoting now would lose them.
    let behind = handover_testkit::pdb::loss(&so.p, &so.s).await.unwrap();
    assert!(behind.rows > 0, "S is not behind: {behind:?}");
    so.p.partition(false);
    let e = ended(&w, run).await;
    assert_eq!(
        e.status,
        "SUCCEEDED",
        "{} {:?} {:?}",
        path(&e),
        e.error,
        e.cause
    );
    assert!(
        path(&e).contains("Readiness > ReadinessChoice > RequestApproval"),
        "{}",
        path(&e)
    );
    assert!(
        path(&e).contains("SwitchoverFenceChoice > CatchUp > CatchUpChoice > WaitCatchUp"),
        "{}",
        path(&e)
    );
    assert!(path(&e).contains("CatchUpChoice > Promote"), "{}", path(&e));
    let c = &e.output["catch_up"];
    assert_eq!(c["status"], "caught_up", "{c}");
    assert_eq!(c["gap_bytes"], 0, "{c}");
    assert_eq!(e.output["promotion"]["rpo_s"], 0.0);
    assert_eq!(e.output["readiness"]["fail"], 0);
    let rec = w.store.primary().await.unwrap().unwrap();
    assert_eq!(rec.epoch, 2);
    assert_eq!(rec.region, run.plan.regions.standby.region);
    // The truth, from both disks: nothing P committed is missing from S.
    let loss = handover_testkit::pdb::loss(&so.p, &so.s).await.unwrap();
    assert_eq!(loss.rows, 0, "S is missing {loss:?}");
    let audited = audit(&w, run).await;
    let key = audited["files"][0]
        .as_str()
        .and_then(|f| f.strip_prefix("s3://handover-test-reports/"))
        .unwrap_or_else(|| panic!("no report file: {audited}"))
        .to_owned();
    let body = w
        .aws
        .s3(TEST_REGION)
        .await
        .get_object()
        .bucket("handover-test-reports")
        .key(key)
        .send()
        .await
        .unwrap()
        .body
        .collect()
        .await
        .unwrap()
        .into_bytes();
    let report: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(report["summary"]["mode"], "drill switchover");
    assert!(
        report["summary"]["result"]
            .as_str()
            .is_some_and(|r| r.starts_with("switched over to ap-northeast-1 with RPO 0")),
        "{}",
        report["summary"]
    );
    let rpo = &report["numbers"]["rpo"];
    assert_eq!(rpo["value_s"], 0.0, "{rpo}");
    assert_eq!(rpo["status"], "pass", "{rpo}");
    assert!(
        rpo["how"]
            .as_str()
            .is_some_and(|h| h.starts_with("0, measured")),
        "{rpo}"
    );
    eprintln!("switchover RPO: {}", rpo["how"]);
}

/// Issue 16: a planned switchover whose S never catches up (the link stays
/// cut): the catch-up gives up at switchover.timeout_s, nothing is
/// promoted, and audit's compensation unfences P. P is primary at epoch 1
/// again, S is still its replica.
#[tokio::test]
async fn path_a_switchover_that_never_catches_up_stops_with_p_unfenced() {
    let w = world().await;
    clear_faults().await;
    let so = start_switchover(&w, true, |p| {
        p.switchover.timeout_s = 6;
    })
    .await;
    let run = &so.run;
    let before = p_groups(&w, run).await;
    readiness_passed(&w, run).await;
    approve(&w, run).await;
    let e = ended(&w, run).await;
    assert_eq!(e.status, "FAILED", "{}", path(&e));
    assert_eq!(
        e.error.as_deref(),
        Some("Handover.NotCaughtUp"),
        "{:?}",
        e.cause
    );
    assert!(
        path(&e).ends_with("CatchUpChoice > NotCaughtUp"),
        "{}",
        path(&e)
    );
    assert!(!path(&e).contains("Promote"), "{}", path(&e));
    let calls = handover_testkit::call_log().await;
    assert!(
        !calls.iter().any(|c| c["action"] == "PromoteReadReplica"
            && c["target"] == run.plan.regions.standby.db_instance_id.as_str()),
        "nothing is promoted"
    );
    let fence = run.plan.regions.primary.fence_security_group_id.clone();
    assert_eq!(
        p_groups(&w, run).await,
        vec![fence],
        "P is fenced until audit"
    );
    let outcome = audit(&w, run).await;
    assert_eq!(outcome["compensation"]["outcome"], "released", "{outcome}");
    assert_eq!(p_groups(&w, run).await, before, "P is unfenced");
    let rec = w.store.primary().await.unwrap().unwrap();
    assert!(rec.transition.is_none(), "{rec:?}");
    assert_eq!(rec.epoch, 1);
    assert_eq!(rec.region, run.plan.regions.primary.region);
    so.p.partition(false);
    assert!(so.s.in_recovery().await.unwrap(), "S is still P's replica");
}

/// Issue 16, the everyday case: a planned switchover with S keeping up. P
/// restarts under the fence and then takes no writes, so nothing moves on
/// the link: the catch-up has to hear from P once after the fence (S's
/// receiver asks after half its wal_receiver_timeout of silence) before it
/// counts, and then S is promoted with RPO 0.
#[tokio::test]
async fn path_a_switchover_with_s_keeping_up_promotes_with_rpo_0() {
    let w = world().await;
    clear_faults().await;
    let so = start_switchover(&w, false, |_| {}).await;
    let run = &so.run;
    readiness_passed(&w, run).await;
    approve(&w, run).await;
    let e = ended(&w, run).await;
    assert_eq!(
        e.status,
        "SUCCEEDED",
        "{} {:?} {:?}",
        path(&e),
        e.error,
        e.cause
    );
    let c = &e.output["catch_up"];
    assert_eq!(c["status"], "caught_up", "{c}");
    eprintln!("catch-up: {c}");
    // It counted only P's message after the fence, held over two readings
    // or more, and waited before it: the restart left nothing to read at first.
    let fenced_at: chrono::DateTime<Utc> =
        serde_json::from_value(e.output["fence"]["fenced_at"].clone()).unwrap();
    let sent: chrono::DateTime<Utc> = serde_json::from_value(c["p_reported_at"].clone()).unwrap();
    assert!(sent > fenced_at + chrono::Duration::seconds(1), "{c}");
    assert!(c["held_readings"].as_u64().unwrap() >= 2, "{c}");
    assert!(
        c["readings"].as_u64().unwrap() > c["held_readings"].as_u64().unwrap(),
        "{c}"
    );
    let first = &state_outputs(&w, run, "CatchUp", 1).await[0]["catch_up"];
    assert_eq!(first["status"], "waiting", "{first}");
    assert!(first["held_since"].is_null(), "{first}");
    let loss = handover_testkit::pdb::loss(&so.p, &so.s).await.unwrap();
    assert_eq!(loss.rows, 0, "S is missing {loss:?}");
    assert_eq!(w.store.primary().await.unwrap().unwrap().epoch, 2);
}
