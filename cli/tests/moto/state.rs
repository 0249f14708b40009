//! `handover status`, `pause` and `resume` against moto: the real binary on
//! the table detect and the runs use.

use handover::store::Store;
use handover_testkit::world::unique_plan;
use handover_testkit::{TEST_REGION, aws, fresh_store};
use std::process::Command;

fn run(args: &[&str], plan: &handover::plan::Plan, store: &Store) -> (i32, String, String) {
    let file = std::env::temp_dir().join(handover_testkit::unique("plan") + ".json");
    std::fs::write(&file, serde_json::to_string(plan).unwrap()).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_handover"))
        .args(args)
        .args(["--table", store.table(), "--plan-file"])
        .arg(&file)
        .args(["--region", TEST_REGION])
        .env("AWS_ENDPOINT_URL", handover_testkit::endpoint())
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env_remove("USER")
        .output()
        .expect("run handover");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn status_shows_the_record_the_lock_the_probe_and_the_pause_and_pause_resume_round_trip() {
    let aws = aws();
    let plan = unique_plan();
    let store = fresh_store(&aws).await;
    let p = &plan.regions.primary;
    let (code, out, err) = run(&["status"], &plan, &store);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("primary: NO RECORD (run `handover init`)"),
        "{out}"
    );
    store
        .init_primary(&p.region, &p.db_instance_id, chrono::Utc::now())
        .await
        .unwrap();
    let now = chrono::Utc::now();
    store
        .acquire_lock("inc-1", "shop-x", now, chrono::Duration::seconds(600))
        .await
        .unwrap();
    // Refused without a reason or a name: nothing written.
    let (code, _, err) = run(&["pause", "--by", "oncall"], &plan, &store);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--reason"), "{err}");
    let (code, _, err) = run(&["pause", "--reason", "DB maintenance"], &plan, &store);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--by"), "{err}");
    assert!(!store.pause().await.unwrap().paused);
    let (code, out, err) = run(
        &["pause", "--reason", "DB maintenance", "--by", "oncall"],
        &plan,
        &store,
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("paused by oncall: DB maintenance"), "{out}");
    let (code, out, err) = run(&["status"], &plan, &store);
    assert_eq!(code, 0, "{err}");
    for want in [
        format!("primary: {} in {} at epoch 1", p.db_instance_id, p.region),
        "lock: held by inc-1 until".to_owned(),
        format!("probe of P ({}): 0 consecutive failing ticks", p.region),
        "PAUSED by oncall: DB maintenance".to_owned(),
        "readiness: never evaluated".to_owned(),
    ] {
        assert!(out.contains(&want), "{want:?} not in:\n{out}");
    }
    let (code, out, _) = run(&["status", "--json"], &plan, &store);
    assert_eq!(code, 0);
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["primary"]["epoch"], 1);
    assert_eq!(doc["lock"]["holder"], "inc-1");
    assert_eq!(doc["pause"]["paused"], true);
    let (code, out, err) = run(&["resume", "--by", "oncall"], &plan, &store);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("resumed by oncall (was paused by oncall: DB maintenance)"),
        "{out}"
    );
    assert!(!store.pause().await.unwrap().paused);
}

/// The run holding the lock, and the state it is in, from Step Functions.
#[tokio::test]
async fn status_names_the_running_execution_and_its_current_state() {
    let aws = aws();
    let plan = unique_plan();
    let store = fresh_store(&aws).await;
    let machine = handover_testkit::waiting_state_machine(&aws, TEST_REGION).await;
    let incident = handover_testkit::unique("shop-inc");
    let arn = aws
        .sfn(TEST_REGION)
        .await
        .start_execution()
        .state_machine_arn(&machine)
        .name(&incident)
        .input("{}")
        .send()
        .await
        .unwrap()
        .execution_arn;
    store
        .acquire_lock(
            &incident,
            &arn,
            chrono::Utc::now(),
            chrono::Duration::seconds(600),
        )
        .await
        .unwrap();
    let mut found = String::new();
    for _ in 0..50 {
        let (code, out, err) = run(&["status"], &plan, &store);
        assert_eq!(code, 0, "{err}");
        found = out;
        if found.contains("in state Hold") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(
        found.contains(&format!("run: {arn} is RUNNING, in state Hold")),
        "{found}"
    );
    let (_, out, _) = run(&["status", "--json"], &plan, &store);
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["run"]["status"], "RUNNING");
    assert_eq!(doc["run"]["state"], "Hold");
}
