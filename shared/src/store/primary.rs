//! The primary record: which Region is primary, and the epoch.
//!
//! The epoch is a fencing token that only grows. A failover is a transition
//! claimed by one execution on the epoch it started with; promotion completes
//! it by moving the record to the new Region with `epoch + 1`. Every change is
//! conditional on the expected epoch and on the execution that holds the
//! transition, so two executions can never both promote.

use super::{Attrs, Item, Store, StoreError, call_error, ms, n, s};
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue, ReturnValuesOnConditionCheckFailure};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

const PK: &str = "PRIMARY";

/// Where a transition is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// The old primary is being fenced.
    Fencing,
    /// The replica's promotion is claimed (and maybe called).
    Promoting,
}

impl Phase {
    fn as_str(self) -> &'static str {
        match self {
            Phase::Fencing => "fencing",
            Phase::Promoting => "promoting",
        }
    }
    fn parse(s: &str) -> Option<Self> {
        match s {
            "fencing" => Some(Phase::Fencing),
            "promoting" => Some(Phase::Promoting),
            _ => None,
        }
    }
}

/// A failover in progress.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Transition {
    /// Current phase.
    pub phase: Phase,
    /// The execution that holds it.
    pub execution: String,
    /// The Region it moves to.
    pub to_region: String,
    /// When it was claimed.
    pub since: DateTime<Utc>,
    /// When promotion was claimed.
    pub promote_claimed_at: Option<DateTime<Utc>>,
    /// When PromoteReadReplica (or the Aurora call) was accepted.
    pub promote_called_at: Option<DateTime<Utc>>,
    /// P's security groups before the fence (for failback).
    pub fence_previous_groups: Option<Vec<String>>,
    /// Fence outcome recorded (`confirmed` / `unconfirmed`), with its time.
    pub fence: Option<(String, DateTime<Utc>)>,
    /// When the fence's RebootDBInstance of P was accepted (first one kept).
    #[serde(default)]
    pub fence_reboot_at: Option<DateTime<Utc>>,
    /// Replica lag recorded at promotion (the RPO) and its sample time.
    pub rpo: Option<(f64, DateTime<Utc>)>,
}

/// The record itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PrimaryRecord {
    /// Region that is primary.
    pub region: String,
    /// Its database identifier.
    pub db_instance_id: String,
    /// Fencing token; grows by one per completed failover.
    pub epoch: i64,
    /// A failover in progress, if any.
    pub transition: Option<Transition>,
    /// The execution that completed the last failover.
    pub last_execution: Option<String>,
    /// When the record last changed.
    pub updated_at: DateTime<Utc>,
    /// When the last failover completed.
    pub promoted_at: Option<DateTime<Utc>>,
    /// The transition of the last completed failover (its RPO, fence groups).
    pub last_transition: Option<Transition>,
    /// What switch replaced at the last completed failover, recorded before
    /// each change (`what` -> the value before; `None`: there was none), for
    /// failback and the report.
    pub switch_previous: std::collections::BTreeMap<String, Option<String>>,
    /// The values switch replaced at the failover before the last one (kept
    /// when the next failover starts recording its own, for failback).
    pub last_switch_previous: std::collections::BTreeMap<String, Option<String>>,
    /// P's security groups from before a fence that compensation could not
    /// undo (P unreachable or refusing); audit's sweep keeps trying while no
    /// run holds a transition, and the next fence records these as P's
    /// previous groups instead of the deny-all group it finds.
    pub unfence_pending: Option<Vec<String>>,
    /// When an unfence of P last claimed the right to call: audit's sweep
    /// restoring `unfence_pending`, or a run's compensation before each
    /// call. While a claim is live ([`UNFENCE_LEASE`]), no fence begins, so
    /// an unfence never undoes a fence that began in between.
    pub unfencing: Option<DateTime<Utc>>,
}

/// What [`Store::claim_compensation_unfence`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnfenceClaim {
    /// Claimed: the call may go out now. `took_over`: it replaced another
    /// compensation's lapsed claim, whose call may still land.
    Claimed {
        /// Another's lapsed claim was replaced.
        took_over: bool,
    },
    /// Another compensation of the run claimed at `since` and its claim is
    /// live: it is unfencing P.
    Held {
        /// When it claimed.
        since: DateTime<Utc>,
    },
    /// The run no longer holds the transition (another compensation
    /// released it), or it called the promotion: no unfence call may go out.
    Gone,
}

/// How long a claim on restoring P's groups holds. The sweep's: longer
/// than its ModifyDBInstance may take (a 10 s budget), its wait to see the
/// change applied (20 s), and the writes around them. A compensation cuts
/// each call's budget to end 5 s before its claim lapses. A call whose
/// answer was lost renews the claim for as long again.
pub const UNFENCE_LEASE: chrono::Duration = chrono::Duration::seconds(40);

/// How the sweep's unfence of P ended ([`Store::end_unfence`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnfenceEnd {
    /// P's groups are restored and applied.
    Done,
    /// RDS refused, or the change was not seen applied: P may still be fenced.
    Refused,
    /// The call's answer was lost: RDS may still apply it.
    Unknown,
}

/// Result of creating the record.
// Returned once per call, never stored in bulk: the size difference is harmless.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum InitOutcome {
    /// Written.
    Created(PrimaryRecord),
    /// It already existed; nothing changed.
    Exists(PrimaryRecord),
}

/// Result of claiming or advancing a transition.
// Returned once per call, never stored in bulk: the size difference is harmless.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum TransitionOutcome {
    /// This execution holds the transition; the record as it is now.
    Claimed(PrimaryRecord),
    /// The epoch is no longer the one expected: another failover completed.
    EpochMoved {
        /// The epoch now.
        now: i64,
    },
    /// Another execution holds the transition on this epoch.
    Busy {
        /// Its execution.
        execution: String,
    },
    /// The record does not exist (not provisioned).
    Missing,
    /// An unfence of P is under way (audit's sweep, or a compensation;
    /// claimed at `since`, held for [`UNFENCE_LEASE`]): the fence waits.
    Unfencing {
        /// When it was claimed.
        since: DateTime<Utc>,
    },
}

/// Result of completing a promotion.
// Returned once per call, never stored in bulk: the size difference is harmless.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum PromotionOutcome {
    /// The record now names the new Region with the new epoch.
    Promoted(PrimaryRecord),
    /// This execution had already completed it (a retry).
    AlreadyPromoted(PrimaryRecord),
    /// The epoch moved under another execution.
    EpochMoved {
        /// The epoch now.
        now: i64,
    },
    /// Another execution holds the transition.
    Busy {
        /// Its execution.
        execution: String,
    },
    /// The record does not exist.
    Missing,
}

impl PrimaryRecord {
    fn from_item(item: &Item) -> Result<Self, StoreError> {
        let a = Attrs::new(PK, item);
        let transition = a.opt_map("transition")?.map(parse_transition).transpose()?;
        let last_transition = a
            .opt_map("last_transition")?
            .map(parse_transition)
            .transpose()?;
        Ok(PrimaryRecord {
            region: a.s("region")?,
            db_instance_id: a.s("db_instance_id")?,
            epoch: a.i64("epoch")?,
            transition,
            last_execution: a.opt_s("last_execution")?,
            updated_at: a.time_ms("updated_ms")?,
            promoted_at: a.opt_time_ms("promoted_ms")?,
            last_transition,
            switch_previous: values_map(a.opt_map("switch_previous")?)?,
            last_switch_previous: values_map(a.opt_map("last_switch_previous")?)?,
            unfence_pending: match item.get("unfence_pending") {
                None | Some(AttributeValue::Null(_)) => None,
                Some(_) => Some(a.strings("unfence_pending")?),
            },
            unfencing: a.opt_time_ms("unfencing_ms")?,
        })
    }

    /// Why a transition write was refused. `Unfencing` only for a fence's
    /// claim (`unfence_live_after`: claims since then are live).
    fn refusal(
        &self,
        expected_epoch: i64,
        unfence_live_after: Option<DateTime<Utc>>,
    ) -> TransitionOutcome {
        let live = self
            .unfencing
            .filter(|since| unfence_live_after.is_some_and(|after| *since >= after));
        if self.epoch != expected_epoch {
            TransitionOutcome::EpochMoved { now: self.epoch }
        } else if let (None, Some(since)) = (&self.transition, live) {
            TransitionOutcome::Unfencing { since }
        } else {
            TransitionOutcome::Busy {
                execution: self
                    .transition
                    .as_ref()
                    .map(|t| t.execution.clone())
                    .unwrap_or_default(),
            }
        }
    }
}

/// A `switch_previous` map: `what` -> {"value": S | NULL}.
fn values_map(
    m: Option<&Item>,
) -> Result<std::collections::BTreeMap<String, Option<String>>, StoreError> {
    let Some(m) = m else {
        return Ok(Default::default());
    };
    m.iter()
        .map(|(what, v)| {
            let v = match v {
                AttributeValue::M(inner) => Attrs::new(PK, inner).opt_s("value")?,
                _ => None,
            };
            Ok((what.clone(), v))
        })
        .collect()
}

fn parse_transition(t: &Item) -> Result<Transition, StoreError> {
    let t = Attrs::new(PK, t);
    let phase = t.s("phase")?;
    Ok(Transition {
        phase: Phase::parse(&phase).ok_or(StoreError::Corrupt {
            key: PK.into(),
            attribute: "transition.phase".into(),
            problem: "is not a known phase",
        })?,
        execution: t.s("execution")?,
        to_region: t.s("to_region")?,
        since: t.time_ms("since_ms")?,
        promote_claimed_at: t.opt_time_ms("promote_claimed_ms")?,
        promote_called_at: t.opt_time_ms("promote_called_ms")?,
        fence_previous_groups: match t.item.get("fence_previous_groups") {
            None => None,
            Some(_) => Some(t.strings("fence_previous_groups")?),
        },
        fence_reboot_at: t.opt_time_ms("fence_reboot_ms")?,
        fence: match (t.opt_s("fence_outcome")?, t.opt_time_ms("fenced_ms")?) {
            (Some(o), Some(at)) => Some((o, at)),
            _ => None,
        },
        rpo: match (t.opt_s("rpo_s")?, t.opt_time_ms("lag_ms")?) {
            (Some(v), Some(at)) => Some((
                v.parse().map_err(|_| StoreError::Corrupt {
                    key: PK.into(),
                    attribute: "transition.rpo_s".into(),
                    problem: "is not a number",
                })?,
                at,
            )),
            _ => None,
        },
    })
}

impl Store {
    /// Read the primary record.
    pub async fn primary(&self) -> Result<Option<PrimaryRecord>, StoreError> {
        self.get(PK)
            .await?
            .as_ref()
            .map(PrimaryRecord::from_item)
            .transpose()
    }

    /// Create the record at epoch 1 if it does not exist (provisioning).
    pub async fn init_primary(
        &self,
        region: &str,
        db_instance_id: &str,
        now: DateTime<Utc>,
    ) -> Result<InitOutcome, StoreError> {
        let mut item = Self::key(PK);
        item.insert("region".into(), s(region));
        item.insert("db_instance_id".into(), s(db_instance_id));
        item.insert("epoch".into(), n(1));
        item.insert("updated_ms".into(), ms(now));
        let res = self
            .client()
            .put_item()
            .table_name(self.table())
            .set_item(Some(item.clone()))
            .condition_expression("attribute_not_exists(pk)")
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        match res {
            Ok(_) => Ok(InitOutcome::Created(PrimaryRecord::from_item(&item)?)),
            Err(e) => match e.as_service_error() {
                Some(aws_sdk_dynamodb::operation::put_item::PutItemError::ConditionalCheckFailedException(c)) => {
                    let old = c.item().ok_or_else(|| missing_old("PutItem"))?;
                    Ok(InitOutcome::Exists(PrimaryRecord::from_item(old)?))
                }
                _ => Err(call_error("PutItem", PK, e)),
            },
        }
    }

    /// Claim the transition for `execution` on `expected_epoch` (phase
    /// `fencing`). Calling it again from the same execution changes nothing
    /// and returns the record as it is.
    pub async fn begin_fencing(
        &self,
        expected_epoch: i64,
        execution: &str,
        to_region: &str,
        now: DateTime<Utc>,
    ) -> Result<TransitionOutcome, StoreError> {
        let transition = AttributeValue::M(HashMap::from([
            ("phase".to_owned(), s(Phase::Fencing.as_str())),
            ("execution".to_owned(), s(execution)),
            ("to_region".to_owned(), s(to_region)),
            ("since_ms".to_owned(), ms(now)),
        ]));
        // A lapsed claim of the sweep is removed with the claim.
        let stale = now - UNFENCE_LEASE;
        self.write_transition(
            "SET #t = if_not_exists(#t, :t), updated_ms = :now REMOVE unfencing_ms",
            "epoch = :e AND (attribute_not_exists(#t) OR #t.execution = :x) \
             AND (attribute_not_exists(unfencing_ms) OR unfencing_ms < :stale)",
            expected_epoch,
            HashMap::from([
                (":t".to_owned(), transition),
                (":e".to_owned(), n(expected_epoch)),
                (":x".to_owned(), s(execution)),
                (":now".to_owned(), ms(now)),
                (":stale".to_owned(), ms(stale)),
            ]),
            Some(stale),
        )
        .await
    }

    /// Move the transition held by `execution` to `promoting`. The returned
    /// record's `promote_called_at` says whether the promotion call already
    /// went out (then it must not be called again).
    ///
    /// `lag` is the replica lag sample taken before promoting (the RPO); the
    /// first claim's sample is kept, so a retry reports the same RPO.
    pub async fn claim_promotion(
        &self,
        expected_epoch: i64,
        execution: &str,
        lag: (f64, DateTime<Utc>),
        now: DateTime<Utc>,
    ) -> Result<TransitionOutcome, StoreError> {
        self.update_transition(
            "SET #t.phase = :promoting, #t.promote_claimed_ms = if_not_exists(#t.promote_claimed_ms, :now), \
             #t.rpo_s = if_not_exists(#t.rpo_s, :rpo), #t.lag_ms = if_not_exists(#t.lag_ms, :lag_at), updated_ms = :now",
            "epoch = :e AND #t.execution = :x AND #t.phase IN (:fencing, :promoting)",
            expected_epoch,
            HashMap::from([
                (":promoting".to_owned(), s(Phase::Promoting.as_str())),
                (":fencing".to_owned(), s(Phase::Fencing.as_str())),
                (":e".to_owned(), n(expected_epoch)),
                (":x".to_owned(), s(execution)),
                (":rpo".to_owned(), s(lag.0.to_string())),
                (":lag_at".to_owned(), ms(lag.1)),
                (":now".to_owned(), ms(now)),
            ]),
        )
        .await
    }

    /// Record P's security groups before the fence replaces them (kept from
    /// the first call: a retry never overwrites them with the fence group).
    pub async fn record_fence_previous(
        &self,
        expected_epoch: i64,
        execution: &str,
        groups: &[String],
        now: DateTime<Utc>,
    ) -> Result<TransitionOutcome, StoreError> {
        self.update_transition(
            "SET #t.fence_previous_groups = if_not_exists(#t.fence_previous_groups, :g), updated_ms = :now",
            "epoch = :e AND #t.execution = :x",
            expected_epoch,
            HashMap::from([
                (":g".to_owned(), AttributeValue::L(groups.iter().map(|g| s(g.as_str())).collect())),
                (":e".to_owned(), n(expected_epoch)),
                (":x".to_owned(), s(execution)),
                (":now".to_owned(), ms(now)),
            ]),
        )
        .await
    }

    /// Record the value a switch change replaces, before the change is made,
    /// on the failover `execution` completed at `epoch` (the first value is
    /// kept: a re-run finds its change already made and must not lose what
    /// failback needs). Returns the value on record: `Some(previous)`, or
    /// `None` when the record is no longer this execution's epoch.
    pub async fn record_switch_previous(
        &self,
        epoch: i64,
        execution: &str,
        what: &str,
        previous: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<Option<Option<String>>, StoreError> {
        let condition = "attribute_exists(pk) AND epoch = :e AND last_execution = :x";
        let update = |expr: &str, values: Vec<(&str, AttributeValue)>| {
            let mut req = self
                .update_record()
                .update_expression(expr)
                .condition_expression(condition)
                .expression_attribute_values(":e", n(epoch))
                .expression_attribute_values(":x", s(execution))
                .expression_attribute_values(":now", ms(now))
                .return_values(ReturnValue::AllNew);
            for (k, v) in values {
                req = req.expression_attribute_values(k, v);
            }
            req
        };
        // The map first (a record promoted before switch_previous existed
        // has none), then the one entry, if absent.
        let steps = [
            update(
                "SET switch_previous = if_not_exists(switch_previous, :none), updated_ms = :now",
                vec![(":none", AttributeValue::M(HashMap::new()))],
            ),
            update(
                "SET switch_previous.#w = if_not_exists(switch_previous.#w, :v), updated_ms = :now",
                vec![(
                    ":v",
                    AttributeValue::M(HashMap::from([(
                        "value".to_owned(),
                        previous.map_or(AttributeValue::Null(true), s),
                    )])),
                )],
            )
            .expression_attribute_names("#w", what),
        ];
        let mut last = None;
        for step in steps {
            match step.send().await {
                Ok(out) => last = out.attributes,
                Err(e) => {
                    return match e.as_service_error() {
                        Some(UpdateItemError::ConditionalCheckFailedException(_)) => Ok(None),
                        _ => Err(call_error("UpdateItem", PK, e)),
                    };
                }
            }
        }
        let item = last.ok_or_else(|| missing_old("UpdateItem"))?;
        let rec = PrimaryRecord::from_item(&item)?;
        Ok(Some(rec.switch_previous.get(what).cloned().flatten()))
    }

    /// P could not be unfenced: keep its groups from before the fence, so
    /// the sweep can retry and the next fence can record them (first kept).
    pub async fn record_unfence_pending(
        &self,
        groups: &[String],
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        self.update_record()
            .update_expression(
                "SET unfence_pending = if_not_exists(unfence_pending, :g), updated_ms = :now",
            )
            .condition_expression("attribute_exists(pk)")
            .expression_attribute_values(
                ":g",
                AttributeValue::L(groups.iter().map(|g| s(g.as_str())).collect()),
            )
            .expression_attribute_values(":now", ms(now))
            .send()
            .await
            .map_err(|e| call_error("UpdateItem", PK, e))?;
        Ok(())
    }

    /// Audit's sweep claims the restoring of P's `groups` (still the
    /// pending ones), while no run holds a transition and no other sweep's
    /// claim is live. `Some(claimed_at)` when claimed; `None` when a fence
    /// began first or another sweep holds it: then the sweep leaves P alone.
    pub async fn claim_unfence(
        &self,
        groups: &[String],
        now: DateTime<Utc>,
    ) -> Result<Option<DateTime<Utc>>, StoreError> {
        let res = self
            .update_record()
            .update_expression("SET unfencing_ms = :now, updated_ms = :now")
            .condition_expression(
                "attribute_exists(pk) AND attribute_not_exists(#t) AND unfence_pending = :g \
                 AND (attribute_not_exists(unfencing_ms) OR unfencing_ms < :stale)",
            )
            .expression_attribute_names("#t", "transition")
            .expression_attribute_values(
                ":g",
                AttributeValue::L(groups.iter().map(|g| s(g.as_str())).collect()),
            )
            .expression_attribute_values(":now", ms(now))
            .expression_attribute_values(":stale", ms(now - UNFENCE_LEASE))
            .send()
            .await;
        match res {
            Ok(_) => Ok(Some(now)),
            Err(e) => match conditional_old(&e) {
                Some(_) => Ok(None),
                None => Err(call_error("UpdateItem", PK, e)),
            },
        }
    }

    /// The sweep's claim of `claimed_at` ends as `how`:
    /// - [`UnfenceEnd::Done`]: P unfenced; the pending groups are forgotten
    ///   too, unless a fence began after the claim lapsed (then `false`: the
    ///   sweep's call may have undone that fence);
    /// - [`UnfenceEnd::Refused`]: the claim is removed, the groups kept;
    /// - [`UnfenceEnd::Unknown`]: the call's answer was lost and RDS may
    ///   still apply it: the claim is renewed from `now` for a whole lease.
    pub async fn end_unfence(
        &self,
        claimed_at: DateTime<Utc>,
        how: UnfenceEnd,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let (update, guard) = match how {
            UnfenceEnd::Done => (
                "SET updated_ms = :now REMOVE unfencing_ms, unfence_pending",
                " AND attribute_not_exists(#t)",
            ),
            UnfenceEnd::Refused => ("SET updated_ms = :now REMOVE unfencing_ms", ""),
            UnfenceEnd::Unknown => ("SET updated_ms = :now, unfencing_ms = :now", ""),
        };
        let ended = self.end_claim(update, guard, claimed_at, now).await?;
        if ended || how != UnfenceEnd::Done {
            return Ok(ended);
        }
        // A fence holds the transition now: only the lapsed claim goes.
        self.end_claim(
            "SET updated_ms = :now REMOVE unfencing_ms",
            "",
            claimed_at,
            now,
        )
        .await?;
        Ok(false)
    }

    async fn end_claim(
        &self,
        update: &str,
        guard: &str,
        claimed_at: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let mut req = self
            .update_record()
            .update_expression(update)
            .condition_expression(format!("unfencing_ms = :c{guard}"))
            .expression_attribute_values(":c", ms(claimed_at))
            .expression_attribute_values(":now", ms(now));
        if !guard.is_empty() {
            req = req.expression_attribute_names("#t", "transition");
        }
        applied(req.send().await)
    }

    /// P was unfenced: forget the pending groups (only while no run holds a
    /// transition, which would own P's groups now).
    pub async fn clear_unfence_pending(&self, now: DateTime<Utc>) -> Result<bool, StoreError> {
        let res = self
            .update_record()
            .update_expression("SET updated_ms = :now REMOVE unfence_pending")
            .condition_expression("attribute_exists(pk) AND attribute_not_exists(#t)")
            .expression_attribute_names("#t", "transition")
            .expression_attribute_values(":now", ms(now))
            .send()
            .await;
        applied(res)
    }

    /// Record that P's reboot (ending its sessions) was accepted (first one kept).
    pub async fn record_fence_reboot(
        &self,
        expected_epoch: i64,
        execution: &str,
        at: DateTime<Utc>,
    ) -> Result<TransitionOutcome, StoreError> {
        self.update_transition(
            "SET #t.fence_reboot_ms = if_not_exists(#t.fence_reboot_ms, :at), updated_ms = :at",
            "epoch = :e AND #t.execution = :x",
            expected_epoch,
            HashMap::from([
                (":at".to_owned(), ms(at)),
                (":e".to_owned(), n(expected_epoch)),
                (":x".to_owned(), s(execution)),
            ]),
        )
        .await
    }

    /// Record the fence outcome (first one kept).
    pub async fn record_fence_outcome(
        &self,
        expected_epoch: i64,
        execution: &str,
        outcome: &str,
        now: DateTime<Utc>,
    ) -> Result<TransitionOutcome, StoreError> {
        self.update_transition(
            "SET #t.fence_outcome = if_not_exists(#t.fence_outcome, :o), #t.fenced_ms = if_not_exists(#t.fenced_ms, :now), updated_ms = :now",
            "epoch = :e AND #t.execution = :x",
            expected_epoch,
            HashMap::from([
                (":o".to_owned(), s(outcome)),
                (":e".to_owned(), n(expected_epoch)),
                (":x".to_owned(), s(execution)),
                (":now".to_owned(), ms(now)),
            ]),
        )
        .await
    }

    /// Record that the promotion call was accepted, so a retry never calls again.
    pub async fn mark_promote_called(
        &self,
        expected_epoch: i64,
        execution: &str,
        now: DateTime<Utc>,
    ) -> Result<TransitionOutcome, StoreError> {
        self.update_transition(
            "SET #t.promote_called_ms = if_not_exists(#t.promote_called_ms, :now), updated_ms = :now",
            "epoch = :e AND #t.execution = :x AND #t.phase = :promoting",
            expected_epoch,
            HashMap::from([
                (":promoting".to_owned(), s(Phase::Promoting.as_str())),
                (":e".to_owned(), n(expected_epoch)),
                (":x".to_owned(), s(execution)),
                (":now".to_owned(), ms(now)),
            ]),
        )
        .await
    }

    /// Release the transition `execution` holds on `expected_epoch`, if the
    /// promotion was never called (compensation at the end of a run). The
    /// released transition is kept as `last_abandoned` for the record.
    pub async fn abandon_transition(
        &self,
        expected_epoch: i64,
        execution: &str,
        now: DateTime<Utc>,
    ) -> Result<TransitionOutcome, StoreError> {
        self.update_transition(
            "SET last_abandoned = #t, updated_ms = :now REMOVE #t",
            "epoch = :e AND #t.execution = :x AND attribute_not_exists(#t.promote_called_ms)",
            expected_epoch,
            HashMap::from([
                (":e".to_owned(), n(expected_epoch)),
                (":x".to_owned(), s(execution)),
                (":now".to_owned(), ms(now)),
            ]),
        )
        .await
    }

    /// An UpdateItem of the primary record.
    fn update_record(&self) -> UpdateItemFluentBuilder {
        self.client()
            .update_item()
            .table_name(self.table())
            .set_key(Some(Self::key(PK)))
    }

    /// A run's compensation claims its next unfence call: `unfencing_ms`
    /// becomes `now` (wall-clock time), while `execution` still holds the
    /// transition on `expected_epoch`, never called the promotion, and no
    /// other live claim stands. `mine`: every stamp this compensation has
    /// tried, `now` among them: its own claims (a write whose answer was
    /// lost, and the SDK's retry of this one, may have landed). No fence
    /// begins while a claim is live ([`UNFENCE_LEASE`]).
    pub async fn claim_compensation_unfence(
        &self,
        expected_epoch: i64,
        execution: &str,
        mine: &[DateTime<Utc>],
        now: DateTime<Utc>,
    ) -> Result<UnfenceClaim, StoreError> {
        let stale = now - UNFENCE_LEASE;
        let (own, values) = own_stamps(mine);
        let res = self
            .update_record()
            .update_expression("SET unfencing_ms = :now, updated_ms = :now")
            .condition_expression(format!(
                "attribute_exists(pk) AND epoch = :e AND #t.execution = :x \
                 AND attribute_not_exists(#t.promote_called_ms) \
                 AND (attribute_not_exists(unfencing_ms) OR unfencing_ms < :stale{own})"
            ))
            .expression_attribute_names("#t", "transition")
            .set_expression_attribute_values(Some(values))
            .expression_attribute_values(":e", n(expected_epoch))
            .expression_attribute_values(":x", s(execution))
            .expression_attribute_values(":now", ms(now))
            .expression_attribute_values(":stale", ms(stale))
            .return_values(ReturnValue::UpdatedOld)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        let old = match res {
            Ok(out) => {
                // A lapsed claim that was not this compensation's: whoever
                // held it may have a call that can still land.
                let replaced = out
                    .attributes()
                    .and_then(|a| a.get("unfencing_ms"))
                    .and_then(|v| v.as_n().ok())
                    .and_then(|n| n.parse::<i64>().ok());
                let took_over =
                    replaced.is_some_and(|old| !mine.iter().any(|t| t.timestamp_millis() == old));
                return Ok(UnfenceClaim::Claimed { took_over });
            }
            Err(e) => match conditional_old(&e) {
                Some(Some(old)) => PrimaryRecord::from_item(old)?,
                Some(None) => return Ok(UnfenceClaim::Gone),
                None => return Err(call_error("UpdateItem", PK, e)),
            },
        };
        // Refused, and the old record says why: a transition that is still
        // this run's means another compensation's claim is live.
        let ours = old.epoch == expected_epoch
            && old
                .transition
                .as_ref()
                .is_some_and(|t| t.execution == execution && t.promote_called_at.is_none());
        Ok(match (ours, old.unfencing) {
            (true, Some(since)) => UnfenceClaim::Held { since },
            _ => UnfenceClaim::Gone,
        })
    }

    /// End this compensation's claim, if the live one is one of `mine`.
    /// Another compensation's later claim stays until it lapses.
    pub async fn end_compensation_unfence(
        &self,
        mine: &[DateTime<Utc>],
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        if mine.is_empty() {
            return Ok(false);
        }
        let (own, values) = own_stamps(mine);
        let res = self
            .update_record()
            .update_expression("SET updated_ms = :now REMOVE unfencing_ms")
            .condition_expression(format!(
                "attribute_exists(pk) AND (attribute_not_exists(unfencing_ms){own})"
            ))
            .set_expression_attribute_values(Some(values))
            .expression_attribute_values(":now", ms(now))
            .send()
            .await;
        applied(res)
    }

    async fn update_transition(
        &self,
        update: &str,
        condition: &str,
        expected_epoch: i64,
        values: HashMap<String, AttributeValue>,
    ) -> Result<TransitionOutcome, StoreError> {
        self.write_transition(update, condition, expected_epoch, values, None)
            .await
    }

    /// [`Self::update_transition`], where a sweep's claim made at or after
    /// `unfence_live_after` is reported as [`TransitionOutcome::Unfencing`].
    async fn write_transition(
        &self,
        update: &str,
        condition: &str,
        expected_epoch: i64,
        values: HashMap<String, AttributeValue>,
        unfence_live_after: Option<DateTime<Utc>>,
    ) -> Result<TransitionOutcome, StoreError> {
        let res = self
            .update_record()
            .update_expression(update)
            .condition_expression(format!("attribute_exists(pk) AND {condition}"))
            .expression_attribute_names("#t", "transition")
            .set_expression_attribute_values(Some(values))
            .return_values(ReturnValue::AllNew)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        match res {
            Ok(out) => {
                let item = out.attributes.ok_or_else(|| missing_old("UpdateItem"))?;
                Ok(TransitionOutcome::Claimed(PrimaryRecord::from_item(&item)?))
            }
            Err(e) => match conditional_old(&e) {
                Some(None) => Ok(TransitionOutcome::Missing),
                Some(Some(old)) => {
                    Ok(PrimaryRecord::from_item(old)?.refusal(expected_epoch, unfence_live_after))
                }
                None => Err(call_error("UpdateItem", PK, e)),
            },
        }
    }

    /// Complete the failover held by `execution`: the record names
    /// `new_region`/`new_db` with `expected_epoch + 1`, and the transition is gone.
    pub async fn complete_promotion(
        &self,
        expected_epoch: i64,
        execution: &str,
        new_region: &str,
        new_db: &str,
        now: DateTime<Utc>,
    ) -> Result<PromotionOutcome, StoreError> {
        let res = self.update_record()
            .update_expression(
                "SET epoch = :next, #r = :r, db_instance_id = :db, previous_region = #r, \
                 last_execution = :x, last_transition = #t, \
                 last_switch_previous = if_not_exists(switch_previous, :none), switch_previous = :none, \
                 promoted_ms = :now, updated_ms = :now REMOVE #t, unfence_pending, unfencing_ms",
            )
            .condition_expression(
                "attribute_exists(pk) AND epoch = :e AND #t.execution = :x AND #t.phase = :promoting",
            )
            .expression_attribute_names("#t", "transition")
            .expression_attribute_names("#r", "region")
            .expression_attribute_values(":next", n(expected_epoch + 1))
            .expression_attribute_values(":e", n(expected_epoch))
            .expression_attribute_values(":r", s(new_region))
            .expression_attribute_values(":db", s(new_db))
            .expression_attribute_values(":x", s(execution))
            .expression_attribute_values(":promoting", s(Phase::Promoting.as_str()))
            .expression_attribute_values(":now", ms(now))
            .expression_attribute_values(":none", AttributeValue::M(HashMap::new()))
            .return_values(ReturnValue::AllNew)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        match res {
            Ok(out) => {
                let item = out.attributes.ok_or_else(|| missing_old("UpdateItem"))?;
                Ok(PromotionOutcome::Promoted(PrimaryRecord::from_item(&item)?))
            }
            Err(e) => match conditional_old(&e) {
                Some(None) => Ok(PromotionOutcome::Missing),
                Some(Some(old)) => {
                    let rec = PrimaryRecord::from_item(old)?;
                    if rec.epoch == expected_epoch + 1
                        && rec.last_execution.as_deref() == Some(execution)
                    {
                        Ok(PromotionOutcome::AlreadyPromoted(rec))
                    } else if rec.epoch != expected_epoch {
                        Ok(PromotionOutcome::EpochMoved { now: rec.epoch })
                    } else {
                        Ok(PromotionOutcome::Busy {
                            execution: rec.transition.map(|t| t.execution).unwrap_or_default(),
                        })
                    }
                }
                None => Err(call_error("UpdateItem", PK, e)),
            },
        }
    }
}

/// ` OR unfencing_ms IN (:m0, …)` for `mine`, with its values (none for
/// an empty list). DynamoDB takes at most 100 values in an IN list;
/// a compensation tries at most about 60 stamps.
fn own_stamps(mine: &[DateTime<Utc>]) -> (String, HashMap<String, AttributeValue>) {
    let values: HashMap<String, AttributeValue> = mine
        .iter()
        .enumerate()
        .map(|(i, t)| (format!(":m{i}"), ms(*t)))
        .collect();
    if values.is_empty() {
        return (String::new(), values);
    }
    let names: Vec<String> = (0..mine.len()).map(|i| format!(":m{i}")).collect();
    (
        format!(" OR unfencing_ms IN ({})", names.join(", ")),
        values,
    )
}

/// A conditional UpdateItem's result: `true` when it was applied, `false`
/// when its condition failed.
fn applied<O>(
    res: Result<O, crate::aws::SdkError<UpdateItemError, aws_smithy_runtime_api::http::Response>>,
) -> Result<bool, StoreError> {
    match res {
        Ok(_) => Ok(true),
        Err(e) => match conditional_old(&e) {
            Some(_) => Ok(false),
            None => Err(call_error("UpdateItem", PK, e)),
        },
    }
}

/// For a failed conditional UpdateItem: `Some(old item)` (None when the item
/// did not exist); `None` when the error was something else.
pub(crate) fn conditional_old<R>(
    e: &crate::aws::SdkError<UpdateItemError, R>,
) -> Option<Option<&Item>> {
    match e.as_service_error() {
        Some(UpdateItemError::ConditionalCheckFailedException(c)) => Some(c.item()),
        _ => None,
    }
}

fn missing_old(op: &str) -> StoreError {
    StoreError::Corrupt {
        key: PK.into(),
        attribute: format!("({op} return values)"),
        problem: "were not returned",
    }
}
