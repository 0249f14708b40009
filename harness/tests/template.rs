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
