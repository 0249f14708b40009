//! `handover init` against moto: the real binary, the operator's environment.

use handover::store::Store;
use handover_testkit::world::{create_instance, provision_databases, unique_plan};
use handover_testkit::{TEST_REGION, aws, fresh_store};
use std::process::Command;

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

/// Run `handover init` for `plan` (written to a file) against `store`'s table.
fn init(plan: &handover::plan::Plan, store: &Store) -> Out {
    let file = std::env::temp_dir().join(handover_testkit::unique("plan") + ".json");
    std::fs::write(&file, serde_json::to_string(plan).unwrap()).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_handover"))
        .args(["init", "--table", store.table(), "--plan-file"])
        .arg(&file)
        .args(["--region", TEST_REGION])
        .env("AWS_ENDPOINT_URL", handover_testkit::endpoint())
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .output()
        .expect("run handover");
    Out {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[tokio::test]
async fn init_writes_the_record_from_rds_once_and_a_second_run_changes_nothing() {
    let aws = aws();
    let plan = unique_plan();
    provision_databases(&aws, &plan).await;
    let store = fresh_store(&aws).await;
    let out = init(&plan, &store);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("epoch 1"), "{}", out.stdout);
    let r = store.primary().await.unwrap().expect("record written");
    assert_eq!(r.region, plan.regions.primary.region);
    assert_eq!(r.db_instance_id, plan.regions.primary.db_instance_id);
    let again = init(&plan, &store);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert!(again.stdout.contains("already there"), "{}", again.stdout);
}

#[tokio::test]
async fn init_refuses_a_record_that_names_the_other_side_and_never_overwrites_it() {
    let aws = aws();
    let plan = unique_plan();
    provision_databases(&aws, &plan).await;
    let store = fresh_store(&aws).await;
    let s = &plan.regions.standby;
    store
        .init_primary(&s.region, &s.db_instance_id, chrono::Utc::now())
        .await
        .unwrap();
    let out = init(&plan, &store);
    assert_eq!(out.code, 3, "{} {}", out.stdout, out.stderr);
    assert!(out.stderr.contains("not overwritten"), "{}", out.stderr);
    assert_eq!(store.primary().await.unwrap().unwrap().region, s.region);
}

#[tokio::test]
async fn init_refuses_to_guess_when_neither_is_a_replica_or_an_instance_is_missing() {
    let aws = aws();
    let plan = unique_plan();
    let (p, s) = (&plan.regions.primary, &plan.regions.standby);
    let store = fresh_store(&aws).await;
    create_instance(&aws, &p.region, &p.db_instance_id, None).await;
    let missing = init(&plan, &store);
    assert_eq!(missing.code, 3, "{}", missing.stderr);
    assert!(
        missing.stderr.contains("does not exist"),
        "{}",
        missing.stderr
    );
    create_instance(&aws, &s.region, &s.db_instance_id, None).await;
    let two_writers = init(&plan, &store);
    assert_eq!(two_writers.code, 3, "{}", two_writers.stderr);
    assert!(
        two_writers.stderr.contains("does not guess"),
        "{}",
        two_writers.stderr
    );
    assert!(store.primary().await.unwrap().is_none(), "nothing written");
}

#[test]
fn usage_errors_exit_2() {
    let out = Command::new(env!("CARGO_BIN_EXE_handover"))
        .args(["init", "--bogus"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("Usage: handover init"));
}
