//! The audit against moto: a real execution (a Pass chain that writes the
//! step outputs, so GetExecutionHistory returns moto's own event shapes),
//! RDS, S3, DynamoDB, Secrets Manager, and the Slack stand-in.

use audit::handler::*;
use chrono::Utc;
use chrono::{DateTime, Duration, SubsecRound};
use handover::error::ErrorName;
use handover::plan::Plan;
use handover::report::Report;
use handover::report::audit::{AuditDeps, AuditOutcome};
use handover::report::sources::SfnHistory;
use handover::slack::api::RetryPolicy;
use handover::slack::api::SlackApi;
use handover::slack::secrets::SecretsManager;
use handover::slack::stand_in::SlackStandIn;
use handover::store::lock::{AcquireOutcome, ReleaseOutcome};
use handover_testkit::world::{create_instance, provision_databases, unique_plan};
use handover_testkit::{TEST_REGION, aws, fresh_store, unique};
use serde_json::{Value, json};
use std::sync::Arc;

const SUCCEEDED: &str = include_str!("../events/succeeded.json");
const RUNNING: &str = include_str!("../events/running.json");

struct World {
    deps: Deps,
    plan: Plan,
    incident: String,
    t0: DateTime<Utc>,
    slack: SlackStandIn,
}

fn iso(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

async fn world() -> World {
    let aws = Arc::new(aws());
    let mut plan = unique_plan();
    plan.report.bucket = unique("reports").to_lowercase();
    aws.s3(TEST_REGION)
        .await
        .create_bucket()
        .bucket(&plan.report.bucket)
        .create_bucket_configuration(
            aws_sdk_s3::types::CreateBucketConfiguration::builder()
                .location_constraint(aws_sdk_s3::types::BucketLocationConstraint::ApNortheast1)
                .build(),
        )
        .send()
        .await
        .expect("create bucket");
    let token = aws
        .secrets(TEST_REGION)
        .await
        .create_secret()
        .name(unique("slack-bot-token"))
        .secret_string("xoxb-test-token")
        .send()
        .await
        .expect("create token secret");
    plan.slack.bot_token_secret_arn = token.arn.expect("secret arn");
    plan.regions.standby.db_secret_arn = None;
    plan.canary = handover::plan::Canary::Http {
        url: "https://s.shop.example.com/write".into(),
    };
    provision_databases(&aws, &plan).await;
    aws.rds(&plan.regions.standby.region)
        .await
        .promote_read_replica()
        .db_instance_identifier(&plan.regions.standby.db_instance_id)
        .send()
        .await
        .expect("promote S in moto");
    let store = fresh_store(&aws).await;
    // Whole seconds: the execution input carries T0 at second precision.
    let t0 = (Utc::now() - Duration::minutes(6)).trunc_subsecs(0);
    let incident = unique("shop-incident");
    store
        .record_tick(&plan.regions.primary.region, t0, true, "{}".into())
        .await
        .expect("probe tick");
    let acquired = store
        .acquire_lock(&incident, &incident, Utc::now(), Duration::hours(2))
        .await
        .expect("lock");
    assert!(matches!(acquired, AcquireOutcome::Acquired { .. }));
    let slack = SlackStandIn::start().await.expect("slack stand-in");
    let api = SlackApi::new(slack.api_base(), RetryPolicy::default()).expect("slack client");
    let deps = Deps {
        audit: AuditDeps {
            store,
            slack: Some((api, SecretsManager::new(aws.clone(), TEST_REGION))),
            aws,
        },
        region: TEST_REGION.into(),
        state_machine_arn: "arn:aws:states:ap-northeast-1:123456789012:stateMachine:handover-none"
            .into(),
    };
    World {
        deps,
        plan,
        incident,
        t0,
        slack,
    }
}

/// A state machine of Pass states that add the step outputs a real run would.
fn definition(w: &World, fail: bool) -> String {
    let t = |s: i64| iso(w.t0 + Duration::seconds(s));
    let mut states = serde_json::Map::new();
    let mut add = |name: &str, key: &str, result: Value, next: &str| {
        states.insert(
            name.into(),
            json!({"Type": "Pass", "Result": result, "ResultPath": format!("$.{key}"), "Next": next}),
        );
    };
    add(
        "Diagnose",
        "diagnosis",
        json!({
        "observed_at": t(130), "evidence": [], "hypotheses": [{"id": "regional_outage", "title": "Regional outage in P",
        "evidence_for": ["P's own endpoint does not answer 2xx"], "evidence_against": [], "standing": "possible"}],
        "risk": "low", "risk_rule": "r", "rpo_estimate_s": 4.0, "rpo_target_s": 60, "rpo_over_target": false,
        "action": "fail_over", "reasons": [], "summary": "P is down"}),
        "RequestApproval",
    );
    add(
        "RequestApproval",
        "approval",
        json!({"decision": "approve", "approver_id": "U0ONCALL01",
        "approver_name": "Primary on-call", "decided_at": t(200), "requested_at": t(135),
        "data_loss_acknowledged": false}),
        "Promote",
    );
    add(
        "Promote",
        "promotion",
        json!({"status": "promoted", "rpo_s": 4.0, "lag_sampled_at": t(205),
        "promote_started_at": t(206), "promoted_at": t(270), "duration_s": 64.0, "epoch": 2, "polls": 2,
        "db_status": "available"}),
        if fail { "Failed" } else { "Switch" },
    );
    add(
        "Switch",
        "switch",
        json!({"mode": "record_upsert", "switched_at": t(272), "changes": []}),
        "Verify",
    );
    let check = |at: i64| json!({"ok": true, "attempts": 1, "first_success_at": t(at), "last_error": null, "detail": "ok"});
    add(
        "Verify",
        "verify",
        json!({"dns": check(275), "read": check(276), "write": check(280), "started_at": t(273)}),
        "Done",
    );
    states.insert("Done".into(), json!({"Type": "Succeed"}));
    states.insert(
        "Failed".into(),
        json!({"Type": "Fail", "Error": "Handover.VerifyFailed", "Cause": "write canary: connection refused"}),
    );
    json!({"StartAt": "Diagnose", "States": states}).to_string()
}

/// Create a state machine of `definition` and start it with the run's
/// input: (state machine ARN, execution ARN).
async fn start(w: &World, definition: String) -> (String, String) {
    let sfn = w.deps.audit.aws.sfn(TEST_REGION).await;
    let machine = sfn
        .create_state_machine()
        .name(unique("handover-audit"))
        .definition(definition)
        .role_arn("arn:aws:iam::123456789012:role/handover-states")
        .send()
        .await
        .expect("create state machine")
        .state_machine_arn;
    let input = json!({
        "incident_id": w.incident, "drill": true, "t0": iso(w.t0), "detected_at": iso(w.t0 + Duration::seconds(120)),
        "primary": {"region": w.plan.regions.primary.region, "db_instance_id": w.plan.regions.primary.db_instance_id, "epoch": 1},
        "standby": {"region": w.plan.regions.standby.region, "db_instance_id": w.plan.regions.standby.db_instance_id},
        "evidence": [], "plan": w.plan,
    });
    let arn = sfn
        .start_execution()
        .state_machine_arn(&machine)
        .name(&w.incident)
        .input(input.to_string())
        .send()
        .await
        .expect("start execution")
        .execution_arn;
    (machine, arn)
}

async fn run(w: &World, fail: bool) -> String {
    let (_, arn) = start(w, definition(w, fail)).await;
    let limit = std::time::Duration::from_secs(10);
    handover_testkit::ended_execution(&w.deps.audit.aws, TEST_REGION, &arn, limit).await;
    arn
}

fn event(arn: &str, name: &str, status: &str) -> Value {
    let mut e: Value = serde_json::from_str(SUCCEEDED).unwrap();
    e["detail"]["executionArn"] = json!(arn);
    e["detail"]["name"] = json!(name);
    e["detail"]["status"] = json!(status);
    e
}

async fn stored_report(w: &World) -> Report {
    let key = format!("{}{}/report.json", w.plan.report.prefix, w.incident);
    let obj = w
        .deps
        .audit
        .aws
        .s3(TEST_REGION)
        .await
        .get_object()
        .bucket(&w.plan.report.bucket)
        .key(key)
        .send()
        .await
        .expect("report.json stored");
    let bytes = obj.body.collect().await.expect("body").into_bytes();
    serde_json::from_slice(&bytes).expect("report.json is a report")
}

#[tokio::test]
async fn a_succeeded_run_is_reported_to_s3_the_lock_released_and_the_probe_reset() {
    let w = world().await;
    let arn = run(&w, false).await;
    let out = handler(event(&arn, &w.incident, "SUCCEEDED"), &w.deps)
        .await
        .unwrap();
    let AuditOutcome::Audited {
        files,
        lock,
        probe_reset,
        slack,
        ..
    } = out
    else {
        panic!("{out:?}")
    };
    assert_eq!(files.len(), 3, "{files:?}");
    for name in ["report.json", "report.md", "report.html"] {
        assert!(
            files
                .iter()
                .any(|f| f.ends_with(&format!("/{}/{name}", w.incident))),
            "{files:?}"
        );
    }
    let ReleaseOutcome::Released { cooldown_until } = lock else {
        panic!("{lock:?}")
    };
    let cooldown = (cooldown_until - Utc::now()).num_seconds();
    assert!(
        (w.plan.timings.cooldown_s as i64 - cooldown).abs() < 60,
        "cooldown {cooldown}"
    );
    assert!(probe_reset);
    let state = w.deps.audit.store.lock_state().await.unwrap().unwrap();
    assert_eq!(state.holder, None);
    assert_eq!(state.last_incident.as_deref(), Some(w.incident.as_str()));
    assert_eq!(
        w.deps
            .audit
            .store
            .probe_run(&w.plan.regions.primary.region)
            .await
            .unwrap()
            .t0,
        None
    );

    // The report read moto's history in full.
    let r = stored_report(&w).await;
    assert_eq!(r.summary.outcome, handover::report::Outcome::Succeeded);
    let names: Vec<&str> = r.states.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "Diagnose",
            "RequestApproval",
            "Promote",
            "Switch",
            "Verify",
            "Done"
        ]
    );
    assert_eq!(r.numbers.read_rto.value_s, Some(276.0));
    assert_eq!(r.numbers.write_rto.value_s, Some(280.0));
    assert_eq!(r.numbers.rpo.value_s, Some(4.0));
    assert_eq!(
        r.summary.approved_by.as_deref(),
        Some("Primary on-call (U0ONCALL01)")
    );
    // P was not fenced in this world: the post-check says split-brain.
    let severity = |check: &str| {
        r.findings
            .iter()
            .find(|f| f.check == check)
            .map(|f| f.severity)
    };
    assert_eq!(
        severity("split_brain"),
        Some(handover::report::Severity::Critical),
        "{:?}",
        r.findings
    );
    assert_eq!(
        severity("replication"),
        Some(handover::report::Severity::Ok),
        "{:?}",
        r.findings
    );

    assert!(
        slack.as_deref().is_some_and(|s| s.starts_with("posted")),
        "{slack:?}"
    );
    let msgs = w.slack.messages();
    assert_eq!(msgs.len(), 1);
    assert_eq!(msgs[0].body["channel"], json!(w.plan.slack.channel));
    assert!(msgs[0].body["blocks"].to_string().contains("Read RTO"));
    assert_eq!(
        msgs[0].authorization.as_deref(),
        Some("Bearer xoxb-test-token")
    );
}

#[tokio::test]
async fn a_failed_run_says_where_it_stopped_and_still_releases_the_lock() {
    let w = world().await;
    let arn = run(&w, true).await;
    let out = handler(event(&arn, &w.incident, "FAILED"), &w.deps)
        .await
        .unwrap();
    let AuditOutcome::Audited { lock, .. } = out else {
        panic!("{out:?}")
    };
    assert!(matches!(lock, ReleaseOutcome::Released { .. }));
    let r = stored_report(&w).await;
    assert_eq!(r.summary.outcome, handover::report::Outcome::Failed);
    let stop = r.stopped.expect("stop point");
    assert_eq!(stop.error.as_deref(), Some("Handover.VerifyFailed"));
    assert_eq!(
        stop.cause.as_deref(),
        Some("write canary: connection refused")
    );
    assert_eq!(r.numbers.write_rto.value_s, None);
}

#[tokio::test]
async fn a_lock_held_by_another_incident_is_left_alone() {
    let w = world().await;
    let arn = run(&w, false).await;
    let other = unique("other-incident");
    let mut e = event(&arn, &w.incident, "SUCCEEDED");
    // The run's own input names w.incident; make another incident hold the lock.
    w.deps
        .audit
        .store
        .release_lock(&w.incident, Utc::now(), Duration::zero())
        .await
        .unwrap();
    w.deps
        .audit
        .store
        .acquire_lock(&other, &other, Utc::now(), Duration::hours(1))
        .await
        .unwrap();
    e["detail"]["status"] = json!("ABORTED");
    let out = handler(e, &w.deps).await.unwrap();
    let AuditOutcome::Audited { lock, files, .. } = out else {
        panic!("{out:?}")
    };
    assert_eq!(
        lock,
        ReleaseOutcome::NotHolder {
            holder: Some(other.clone())
        }
    );
    assert_eq!(files.len(), 3, "the report is written anyway");
    let state = w.deps.audit.store.lock_state().await.unwrap().unwrap();
    assert_eq!(state.holder.as_deref(), Some(other.as_str()));
}

#[tokio::test]
async fn a_running_status_is_skipped_and_bad_events_are_invalid_input() {
    let w = world().await;
    let out = handler(serde_json::from_str(RUNNING).unwrap(), &w.deps)
        .await
        .unwrap();
    assert_eq!(
        out,
        AuditOutcome::Skipped {
            status: "RUNNING".into()
        }
    );
    let mut scheduled = event("arn", "x", "SUCCEEDED");
    scheduled["source"] = json!("aws.events");
    scheduled["detail-type"] = json!("Scheduled Event");
    for bad in [
        json!({}),
        json!("x"),
        scheduled,
        json!({"source": "aws.states",
        "detail-type": DETAIL_TYPE, "detail": {"status": "FAILED"}}),
    ] {
        let err = handler(bad.clone(), &w.deps).await.unwrap_err();
        assert_eq!(err.name, ErrorName::InvalidInput, "{bad}");
    }
    assert!(w.slack.messages().is_empty());
    assert!(
        w.deps
            .audit
            .store
            .lock_state()
            .await
            .unwrap()
            .unwrap()
            .holder
            .is_some(),
        "nothing released"
    );
}

const BACKUP_FINISHED: &str = include_str!("../events/backup-finished.json");

/// RDS's "Finished DB Instance backup" for `instance`.
fn backup_event(instance: &str, event_id: &str) -> Value {
    let mut e: Value = serde_json::from_str(BACKUP_FINISHED).unwrap();
    e["detail"]["SourceIdentifier"] = json!(instance);
    e["detail"]["EventID"] = json!(event_id);
    e
}

#[tokio::test]
async fn the_new_primarys_first_backup_fills_in_the_conservative_rto_once() {
    let w = world().await;
    let arn = run(&w, false).await;
    let (p, s) = (&w.plan.regions.primary, &w.plan.regions.standby);
    // The primary record as the run left it: S at epoch 2, promoted by `arn`.
    let store = &w.deps.audit.store;
    let now = Utc::now();
    store
        .init_primary(&p.region, &p.db_instance_id, now)
        .await
        .unwrap();
    store.begin_fencing(1, &arn, &s.region, now).await.unwrap();
    store
        .claim_promotion(1, &arn, (4.0, now), now)
        .await
        .unwrap();
    store
        .complete_promotion(1, &arn, &s.region, &s.db_instance_id, now)
        .await
        .unwrap();

    // A backup that finishes just after the run ended, before its own
    // audit wrote the report, is left to that audit: a re-audit now would
    // write a report without the run's observations. Nothing is written.
    let AuditOutcome::Skipped { status } =
        handler(backup_event(&s.db_instance_id, "RDS-EVENT-0002"), &w.deps)
            .await
            .unwrap()
    else {
        panic!("re-audited before the run's own report")
    };
    assert!(status.contains("not written yet"), "{status}");
    assert!(w.slack.messages().is_empty());
    let key = format!("{}{}/report.json", w.plan.report.prefix, w.incident);
    let none = w
        .deps
        .audit
        .aws
        .s3(TEST_REGION)
        .await
        .head_object()
        .bucket(&w.plan.report.bucket)
        .key(key)
        .send()
        .await;
    assert!(none.is_err(), "no report was written");

    handler(event(&arn, &w.incident, "SUCCEEDED"), &w.deps)
        .await
        .unwrap();
    let first = stored_report(&w).await;
    assert_eq!(
        first.numbers.conservative_rto.status,
        handover::report::Status::Pending,
        "moto's promoted replica has no backup yet: {:?}",
        first.numbers.conservative_rto
    );

    // Backups of other instances, and other RDS events, change nothing.
    for (e, why) in [
        (
            backup_event("some-other-db", "RDS-EVENT-0002"),
            "is not the primary",
        ),
        (
            backup_event(&s.db_instance_id, "RDS-EVENT-0001"),
            "is not a finished backup",
        ),
    ] {
        let AuditOutcome::Skipped { status } = handler(e, &w.deps).await.unwrap() else {
            panic!("not skipped: {why}")
        };
        assert!(status.contains(why), "{status}");
    }
    assert_eq!(w.slack.messages().len(), 1);

    // RDS finishes the new primary's first automated backup. moto takes one
    // only when an instance is created, so S's instance is created again
    // under the same identifier (what the audit reads is moto's own answer).
    let rds = w.deps.audit.aws.rds(&s.region).await;
    rds.delete_db_instance()
        .db_instance_identifier(&s.db_instance_id)
        .skip_final_snapshot(true)
        .send()
        .await
        .expect("delete in moto");
    create_instance(&w.deps.audit.aws, &s.region, &s.db_instance_id, None).await;

    let out = handler(backup_event(&s.db_instance_id, "RDS-EVENT-0002"), &w.deps)
        .await
        .unwrap();
    assert!(matches!(out, AuditOutcome::Audited { .. }), "{out:?}");
    let second = stored_report(&w).await;
    let c = &second.numbers.conservative_rto;
    assert_eq!(c.status, handover::report::Status::Pass, "{c:?}");
    assert!(c.value_s.is_some_and(|v| v > 0.0), "{c:?}");
    assert_eq!(second.numbers.write_rto, first.numbers.write_rto);
    let msgs = w.slack.messages();
    assert_eq!(msgs.len(), 2, "the updated summary is posted");
    let update = msgs[1].body.to_string();
    assert!(update.contains("*Updated report.*"), "{update}");
    assert!(!msgs[0].body.to_string().contains("Updated report"));

    // The next backup (tomorrow's) finds the number already there.
    let AuditOutcome::Skipped { status } =
        handler(backup_event(&s.db_instance_id, "RDS-EVENT-0002"), &w.deps)
            .await
            .unwrap()
    else {
        panic!("re-audited twice")
    };
    assert!(
        status.contains("already has its conservative RTO"),
        "{status}"
    );
    assert_eq!(w.slack.messages().len(), 2);

    // An RDS event without its instance is refused.
    let mut bad = backup_event(&s.db_instance_id, "RDS-EVENT-0002");
    bad["detail"]
        .as_object_mut()
        .unwrap()
        .remove("SourceIdentifier");
    let err = handler(bad, &w.deps).await.unwrap_err();
    assert_eq!(err.name, ErrorName::InvalidInput);
    let mut wrong = backup_event(&s.db_instance_id, "RDS-EVENT-0002");
    wrong["detail-type"] = json!("RDS DB Snapshot Event");
    let err = handler(wrong, &w.deps).await.unwrap_err();
    assert_eq!(err.name, ErrorName::InvalidInput);
}

/// The sweep's schedule as EventBridge Scheduler delivers it (events/sweep.json).
const SWEEP: &str = include_str!("../events/sweep.json");

/// Every delivery of a run's status change failed (the event went to the
/// failure queue): the run still holds the lock. The sweep leaves a run that
/// ended moments ago to its own audit, audits one that ended more than
/// `GRACE` ago exactly as the event would have (report, release), and then
/// finds nothing left.
#[tokio::test]
async fn the_sweep_audits_a_run_whose_audit_never_came() {
    use handover::report::sweep::{GRACE, sweep};
    let w = world().await;
    let arn = run(&w, true).await;
    let sfn = w.deps.audit.aws.sfn(TEST_REGION).await;
    let machine = sfn
        .describe_execution()
        .execution_arn(&arn)
        .send()
        .await
        .unwrap()
        .state_machine_arn
        .clone();
    let history = SfnHistory::new(&w.deps.audit.aws, TEST_REGION).await;
    let held = || async {
        w.deps
            .audit
            .store
            .lock_state()
            .await
            .unwrap()
            .and_then(|l| l.holder)
    };
    let out = sweep(&w.deps.audit, &history, &machine, Utc::now())
        .await
        .unwrap();
    assert!(matches!(out, AuditOutcome::Skipped { .. }), "{out:?}");
    assert_eq!(
        held().await.as_deref(),
        Some(w.incident.as_str()),
        "left to its own audit"
    );
    let later = Utc::now() + GRACE + Duration::minutes(1);
    let out = sweep(&w.deps.audit, &history, &machine, later)
        .await
        .unwrap();
    let AuditOutcome::Audited { lock, status, .. } = out else {
        panic!("{out:?}")
    };
    assert_eq!(status, "FAILED");
    assert!(matches!(lock, ReleaseOutcome::Released { .. }), "{lock:?}");
    assert_eq!(held().await, None);
    let r = stored_report(&w).await;
    assert_eq!(r.summary.outcome, handover::report::Outcome::Failed);
    let out = sweep(&w.deps.audit, &history, &machine, later)
        .await
        .unwrap();
    assert!(
        matches!(&out, AuditOutcome::Skipped { status } if status.starts_with("nothing left behind")),
        "{out:?}"
    );
    // The Slack summary says it was late.
    assert!(
        w.slack
            .messages()
            .iter()
            .any(|m| m.body.to_string().contains("Late audit")),
        "no late-audit summary"
    );
}

/// Issue 35: detect's renewal after the start can be lost, and no tick of
/// a new incident renews another's lock. The sweep keeps a running run's
/// lock for its whole lease, counted from the sweep.
#[tokio::test]
async fn the_sweep_keeps_a_running_runs_lock_for_its_lease() {
    use handover::report::sweep::sweep;
    let w = world().await;
    let hold = json!({"StartAt": "Hold", "States": {
        "Hold": {"Type": "Wait", "Seconds": 3600, "Next": "Done"},
        "Done": {"Type": "Succeed"}}});
    let (machine, _) = start(&w, hold.to_string()).await;
    let history = SfnHistory::new(&w.deps.audit.aws, TEST_REGION).await;
    let out = sweep(&w.deps.audit, &history, &machine, Utc::now())
        .await
        .unwrap();
    assert!(matches!(out, AuditOutcome::Skipped { .. }), "{out:?}");
    let lock = w.deps.audit.store.lock_state().await.unwrap().unwrap();
    assert_eq!(lock.holder.as_deref(), Some(w.incident.as_str()));
    let lease = w.plan.failover_lease_s() as i64;
    let left = (lock.lease_until.unwrap() - Utc::now()).num_seconds();
    assert!(
        (lease - 60..=lease).contains(&left),
        "{left} s of lease left after the sweep, against {lease} s"
    );
}

/// Two sweeps failed, and the running run's lease lapsed with no other
/// incident taking the lock: the next sweep takes it back for the run's
/// lease. Without that, detect could start a failover beside the run.
#[tokio::test]
async fn the_sweep_takes_back_a_running_runs_lapsed_lock() {
    use handover::report::sweep::sweep;
    let w = world().await;
    let hold = json!({"StartAt": "Hold", "States": {
        "Hold": {"Type": "Wait", "Seconds": 3600, "Next": "Done"},
        "Done": {"Type": "Succeed"}}});
    let (machine, _) = start(&w, hold.to_string()).await;
    let history = SfnHistory::new(&w.deps.audit.aws, TEST_REGION).await;
    // The world's lock has a 2-hour lease: the sweep runs after it.
    let later = Utc::now() + Duration::hours(2) + Duration::minutes(1);
    let out = sweep(&w.deps.audit, &history, &machine, later)
        .await
        .unwrap();
    assert!(matches!(out, AuditOutcome::Skipped { .. }), "{out:?}");
    let lock = w.deps.audit.store.lock_state().await.unwrap().unwrap();
    assert_eq!(lock.holder.as_deref(), Some(w.incident.as_str()));
    let lease = w.plan.failover_lease_s() as i64;
    let left = (lock.lease_until.unwrap() - later).num_seconds();
    assert!(
        (lease - 60..=lease).contains(&left),
        "{left} s of lease left after the sweep, against {lease} s"
    );
}

/// A run stopped from outside after its fence (StopExecution, as an
/// operator or the run's timeout would): the fence or promote invocation it
/// started may still be running, and Step Functions does not stop it. The
/// audit reports and releases the lock, but leaves P fenced and the
/// transition held, says so, and the sweep undoes them once no task of the
/// run can act any more.
#[tokio::test]
async fn a_stopped_runs_fence_is_undone_only_after_its_tasks_cannot_act() {
    use handover::failover::compensate::{Compensation, TAIL};
    use handover::failover::fence::DbFencer;
    use handover::report::sweep::sweep;
    let w = world().await;
    let sfn = w.deps.audit.aws.sfn(TEST_REGION).await;
    // A run that sits in its fence until it is stopped.
    let (machine, arn) = start(
        &w,
        json!({"StartAt": "Fence", "States": {"Fence": {"Type": "Wait", "Seconds": 600, "End": true}}})
            .to_string(),
    )
    .await;
    // The fence as the run's fence function left it: the transition
    // claimed, P's groups recorded, then replaced by the fence group.
    let (p, s) = (&w.plan.regions.primary, &w.plan.regions.standby);
    let store = &w.deps.audit.store;
    let now = Utc::now();
    store
        .init_primary(&p.region, &p.db_instance_id, now)
        .await
        .unwrap();
    store.begin_fencing(1, &arn, &s.region, now).await.unwrap();
    let before = handover_testkit::world::p_security_groups(&w.deps.audit.aws, &w.plan).await;
    store
        .record_fence_previous(1, &arn, &before, now)
        .await
        .unwrap();
    let p_rds = handover::adapters::Rds::new(&w.deps.audit.aws, &p.region).await;
    p_rds
        .set_security_groups(
            &p.db_instance_id,
            std::slice::from_ref(&p.fence_security_group_id),
            std::time::Duration::from_secs(5),
        )
        .await
        .unwrap();
    sfn.stop_execution()
        .execution_arn(&arn)
        .error("Operator")
        .cause("stopped by hand")
        .send()
        .await
        .unwrap();
    // StopExecution returns before the run is ABORTED (moto's worker stops
    // it a moment later); the status event is only sent once it is.
    let limit = std::time::Duration::from_secs(10);
    let stopped = handover_testkit::ended_execution(&w.deps.audit.aws, TEST_REGION, &arn, limit)
        .await
        .stop_date
        .map(|d| DateTime::<Utc>::from_timestamp_millis(d.to_millis().unwrap()).unwrap())
        .expect("a stopped run has a stop date");
    let mut e = event(&arn, &w.incident, "ABORTED");
    e["detail"]["stopDate"] = json!(stopped.timestamp_millis());
    let out = handler(e, &w.deps).await.unwrap();
    let AuditOutcome::Audited {
        compensation, lock, ..
    } = out
    else {
        panic!("{out:?}")
    };
    let Compensation::Deferred { until } = compensation else {
        panic!("compensated at once: {compensation:?}")
    };
    assert!(
        until >= stopped + TAIL - Duration::seconds(1)
            && until <= stopped + TAIL + Duration::seconds(1),
        "{until} is not TAIL after {stopped}"
    );
    assert!(matches!(lock, ReleaseOutcome::Released { .. }), "{lock:?}");
    let fenced = vec![p.fence_security_group_id.clone()];
    let groups = || handover_testkit::world::p_security_groups(&w.deps.audit.aws, &w.plan);
    assert_eq!(groups().await, fenced, "P stays fenced inside the tail");
    let transition = || async { store.primary().await.unwrap().unwrap().transition };
    assert!(transition().await.is_some(), "the transition stays held");
    assert!(
        w.slack
            .messages()
            .iter()
            .any(|m| m.body.to_string().contains("may still be acting")),
        "the operators are told why P stays fenced"
    );
    // The sweep inside the tail leaves it; after it, undoes it.
    let history = SfnHistory::new(&w.deps.audit.aws, TEST_REGION).await;
    let out = sweep(&w.deps.audit, &history, &machine, Utc::now())
        .await
        .unwrap();
    assert!(
        matches!(
            &out,
            AuditOutcome::Reconciled {
                compensation: Compensation::Deferred { .. },
                ..
            }
        ),
        "{out:?}"
    );
    assert_eq!(groups().await, fenced);
    let out = sweep(
        &w.deps.audit,
        &history,
        &machine,
        until + Duration::seconds(1),
    )
    .await
    .unwrap();
    assert!(
        matches!(
            &out,
            AuditOutcome::Reconciled {
                compensation: Compensation::Released { .. },
                ..
            }
        ),
        "{out:?}"
    );
    assert_eq!(groups().await, before, "P unfenced after the tail");
    assert!(transition().await.is_none());
}

/// The handler takes the sweep's Scheduler payload, and refuses an
/// EventBridge rule's scheduled payload with the reason.
#[tokio::test]
async fn the_sweeps_schedule_is_accepted_and_a_rule_payload_is_refused() {
    let w = world().await;
    let out = handler(serde_json::from_str(SWEEP).unwrap(), &w.deps)
        .await
        .unwrap();
    assert!(matches!(out, AuditOutcome::Skipped { .. }), "{out:?}");
    let mut rule: Value = serde_json::from_str(SWEEP).unwrap();
    rule["source"] = json!("aws.events");
    rule["detail"] = json!({});
    let err = handler(rule, &w.deps).await.unwrap_err();
    assert_eq!(err.name, ErrorName::InvalidInput);
    assert!(
        err.message.contains("EventBridge Scheduler"),
        "{}",
        err.message
    );
}

/// Issue 12, scenario 9: audit releases the lock before anything that can
/// fail. The history cannot be read (here: the execution is gone); the lock
/// is released all the same, from the input the event carries.
#[tokio::test]
async fn the_lock_is_released_even_when_the_history_cannot_be_read() {
    let w = world().await;
    let input = json!({
        "incident_id": w.incident, "drill": true, "t0": iso(w.t0), "detected_at": iso(w.t0 + Duration::seconds(120)),
        "primary": {"region": w.plan.regions.primary.region, "db_instance_id": w.plan.regions.primary.db_instance_id, "epoch": 1},
        "standby": {"region": w.plan.regions.standby.region, "db_instance_id": w.plan.regions.standby.db_instance_id},
        "evidence": [], "plan": w.plan,
    });
    let gone = format!(
        "arn:aws:states:{TEST_REGION}:123456789012:execution:handover-none:{}",
        w.incident
    );
    let mut e = event(&gone, &w.incident, "FAILED");
    e["detail"]["input"] = json!(input.to_string());
    let err = handler(e, &w.deps).await.unwrap_err();
    assert!(
        err.message.contains("GetExecutionHistory"),
        "{}",
        err.message
    );
    let lock = w.deps.audit.store.lock_state().await.unwrap().unwrap();
    assert_eq!(lock.holder, None, "released first: {lock:?}");
    assert!(lock.cooldown_until.is_some());
}
