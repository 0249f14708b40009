//! The failover lock: at most one execution at a time, with a lease and a
//! cooldown.
//!
//! `detect` acquires it before StartExecution; `audit` releases it on every
//! terminal status and starts the cooldown. A lease that outlives its holder
//! (a lost audit) can be taken over once it expires.

use super::primary::conditional_old;
use super::{Attrs, Item, Store, StoreError, call_error, ms, s};
use aws_sdk_dynamodb::types::{ReturnValue, ReturnValuesOnConditionCheckFailure};
use chrono::{DateTime, Duration, Utc};
use serde::Serialize;

const PK: &str = "LOCK";

/// What the lock item says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LockState {
    /// Incident holding the lock, if held.
    pub holder: Option<String>,
    /// Lease expiry of the holder.
    pub lease_until: Option<DateTime<Utc>>,
    /// No new acquisition before this.
    pub cooldown_until: Option<DateTime<Utc>>,
    /// The last incident that released it.
    pub last_incident: Option<String>,
    /// The execution ARN the holder starts (or started), when detect
    /// recorded it: `handover release` checks it has ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub execution: Option<String>,
}

/// Result of [`Store::acquire_lock`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum AcquireOutcome {
    /// The lock is ours now.
    Acquired {
        /// Lease expiry.
        lease_until: DateTime<Utc>,
        /// The incident whose expired lease we took over, if any.
        took_over: Option<String>,
    },
    /// We already hold it for this incident (a retried or later tick). Nothing was written.
    AlreadyOurs {
        /// Lease expiry (unchanged).
        lease_until: DateTime<Utc>,
    },
    /// Another incident holds a live lease.
    Held {
        /// Holder.
        by: String,
        /// Lease expiry.
        until: DateTime<Utc>,
    },
    /// Free, but the cooldown after the last run is still running.
    CoolingDown {
        /// End of the cooldown.
        until: DateTime<Utc>,
        /// The incident that started it.
        after: Option<String>,
    },
}

/// Result of [`Store::keep_lock`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum KeepOutcome {
    /// The lock is the run's for the lease asked, or longer.
    Kept {
        /// Its lease had lapsed: it was taken back.
        lapsed: bool,
    },
    /// The run does not hold the lock (released, or another incident's);
    /// nothing changed.
    NotHolder {
        /// Who holds it, if anyone.
        holder: Option<String>,
    },
}

/// Result of [`Store::release_lock`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum ReleaseOutcome {
    /// Released; the cooldown runs until then.
    Released {
        /// End of the cooldown.
        cooldown_until: DateTime<Utc>,
    },
    /// This incident does not hold the lock; nothing changed.
    NotHolder {
        /// Who holds it, if anyone.
        holder: Option<String>,
    },
}

impl LockState {
    fn from_item(item: &Item) -> Result<Self, StoreError> {
        let a = Attrs::new(PK, item);
        Ok(LockState {
            holder: a.opt_s("holder")?,
            lease_until: a.opt_time_ms("lease_until_ms")?,
            cooldown_until: a.opt_time_ms("cooldown_until_ms")?,
            last_incident: a.opt_s("last_incident")?,
            execution: a.opt_s("execution")?,
        })
    }
}

impl Store {
    /// Read the lock.
    pub async fn lock_state(&self) -> Result<Option<LockState>, StoreError> {
        self.get(PK)
            .await?
            .as_ref()
            .map(LockState::from_item)
            .transpose()
    }

    /// Take the lock for `incident` for `lease`, unless another incident
    /// holds a live lease or the cooldown runs. One conditional write.
    pub async fn acquire_lock(
        &self,
        incident: &str,
        execution: &str,
        now: DateTime<Utc>,
        lease: Duration,
    ) -> Result<AcquireOutcome, StoreError> {
        let lease_until = now + lease;
        let res = self
            .client()
            .update_item()
            .table_name(self.table())
            .set_key(Some(Self::key(PK)))
            .update_expression(
                "SET holder = :inc, execution = :x, acquired_ms = :now, lease_until_ms = :lease",
            )
            .condition_expression(
                "attribute_not_exists(pk) \
                 OR ((attribute_not_exists(holder) OR lease_until_ms < :now) \
                     AND (attribute_not_exists(cooldown_until_ms) OR cooldown_until_ms <= :now))",
            )
            .expression_attribute_values(":inc", s(incident))
            .expression_attribute_values(":x", s(execution))
            .expression_attribute_values(":now", ms(now))
            .expression_attribute_values(":lease", ms(lease_until))
            .return_values(ReturnValue::AllOld)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        match res {
            Ok(out) => {
                let old = out
                    .attributes
                    .as_ref()
                    .map(LockState::from_item)
                    .transpose()?;
                Ok(AcquireOutcome::Acquired {
                    lease_until,
                    took_over: old.and_then(|o| o.holder),
                })
            }
            Err(e) => match conditional_old(&e) {
                Some(Some(old)) => {
                    let old = LockState::from_item(old)?;
                    match (old.holder, old.lease_until) {
                        // A retried tick of the running incident: no write, the lease is not extended
                        // (a lost release must still expire).
                        (Some(by), Some(until)) if until >= now && by == incident => {
                            Ok(AcquireOutcome::AlreadyOurs { lease_until: until })
                        }
                        (Some(by), Some(until)) if until >= now => {
                            Ok(AcquireOutcome::Held { by, until })
                        }
                        _ => Ok(AcquireOutcome::CoolingDown {
                            until: old.cooldown_until.unwrap_or(now),
                            after: old.last_incident,
                        }),
                    }
                }
                _ => Err(call_error("UpdateItem", PK, e)),
            },
        }
    }

    /// Release the lock held by `incident` and start the cooldown.
    pub async fn release_lock(
        &self,
        incident: &str,
        now: DateTime<Utc>,
        cooldown: Duration,
    ) -> Result<ReleaseOutcome, StoreError> {
        let cooldown_until = now + cooldown;
        let res = self
            .client()
            .update_item()
            .table_name(self.table())
            .set_key(Some(Self::key(PK)))
            .update_expression(
                "SET cooldown_until_ms = :cool, last_incident = :inc, released_ms = :now \
                 REMOVE holder, lease_until_ms, execution",
            )
            .condition_expression("holder = :inc")
            .expression_attribute_values(":inc", s(incident))
            .expression_attribute_values(":now", ms(now))
            .expression_attribute_values(":cool", ms(cooldown_until))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        match res {
            Ok(_) => Ok(ReleaseOutcome::Released { cooldown_until }),
            Err(e) => match conditional_old(&e) {
                Some(old) => Ok(ReleaseOutcome::NotHolder {
                    holder: old
                        .map(LockState::from_item)
                        .transpose()?
                        .and_then(|o| o.holder),
                }),
                None => Err(call_error("UpdateItem", PK, e)),
            },
        }
    }

    /// Extend the live lease `incident` holds to at least `now + lease` (an
    /// operator command keeping a short lease alive while it works, so a
    /// command that dies leaves the lock for minutes, not hours). A lease
    /// already longer is kept: a late renewal never shortens it. `false`
    /// when `incident` no longer holds a live lease: it must stop.
    pub async fn renew_lock(
        &self,
        incident: &str,
        now: DateTime<Utc>,
        lease: Duration,
    ) -> Result<bool, StoreError> {
        let res = self
            .client()
            .update_item()
            .table_name(self.table())
            .set_key(Some(Self::key(PK)))
            .update_expression("SET lease_until_ms = :lease")
            .condition_expression(
                "holder = :inc AND lease_until_ms >= :now AND lease_until_ms < :lease",
            )
            .expression_attribute_values(":inc", s(incident))
            .expression_attribute_values(":now", ms(now))
            .expression_attribute_values(":lease", ms(now + lease))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        match res {
            Ok(_) => Ok(true),
            Err(e) => match conditional_old(&e) {
                Some(old) => {
                    let old = old.map(LockState::from_item).transpose()?;
                    Ok(old.is_some_and(|o| {
                        o.holder.as_deref() == Some(incident)
                            && o.lease_until.is_some_and(|l| l >= now)
                    }))
                }
                None => Err(call_error("UpdateItem", PK, e)),
            },
        }
    }

    /// Keep the lock a running run `incident` still holds for at least
    /// `now + lease`, whether or not its lease has lapsed: audit's sweep,
    /// for a run it saw running, and the CLI once its run exists. One
    /// conditional write on the holder, so a lock released meanwhile (the
    /// run ended) or taken by another incident is never taken back. A lease
    /// already longer is kept.
    pub async fn keep_lock(
        &self,
        incident: &str,
        now: DateTime<Utc>,
        lease: Duration,
    ) -> Result<KeepOutcome, StoreError> {
        let res = self
            .client()
            .update_item()
            .table_name(self.table())
            .set_key(Some(Self::key(PK)))
            .update_expression("SET lease_until_ms = :lease")
            .condition_expression("holder = :inc AND lease_until_ms < :lease")
            .expression_attribute_values(":inc", s(incident))
            .expression_attribute_values(":lease", ms(now + lease))
            .return_values(ReturnValue::AllOld)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        match res {
            Ok(out) => {
                let old = out
                    .attributes
                    .as_ref()
                    .map(LockState::from_item)
                    .transpose()?;
                let lapsed = old.and_then(|o| o.lease_until).is_some_and(|l| l < now);
                Ok(KeepOutcome::Kept { lapsed })
            }
            Err(e) => match conditional_old(&e) {
                Some(old) => {
                    let old = old.map(LockState::from_item).transpose()?;
                    Ok(match old.and_then(|o| o.holder) {
                        Some(h) if h == incident => KeepOutcome::Kept { lapsed: false },
                        holder => KeepOutcome::NotHolder { holder },
                    })
                }
                None => Err(call_error("UpdateItem", PK, e)),
            },
        }
    }
}
