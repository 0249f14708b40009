//! `handover failback` and `handover reprotect` against moto: the real
//! binary on the table. A failback can never race a failover: while a run
//! holds the lock it is refused, and nothing is renamed, created or
//! started. It is refused, changing nothing, when P is primary already,
//! when the plan has no failback section, and when the writer's value
//! before the failover is not on record.

use handover::plan::Plan;
use handover::store::Store;
use handover_testkit::world::unique_plan;
use handover_testkit::{TEST_REGION, aws, fresh_store, unique};
use std::process::Command;

fn run(cmd: &str, args: &[&str], plan: &Plan, store: &Store) -> (i32, String, String) {
    let file = std::env::temp_dir().join(unique("plan") + ".json");
    std::fs::write(&file, serde_json::to_string(plan).unwrap()).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_handover"))
        .arg(cmd)
        .args(args)
        .args(["--table", store.table(), "--region", TEST_REGION])
        .arg("--plan-file")
        .arg(&file)
        .env("AWS_ENDPOINT_URL", handover_testkit::endpoint())
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run handover");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A fresh table whose primary record went through a failover to S at
/// epoch 2, as the store's conditional writes make it, with the writer's
/// value before it on record (`writer`: `None` records none).
async fn failed_over(writer: Option<&str>) -> (Store, Plan) {
    let (store, plan) = (fresh_store(&aws()).await, unique_plan());
    let (p, s) = (&plan.regions.primary, &plan.regions.standby);
    let now = chrono::Utc::now();
    let run = format!("arn:aws:states:{TEST_REGION}:123456789012:execution:handover:failover");
    store
        .init_primary(&p.region, &p.db_instance_id, now)
        .await
        .unwrap();
    store.begin_fencing(1, &run, &s.region, now).await.unwrap();
    store
        .claim_promotion(1, &run, (0.5, now), now)
        .await
        .unwrap();
    store
        .complete_promotion(1, &run, &s.region, &s.db_instance_id, now)
        .await
        .unwrap();
    if let Some(w) = writer {
        let lever = handover::plan::writer_lever(&plan.dns.writer);
        store
            .record_switch_previous(2, &run, &lever, Some(w), now)
            .await
            .unwrap()
            .expect("the record is the failover's");
    }
    (store, plan)
}

async fn exists(region: &str, id: &str) -> bool {
    aws()
        .rds(region)
        .await
        .describe_db_instances()
        .db_instance_identifier(id)
        .send()
        .await
        .is_ok()
}

const MACHINE: &str = "arn:aws:states:ap-northeast-1:123456789012:stateMachine:handover";

#[tokio::test]
async fn failback_is_refused_while_a_failover_holds_the_lock_and_changes_nothing() {
    let (store, plan) = failed_over(Some("p-db.ap-northeast-2.rds.amazonaws.com")).await;
    let other = "shop-ap-northeast-1-20261202T100000Z";
    store
        .acquire_lock(
            other,
            "arn:aws:states:ap-northeast-1:123456789012:execution:handover:x",
            chrono::Utc::now(),
            chrono::Duration::minutes(30),
        )
        .await
        .unwrap();
    let before = store.primary().await.unwrap();
    let (code, out, err) = run(
        "failback",
        &["--yes", "--state-machine", MACHINE],
        &plan,
        &store,
    );
    assert_eq!(code, 3, "{out}{err}");
    assert!(err.contains(&format!("{other} holds the lock")), "{err}");
    // Nothing was renamed, created or moved: the lock is the failover's
    // still, the record is as it was, and P's Region has no instance.
    let lock = store.lock_state().await.unwrap().unwrap();
    assert_eq!(lock.holder.as_deref(), Some(other));
    assert_eq!(store.primary().await.unwrap(), before);
    let p = &plan.regions.primary;
    assert!(!exists(&p.region, &p.db_instance_id).await);
    assert!(!exists(&p.region, &format!("{}-retired-e2", p.db_instance_id)).await);
    // `handover reprotect` is refused beside a run too.
    let (code, _, err) = run("reprotect", &["--yes"], &plan, &store);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("holds the lock"), "{err}");
    assert!(!exists(&p.region, &p.db_instance_id).await);
}

#[tokio::test]
async fn failback_is_refused_when_there_is_nothing_to_fail_back_or_nothing_to_restore() {
    // P is primary: nothing to fail back.
    let (store, plan) = (fresh_store(&aws()).await, unique_plan());
    let p = &plan.regions.primary;
    store
        .init_primary(&p.region, &p.db_instance_id, chrono::Utc::now())
        .await
        .unwrap();
    let (code, _, err) = run(
        "failback",
        &["--yes", "--state-machine", MACHINE],
        &plan,
        &store,
    );
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("there is nothing to fail back"), "{err}");
    // The writer's value before the failover is not on record.
    let (store, plan) = failed_over(None).await;
    let (code, _, err) = run(
        "failback",
        &["--yes", "--state-machine", MACHINE],
        &plan,
        &store,
    );
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("is not on record"), "{err}");
    // No failback section in the plan.
    let (store, mut plan) = failed_over(Some("p-db")).await;
    plan.failback = None;
    let (code, _, err) = run(
        "failback",
        &["--yes", "--state-machine", MACHINE],
        &plan,
        &store,
    );
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("plan.failback is missing"), "{err}");
    // Not confirmed: nothing happens, the lock is free.
    let (store, plan) = failed_over(Some("p-db")).await;
    let (code, _, err) = run("failback", &["--state-machine", MACHINE], &plan, &store);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("not confirmed"), "{err}");
    let lock = store.lock_state().await.unwrap();
    assert!(lock.as_ref().is_none_or(|l| l.holder.is_none()), "{lock:?}");
    // In every case the table is untouched and nothing was taken.
    assert_eq!(store.primary().await.unwrap().unwrap().epoch, 2);
    assert!(
        !exists(
            &plan.regions.primary.region,
            &plan.regions.primary.db_instance_id
        )
        .await
    );
}
