//! `handover failback`: back to P after a failover, and `handover
//! reprotect`: give the primary a replica in the other Region again.
//!
//! After a failover S is primary and has no replica. Failback:
//! 1. takes the lock detect takes (so it can never race a failover: a
//!    failover holding it refuses the failback, and the failback holding it
//!    holds detect off), for re-protection and the run together;
//! 2. re-protects: a cross-Region read replica of S in P's Region under P's
//!    identifier, so it answers at P's endpoint. The old P instance, if it
//!    still has the identifier, is renamed `<id>-retired-e<epoch>` and
//!    tagged, never deleted. It waits until the replica is `available` and
//!    its ReplicaLag is near 0 (`failback.lag_near_zero_s`);
//! 3. compares the data: row counts and checksums of the canary table and
//!    `failback.tables` on S and on the new replica, up to the same point
//!    (`handover::failback`). A difference stops here, with the table and
//!    the numbers, and the lock is given back: nothing was switched;
//! 4. starts a planned switchover in the reversed plan (S is `primary`, P
//!    `standby`): readiness, approval, S fenced, P's replica caught up, P
//!    promoted at the next epoch, the writer endpoint and the traffic lever
//!    set back to what switch recorded before the failover, verify.
//!
//! Re-protection is additive (a new instance; the old one renamed), so it
//! asks for no approval; the switch back asks, as any promotion does.
//! `handover reprotect` runs step 2 alone for whichever site is the standby
//! now: after a failback, S's old instance (the primary before) is renamed
//! and a new replica of P takes S's identifier, so detect has its standby.

use crate::Context;
use crate::args::{DbReach, StartArgs};
use crate::exit::Failure;
use crate::switchover::{
    confirm, failed, give_back, idle_record, refused, start_run, state_machine_arn, take_lock,
};
use chrono::{DateTime, Utc};
use handover::adapters::ExecutionStarter;
use handover::adapters::{CloudWatch, DbInspector, DbInstance, Rds, ReplicaLag, Sfn};
use handover::execution::{
    DataCheck, ExecutionInput, FailbackRun, Mode, Reprotection, Side, TableCheck,
};
use handover::plan::{Canary, FailbackPolicy, Plan, Site};
use std::collections::BTreeMap;
use std::io::Write;
use std::time::Duration;

/// How long the data check waits for the replica to replay S's position.
const REPLAY_WAIT: Duration = Duration::from_secs(30);
/// Time the start takes, on top of the run's own lease.
const FAILBACK_MARGIN_S: u64 = 600;
/// The lease the command holds (and renews every fifth of it) while it
/// re-protects and checks.
const PREP_LEASE_S: u64 = 600;

/// Aborts its task when dropped (the lease renewer, on every way out).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
/// Between two readings of RDS or CloudWatch while re-protection waits.
const POLL: Duration = Duration::from_secs(2);
/// One AWS call's budget.
const CALL: Duration = Duration::from_secs(10);

/// The execution name: `<service>-failback-<time>`.
pub fn failback_id(service: &str, at: DateTime<Utc>) -> String {
    handover::detect::incident_id(service, "failback", at)
}

/// What the old instance is renamed to when a replica takes its identifier.
pub fn retired_name(id: &str, epoch: i64) -> String {
    // RDS identifiers: at most 63 characters, no trailing hyphen.
    let suffix = format!("-retired-e{epoch}");
    let keep = 63usize.saturating_sub(suffix.len());
    let base: String = id.chars().take(keep).collect();
    format!("{}{suffix}", base.trim_end_matches('-'))
}

fn progress(msg: impl std::fmt::Display) {
    let mut err = std::io::stderr();
    let _ = writeln!(err, "{} {msg}", Utc::now().format("%H:%M:%S"));
}

fn aws_failed(e: impl std::error::Error) -> Failure {
    failed(handover::error::chain(&e))
}

/// Start a failback (see the module docs).
pub async fn failback(
    ctx: Context,
    start: &StartArgs,
    accept_unmeasured_loss: bool,
    reach: &DbReach,
) -> Result<String, Failure> {
    let plan = &ctx.plan;
    let fb = plan.failback.as_ref().ok_or_else(|| {
        refused("plan.failback is missing: it names P's public target (primary_target) and the tables the data check compares")
    })?;
    let state_machine = state_machine_arn(start)?;
    let record = idle_record(&ctx).await?;
    let (p, s) = (&plan.regions.primary, &plan.regions.standby);
    if record.region != s.region || record.db_instance_id != s.db_instance_id {
        return Err(refused(format!(
            "the primary record names {} ({}), not S ({} in {}): there is nothing to fail back",
            record.db_instance_id, record.region, s.db_instance_id, s.region
        )));
    }
    // The old P may hold writes S never got (a failover's loss). Re-protection
    // renames it, and after that `handover rpo` no longer finds it at P's
    // identifier: measure first, or say that the loss stays unmeasured.
    let last_rpo = record.last_transition.as_ref().and_then(|t| t.rpo);
    let measured = match &record.last_execution {
        Some(run) => ctx
            .store
            .measured_rpo(run)
            .await
            .map_err(|e| failed(handover::error::chain(&e)))?
            .is_some(),
        None => false,
    };
    if !measured && last_rpo.is_none_or(|(lag, _)| lag != 0.0) && !accept_unmeasured_loss {
        return Err(refused(format!(
            "the loss of the last failover ({}) is not measured, and the old P, which holds the writes S never got, is renamed by re-protection: run `handover rpo` first (it reads the old P), or pass --accept-unmeasured-loss",
            record.last_execution.as_deref().unwrap_or("unknown")
        )));
    }
    let reversed = plan
        .reversed(&record.switch_previous)
        .map_err(|e| refused(e.to_string()))?;
    reversed
        .validate()
        .map_err(|e| refused(format!("the reversed plan: {e}")))?;
    let what = format!(
        "Failback of {}: {} ({}) → {} ({}), epoch {} → {}.\n\
         1. Re-protect: a read replica of {} in {} named {} (an instance there under that name is renamed {} and kept).\n\
         2. Compare the data on both sides ({} table(s)); a difference stops here.\n\
         3. A planned switchover back: readiness, approval in Slack (or `handover approve`), S fenced, \
         P caught up, P promoted, the writer endpoint and traffic set back to what they were before the failover, verify.",
        plan.service,
        s.db_instance_id,
        s.region,
        p.db_instance_id,
        p.region,
        record.epoch,
        record.epoch + 1,
        s.db_instance_id,
        p.region,
        p.db_instance_id,
        retired_name(&p.db_instance_id, record.epoch),
        checked_tables(plan, fb)?.len(),
    );
    confirm(start.yes, &what, "failback")?;
    let now = Utc::now();
    let name = failback_id(&plan.service, now);
    let sfn = Sfn::new(&ctx.aws, &ctx.region, &state_machine).await;
    let arn = sfn.execution_arn(&name);
    // Held through re-protection and the run: no failover can start
    // meanwhile. While this command prepares, a short lease it renews: a
    // command that dies leaves the lock for minutes, not for the whole
    // re-protection bound. Once the run exists, the run's own lease.
    let lease_s = reversed
        .switchover_lease_s()
        .saturating_add(FAILBACK_MARGIN_S);
    take_lock(&ctx, &name, &arn, now, PREP_LEASE_S).await?;
    progress(format!(
        "lock taken by {name} (a {PREP_LEASE_S} s lease, renewed while re-protection and the data check run)"
    ));
    let renewer = {
        let (store, name) = (ctx.store.clone(), name.clone());
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(PREP_LEASE_S / 5)).await;
                let lease = chrono::Duration::seconds(PREP_LEASE_S as i64);
                match store.renew_lock(&name, Utc::now(), lease).await {
                    Ok(true) => {}
                    Ok(false) => {
                        progress("the lock is no longer this failback's: nothing will be started");
                        return;
                    }
                    Err(e) => progress(format!(
                        "renewing the lock: {} (trying again)",
                        handover::error::chain(&e)
                    )),
                }
            }
        })
    };
    let renewing = AbortOnDrop(renewer);
    // The record again, under the lock: a run that ended between the first
    // read and the lock may have moved it.
    let again = match ctx.store.primary().await {
        Ok(Some(r)) => r,
        Ok(None) | Err(_) => {
            let lock = give_back(&ctx, &name).await;
            return Err(failed(format!(
                "the primary record could not be read again under the lock; {lock}"
            )));
        }
    };
    if again.epoch != record.epoch
        || again.region != record.region
        || again.transition.is_some()
        || again.switch_previous != record.switch_previous
    {
        let lock = give_back(&ctx, &name).await;
        return Err(refused(format!(
            "the primary record changed while the lock was taken (epoch {} → {}, transition {:?}): run `handover failback` again; {lock}",
            record.epoch,
            again.epoch,
            again.transition.as_ref().map(|t| &t.execution)
        )));
    }
    // The groups P had before the failover fenced it: the new replica gets
    // them, so P's app reaches it once it is promoted.
    let groups = record
        .last_transition
        .as_ref()
        .and_then(|t| t.fence_previous_groups.clone());
    let prepared = async {
        let reprotect = reprotect(&ctx, s, p, fb, record.epoch, &name, groups).await?;
        let check = data_check(&ctx, plan, fb, reach).await?;
        Ok::<_, Failure>((reprotect, check))
    }
    .await;
    let (reprotect, data_check) = match prepared {
        Ok(v) => v,
        Err((code, msg)) => {
            let lock = give_back(&ctx, &name).await;
            return Err((code, format!("{msg}\nnothing was switched; {lock}")));
        }
    };
    if !data_check.matches() {
        let lock = give_back(&ctx, &name).await;
        return Err(refused(format!(
            "the data check found a difference, so nothing was switched:\n{}\nP's replica {} stays (it is only a replica); {lock}",
            describe_check(&data_check),
            p.db_instance_id
        )));
    }
    progress(format!(
        "data check: {}",
        describe_check(&data_check).replace('\n', "; ")
    ));
    let input = ExecutionInput {
        incident_id: name.clone(),
        drill: start.drill,
        mode: Mode::Switchover,
        t0: now,
        detected_at: Utc::now(),
        primary: Side {
            region: record.region.clone(),
            db_instance_id: record.db_instance_id.clone(),
            epoch: Some(record.epoch),
        },
        standby: Side {
            region: p.region.clone(),
            db_instance_id: p.db_instance_id.clone(),
            epoch: None,
        },
        evidence: Vec::new(),
        plan: reversed,
        failback: Some(FailbackRun {
            undoes: record.last_execution.clone(),
            from_epoch: record.epoch,
            reprotect,
            data_check,
            restore: record.switch_previous.clone(),
        }),
    };
    // `start_run` renews the start lease just before the start (refusing
    // if the lock is no longer this failback's) and extends it to the
    // run's own lease once the run exists. The renewer must not run then.
    drop(renewing);
    start_run(&ctx, &sfn, &name, &arn, &input, &what, lease_s).await
}

/// `handover reprotect`: a replica of the primary in the other Region,
/// under the standby's identifier (see the module docs).
pub async fn reprotect_standby(ctx: Context, yes: bool) -> Result<String, Failure> {
    let plan = &ctx.plan;
    let fb = plan.failback.as_ref().ok_or_else(|| {
        refused("plan.failback is missing: it holds re-protection's timeout and lag bound")
    })?;
    let record = idle_record(&ctx).await?;
    let (p, s) = (&plan.regions.primary, &plan.regions.standby);
    let (source, target) = if record.region == p.region && record.db_instance_id == p.db_instance_id
    {
        (p, s)
    } else if record.region == s.region && record.db_instance_id == s.db_instance_id {
        (s, p)
    } else {
        return Err(refused(format!(
            "the primary record names {} ({}), neither of the plan's sites",
            record.db_instance_id, record.region
        )));
    };
    let what = format!(
        "Re-protect {}: a read replica of {} ({}) in {} named {} (an instance there under that name that is not its replica is renamed {} and kept).",
        plan.service,
        source.db_instance_id,
        source.region,
        target.region,
        target.db_instance_id,
        retired_name(&target.db_instance_id, record.epoch)
    );
    confirm(yes, &what, "reprotect")?;
    // Never rename the standby under a run that may be promoting it. (A
    // failover that starts meanwhile finds no usable replica and escalates.)
    // Read after the prompt, which can wait for as long as the operator does.
    let now = Utc::now();
    if let Some(lock) = ctx
        .store
        .lock_state()
        .await
        .map_err(|e| failed(handover::error::chain(&e)))?
        && let (Some(holder), Some(until)) = (&lock.holder, lock.lease_until)
        && until > now
    {
        return Err(refused(format!(
            "{holder} holds the lock until {until}: a run is under way; re-protect once it has ended"
        )));
    }
    let name = handover::detect::incident_id(&plan.service, "reprotect", now);
    // The groups the standby had before its last fence, if it was fenced.
    let groups = record
        .last_transition
        .as_ref()
        .filter(|t| t.to_region == source.region)
        .and_then(|t| t.fence_previous_groups.clone());
    let r = reprotect(&ctx, source, target, fb, record.epoch, &name, groups).await?;
    Ok(format!("{what}\n\n{}", describe_reprotection(&r, target)))
}

fn describe_reprotection(r: &Reprotection, target: &Site) -> String {
    let took = r
        .started_at
        .map(|s| {
            format!(
                " in {} s",
                handover::units::fmt_num((r.ready_at - s).num_milliseconds() as f64 / 1000.0)
            )
        })
        .unwrap_or_else(|| " (it existed already)".into());
    format!(
        "re-protected: {} in {} is a replica, available{took}, ReplicaLag {}{}",
        r.replica_id,
        target.region,
        r.lag_s
            .map(|l| format!("{} s", handover::units::fmt_num(l)))
            .unwrap_or_else(|| "unknown".into()),
        r.retired_id
            .as_deref()
            .map(|id| format!("; the old instance is kept as {id}"))
            .unwrap_or_default()
    )
}

fn is_replica_of(d: &DbInstance, source: &DbInstance) -> bool {
    d.replication_source
        .as_deref()
        .is_some_and(|r| r == source.id || r == source.arn)
}

/// Make `target` a replica of `source` under its identifier (see the
/// module docs): rename what holds the identifier, create the replica,
/// wait until it is available and caught up. Safe to run again: a replica
/// of `source` already there is waited for, not created twice.
async fn reprotect(
    ctx: &Context,
    source: &Site,
    target: &Site,
    fb: &FailbackPolicy,
    epoch: i64,
    by: &str,
    groups: Option<Vec<String>>,
) -> Result<Reprotection, Failure> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(fb.reprotect_timeout_s);
    let src_rds = Rds::new(&ctx.aws, &source.region).await;
    let rds = Rds::new(&ctx.aws, &target.region).await;
    let src = src_rds
        .describe(&source.db_instance_id, CALL)
        .await
        .map_err(aws_failed)?
        .ok_or_else(|| {
            refused(format!(
                "the primary {} does not exist in {}",
                source.db_instance_id, source.region
            ))
        })?;
    let id = &target.db_instance_id;
    let mut retired_id = None;
    let mut started_at = None;
    let current = rds.describe(id, CALL).await.map_err(aws_failed)?;
    let create = match &current {
        Some(d) if is_replica_of(d, &src) => {
            progress(format!(
                "{id} in {} is a replica of {} already ({}): waiting for it",
                target.region, source.db_instance_id, d.status
            ));
            false
        }
        Some(d) => {
            let retired = retired_name(id, epoch);
            if rds
                .describe(&retired, CALL)
                .await
                .map_err(aws_failed)?
                .is_some()
            {
                return Err(refused(format!(
                    "{id} is not a replica of {} and {retired} exists already: rename one of them by hand (Handover never deletes an instance)",
                    source.db_instance_id
                )));
            }
            if d.status != "available" {
                return Err(refused(format!(
                    "{id} is {}: it can be renamed only when available",
                    d.status
                )));
            }
            started_at = Some(Utc::now());
            progress(format!(
                "renaming {id} (not a replica of {}) to {retired}: kept, never deleted",
                source.db_instance_id
            ));
            let sent = rds
                .client()
                .modify_db_instance()
                .db_instance_identifier(id)
                .new_db_instance_identifier(&retired)
                .apply_immediately(true)
                .send()
                .await;
            if let Err(e) = sent {
                // The rename may have been applied with its answer lost; a
                // rename takes effect some time after RDS accepts it.
                let mut applied = false;
                for _ in 0..30 {
                    if rds
                        .describe(&retired, CALL)
                        .await
                        .map_err(aws_failed)?
                        .is_some()
                    {
                        applied = true;
                        break;
                    }
                    tokio::time::sleep(POLL).await;
                }
                if !applied {
                    return Err(failed(format!(
                        "renaming {id} to {retired}: {} (and {retired} did not appear)",
                        handover::error::chain(&e)
                    )));
                }
            }
            // The identifier is free once the rename is in effect.
            loop {
                if rds.describe(id, CALL).await.map_err(aws_failed)?.is_none() {
                    break;
                }
                if tokio::time::Instant::now() >= deadline {
                    return Err(failed(format!(
                        "{id} still exists {} s after the rename to {retired}",
                        fb.reprotect_timeout_s
                    )));
                }
                tokio::time::sleep(POLL).await;
            }
            if let Some(old) = rds.describe(&retired, CALL).await.map_err(aws_failed)? {
                let tagged = rds
                    .client()
                    .add_tags_to_resource()
                    .resource_name(&old.arn)
                    .tags(tag("handover:retired-by", by))
                    .tags(tag("handover:retired-from", id))
                    .send()
                    .await;
                if let Err(e) = tagged {
                    progress(format!(
                        "tagging {retired}: {} (the rename stands)",
                        handover::error::chain(&e)
                    ));
                }
            }
            retired_id = Some(retired);
            true
        }
        None => {
            started_at = Some(Utc::now());
            true
        }
    };
    // A run before this one may have renamed the old instance already.
    if retired_id.is_none() {
        let retired = retired_name(id, epoch);
        if rds
            .describe(&retired, CALL)
            .await
            .map_err(aws_failed)?
            .is_some()
        {
            retired_id = Some(retired);
        }
    }
    // The old instance's class, subnet group (its VPC) and KMS key, so the
    // replica lands where it did and is sized as it was.
    let template = match &retired_id {
        Some(old) => rds
            .client()
            .describe_db_instances()
            .db_instance_identifier(old)
            .send()
            .await
            .ok()
            .and_then(|o| o.db_instances().first().cloned()),
        None => None,
    };
    if create {
        progress(format!(
            "creating {id} in {}: a read replica of {} ({})",
            target.region, source.db_instance_id, src.arn
        ));
        let mut req = rds
            .client()
            .create_db_instance_read_replica()
            .db_instance_identifier(id)
            .source_db_instance_identifier(&src.arn)
            .tags(tag("handover:reprotected-by", by));
        if let Some(g) = &groups {
            req = req.set_vpc_security_group_ids(Some(g.clone()));
        }
        if let Some(old) = &template {
            if let Some(class) = old.db_instance_class() {
                req = req.db_instance_class(class);
            }
            if let Some(group) = old.db_subnet_group().and_then(|g| g.db_subnet_group_name()) {
                req = req.db_subnet_group_name(group);
            }
            if old.storage_encrypted() == Some(true)
                && let Some(key) = old.kms_key_id()
            {
                // Encrypted in the target Region with the old instance's key.
                // PreSignedUrl applies only in GovCloud (US) and China
                // Regions; RDS ignores it elsewhere (RDS API Reference,
                // CreateDBInstanceReadReplica).
                req = req.kms_key_id(key);
            }
        }
        if let Err(e) = req.send().await {
            // A lost answer: the replica may exist now.
            match rds.describe(id, CALL).await.map_err(aws_failed)? {
                Some(d) if is_replica_of(&d, &src) => {}
                _ => {
                    return Err(failed(format!(
                        "CreateDBInstanceReadReplica {id}: {}",
                        handover::error::chain(&e)
                    )));
                }
            }
        }
    }
    // Available, and a replica of the source.
    let mut shown = String::new();
    let available_at = loop {
        match rds.describe(id, CALL).await.map_err(aws_failed)? {
            Some(d) if d.status == "available" && is_replica_of(&d, &src) => break Utc::now(),
            Some(d)
                if matches!(
                    d.status.as_str(),
                    "failed" | "incompatible-parameters" | "incompatible-restore" | "storage-full"
                ) =>
            {
                return Err(failed(format!(
                    "{id} is {}: re-protection failed (see the RDS events of {id})",
                    d.status
                )));
            }
            Some(d) if d.status == "available" => {
                return Err(refused(format!(
                    "{id} is available but not a replica of {}: something else took the identifier",
                    source.db_instance_id
                )));
            }
            Some(d) if d.status != shown => {
                progress(format!("{id}: {}", d.status));
                shown = d.status.clone();
            }
            _ => {}
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(failed(format!(
                "{id} is not available after {} s (failback.reprotect_timeout_s)",
                fb.reprotect_timeout_s
            )));
        }
        tokio::time::sleep(POLL).await;
    };
    progress(format!(
        "{id} is available; waiting for its ReplicaLag to reach {} s",
        fb.lag_near_zero_s
    ));
    // Caught up: a ReplicaLag sample taken since it became available.
    let cw = CloudWatch::new(&ctx.aws, &target.region).await;
    let lag = loop {
        let now = Utc::now();
        let sample = cw
            .latest_lag(id, now, chrono::Duration::minutes(2), CALL)
            .await
            .map_err(aws_failed)?;
        if let Some(l) = sample
            && l.at >= available_at - chrono::Duration::seconds(60)
            && (0.0..=fb.lag_near_zero_s).contains(&l.seconds)
        {
            break l.seconds;
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(failed(format!(
                "{id}'s ReplicaLag did not reach {} s within {} s (last: {})",
                fb.lag_near_zero_s,
                fb.reprotect_timeout_s,
                sample
                    .map(|l| format!("{} s", l.seconds))
                    .unwrap_or_else(|| "none published".into())
            )));
        }
        tokio::time::sleep(POLL).await;
    };
    let r = Reprotection {
        replica_id: id.clone(),
        retired_id,
        started_at,
        ready_at: Utc::now(),
        lag_s: Some(lag),
    };
    progress(describe_reprotection(&r, target));
    Ok(r)
}

fn tag(key: &str, value: &str) -> aws_sdk_rds::types::Tag {
    aws_sdk_rds::types::Tag::builder()
        .key(key)
        .value(value)
        .build()
}

/// A table the data check compares: (database, table, key).
type Checked = (String, String, String);

/// The canary table (by `id`) and the plan's `failback.tables`.
fn checked_tables(plan: &Plan, fb: &FailbackPolicy) -> Result<Vec<Checked>, Failure> {
    let Canary::Postgres {
        database, table, ..
    } = &plan.canary
    else {
        return Err(refused(
            "the plan's canary is http: the data check reads PostgreSQL with the canary.postgres settings",
        ));
    };
    let mut out = vec![(database.clone(), table.clone(), "id".to_owned())];
    for t in &fb.tables {
        let db = t.database.clone().unwrap_or_else(|| database.clone());
        let entry = (db, t.table.clone(), t.key.clone());
        if !out.contains(&entry) {
            out.push(entry);
        }
    }
    Ok(out)
}

/// Compare the tables on S and on P's new replica.
async fn data_check(
    ctx: &Context,
    plan: &Plan,
    fb: &FailbackPolicy,
    reach: &DbReach,
) -> Result<DataCheck, Failure> {
    let tables = checked_tables(plan, fb)?;
    let Canary::Postgres {
        host,
        port,
        secret_arn,
        require_tls,
        ca_secret_arn,
        ..
    } = &plan.canary
    else {
        unreachable!("checked_tables refuses an http canary");
    };
    // Where each side is reached: the flags, else the canary's address for
    // S and failback.canary_host for P, else their RDS endpoints.
    let s_host = reach.s_host.clone().or_else(|| host.clone());
    let s_port = reach.s_port.unwrap_or(*port);
    let p_host = reach.p_host.clone().or_else(|| fb.canary_host.clone());
    let p_port = reach.p_port.unwrap_or(fb.canary_port.unwrap_or(*port));
    let mut by_db: BTreeMap<&str, Vec<&Checked>> = BTreeMap::new();
    for t in &tables {
        by_db.entry(t.0.as_str()).or_default().push(t);
    }
    let mut results: Vec<TableCheck> = Vec::new();
    let mut read_from = String::new();
    for (db, list) in by_db {
        let access = crate::rpo::DbAccess {
            port: *port,
            database: db,
            secret_arn,
            ca_secret_arn: ca_secret_arn.as_deref(),
            require_tls: *require_tls,
        };
        let ((s, s_conn), s_how) = crate::rpo::open(
            ctx,
            "S",
            &plan.regions.standby,
            &access,
            s_host.as_ref(),
            Some(s_port),
        )
        .await?;
        let ((p, p_conn), p_how) = crate::rpo::open(
            ctx,
            "P",
            &plan.regions.primary,
            &access,
            p_host.as_ref(),
            Some(p_port),
        )
        .await?;
        if read_from.is_empty() {
            read_from = format!("{s_how}; {p_how}");
        }
        let result = async {
            handover::failback::bound_session(&s).await?;
            handover::failback::bound_session(&p).await?;
            handover::failback::require_replica(&p, &format!("P's database ({p_how})")).await?;
            let mut out = Vec::new();
            for (_, table, key) in list {
                out.push(
                    handover::failback::compare(
                        &s,
                        &p,
                        &format!("{db}.{table}"),
                        table,
                        key,
                        REPLAY_WAIT,
                    )
                    .await?,
                );
            }
            Ok::<_, String>(out)
        }
        .await;
        drop((s, p));
        s_conn.abort();
        p_conn.abort();
        results.extend(result.map_err(|e| refused(format!("data check: {e}")))?);
    }
    Ok(DataCheck {
        tables: results,
        checked_at: Utc::now(),
        read_from,
    })
}

/// One line per table: rows and checksums on each side.
pub fn describe_check(c: &DataCheck) -> String {
    c.tables
        .iter()
        .map(|t| {
            let bound = t
                .key_bound
                .as_deref()
                .map(|b| format!(" up to key {b}"))
                .unwrap_or_default();
            if t.matches() {
                format!("{}: {} rows{bound} match (checksum {})", t.table, t.s_rows, t.s_checksum)
            } else {
                format!(
                    "{}: DIFFERS{bound}: S has {} rows (checksum {}), P's replica {} rows (checksum {})",
                    t.table, t.s_rows, t.s_checksum, t.p_rows, t.p_checksum
                )
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retired_names_fit_rds_identifiers() {
        assert_eq!(retired_name("shop-db", 2), "shop-db-retired-e2");
        let long = "a".repeat(63);
        let r = retired_name(&long, 12);
        assert!(r.len() <= 63, "{r}");
        assert!(r.ends_with("-retired-e12"));
        // No double hyphen where the name was cut at one.
        let hyphen = format!("{}-b", "a".repeat(50));
        assert!(!retired_name(&hyphen, 3).contains("--"));
    }

    #[test]
    fn the_execution_name_is_a_valid_step_functions_name() {
        let id = failback_id("shop", "2026-12-02T10:00:00Z".parse().unwrap());
        assert_eq!(id, "shop-failback-20261202T100000Z");
    }
}
