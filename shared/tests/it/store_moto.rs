//! The state store against the moto server (real DynamoDB wire protocol).
//! Each safety property here fails if its condition expression is removed.

use chrono::{DateTime, Duration, TimeZone, Utc};
use handover::store::Store;
use handover::store::approval::{
    ConsumeOutcome, Decision, NewApproval, PutApprovalOutcome, ReleaseApprovalOutcome,
};
use handover::store::lock::{AcquireOutcome, ReleaseOutcome};
use handover::store::primary::{InitOutcome, Phase, PromotionOutcome, TransitionOutcome};
use handover::store::probe::TickOutcome;
use handover_testkit::{aws, fresh_store};

fn t(h: u32, m: u32, s: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 30, h, m, s).unwrap()
}

async fn store() -> Store {
    fresh_store(&aws()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_racing_lock_acquisitions_exactly_one_wins() {
    let store = store().await;
    let now = t(14, 12, 0);
    let mut tasks = Vec::new();
    for i in 0..8 {
        let s = store.clone();
        tasks.push(tokio::spawn(async move {
            s.acquire_lock(
                &format!("incident-{i}"),
                &format!("exec-{i}"),
                now,
                Duration::hours(1),
            )
            .await
            .unwrap()
        }));
    }
    let mut won = 0;
    let mut held = 0;
    for task in tasks {
        match task.await.unwrap() {
            AcquireOutcome::Acquired {
                took_over: None, ..
            } => won += 1,
            AcquireOutcome::Held { until, .. } => {
                assert_eq!(until, now + Duration::hours(1));
                held += 1
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!((won, held), (1, 7));
}

#[tokio::test]
async fn the_same_incident_reacquiring_is_already_ours() {
    let store = store().await;
    let now = t(14, 12, 0);
    let first = store
        .acquire_lock("inc-a", "x", now, Duration::hours(1))
        .await
        .unwrap();
    assert!(matches!(first, AcquireOutcome::Acquired { .. }));
    let again = store
        .acquire_lock("inc-a", "x", now + Duration::minutes(1), Duration::hours(1))
        .await
        .unwrap();
    assert!(
        matches!(again, AcquireOutcome::AlreadyOurs { .. }),
        "{again:?}"
    );
    let other = store
        .acquire_lock("inc-b", "y", now + Duration::minutes(1), Duration::hours(1))
        .await
        .unwrap();
    assert_eq!(
        other,
        AcquireOutcome::Held {
            by: "inc-a".into(),
            until: now + Duration::hours(1)
        }
    );
}

#[tokio::test]
async fn an_expired_lease_can_be_taken_over() {
    let store = store().await;
    let now = t(14, 0, 0);
    store
        .acquire_lock("inc-old", "x", now, Duration::minutes(10))
        .await
        .unwrap();
    let before = store
        .acquire_lock(
            "inc-new",
            "y",
            now + Duration::minutes(9),
            Duration::minutes(10),
        )
        .await
        .unwrap();
    assert!(matches!(before, AcquireOutcome::Held { .. }), "{before:?}");
    let after = store
        .acquire_lock(
            "inc-new",
            "y",
            now + Duration::minutes(11),
            Duration::minutes(10),
        )
        .await
        .unwrap();
    assert_eq!(
        after,
        AcquireOutcome::Acquired {
            lease_until: now + Duration::minutes(21),
            took_over: Some("inc-old".into())
        }
    );
}

#[tokio::test]
async fn the_cooldown_blocks_reacquisition() {
    let store = store().await;
    let now = t(14, 0, 0);
    store
        .acquire_lock("inc-1", "x", now, Duration::hours(1))
        .await
        .unwrap();
    let released = store
        .release_lock("inc-1", now + Duration::minutes(20), Duration::minutes(30))
        .await
        .unwrap();
    assert_eq!(
        released,
        ReleaseOutcome::Released {
            cooldown_until: now + Duration::minutes(50)
        }
    );
    let during = store
        .acquire_lock(
            "inc-2",
            "y",
            now + Duration::minutes(40),
            Duration::hours(1),
        )
        .await
        .unwrap();
    assert_eq!(
        during,
        AcquireOutcome::CoolingDown {
            until: now + Duration::minutes(50),
            after: Some("inc-1".into())
        }
    );
    let after = store
        .acquire_lock(
            "inc-2",
            "y",
            now + Duration::minutes(51),
            Duration::hours(1),
        )
        .await
        .unwrap();
    assert!(
        matches!(
            after,
            AcquireOutcome::Acquired {
                took_over: None,
                ..
            }
        ),
        "{after:?}"
    );
}

#[tokio::test]
async fn only_the_holder_releases() {
    let store = store().await;
    let now = t(14, 0, 0);
    store
        .acquire_lock("inc-1", "x", now, Duration::hours(1))
        .await
        .unwrap();
    let wrong = store
        .release_lock("inc-2", now, Duration::minutes(30))
        .await
        .unwrap();
    assert_eq!(
        wrong,
        ReleaseOutcome::NotHolder {
            holder: Some("inc-1".into())
        }
    );
    assert_eq!(
        store.lock_state().await.unwrap().unwrap().holder.as_deref(),
        Some("inc-1")
    );
}

async fn primary_at_epoch_1(store: &Store) {
    let out = store
        .init_primary("ap-northeast-2", "shop-db", t(13, 0, 0))
        .await
        .unwrap();
    assert!(matches!(out, InitOutcome::Created(_)));
}

#[tokio::test]
async fn init_never_overwrites_the_primary_record() {
    let store = store().await;
    primary_at_epoch_1(&store).await;
    let again = store
        .init_primary("ap-northeast-1", "other", t(13, 5, 0))
        .await
        .unwrap();
    match again {
        InitOutcome::Exists(rec) => assert_eq!(rec.region, "ap-northeast-2"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_promotion_with_a_stale_epoch_is_refused() {
    let store = store().await;
    primary_at_epoch_1(&store).await;
    let now = t(14, 19, 0);
    assert!(matches!(
        store
            .begin_fencing(1, "exec-a", "ap-northeast-1", now)
            .await
            .unwrap(),
        TransitionOutcome::Claimed(_)
    ));
    assert!(matches!(
        store
            .claim_promotion(1, "exec-a", (5.0, now), now)
            .await
            .unwrap(),
        TransitionOutcome::Claimed(_)
    ));
    let done = store
        .complete_promotion(1, "exec-a", "ap-northeast-1", "shop-db-replica", now)
        .await
        .unwrap();
    match done {
        PromotionOutcome::Promoted(rec) => {
            assert_eq!(rec.epoch, 2);
            assert_eq!(rec.region, "ap-northeast-1");
            assert!(rec.transition.is_none());
        }
        other => panic!("{other:?}"),
    }
    // A second execution that started on epoch 1 is refused at every step.
    assert_eq!(
        store
            .begin_fencing(1, "exec-b", "ap-northeast-1", now)
            .await
            .unwrap(),
        TransitionOutcome::EpochMoved { now: 2 }
    );
    assert_eq!(
        store
            .claim_promotion(1, "exec-b", (5.0, now), now)
            .await
            .unwrap(),
        TransitionOutcome::EpochMoved { now: 2 }
    );
    assert_eq!(
        store
            .complete_promotion(1, "exec-b", "ap-northeast-1", "x", now)
            .await
            .unwrap(),
        PromotionOutcome::EpochMoved { now: 2 }
    );
    // The winner retrying is told it already promoted, and nothing moves.
    assert!(matches!(
        store.complete_promotion(1, "exec-a", "ap-northeast-1", "shop-db-replica", now).await.unwrap(),
        PromotionOutcome::AlreadyPromoted(rec) if rec.epoch == 2
    ));
    assert_eq!(store.primary().await.unwrap().unwrap().epoch, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_executions_on_one_epoch_only_one_holds_the_transition() {
    let store = store().await;
    primary_at_epoch_1(&store).await;
    let mut tasks = Vec::new();
    for i in 0..6 {
        let s = store.clone();
        tasks.push(tokio::spawn(async move {
            s.begin_fencing(1, &format!("exec-{i}"), "ap-northeast-1", t(14, 19, 0))
                .await
                .unwrap()
        }));
    }
    let mut claimed = Vec::new();
    for task in tasks {
        match task.await.unwrap() {
            TransitionOutcome::Claimed(rec) => claimed.push(rec.transition.unwrap().execution),
            TransitionOutcome::Busy { .. } => {}
            other => panic!("{other:?}"),
        }
    }
    // Claimed is also returned to a holder re-asking; each task asks once, so exactly one.
    assert_eq!(claimed.len(), 1, "{claimed:?}");
    let holder = &claimed[0];
    for i in 0..6 {
        let exec = format!("exec-{i}");
        let out = store
            .claim_promotion(1, &exec, (5.0, t(14, 0, 0)), t(14, 20, 0))
            .await
            .unwrap();
        if &exec == holder {
            assert!(
                matches!(out, TransitionOutcome::Claimed(ref r) if r.transition.as_ref().unwrap().phase == Phase::Promoting)
            );
        } else {
            assert_eq!(
                out,
                TransitionOutcome::Busy {
                    execution: holder.clone()
                }
            );
        }
    }
}

#[tokio::test]
async fn fencing_twice_in_one_execution_changes_nothing() {
    let store = store().await;
    primary_at_epoch_1(&store).await;
    let TransitionOutcome::Claimed(first) = store
        .begin_fencing(1, "exec-a", "ap-northeast-1", t(14, 0, 0))
        .await
        .unwrap()
    else {
        panic!()
    };
    store
        .claim_promotion(1, "exec-a", (5.0, t(14, 0, 30)), t(14, 1, 0))
        .await
        .unwrap();
    let TransitionOutcome::Claimed(second) = store
        .begin_fencing(1, "exec-a", "ap-northeast-1", t(14, 2, 0))
        .await
        .unwrap()
    else {
        panic!()
    };
    let (a, b) = (first.transition.unwrap(), second.transition.unwrap());
    assert_eq!(a.since, b.since);
    assert_eq!(
        b.phase,
        Phase::Promoting,
        "a retried fence must not move the phase back"
    );
}

#[tokio::test]
async fn the_promotion_call_is_marked_once() {
    let store = store().await;
    primary_at_epoch_1(&store).await;
    store
        .begin_fencing(1, "exec-a", "ap-northeast-1", t(14, 0, 0))
        .await
        .unwrap();
    store
        .claim_promotion(1, "exec-a", (5.0, t(14, 0, 30)), t(14, 1, 0))
        .await
        .unwrap();
    store
        .mark_promote_called(1, "exec-a", t(14, 1, 5))
        .await
        .unwrap();
    store
        .mark_promote_called(1, "exec-a", t(14, 1, 9))
        .await
        .unwrap();
    let TransitionOutcome::Claimed(rec) = store
        .claim_promotion(1, "exec-a", (5.0, t(14, 0, 30)), t(14, 2, 0))
        .await
        .unwrap()
    else {
        panic!()
    };
    let tr = rec.transition.unwrap();
    assert_eq!(tr.promote_called_at, Some(t(14, 1, 5)));
    assert_eq!(tr.promote_claimed_at, Some(t(14, 1, 0)));
}

fn approval(key: &str, expires_at: DateTime<Utc>) -> NewApproval {
    NewApproval {
        key: key.into(),
        task_token: format!("token-for-{key}"),
        execution: "arn:aws:states:ap-northeast-1:123456789012:execution:handover:inc-1".into(),
        incident: "inc-1".into(),
        requested_at: t(14, 13, 0),
        expires_at,
        question: "FAILOVER approval: shop — inc-1".into(),
        data_loss: false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_approval_key_cannot_be_consumed_twice() {
    let store = store().await;
    assert_eq!(
        store
            .put_approval(&approval("k1", t(14, 28, 0)))
            .await
            .unwrap(),
        PutApprovalOutcome::Stored
    );
    assert_eq!(
        store
            .put_approval(&approval("k1", t(14, 28, 0)))
            .await
            .unwrap(),
        PutApprovalOutcome::KeyExists
    );
    let mut tasks = Vec::new();
    for i in 0..6 {
        let s = store.clone();
        tasks.push(tokio::spawn(async move {
            s.consume_approval("k1", Decision::Approve, &format!("U{i}"), t(14, 15, 0))
                .await
                .unwrap()
        }));
    }
    let mut consumed = 0;
    for task in tasks {
        match task.await.unwrap() {
            ConsumeOutcome::Consumed(c) => {
                assert_eq!(c.task_token, "token-for-k1");
                consumed += 1
            }
            ConsumeOutcome::AlreadyDecided {
                decision: Decision::Approve,
                at,
                ..
            } => assert_eq!(at, t(14, 15, 0)),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(consumed, 1);
    // A later reject is told who decided first.
    match store
        .consume_approval("k1", Decision::Reject, "U9", t(14, 16, 0))
        .await
        .unwrap()
    {
        ConsumeOutcome::AlreadyDecided { decision, .. } => assert_eq!(decision, Decision::Approve),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn only_the_exact_consumption_is_released() {
    let store = store().await;
    store
        .put_approval(&approval("k3", t(14, 28, 0)))
        .await
        .unwrap();
    let at = t(14, 15, 0);
    assert!(matches!(
        store
            .consume_approval("k3", Decision::Approve, "U1", at)
            .await
            .unwrap(),
        ConsumeOutcome::Consumed(_)
    ));
    // Another user, or the same user at another time, cannot undo it.
    for (user, when) in [("U2", at), ("U1", t(14, 15, 1))] {
        assert_eq!(
            store.release_approval("k3", user, when).await.unwrap(),
            ReleaseApprovalOutcome::NotOurs
        );
    }
    assert_eq!(
        store.release_approval("k3", "U1", at).await.unwrap(),
        ReleaseApprovalOutcome::Released
    );
    // Released once: a second release changes nothing; the key is pending again.
    assert_eq!(
        store.release_approval("k3", "U1", at).await.unwrap(),
        ReleaseApprovalOutcome::NotOurs
    );
    assert!(matches!(
        store
            .consume_approval("k3", Decision::Reject, "U2", t(14, 16, 0))
            .await
            .unwrap(),
        ConsumeOutcome::Consumed(_)
    ));
    assert_eq!(
        store.release_approval("nope", "U1", at).await.unwrap(),
        ReleaseApprovalOutcome::NotOurs
    );
}

#[tokio::test]
async fn an_expired_key_is_refused() {
    let store = store().await;
    store
        .put_approval(&approval("k2", t(14, 28, 0)))
        .await
        .unwrap();
    assert_eq!(
        store
            .consume_approval("k2", Decision::Approve, "U1", t(14, 28, 0))
            .await
            .unwrap(),
        ConsumeOutcome::Expired { at: t(14, 28, 0) }
    );
    assert_eq!(
        store
            .consume_approval("nope", Decision::Approve, "U1", t(14, 20, 0))
            .await
            .unwrap(),
        ConsumeOutcome::Unknown
    );
}

#[tokio::test]
async fn probe_ticks_count_once_and_reset() {
    let store = store().await;
    let r = "ap-northeast-2";
    for (i, m) in [1u32, 2, 3].iter().enumerate() {
        match store
            .record_tick(r, t(14, *m, 0), true, format!("{{\"tick\":{i}}}"))
            .await
            .unwrap()
        {
            TickOutcome::Recorded(run) => {
                assert_eq!(run.consecutive_failures, i as u32 + 1);
                assert_eq!(run.t0, Some(t(14, 1, 0)));
            }
            other => panic!("{other:?}"),
        }
    }
    // A retried tick does not count again.
    assert!(matches!(
        store.record_tick(r, t(14, 3, 0), true, "{}".into()).await.unwrap(),
        TickOutcome::Stale(run) if run.consecutive_failures == 3
    ));
    assert!(store.reset_probe(r, t(14, 1, 0)).await.unwrap());
    assert!(
        !store.reset_probe(r, t(14, 1, 0)).await.unwrap(),
        "reset is conditional on T0"
    );
    let run = store.probe_run(r).await.unwrap();
    assert_eq!((run.consecutive_failures, run.t0), (0, None));
}

#[tokio::test]
async fn the_first_rpo_sample_and_fence_groups_are_kept_on_retry() {
    let store = store().await;
    primary_at_epoch_1(&store).await;
    store
        .begin_fencing(1, "exec-a", "ap-northeast-1", t(14, 0, 0))
        .await
        .unwrap();
    let groups = vec!["sg-app".to_string(), "sg-admin".to_string()];
    store
        .record_fence_previous(1, "exec-a", &groups, t(14, 0, 1))
        .await
        .unwrap();
    store
        .record_fence_previous(1, "exec-a", &["sg-fence".to_string()], t(14, 0, 2))
        .await
        .unwrap();
    store
        .record_fence_outcome(1, "exec-a", "confirmed", t(14, 0, 3))
        .await
        .unwrap();
    store
        .claim_promotion(1, "exec-a", (126.0, t(14, 1, 0)), t(14, 1, 0))
        .await
        .unwrap();
    let TransitionOutcome::Claimed(rec) = store
        .claim_promotion(1, "exec-a", (7.0, t(14, 2, 0)), t(14, 2, 0))
        .await
        .unwrap()
    else {
        panic!()
    };
    let tr = rec.transition.unwrap();
    assert_eq!(tr.fence_previous_groups, Some(groups));
    assert_eq!(tr.fence, Some(("confirmed".to_string(), t(14, 0, 3))));
    assert_eq!(tr.rpo, Some((126.0, t(14, 1, 0))));
    // Another execution cannot record anything.
    assert_eq!(
        store
            .record_fence_outcome(1, "exec-b", "confirmed", t(14, 3, 0))
            .await
            .unwrap(),
        TransitionOutcome::Busy {
            execution: "exec-a".into()
        }
    );
}

fn readiness(
    at: DateTime<Utc>,
    lag_verdict: handover::readiness::Verdict,
) -> handover::readiness::Readiness {
    use handover::readiness::{Check, Readiness};
    let c = |id: &str, verdict, observed: &str| Check {
        id: id.into(),
        verdict,
        observed: observed.into(),
        expected: "as the plan needs".into(),
        fix: String::new(),
    };
    Readiness {
        at,
        checks: vec![
            c(
                "rds.p_exists",
                handover::readiness::Verdict::Pass,
                "shop-db is available",
            ),
            c(
                "rds.replica_lag",
                lag_verdict,
                &format!("ReplicaLag at {at}"),
            ),
        ],
    }
}

/// A readiness change is posted once: the first result and each change of
/// verdicts are `Changed` exactly once, even for evaluations racing with
/// the same new verdicts; the same verdicts again (fresher values) are
/// `Unchanged` and only refresh what `status` shows.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_readiness_change_is_announced_once_and_the_same_verdicts_never() {
    use handover::readiness::Verdict::{Fail, Pass};
    use handover::store::readiness::ReadinessChange;
    let store = store().await;
    assert!(store.readiness().await.unwrap().is_none());
    let first = store
        .record_readiness(&readiness(t(12, 0, 0), Pass), t(12, 0, 0))
        .await
        .unwrap();
    assert_eq!(first, ReadinessChange::Changed { previous: None });
    // Claimed moments ago and not posted yet: nobody else announces it.
    let racing = store
        .record_readiness(&readiness(t(12, 1, 0), Pass), t(12, 1, 0))
        .await
        .unwrap();
    assert_eq!(racing, ReadinessChange::Unchanged);
    // Never marked posted (the evaluation died, or reached nobody): the
    // next evaluation announces it again.
    let again = store
        .record_readiness(&readiness(t(12, 10, 0), Pass), t(12, 10, 0))
        .await
        .unwrap();
    assert_eq!(again, ReadinessChange::Changed { previous: None });
    store
        .mark_readiness_posted(&readiness(t(12, 10, 0), Pass))
        .await
        .unwrap();
    let same = store
        .record_readiness(&readiness(t(12, 30, 0), Pass), t(12, 30, 0))
        .await
        .unwrap();
    assert_eq!(same, ReadinessChange::Unchanged);
    let stored = store.readiness().await.unwrap().unwrap();
    assert_eq!(
        stored.readiness.at,
        t(12, 30, 0),
        "the values are refreshed"
    );
    // Eight evaluations race with the same new verdicts: one announces.
    let mut tasks = Vec::new();
    for i in 0..8 {
        let s = store.clone();
        tasks.push(tokio::spawn(async move {
            s.record_readiness(&readiness(t(13, 0, i), Fail), t(13, 0, i))
                .await
                .unwrap()
        }));
    }
    let mut changed = 0;
    for t in tasks {
        if let ReadinessChange::Changed { previous } = t.await.unwrap() {
            assert_eq!(
                previous.map(|p| p.summary()).as_deref(),
                Some("readiness: 0 fail, 0 warn, 2 pass")
            );
            changed += 1;
        }
    }
    assert_eq!(changed, 1, "a change is posted once");
}

#[tokio::test]
async fn an_approval_is_found_by_key_execution_or_incident_without_its_token() {
    use handover::store::approval::ApprovalSelector;
    let store = store().await;
    let a = approval("k5", t(14, 28, 0));
    store.put_approval(&a).await.unwrap();
    for which in [
        ApprovalSelector::Key("k5".into()),
        ApprovalSelector::Execution(a.execution.clone()),
        ApprovalSelector::Incident(a.incident.clone()),
    ] {
        let r = store.approval(&which).await.unwrap().expect("found");
        assert_eq!(r.key, "k5");
        assert_eq!(r.question, a.question);
        assert_eq!(r.decided, None);
        assert!(!format!("{r:?}").contains("token-for-k5"), "{r:?}");
    }
    // A later key for the same execution (a retried request) is the one found.
    let mut again = approval("k6", t(14, 29, 0));
    again.data_loss = true;
    store.put_approval(&again).await.unwrap();
    let r = store
        .approval(&ApprovalSelector::Execution(a.execution.clone()))
        .await
        .unwrap()
        .unwrap();
    assert_eq!((r.key.as_str(), r.data_loss), ("k6", true));
    store
        .consume_approval("k6", Decision::Reject, "U1", t(14, 15, 0))
        .await
        .unwrap();
    let r = store
        .approval(&ApprovalSelector::Incident(a.incident.clone()))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        r.decided,
        Some((Decision::Reject, "U1".to_owned(), t(14, 15, 0)))
    );
    for nothing in [
        ApprovalSelector::Key("nope".into()),
        ApprovalSelector::Execution("arn:aws:states:x:1:execution:y:z".into()),
        ApprovalSelector::Incident("inc-none".into()),
    ] {
        assert_eq!(store.approval(&nothing).await.unwrap(), None);
    }
}

/// `handover failback` keeps a short lease alive while it prepares and
/// extends it to the run's before the start: a renewal extends only the
/// holder's live lease, and never shortens a longer one.
#[tokio::test]
async fn a_renewal_extends_only_the_holders_live_lease_and_never_shortens_it() {
    let store = store().await;
    let now = t(15, 0, 0);
    store
        .acquire_lock("failback-1", "arn:x", now, Duration::minutes(10))
        .await
        .unwrap();
    let until = |s: &Store| {
        let s = s.clone();
        async move { s.lock_state().await.unwrap().unwrap().lease_until.unwrap() }
    };
    // Extended.
    assert!(
        store
            .renew_lock(
                "failback-1",
                now + Duration::minutes(2),
                Duration::minutes(10)
            )
            .await
            .unwrap()
    );
    assert_eq!(until(&store).await, now + Duration::minutes(12));
    // To the run's lease, then a late short renewal keeps the longer one.
    assert!(
        store
            .renew_lock(
                "failback-1",
                now + Duration::minutes(3),
                Duration::minutes(60)
            )
            .await
            .unwrap()
    );
    assert!(
        store
            .renew_lock(
                "failback-1",
                now + Duration::minutes(4),
                Duration::minutes(10)
            )
            .await
            .unwrap()
    );
    assert_eq!(until(&store).await, now + Duration::minutes(63));
    // Another incident cannot renew it; an expired lease cannot be renewed.
    assert!(
        !store
            .renew_lock("other", now + Duration::minutes(5), Duration::minutes(10))
            .await
            .unwrap()
    );
    assert!(
        !store
            .renew_lock(
                "failback-1",
                now + Duration::minutes(64),
                Duration::minutes(10)
            )
            .await
            .unwrap()
    );
    assert_eq!(until(&store).await, now + Duration::minutes(63));
}

/// audit's sweep keeps a running run's lock, lapsed or not, but never takes
/// back one released meanwhile (the run ended) or taken by another
/// incident: one conditional write on the holder.
#[tokio::test]
async fn the_sweep_keeps_only_a_lock_the_run_still_holds() {
    use handover::store::lock::KeepOutcome;
    let store = store().await;
    let now = t(15, 0, 0);
    let state = |s: &Store| {
        let s = s.clone();
        async move { s.lock_state().await.unwrap().unwrap() }
    };
    store
        .acquire_lock("run-1", "arn:x", now, Duration::minutes(10))
        .await
        .unwrap();
    // Live: kept for the lease asked; a shorter one keeps the longer.
    let kept = store.keep_lock("run-1", now + Duration::minutes(1), Duration::minutes(60));
    assert_eq!(kept.await.unwrap(), KeepOutcome::Kept { lapsed: false });
    let kept = store.keep_lock("run-1", now + Duration::minutes(2), Duration::minutes(10));
    assert_eq!(kept.await.unwrap(), KeepOutcome::Kept { lapsed: false });
    assert_eq!(
        state(&store).await.lease_until,
        Some(now + Duration::minutes(61))
    );
    // Lapsed, still its holder: taken back.
    let late = now + Duration::minutes(70);
    let kept = store.keep_lock("run-1", late, Duration::minutes(60));
    assert_eq!(kept.await.unwrap(), KeepOutcome::Kept { lapsed: true });
    assert_eq!(
        state(&store).await.lease_until,
        Some(late + Duration::minutes(60))
    );
    // Released without a cooldown (`give_back`, or the run ended between
    // the sweep's describe and its write): not taken back.
    store
        .release_lock("run-1", late, Duration::zero())
        .await
        .unwrap();
    let kept = store.keep_lock("run-1", late + Duration::minutes(1), Duration::minutes(60));
    assert_eq!(kept.await.unwrap(), KeepOutcome::NotHolder { holder: None });
    let lock = state(&store).await;
    assert_eq!((lock.holder, lock.lease_until), (None, None));
    // Another incident's: not taken.
    let after = late + Duration::minutes(2);
    store
        .acquire_lock("run-2", "arn:y", after, Duration::minutes(10))
        .await
        .unwrap();
    let kept = store.keep_lock("run-1", after, Duration::minutes(60));
    assert_eq!(
        kept.await.unwrap(),
        KeepOutcome::NotHolder {
            holder: Some("run-2".into())
        }
    );
    assert_eq!(
        state(&store).await.lease_until,
        Some(after + Duration::minutes(10))
    );
}

/// Fence and promote act only on what the key records: a decision known to
/// have reached the run (a re-send delivered it) is never given back, even
/// by the exact consumption that first sent it.
#[tokio::test]
async fn a_delivered_decision_is_never_released() {
    let store = store().await;
    store
        .put_approval(&approval("k9", t(14, 28, 0)))
        .await
        .unwrap();
    let at = t(14, 15, 0);
    store
        .consume_approval("k9", Decision::Approve, "U1", at)
        .await
        .unwrap();
    store
        .mark_approval_delivered("k9", "U1", "U1", t(14, 15, 2))
        .await
        .unwrap();
    assert_eq!(
        store.release_approval("k9", "U1", at).await.unwrap(),
        ReleaseApprovalOutcome::NotOurs
    );
    let rec = store
        .approval(&handover::store::approval::ApprovalSelector::Key(
            "k9".into(),
        ))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        rec.decided.map(|(d, by, _)| (d, by)),
        Some((Decision::Approve, "U1".to_owned()))
    );
}
