//! `handover release` and `handover report` against moto: the real binary
//! on the table, executions and report bucket the functions use.

use handover::plan::Plan;
use handover::store::Store;
use handover_testkit::world::{provision_databases, run_input, unique_plan};
use handover_testkit::{TEST_REGION, aws, fresh_store, unique};
use std::process::Command;
use std::time::Duration;

fn run(args: &[&str], plan: Option<&Plan>, store: &Store) -> (i32, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_handover"));
    cmd.args(args)
        .args(["--table", store.table(), "--region", TEST_REGION])
        .env("AWS_ENDPOINT_URL", handover_testkit::endpoint())
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .stdin(std::process::Stdio::null());
    if let Some(plan) = plan {
        let file = std::env::temp_dir().join(unique("plan") + ".json");
        std::fs::write(&file, serde_json::to_string(plan).unwrap()).unwrap();
        cmd.arg("--plan-file").arg(&file);
    }
    let out = cmd.output().expect("run handover");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// An execution of `plan`'s run that has ended (`hold`: one that waits).
async fn execution(plan: &Plan, incident: &str, hold: bool) -> String {
    let sfn = aws().sfn(TEST_REGION).await;
    let definition = if hold {
        r#"{"StartAt":"Hold","States":{"Hold":{"Type":"Wait","Seconds":3600,"End":true}}}"#
    } else {
        r#"{"StartAt":"Fail","States":{"Fail":{"Type":"Fail","Error":"Handover.Fatal","Cause":"the run failed after its fence"}}}"#
    };
    let machine = sfn
        .create_state_machine()
        .name(unique("cli-ops"))
        .definition(definition)
        .role_arn("arn:aws:iam::123456789012:role/handover-states")
        .send()
        .await
        .unwrap()
        .state_machine_arn;
    let arn = sfn
        .start_execution()
        .state_machine_arn(&machine)
        .name(incident)
        .input(serde_json::to_string(&run_input(plan, incident)).unwrap())
        .send()
        .await
        .unwrap()
        .execution_arn;
    if !hold {
        for _ in 0..100 {
            let d = sfn
                .describe_execution()
                .execution_arn(&arn)
                .send()
                .await
                .unwrap();
            if d.status().as_str() != "RUNNING" {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    arn
}

async fn p_groups(plan: &Plan) -> Vec<String> {
    aws()
        .rds(&plan.regions.primary.region)
        .await
        .describe_db_instances()
        .db_instance_identifier(&plan.regions.primary.db_instance_id)
        .send()
        .await
        .unwrap()
        .db_instances()[0]
        .vpc_security_groups()
        .iter()
        .filter_map(|g| g.vpc_security_group_id().map(str::to_owned))
        .collect()
}

/// A run that fenced P and ended before promoting: its transition and lock
/// stay. `release` refuses while a run is live, then unfences P, releases
/// both and starts the cooldown.
#[tokio::test]
async fn release_refuses_a_live_run_and_compensates_an_ended_one() {
    let aws = aws();
    let plan = unique_plan();
    let store = fresh_store(&aws).await;
    provision_databases(&aws, &plan).await;
    let p = &plan.regions.primary;
    store
        .init_primary(&p.region, &p.db_instance_id, chrono::Utc::now())
        .await
        .unwrap();
    let (code, out, err) = run(&["release", "--yes"], Some(&plan), &store);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("nothing holds the failover"), "{out}");
    // A live run holds both: refused, nothing changes.
    let live_incident = unique("shop-live");
    let live = execution(&plan, &live_incident, true).await;
    let now = chrono::Utc::now();
    store
        .acquire_lock(&live_incident, &live, now, chrono::Duration::seconds(600))
        .await
        .unwrap();
    store
        .begin_fencing(1, &live, &plan.regions.standby.region, now)
        .await
        .unwrap();
    let (code, _, err) = run(&["release", "--yes"], Some(&plan), &store);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("is RUNNING: a live run holds it"), "{err}");
    assert!(store.primary().await.unwrap().unwrap().transition.is_some());
    // Stopped from outside: a task it started may still act (StopExecution
    // does not stop a running Lambda): refused until the tail has passed.
    aws.sfn(TEST_REGION)
        .await
        .stop_execution()
        .execution_arn(&live)
        .send()
        .await
        .unwrap();
    // StopExecution returns before DescribeExecution says ABORTED.
    let limit = std::time::Duration::from_secs(10);
    handover_testkit::ended_execution(&aws, TEST_REGION, &live, limit).await;
    let (code, _, err) = run(&["release", "--yes"], Some(&plan), &store);
    assert_eq!(code, 3, "{err}");
    assert!(
        err.contains("ended ABORTED at") && err.contains("may still be acting until"),
        "{err}"
    );
    assert!(store.primary().await.unwrap().unwrap().transition.is_some());
    // Now an ended run, which fenced P: its previous groups are recorded.
    let fresh = fresh_store(&aws).await;
    fresh
        .init_primary(&p.region, &p.db_instance_id, now)
        .await
        .unwrap();
    let incident = unique("shop-ended");
    let ended = execution(&plan, &incident, false).await;
    fresh
        .acquire_lock(&incident, &ended, now, chrono::Duration::seconds(600))
        .await
        .unwrap();
    fresh
        .begin_fencing(1, &ended, &plan.regions.standby.region, now)
        .await
        .unwrap();
    let before = p_groups(&plan).await;
    fresh
        .record_fence_previous(1, &ended, &before, now)
        .await
        .unwrap();
    aws.rds(&p.region)
        .await
        .modify_db_instance()
        .db_instance_identifier(&p.db_instance_id)
        .vpc_security_group_ids(&p.fence_security_group_id)
        .apply_immediately(true)
        .send()
        .await
        .unwrap();
    // Not confirmed without --yes (stdin closed): nothing changes.
    let (code, _, err) = run(&["release"], Some(&plan), &fresh);
    assert_eq!(code, 3, "{err}");
    assert!(
        err.contains(&format!("transition: {ended} holds it")),
        "{err}"
    );
    assert!(err.contains("the run ended FAILED"), "{err}");
    assert!(err.contains(&format!("lock: {incident} holds it")), "{err}");
    assert!(err.contains("not confirmed"), "{err}");
    let (code, out, err) = run(&["release", "--yes"], Some(&plan), &fresh);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("transition released: P's security groups restored"),
        "{out}"
    );
    assert!(
        out.contains("lock released; detect starts no run before"),
        "{out}"
    );
    let mut restored = None;
    for _ in 0..100 {
        let g = p_groups(&plan).await;
        if g == before {
            restored = Some(g);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(restored.as_ref(), Some(&before), "P unfenced");
    assert!(fresh.primary().await.unwrap().unwrap().transition.is_none());
    let lock = fresh.lock_state().await.unwrap().unwrap();
    assert_eq!(lock.holder, None);
    assert!(lock.cooldown_until.is_some());
}

/// The stored report is fetched as audit wrote it; a missing one says how
/// to rebuild it; `--render` rebuilds it from the history, writing nothing.
#[tokio::test]
async fn report_fetches_the_stored_report_or_renders_it_from_the_history() {
    let aws = aws();
    let plan = unique_plan();
    let store = fresh_store(&aws).await;
    let s3 = aws.s3(TEST_REGION).await;
    handover_testkit::report_bucket(&aws, TEST_REGION, &plan.report.bucket).await;
    let incident = unique("shop-report");
    let arn = execution(&plan, &incident, false).await;
    let (code, _, err) = run(&["report", "--execution", &arn], None, &store);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("--render"), "{err}");
    let (code, md, err) = run(&["report", "--execution", &arn, "--render"], None, &store);
    assert_eq!(code, 0, "{err}");
    assert!(md.contains(&incident), "{md}");
    assert!(md.contains("FAILED"), "{md}");
    let (code, html, err) = run(
        &[
            "report",
            "--execution",
            &arn,
            "--render",
            "--format",
            "html",
        ],
        None,
        &store,
    );
    assert_eq!(code, 0, "{err}");
    assert!(html.contains("<svg"), "the HTML has its timeline: {html}");
    // --render wrote nothing.
    let key = format!("{}{incident}/report.md", plan.report.prefix);
    assert!(
        s3.get_object()
            .bucket(&plan.report.bucket)
            .key(&key)
            .send()
            .await
            .is_err()
    );
    s3.put_object()
        .bucket(&plan.report.bucket)
        .key(&key)
        .body(aws_sdk_s3::primitives::ByteStream::from_static(
            b"# The report audit stored\n",
        ))
        .send()
        .await
        .unwrap();
    let (code, out, err) = run(&["report", "--execution", &arn], None, &store);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "# The report audit stored\n\n");
    let (code, _, err) = run(
        &["report", "--execution", &arn, "--format", "pdf"],
        None,
        &store,
    );
    assert_eq!(code, 2, "{err}");
    // A live run has no report yet.
    let live = execution(&plan, &unique("shop-live"), true).await;
    let (code, _, err) = run(&["report", "--execution", &live], None, &store);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("is still RUNNING"), "{err}");
}
