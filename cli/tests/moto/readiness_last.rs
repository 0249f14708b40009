//! `handover readiness --last` against moto: the real binary reads what
//! the readiness function stored in the report bucket, evaluating nothing.

use chrono::Utc;
use handover::readiness::publish::store;
use handover::readiness::{Check, Readiness, Verdict};
use handover::report::sources::S3Reports;
use handover_testkit::world::unique_plan;
use handover_testkit::{TEST_REGION, aws, fresh_store, report_bucket, unique};
use std::process::Command;

/// `handover readiness` with `args`, on a plan file and table of its own.
async fn readiness(args: &[&str]) -> (i32, String, String) {
    let aws = aws();
    let table = fresh_store(&aws).await.table().to_owned();
    let file = std::env::temp_dir().join(unique("plan") + ".json");
    // As in SSM: the stack, not the plan, names the bucket.
    let mut plan = unique_plan();
    plan.report.bucket.clear();
    std::fs::write(&file, serde_json::to_string(&plan).unwrap()).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_handover"))
        .args([
            "readiness",
            "--table",
            &table,
            "--region",
            TEST_REGION,
            "--plan-file",
        ])
        .arg(&file)
        .args(args)
        .env("AWS_ENDPOINT_URL", handover_testkit::endpoint())
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env_remove("HANDOVER_REPORT_BUCKET")
        .output()
        .expect("run handover");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn failing_channel() -> Readiness {
    Readiness {
        at: Utc::now() - chrono::Duration::minutes(12),
        checks: vec![
            Check {
                id: "rds.p_exists".into(),
                verdict: Verdict::Pass,
                observed: "p is available".into(),
                expected: "P's instance exists".into(),
                fix: String::new(),
            },
            Check {
                id: "slack.channel".into(),
                verdict: Verdict::Fail,
                observed: "the bot is not in #incidents".into(),
                expected: "the bot is a member".into(),
                fix: "Invite the bot.".into(),
            },
        ],
    }
}

/// A report bucket of its own, with nothing in it yet.
async fn empty_bucket() -> String {
    let bucket = unique("handover-reports");
    report_bucket(&aws(), TEST_REGION, &bucket).await;
    bucket
}

/// Store `r` as the readiness function does.
async fn keep(bucket: &str, r: &Readiness) {
    store(
        &S3Reports::new(&aws(), TEST_REGION).await,
        bucket,
        r,
        "shop",
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn last_prints_the_stored_result_and_a_failing_one_exits_not_ready() {
    let bucket = empty_bucket().await;
    let (code, _, err) = readiness(&["--last", "--bucket", &bucket]).await;
    assert_eq!(code, 3, "nothing stored yet: {err}");
    assert!(err.contains("no readiness result"), "{err}");
    let r = failing_channel();
    keep(&bucket, &r).await;
    let (code, out, err) = readiness(&["--last", "--bucket", &bucket]).await;
    assert_eq!(code, 5, "a failing check exits 5: {out}{err}");
    assert!(out.contains("FAIL slack.channel"), "{out}");
    assert!(out.contains("Fix: Invite the bot."), "{out}");
    assert!(
        out.contains(&format!(
            "stored at s3://{bucket}/readiness/latest.json; 12 min old"
        )),
        "{out}"
    );
    let (code, out, _) = readiness(&["--last", "--bucket", &bucket, "--json"]).await;
    assert_eq!(code, 5);
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["summary"], "readiness: 1 fail, 0 warn, 1 pass");
    assert_eq!(doc["age_min"], 12);
    assert_eq!(doc["stale"], false);
    assert_eq!(doc["checks"][1]["id"], "slack.channel");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn last_refuses_flags_that_do_not_apply_and_needs_a_bucket() {
    let (code, _, err) =
        readiness(&["--last", "--fence-role-arn", "a", "--promote-role-arn", "b"]).await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("do not apply"), "{err}");
    let (code, _, err) = readiness(&["--bucket", "b"]).await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--bucket goes with --last"), "{err}");
    let (code, _, err) = readiness(&["--last"]).await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("ReportBucketName"), "{err}");
    let (code, _, err) = readiness(&["--last", "--bucket", &unique("no-such-bucket")]).await;
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("NoSuchBucket"), "{err}");
}

/// A result the function stored hours ago is no evidence of now: an old
/// pass exits 5 and says it is stale, and --json carries its age.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn last_refuses_to_vouch_for_a_stale_pass() {
    let bucket = empty_bucket().await;
    let mut r = failing_channel();
    r.checks.retain(|c| c.verdict == Verdict::Pass);
    r.at = Utc::now() - chrono::Duration::hours(3);
    keep(&bucket, &r).await;
    let (code, out, err) = readiness(&["--last", "--bucket", &bucket]).await;
    assert_eq!(code, 5, "{out}{err}");
    assert!(out.contains("STALE: no evaluation for 180 min"), "{out}");
    let (code, out, _) = readiness(&["--last", "--bucket", &bucket, "--json"]).await;
    assert_eq!(code, 5);
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["age_min"], 180);
    assert_eq!(doc["stale"], true);
    assert_eq!(doc["worst"], "pass");
}
