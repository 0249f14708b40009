use super::*;
use crate::clock::ManualClock;
use std::sync::Mutex;

fn example() -> Plan {
    Plan::from_json(include_str!("../../infra/plan.example.jsonc")).expect("the example plan")
}

/// The plan store: what SSM holds now, or an error while it cannot answer.
#[derive(Default)]
struct Store {
    now: Mutex<Option<Plan>>,
    reads: Mutex<usize>,
    invalid: Mutex<bool>,
}

impl PlanReader for &Store {
    async fn read(&self) -> Result<Plan, ConfigError> {
        *self.reads.lock().unwrap() += 1;
        self.now
            .lock()
            .unwrap()
            .clone()
            .ok_or(ConfigError::PlanParameter {
                name: "/handover/plan".into(),
                region: "ap-northeast-1".into(),
                transient: true,
                source: "Throttling".into(),
            })
    }
}

/// The test's clock, moved by `secs`.
fn advance(clock: &ManualClock, secs: i64) {
    clock.advance(chrono::Duration::seconds(secs));
}

fn at_three() -> ManualClock {
    ManualClock::at("2026-12-06T03:00:00Z".parse().unwrap())
}

fn approvers(plan: &Plan) -> Vec<String> {
    plan.slack
        .approvers
        .iter()
        .map(|a| a.user_id.clone())
        .collect()
}

#[tokio::test]
async fn a_removed_approver_stops_being_one_within_a_minute_in_a_warm_function() {
    let store = Store::default();
    let before = example();
    assert!(before.slack.approvers.len() >= 2, "the example lists two");
    *store.now.lock().unwrap() = Some(before.clone());
    let clock = at_three();
    let live = LivePlan::load(&store, &clock).await.unwrap();
    let removed = before.slack.approvers[0].user_id.clone();
    let mut after = before.clone();
    after.slack.approvers.remove(0);
    *store.now.lock().unwrap() = Some(after);

    advance(&clock, 59);
    let plan = live.current(&clock).await.unwrap();
    assert!(
        approvers(&plan).contains(&removed),
        "the copy serves for a minute"
    );
    assert_eq!(*store.reads.lock().unwrap(), 1, "no read within the minute");

    advance(&clock, 1);
    let plan = live.current(&clock).await.unwrap();
    assert!(
        !approvers(&plan).contains(&removed),
        "a minute after it was read, the plan is read again: {:?}",
        approvers(&plan)
    );
    assert_eq!(*store.reads.lock().unwrap(), 2);
}

#[tokio::test]
async fn a_plan_that_cannot_be_read_again_serves_five_minutes_then_nothing_is_decided() {
    let store = Store::default();
    *store.now.lock().unwrap() = Some(example());
    let clock = at_three();
    let live = LivePlan::load(&store, &clock).await.unwrap();
    *store.now.lock().unwrap() = None;

    advance(&clock, 299);
    assert!(
        live.current(&clock).await.is_ok(),
        "SSM throttled: the copy serves"
    );
    advance(&clock, 1);
    let e = live.current(&clock).await.unwrap_err();
    assert!(
        matches!(e, ConfigError::StalePlan { age_s: 300, .. }),
        "{e}"
    );
    assert_eq!(
        crate::error::Classify::error_name(&e),
        crate::error::ErrorName::Transient,
        "SSM's throttling is worth retrying"
    );

    // SSM answers again: once 5 s have passed since the failed read, the
    // function acts on the plan it reads.
    *store.now.lock().unwrap() = Some(example());
    advance(&clock, 5);
    assert!(live.current(&clock).await.is_ok());
}

#[tokio::test]
async fn a_fixed_plan_is_never_read_again() {
    let clock = at_three();
    let live: LivePlan<&Store> = LivePlan::fixed(example());
    advance(&clock, 86_400);
    assert_eq!(*live.current(&clock).await.unwrap(), example());
}

#[tokio::test]
async fn a_plan_changed_into_an_invalid_one_is_refused_at_once_not_served_from_the_copy() {
    let store = Store::default();
    *store.now.lock().unwrap() = Some(example());
    let clock = at_three();
    let reader = Invalid(&store);
    let live = LivePlan::load(&reader, &clock).await.unwrap();
    *store.now.lock().unwrap() = None;
    *store.invalid.lock().unwrap() = true;
    advance(&clock, 60);
    let e = live.current(&clock).await.unwrap_err();
    assert!(matches!(e, ConfigError::Plan(_)), "{e}");
    // Asked again within 5 s: the same refusal, without a read.
    advance(&clock, 2);
    let e = live.current(&clock).await.unwrap_err();
    assert!(matches!(e, ConfigError::InvalidPlan(_)), "{e}");
    assert_eq!(
        crate::error::Classify::error_name(&e),
        crate::error::ErrorName::InvalidInput
    );
    assert_eq!(*store.reads.lock().unwrap(), 2, "one at load, one re-read");
}

#[tokio::test]
async fn a_store_that_does_not_answer_is_not_asked_again_for_five_seconds() {
    let store = Store::default();
    *store.now.lock().unwrap() = Some(example());
    let clock = at_three();
    let live = LivePlan::load(&store, &clock).await.unwrap();
    *store.now.lock().unwrap() = None;
    advance(&clock, 60);
    for _ in 0..4 {
        assert!(live.current(&clock).await.is_ok(), "the copy serves");
        advance(&clock, 1);
    }
    assert_eq!(*store.reads.lock().unwrap(), 2, "one failed re-read in 4 s");
    advance(&clock, 1);
    assert!(live.current(&clock).await.is_ok());
    assert_eq!(*store.reads.lock().unwrap(), 3, "asked again after 5 s");
}

/// A store whose plan, once `invalid` is set, fails validation.
struct Invalid<'a>(&'a Store);

impl PlanReader for &Invalid<'_> {
    async fn read(&self) -> Result<Plan, ConfigError> {
        if *self.0.invalid.lock().unwrap() {
            *self.0.reads.lock().unwrap() += 1;
            return Err(Plan::from_json("{}").unwrap_err().into());
        }
        (&self.0).read().await
    }
}
