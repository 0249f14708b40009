//! switch and verify against moto's Route 53 and SSM, loopback stand-ins
//! (the app, an ARC cluster), and a real PostgreSQL for the write canary.

use chrono::Utc;
use handover::adapters::traffic::{ArcClusters, Route53Control, Ssm};
use handover::aws::Aws;
use handover::error::{Classify, ErrorName};
use handover::failover::canary::SecretsManager;
use handover::failover::switch::{SwitchDeps, switch};
use handover::failover::verify::{Backoff, VerifyDeps, verify};
use handover::plan::{ArcEndpoint, Canary, Plan, SwitchMode, WriterEndpoint};
use handover::store::Store;
use handover_testkit::app::App;
use handover_testkit::world::{
    provision_dns, put_db_secret, run_state, test_postgres, test_postgres_cas, unique_plan,
};
use handover_testkit::{aws, control, fresh_store};
use serde_json::json;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn dns_plan(aws: &Aws) -> Plan {
    let mut plan = unique_plan();
    provision_dns(aws, &mut plan, "p-alb.ap-northeast-2.elb.amazonaws.com").await;
    plan
}

const EXECUTION: &str = "arn:aws:states:ap-northeast-1:123456789012:execution:handover:inc-switch";

/// A state store whose record says `EXECUTION` completed the failover to S
/// (epoch 2), as promote leaves it before switch runs.
async fn promoted_store(aws: &Aws, plan: &Plan) -> Store {
    let store = fresh_store(aws).await;
    let (p, s) = (&plan.regions.primary, &plan.regions.standby);
    let now = Utc::now();
    store
        .init_primary(&p.region, &p.db_instance_id, now)
        .await
        .unwrap();
    store
        .begin_fencing(1, EXECUTION, &s.region, now)
        .await
        .unwrap();
    store
        .claim_promotion(1, EXECUTION, (4.0, now), now)
        .await
        .unwrap();
    store.mark_promote_called(1, EXECUTION, now).await.unwrap();
    store
        .complete_promotion(1, EXECUTION, &s.region, &s.db_instance_id, now)
        .await
        .unwrap();
    store
}

async fn run_switch(aws: &Aws, plan: &Plan) -> handover::execution::SwitchResult {
    let store = promoted_store(aws, plan).await;
    try_switch(aws, plan, &store).await.unwrap()
}

async fn try_switch(
    aws: &Aws,
    plan: &Plan,
    store: &Store,
) -> Result<handover::execution::SwitchResult, handover::failover::StepError> {
    let state = run_state(plan, json!({"promotion": promoted()}));
    let control = Route53Control::new(aws).await;
    let arc = ArcClusters::new(aws, &plan.dns.arc_cluster_endpoints).await;
    let ssm = Ssm::new(aws, &plan.regions.standby.region).await;
    let deps = SwitchDeps {
        checks: &control,
        records: &control,
        arc: &arc,
        params: &ssm,
        store,
    };
    switch(&state, EXECUTION, &deps, Utc::now).await
}

/// promote's result once S is promoted (epoch 2).
fn promoted() -> serde_json::Value {
    let now = Utc::now();
    json!({"status": "promoted", "rpo_s": 4.0, "lag_sampled_at": now, "promote_started_at": now,
           "promoted_at": now, "duration_s": 1.0, "epoch": 2, "polls": 1, "db_status": "available"})
}

/// P's check's (Inverted, Disabled).
async fn flags(aws: &Aws, id: &str) -> (bool, bool) {
    let c = aws
        .route53()
        .await
        .get_health_check()
        .health_check_id(id)
        .send()
        .await
        .unwrap()
        .health_check
        .unwrap()
        .health_check_config
        .unwrap();
    (c.inverted.unwrap_or(false), c.disabled.unwrap_or(false))
}

async fn inverted(aws: &Aws, id: &str) -> bool {
    flags(aws, id).await.0
}

/// What DNS answers for the public name (the router's failover rule).
async fn answers(aws: &Aws, plan: &Plan) -> Vec<String> {
    aws.route53()
        .await
        .test_dns_answer()
        .hosted_zone_id(&plan.dns.hosted_zone_id)
        .record_name(&plan.dns.record_name)
        .record_type(aws_sdk_route53::types::RrType::Cname)
        .send()
        .await
        .unwrap()
        .record_data()
        .to_vec()
}

async fn cname(aws: &Aws, zone: &str, name: &str) -> Vec<String> {
    let out = aws
        .route53()
        .await
        .list_resource_record_sets()
        .hosted_zone_id(zone)
        .send()
        .await
        .unwrap();
    out.resource_record_sets()
        .iter()
        .filter(|r| r.name().trim_end_matches('.') == name.trim_end_matches('.'))
        .flat_map(|r| r.resource_records().iter().map(|v| v.value().to_owned()))
        .collect()
}

/// Issue 12, scenario 5: the lever holds S whatever P's endpoint does. With
/// P's check failing, Route 53 already answers S; once P's endpoint answers
/// again it would send users back to a fenced P, unless Handover pins it.
#[tokio::test]
async fn health_check_failover_pins_s_even_when_ps_endpoint_answers_again() {
    let aws = aws();
    let plan = dns_plan(&aws).await;
    let p_check = plan.regions.primary.health_check_id.clone();
    control("health", json!({ &p_check: false })).await; // P down: DNS answers S
    assert_eq!(
        answers(&aws, &plan).await,
        vec![plan.dns.standby_target.clone()]
    );
    let out = run_switch(&aws, &plan).await;
    assert_eq!(
        flags(&aws, &p_check).await,
        (true, true),
        "Disabled + Inverted"
    );
    let pin = out
        .changes
        .iter()
        .find(|c| c.what.contains("health_check"))
        .expect("the pin is reported");
    assert_eq!(
        pin.previous.as_deref(),
        Some("inverted=false, disabled=false")
    );
    // P's endpoint answers again: DNS stays on S.
    control("health", json!({ &p_check: true })).await;
    assert_eq!(
        answers(&aws, &plan).await,
        vec![plan.dns.standby_target.clone()]
    );
    // The writer moved first.
    assert!(
        out.changes[0].what.contains("(writer)"),
        "{:?}",
        out.changes
    );
}

/// The private zone of the plan's writer CNAME.
fn writer_zone(plan: &Plan) -> String {
    match &plan.dns.writer {
        WriterEndpoint::Cname { hosted_zone_id, .. } => hosted_zone_id.clone(),
        other => panic!("the test plan's writer is a CNAME, not {other:?}"),
    }
}

/// Route 53 answers a change PENDING, then INSYNC "generally within 60
/// seconds" (API Reference, GetChange). switch waits for it within the
/// plan's `timings.dns_sync_s`, not within six call budgets: a change
/// slower than those is waited for, not failed and retried.
#[tokio::test]
async fn a_writer_change_slower_than_six_call_budgets_is_waited_for() {
    let aws = aws();
    let mut plan = dns_plan(&aws).await;
    plan.timings.call_timeout_ms = 1000; // six budgets: 6 s
    let zone = writer_zone(&plan);
    control("realism", json!({ &zone: { "route53_insync_s": 7.0 } })).await;
    let t = std::time::Instant::now();
    let out = run_switch(&aws, &plan).await;
    control("realism", json!({ &zone: null })).await;
    assert!(out.unsynced.is_empty(), "{:?}", out.unsynced);
    assert!(
        t.elapsed() >= Duration::from_secs(7),
        "switch ended in {:?}, before the change was INSYNC",
        t.elapsed()
    );
}

/// A change still PENDING when `timings.dns_sync_s` runs out is applied
/// all the same: switch reports it, and does not fail the run.
#[tokio::test]
async fn a_change_still_pending_when_the_wait_ends_is_reported_not_failed() {
    let aws = aws();
    let mut plan = dns_plan(&aws).await;
    plan.timings.dns_sync_s = 1;
    let zone = writer_zone(&plan);
    control("realism", json!({ &zone: { "route53_insync_s": 30.0 } })).await;
    let t = std::time::Instant::now();
    let out = run_switch(&aws, &plan).await;
    control("realism", json!({ &zone: null })).await;
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    assert_eq!(out.unsynced.len(), 1, "{:?}", out.unsynced);
    assert!(out.unsynced[0].contains("(writer)"), "{:?}", out.unsynced);
    let WriterEndpoint::Cname {
        name,
        standby_target,
        ..
    } = &plan.dns.writer
    else {
        unreachable!()
    };
    assert_eq!(cname(&aws, &zone, name).await, vec![standby_target.clone()]);
}

/// A re-run after an attempt whose wait was cut short (its Lambda timed
/// out, or it crashed) finds the writer moved. It waits for INSYNC all the
/// same, on the same UPSERT made again, and reports nothing unconfirmed.
#[tokio::test]
async fn a_rerun_waits_for_insync_on_a_change_an_earlier_attempt_made() {
    let aws = aws();
    let mut plan = dns_plan(&aws).await;
    let store = promoted_store(&aws, &plan).await;
    let zone = writer_zone(&plan);
    control("realism", json!({ &zone: { "route53_insync_s": 4.0 } })).await;
    plan.timings.dns_sync_s = 1;
    let first = try_switch(&aws, &plan, &store).await.unwrap();
    plan.timings.dns_sync_s = 90;
    let t = std::time::Instant::now();
    let again = try_switch(&aws, &plan, &store).await.unwrap();
    control("realism", json!({ &zone: null })).await;
    assert_eq!(first.unsynced.len(), 1, "{:?}", first.unsynced);
    assert!(again.unsynced.is_empty(), "{:?}", again.unsynced);
    assert!(
        t.elapsed() >= Duration::from_secs(4),
        "the re-run ended in {:?}, before its change was INSYNC",
        t.elapsed()
    );
    assert_eq!(
        again.changes.len(),
        first.changes.len(),
        "{:?}",
        again.changes
    );
}

/// A re-run (the first attempt's answer lost after it acted, or a crash)
/// finds every change made and still reports the values failback needs:
/// they were recorded in the state store before each change.
#[tokio::test]
async fn a_rerun_of_switch_reports_the_values_recorded_before_the_first_attempt() {
    let aws = aws();
    let plan = dns_plan(&aws).await;
    let store = promoted_store(&aws, &plan).await;
    let first = try_switch(&aws, &plan, &store).await.unwrap();
    let again = try_switch(&aws, &plan, &store).await.unwrap();
    assert_eq!(first.changes.len(), 2, "{:?}", first.changes);
    assert_eq!(
        first
            .changes
            .iter()
            .map(|c| (&c.what, &c.previous))
            .collect::<Vec<_>>(),
        again
            .changes
            .iter()
            .map(|c| (&c.what, &c.previous))
            .collect::<Vec<_>>(),
        "the re-run lost what was there before"
    );
    let rec = store.primary().await.unwrap().unwrap();
    assert_eq!(rec.switch_previous.len(), 2, "{:?}", rec.switch_previous);
}

/// Both moves are attempted: the health-check pin failing does not keep the
/// writer on P, and is reported (and alerted) rather than fatal, since
/// verify's DNS check decides whether users are on S.
#[tokio::test]
async fn the_writer_moves_and_a_pin_that_fails_is_reported() {
    let aws = aws();
    let mut plan = dns_plan(&aws).await;
    plan.regions.primary.health_check_id = "00000000-0000-0000-0000-000000000000".into();
    let store = promoted_store(&aws, &plan).await;
    let out = try_switch(&aws, &plan, &store).await.unwrap();
    let pin = out
        .changes
        .iter()
        .find(|c| c.what.contains("health_check"))
        .expect("the pin is reported");
    assert!(pin.now.starts_with("NOT pinned"), "{pin:?}");
    assert!(pin.now.contains("UpdateHealthCheck"), "{pin:?}");
    let WriterEndpoint::Cname {
        hosted_zone_id,
        name,
        standby_target,
    } = &plan.dns.writer
    else {
        panic!()
    };
    assert_eq!(
        cname(&aws, hosted_zone_id, name).await,
        vec![standby_target.clone()],
        "the writer moved"
    );
}

#[tokio::test]
async fn health_check_failover_pins_a_green_check_and_moves_the_writer() {
    let aws = aws();
    let plan = dns_plan(&aws).await;
    let p_check = plan.regions.primary.health_check_id.clone();
    control("health", json!({ &p_check: true })).await; // app dead, check green
    let out = run_switch(&aws, &plan).await;
    assert!(inverted(&aws, &p_check).await, "P's check is inverted");
    let WriterEndpoint::Cname {
        hosted_zone_id,
        name,
        standby_target,
    } = &plan.dns.writer
    else {
        panic!()
    };
    assert_eq!(
        cname(&aws, hosted_zone_id, name).await,
        vec![standby_target.clone()]
    );
    assert_eq!(out.changes.len(), 2, "{:?}", out.changes);
    assert_eq!(
        out.changes[0].previous.as_deref(),
        Some("p-db.ap-northeast-2.rds.amazonaws.com")
    );
    assert_eq!(
        out.changes[1].previous.as_deref(),
        Some("inverted=false, disabled=false")
    );
    // The public failover records are untouched.
    let public = cname(&aws, &plan.dns.hosted_zone_id, &plan.dns.record_name).await;
    assert_eq!(public.len(), 2);
}

#[tokio::test]
async fn record_upsert_points_the_public_name_at_s_and_an_ssm_writer() {
    let aws = aws();
    let mut plan = unique_plan();
    let zone = aws
        .route53()
        .await
        .create_hosted_zone()
        .name(format!("{}.example.com", handover_testkit::unique("up")))
        .caller_reference(handover_testkit::unique("z"))
        .send()
        .await
        .unwrap()
        .hosted_zone
        .unwrap();
    plan.dns.hosted_zone_id = zone.id.trim_start_matches("/hostedzone/").to_owned();
    plan.dns.record_name = format!("app.{}", zone.name);
    plan.dns.switch_mode = SwitchMode::RecordUpsert;
    let param = format!("/{}/writer", handover_testkit::unique("shop"));
    plan.dns.writer = WriterEndpoint::SsmParameter {
        name: param.clone(),
        standby_value: "s-db.example".into(),
    };
    let ssm = aws.ssm(&plan.regions.standby.region).await;
    ssm.put_parameter()
        .name(&param)
        .value("p-db.example")
        .r#type(aws_sdk_ssm::types::ParameterType::String)
        .send()
        .await
        .unwrap();
    let out = run_switch(&aws, &plan).await;
    assert_eq!(
        cname(&aws, &plan.dns.hosted_zone_id, &plan.dns.record_name).await,
        vec![plan.dns.standby_target.clone()]
    );
    let now = ssm
        .get_parameter()
        .name(&param)
        .send()
        .await
        .unwrap()
        .parameter
        .unwrap()
        .value
        .unwrap();
    assert_eq!(now, "s-db.example");
    assert_eq!(out.changes[0].previous.as_deref(), Some("p-db.example"));
    assert_eq!(out.changes[1].previous, None, "there was no record before");
    // Idempotent: a second switch by another run changes nothing.
    assert!(run_switch(&aws, &plan).await.changes.is_empty());
}

/// A loopback ARC cluster endpoint that records UpdateRoutingControlState bodies.
async fn arc_stand_in(seen: Arc<Mutex<Vec<serde_json::Value>>>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    let n = sock.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        break;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    let text = String::from_utf8_lossy(&buf);
                    if let Some(i) = text.find("\r\n\r\n") {
                        let len = text[..i]
                            .lines()
                            .find_map(|l| {
                                l.to_ascii_lowercase()
                                    .strip_prefix("content-length:")
                                    .map(|v| v.trim().parse::<usize>().unwrap())
                            })
                            .unwrap_or(0);
                        if buf.len() >= i + 4 + len {
                            let body: serde_json::Value =
                                serde_json::from_slice(&buf[i + 4..i + 4 + len]).unwrap();
                            seen.lock().unwrap().push(body);
                            break;
                        }
                    }
                }
                let resp = "HTTP/1.1 200 OK\r\ncontent-type: application/x-amz-json-1.0\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}";
                let _ = sock.write_all(resp.as_bytes()).await;
            });
        }
    });
    url
}

#[tokio::test]
async fn routing_control_turns_s_on_then_p_off_rotating_past_a_dead_endpoint() {
    let aws = aws();
    let mut plan = dns_plan(&aws).await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let live = arc_stand_in(seen.clone()).await;
    plan.dns.switch_mode = SwitchMode::RoutingControl;
    plan.dns.arc_cluster_endpoints = vec![
        ArcEndpoint {
            endpoint: "http://127.0.0.1:9".into(),
            region: "us-west-2".into(),
        },
        ArcEndpoint {
            endpoint: live,
            region: "us-west-2".into(),
        },
    ];
    plan.regions.primary.routing_control_arn = Some(
        "arn:aws:route53-recovery-control::123456789012:controlpanel/x/routingcontrol/p".into(),
    );
    plan.regions.standby.routing_control_arn = Some(
        "arn:aws:route53-recovery-control::123456789012:controlpanel/x/routingcontrol/s".into(),
    );
    plan.validate().unwrap();
    let out = run_switch(&aws, &plan).await;
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert!(
        seen[0]["RoutingControlArn"]
            .as_str()
            .unwrap()
            .ends_with("/s")
    );
    assert_eq!(seen[0]["RoutingControlState"], "On");
    assert!(
        seen[1]["RoutingControlArn"]
            .as_str()
            .unwrap()
            .ends_with("/p")
    );
    assert_eq!(seen[1]["RoutingControlState"], "Off");
    assert_eq!(out.changes.len(), 3);
}

async fn verify_plan(aws: &Aws, database: &str) -> (Plan, App) {
    let mut plan = dns_plan(aws).await;
    let app = App::start(200).await;
    plan.dns.read_url = Some(format!("{}/health", app.url));
    // verify asks RDS for S's endpoint on every canary attempt.
    handover_testkit::world::provision_databases(aws, &plan).await;
    let (port, password) = test_postgres();
    let secret = put_db_secret(aws, &plan.regions.standby.region, "handover", &password).await;
    plan.canary = Canary::Postgres {
        host: Some("127.0.0.1".into()),
        port,
        database: database.into(),
        secret_arn: secret,
        table: "handover_canary".into(),
        require_tls: false,
        ca_secret_arn: None,
        tls_server_name: None,
    };
    plan.timings.verify_deadline_s = 3;
    control("health", json!({ &plan.regions.primary.health_check_id: false, &plan.regions.standby.health_check_id: true })).await;
    // The writer endpoint as switch leaves it.
    move_writer_to_s(aws, &plan).await;
    (plan, app)
}

async fn move_writer_to_s(aws: &Aws, plan: &Plan) {
    use handover::adapters::traffic::RecordSets;
    let WriterEndpoint::Cname {
        hosted_zone_id,
        name,
        standby_target,
    } = &plan.dns.writer
    else {
        panic!("the test plan's writer is a CNAME")
    };
    Route53Control::new(aws)
        .await
        .upsert(
            hosted_zone_id,
            name,
            "CNAME",
            standby_target,
            Duration::from_secs(5),
        )
        .await
        .unwrap();
}

async fn run_verify(
    aws: &Aws,
    plan: &Plan,
) -> Result<handover::execution::VerifyResult, handover::failover::StepError> {
    let state = run_state(plan, json!({}));
    let control = Route53Control::new(aws).await;
    let secrets = SecretsManager::new(aws, &plan.regions.standby.region).await;
    let http = reqwest::Client::new();
    let rds = handover::adapters::Rds::new(aws, &plan.regions.standby.region).await;
    let ssm = Ssm::new(aws, &plan.regions.standby.region).await;
    let writer = handover::adapters::traffic::WriterLookup {
        records: &control,
        params: &ssm,
    };
    let deps = VerifyDeps {
        dns: &control,
        rds: &rds,
        secrets: &secrets,
        http: &http,
        writer: &writer,
    };
    verify(
        &state,
        &deps,
        Backoff {
            first: Duration::from_millis(100),
            max: Duration::from_millis(400),
        },
    )
    .await
}

#[tokio::test]
async fn verify_passes_with_dns_on_s_a_200_and_a_real_insert() {
    let aws = aws();
    let (plan, _app) = verify_plan(&aws, "handover").await;
    let v = run_verify(&aws, &plan).await.unwrap();
    assert!(v.dns.ok && v.read.ok && v.write.ok);
    assert!(v.writer.as_ref().is_some_and(|w| w.ok), "{:?}", v.writer);
    assert!(
        v.write.detail.contains("INSERT INTO handover_canary"),
        "{}",
        v.write.detail
    );
    assert!(v.read.first_success_at.unwrap() >= v.started_at);
    assert!(v.write.first_success_at.is_some());
}

#[tokio::test]
async fn verify_against_a_read_only_database_retries_then_fails_at_the_deadline() {
    let aws = aws();
    let (plan, _app) = verify_plan(&aws, "handover_ro").await;
    let started = std::time::Instant::now();
    let err = run_verify(&aws, &plan).await.unwrap_err();
    assert_eq!(err.error_name(), ErrorName::VerifyFailed);
    let text = err.to_string();
    assert!(
        text.contains("read-only") || text.contains("25006"),
        "{text}"
    );
    assert!(
        text.contains("\"attempts\":"),
        "the evidence is in the error: {text}"
    );
    let elapsed = started.elapsed();
    assert!(
        elapsed >= Duration::from_secs(2) && elapsed < Duration::from_secs(10),
        "{elapsed:?}"
    );
}

/// Issue 12, scenario 6: the canary writes to S's instance endpoint, so it
/// passes even while apps are still sent to P by the writer name: that name
/// is its own check.
#[tokio::test]
async fn verify_fails_when_the_writer_endpoint_still_names_p() {
    use handover::adapters::traffic::RecordSets;
    let aws = aws();
    let (plan, _app) = verify_plan(&aws, "handover").await;
    let WriterEndpoint::Cname {
        hosted_zone_id,
        name,
        ..
    } = &plan.dns.writer
    else {
        panic!()
    };
    Route53Control::new(&aws)
        .await
        .upsert(
            hosted_zone_id,
            name,
            "CNAME",
            "p-db.ap-northeast-2.rds.amazonaws.com",
            Duration::from_secs(5),
        )
        .await
        .unwrap();
    let err = run_verify(&aws, &plan).await.unwrap_err();
    assert_eq!(err.error_name(), ErrorName::VerifyFailed);
    let text = err.to_string();
    assert!(text.contains("writer endpoint false"), "{text}");
    assert!(text.contains("p-db.ap-northeast-2"), "{text}");
}

#[tokio::test]
async fn verify_fails_when_dns_still_answers_p() {
    let aws = aws();
    let (plan, _app) = verify_plan(&aws, "handover").await;
    control(
        "health",
        json!({ &plan.regions.primary.health_check_id: true }),
    )
    .await;
    let err = run_verify(&aws, &plan).await.unwrap_err();
    assert_eq!(err.error_name(), ErrorName::VerifyFailed);
    assert!(err.to_string().contains("p-alb"), "{err}");
}

/// The canary over TLS to the real PostgreSQL, dialling `host`, trusting the
/// CA in `ca_pem`, with S's endpoint as RDS reports it.
async fn tls_canary(
    aws: &Aws,
    host: &str,
    ca_pem: &str,
    endpoint: Option<&str>,
    tls_server_name: Option<&str>,
) -> Result<String, String> {
    let region = "ap-northeast-1";
    let (port, password) = test_postgres();
    let ca = aws
        .secrets(region)
        .await
        .create_secret()
        .name(handover_testkit::unique("rds-ca"))
        .secret_string(ca_pem)
        .send()
        .await
        .unwrap()
        .arn
        .unwrap();
    let canary = Canary::Postgres {
        host: Some(host.into()),
        port,
        database: "handover".into(),
        secret_arn: put_db_secret(aws, region, "handover", &password).await,
        table: "handover_canary".into(),
        require_tls: true,
        ca_secret_arn: Some(ca),
        tls_server_name: tls_server_name.map(str::to_owned),
    };
    let secrets = SecretsManager::new(aws, region).await;
    handover::failover::canary::write_once(
        &canary,
        endpoint,
        &secrets,
        &reqwest::Client::new(),
        "shop-ap-northeast-2-20261130T141155Z",
        Duration::from_secs(5),
    )
    .await
    .map(|w| w.detail)
}

/// S's and P's instance endpoints as moto's RDS reports them.
async fn endpoints(aws: &Aws) -> (String, String) {
    let plan = unique_plan();
    handover_testkit::world::provision_databases(aws, &plan).await;
    let describe = |region: String, id: String| async move {
        let rds = handover::adapters::Rds::new(aws, &region).await;
        use handover::adapters::DbInspector;
        rds.describe(&id, Duration::from_secs(5))
            .await
            .unwrap()
            .unwrap()
            .endpoint
            .expect("RDS reports an endpoint")
    };
    let s = &plan.regions.standby;
    let p = &plan.regions.primary;
    (
        describe(s.region.clone(), s.db_instance_id.clone()).await,
        describe(p.region.clone(), p.db_instance_id.clone()).await,
    )
}

#[tokio::test]
async fn the_canary_writes_over_tls_trusting_only_the_plans_ca() {
    let aws = aws();
    let (ca, other) = test_postgres_cas();
    for host in ["localhost", "127.0.0.1"] {
        let detail = tls_canary(&aws, host, &ca, None, Some(host)).await.unwrap();
        assert!(detail.contains("INSERT INTO handover_canary"), "{detail}");
    }
    // A server whose certificate another CA signed is refused before any SQL.
    let err = tls_canary(&aws, "localhost", &other, None, Some("localhost"))
        .await
        .unwrap_err();
    assert!(err.starts_with("connect:"), "{err}");
    assert!(err.contains("certificate"), "{err}");
    // A CA secret that holds no certificate is named.
    let err = tls_canary(&aws, "localhost", "{\"not\": \"a pem\"}", None, None)
        .await
        .unwrap_err();
    assert!(err.contains("no PEM certificate"), "{err}");
}

/// RDS certificates name the instance endpoint. The canary dials another
/// name (here `localhost`, as a CNAME would be) and still verifies the
/// certificate against S's endpoint as RDS reports it; a certificate that
/// does not carry that name (P's endpoint is asked for here) is refused
/// before any SQL.
#[tokio::test]
async fn the_canary_verifies_tls_against_s_endpoint_as_rds_reports_it() {
    let aws = aws();
    let (ca, _) = test_postgres_cas();
    let (s_endpoint, p_endpoint) = endpoints(&aws).await;
    assert!(
        s_endpoint.ends_with(".ap-northeast-1.rds.amazonaws.com"),
        "{s_endpoint}"
    );
    let detail = tls_canary(&aws, "localhost", &ca, Some(&s_endpoint), None)
        .await
        .unwrap();
    assert!(
        detail.contains(&format!("TLS certificate verified for {s_endpoint}")),
        "{detail}"
    );
    let err = tls_canary(&aws, "localhost", &ca, Some(&s_endpoint), Some(&p_endpoint))
        .await
        .unwrap_err();
    assert!(err.starts_with("connect:"), "{err}");
    assert!(err.contains("certificate"), "{err}");
    // No endpoint from RDS and no name in the plan: nothing to verify against.
    let err = tls_canary(&aws, "localhost", &ca, None, None)
        .await
        .unwrap_err();
    assert!(err.contains("no TLS name to verify"), "{err}");
}

/// Issue 12, scenario 6: the common ALB setup, alias A failover records. The
/// health-check lever leaves the records alone, and verify's DNS check asks
/// for A records and compares them with S's target.
#[tokio::test]
async fn alias_failover_records_switch_and_verify() {
    use aws_sdk_route53::types::{
        AliasTarget, Change, ChangeAction, ChangeBatch, ResourceRecordSet,
        ResourceRecordSetFailover, RrType,
    };
    let aws = aws();
    let (mut plan, _app) = verify_plan(&aws, "handover").await;
    // A second name in the same zone, with alias failover records.
    let name = format!("alb.{}", plan.dns.record_name.trim_start_matches("app."));
    let alias = |id: &str, role, target: &str, check: Option<&str>| {
        let mut b = ResourceRecordSet::builder()
            .name(&name)
            .r#type(RrType::A)
            .set_identifier(id)
            .failover(role)
            .alias_target(
                AliasTarget::builder()
                    .hosted_zone_id("Z14GRHDCWA56QT") // ALBs' zone in ap-northeast-2 (ELB endpoints table)
                    .dns_name(target)
                    .evaluate_target_health(true)
                    .build()
                    .unwrap(),
            );
        if let Some(c) = check {
            b = b.health_check_id(c);
        }
        Change::builder()
            .action(ChangeAction::Create)
            .resource_record_set(b.build().unwrap())
            .build()
            .unwrap()
    };
    aws.route53()
        .await
        .change_resource_record_sets()
        .hosted_zone_id(&plan.dns.hosted_zone_id)
        .change_batch(
            ChangeBatch::builder()
                .changes(alias(
                    "p",
                    ResourceRecordSetFailover::Primary,
                    "p-alb.ap-northeast-2.elb.amazonaws.com",
                    Some(&plan.regions.primary.health_check_id),
                ))
                .changes(alias(
                    "s",
                    ResourceRecordSetFailover::Secondary,
                    &plan.dns.standby_target,
                    None,
                ))
                .build()
                .unwrap(),
        )
        .send()
        .await
        .unwrap();
    plan.dns.record_name = name;
    plan.dns.record_type = handover::plan::RecordType::Alias;
    plan.validate().unwrap();
    // P's check green (its app dead behind a shallow check): only the pin
    // moves the alias to S.
    control(
        "health",
        json!({ &plan.regions.primary.health_check_id: true }),
    )
    .await;
    assert!(
        run_verify(&aws, &plan).await.is_err(),
        "DNS still answers P"
    );
    let store = promoted_store(&aws, &plan).await;
    try_switch(&aws, &plan, &store).await.unwrap();
    let v = run_verify(&aws, &plan).await.unwrap();
    assert!(v.dns.ok, "{:?}", v.dns);
}
