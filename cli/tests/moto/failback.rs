//! `handover failback` and `handover reprotect` against moto: the real
//! binary on the table. A failback can never race a failover: while a run
//! holds the lock it is refused, and nothing is renamed, created or
//! started. It is refused, changing nothing, when P is primary already,
//! when the plan has no failback section, when the writer's value before
//! the failover is not on record, and while the failover's loss is
//! unmeasured (the old P, which holds it, would be renamed) unless the
//! operator accepts that.

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
        &[
            "--yes",
            "--accept-unmeasured-loss",
            "--state-machine",
            MACHINE,
        ],
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
        &[
            "--yes",
            "--accept-unmeasured-loss",
            "--state-machine",
            MACHINE,
        ],
        &plan,
        &store,
    );
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("there is nothing to fail back"), "{err}");
    // The failover's loss is not measured (its estimate was 0.5 s) and the
    // old P, which holds it, would be renamed: refused unless accepted.
    let (store, plan) = failed_over(Some("p-db")).await;
    let (code, _, err) = run(
        "failback",
        &["--yes", "--state-machine", MACHINE],
        &plan,
        &store,
    );
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("is not measured"), "{err}");
    assert!(err.contains("handover rpo"), "{err}");
    // The writer's value before the failover is not on record.
    let (store, plan) = failed_over(None).await;
    let (code, _, err) = run(
        "failback",
        &[
            "--yes",
            "--accept-unmeasured-loss",
            "--state-machine",
            MACHINE,
        ],
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
        &[
            "--yes",
            "--accept-unmeasured-loss",
            "--state-machine",
            MACHINE,
        ],
        &plan,
        &store,
    );
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("plan.failback is missing"), "{err}");
    // Not confirmed: nothing happens, the lock is free.
    let (store, plan) = failed_over(Some("p-db")).await;
    let (code, _, err) = run(
        "failback",
        &["--accept-unmeasured-loss", "--state-machine", MACHINE],
        &plan,
        &store,
    );
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

/// The data check reads the real databases. Here the server behind
/// `--p-host` is in recovery but is not S's replica: a stale standby of the
/// old P, which holds the orders P took while it was cut off and S never
/// got. The check finds the tables differ, and the failback stops before
/// the switch: the table and the numbers are printed, nothing is started,
/// the lock is given back, and the record still names S. Re-protection
/// itself ran (a real replica of S at P's identifier, the old P renamed).
#[tokio::test]
async fn a_failback_whose_data_differs_stops_before_the_switch() {
    use handover_testkit::pdb::{SDatabase, pair, publish_lag};
    use std::sync::Arc;
    use std::sync::atomic::AtomicU64;
    let aws = aws();
    let (store, mut plan) = failed_over(Some("p-db.ap-northeast-2.rds.amazonaws.com")).await;
    let (p, s) = (plan.regions.primary.clone(), plan.regions.standby.clone());
    handover_testkit::world::provision_databases(&aws, &plan).await;
    let dir = std::env::temp_dir().join(unique("failback-check"));
    std::fs::create_dir_all(&dir).unwrap();
    let (pdb, sdb) = pair(&dir, &plan, "canary", handover_testkit::pace::Pace::Fast)
        .await
        .expect("P and its replica");
    pdb.disk_client()
        .await
        .unwrap()
        .batch_execute("CREATE TABLE handover_canary (id bigserial PRIMARY KEY, incident text NOT NULL, written_at timestamptz NOT NULL DEFAULT now())")
        .await
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    // The failover: P is cut off and goes on writing; S is promoted.
    pdb.partition(true);
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    aws.rds(&s.region)
        .await
        .promote_read_replica()
        .db_instance_identifier(&s.db_instance_id)
        .send()
        .await
        .unwrap();
    for _ in 0..100 {
        if !sdb.in_recovery().await.unwrap_or(true) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(!sdb.in_recovery().await.unwrap(), "S was not promoted");
    // P heals; a standby of the old P is built (it has P's every order).
    pdb.partition(false);
    let stale_site = handover::plan::Site {
        db_instance_id: unique("stale"),
        ..p.clone()
    };
    let stale = pdb
        .start_standby(dir.join("stale"), &stale_site, None)
        .await
        .expect("a standby of the old P");
    pdb.stop_writer().await;
    let p_orders = pdb.writes().await.unwrap();
    let s_orders: i64 = sdb
        .client()
        .await
        .unwrap()
        .query_one("SELECT count(*) FROM orders", &[])
        .await
        .unwrap()
        .get(0);
    assert!(
        p_orders > s_orders,
        "P took no order S lacks: {p_orders} vs {s_orders}"
    );
    // RDS publishes ReplicaLag for P's new replica (its heartbeat keeps it
    // meaningful on an idle source): 0.2 s.
    let forced = Arc::new(AtomicU64::new(0.2f64.to_bits()));
    let _lag = publish_lag(
        &p,
        Arc::new(SDatabase::adopt(
            dir.join(format!("pg-{}", p.db_instance_id)),
            pdb.server_port,
            sdb.password(),
        )),
        Some(forced),
    );
    let secret =
        handover_testkit::world::put_db_secret(&aws, &s.region, "handover", sdb.password()).await;
    // One user on both sides (P's replica has S's users).
    plan.regions.standby.db_secret_arn = Some(secret.clone());
    plan.regions.primary.db_secret_arn = Some(secret.clone());
    plan.canary = handover::plan::Canary::Postgres {
        host: Some("127.0.0.1".into()),
        port: sdb.port,
        database: "handover".into(),
        secret_arn: secret,
        table: "handover_canary".into(),
        require_tls: false,
        ca_secret_arn: None,
        tls_server_name: None,
    };
    let fb = plan.failback.as_mut().unwrap();
    fb.tables = vec![handover::plan::CheckedTable {
        table: "orders".into(),
        key: "id".into(),
        database: None,
    }];
    fb.canary_host = Some("127.0.0.1".into());
    fb.canary_port = Some(pdb.server_port);
    fb.reprotect_timeout_s = 60;
    plan.validate().unwrap();
    let (stale_port, s_port) = (stale.port.to_string(), sdb.port.to_string());
    let (code, out, err) = run(
        "failback",
        &[
            "--yes",
            "--accept-unmeasured-loss",
            "--state-machine",
            MACHINE,
            "--p-host",
            "127.0.0.1",
            "--p-port",
            &stale_port,
            "--s-host",
            "127.0.0.1",
            "--s-port",
            &s_port,
        ],
        &plan,
        &store,
    );
    assert_eq!(code, 3, "{out}{err}");
    assert!(
        err.contains("the data check found a difference, so nothing was switched"),
        "{err}"
    );
    assert!(err.contains("handover.orders: DIFFERS"), "{err}");
    assert!(
        err.contains(&format!("S has {s_orders} rows")) || err.contains("S has "),
        "{err}"
    );
    assert!(err.contains("the lock was given back"), "{err}");
    // Nothing was switched: S is primary at epoch 2, the lock is free.
    let rec = store.primary().await.unwrap().unwrap();
    assert_eq!((rec.region.as_str(), rec.epoch), (s.region.as_str(), 2));
    assert!(rec.transition.is_none());
    let lock = store.lock_state().await.unwrap().unwrap();
    assert!(lock.holder.is_none(), "{lock:?}");
    // Re-protection ran for real: P's identifier is a replica of S, the
    // old P is kept under its new name.
    let d = aws
        .rds(&p.region)
        .await
        .describe_db_instances()
        .db_instance_identifier(&p.db_instance_id)
        .send()
        .await
        .unwrap();
    let source = d.db_instances()[0]
        .read_replica_source_db_instance_identifier()
        .unwrap_or_default()
        .to_owned();
    assert!(
        source.ends_with(&format!(":{}", s.db_instance_id)),
        "{source}"
    );
    assert!(exists(&p.region, &format!("{}-retired-e2", p.db_instance_id)).await);
}
