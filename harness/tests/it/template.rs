//! Rules the expanded template keeps so that a stack deploys as documented.

use handover_testkit::triggers::expanded_template;

/// A schedule with a fixed name lives in the account's default group, so a
/// second Handover stack in the same account and Region would fail to
/// create it. Leaving the name out lets CloudFormation generate one
/// (SAM ScheduleV2 `OmitName`).
#[test]
fn no_schedule_has_a_fixed_name() {
    let resources = expanded_template()["Resources"].as_object().unwrap();
    let schedules: Vec<_> = resources
        .iter()
        .filter(|(_, r)| r["Type"] == "AWS::Scheduler::Schedule")
        .collect();
    assert!(schedules.len() >= 3, "{schedules:?}");
    for (id, r) in schedules {
        assert!(
            r["Properties"].get("Name").is_none(),
            "{id} is named {}: a second stack in this account and Region would collide",
            r["Properties"]["Name"]
        );
    }
}

/// A first deploy runs before the primary record exists (docs/how-to/
/// deploy.md). Ticks before `handover init` would fail and alarm. So the
/// detect schedule's state is a parameter, and while it is DISABLED the
/// heartbeat alarm, which no tick could keep quiet, acts on nothing.
#[test]
fn detection_can_be_deployed_off_until_the_primary_record_exists() {
    let t = expanded_template();
    let parameter = &t["Parameters"]["DetectionState"];
    assert_eq!(
        parameter["Default"], "ENABLED",
        "an upgrade keeps detection on"
    );
    assert_eq!(
        parameter["AllowedValues"],
        serde_json::json!(["ENABLED", "DISABLED"])
    );
    let resources = t["Resources"].as_object().unwrap();
    let detect_schedules: Vec<_> = resources
        .values()
        .filter(|r| {
            r["Type"] == "AWS::Scheduler::Schedule"
                && r["Properties"]["Target"]["Arn"]["Fn::GetAtt"][0] == "DetectFunction"
        })
        .collect();
    assert_eq!(detect_schedules.len(), 1, "one detect schedule");
    assert_eq!(
        detect_schedules[0]["Properties"]["State"]["Ref"],
        "DetectionState"
    );
    let heartbeat = &resources["DetectHeartbeatAlarm"]["Properties"];
    assert_eq!(
        heartbeat["ActionsEnabled"]["Fn::If"],
        serde_json::json!(["DetectionEnabled", true, false])
    );
    assert_eq!(
        t["Conditions"]["DetectionEnabled"]["Fn::Equals"],
        serde_json::json!([{"Ref": "DetectionState"}, "ENABLED"])
    );
}

/// Lambda keeps at least 100 of an account's concurrency unreserved
/// (PutFunctionConcurrency), so an account whose quota is below 102 (new
/// accounts often have 10 or 50) cannot create both reservations. Every
/// reservation can be turned off by one parameter, and is on by default.
#[test]
fn every_reserved_concurrency_can_be_turned_off() {
    let t = expanded_template();
    let parameter = &t["Parameters"]["ReserveConcurrency"];
    assert_eq!(parameter["Default"], "true");
    assert_eq!(
        parameter["AllowedValues"],
        serde_json::json!(["true", "false"])
    );
    assert_eq!(
        t["Conditions"]["ReservesConcurrency"]["Fn::Equals"],
        serde_json::json!([{"Ref": "ReserveConcurrency"}, "true"])
    );
    let reserving: Vec<_> = t["Resources"]
        .as_object()
        .unwrap()
        .iter()
        .filter_map(|(id, r)| {
            r["Properties"]
                .get("ReservedConcurrentExecutions")
                .map(|v| (id, v))
        })
        .collect();
    assert_eq!(reserving.len(), 2, "readiness and audit: {reserving:?}");
    for (id, v) in reserving {
        assert_eq!(
            v["Fn::If"],
            serde_json::json!(["ReservesConcurrency", 1, {"Ref": "AWS::NoValue"}]),
            "{id} reserves concurrency whatever ReserveConcurrency says"
        );
    }
}
