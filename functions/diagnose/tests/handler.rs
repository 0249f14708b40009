use chrono::Utc;
use diagnose::handler::*;
use handover::error::ErrorName;
use handover::execution::{Action, ExplanationOutcome, RiskLevel};
use handover::execution::{Diagnosis, ExecutionState};
use handover::plan::{Explain, Plan};
use handover_testkit::app::App;
use handover_testkit::world::{
    provision_databases, provision_target_group, put_replica_lag, run_input, unique_plan,
};
use handover_testkit::{aws, control, converse_requests, unique};
use serde_json::json;

struct World {
    plan: Plan,
    _p: App,
    _s: App,
}

/// P's app answers `p_status`; both databases exist; S's lag is `lag`.
async fn world(p_status: u16, p_health: bool, lag: Option<f64>) -> World {
    let aws = aws();
    let p = App::start(p_status).await;
    let s = App::start(200).await;
    let mut plan = unique_plan();
    plan.regions.primary.endpoint = format!("{}/health", p.url);
    plan.regions.standby.endpoint = format!("{}/health", s.url);
    control(
        "health",
        json!({ &plan.regions.primary.health_check_id: p_health, &plan.regions.standby.health_check_id: true }),
    )
    .await;
    provision_databases(&aws, &plan).await;
    if let Some(lag) = lag {
        put_replica_lag(
            &aws,
            &plan.regions.standby.region,
            &plan.regions.standby.db_instance_id,
            lag,
            Utc::now(),
        )
        .await;
    }
    World { plan, _p: p, _s: s }
}

fn input(plan: &Plan) -> serde_json::Value {
    serde_json::to_value(run_input(plan, "shop-ap-northeast-2-20261130T141155Z")).unwrap()
}

async fn run(w: &World) -> Diagnosis {
    handler(input(&w.plan), &Deps::new().unwrap())
        .await
        .unwrap()
}

async fn p_rds_unreachable(w: &World) {
    // P's RDS API times out for this world's primary: the router holds
    // the request past the budget (other tests' calls pass).
    let p = &w.plan.regions.primary;
    control("faults", json!({ format!("rds:{}", p.region): {"mode": "timeout", "seconds": 3, "target": p.db_instance_id} }))
        .await;
}

async fn clear_faults(w: &World) {
    control(
        "faults",
        json!({ format!("rds:{}", w.plan.regions.primary.region): null }),
    )
    .await;
}

#[tokio::test]
async fn diagnose_scenarios_against_moto() {
    // Scenarios share the router's fault table, so they run in sequence.
    // 1. Healthy replica with lag 5 s → fail over, low risk.
    let w = world(503, false, Some(5.0)).await;
    p_rds_unreachable(&w).await;
    let d = run(&w).await;
    clear_faults(&w).await;
    assert_eq!(d.action, Action::FailOver, "{d:#?}");
    assert_eq!(d.risk, RiskLevel::Low, "{}", d.risk_rule);
    assert_eq!(d.rpo_estimate_s, Some(5.0));
    assert!(!d.rpo_over_target);
    let p_db = d
        .evidence
        .iter()
        .find(|e| e.source.starts_with("rds:ap-northeast-2"))
        .unwrap();
    assert!(
        p_db.observation.contains("timed out"),
        "{}",
        p_db.observation
    );

    // 2. Lag 300 s → RPO over target, acknowledgement required.
    let w = world(503, false, Some(300.0)).await;
    p_rds_unreachable(&w).await;
    let d = run(&w).await;
    clear_faults(&w).await;
    assert_eq!(d.action, Action::FailOver);
    assert_eq!(d.risk, RiskLevel::High);
    assert!(d.rpo_over_target);
    assert!(
        d.reasons.iter().any(|r| r.contains("acknowledge")),
        "{:?}",
        d.reasons
    );

    // 3. Lag -1 → blocked.
    let w = world(503, false, Some(-1.0)).await;
    let d = run(&w).await;
    assert_eq!(d.action, Action::Escalate);
    assert_eq!(d.risk, RiskLevel::Blocked);

    // 4. P's database API answering and healthy, only the app down.
    let w = world(503, false, Some(5.0)).await;
    let d = run(&w).await;
    let app = d
        .hypotheses
        .iter()
        .find(|h| h.id == "application_failure")
        .unwrap();
    let region = d
        .hypotheses
        .iter()
        .find(|h| h.id == "regional_outage")
        .unwrap();
    assert_eq!(app.standing, "likely", "{app:?}");
    assert_ne!(region.standing, "likely", "{region:?}");
    assert_eq!(d.risk, RiskLevel::Medium, "{}", d.risk_rule);

    // 5. P answers again → recovered.
    let w = world(200, true, Some(5.0)).await;
    let d = run(&w).await;
    assert_eq!(d.action, Action::Recovered);
}

fn explain(model_id: &str, region: Option<&str>, timeout_ms: u64) -> Option<Explain> {
    Some(Explain {
        model_id: model_id.into(),
        region: region.map(str::to_owned),
        timeout_ms,
    })
}

#[tokio::test]
async fn target_groups_are_read_in_each_region_and_the_model_only_explains() {
    let aws = aws();
    let mut w = world(503, false, Some(5.0)).await;
    let (p, s) = (
        w.plan.regions.primary.region.clone(),
        w.plan.regions.standby.region.clone(),
    );
    w.plan.regions.primary.target_group_arns = vec![provision_target_group(&aws, &p, 0).await];
    w.plan.regions.standby.target_group_arns = vec![provision_target_group(&aws, &s, 2).await];
    let plain = run(&w).await;
    assert!(plain.explanation.is_none());
    let p_lb = plain
        .evidence
        .iter()
        .find(|e| {
            e.source
                .starts_with(&format!("elbv2:{p}:DescribeTargetHealth:tg-"))
        })
        .expect("P's target group is evidence");
    assert_eq!(p_lb.observation, "no targets registered: 0 healthy");
    assert_eq!(p_lb.supports_p_down, Some(true));
    let s_lb = plain
        .evidence
        .iter()
        .find(|e| e.source.starts_with(&format!("elbv2:{s}:")))
        .expect("S's target group is evidence");
    assert_eq!(s_lb.observation, "2 of 2 targets healthy");

    // With a model configured: the same decision, plus advisory text.
    let model = unique("model");
    control(
        "model",
        json!({ &model: {"text": "P's app is down; its database is not."} }),
    )
    .await;
    w.plan.explain = explain(&model, None, 5_000);
    let explained = run(&w).await;
    assert_eq!(
        explained.explanation.as_ref().and_then(|x| x.text()),
        Some("P's app is down; its database is not.")
    );
    assert_eq!(
        (
            explained.action,
            explained.risk,
            &explained.risk_rule,
            &explained.summary
        ),
        (plain.action, plain.risk, &plain.risk_rule, &plain.summary)
    );
    // One Converse call, carrying the rules' output.
    let asked = converse_requests(&model).await;
    assert_eq!(asked.len(), 1);
    let user = asked[0]["messages"][0]["content"][0]["text"]
        .as_str()
        .unwrap();
    assert!(user.contains(&plain.risk_rule), "{user}");
    assert!(user.contains("DescribeTargetHealth"), "{user}");
    assert_eq!(asked[0]["inferenceConfig"]["temperature"], json!(0.0));
    // It was asked in S's Region: P is the one that may be down.
    let seen = handover_testkit::call_log().await;
    assert!(
        seen.iter()
            .any(|c| c["service"] == "bedrock" && c["region"] == s.as_str()),
        "no Converse call in {s}"
    );
}

#[tokio::test]
async fn a_slow_model_cannot_hold_up_or_change_the_diagnosis() {
    // This test alone calls Bedrock in us-west-2, so its fault is its own.
    let w = world(503, false, Some(5.0)).await;
    let plain = run(&w).await;
    let mut plan = w.plan.clone();
    let model = unique("model");
    plan.explain = explain(&model, Some("us-west-2"), 400);
    control(
        "faults",
        json!({"bedrock:us-west-2": {"mode": "timeout", "seconds": 3}}),
    )
    .await;
    let started = std::time::Instant::now();
    let d = handler(input(&plan), &Deps::new().unwrap()).await.unwrap();
    let took = started.elapsed();
    control("faults", json!({"bedrock:us-west-2": null})).await;
    let x = d.explanation.expect("the attempt is recorded");
    assert_eq!(x.text(), None);
    assert!(
        matches!(&x.outcome, ExplanationOutcome::Unavailable(why) if why.contains("timed out after 400 ms")),
        "{x:?}"
    );
    assert!(took < std::time::Duration::from_secs(3), "{took:?}");
    assert_eq!((d.action, d.risk), (plain.action, plain.risk));

    // A 503 from Bedrock (the SDK retries it, so a longer budget): the
    // same, with the error's code.
    plan.explain = explain(&model, Some("us-west-2"), 15_000);
    control("faults", json!({"bedrock:us-west-2": {"mode": "error"}})).await;
    let d = handler(input(&plan), &Deps::new().unwrap()).await.unwrap();
    control("faults", json!({"bedrock:us-west-2": null})).await;
    let x = d.explanation.unwrap();
    assert!(
        matches!(&x.outcome, ExplanationOutcome::Unavailable(why) if why.contains("ServiceUnavailable")),
        "{x:?}"
    );
    assert_eq!((d.action, d.risk), (plain.action, plain.risk));
}

#[tokio::test]
async fn the_recheck_after_approval_asks_no_model() {
    let w = world(503, false, Some(5.0)).await;
    let mut plan = w.plan.clone();
    let model = unique("model");
    plan.explain = explain(&model, None, 5_000);
    let first = handler(input(&plan), &Deps::new().unwrap()).await.unwrap();
    assert!(first.explanation.is_some());
    let mut doc = input(&plan);
    doc["diagnosis"] = serde_json::to_value(&first).unwrap();
    doc["approval"] = handover_testkit::world::approval(false);
    let recheck = handler(doc, &Deps::new().unwrap()).await.unwrap();
    assert!(recheck.explanation.is_none());
    assert_eq!(
        converse_requests(&model).await.len(),
        1,
        "only the first diagnosis asked"
    );
}

#[test]
fn the_event_fixtures_are_execution_documents() {
    for (name, doc) in [
        ("diagnose", include_str!("../events/diagnose.json")),
        ("recheck", include_str!("../events/recheck.json")),
    ] {
        let state = ExecutionState::from_event(serde_json::from_str(doc).unwrap())
            .unwrap_or_else(|e| panic!("{name}: {}", e.message));
        assert_eq!(state.steps.contains_key("diagnosis"), name == "recheck");
    }
}

#[tokio::test]
async fn a_missing_replica_is_blocked() {
    let aws = aws();
    let mut plan = unique_plan();
    let p = App::start(503).await;
    plan.regions.primary.endpoint = format!("{}/health", p.url);
    plan.regions.standby.endpoint = format!("{}/health", p.url);
    control(
        "health",
        json!({ &plan.regions.primary.health_check_id: false }),
    )
    .await;
    let _ = aws; // nothing provisioned: neither DB exists
    let d = handler(input(&plan), &Deps::new().unwrap()).await.unwrap();
    assert_eq!(d.action, Action::Escalate);
    assert!(d.risk_rule.contains("no replica"), "{}", d.risk_rule);
}

#[tokio::test]
async fn malformed_input_is_invalid_input() {
    let deps = Deps::new().unwrap();
    for bad in [json!({}), json!({"incident_id": 5}), json!("x")] {
        let err = handler(bad, &deps).await.unwrap_err();
        assert_eq!(err.name, ErrorName::InvalidInput);
    }
    let mut doc = input(&unique_plan());
    doc["plan"]["regions"]["standby"]
        .as_object_mut()
        .unwrap()
        .remove("db_instance_id");
    let err = handler(doc, &deps).await.unwrap_err();
    assert_eq!(err.name, ErrorName::InvalidInput);
    assert!(
        err.message.contains("plan.regions.standby"),
        "{}",
        err.message
    );
}
