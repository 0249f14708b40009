//! `handover switchover` against moto: the real binary on the table and a
//! state machine. It starts a planned run under the lock detect takes, and
//! refuses, changing nothing, when a failover holds the lock, a transition
//! is open, the record names S, or the operator does not confirm.

use handover::plan::Plan;
use handover::store::Store;
use handover_testkit::world::unique_plan;
use handover_testkit::{TEST_REGION, aws, fresh_store, unique};
use std::process::Command;

fn run(args: &[&str], plan: &Plan, store: &Store, machine: &str) -> (i32, String, String) {
    run_env(args, plan, store, machine, &[])
}

/// As [`run`], with `env` added to the command's environment.
fn run_env(
    args: &[&str],
    plan: &Plan,
    store: &Store,
    machine: &str,
    env: &[(&str, &str)],
) -> (i32, String, String) {
    let out = command(args, plan, store, machine, env)
        .output()
        .expect("run handover");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `handover switchover` on this table, plan and state machine.
fn command(
    args: &[&str],
    plan: &Plan,
    store: &Store,
    machine: &str,
    env: &[(&str, &str)],
) -> Command {
    let file = std::env::temp_dir().join(unique("plan") + ".json");
    std::fs::write(&file, serde_json::to_string(plan).unwrap()).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_handover"));
    cmd.arg("switchover")
        .args(args)
        .args(["--table", store.table(), "--region", TEST_REGION])
        .arg("--plan-file")
        .arg(&file)
        .args(["--state-machine", machine])
        .env("AWS_ENDPOINT_URL", handover_testkit::endpoint())
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    cmd
}

/// A fresh table and plan whose primary record names P (`after_failover`: S).
async fn world(after_failover: bool) -> (Store, Plan) {
    let (store, plan) = (fresh_store(&aws()).await, unique_plan());
    let site = if after_failover {
        &plan.regions.standby
    } else {
        &plan.regions.primary
    };
    store
        .init_primary(&site.region, &site.db_instance_id, chrono::Utc::now())
        .await
        .unwrap();
    (store, plan)
}

/// A state machine whose runs wait (what is started is read back, not run).
async fn machine() -> String {
    aws()
        .sfn(TEST_REGION)
        .await
        .create_state_machine()
        .name(unique("cli-switchover"))
        .definition(
            r#"{"StartAt":"Hold","States":{"Hold":{"Type":"Wait","Seconds":3600,"End":true}}}"#,
        )
        .role_arn("arn:aws:iam::123456789012:role/handover-states")
        .send()
        .await
        .unwrap()
        .state_machine_arn
}

async fn executions(machine: &str) -> Vec<String> {
    aws()
        .sfn(TEST_REGION)
        .await
        .list_executions()
        .state_machine_arn(machine)
        .send()
        .await
        .unwrap()
        .executions()
        .iter()
        .map(|e| e.execution_arn().to_owned())
        .collect()
}

/// Step Functions unreachable: StartExecution fails and DescribeExecution
/// cannot say whether the run started. The lock stays held, as it must
/// (the run may exist), but for the start lease detect takes (10 minutes),
/// not the run's whole lease (about 5 hours): a command that dies before
/// its start holds detect off as briefly.
#[tokio::test]
async fn a_start_that_may_not_have_happened_holds_the_lock_for_the_start_lease_only() {
    let (store, plan) = world(false).await;
    let sm = machine().await;
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let unreachable = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let (code, out, err) = run_env(
        &["--yes"],
        &plan,
        &store,
        &sm,
        &[("AWS_ENDPOINT_URL_SFN", &unreachable)],
    );
    assert_eq!(code, 6, "{out}{err}");
    assert!(
        err.contains("whether the run started is unknown"),
        "{out}{err}"
    );
    assert!(err.contains("Do not run the command again"), "{out}{err}");
    assert!(executions(&sm).await.is_empty(), "nothing may have started");
    let lock = store.lock_state().await.unwrap().unwrap();
    assert!(
        lock.holder
            .as_deref()
            .is_some_and(|h| h.starts_with("shop-switchover-")),
        "{lock:?}"
    );
    let lease = (lock.lease_until.unwrap() - chrono::Utc::now()).num_seconds();
    let start = handover::detect::START_LEASE.num_seconds();
    assert!(
        lease > 0 && lease <= start,
        "lease {lease} s, against the start lease of {start} s (the run's is {} s)",
        plan.switchover_lease_s()
    );
}

/// A fault rule for this table's lease renewals only: `store.renew_lock`
/// (before the start) and `store.keep_lock` (after it), which write the
/// same update expression.
fn renewals(store: &Store, id: &str, rule: serde_json::Value) -> serde_json::Value {
    let mut rule = rule;
    rule["id"] = id.into();
    rule["service"] = "dynamodb".into();
    rule["action"] = "UpdateItem".into();
    rule["match_all"] = serde_json::json!([store.table(), "SET lease_until_ms = :lease"]);
    serde_json::json!([rule])
}

/// The lock passes to another incident while the command prepares (here,
/// while its renewal before the start is on the wire). The command must not
/// start a run the lock does not guard.
#[tokio::test]
async fn a_lock_lost_before_the_start_starts_nothing() {
    let (store, plan) = world(false).await;
    let sm = machine().await;
    let id = unique("slow-renewal");
    handover_testkit::add_fault_rules(renewals(
        &store,
        &id,
        serde_json::json!({"mode": "latency", "seconds": 5, "count": 1}),
    ))
    .await;
    let child = command(&["--yes"], &plan, &store, &sm, &[])
        .spawn()
        .unwrap();
    let mut holder = None;
    for _ in 0..3000 {
        holder = store.lock_state().await.unwrap().and_then(|l| l.holder);
        if holder.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let holder = holder.expect("the command took the lock");
    let now = chrono::Utc::now();
    store
        .release_lock(&holder, now, chrono::Duration::zero())
        .await
        .unwrap();
    let taken = store
        .acquire_lock(
            "shop-other",
            "arn:other",
            now,
            chrono::Duration::minutes(10),
        )
        .await
        .unwrap();
    assert!(
        matches!(
            taken,
            handover::store::lock::AcquireOutcome::Acquired { .. }
        ),
        "{taken:?}"
    );
    let out = child.wait_with_output().unwrap();
    handover_testkit::remove_fault_rules(&[&id]).await;
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains("nothing was started"), "{err}");
    assert!(executions(&sm).await.is_empty(), "no run without the lock");
    let lock = store.lock_state().await.unwrap().unwrap();
    assert_eq!(lock.holder.as_deref(), Some("shop-other"));
}

/// A lock whose lease lapsed while its run still goes on (its starter and
/// the sweep both failed to keep it) is not taken over: that run would go
/// on without the lock. Refused, with nothing written.
#[tokio::test]
async fn a_lapsed_lock_whose_run_goes_on_is_not_taken_over() {
    let (store, plan) = world(false).await;
    let sm = machine().await;
    let running = aws()
        .sfn(TEST_REGION)
        .await
        .start_execution()
        .state_machine_arn(&sm)
        .name("shop-incident-old")
        .input("{}")
        .send()
        .await
        .unwrap()
        .execution_arn;
    let long_ago = chrono::Utc::now() - chrono::Duration::hours(2);
    store
        .acquire_lock(
            "shop-incident-old",
            &running,
            long_ago,
            chrono::Duration::minutes(10),
        )
        .await
        .unwrap();
    let (code, out, err) = run(&["--yes"], &plan, &store, &sm);
    assert_eq!(code, 3, "{out}{err}");
    assert!(err.contains("lease lapsed"), "{err}");
    assert!(err.contains("RUNNING"), "{err}");
    assert_eq!(executions(&sm).await, vec![running]);
    let lock = store.lock_state().await.unwrap().unwrap();
    assert_eq!(lock.holder.as_deref(), Some("shop-incident-old"));
}

/// A lapsed lock whose run does not show: its starter may still be
/// starting it, so it is not taken over at once; long after, it is.
#[tokio::test]
async fn a_lapsed_lock_whose_run_does_not_show_is_taken_over_only_later() {
    let (store, plan) = world(false).await;
    let sm = machine().await;
    let missing = format!(
        "{}:shop-incident-gone",
        sm.replace(":stateMachine:", ":execution:")
    );
    let lapsed = |ago: chrono::Duration| {
        let store = store.clone();
        let missing = missing.clone();
        async move {
            let lease = chrono::Duration::minutes(10);
            let at = chrono::Utc::now() - ago - lease;
            store
                .release_lock("shop-incident-gone", at, chrono::Duration::zero())
                .await
                .unwrap();
            let taken = store
                .acquire_lock("shop-incident-gone", &missing, at, lease)
                .await
                .unwrap();
            assert!(
                matches!(
                    taken,
                    handover::store::lock::AcquireOutcome::Acquired { .. }
                ),
                "{taken:?}"
            );
        }
    };
    lapsed(chrono::Duration::seconds(30)).await;
    let (code, out, err) = run(&["--yes"], &plan, &store, &sm);
    assert_eq!(code, 3, "{out}{err}");
    assert!(err.contains("may still be starting"), "{err}");
    assert!(executions(&sm).await.is_empty());
    lapsed(chrono::Duration::minutes(5)).await;
    let (code, out, err) = run(&["--yes"], &plan, &store, &sm);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(executions(&sm).await.len(), 1);
}

/// StartExecution refused (a 4xx: here, no such state machine): nothing
/// started, so the lock is given back at once.
#[tokio::test]
async fn a_refused_start_gives_the_lock_back() {
    let (store, plan) = world(false).await;
    let sm = format!(
        "arn:aws:states:{TEST_REGION}:123456789012:stateMachine:{}",
        unique("none")
    );
    let (code, out, err) = run(&["--yes"], &plan, &store, &sm);
    assert_eq!(code, 4, "{out}{err}");
    assert!(err.contains("was refused"), "{err}");
    let lock = store.lock_state().await.unwrap().unwrap();
    assert_eq!(lock.holder, None, "{lock:?}");
}

/// StartExecution answered 5xx on every try: the run does not show, but a
/// call may still create it. The lock keeps its start lease, and the
/// command exits 6.
#[tokio::test]
async fn a_start_answered_5xx_keeps_the_start_lease() {
    let (store, plan) = world(false).await;
    let sm = machine().await;
    let id = unique("start-5xx");
    handover_testkit::add_fault_rules(
        serde_json::json!([{"id": id, "mode": "error", "status": 500,
        "service": "states", "action": "StartExecution", "match": sm.rsplit(':').next().unwrap()}]),
    )
    .await;
    let (code, out, err) = run(&["--yes"], &plan, &store, &sm);
    handover_testkit::remove_fault_rules(&[&id]).await;
    assert_eq!(code, 6, "{out}{err}");
    assert!(err.contains("does not show yet"), "{err}");
    assert!(executions(&sm).await.is_empty());
    let lock = store.lock_state().await.unwrap().unwrap();
    assert!(
        lock.holder
            .as_deref()
            .is_some_and(|h| h.starts_with("shop-switchover-")),
        "{lock:?}"
    );
    let lease = (lock.lease_until.unwrap() - chrono::Utc::now()).num_seconds();
    assert!(
        lease <= handover::detect::START_LEASE.num_seconds(),
        "lease {lease} s"
    );
}

/// The run started, and the lock passed to another incident before the
/// command extended it: exit 6, and no approve line, since two runs may go
/// on and the operator must see which first.
#[tokio::test]
async fn a_lock_taken_after_the_start_is_not_taken_back() {
    let (store, plan) = world(false).await;
    let sm = machine().await;
    let id = unique("slow-extension");
    handover_testkit::add_fault_rules(renewals(
        &store,
        &id,
        serde_json::json!({"mode": "latency", "seconds": 5, "skip": 1, "count": 1}),
    ))
    .await;
    let child = command(&["--yes"], &plan, &store, &sm, &[])
        .spawn()
        .unwrap();
    for _ in 0..3000 {
        if !executions(&sm).await.is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let holder = store.lock_state().await.unwrap().unwrap().holder.unwrap();
    let now = chrono::Utc::now();
    store
        .release_lock(&holder, now, chrono::Duration::zero())
        .await
        .unwrap();
    store
        .acquire_lock(
            "shop-other",
            "arn:other",
            now,
            chrono::Duration::minutes(10),
        )
        .await
        .unwrap();
    let out = child.wait_with_output().unwrap();
    handover_testkit::remove_fault_rules(&[&id]).await;
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(6), "{err}");
    assert!(err.contains("no longer"), "{err}");
    assert!(!err.contains("approve"), "{err}");
    assert_eq!(executions(&sm).await.len(), 1);
    let lock = store.lock_state().await.unwrap().unwrap();
    assert_eq!(lock.holder.as_deref(), Some("shop-other"));
}

/// The run started, but the table refuses every later write for longer
/// than the command tries (60 s): the lock stays at the start lease. The
/// command says so with its own code (6, not 4's "retry": a second run
/// would start), rather than printing a lock it does not have.
#[tokio::test]
async fn a_lock_not_extended_after_the_start_fails_the_command() {
    let (store, plan) = world(false).await;
    let sm = machine().await;
    let id = unique("no-extension");
    handover_testkit::add_fault_rules(renewals(
        &store,
        &id,
        serde_json::json!({"mode": "error", "status": 500, "skip": 1}),
    ))
    .await;
    let (code, out, err) = run(&["--yes"], &plan, &store, &sm);
    handover_testkit::remove_fault_rules(&[&id]).await;
    assert_eq!(code, 6, "{out}{err}");
    assert!(err.contains("could not be extended"), "{out}{err}");
    assert!(err.contains("do not run the command again"), "{out}{err}");
    assert_eq!(executions(&sm).await.len(), 1, "the run started");
    let lock = store.lock_state().await.unwrap().unwrap();
    assert!(
        lock.holder
            .as_deref()
            .is_some_and(|h| h.starts_with("shop-switchover-")),
        "{lock:?}"
    );
    let lease = (lock.lease_until.unwrap() - chrono::Utc::now()).num_seconds();
    assert!(
        lease <= handover::detect::START_LEASE.num_seconds(),
        "lease {lease} s"
    );
}

#[tokio::test]
async fn switchover_starts_a_planned_run_under_the_lock() {
    let (store, plan) = world(false).await;
    let sm = machine().await;
    let (code, out, err) = run(&["--yes"], &plan, &store, &sm);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("Planned switchover of shop"), "{out}");
    let started = executions(&sm).await;
    assert_eq!(started.len(), 1);
    let d = aws()
        .sfn(TEST_REGION)
        .await
        .describe_execution()
        .execution_arn(&started[0])
        .send()
        .await
        .unwrap();
    let input: handover::execution::ExecutionInput =
        serde_json::from_str(d.input().unwrap()).unwrap();
    assert_eq!(input.mode, handover::execution::Mode::Switchover);
    assert_eq!(input.primary.epoch, Some(1));
    assert_eq!(
        input.standby.db_instance_id,
        plan.regions.standby.db_instance_id
    );
    assert!(
        input.incident_id.starts_with("shop-switchover-"),
        "{}",
        input.incident_id
    );
    // The lock is the run's, for longer than a failover's lease by the
    // catch-up's bound: detect cannot start a failover beside it.
    let lock = store.lock_state().await.unwrap().unwrap();
    assert_eq!(lock.holder.as_deref(), Some(input.incident_id.as_str()));
    let lease = (lock.lease_until.unwrap() - chrono::Utc::now()).num_seconds();
    assert!(
        lease > i64::try_from(plan.switchover_lease_s()).unwrap() - 60,
        "lease {lease} s"
    );
    // A second one (a second later: another name) is refused while the
    // first holds the lock.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let (code, _, err) = run(&["--yes"], &plan, &store, &sm);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("holds the lock"), "{err}");
    assert_eq!(executions(&sm).await.len(), 1);
}

#[tokio::test]
async fn switchover_is_refused_beside_a_failover_a_transition_or_after_one() {
    let (store, plan) = world(false).await;
    let sm = machine().await;
    // Not confirmed: nothing happens.
    let (code, _, err) = run(&[], &plan, &store, &sm);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("not confirmed"), "{err}");
    // A failover holds the lock.
    store
        .acquire_lock(
            "shop-ap-northeast-2-20261202T060000Z",
            "arn:aws:states:ap-northeast-1:123456789012:execution:handover:shop-ap-northeast-2-20261202T060000Z",
            chrono::Utc::now(),
            chrono::Duration::minutes(30),
        )
        .await
        .unwrap();
    let (code, _, err) = run(&["--yes"], &plan, &store, &sm);
    assert_eq!(code, 3, "{err}");
    assert!(
        err.contains("shop-ap-northeast-2-20261202T060000Z holds the lock"),
        "{err}"
    );
    assert!(executions(&sm).await.is_empty());
    // A transition is open.
    store
        .begin_fencing(
            1,
            "arn:exec-other",
            &plan.regions.standby.region,
            chrono::Utc::now(),
        )
        .await
        .unwrap();
    let (code, _, err) = run(&["--yes"], &plan, &store, &sm);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("a transition is in progress"), "{err}");
    // The record names S (after a failover): a switchover is not the way back.
    let (store, plan) = world(true).await;
    let (code, _, err) = run(&["--yes"], &plan, &store, &sm);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("failback"), "{err}");
    assert!(executions(&sm).await.is_empty());
    assert!(
        store
            .lock_state()
            .await
            .unwrap()
            .is_none_or(|l| l.holder.is_none())
    );
}
