//! Switch: make clients and writers use S.
//!
//! The writer endpoint moves first (a private CNAME or an SSM parameter),
//! then traffic, by the plan's mode. Each mode is a lever Handover holds
//! until failback, so traffic cannot drift back to a fenced P:
//! - `routing_control`: ARC routing controls, S on then P off. The cluster
//!   endpoints are ARC's data plane: AWS's recommended failover lever.
//! - `health_check_failover`: P's failover-record health check is set
//!   `Disabled` + `Inverted`, which Route 53 reads as unhealthy whatever P's
//!   endpoint does (Route 53 API Reference, HealthCheckConfig). This is one
//!   control-plane call (UpdateHealthCheck, us-east-1). Route 53 may already
//!   answer S on its own, since P's check fails; the pin keeps it there once
//!   P's endpoint answers again. Reading the settings first is only for the
//!   record; if that read fails, the pin still goes ahead.
//! - `record_upsert`: the public record is UPSERTed to S (control plane).
//!
//! Every value is recorded in the state store before it is replaced
//! (`switch_previous`), for failback and the report, and a re-run reports it.

use super::StepError;
use crate::adapters::traffic::{HealthCheckControl, Parameters, RecordSets, RoutingControls};
use crate::execution::{Change, ExecutionState, SwitchResult};
use crate::plan::{SwitchMode, WriterEndpoint};
use crate::store::Store;
use chrono::{DateTime, Utc};
use std::time::Duration;
use tracing::info;
/// The capabilities switch uses.
pub struct SwitchDeps<'a, C, R, A, P> {
    /// Health-check settings (the traffic lever of `health_check_failover`).
    pub checks: &'a C,
    /// Record sets (public and private zones).
    pub records: &'a R,
    /// ARC routing controls.
    pub arc: &'a A,
    /// SSM parameters in S.
    pub params: &'a P,
    /// The state store: each value is recorded there before it is replaced.
    pub store: &'a Store,
}

/// The settings that pin failover routing to S: a `Disabled` check is
/// always healthy and `Inverted` flips that, so P's check is unhealthy
/// whatever P's endpoint does, until failback puts them back.
const PINNED: (bool, bool) = (true, true);

/// Switch traffic and writers to S: the writer first (every second it points
/// at a read-only replica is a second of failed writes), then traffic. Both
/// moves are attempted whatever happens to the other; each value is recorded
/// in the state store before it is replaced, so a re-run (after a timeout,
/// or a crash) reports what failback must restore. Route 53 changes are
/// then waited for together, until INSYNC or `timings.dns_sync_s`.
pub async fn switch<C, R, A, P>(
    state: &ExecutionState,
    execution: &str,
    deps: &SwitchDeps<'_, C, R, A, P>,
    now: impl Fn() -> DateTime<Utc>,
) -> Result<SwitchResult, StepError>
where
    C: HealthCheckControl,
    R: RecordSets,
    A: RoutingControls,
    P: Parameters,
{
    let plan = &state.input.plan;
    let promotion: crate::execution::PromotionResult = state
        .require("promotion")
        .map_err(|e| StepError::Precondition(e.message))?;
    let epoch = promotion.epoch.ok_or_else(|| {
        StepError::Precondition("switch runs only after the promotion completed".into())
    })?;
    let ledger = Ledger {
        store: deps.store,
        epoch,
        execution,
        now: &now,
    };
    let started = tokio::time::Instant::now();
    let mut changes = Vec::new();
    let mut pending = Vec::new();
    let writer = move_writer(plan, deps, &ledger, &mut changes, &mut pending).await;
    let traffic = match &state.input.failback {
        // The switch back: P's check gets the settings it had before the
        // failover pinned it (the plan is reversed: P is `standby`).
        Some(fb) if plan.dns.switch_mode == SwitchMode::HealthCheckFailover => {
            unpin(plan, fb, deps, &ledger, &mut changes).await
        }
        _ => move_traffic(plan, deps, &ledger, &mut changes, &mut pending).await,
    };
    match (writer, traffic) {
        (Ok(()), Ok(())) => {}
        (w, t) => {
            for (what, r) in [("the writer endpoint", &w), ("traffic", &t)] {
                if let Err(e) = r {
                    tracing::warn!(error = %crate::error::chain(e), "switch: {what} did not move");
                }
            }
            return Err(w.err().or(t.err()).expect("one of them failed"));
        }
    }
    let budget = Duration::from_millis(plan.timings.call_timeout_ms);
    let wait = Duration::from_secs(plan.timings.dns_sync_s);
    let until = (tokio::time::Instant::now() + wait).min(started + WAIT_ENDS_BY);
    let unsynced = wait_synced(deps.records, pending, until, budget).await;
    let switched_at = now();
    info!(incident = %state.input.incident_id, mode = ?plan.dns.switch_mode, changes = changes.len(), unsynced = unsynced.len(), "traffic and writers point at S");
    Ok(SwitchResult {
        mode: plan.dns.switch_mode,
        switched_at,
        changes,
        unsynced,
    })
}

/// How often switch asks Route 53 whether a change is INSYNC.
const SYNC_POLL: Duration = Duration::from_secs(2);

/// The wait for INSYNC ends this long after switch started, whatever
/// `timings.dns_sync_s` says: switch's Lambda timeout is 120 s. The calls
/// before the wait have no shared budget: each has its own bound.
const WAIT_ENDS_BY: Duration = Duration::from_secs(100);

/// A Route 53 change switch waits for: what it moved, and the change's ID.
type Pending = (String, String);

/// Wait until Route 53 says each pending change is INSYNC, until `until`,
/// all of them at once. What is not confirmed then is returned, not failed:
/// Route 53 accepted the change and applies it (API Reference, GetChange).
/// Until then, resolvers may still answer the old value.
async fn wait_synced<R: RecordSets>(
    records: &R,
    pending: Vec<Pending>,
    until: tokio::time::Instant,
    budget: Duration,
) -> Vec<String> {
    // Each change not yet INSYNC, with why, when it is not Route 53's
    // PENDING: not asked yet, or the last error asking.
    let not_asked = || Some("not asked before the wait ended".to_owned());
    let mut ids: Vec<(String, String, Option<String>)> = pending
        .into_iter()
        .map(|(w, id)| (w, id, not_asked()))
        .collect();
    let mut unconfirmed = Vec::new();
    loop {
        let mut still = Vec::new();
        for (what, id, last) in ids {
            let left = until.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                still.push((what, id, last));
                continue;
            }
            match records.synced(&id, budget.min(left)).await {
                Ok(true) => {}
                Ok(false) => still.push((what, id, None)),
                Err(e) if e.is_transient() => {
                    let e = format!("GetChange did not answer: {}", crate::error::chain(&e));
                    still.push((what, id, Some(e)))
                }
                Err(e) => {
                    unconfirmed.push(format!("{what}: change {id}: {}", crate::error::chain(&e)))
                }
            }
        }
        ids = still;
        let now = tokio::time::Instant::now();
        if ids.is_empty() || now >= until {
            break;
        }
        tokio::time::sleep(SYNC_POLL.min(until - now)).await;
    }
    unconfirmed.extend(ids.into_iter().map(|(what, id, last)| match last {
        Some(why) => format!("{what}: change {id} not confirmed: {why}"),
        None => format!("{what}: change {id} still PENDING"),
    }));
    for u in &unconfirmed {
        tracing::warn!(change = %u, "Route 53 has not confirmed this change: it is applied, and resolvers may still answer the old value");
    }
    unconfirmed
}

/// Where switch records each value before replacing it.
struct Ledger<'a, N> {
    store: &'a Store,
    epoch: i64,
    execution: &'a str,
    now: &'a N,
}

impl<N: Fn() -> DateTime<Utc>> Ledger<'_, N> {
    /// Record `current` as what `what` was before the switch (first value
    /// kept) and return the value on record.
    ///
    /// Best effort: S is promoted, and a store that cannot write must not
    /// keep the writer on P. The value is still in the step's result.
    async fn before(&self, what: &str, current: Option<&str>) -> Result<Option<String>, StepError> {
        match self
            .store
            .record_switch_previous(self.epoch, self.execution, what, current, (self.now)())
            .await
        {
            Ok(Some(on_record)) => Ok(on_record),
            Ok(None) => Err(StepError::Refused(format!(
                "the primary record is no longer epoch {} of this execution: another run moved it",
                self.epoch
            ))),
            Err(e) => {
                tracing::warn!(what, error = %crate::error::chain(&e), "could not record the value before the switch; it is in the step's result only");
                Ok(current.map(str::to_owned))
            }
        }
    }

    /// `what` is already at `target`: report the change with the value on
    /// record, if an earlier attempt of this run made it. True when this
    /// run made it, or when the record cannot be read to tell.
    async fn already(
        &self,
        what: &str,
        target: &str,
        changes: &mut Vec<Change>,
    ) -> Result<bool, StepError> {
        let rec = match self.store.primary().await {
            Ok(rec) => rec,
            Err(e) => {
                tracing::warn!(what, error = %crate::error::chain(&e), "could not read the value on record; the change is made");
                return Ok(true);
            }
        };
        if let Some(previous) = rec
            .filter(|r| {
                r.epoch == self.epoch && r.last_execution.as_deref() == Some(self.execution)
            })
            .and_then(|r| r.switch_previous.get(what).cloned())
        {
            changes.push(Change {
                what: what.to_owned(),
                previous,
                now: target.to_owned(),
            });
            return Ok(true);
        }
        Ok(false)
    }
}

async fn move_writer<C, R, A, P, N>(
    plan: &crate::plan::Plan,
    deps: &SwitchDeps<'_, C, R, A, P>,
    ledger: &Ledger<'_, N>,
    changes: &mut Vec<Change>,
    pending: &mut Vec<Pending>,
) -> Result<(), StepError>
where
    R: RecordSets,
    P: Parameters,
    N: Fn() -> DateTime<Utc>,
{
    let budget = Duration::from_millis(plan.timings.call_timeout_ms);
    match &plan.dns.writer {
        WriterEndpoint::Cname {
            hosted_zone_id,
            name,
            standby_target,
        } => {
            let what = format!("route53:{hosted_zone_id}:{name} CNAME (writer)");
            let cname = (
                hosted_zone_id.as_str(),
                name.as_str(),
                standby_target.as_str(),
            );
            move_cname(
                deps.records,
                ledger,
                what,
                cname,
                budget,
                (changes, pending),
            )
            .await?;
        }
        WriterEndpoint::SsmParameter {
            name,
            standby_value,
        } => {
            let what = format!("ssm:{name} (writer)");
            let current = deps.params.get(name).await?;
            if current.as_deref() == Some(standby_value.as_str()) {
                return ledger
                    .already(&what, standby_value, changes)
                    .await
                    .map(|_| ());
            }
            let previous = ledger.before(&what, current.as_deref()).await?;
            deps.params.put(name, standby_value).await?;
            changes.push(Change {
                what,
                previous,
                now: standby_value.clone(),
            });
        }
    }
    Ok(())
}

async fn move_traffic<C, R, A, P, N>(
    plan: &crate::plan::Plan,
    deps: &SwitchDeps<'_, C, R, A, P>,
    ledger: &Ledger<'_, N>,
    changes: &mut Vec<Change>,
    pending: &mut Vec<Pending>,
) -> Result<(), StepError>
where
    C: HealthCheckControl,
    R: RecordSets,
    A: RoutingControls,
    N: Fn() -> DateTime<Utc>,
{
    let dns = &plan.dns;
    let budget = Duration::from_millis(plan.timings.call_timeout_ms);
    match dns.switch_mode {
        SwitchMode::HealthCheckFailover => {
            // Route 53 may already answer S (P's check failing), but only for
            // as long as P's endpoint stays down: when it answers again,
            // failover routing would send users back to a fenced P. So
            // Handover always pins: P's check Disabled + Inverted.
            let id = &plan.regions.primary.health_check_id;
            let what = check_lever(id);
            let shown = |(i, d): (bool, bool)| format!("inverted={i}, disabled={d}");
            // Reading the settings is for the record only: when it fails,
            // pin anyway and record them as unknown.
            let current = match deps.checks.flags(id, budget).await {
                Ok(f) => Some(f),
                Err(e) => {
                    tracing::warn!(error = %crate::error::chain(&e), "P's health-check settings unreadable; pinning anyway");
                    None
                }
            };
            let target = shown(PINNED);
            if current == Some(PINNED) {
                return ledger.already(&what, &target, changes).await.map(|_| ());
            }
            // Unread settings are not recorded (a re-run that reads them
            // records the real ones); failback puts the defaults back.
            let previous = match current {
                Some(c) => ledger.before(&what, Some(&shown(c))).await?,
                None => Some("unknown (GetHealthCheck failed)".to_owned()),
            };
            // Route 53 answers S already while P's check fails; the pin is
            // what keeps it there once P answers again. A pin that cannot be
            // set (us-east-1's control plane failing) is reported and
            // alerted, not fatal: verify's DNS check decides whether users
            // are on S now.
            let now = match deps.checks.set_flags(id, PINNED.0, PINNED.1, budget).await {
                Ok(()) => target,
                Err(e) => {
                    tracing::error!(health_check = %id, alert = true, error = %crate::error::chain(&e), "P's health check could not be pinned: Route 53 answers by P's check alone");
                    format!(
                        "NOT pinned ({}): Route 53 answers by P's check alone, and would send users back to P if it passes; set Disabled + Inverted on {id} by hand",
                        crate::error::chain(&e)
                    )
                }
            };
            changes.push(Change {
                what,
                previous,
                now,
            });
        }
        SwitchMode::RecordUpsert => {
            let what = format!("route53:{}:{} CNAME", dns.hosted_zone_id, dns.record_name);
            let cname = (
                dns.hosted_zone_id.as_str(),
                dns.record_name.as_str(),
                dns.standby_target.as_str(),
            );
            move_cname(
                deps.records,
                ledger,
                what,
                cname,
                budget,
                (changes, pending),
            )
            .await?;
        }
        SwitchMode::RoutingControl => {
            let (p, s) = (&plan.regions.primary, &plan.regions.standby);
            let (Some(p_arn), Some(s_arn)) = (&p.routing_control_arn, &s.routing_control_arn)
            else {
                return Err(StepError::Precondition(
                    "routing control ARNs missing from the plan".into(),
                ));
            };
            // S on before P off: never both off. The states before are not
            // read (that is another cluster call per control); they are
            // recorded as what a standing P has, and marked as assumed.
            for (arn, on, before) in [
                (s_arn, true, "Off (assumed, not read)"),
                (p_arn, false, "On (assumed, not read)"),
            ] {
                let what = format!("arc:{arn}");
                let previous = ledger.before(&what, Some(before)).await?;
                deps.arc.set(arn, on).await?;
                changes.push(Change {
                    what,
                    previous,
                    now: if on { "On" } else { "Off" }.into(),
                });
            }
        }
    }
    Ok(())
}

/// The key under which a health check's settings are recorded.
fn check_lever(id: &str) -> String {
    format!("route53:health_check:{id} (inverted, disabled)")
}

/// `inverted=false, disabled=false` (as [`move_traffic`] records them).
fn parse_flags(v: &str) -> Option<(bool, bool)> {
    let mut inverted = None;
    let mut disabled = None;
    for part in v.split(',') {
        match part.trim().split_once('=') {
            Some(("inverted", b)) => inverted = b.trim().parse().ok(),
            Some(("disabled", b)) => disabled = b.trim().parse().ok(),
            _ => return None,
        }
    }
    Some((inverted?, disabled?))
}

/// A failback's switch back in `health_check_failover` mode: P's check
/// (the reversed plan's standby) gets the settings recorded before the
/// failover pinned it, or Route 53's defaults (not inverted, enabled) when
/// none were read. Route 53 then answers P as soon as P's check passes.
async fn unpin<C, R, A, P, N>(
    plan: &crate::plan::Plan,
    fb: &crate::execution::FailbackRun,
    deps: &SwitchDeps<'_, C, R, A, P>,
    ledger: &Ledger<'_, N>,
    changes: &mut Vec<Change>,
) -> Result<(), StepError>
where
    C: HealthCheckControl,
    N: Fn() -> DateTime<Utc>,
{
    let budget = Duration::from_millis(plan.timings.call_timeout_ms);
    let id = &plan.regions.standby.health_check_id;
    let what = check_lever(id);
    let shown = |(i, d): (bool, bool)| format!("inverted={i}, disabled={d}");
    let target = fb
        .restore
        .get(&what)
        .cloned()
        .flatten()
        .and_then(|v| parse_flags(&v))
        .unwrap_or((false, false));
    let current = deps.checks.flags(id, budget).await?;
    if current == target {
        return ledger
            .already(&what, &shown(target), changes)
            .await
            .map(|_| ());
    }
    let previous = ledger.before(&what, Some(&shown(current))).await?;
    deps.checks
        .set_flags(id, target.0, target.1, budget)
        .await?;
    changes.push(Change {
        what,
        previous,
        now: shown(target),
    });
    Ok(())
}

/// Point the CNAME `(zone, name)` at `target`, recording what it named
/// before (or report the change an earlier attempt made). A change not
/// yet INSYNC joins `pending`, to be waited for with the others.
async fn move_cname<R: RecordSets, N: Fn() -> DateTime<Utc>>(
    records: &R,
    ledger: &Ledger<'_, N>,
    what: String,
    (zone, name, target): (&str, &str, &str),
    budget: Duration,
    (changes, pending): (&mut Vec<Change>, &mut Vec<Pending>),
) -> Result<(), StepError> {
    let current = records.value(zone, name, "CNAME").await?;
    if same_name(current.as_deref(), target) {
        // An earlier attempt of this run made the change, and its wait is
        // lost. The same UPSERT again gives a change to wait on: once it is
        // INSYNC, every Route 53 name server answers `target`.
        if ledger.already(&what, target, changes).await? {
            let (id, synced) = records.upsert(zone, name, "CNAME", target, budget).await?;
            if !synced {
                pending.push((what, id));
            }
        }
        return Ok(());
    }
    let previous = ledger.before(&what, current.as_deref()).await?;
    let (id, synced) = records.upsert(zone, name, "CNAME", target, budget).await?;
    if !synced {
        pending.push((what.clone(), id));
    }
    changes.push(Change {
        what,
        previous,
        now: target.to_owned(),
    });
    Ok(())
}

fn same_name(current: Option<&str>, target: &str) -> bool {
    current.map(|v| v.trim_end_matches('.')) == Some(target.trim_end_matches('.'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapters::AwsError;

    /// Route 53 as switch's wait sees it: every GetChange answers `answer`.
    struct Changes {
        answer: fn() -> Result<bool, AwsError>,
    }

    impl RecordSets for Changes {
        async fn value(&self, _: &str, _: &str, _: &str) -> Result<Option<String>, AwsError> {
            unreachable!("the wait reads no record")
        }
        async fn upsert(
            &self,
            _: &str,
            _: &str,
            _: &str,
            _: &str,
            _: Duration,
        ) -> Result<(String, bool), AwsError> {
            unreachable!("the wait changes no record")
        }
        async fn synced(&self, _: &str, _: Duration) -> Result<bool, AwsError> {
            (self.answer)()
        }
    }

    fn throttled() -> Result<bool, AwsError> {
        Err(AwsError::Timeout {
            service: "route53",
            op: "GetChange",
            region: "us-east-1".into(),
            ms: 5000,
        })
    }

    /// Short, so that a test waits little; a poll (2 s) is longer.
    const BOUND: Duration = Duration::from_millis(300);

    async fn wait(answer: fn() -> Result<bool, AwsError>, for_: Duration) -> Vec<String> {
        let until = tokio::time::Instant::now() + for_;
        let pending = vec![("writer".to_owned(), "/change/C1".to_owned())];
        wait_synced(&Changes { answer }, pending, until, Duration::from_secs(5)).await
    }

    #[tokio::test]
    async fn a_change_route53_never_answers_for_is_reported_as_unanswered() {
        let out = wait(throttled, BOUND).await;
        assert_eq!(out.len(), 1, "{out:?}");
        assert!(out[0].contains("GetChange did not answer"), "{out:?}");
    }

    #[tokio::test]
    async fn the_wait_ends_at_its_bound_with_the_change_still_pending() {
        let t = tokio::time::Instant::now();
        let out = wait(|| Ok(false), BOUND).await;
        // It ends at the bound, not at the next poll after it.
        assert!(
            t.elapsed() >= BOUND && t.elapsed() < SYNC_POLL,
            "{:?}",
            t.elapsed()
        );
        assert_eq!(out, vec!["writer: change /change/C1 still PENDING"]);
    }

    #[tokio::test]
    async fn a_wait_whose_time_is_spent_says_it_never_asked() {
        let out = wait(|| unreachable!("asked"), Duration::ZERO).await;
        assert_eq!(
            out,
            vec!["writer: change /change/C1 not confirmed: not asked before the wait ended"]
        );
    }

    #[tokio::test]
    async fn a_change_route53_says_is_insync_is_not_reported() {
        assert!(wait(|| Ok(true), BOUND).await.is_empty());
    }

    #[tokio::test]
    async fn a_change_route53_refuses_to_describe_is_reported_at_once() {
        let out = wait(
            || {
                Err(AwsError::Shape {
                    service: "route53",
                    op: "GetChange",
                    region: "us-east-1".into(),
                    problem: "NoSuchChange".into(),
                })
            },
            BOUND,
        )
        .await;
        assert!(out[0].contains("NoSuchChange"), "{out:?}");
    }
}
