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

/// The counts line readiness prints after two failing evaluations, and
/// its one CloudWatch directive.
fn printed() -> (Value, Value) {
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
    let counts: Value = serde_json::from_str(&emf_lines(&failing, true, "any", 0)[0]).unwrap();
    let directive = counts["_aws"]["CloudWatchMetrics"][0].clone();
    (counts, directive)
}

/// `alarm` watches a metric readiness prints, with the same dimensions,
/// and its Stack is the value the function is given.
fn watches_what_readiness_prints(alarm: &str, metric: &str) -> &'static Value {
    let (counts, directive) = printed();
    let a = &resource(alarm)["Properties"];
    assert_eq!(a["Namespace"], directive["Namespace"], "{alarm}");
    assert_eq!(a["MetricName"], metric, "{alarm}");
    assert!(
        directive["Metrics"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["Name"] == metric),
        "readiness prints no {metric}: {directive}"
    );
    assert!(counts[metric].is_number(), "{counts}");
    let names: Vec<&Value> = a["Dimensions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| &d["Name"])
        .collect();
    let dims: Vec<&Value> = directive["Dimensions"][0]
        .as_array()
        .unwrap()
        .iter()
        .collect();
    assert_eq!(names, dims, "{alarm}");
    let (_, env) = function_environments()
        .into_iter()
        .find(|(name, _)| name == "ReadinessFunction")
        .expect("the readiness function");
    assert_eq!(
        a["Dimensions"][0]["Value"], env["HANDOVER_STACK_NAME"],
        "{alarm}"
    );
    assert_eq!(a["AlarmActions"][0]["Ref"], "OperatorTopic", "{alarm}");
    assert_eq!(a["OKActions"][0]["Ref"], "OperatorTopic", "{alarm}");
    a
}

#[test]
fn the_stack_alarms_when_readiness_fails_twice_in_a_row_and_silence_is_no_all_clear() {
    let a = watches_what_readiness_prints("ReadinessFailingAlarm", "ReadinessFailingTwice");
    assert_eq!(printed().0["ReadinessFailingTwice"], 1.0);
    assert_eq!(a["Statistic"], "Maximum");
    assert_eq!(a["Threshold"], 1);
    assert_eq!(a["ComparisonOperator"], "GreaterThanOrEqualToThreshold");
    // No evaluation keeps the alarm as it is: it never turns OK by silence.
    assert_eq!(a["TreatMissingData"], "ignore");
}

#[test]
fn the_stack_alarms_when_readiness_stops_evaluating() {
    let a = watches_what_readiness_prints("ReadinessHeartbeatAlarm", "ReadinessEvaluations");
    let schedule = &resource("ReadinessFunctionEvery30Minutes")["Properties"];
    assert_eq!(schedule["ScheduleExpression"], "rate(30 minutes)");
    // An hour holds two scheduled evaluations; none is breaching.
    assert_eq!(a["Period"], 3600);
    assert_eq!(a["Statistic"], "Sum");
    assert_eq!(a["Threshold"], 1);
    assert_eq!(a["ComparisonOperator"], "LessThanThreshold");
    assert_eq!(a["TreatMissingData"], "breaching");
}

/// The statements of the readiness role that grant `action`.
fn grants(action: &str) -> Vec<&'static Value> {
    let service = action.split(':').next().unwrap_or_default();
    let statements =
        resource("ReadinessRole")["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]
            .as_array()
            .unwrap();
    let actions = |s: &Value| -> Vec<String> {
        match &s["Action"] {
            Value::Array(a) => a
                .iter()
                .filter_map(|x| x.as_str().map(str::to_owned))
                .collect(),
            Value::String(one) => vec![one.clone()],
            _ => vec![],
        }
    };
    // A wildcard would grant the action without naming it.
    for s in statements {
        for a in actions(s) {
            assert!(
                a != "*" && a != format!("{service}:*"),
                "the readiness role grants {a}: {s}"
            );
        }
    }
    statements
        .iter()
        .filter(|s| actions(s).iter().any(|a| a == action))
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
