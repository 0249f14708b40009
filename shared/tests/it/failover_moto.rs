//! fence and promote against moto's RDS, CloudWatch and DynamoDB.

use chrono::Utc;
use handover::adapters::{CloudWatch, Rds};
use handover::aws::Aws;
use handover::error::{Classify, ErrorName};
use handover::execution::{ExecutionState, FenceOutcome, PromotionStatus};
use handover::failover::promote::{Promoter, start, status};
use handover::failover::{StepError, fence::fence};
use handover::plan::{OnUnconfirmed, Plan};
use handover::store::Store;
use handover_testkit::world::{
    approval, provision_databases, put_replica_lag, record_approval, run_state, unique_plan,
};
use handover_testkit::{aws, control, count_calls, fresh_store, unique};
use serde_json::json;

/// `state` as promote sees it after a confirmed fence.
fn with_confirmed_fence(state: &ExecutionState) -> ExecutionState {
    let mut state = state.clone();
    state.steps.insert(
        "fence".into(),
        json!({"outcome": "confirmed", "policy": "stop", "may_proceed": true,
               "previous_security_groups": [], "fence_security_group": "sg-x",
               "started_at": Utc::now(), "fenced_at": Utc::now(), "epoch": 1, "detail": ""}),
    );
    state
}

struct Run {
    aws: Aws,
    plan: Plan,
    store: Store,
}

async fn run(lag: f64) -> Run {
    run_in(unique_plan(), lag).await
}

async fn run_in(plan: Plan, lag: f64) -> Run {
    run_with(plan, Some(lag)).await
}

/// `lag: None`: CloudWatch holds no ReplicaLag sample of S.
async fn run_with(plan: Plan, lag: Option<f64>) -> Run {
    let aws = aws();
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
    let store = fresh_store(&aws).await;
    store
        .init_primary(
            &plan.regions.primary.region,
            &plan.regions.primary.db_instance_id,
            Utc::now(),
        )
        .await
        .unwrap();
    Run { aws, plan, store }
}

impl Run {
    /// The transition the primary record holds now.
    async fn transition(&self) -> handover::store::primary::Transition {
        self.store
            .primary()
            .await
            .unwrap()
            .unwrap()
            .transition
            .expect("a transition in progress")
    }
    async fn p_rds(&self) -> Rds {
        Rds::new(&self.aws, &self.plan.regions.primary.region).await
    }
    async fn s_rds(&self) -> Rds {
        Rds::new(&self.aws, &self.plan.regions.standby.region).await
    }
    async fn fenced(&self, exec: &str, ack: bool) -> Result<ExecutionState, StepError> {
        let state = run_state(&self.plan, json!({ "approval": approval(ack) }));
        record_approval(&self.store, exec, &approval(ack)).await;
        let f = fence(&state, exec, &self.store, &self.p_rds().await, Utc::now).await?;
        let mut state = state;
        state
            .steps
            .insert("fence".into(), serde_json::to_value(f).unwrap());
        Ok(state)
    }
    async fn start(
        &self,
        state: &ExecutionState,
        exec: &str,
    ) -> Result<handover::execution::PromotionResult, StepError> {
        let s_rds = self.s_rds().await;
        let lag = CloudWatch::new(&self.aws, &self.plan.regions.standby.region).await;
        start(
            state,
            exec,
            &self.store,
            &Promoter::for_plan(state, &s_rds),
            &lag,
            Utc::now,
        )
        .await
    }
    /// Fenced and with the promotion claimed (the RPO recorded), as promote
    /// leaves it just before its PromoteReadReplica call.
    async fn claimed(&self, exec: &str) -> ExecutionState {
        let state = self.fenced(exec, false).await.unwrap();
        let now = Utc::now();
        self.store
            .claim_promotion(1, exec, (5.0, now), now)
            .await
            .unwrap();
        state
    }
    /// S promotes in moto: a call that reached RDS (or S doing it on its own).
    async fn promote_s_in_moto(&self) {
        self.aws
            .rds(&self.plan.regions.standby.region)
            .await
            .promote_read_replica()
            .db_instance_identifier(&self.plan.regions.standby.db_instance_id)
            .send()
            .await
            .unwrap();
    }
    async fn promote_calls(&self) -> usize {
        count_calls(
            "PromoteReadReplica",
            &self.plan.regions.standby.db_instance_id,
        )
        .await
    }
}

#[tokio::test]
async fn fence_swaps_in_the_deny_all_group_and_records_the_old_ones() {
    let r = run(5.0).await;
    let state = run_state(&r.plan, json!({ "approval": approval(false) }));
    record_approval(&r.store, "exec-a", &approval(false)).await;
    let p = r.p_rds().await;
    let f = fence(&state, "exec-a", &r.store, &p, Utc::now)
        .await
        .unwrap();
    assert_eq!(f.outcome, FenceOutcome::Confirmed, "{}", f.detail);
    assert!(f.may_proceed);
    assert_eq!(
        f.previous_security_groups,
        vec!["sg-0app000000000000p".to_string()]
    );
    let db = handover::adapters::DbInspector::describe(
        &p,
        &r.plan.regions.primary.db_instance_id,
        std::time::Duration::from_secs(5),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(
        db.security_groups,
        vec![r.plan.regions.primary.fence_security_group_id.clone()]
    );
    // A second call in the same execution: the same outcome, no second modify.
    let modifies = count_calls("ModifyDBInstance", &r.plan.regions.primary.db_instance_id).await;
    let again = fence(&state, "exec-a", &r.store, &p, Utc::now)
        .await
        .unwrap();
    assert_eq!(again.outcome, FenceOutcome::Confirmed);
    assert_eq!(again.previous_security_groups, f.previous_security_groups);
    assert_eq!(again.fenced_at, f.fenced_at);
    assert_eq!(
        count_calls("ModifyDBInstance", &r.plan.regions.primary.db_instance_id).await,
        modifies
    );
    assert_eq!(modifies, 1);
}

#[tokio::test]
async fn fence_with_p_unreachable_is_unconfirmed_and_the_policy_decides() {
    // A Region of its own, so the injected fault touches no other test.
    let mut plan = unique_plan();
    plan.regions.primary.region = "eu-central-1".into();
    plan.fence.timeout_ms = 800;
    let r = run_in(plan, 5.0).await;
    control(
        "faults",
        json!({"rds:eu-central-1": {"mode": "timeout", "seconds": 2}}),
    )
    .await;
    let p = r.p_rds().await;
    record_approval(&r.store, "exec-a", &approval(false)).await;
    let stop = fence(
        &run_state(&r.plan, json!({ "approval": approval(false) })),
        "exec-a",
        &r.store,
        &p,
        Utc::now,
    )
    .await;
    let mut proceed_plan = r.plan.clone();
    proceed_plan.fence.on_unconfirmed = OnUnconfirmed::Proceed;
    let store2 = fresh_store(&r.aws).await;
    store2
        .init_primary(
            "eu-central-1",
            &r.plan.regions.primary.db_instance_id,
            Utc::now(),
        )
        .await
        .unwrap();
    record_approval(&store2, "exec-b", &approval(false)).await;
    let proceed = fence(
        &run_state(&proceed_plan, json!({ "approval": approval(false) })),
        "exec-b",
        &store2,
        &p,
        Utc::now,
    )
    .await;
    control("faults", json!({"rds:eu-central-1": null})).await;
    let stop = stop.unwrap();
    assert_eq!(stop.outcome, FenceOutcome::Unconfirmed);
    assert_eq!(stop.policy, OnUnconfirmed::Stop);
    assert!(!stop.may_proceed);
    assert!(stop.detail.contains("timed out"), "{}", stop.detail);
    let proceed = proceed.unwrap();
    assert_eq!(proceed.outcome, FenceOutcome::Unconfirmed);
    assert!(proceed.may_proceed, "P never answered: {}", proceed.detail);
}

/// `on_unconfirmed: proceed` is for a P whose RDS API cannot be reached.
/// A P that answers and refuses the reboot (it is `backing-up`) keeps its
/// open sessions, which still commit: the fence is unconfirmed and the run
/// must not promote, whatever the policy. A retry says the same.
#[tokio::test]
async fn a_p_that_answers_and_refuses_the_reboot_never_proceeds_unfenced() {
    let mut plan = unique_plan();
    plan.fence.on_unconfirmed = OnUnconfirmed::Proceed;
    plan.fence.confirm_s = 2;
    let r = run_in(plan, 5.0).await;
    let p_id = r.plan.regions.primary.db_instance_id.clone();
    let id = unique("backing-up");
    handover_testkit::add_fault_rules(json!([{"id": id, "mode": "error", "service": "rds",
        "action": "RebootDBInstance", "target": p_id, "status": 400,
        "code": "InvalidDBInstanceState",
        "message": format!("DB instance {p_id} is not in available state."), "count": 1000}]))
    .await;
    let state = run_state(&r.plan, json!({ "approval": approval(false) }));
    record_approval(&r.store, "exec-busy", &approval(false)).await;
    let p = r.p_rds().await;
    let f = fence(&state, "exec-busy", &r.store, &p, Utc::now).await;
    let again = fence(&state, "exec-busy", &r.store, &p, Utc::now).await;
    handover_testkit::remove_fault_rules(&[&id]).await;
    let (f, again) = (f.unwrap(), again.unwrap());
    assert_eq!(f.outcome, FenceOutcome::Unconfirmed, "{}", f.detail);
    assert_eq!(f.policy, OnUnconfirmed::Proceed);
    assert!(!f.may_proceed, "P answered: {}", f.detail);
    assert!(f.detail.contains("InvalidDBInstanceState"), "{}", f.detail);
    assert!(f.detail.contains("does not apply"), "{}", f.detail);
    assert_eq!(again.outcome, FenceOutcome::Unconfirmed);
    assert!(
        !again.may_proceed,
        "a retried fence must not flip to proceed"
    );
}

#[tokio::test]
async fn two_executions_racing_fence_and_promote_make_exactly_one_promotion_call() {
    let r = run(5.0).await;
    let (a, b) = tokio::join!(
        async {
            let s = r.fenced("exec-a", false).await?;
            r.start(&s, "exec-a").await
        },
        async {
            let s = r.fenced("exec-b", false).await?;
            r.start(&s, "exec-b").await
        }
    );
    let (winner, loser) = match (&a, &b) {
        (Ok(w), Err(l)) | (Err(l), Ok(w)) => (w, l),
        _ => panic!("exactly one must win: {a:?} / {b:?}"),
    };
    assert_eq!(winner.status, PromotionStatus::Promoting);
    assert_eq!(loser.error_name(), ErrorName::Refused, "{loser}");
    assert_eq!(r.promote_calls().await, 1);
}

#[tokio::test]
async fn a_retried_promote_after_success_calls_nothing_twice() {
    let r = run(5.0).await;
    let mut state = r.fenced("exec-a", false).await.unwrap();
    let first = r.start(&state, "exec-a").await.unwrap();
    let again = r.start(&state, "exec-a").await.unwrap();
    assert_eq!(r.promote_calls().await, 1);
    assert_eq!(again.promote_started_at, first.promote_started_at);
    assert_eq!(again.rpo_s, first.rpo_s);
    // Poll to completion; the record moves to S with epoch 2.
    state
        .steps
        .insert("promotion".into(), serde_json::to_value(&first).unwrap());
    let s_rds = r.s_rds().await;
    let done = status(
        &state,
        "exec-a",
        &r.store,
        &Promoter::for_plan(&state, &s_rds),
        Utc::now,
    )
    .await
    .unwrap();
    assert_eq!(done.status, PromotionStatus::Promoted, "{}", done.db_status);
    assert_eq!(done.epoch, Some(2));
    assert_eq!(done.polls, 1);
    assert!(done.promoted_at.is_some() && done.duration_s.is_some());
    let rec = r.store.primary().await.unwrap().unwrap();
    assert_eq!(
        (rec.region.as_str(), rec.epoch),
        (r.plan.regions.standby.region.as_str(), 2)
    );
    // A late retry of start after completion reports it, calls nothing.
    let late = r.start(&state, "exec-a").await.unwrap();
    assert_eq!(late.status, PromotionStatus::Promoted);
    assert_eq!(r.promote_calls().await, 1);
    // And a retried status poll completes nothing twice.
    state
        .steps
        .insert("promotion".into(), serde_json::to_value(&done).unwrap());
    let again = status(
        &state,
        "exec-a",
        &r.store,
        &Promoter::for_plan(&state, &s_rds),
        Utc::now,
    )
    .await
    .unwrap();
    assert_eq!(again.status, PromotionStatus::Promoted);
    assert_eq!(r.store.primary().await.unwrap().unwrap().epoch, 2);
}

/// A promotion still under way after its budget from the call stops the
/// polling, however few polls ran: slow polls and their retries never
/// stretch the run past the lock's lease (issue 35).
#[tokio::test]
async fn a_promotion_still_under_way_past_its_budget_stops_the_polls() {
    let r = run(5.0).await;
    let mut state = r.fenced("exec-a", false).await.unwrap();
    let first = r.start(&state, "exec-a").await.unwrap();
    state
        .steps
        .insert("promotion".into(), serde_json::to_value(&first).unwrap());
    let end = first.promote_started_at + r.plan.timings.promotion_budget();
    let just_before = end - chrono::Duration::seconds(1);
    let before = status(&state, "exec-a", &r.store, &StillPromoting, || just_before)
        .await
        .unwrap();
    assert_eq!(before.status, PromotionStatus::Promoting);
    assert!(!before.past_budget, "inside the budget it polls on");
    let after = status(&state, "exec-a", &r.store, &StillPromoting, || end)
        .await
        .unwrap();
    assert_eq!((after.status, after.polls), (PromotionStatus::Promoting, 1));
    assert!(after.past_budget, "past the budget after one poll");
}

/// A promoter whose database is still promoting.
struct StillPromoting;

impl handover::failover::promote::ReplicaPromoter for StillPromoting {
    async fn ready(
        &self,
        _: std::time::Duration,
    ) -> Result<Result<(), String>, handover::adapters::AwsError> {
        unreachable!("status never checks readiness")
    }
    async fn promote(&self, _: std::time::Duration) -> Result<(), handover::adapters::AwsError> {
        unreachable!("status never promotes")
    }
    async fn progress(
        &self,
        _: std::time::Duration,
    ) -> Result<handover::failover::promote::PromotionProgress, handover::adapters::AwsError> {
        Ok(handover::failover::promote::PromotionProgress {
            complete: false,
            status: "modifying".into(),
        })
    }
    async fn started(&self, _: std::time::Duration) -> Result<bool, handover::adapters::AwsError> {
        unreachable!("status never asks")
    }
}

/// Issue 12, scenario 3: PromoteReadReplica accepted but its answer lost
/// (a timeout, a reset, the process killed) after the claim. The retry must
/// see the replica already promoting and poll it, not fail on a replica that
/// is no longer available and leave S promoting on its own.
#[tokio::test]
async fn a_promotion_call_whose_answer_was_lost_is_recognised_on_retry_and_not_repeated() {
    let r = run(5.0).await;
    let state = r.claimed("exec-lost").await;
    // The call that went out: RDS acted, the answer never came back.
    r.promote_s_in_moto().await;
    assert_eq!(r.promote_calls().await, 1);
    let retried = r.start(&state, "exec-lost").await.unwrap();
    assert_eq!(
        retried.status,
        PromotionStatus::Promoting,
        "{}",
        retried.db_status
    );
    assert!(
        retried.db_status.contains("answer was lost"),
        "{}",
        retried.db_status
    );
    assert_eq!(retried.rpo_s, 5.0, "the RPO recorded with the claim");
    assert_eq!(r.promote_calls().await, 1, "never called twice");
    let tr = r.transition().await;
    assert!(tr.promote_called_at.is_some(), "the call is recorded now");
}

/// PromoteReadReplica accepted with its answer lost, and RDS's describes
/// still showing the available replica of P for a while after (the
/// emulator's `promote_stale_s`). The retry calls again, RDS refuses it
/// (InvalidDBInstanceState), and the describe still says nothing happened.
/// That refusal after this run's own claim is no failure: it is transient,
/// so the state machine retries; once the describe shows the promotion, a
/// retry polls it and S ends promoted. No call is recorded on inference,
/// and the run must not end Failed while S promotes on its own.
#[tokio::test]
async fn a_lost_promotion_answer_with_a_stale_describe_still_ends_promoted() {
    let r = run(5.0).await;
    let s_id = r.plan.regions.standby.db_instance_id.clone();
    let state = r.fenced("exec-stale", false).await.unwrap();
    control(
        "realism",
        json!({ &s_id: { "promote_stale_s": 3.0, "promote_modifying_s": 0.5, "promote_rebooting_s": 0.5 } }),
    )
    .await;
    let id = unique("lost-promote");
    handover_testkit::add_fault_rules(json!([{"id": id, "mode": "lost", "service": "rds",
        "action": "PromoteReadReplica", "target": s_id, "count": 1}]))
    .await;
    let first = r.start(&state, "exec-stale").await;
    handover_testkit::remove_fault_rules(&[&id]).await;
    let e = first.expect_err("the answer was lost");
    assert_eq!(e.error_name(), ErrorName::Transient, "{e}");
    let refused = r.start(&state, "exec-stale").await.expect_err("refused");
    assert_eq!(refused.error_name(), ErrorName::Transient, "{refused}");
    assert!(
        refused.to_string().contains("InvalidDBInstanceState"),
        "{refused}"
    );
    let tr = r.transition().await;
    assert!(
        tr.promote_called_at.is_none(),
        "no call recorded on inference"
    );
    // The state machine's next retry, once RDS shows the promotion.
    tokio::time::sleep(std::time::Duration::from_millis(3500)).await;
    let retried = r.start(&state, "exec-stale").await.unwrap();
    assert_eq!(
        retried.status,
        PromotionStatus::Promoting,
        "{}",
        retried.db_status
    );
    assert!(
        retried.db_status.contains("answer was lost"),
        "{}",
        retried.db_status
    );
    assert_eq!(
        r.promote_calls().await,
        2,
        "the second call was refused, not repeated"
    );
    let mut state = state;
    state
        .steps
        .insert("promotion".into(), serde_json::to_value(&retried).unwrap());
    let s_rds = r.s_rds().await;
    let mut done = None;
    for _ in 0..40 {
        let p = status(
            &state,
            "exec-stale",
            &r.store,
            &Promoter::for_plan(&state, &s_rds),
            Utc::now,
        )
        .await
        .unwrap();
        if p.status == PromotionStatus::Promoted {
            done = Some(p);
            break;
        }
        state
            .steps
            .insert("promotion".into(), serde_json::to_value(&p).unwrap());
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    let done = done.expect("S promoted within the polls");
    assert_eq!(done.epoch, Some(2));
    let rec = r.store.primary().await.unwrap().unwrap();
    assert_eq!(rec.region, r.plan.regions.standby.region);
}

/// Issue 34, loss not the clock: ReplicaLag for PostgreSQL is now minus
/// S's last replayed commit, so after the fence it grows by a second a
/// second while nothing is lost. A fence confirmed 115 s before a sample
/// of 110 s (a reboot at AWS's pace, S fully replayed): the 60 s target
/// holds, and an approval that accepted no loss must not be refused for
/// the fence's time. The sample's time is its period's start, up to a
/// minute early, so the estimate is at most 55 s. An unconfirmed fence, or
/// one that left P's sessions open (`end_sessions` off), still counts the
/// whole lag: P may have gone on committing.
#[tokio::test]
async fn a_fence_that_took_its_time_does_not_count_as_lost_data() {
    use chrono::Duration;
    for (confirmed, end_sessions) in [(true, true), (false, true), (true, false)] {
        let mut plan = unique_plan();
        plan.fence.end_sessions = end_sessions;
        let r = run_in(plan, 5.0).await;
        let exec = format!("exec-slow-fence-{confirmed}-{end_sessions}");
        let mut state = r.fenced(&exec, false).await.unwrap();
        // The newest sample (after the world's own): 110 s.
        let sampled = Utc::now();
        let s = &r.plan.regions.standby;
        put_replica_lag(&r.aws, &s.region, &s.db_instance_id, 110.0, sampled).await;
        let mut f: handover::execution::FenceResult = state.require("fence").unwrap();
        assert_eq!(f.outcome, FenceOutcome::Confirmed);
        f.fenced_at = sampled - Duration::seconds(115);
        if !confirmed {
            f.outcome = FenceOutcome::Unconfirmed;
            f.may_proceed = true;
        }
        state
            .steps
            .insert("fence".into(), serde_json::to_value(&f).unwrap());
        let out = r.start(&state, &exec).await;
        if confirmed && end_sessions {
            let p = out.unwrap();
            assert_eq!(p.status, PromotionStatus::Promoting);
            assert!(p.rpo_s <= 55.01, "the loss at the fence: {}", p.rpo_s);
        } else {
            let e = out.expect_err("the whole lag counts");
            assert!(e.to_string().contains("110 s"), "{e}");
        }
    }
}

/// The other side of the same question: claimed, but the call never reached
/// RDS (the process died before it). The replica is still a healthy replica,
/// so the retry calls PromoteReadReplica, once.
#[tokio::test]
async fn a_claim_whose_call_never_reached_rds_calls_it_on_retry() {
    let r = run(5.0).await;
    let state = r.claimed("exec-died").await;
    let retried = r.start(&state, "exec-died").await.unwrap();
    assert_eq!(retried.status, PromotionStatus::Promoting);
    assert_eq!(r.promote_calls().await, 1);
}

/// Issue 12, scenario 7: fence and promote act only on an approval that
/// says approve, by someone on the plan's list. A send-task-success with a
/// reject payload (or a stranger's id) changes nothing.
#[tokio::test]
async fn fence_and_promote_refuse_an_approval_that_is_not_an_allowed_approve() {
    let r = run(5.0).await;
    async fn groups(r: &Run) -> Vec<String> {
        handover_testkit::world::p_security_groups(&r.aws, &r.plan).await
    }
    let before = groups(&r).await;
    let mut reject = approval(false);
    reject["decision"] = json!("reject");
    let mut stranger = approval(false);
    stranger["approver_id"] = json!("U0STRANGER");
    for (what, a) in [("reject", reject), ("stranger", stranger)] {
        let state = run_state(&r.plan, json!({ "approval": a }));
        let err = fence(&state, "exec-x", &r.store, &r.p_rds().await, Utc::now)
            .await
            .unwrap_err();
        assert_eq!(err.error_name(), ErrorName::Precondition, "{what}: {err}");
        assert!(
            err.to_string().contains("nothing is fenced or promoted"),
            "{what}: {err}"
        );
        let promote_state = with_confirmed_fence(&state);
        let err = r.start(&promote_state, "exec-x").await.unwrap_err();
        assert_eq!(err.error_name(), ErrorName::Precondition, "{what}: {err}");
        assert!(
            err.to_string().contains("nothing is fenced or promoted"),
            "{what}: {err}"
        );
    }
    assert_eq!(groups(&r).await, before, "P was not fenced");
    assert!(
        r.store
            .primary()
            .await
            .unwrap()
            .unwrap()
            .transition
            .is_none()
    );
    assert_eq!(r.promote_calls().await, 0);
}

#[tokio::test]
async fn lag_over_the_limit_needs_acknowledgement() {
    let r = run(126.0).await;
    let state = r.fenced("exec-a", false).await.unwrap();
    let err = r.start(&state, "exec-a").await.unwrap_err();
    assert_eq!(err.error_name(), ErrorName::Precondition);
    assert!(err.to_string().contains("126"), "{err}");
    assert_eq!(r.promote_calls().await, 0);

    // The question asked about the loss, and the approver accepted it.
    record_approval(&r.store, "exec-a", &approval(true)).await;
    let mut acked = state.clone();
    acked.steps.insert("approval".into(), approval(true));
    let ok = r.start(&acked, "exec-a").await.unwrap();
    assert_eq!(ok.rpo_s, 126.0, "the recorded RPO is the lag sample");
    assert_eq!(r.promote_calls().await, 1);
}

/// No ReplicaLag sample at all: promotion needs the approver to have accepted
/// an unknown loss ("Approve — accept unknown data loss"), and records the
/// RPO as unknown (-1), never as a number nobody measured.
#[tokio::test]
async fn unknown_lag_promotes_only_with_an_accepted_unknown_loss() {
    let r = run_with(unique_plan(), None).await;
    let state = r.fenced("exec-a", false).await.unwrap();
    let err = r.start(&state, "exec-a").await.unwrap_err();
    assert_eq!(err.error_name(), ErrorName::Precondition);
    assert!(
        err.to_string()
            .contains("did not accept an unknown data loss"),
        "{err}"
    );
    assert_eq!(r.promote_calls().await, 0);
    // The question asked about the loss, and the approver accepted it.
    record_approval(&r.store, "exec-a", &approval(true)).await;
    let mut acked = state.clone();
    acked.steps.insert("approval".into(), approval(true));
    let ok = r.start(&acked, "exec-a").await.unwrap();
    assert_eq!(ok.rpo_s, -1.0, "the RPO is recorded as unknown");
    assert_eq!(r.promote_calls().await, 1);
}

#[tokio::test]
async fn an_unconfirmed_fence_under_stop_blocks_promotion() {
    let r = run(5.0).await;
    let mut state = r.fenced("exec-a", false).await.unwrap();
    let mut f: handover::execution::FenceResult = state.require("fence").unwrap();
    f.outcome = FenceOutcome::Unconfirmed;
    f.may_proceed = false;
    state
        .steps
        .insert("fence".into(), serde_json::to_value(f).unwrap());
    let err = r.start(&state, "exec-a").await.unwrap_err();
    assert_eq!(err.error_name(), ErrorName::Precondition);
    assert_eq!(r.promote_calls().await, 0);
}

/// Compensation after the irreversible call reads the world: S promoted
/// means the record moves to S; S still a replica means a person decides.
#[tokio::test]
async fn compensation_after_the_promotion_call_follows_what_rds_shows() {
    use handover::failover::compensate::{Compensation, compensate};
    let r = run(5.0).await;
    let _ = r.claimed("exec-called").await;
    let now = Utc::now();
    r.store
        .mark_promote_called(1, "exec-called", now)
        .await
        .unwrap();
    // S is still a replica: nothing is touched.
    let (p, s) = (r.p_rds().await, r.s_rds().await);
    let out = compensate(&r.plan, &r.store, "exec-called", None, &p, &s, Utc::now()).await;
    assert!(
        matches!(&out, Compensation::Unresolved { detail } if detail.contains("may still complete")),
        "{out:?}"
    );
    assert!(
        r.store
            .primary()
            .await
            .unwrap()
            .unwrap()
            .transition
            .is_some()
    );
    // S finishes promoting on its own: the record follows.
    r.promote_s_in_moto().await;
    let out = compensate(&r.plan, &r.store, "exec-called", None, &p, &s, Utc::now()).await;
    assert_eq!(out, Compensation::Completed { epoch: 2 });
    let rec = r.store.primary().await.unwrap().unwrap();
    assert_eq!(rec.region, r.plan.regions.standby.region);
    assert!(rec.transition.is_none());
    // Another execution's transition is never touched.
    let out = compensate(&r.plan, &r.store, "exec-other", None, &p, &s, Utc::now()).await;
    assert_eq!(out, Compensation::Nothing);
}

/// A promotion claimed and never recorded as called (its answer lost, the
/// retries spent) that did reach RDS: compensation must not unfence P while
/// S is promoting, or there are two writers. It follows S instead.
#[tokio::test]
async fn compensation_of_a_claimed_promotion_that_reached_rds_leaves_p_fenced() {
    use handover::failover::compensate::{Compensation, compensate};
    let r = run(5.0).await;
    handover_testkit::realistic_rds(&r.plan.regions.standby.db_instance_id, 0.5, 0.5, 0.0).await;
    let _ = r.claimed("exec-lost").await;
    r.promote_s_in_moto().await; // the lost call landed
    let (p, s) = (r.p_rds().await, r.s_rds().await);
    let out = compensate(&r.plan, &r.store, "exec-lost", None, &p, &s, Utc::now()).await;
    assert!(
        matches!(&out, Compensation::Unresolved { detail } if detail.contains("may still complete")),
        "S is still promoting: {out:?}"
    );
    let fence = r.plan.regions.primary.fence_security_group_id.clone();
    assert_eq!(
        handover_testkit::world::p_security_groups(&r.aws, &r.plan).await,
        vec![fence.clone()],
        "P stays fenced"
    );
    tokio::time::sleep(std::time::Duration::from_millis(1300)).await;
    let out = compensate(&r.plan, &r.store, "exec-lost", None, &p, &s, Utc::now()).await;
    assert_eq!(out, Compensation::Completed { epoch: 2 });
    assert_eq!(
        handover_testkit::world::p_security_groups(&r.aws, &r.plan).await,
        vec![fence]
    );
}

/// Found by review: a run stopped from outside (StopExecution, a timeout)
/// can leave its promote invocation running between its claim and its
/// PromoteReadReplica call. Compensating at once saw S still a replica,
/// unfenced P and released the transition; the call then landed: two
/// writers. Compensation now waits while a task may act, and what it finds
/// afterwards is S promoted, with P still fenced.
#[tokio::test]
async fn compensation_waits_out_a_promote_invocation_that_may_still_call() {
    use handover::failover::compensate::{Compensation, TAIL, compensate};
    let r = run(5.0).await;
    let _ = r.claimed("exec-stopped").await;
    let fence = r.plan.regions.primary.fence_security_group_id.clone();
    let (p, s) = (r.p_rds().await, r.s_rds().await);
    let stopped = Utc::now();
    let out = compensate(
        &r.plan,
        &r.store,
        "exec-stopped",
        Some(stopped + TAIL),
        &p,
        &s,
        Utc::now(),
    )
    .await;
    assert_eq!(
        out,
        Compensation::Deferred {
            until: stopped + TAIL
        }
    );
    assert_eq!(
        handover_testkit::world::p_security_groups(&r.aws, &r.plan).await,
        vec![fence.clone()],
        "P stays fenced while the promote invocation may still call"
    );
    let rec = r.store.primary().await.unwrap().unwrap();
    assert!(rec.transition.is_some(), "the transition stays held");
    // The invocation's call lands inside the tail.
    r.promote_s_in_moto().await;
    // After the tail, compensation finds S promoted: the record follows it
    // and P is never unfenced.
    let after = stopped + TAIL + chrono::Duration::seconds(1);
    let out = compensate(
        &r.plan,
        &r.store,
        "exec-stopped",
        Some(stopped + TAIL),
        &p,
        &s,
        after,
    )
    .await;
    assert_eq!(out, Compensation::Completed { epoch: 2 });
    assert_eq!(
        handover_testkit::world::p_security_groups(&r.aws, &r.plan).await,
        vec![fence]
    );
}

/// Found by review: a run that failed by itself (every task answered, so
/// nothing in flight by the history) after a promote invocation claimed and
/// sent PromoteReadReplica with its answer lost. S may not show the
/// promotion yet; unfencing P then would make two writers once it does.
/// A claimed promotion waits TAIL after its claim, whatever the history.
#[tokio::test]
async fn a_claimed_promotion_waits_its_tail_even_when_nothing_is_in_flight() {
    use handover::failover::compensate::{Compensation, TAIL, compensate};
    let r = run(5.0).await;
    let _ = r.claimed("exec-claimed").await;
    let claimed = r
        .store
        .primary()
        .await
        .unwrap()
        .unwrap()
        .transition
        .and_then(|t| t.promote_claimed_at)
        .expect("claimed");
    let (p, s) = (r.p_rds().await, r.s_rds().await);
    let out = compensate(&r.plan, &r.store, "exec-claimed", None, &p, &s, Utc::now()).await;
    assert_eq!(
        out,
        Compensation::Deferred {
            until: claimed + TAIL
        }
    );
    assert_eq!(
        handover_testkit::world::p_security_groups(&r.aws, &r.plan).await,
        vec![r.plan.regions.primary.fence_security_group_id.clone()]
    );
    // After it, S still a replica: nothing reached RDS; P is unfenced.
    let out = compensate(
        &r.plan,
        &r.store,
        "exec-claimed",
        None,
        &p,
        &s,
        claimed + TAIL,
    )
    .await;
    assert!(matches!(out, Compensation::Released { .. }), "{out:?}");
}

/// The same wait with nothing promoted: once the tail is over, P is
/// unfenced and the transition released.
#[tokio::test]
async fn compensation_unfences_p_once_the_tail_is_over() {
    use handover::failover::compensate::{Compensation, compensate};
    let r = run(5.0).await;
    let before = handover_testkit::world::p_security_groups(&r.aws, &r.plan).await;
    r.fenced("exec-tail", false).await.unwrap();
    let (p, s) = (r.p_rds().await, r.s_rds().await);
    let now = Utc::now();
    let until = now + chrono::Duration::seconds(30);
    let out = compensate(&r.plan, &r.store, "exec-tail", Some(until), &p, &s, now).await;
    assert_eq!(out, Compensation::Deferred { until });
    assert_ne!(
        handover_testkit::world::p_security_groups(&r.aws, &r.plan).await,
        before
    );
    let out = compensate(&r.plan, &r.store, "exec-tail", Some(until), &p, &s, until).await;
    assert!(matches!(out, Compensation::Released { .. }), "{out:?}");
    assert_eq!(
        handover_testkit::world::p_security_groups(&r.aws, &r.plan).await,
        before
    );
    assert!(
        r.store
            .primary()
            .await
            .unwrap()
            .unwrap()
            .transition
            .is_none()
    );
}

/// Found by the long fault campaign (seed 6f797c246593a023): the fence's
/// reboots were accepted with their answers lost, so P was still
/// `rebooting` when compensation ran; RDS refused the restoring modify, and
/// compensation released the transition anyway, leaving P fenced with
/// nothing promoted and nothing to retry. Compensation now keeps trying
/// while P reboots.
#[tokio::test]
async fn compensation_unfences_p_once_its_reboot_is_over() {
    use handover::failover::compensate::{Compensation, compensate};
    let r = run(5.0).await;
    let p = &r.plan.regions.primary;
    let before = handover_testkit::world::p_security_groups(&r.aws, &r.plan).await;
    r.fenced("exec-reboot", false).await.unwrap();
    handover_testkit::realistic_reboot(&p.db_instance_id, 5.0).await;
    r.aws
        .rds(&p.region)
        .await
        .reboot_db_instance()
        .db_instance_identifier(&p.db_instance_id)
        .send()
        .await
        .unwrap();
    let (p_rds, s_rds) = (r.p_rds().await, r.s_rds().await);
    let out = compensate(
        &r.plan,
        &r.store,
        "exec-reboot",
        None,
        &p_rds,
        &s_rds,
        Utc::now(),
    )
    .await;
    assert!(matches!(out, Compensation::Released { .. }), "{out:?}");
    assert_eq!(
        handover_testkit::world::p_security_groups(&r.aws, &r.plan).await,
        before,
        "P unfenced after its reboot"
    );
    assert!(
        r.store
            .primary()
            .await
            .unwrap()
            .unwrap()
            .transition
            .is_none()
    );
}

/// Found by review: P refusing the unfence for good (its Region's RDS API
/// unreachable, the instance failed) used to keep the transition, which
/// refused every later failover. Compensation now releases the transition
/// and keeps P's groups in the record; audit's sweep unfences P once it can,
/// and a fence in between records those groups as P's, not the deny-all one.
#[tokio::test]
async fn an_unfence_p_refuses_releases_the_transition_and_the_sweep_finishes_it() {
    use handover::failover::compensate::{Compensation, compensate};
    let r = run(5.0).await;
    let p = r.plan.regions.primary.clone();
    let before = handover_testkit::world::p_security_groups(&r.aws, &r.plan).await;
    r.fenced("exec-1", false).await.unwrap();
    let id = unique("refuse-unfence");
    handover_testkit::add_fault_rules(json!([{"id": id, "mode": "error", "status": 400,
        "code": "InvalidVPCNetworkStateFault", "message": "injected", "service": "rds",
        "action": "ModifyDBInstance", "target": p.db_instance_id}]))
    .await;
    let (p_rds, s_rds) = (r.p_rds().await, r.s_rds().await);
    let out = compensate(
        &r.plan,
        &r.store,
        "exec-1",
        None,
        &p_rds,
        &s_rds,
        Utc::now(),
    )
    .await;
    handover_testkit::remove_fault_rules(&[&id]).await;
    let Compensation::Released {
        restored_groups,
        detail,
    } = out
    else {
        panic!("{out:?}")
    };
    assert_eq!(restored_groups, None);
    assert!(detail.contains("could NOT be unfenced"), "{detail}");
    let rec = r.store.primary().await.unwrap().unwrap();
    assert!(rec.transition.is_none(), "the next incident is not refused");
    assert_eq!(rec.unfence_pending.as_ref(), Some(&before));
    // A fence now (P still fenced) records P's real groups.
    let f = r.fenced("exec-2", false).await.unwrap();
    let fence: handover::execution::FenceResult = f.require("fence").unwrap();
    assert_eq!(fence.previous_security_groups, before);
    let out = compensate(
        &r.plan,
        &r.store,
        "exec-2",
        None,
        &p_rds,
        &s_rds,
        Utc::now(),
    )
    .await;
    assert!(
        matches!(
            out,
            Compensation::Released {
                restored_groups: Some(_),
                ..
            }
        ),
        "{out:?}"
    );
    assert_eq!(
        handover_testkit::world::p_security_groups(&r.aws, &r.plan).await,
        before
    );
    assert_eq!(
        r.store.primary().await.unwrap().unwrap().unfence_pending,
        None
    );

    // Refused again; then the sweep (no run holding a transition) unfences.
    r.fenced("exec-3", false).await.unwrap();
    handover_testkit::add_fault_rules(json!([{"id": id, "mode": "error", "status": 400,
        "code": "InvalidVPCNetworkStateFault", "message": "injected", "service": "rds",
        "action": "ModifyDBInstance", "target": p.db_instance_id}]))
    .await;
    compensate(
        &r.plan,
        &r.store,
        "exec-3",
        None,
        &p_rds,
        &s_rds,
        Utc::now(),
    )
    .await;
    handover_testkit::remove_fault_rules(&[&id]).await;
    let deps = handover::report::audit::AuditDeps {
        aws: std::sync::Arc::new(handover_testkit::aws()),
        store: r.store.clone(),
        slack: None,
    };
    let sfn = handover::report::sources::SfnHistory::new(&r.aws, "ap-northeast-1").await;
    let out = handover::report::sweep::sweep(
        &deps,
        &sfn,
        "arn:aws:states:ap-northeast-1:123456789012:stateMachine:handover-none",
        Utc::now(),
    )
    .await
    .unwrap();
    assert!(
        matches!(
            out,
            handover::report::audit::AuditOutcome::Reconciled { .. }
        ),
        "{out:?}"
    );
    assert_eq!(
        handover_testkit::world::p_security_groups(&r.aws, &r.plan).await,
        before
    );
    assert_eq!(
        r.store.primary().await.unwrap().unwrap().unfence_pending,
        None
    );
}

/// P left fenced by exec-1, whose compensation could not unfence it: the
/// record keeps P's groups for the sweep. Returns them.
async fn left_fenced(r: &Run) -> Vec<String> {
    use handover::failover::compensate::compensate;
    let p = &r.plan.regions.primary;
    let before = handover_testkit::world::p_security_groups(&r.aws, &r.plan).await;
    r.fenced("exec-1", false).await.unwrap();
    let refuse = unique("refuse-unfence");
    handover_testkit::add_fault_rules(json!([{"id": refuse, "mode": "error", "status": 400,
        "code": "InvalidVPCNetworkStateFault", "message": "injected", "service": "rds",
        "action": "ModifyDBInstance", "target": p.db_instance_id}]))
    .await;
    let (p_rds, s_rds) = (r.p_rds().await, r.s_rds().await);
    compensate(
        &r.plan,
        &r.store,
        "exec-1",
        None,
        &p_rds,
        &s_rds,
        Utc::now(),
    )
    .await;
    handover_testkit::remove_fault_rules(&[&refuse]).await;
    let rec = r.store.primary().await.unwrap().unwrap();
    assert_eq!(rec.unfence_pending.as_ref(), Some(&before), "P left fenced");
    before
}

/// The sweep runs while its ModifyDBInstance of P takes `delay_s`, and a
/// fence (exec-2) begins `fence_after_s` into it. The fence must end
/// confirmed, holding the transition, with P fenced and P's own groups
/// (`before`) recorded for failback. Returns the primary record then.
async fn sweep_racing_a_fence(
    r: &Run,
    before: &[String],
    delay_s: u64,
    fence_after_s: u64,
) -> handover::store::primary::PrimaryRecord {
    let slow = unique("slow-unfence");
    handover_testkit::add_fault_rules(json!([{"id": slow, "mode": "latency", "seconds": delay_s,
        "count": 1, "service": "rds", "action": "ModifyDBInstance",
        "target": r.plan.regions.primary.db_instance_id}]))
    .await;
    let deps = handover::report::audit::AuditDeps {
        aws: std::sync::Arc::new(handover_testkit::aws()),
        store: r.store.clone(),
        slack: None,
    };
    let sfn = handover::report::sources::SfnHistory::new(&r.aws, "ap-northeast-1").await;
    let none = "arn:aws:states:ap-northeast-1:123456789012:stateMachine:handover-none";
    let began = std::time::Instant::now();
    let (swept, fenced) = tokio::join!(
        handover::report::sweep::sweep(&deps, &sfn, none, Utc::now()),
        async {
            tokio::time::sleep(std::time::Duration::from_secs(fence_after_s)).await;
            r.fenced("exec-2", false).await
        }
    );
    handover_testkit::remove_fault_rules(&[&slow]).await;
    // The sweep's delayed call lands `delay_s` after it was sent, whatever
    // the sweep did meanwhile: look at P only once it has.
    let landed = began + std::time::Duration::from_secs(delay_s + 1);
    tokio::time::sleep_until(landed.into()).await;
    swept.unwrap();
    let fence: handover::execution::FenceResult = fenced.unwrap().require("fence").unwrap();
    the_fence_holds(r, &fence, before).await;
    let rec = r.store.primary().await.unwrap().unwrap();
    assert_eq!(
        rec.transition.as_ref().map(|t| t.execution.as_str()),
        Some("exec-2")
    );
    rec
}

/// A fence that began while an unfence was under way: confirmed, P still
/// fenced once every late call has landed, and P's own groups recorded.
async fn the_fence_holds(r: &Run, fence: &handover::execution::FenceResult, before: &[String]) {
    assert_eq!(
        fence.outcome,
        handover::execution::FenceOutcome::Confirmed,
        "{}",
        fence.detail
    );
    assert_eq!(
        handover_testkit::world::p_security_groups(&r.aws, &r.plan).await,
        vec![r.plan.regions.primary.fence_security_group_id.clone()],
        "P is fenced at the end: no late unfence call undid the fence"
    );
    assert_eq!(
        fence.previous_security_groups, before,
        "failback restores P's own groups"
    );
}

/// Found by review: the sweep read "no transition" and then restored P's
/// groups; a fence that began in between was undone by the sweep's call,
/// which landed after it. The sweep now claims the restoring first, and a
/// fence waits for that claim to end. Here the sweep's ModifyDBInstance
/// takes 3 s and a fence begins 1 s into it.
#[tokio::test]
async fn the_sweep_never_undoes_a_fence_that_began_while_it_unfenced_p() {
    let r = run(5.0).await;
    let before = left_fenced(&r).await;
    let rec = sweep_racing_a_fence(&r, &before, 3, 1).await;
    assert_eq!(
        rec.unfence_pending, None,
        "the sweep finished before the fence"
    );
    assert_eq!(rec.unfencing, None, "and ended its claim");
}

/// Found by review: the sweep's call timed out (its 10 s budget) while RDS
/// still applied it 2 s later. Ending the claim then let a fence begin
/// before that late change. A call whose outcome is unknown now renews the
/// claim for a whole lease, and the fence waits it out.
#[tokio::test]
async fn a_sweep_call_that_timed_out_holds_its_claim_until_it_cannot_land() {
    let r = run(5.0).await;
    let before = left_fenced(&r).await;
    let rec = sweep_racing_a_fence(&r, &before, 12, 11).await;
    assert_eq!(rec.unfencing, None, "the fence removed the lapsed claim");
}

/// Two compensations of exec-1 side by side (the run's own audit and the
/// sweep), the first starting at once, the second 0.2 s later, while P's
/// first ModifyDBInstance takes `delay_s` to land (against a call budget,
/// `fence.timeout_ms`, of `budget_ms`), and a fence of another run tries
/// to begin from 0.5 s on. Returns both compensations and the fence, once
/// every call has landed.
async fn compensations_racing_a_fence(
    r: &Run,
    delay_s: f64,
    budget_ms: u64,
) -> (
    [handover::failover::compensate::Compensation; 2],
    handover::execution::FenceResult,
) {
    use handover::failover::compensate::compensate;
    use std::time::Duration;
    r.fenced("exec-1", false).await.unwrap();
    let slow = unique("slow-unfence");
    handover_testkit::add_fault_rules(json!([{"id": slow, "mode": "latency", "seconds": delay_s,
        "count": 1, "service": "rds", "action": "ModifyDBInstance",
        "target": r.plan.regions.primary.db_instance_id}]))
    .await;
    let (p_rds, s_rds) = (r.p_rds().await, r.s_rds().await);
    let mut plan = r.plan.clone();
    plan.fence.timeout_ms = budget_ms;
    let compensation = |after_ms: u64| {
        let (plan, store, p_rds, s_rds) = (&plan, &r.store, &p_rds, &s_rds);
        async move {
            tokio::time::sleep(Duration::from_millis(after_ms)).await;
            compensate(plan, store, "exec-1", None, p_rds, s_rds, Utc::now()).await
        }
    };
    let began = std::time::Instant::now();
    let (first, second, fenced) = tokio::join!(compensation(0), compensation(200), async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        loop {
            match r.fenced("exec-2", false).await {
                Err(StepError::Refused(_) | StepError::Held(_))
                    if began.elapsed() < Duration::from_secs(60) =>
                {
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
                other => break other,
            }
        }
    });
    handover_testkit::remove_fault_rules(&[&slow]).await;
    // The delayed call lands `delay_s` after it was sent, whatever the
    // compensations did meanwhile: look at P only once it has.
    tokio::time::sleep_until((began + Duration::from_secs_f64(delay_s + 1.0)).into()).await;
    let fence: handover::execution::FenceResult = fenced.unwrap().require("fence").unwrap();
    ([first, second], fence)
}

/// What [`compensations_racing_a_fence`] must leave: one compensation
/// released the transition, the other touched nothing (it found the
/// first's claim, or, started late, no transition), and the fence that
/// began afterwards still holds P.
async fn only_one_compensated_and_the_fence_holds(r: &Run, delay_s: f64, budget_ms: u64) {
    use handover::failover::compensate::Compensation;
    let before = handover_testkit::world::p_security_groups(&r.aws, &r.plan).await;
    let (compensations, fence) = compensations_racing_a_fence(r, delay_s, budget_ms).await;
    let released = compensations
        .iter()
        .filter(|c| matches!(c, Compensation::Released { .. }))
        .count();
    let elsewhere = compensations
        .iter()
        .filter(|c| matches!(c, Compensation::Elsewhere { .. } | Compensation::Nothing))
        .count();
    assert_eq!((released, elsewhere), (1, 1), "{compensations:?}");
    the_fence_holds(r, &fence, &before).await;
}

/// Found by review: without audit's reserved concurrency, the run's own
/// audit and the sweep can compensate one run side by side. One restored
/// P and released the transition, a fence began, and the other's call,
/// slow to land, then undid that fence. Each unfence call now goes out
/// under a claim taken while the run holds its transition, so the second
/// compensation finds the first's claim and makes no call. The slow call
/// lands in 1.2 s, well within its 5 s budget (`fence.timeout_ms`).
#[tokio::test]
async fn two_compensations_of_one_run_never_undo_a_later_fence() {
    let r = run(5.0).await;
    only_one_compensated_and_the_fence_holds(&r, 1.2, 5_000).await;
}

/// Found by review: a call that timed out (here it lands 5 s after it was
/// sent, past its 1.5 s budget, the test plan's) may still land after a later attempt
/// succeeded. Ending the claim then let a fence begin before that late
/// change. A compensation that saw an unknown outcome now renews its claim
/// before releasing the transition, and the fence waits it out.
#[tokio::test]
async fn a_compensation_call_that_timed_out_holds_its_claim_until_it_cannot_land() {
    let r = run(5.0).await;
    only_one_compensated_and_the_fence_holds(&r, 5.0, 1_500).await;
}

/// Found by review: the store's claim write landed and its answer was
/// lost, so the SDK sent the same request again. The retry's condition
/// did not count the stamp it carried as this compensation's own, read
/// its own claim as another's, and compensation touched nothing: P stayed
/// fenced with nothing promoted. The stamp being written is now its own.
#[tokio::test]
async fn a_claim_whose_answer_was_lost_is_still_this_compensations_own() {
    use handover::failover::compensate::{Compensation, compensate};
    let r = run(5.0).await;
    let before = handover_testkit::world::p_security_groups(&r.aws, &r.plan).await;
    r.fenced("exec-1", false).await.unwrap();
    let lost = unique("lost-claim");
    handover_testkit::add_fault_rules(json!([{"id": lost, "mode": "lost", "count": 1,
        "service": "dynamodb", "action": "UpdateItem", "match": "SET unfencing_ms = :now"}]))
    .await;
    let (p_rds, s_rds) = (r.p_rds().await, r.s_rds().await);
    let out = compensate(
        &r.plan,
        &r.store,
        "exec-1",
        None,
        &p_rds,
        &s_rds,
        Utc::now(),
    )
    .await;
    handover_testkit::remove_fault_rules(&[&lost]).await;
    assert!(matches!(out, Compensation::Released { .. }), "{out:?}");
    assert_eq!(
        handover_testkit::world::p_security_groups(&r.aws, &r.plan).await,
        before,
        "P unfenced"
    );
}

/// Found by review: a fence that found P mid-change (an unfence being
/// applied: the deny-all group beside P's own) recorded the deny-all group
/// as one of P's, and failback would have restored it. It is never P's own.
#[tokio::test]
async fn the_fence_never_records_the_deny_all_group_as_one_of_ps_own() {
    let r = run(5.0).await;
    let p = &r.plan.regions.primary;
    let before = handover_testkit::world::p_security_groups(&r.aws, &r.plan).await;
    let mut mixed = before.clone();
    mixed.push(p.fence_security_group_id.clone());
    r.aws
        .rds(&p.region)
        .await
        .modify_db_instance()
        .db_instance_identifier(&p.db_instance_id)
        .set_vpc_security_group_ids(Some(mixed))
        .apply_immediately(true)
        .send()
        .await
        .unwrap();
    let f = r.fenced("exec-1", false).await.unwrap();
    let fence: handover::execution::FenceResult = f.require("fence").unwrap();
    assert_eq!(fence.previous_security_groups, before);
}

/// RDS refusing PromoteReadReplica on an instance that is no longer a
/// replica (RDS API Reference, PromoteReadReplica, "Errors").
fn refused_as_not_a_replica() -> handover::adapters::AwsError {
    handover::adapters::AwsError::Call {
        service: "rds",
        op: "PromoteReadReplica",
        region: "ap-northeast-1".into(),
        code: "InvalidDBInstanceState".into(),
        transient: false,
        source: "DB Instance is not a read replica.".into(),
    }
}

/// A promoter whose answers are scripted, for the retry sequence moto
/// cannot produce: a describe that lags behind an accepted call.
struct Scripted {
    started: std::sync::Mutex<Vec<bool>>,
    promote_calls: std::sync::Mutex<u32>,
}

impl handover::failover::promote::ReplicaPromoter for Scripted {
    async fn ready(
        &self,
        _: std::time::Duration,
    ) -> Result<Result<(), String>, handover::adapters::AwsError> {
        Ok(Ok(()))
    }
    async fn promote(&self, _: std::time::Duration) -> Result<(), handover::adapters::AwsError> {
        *self.promote_calls.lock().unwrap() += 1;
        Err(refused_as_not_a_replica())
    }
    async fn progress(
        &self,
        _: std::time::Duration,
    ) -> Result<handover::failover::promote::PromotionProgress, handover::adapters::AwsError> {
        unreachable!("start never polls")
    }
    async fn started(&self, _: std::time::Duration) -> Result<bool, handover::adapters::AwsError> {
        Ok(self.started.lock().unwrap().remove(0))
    }
}

/// The retry after a lost answer meets a describe that has not caught up
/// (still an available replica), calls again, and RDS refuses: the
/// replica is already promoting. That refusal, confirmed by RDS, is the
/// call having happened, not a fatal error that would leave the run failed
/// while S promotes on its own.
#[tokio::test]
async fn invalid_state_from_a_second_promotion_call_confirmed_by_rds_is_the_call_having_happened() {
    let r = run(5.0).await;
    let state = r.claimed("exec-lag").await;
    let lag = CloudWatch::new(&r.aws, &r.plan.regions.standby.region).await;
    // started(): false (describe lags), then true (after the refusal).
    let p = Scripted {
        started: std::sync::Mutex::new(vec![false, true]),
        promote_calls: std::sync::Mutex::new(0),
    };
    let out = start(&state, "exec-lag", &r.store, &p, &lag, Utc::now)
        .await
        .unwrap();
    assert_eq!(out.status, PromotionStatus::Promoting);
    assert_eq!(*p.promote_calls.lock().unwrap(), 1);
    let tr = r.transition().await;
    assert!(tr.promote_called_at.is_some());
    // The same refusal with RDS showing no promotion is an error.
    let r = run(5.0).await;
    let state = r.fenced("exec-real", false).await.unwrap();
    let p = Scripted {
        started: std::sync::Mutex::new(vec![false, false]),
        promote_calls: std::sync::Mutex::new(0),
    };
    let lag = CloudWatch::new(&r.aws, &r.plan.regions.standby.region).await;
    assert!(
        start(&state, "exec-real", &r.store, &p, &lag, Utc::now)
            .await
            .is_err()
    );
}

/// A promoter for an attempt that overlaps another of the same run: Step
/// Functions retried after Lambda.ClientExecutionTimeoutException while the
/// first invocation still ran. The other attempt claims the promotion just
/// after this one read the record (in `ready`), and its call goes out
/// first, so RDS refuses this one while the describe lags behind.
struct ClaimedMeanwhile {
    store: Store,
    execution: &'static str,
}

impl handover::failover::promote::ReplicaPromoter for ClaimedMeanwhile {
    async fn ready(
        &self,
        _: std::time::Duration,
    ) -> Result<Result<(), String>, handover::adapters::AwsError> {
        let earlier = Utc::now() - chrono::Duration::seconds(1);
        self.store
            .claim_promotion(1, self.execution, (5.0, earlier), earlier)
            .await
            .expect("the other attempt claims");
        Ok(Ok(()))
    }
    async fn promote(&self, _: std::time::Duration) -> Result<(), handover::adapters::AwsError> {
        Err(refused_as_not_a_replica())
    }
    async fn progress(
        &self,
        _: std::time::Duration,
    ) -> Result<handover::failover::promote::PromotionProgress, handover::adapters::AwsError> {
        unreachable!("start never polls")
    }
    async fn started(&self, _: std::time::Duration) -> Result<bool, handover::adapters::AwsError> {
        Ok(false)
    }
}

/// The overlapping attempt's refused call is retried (Handover.Transient),
/// not fatal: the other attempt's call may be promoting S, and a Failed run
/// would unfence P beside it. Nothing is recorded as called on inference.
#[tokio::test]
async fn a_refused_call_after_an_overlapping_attempts_claim_is_retried() {
    let r = run(5.0).await;
    let state = r.fenced("exec-overlap", false).await.unwrap();
    let lag = CloudWatch::new(&r.aws, &r.plan.regions.standby.region).await;
    let p = ClaimedMeanwhile {
        store: r.store.clone(),
        execution: "exec-overlap",
    };
    let e = start(&state, "exec-overlap", &r.store, &p, &lag, Utc::now)
        .await
        .expect_err("RDS refused this attempt's call");
    assert_eq!(e.error_name(), ErrorName::Transient, "{e}");
    assert!(r.transition().await.promote_called_at.is_none());
}

/// RDS applies a security-group change over seconds (the new group `adding`,
/// the old `removing`): the fence is confirmed only once the deny-all group
/// alone is `active`, and stays unconfirmed when RDS takes longer than the
/// plan's `fence.confirm_s`.
#[tokio::test]
async fn fence_is_confirmed_only_when_the_deny_all_group_alone_is_active() {
    let r = run(5.0).await;
    let p_id = r.plan.regions.primary.db_instance_id.clone();
    handover_testkit::realistic_rds(&p_id, 0.0, 0.0, 1.5).await;
    let state = run_state(&r.plan, json!({ "approval": approval(false) }));
    record_approval(&r.store, "exec-a", &approval(false)).await;
    let p = r.p_rds().await;
    let f = fence(&state, "exec-a", &r.store, &p, Utc::now)
        .await
        .unwrap();
    assert_eq!(f.outcome, FenceOutcome::Confirmed, "{}", f.detail);
    // It read `adding`/`removing` first, then `active`: more than one describe after the modify.
    let describes = handover_testkit::call_log()
        .await
        .iter()
        .filter(|c| c["action"] == "DescribeDBInstances" && c["target"] == p_id.as_str())
        .count();
    assert!(describes >= 3, "{describes} describes: {}", f.detail);
    // Then the open sessions end: one reboot, after the group is active.
    assert_eq!(count_calls("RebootDBInstance", &p_id).await, 1);
    assert!(f.detail.contains("open sessions ended"), "{}", f.detail);

    let mut slow = unique_plan();
    slow.fence.confirm_s = 1;
    let r = run_in(slow, 5.0).await;
    let p_id = r.plan.regions.primary.db_instance_id.clone();
    handover_testkit::realistic_rds(&p_id, 0.0, 0.0, 4.0).await;
    let state = run_state(&r.plan, json!({ "approval": approval(false) }));
    record_approval(&r.store, "exec-b", &approval(false)).await;
    let f = fence(&state, "exec-b", &r.store, &r.p_rds().await, Utc::now)
        .await
        .unwrap();
    assert_eq!(f.outcome, FenceOutcome::Unconfirmed, "{}", f.detail);
    assert!(!f.may_proceed);
    assert!(f.detail.contains("still applying"), "{}", f.detail);
    assert!(f.detail.contains(":removing"), "{}", f.detail);
}

/// Found by the long fault campaign (seed 6f797c246593a023): every answer
/// to the fence's reboot was lost after RDS accepted it, so each retry was
/// refused (P `rebooting`) and the fence ran out its time unconfirmed. A
/// reboot this fence sent without an answer, with P now `rebooting`, is the
/// one under way: the fence waits for it and confirms.
#[tokio::test]
async fn a_reboot_whose_answer_was_lost_is_waited_for_not_retried_until_the_deadline() {
    let r = run(5.0).await;
    let p_id = r.plan.regions.primary.db_instance_id.clone();
    handover_testkit::realistic_reboot(&p_id, 1.5).await;
    let id = unique("lost-reboot");
    handover_testkit::add_fault_rules(json!([{"id": id, "mode": "lost", "service": "rds",
        "action": "RebootDBInstance", "target": p_id}]))
    .await;
    let state = run_state(&r.plan, json!({ "approval": approval(false) }));
    record_approval(&r.store, "exec-lost", &approval(false)).await;
    let f = fence(&state, "exec-lost", &r.store, &r.p_rds().await, Utc::now).await;
    handover_testkit::remove_fault_rules(&[&id]).await;
    let f = f.unwrap();
    assert_eq!(f.outcome, FenceOutcome::Confirmed, "{}", f.detail);
    assert!(f.detail.contains("open sessions ended"), "{}", f.detail);
    let tr = r.transition().await;
    assert!(
        tr.fence_reboot_at.is_some(),
        "the accepted reboot is recorded"
    );
}

/// Users report DescribeDBInstances still showing `available` for a while
/// after RebootDBInstance returned. Taking that `available` as the restart
/// confirms a fence whose sessions are still open. The fence waits until it
/// has seen `rebooting`: here the reboot begins 1.5 s after it was accepted
/// and takes 1.5 s, so the fence cannot be confirmed sooner than 3 s after.
#[tokio::test]
async fn a_stale_available_after_the_reboot_is_not_taken_as_the_restart() {
    let r = run(5.0).await;
    let p_id = r.plan.regions.primary.db_instance_id.clone();
    handover_testkit::stale_reboot(&p_id, 1.5, 1.5).await;
    let state = run_state(&r.plan, json!({ "approval": approval(false) }));
    record_approval(&r.store, "exec-stale", &approval(false)).await;
    let f = fence(&state, "exec-stale", &r.store, &r.p_rds().await, Utc::now)
        .await
        .unwrap();
    assert_eq!(f.outcome, FenceOutcome::Confirmed, "{}", f.detail);
    assert!(f.detail.contains("seen rebooting"), "{}", f.detail);
    let tr = r.transition().await;
    let accepted = tr.fence_reboot_at.expect("the accepted reboot is recorded");
    let waited = (f.fenced_at - accepted).num_milliseconds();
    assert!(
        waited >= 2_800,
        "confirmed {waited} ms after the reboot was accepted: {}",
        f.detail
    );
}

/// P reboots for a reason of its own as the fence begins: the fence's
/// reboot is refused until that one is over, then accepted. That earlier
/// restart's event, and its `rebooting` seen in a describe, are not ours:
/// with our reboot's describe stale for 1 s, taking them would confirm
/// the fence before our reboot even began. Only RDS's restart event after
/// ours was accepted counts.
#[tokio::test]
async fn an_earlier_restart_of_p_never_passes_for_the_fences_own() {
    let r = run(5.0).await;
    let p = r.plan.regions.primary.clone();
    // The deny-all group takes 2 s to apply; P's own reboot starts as soon
    // as the fence's modify is in and lasts 3 s, so the fence's reboot is
    // refused until it is over.
    handover_testkit::realistic_rds(&p.db_instance_id, 0.0, 0.0, 2.0).await;
    handover_testkit::stale_reboot(&p.db_instance_id, 0.0, 3.0).await;
    let (aws, id) = (handover_testkit::aws(), p.db_instance_id.clone());
    let own = tokio::spawn(async move {
        let rds = Rds::new(&aws, &p.region).await;
        let budget = std::time::Duration::from_secs(5);
        loop {
            let d = handover::adapters::DbInspector::describe(&rds, &id, budget).await;
            if d.ok()
                .flatten()
                .is_some_and(|d| !d.unsettled_security_groups.is_empty())
            {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        aws.rds(&p.region)
            .await
            .reboot_db_instance()
            .db_instance_identifier(&id)
            .send()
            .await
            .expect("P's own reboot");
        // The fence's reboot, when RDS accepts it: a stale `available`
        // for 1 s, then 1 s of `rebooting`.
        handover_testkit::stale_reboot(&id, 1.0, 1.0).await;
    });
    let state = run_state(&r.plan, json!({ "approval": approval(false) }));
    record_approval(&r.store, "exec-own", &approval(false)).await;
    let f = fence(&state, "exec-own", &r.store, &r.p_rds().await, Utc::now)
        .await
        .unwrap();
    own.await.unwrap();
    let p = &r.plan.regions.primary;
    assert_eq!(f.outcome, FenceOutcome::Confirmed, "{}", f.detail);
    assert!(
        f.detail.contains("RDS reported it restarted"),
        "{}",
        f.detail
    );
    let tr = r.transition().await;
    let accepted = tr.fence_reboot_at.expect("the accepted reboot is recorded");
    let waited = (f.fenced_at - accepted).num_milliseconds();
    assert!(
        waited >= 1_900,
        "confirmed {waited} ms after our reboot was accepted: {}",
        f.detail
    );
    let reboots = count_calls("RebootDBInstance", &p.db_instance_id).await;
    assert!(
        reboots >= 3,
        "{reboots} reboot calls: ours was refused first"
    );
}

/// A retried fence finds the reboot an earlier attempt had accepted, and P
/// `available`. It did not see the reboot, so it needs RDS's word that P
/// restarted since ("DB instance restarted", RDS-EVENT-0006). Without that
/// word, `available` proves nothing and the fence stays unconfirmed.
#[tokio::test]
async fn a_retried_fence_needs_rds_restart_event_for_a_reboot_it_did_not_see() {
    for restarted in [true, false] {
        let mut plan = unique_plan();
        plan.fence.confirm_s = 3;
        let r = run_in(plan, 5.0).await;
        let p = &r.plan.regions.primary;
        let exec = format!("exec-retry-{restarted}");
        record_approval(&r.store, &exec, &approval(false)).await;
        let accepted = Utc::now();
        r.store
            .begin_fencing(1, &exec, &r.plan.regions.standby.region, accepted)
            .await
            .unwrap();
        r.store
            .record_fence_reboot(1, &exec, accepted)
            .await
            .unwrap();
        if restarted {
            // The earlier attempt's reboot, over before the retry looks.
            let rds = r.aws.rds(&p.region).await;
            rds.reboot_db_instance()
                .db_instance_identifier(&p.db_instance_id)
                .send()
                .await
                .unwrap();
            tokio::time::sleep(std::time::Duration::from_millis(800)).await;
        }
        let state = run_state(&r.plan, json!({ "approval": approval(false) }));
        let f = fence(&state, &exec, &r.store, &r.p_rds().await, Utc::now)
            .await
            .unwrap();
        if restarted {
            assert_eq!(f.outcome, FenceOutcome::Confirmed, "{}", f.detail);
            assert!(
                f.detail.contains("RDS reported it restarted"),
                "{}",
                f.detail
            );
        } else {
            assert_eq!(f.outcome, FenceOutcome::Unconfirmed, "{}", f.detail);
            assert!(f.detail.contains("no sign yet"), "{}", f.detail);
        }
        assert_eq!(
            count_calls("RebootDBInstance", &p.db_instance_id).await,
            usize::from(restarted),
            "the retry never reboots again"
        );
    }
}

/// RDS publishes ReplicaLag -1 when replication stops. A minute's Maximum
/// hides it behind the samples from before it stopped (found by the fault
/// campaign: the re-check let a stopped replica through to the fence); the
/// lag read sees the minute's Minimum too.
#[tokio::test]
async fn replication_stopping_shows_as_lag_minus_one_even_within_the_minute() {
    use handover::adapters::cloudwatch::{CloudWatch, ReplicaLag};
    let r = run(4.0).await;
    let s = &r.plan.regions.standby;
    let cw = CloudWatch::new(&r.aws, &s.region).await;
    let read = || async {
        cw.latest_lag(
            &s.db_instance_id,
            Utc::now(),
            chrono::Duration::minutes(5),
            std::time::Duration::from_secs(5),
        )
        .await
        .unwrap()
        .expect("a sample")
        .seconds
    };
    assert_eq!(read().await, 4.0);
    put_replica_lag(&r.aws, &s.region, &s.db_instance_id, -1.0, Utc::now()).await;
    assert_eq!(read().await, -1.0);
}

/// A task token can be read from the execution history (the TaskScheduled
/// event's parameters), and SendTaskSuccess has no resource-level
/// permission: anyone allowed to call it anywhere in the account could
/// resume a run with a made-up approval naming a listed approver. Fence and
/// promote act only on the decision the run's single-use key records.
#[tokio::test]
async fn fence_and_promote_refuse_an_approval_its_key_does_not_record() {
    use handover::store::approval::{Decision, NewApproval};
    let r = run(5.0).await;
    let before = handover_testkit::world::p_security_groups(&r.aws, &r.plan).await;
    let forged = approval(false); // approve by U0ONCALL01, on the list
    let ask = |exec: &str, data_loss: bool| NewApproval {
        key: handover::approval::new_key().unwrap(),
        task_token: format!("token-of-{exec}"),
        execution: exec.into(),
        incident: exec.into(),
        requested_at: Utc::now(),
        expires_at: Utc::now() + chrono::Duration::minutes(15),
        question: "FAILOVER approval".into(),
        data_loss,
    };
    // exec-none: no key at all. exec-pending: asked, nobody decided.
    r.store
        .put_approval(&ask("exec-pending", false))
        .await
        .unwrap();
    // exec-other: decided by someone else on the list.
    let other = ask("exec-other", false);
    r.store.put_approval(&other).await.unwrap();
    r.store
        .consume_approval(&other.key, Decision::Approve, "U0ONCALL02", Utc::now())
        .await
        .unwrap();
    // exec-rejected: the key records a reject.
    let rejected = ask("exec-rejected", false);
    r.store.put_approval(&rejected).await.unwrap();
    r.store
        .consume_approval(&rejected.key, Decision::Reject, "U0ONCALL01", Utc::now())
        .await
        .unwrap();
    // exec-loss: approved, but the question never asked about data loss.
    record_approval(&r.store, "exec-loss", &approval(false)).await;
    let mut loss = approval(true);
    loss["approver_id"] = forged["approver_id"].clone();
    for (exec, a, says) in [
        ("exec-none", &forged, "no approval key was asked"),
        ("exec-pending", &forged, "records (no decision)"),
        ("exec-other", &forged, "approve by U0ONCALL02"),
        ("exec-rejected", &forged, "reject by U0ONCALL01"),
        ("exec-loss", &loss, "never asked about"),
    ] {
        let state = run_state(&r.plan, json!({ "approval": a }));
        let err = fence(&state, exec, &r.store, &r.p_rds().await, Utc::now)
            .await
            .unwrap_err();
        assert_eq!(err.error_name(), ErrorName::Precondition, "{exec}: {err}");
        assert!(err.to_string().contains(says), "{exec}: {err}");
        assert!(
            err.to_string().contains("nothing is fenced or promoted"),
            "{exec}: {err}"
        );
        let promote_state = with_confirmed_fence(&state);
        let err = r.start(&promote_state, exec).await.unwrap_err();
        assert_eq!(err.error_name(), ErrorName::Precondition, "{exec}: {err}");
        assert!(err.to_string().contains(says), "{exec}: {err}");
    }
    assert_eq!(
        handover_testkit::world::p_security_groups(&r.aws, &r.plan).await,
        before,
        "P was not fenced"
    );
    assert_eq!(r.promote_calls().await, 0);
    // The same approval through its key fences.
    record_approval(&r.store, "exec-real", &forged).await;
    let state = run_state(&r.plan, json!({ "approval": forged }));
    fence(&state, "exec-real", &r.store, &r.p_rds().await, Utc::now)
        .await
        .unwrap();
}

/// RDS shows a replica's replication in DescribeDBInstances' StatusInfos:
/// "read replication", replicating or error, stopped, terminated (RDS API
/// Reference, DBInstanceStatusInfo). For PostgreSQL that is how RDS says
/// replication stopped: its ReplicaLag has no -1.
#[tokio::test]
async fn a_replica_whose_replication_stopped_says_so_in_its_describe() {
    use handover::adapters::rds::DbInspector;
    let aws = aws();
    let plan = unique_plan();
    provision_databases(&aws, &plan).await;
    let s = &plan.regions.standby;
    let rds = Rds::new(&aws, &s.region).await;
    let budget = std::time::Duration::from_secs(5);
    let d = rds
        .describe(&s.db_instance_id, budget)
        .await
        .unwrap()
        .unwrap();
    let shown = d.read_replication.as_ref().map(|r| r.status.as_str());
    assert_eq!(shown, Some("replicating"), "{d:?}");
    assert_eq!(d.replication_stopped(), None);
    let message = "Replication has stopped.";
    let stopped = json!({ &s.db_instance_id: { "status": "error", "message": message } });
    control("replication", stopped).await;
    let d = rds
        .describe(&s.db_instance_id, budget)
        .await
        .unwrap()
        .unwrap();
    control("replication", json!({ &s.db_instance_id: null })).await;
    let why = d
        .replication_stopped()
        .expect("RDS says replication stopped");
    assert!(
        why.contains("read replication error") && why.contains(message),
        "{why}"
    );
    let p = &plan.regions.primary;
    let primary = Rds::new(&aws, &p.region).await;
    let d = primary
        .describe(&p.db_instance_id, budget)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        d.read_replication, None,
        "a primary has no read replication"
    );
}
