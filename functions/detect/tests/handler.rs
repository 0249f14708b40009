use chrono::{DateTime, Duration, TimeZone, Utc};
use detect::handler::*;
use handover::adapters::{HttpProbe, Route53, Sfn};
use handover::aws::Aws;
use handover::detect::TickReport;
use handover::error::ErrorName;
use handover::live_plan::{LivePlan, StackPlan};
use handover::store::control::Pause;
use handover_testkit::app::App;
use handover_testkit::{
    aws, control, example_plan, executions, fresh_store, unique, waiting_state_machine,
};
use serde_json::{Value, json};
use std::sync::Arc;

const SCHEDULED: &str = include_str!("../events/scheduled.json");
const NOT_SCHEDULED: &str = include_str!("../events/not-scheduled.json");
const RULE_SCHEDULED: &str = include_str!("../events/rule-scheduled.json");

struct World {
    deps: Deps,
    /// The plan the function holds.
    plan: handover::plan::Plan,
    aws: Aws,
    app: App,
    state_machine: String,
}

async fn world() -> World {
    let aws = aws();
    let app = App::start(200).await;
    let mut plan = example_plan();
    plan.regions.primary.endpoint = format!("{}/health", app.url);
    plan.regions.primary.health_check_id = unique("hc-p");
    plan.regions.standby.health_check_id = unique("hc-s");
    plan.detection.alarm = None;
    plan.detection.probe_timeout_ms = 300;
    let store = fresh_store(&aws).await;
    store
        .init_primary(
            &plan.regions.primary.region,
            &plan.regions.primary.db_instance_id,
            Utc::now(),
        )
        .await
        .unwrap();
    let state_machine = waiting_state_machine(&aws, "ap-northeast-1").await;
    let deps = Deps {
        store,
        probe: HttpProbe::new().unwrap(),
        route53: Route53::new(&aws).await,
        sfn: Sfn::new(&aws, "ap-northeast-1", &state_machine).await,
        plan: LivePlan::fixed(plan.clone()),
        aws: Arc::new(handover_testkit::aws()),
        drill: true,
        stack: "handover-test".into(),
        clock: Box::new(handover::clock::SystemClock),
        control: handover::adapters::traffic::Route53Control::new(&aws).await,
        http: public_http().unwrap(),
    };
    World {
        deps,
        plan,
        aws,
        app,
        state_machine,
    }
}

impl World {
    async fn p_down(&self) {
        self.app.set_status(503);
        control(
            "health",
            json!({ &self.plan.regions.primary.health_check_id: false }),
        )
        .await;
    }
    async fn p_up(&self) {
        self.app.set_status(200);
        control(
            "health",
            json!({ &self.plan.regions.primary.health_check_id: true }),
        )
        .await;
    }
    /// A tick as the template's schedule delivers it.
    async fn tick(&self, at: DateTime<Utc>) -> TickReport {
        let event =
            handover_testkit::triggers::scheduled_payload("DetectFunction", "ap-northeast-1", at);
        handler(event, &self.deps).await.unwrap()
    }
    async fn executions(&self) -> Vec<(String, String)> {
        executions(&self.aws, "ap-northeast-1", &self.state_machine).await
    }
}

fn minute(m: i64) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 30, 14, 11, 55).unwrap() + Duration::minutes(m)
}

#[tokio::test]
async fn two_failing_ticks_then_a_success_start_nothing() {
    let w = world().await;
    w.p_down().await;
    assert!(matches!(
        w.tick(minute(0)).await,
        TickReport::Suspect { consecutive: 1, .. }
    ));
    assert!(matches!(
        w.tick(minute(1)).await,
        TickReport::Suspect { consecutive: 2, .. }
    ));
    w.p_up().await;
    assert!(matches!(
        w.tick(minute(2)).await,
        TickReport::Healthy { .. }
    ));
    w.p_down().await;
    assert!(matches!(
        w.tick(minute(3)).await,
        TickReport::Suspect { consecutive: 1, .. }
    ));
    assert!(w.executions().await.is_empty());
}

#[tokio::test]
async fn three_failing_ticks_start_exactly_one_execution_with_t0_of_the_first() {
    let w = world().await;
    w.p_down().await;
    w.tick(minute(0)).await;
    w.tick(minute(1)).await;
    let report = w.tick(minute(2)).await;
    let TickReport::Started { incident_id, .. } = report else {
        panic!("{report:?}")
    };
    assert_eq!(incident_id, "shop-ap-northeast-2-20261130T141155Z");
    let runs = w.executions().await;
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].0, incident_id);
    let input: Value = serde_json::from_str(&runs[0].1).unwrap();
    assert_eq!(input["t0"], "2026-11-30T14:11:55Z");
    assert_eq!(input["incident_id"], incident_id);
    assert_eq!(input["drill"], true);
    assert_eq!(input["primary"]["epoch"], 1);
    assert_eq!(input["standby"]["region"], "ap-northeast-1");
    assert_eq!(input["plan"]["version"], "2026-11-30.1");
    assert_eq!(
        input["evidence"].as_array().unwrap().len(),
        3,
        "evidence of every failing tick"
    );
    assert_eq!(input["evidence"][0]["signals"][0]["name"], "endpoint");
    assert_eq!(input["evidence"][0]["failed"], true);
    // The input is a valid execution document for the next steps.
    let _: handover::execution::ExecutionInput = serde_json::from_value(input).unwrap();
    // The lease outlives the longest run, every retry counted: longer
    // than the plan's own 7200 s.
    let lease = w.plan.failover_lease_s();
    assert!(lease > w.plan.timings.lock_lease_s);
    let lock = w.deps.store.lock_state().await.unwrap().unwrap();
    let left = (lock.lease_until.unwrap() - Utc::now()).num_seconds();
    assert!(
        (lease as i64 - 60..=lease as i64).contains(&left),
        "{left} s of lease left, against {lease} s"
    );
}

/// Issue 35: the lock is taken before the start, perhaps ticks before
/// when earlier starts failed. Once the run exists, the lease counts
/// the whole run from then.
#[tokio::test]
async fn the_lease_counts_from_the_start_not_from_the_tick_that_took_it() {
    let mut w = world().await;
    let taken = Utc::now() - Duration::minutes(5);
    w.deps.clock = Box::new(handover::clock::FixedClock(taken));
    w.p_down().await;
    for m in 0..3 {
        w.tick(minute(m)).await;
    }
    assert_eq!(w.executions().await.len(), 1);
    let lease = w.plan.failover_lease_s() as i64;
    let lock = w.deps.store.lock_state().await.unwrap().unwrap();
    let left = (lock.lease_until.unwrap() - Utc::now()).num_seconds();
    assert!(
        (lease - 60..=lease).contains(&left),
        "{left} s of lease left after the start, against {lease} s"
    );
}

/// A start that fails leaves the lock for minutes, not for a run's
/// hours: the lock of a run that never started frees itself.
#[tokio::test]
async fn a_failed_start_holds_the_lock_only_for_the_start_lease() {
    let mut w = world().await;
    let missing = w
        .state_machine
        .replace(":stateMachine:", ":stateMachine:gone-");
    w.deps.sfn = Sfn::new(&w.aws, "ap-northeast-1", &missing).await;
    w.p_down().await;
    for m in 0..2 {
        w.tick(minute(m)).await;
    }
    let event = handover_testkit::triggers::scheduled_payload(
        "DetectFunction",
        "ap-northeast-1",
        minute(2),
    );
    let err = handler(event, &w.deps).await.unwrap_err();
    assert!(
        err.to_string().contains("StateMachineDoesNotExist"),
        "{err}"
    );
    let lock = w.deps.store.lock_state().await.unwrap().unwrap();
    let left = (lock.lease_until.unwrap() - Utc::now()).num_seconds();
    let start = handover::detect::START_LEASE.num_seconds();
    assert!(
        (start - 60..=start).contains(&left),
        "{left} s of lease left after a failed start, against {start} s"
    );
}

#[tokio::test]
async fn a_fourth_tick_and_a_retried_tick_start_no_second_execution() {
    let w = world().await;
    w.p_down().await;
    for m in 0..3 {
        w.tick(minute(m)).await;
    }
    assert!(
        matches!(w.tick(minute(2)).await, TickReport::Duplicate { .. }),
        "retried tick"
    );
    assert!(
        matches!(w.tick(minute(3)).await, TickReport::AlreadyRunning { .. }),
        "4th tick"
    );
    assert_eq!(w.executions().await.len(), 1);
}

/// Issue 12, scenario 8: a closed execution with the incident's name
/// (its audit never ran) must not read as "still running" forever while
/// P stays down: the count restarts and the next incident starts.
#[tokio::test]
async fn a_closed_execution_of_the_same_name_restarts_the_count_instead_of_blocking() {
    let w = world().await;
    w.p_down().await;
    for m in 0..2 {
        w.tick(minute(m)).await;
    }
    let TickReport::Started {
        execution_arn,
        incident_id,
    } = w.tick(minute(2)).await
    else {
        panic!("no start")
    };
    // The run ends without its audit (the lock and the probe run stay).
    w.aws
        .sfn("ap-northeast-1")
        .await
        .stop_execution()
        .execution_arn(&execution_arn)
        .send()
        .await
        .unwrap();
    // StopExecution returns before DescribeExecution says ABORTED.
    let limit = std::time::Duration::from_secs(10);
    handover_testkit::ended_execution(&w.aws, "ap-northeast-1", &execution_arn, limit).await;
    // Just closed: the audit may still be on its way (it releases the
    // lock with the cooldown): not stale yet.
    assert!(matches!(
        w.tick(minute(3)).await,
        TickReport::AlreadyRunning { .. }
    ));
    // Past the grace, with no audit: stale.
    let mut w = w;
    w.deps.clock = Box::new(handover::clock::FixedClock(
        Utc::now() + handover::detect::STALE_AFTER + Duration::seconds(1),
    ));
    let report = w.tick(minute(4)).await;
    assert_eq!(
        report,
        TickReport::StaleIncident {
            incident_id: incident_id.clone(),
            status: "ABORTED".into()
        }
    );
    // The next K ticks are a new incident, with a new name, held by the
    // plan's cooldown as the audit would have held it.
    for m in 5..7 {
        assert!(matches!(
            w.tick(minute(m)).await,
            TickReport::Suspect { .. }
        ));
    }
    assert!(matches!(w.tick(minute(7)).await, TickReport::Locked { .. }));
    w.deps.clock = Box::new(handover::clock::FixedClock(
        Utc::now()
            + handover::detect::STALE_AFTER
            + Duration::seconds(w.plan.timings.cooldown_s as i64 + 2),
    ));
    let TickReport::Started {
        incident_id: next, ..
    } = w.tick(minute(8)).await
    else {
        panic!("the next incident did not start")
    };
    assert_ne!(next, incident_id);
    assert_eq!(w.executions().await.len(), 2);
}

#[tokio::test]
async fn a_held_lock_is_logged_not_an_error() {
    let w = world().await;
    w.deps
        .store
        .acquire_lock("other-incident", "other", Utc::now(), Duration::hours(1))
        .await
        .unwrap();
    w.p_down().await;
    for m in 0..2 {
        w.tick(minute(m)).await;
    }
    let report = w.tick(minute(2)).await;
    assert!(matches!(report, TickReport::Locked { .. }), "{report:?}");
    assert!(w.executions().await.is_empty());
}

#[tokio::test]
async fn pause_records_but_starts_nothing() {
    let w = world().await;
    let pause = Pause {
        paused: true,
        reason: Some("maintenance".into()),
        by: Some("test".into()),
    };
    w.deps.store.set_pause(&pause, Utc::now()).await.unwrap();
    w.p_down().await;
    for m in 0..2 {
        w.tick(minute(m)).await;
    }
    assert!(matches!(w.tick(minute(2)).await, TickReport::Paused { .. }));
    assert!(w.executions().await.is_empty());
    assert_eq!(
        w.deps
            .store
            .probe_run("ap-northeast-2")
            .await
            .unwrap()
            .consecutive_failures,
        3
    );
}

#[tokio::test]
async fn endpoint_down_but_health_check_green_is_not_a_failure() {
    let w = world().await;
    w.app.set_status(503);
    control(
        "health",
        json!({ &w.plan.regions.primary.health_check_id: true }),
    )
    .await;
    for m in 0..4 {
        assert!(matches!(
            w.tick(minute(m)).await,
            TickReport::Healthy { .. }
        ));
    }
    assert!(w.executions().await.is_empty());
}

/// detect stays warm for hours. A plan changed in its store is the one
/// the next tick probes with, once the copy is a minute old.
#[tokio::test]
async fn a_warm_detect_probes_with_the_plan_changed_in_its_store_within_a_minute() {
    let w = world().await;
    let file = std::env::temp_dir().join(unique("detect-plan") + ".json");
    std::fs::write(&file, serde_json::to_string(&w.plan).unwrap()).unwrap();
    let mut binding: std::collections::HashMap<&str, String> =
        handover::stack::StackBinding::environment_for(&w.plan)
            .into_iter()
            .collect();
    binding.insert("HANDOVER_REPORT_BUCKET", "handover-test-reports".into());
    let stack = handover::stack::StackBinding::from_lookup(|k| binding.get(k).cloned()).unwrap();
    let reader = StackPlan::new(
        handover::config::PlanSource::File(file.display().to_string()),
        Arc::new(handover_testkit::aws()),
        stack,
    );
    let clock = handover::clock::ManualClock::at(minute(0));
    let plan = LivePlan::load(reader, &clock).await.unwrap();
    let w = World {
        deps: Deps {
            plan,
            clock: Box::new(clock.clone()),
            ..w.deps
        },
        ..w
    };
    w.tick(minute(0)).await;
    let first = w.app.hits();
    assert!(first >= 1, "P's endpoint probed");
    // The operators move P's endpoint in the plan.
    let moved = App::start(200).await;
    let mut changed = w.plan.clone();
    changed.regions.primary.endpoint = format!("{}/health", moved.url);
    std::fs::write(&file, serde_json::to_string(&changed).unwrap()).unwrap();
    clock.advance(Duration::seconds(59));
    w.tick(minute(0) + Duration::seconds(59)).await;
    assert_eq!(moved.hits(), 0, "the copy serves for a minute");
    clock.advance(Duration::seconds(1));
    w.tick(minute(1)).await;
    assert!(moved.hits() >= 1, "the changed plan is the one probed");
    assert_eq!(w.app.hits(), first * 2, "the old endpoint no longer");
    let _ = std::fs::remove_file(&file);
}

#[tokio::test]
async fn a_hanging_endpoint_counts_as_down_within_the_probe_timeout() {
    let w = world().await;
    w.p_down().await;
    w.app.set_status(handover_testkit::app::HANG);
    let started = std::time::Instant::now();
    assert!(matches!(
        w.tick(minute(0)).await,
        TickReport::Suspect { .. }
    ));
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
}

#[tokio::test]
async fn after_a_failover_detect_watches_s_and_never_starts_without_a_standby() {
    let w = world().await;
    let s = &w.plan.regions.standby;
    w.deps
        .store
        .begin_fencing(1, "x", &s.region, Utc::now())
        .await
        .unwrap();
    w.deps
        .store
        .claim_promotion(1, "x", (1.0, Utc::now()), Utc::now())
        .await
        .unwrap();
    w.deps
        .store
        .complete_promotion(1, "x", &s.region, &s.db_instance_id, Utc::now())
        .await
        .unwrap();
    // P stays dead; S is now watched.
    w.p_down().await;
    let s_app = App::start(503).await;
    let mut deps_plan = w.plan.clone();
    deps_plan.regions.standby.endpoint = format!("{}/health", s_app.url);
    control(
        "health",
        json!({ &deps_plan.regions.standby.health_check_id: false }),
    )
    .await;
    let w = World {
        deps: Deps {
            plan: LivePlan::fixed(deps_plan.clone()),
            ..w.deps
        },
        plan: deps_plan,
        ..w
    };
    for m in 0..2 {
        w.tick(minute(m)).await;
    }
    assert_eq!(
        w.tick(minute(2)).await,
        TickReport::NoStandby {
            region: "ap-northeast-1".into()
        }
    );
    assert!(
        s_app.hits() >= 3,
        "the new primary's endpoint is the one probed"
    );
    assert!(w.executions().await.is_empty());
}

#[tokio::test]
async fn the_scheduler_payload_byte_for_byte_runs_a_tick() {
    let w = world().await;
    w.p_down().await;
    let event: Value = serde_json::from_str(SCHEDULED).unwrap();
    assert_eq!(event["detail"], "{}");
    let report = handler(event, &w.deps).await.unwrap();
    assert!(
        matches!(report, TickReport::Suspect { consecutive: 1, .. }),
        "{report:?}"
    );
}

#[tokio::test]
async fn an_eventbridge_rule_payload_is_refused_with_the_reason() {
    let w = world().await;
    let err = handler(serde_json::from_str(RULE_SCHEDULED).unwrap(), &w.deps)
        .await
        .unwrap_err();
    assert_eq!(err.name, ErrorName::InvalidInput);
    assert!(
        err.message.contains("EventBridge Scheduler"),
        "{}",
        err.message
    );
    assert!(w.executions().await.is_empty());
}

#[tokio::test]
async fn an_unexpected_event_is_invalid_input_and_starts_nothing() {
    let w = world().await;
    w.p_down().await;
    for m in 0..2 {
        w.tick(minute(m)).await;
    }
    let err = handler(serde_json::from_str(NOT_SCHEDULED).unwrap(), &w.deps)
        .await
        .unwrap_err();
    assert_eq!(err.name, ErrorName::InvalidInput);
    assert!(err.message.contains("aws.ec2"), "{}", err.message);
    for bad in [
        json!({}),
        json!("tick"),
        json!({"detail-type": "Scheduled Event", "source": "aws.scheduler", "detail": "{}"}),
        json!({"detail-type": "Scheduled Event", "source": "aws.scheduler", "time": "2026-11-30T14:11:55Z", "detail": {"x": 1}}),
    ] {
        let err = handler(bad.clone(), &w.deps).await.unwrap_err();
        assert_eq!(err.name, ErrorName::InvalidInput, "{bad}");
    }
    assert!(w.executions().await.is_empty());
    assert_eq!(
        w.deps
            .store
            .probe_run("ap-northeast-2")
            .await
            .unwrap()
            .consecutive_failures,
        2
    );
}
