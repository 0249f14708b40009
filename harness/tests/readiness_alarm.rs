//! The stack's side of readiness's outputs, read from the expanded
//! template: the alarm watches the metric readiness prints, and the role
//! grants exactly the two writes it makes.

use chrono::Utc;
use handover::readiness::output::{EVENT_DETAIL_TYPE, EVENT_SOURCE, emf_lines};
use handover::readiness::{Check, Readiness, Verdict};
use handover_testkit::triggers::{expanded_template, function_environments};
use serde_json::Value;

fn resource(name: &str) -> &'static Value {
    let r = &expanded_template()["Resources"][name];
    assert!(r.is_object(), "no {name} in the expanded template");
    r
}

#[test]
fn the_stack_alarms_on_the_metric_readiness_prints_after_two_failing_evaluations() {
    let failing = Readiness {
        at: Utc::now(),
        checks: vec![Check {
            id: "slack.channel".into(),
            verdict: Verdict::Fail,
            observed: "not a member".into(),
            expected: "a member".into(),
            fix: "invite the bot".into(),
        }],
    };
    let counts: Value = serde_json::from_str(&emf_lines(&failing, "any", 0)[0]).unwrap();
    let directive = &counts["_aws"]["CloudWatchMetrics"][0];
    let a = &resource("ReadinessFailingAlarm")["Properties"];
    assert_eq!(a["Namespace"], directive["Namespace"]);
    assert_eq!(a["MetricName"], "ReadinessFail");
    assert!(
        directive["Metrics"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["Name"] == a["MetricName"]),
        "readiness prints no {}: {directive}",
        a["MetricName"]
    );
    assert_eq!(counts["ReadinessFail"], 1.0);
    // The same dimensions, and the Stack value is what the function is given.
    let names: Vec<&Value> = a["Dimensions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| &d["Name"])
        .collect();
    let printed: Vec<&Value> = directive["Dimensions"][0]
        .as_array()
        .unwrap()
        .iter()
        .collect();
    assert_eq!(names, printed);
    let (_, env) = function_environments()
        .into_iter()
        .find(|(name, _)| name == "ReadinessFunction")
        .expect("the readiness function");
    assert_eq!(a["Dimensions"][0]["Value"], env["HANDOVER_STACK_NAME"]);
    // Two 30-minute periods in a row, each with only failing evaluations.
    let schedule = &resource("ReadinessFunctionEvery30Minutes")["Properties"];
    assert_eq!(schedule["ScheduleExpression"], "rate(30 minutes)");
    assert_eq!(a["Period"], 1800);
    assert_eq!(a["EvaluationPeriods"], 2);
    assert_eq!(a["DatapointsToAlarm"], 2);
    assert_eq!(a["Statistic"], "Minimum");
    assert_eq!(a["Threshold"], 0);
    assert_eq!(a["ComparisonOperator"], "GreaterThanThreshold");
    assert_eq!(a["TreatMissingData"], "notBreaching");
    assert_eq!(a["AlarmActions"][0]["Ref"], "OperatorTopic");
}

/// The statements of the readiness role that grant `action`.
fn grants(action: &str) -> Vec<&'static Value> {
    resource("ReadinessRole")["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| {
            s["Action"]
                .as_array()
                .is_some_and(|a| a.iter().any(|x| x == action))
        })
        .collect()
}

#[test]
fn the_readiness_role_writes_only_its_prefix_and_only_its_event() {
    let put = grants("s3:PutObject");
    assert_eq!(put.len(), 1, "{put:?}");
    assert_eq!(
        put[0]["Resource"]["Fn::Sub"], "${ReportBucket.Arn}/readiness/*",
        "the readiness prefix only"
    );
    let events = grants("events:PutEvents");
    assert_eq!(events.len(), 1, "{events:?}");
    let sub = events[0]["Resource"]["Fn::Sub"].as_str().unwrap();
    assert!(sub.ends_with(":event-bus/default"), "{sub}");
    let only = &events[0]["Condition"]["StringEquals"];
    assert_eq!(only["events:source"], EVENT_SOURCE);
    assert_eq!(only["events:detail-type"], EVENT_DETAIL_TYPE);
}
