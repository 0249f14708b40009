//! The pace of the local world: how long each modelled AWS duration takes.
//!
//! Two paces exist.
//! - `fast` (the default) keeps today's compressed figures. It checks logic,
//!   not timing, and keeps `make test` short.
//! - `real` divides every real figure below by one scale factor k. The plan's
//!   timings and targets are divided by the same k, rounded up to a whole
//!   second. So AWS's ratios hold, except where that rounding bends them
//!   (docs/reference/pace.md lists where). The drill shows its figures
//!   times k as real time.
//!
//! `HANDOVER_PACE=real HANDOVER_SCALE=10` picks the real pace at k = 10.
//!
//! What is not scaled, and why:
//! - an API call's own latency and the plan's per-call budgets
//!   (`call_timeout_ms`, `fence.timeout_ms`): the world does not model call
//!   latency, and a budget below the emulator's latency would only fail;
//! - the code's fixed safety bounds (the task timeouts and retries the lock
//!   lease counts, the sweep's claim): they bound Lambda timeouts, which
//!   are not modelled either.

use anyhow::{Result, bail};
use handover::plan::Plan;
use std::time::Duration;

/// One duration the world models: its figure on AWS, and where that comes from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Figure {
    /// What takes this long.
    pub what: &'static str,
    /// The real figure, in seconds.
    pub real_s: f64,
    /// The figure at the fast pace, in seconds.
    pub fast_s: f64,
    /// Where the real figure comes from.
    pub source: &'static str,
}

/// PromoteReadReplica: the instance shows `modifying`.
pub const PROMOTE_MODIFYING: Figure = Figure {
    what: "PromoteReadReplica, `modifying`",
    real_s: 40.0,
    fast_s: 1.0,
    source: "seed 003: 69 s from the call to a standalone instance; RDS does not publish the split between the phases",
};
/// PromoteReadReplica: the instance shows `rebooting`; its sessions end.
pub const PROMOTE_REBOOTING: Figure = Figure {
    what: "PromoteReadReplica, `rebooting`",
    real_s: 29.0,
    fast_s: 1.0,
    source: "seed 003 (the rest of the 69 s)",
};
/// A security-group change shows `adding`/`removing` before `active`.
pub const SG_PENDING: Figure = Figure {
    what: "ModifyDBInstance security groups, `adding`/`removing`",
    real_s: 10.0,
    fast_s: 0.5,
    source: "not published (RDS API Reference, VpcSecurityGroupMembership, names the states only); 10 s assumed",
};
/// RebootDBInstance: `rebooting` until the engine is back.
pub const REBOOT: Figure = Figure {
    what: "RebootDBInstance, `rebooting`",
    real_s: 120.0,
    fast_s: 1.0,
    source: "not published: RDS User Guide, \"Rebooting a DB instance\", says it depends on crash recovery; 120 s assumed, within the minutes users report",
};
/// Route 53's checkers call a failing endpoint unhealthy.
pub const HEALTH_CHECK_DETECTION: Figure = Figure {
    what: "Route 53 health check, request interval x failure threshold",
    real_s: 30.0,
    fast_s: 3.0,
    source: "seed 003: every 10 s, unhealthy after 3 failures in a row",
};
/// A record change is PENDING before Route 53 reports it INSYNC.
pub const RECORD_INSYNC: Figure = Figure {
    what: "Route 53 change, PENDING to INSYNC",
    real_s: 60.0,
    fast_s: 0.0,
    source: "Route 53 API Reference, GetChange: changes \"generally propagate to all Route 53 name servers within 60 seconds\"",
};
/// How long a resolver may keep the failover record's old answer.
pub const RECORD_TTL: Figure = Figure {
    what: "the failover record's TTL",
    real_s: 60.0,
    fast_s: 0.0,
    source: "the world's failover records (TTL 60 s, harness/src/world.rs); a load balancer's DNS name, behind an alias record, has 60 s too",
};
/// The interval between two detect ticks.
pub const DETECT_TICK: Figure = Figure {
    what: "detect's schedule",
    real_s: 60.0,
    fast_s: 1.1,
    source: "infra/template.yaml: rate(1 minute); seed 003: EventBridge checked every minute",
};
/// From the failure to detect's first tick after it.
pub const DETECT_FIRST_TICK: Figure = Figure {
    what: "from P's failure to detect's next tick",
    real_s: 30.0,
    fast_s: 1.2,
    source: "the schedule does not know when P fails: half a tick on average",
};
/// How long the on-call person takes to read the question and click.
pub const DECISION: Figure = Figure {
    what: "the on-call person reads the question and clicks",
    real_s: 60.0,
    fast_s: 2.0,
    source: "assumed: one minute; seed 003 had no approval step",
};
/// The first automated backup of the new primary.
pub const FIRST_BACKUP: Figure = Figure {
    what: "the new primary's first backup, from the promotion's end",
    real_s: 271.0,
    fast_s: 3.0,
    source: "seed 003: promoted 14:20:29, backup finished 14:25:00",
};

/// S's WAL receiver ends a stream silent this long, and asks P for a
/// message at half of it: on a quiet source S hears from P that often.
pub const WAL_RECEIVER_TIMEOUT: Figure = Figure {
    what: "S's `wal_receiver_timeout` (a ping to P at half of it)",
    real_s: 60.0,
    fast_s: 60.0,
    source: "PostgreSQL's default (runtime-config-replication); assumed unchanged in RDS's default parameter group. The fast pace keeps it too",
};

/// Every figure the world models, for the reference table.
pub const WORLD: [Figure; 12] = [
    PROMOTE_MODIFYING,
    PROMOTE_REBOOTING,
    SG_PENDING,
    REBOOT,
    HEALTH_CHECK_DETECTION,
    RECORD_INSYNC,
    RECORD_TTL,
    DETECT_TICK,
    DETECT_FIRST_TICK,
    DECISION,
    FIRST_BACKUP,
    WAL_RECEIVER_TIMEOUT,
];

/// A timing of the plan at the real pace: its real value, divided by k.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PlanFigure {
    /// The plan field.
    pub field: &'static str,
    /// The value an operator would set on AWS, in seconds.
    pub real_s: u64,
    /// Why that value.
    pub source: &'static str,
}

/// The plan's timings and targets at the real pace, before scaling.
pub const PLAN: [PlanFigure; 12] = [
    PlanFigure {
        field: "targets.rto_s",
        real_s: 900,
        source: "seed 003: RTO target 15 min",
    },
    PlanFigure {
        field: "targets.rpo_s",
        real_s: 60,
        source: "seed 003: RPO target 60 s",
    },
    PlanFigure {
        field: "timings.approval_timeout_s",
        real_s: 600,
        source: "ten minutes for a person to answer",
    },
    PlanFigure {
        field: "timings.promotion_poll_s",
        real_s: 10,
        source: "one describe every 10 s during a promotion of about a minute",
    },
    PlanFigure {
        field: "timings.promotion_budget_s",
        real_s: 600,
        source: "promotion_poll_s x promotion_max_polls: ten minutes, several times seed 003's 69 s",
    },
    PlanFigure {
        field: "timings.verify_deadline_s",
        real_s: 120,
        source: "two minutes for reads and a write to succeed on S",
    },
    PlanFigure {
        field: "timings.cooldown_s",
        real_s: 1800,
        source: "docs/reference/plan.md: 30 minutes between runs",
    },
    PlanFigure {
        field: "timings.dns_sync_s",
        real_s: 90,
        source: "the plan's default: Route 53's \"within 60 seconds\" and a half more",
    },
    PlanFigure {
        field: "fence.confirm_s",
        real_s: 180,
        source: "the plan's default: the fence waits up to 3 min for the reboot",
    },
    PlanFigure {
        field: "switchover.poll_s",
        real_s: 2,
        source: "the plan's default",
    },
    PlanFigure {
        field: "switchover.settle_s",
        real_s: 5,
        source: "the plan's default",
    },
    PlanFigure {
        field: "switchover.timeout_s",
        real_s: 120,
        source: "the plan's default",
    },
];

/// The largest scale factor. Above it, the plan's one-second floor bends the
/// ratios: a 10 s promotion poll would become 1 s at any larger k.
pub const MAX_SCALE: u32 = 10;

/// How fast the world runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Pace {
    /// Today's compressed figures; the plan as written.
    #[default]
    Fast,
    /// AWS's figures divided by `scale`, the plan's timings too.
    Real {
        /// k: how many times faster than AWS the world runs.
        scale: u32,
    },
}

impl Pace {
    /// From `HANDOVER_PACE` (`fast`, the default, or `real`) and
    /// `HANDOVER_SCALE` (1 to [`MAX_SCALE`], only with `real`).
    pub fn from_env() -> Result<Pace> {
        let var = |name| std::env::var(name).ok().filter(|v: &String| !v.is_empty());
        Pace::parse(
            var("HANDOVER_PACE").as_deref(),
            var("HANDOVER_SCALE").as_deref(),
        )
    }

    /// For a tool that runs only at the fast pace: an error when the
    /// environment asks for another (or for a bad one).
    pub fn fast_only(tool: &str) -> Result<()> {
        match Pace::from_env()? {
            Pace::Fast => Ok(()),
            Pace::Real { .. } => {
                bail!("{tool} runs at the fast pace only: unset HANDOVER_PACE and HANDOVER_SCALE")
            }
        }
    }

    /// [`Pace::from_env`]'s rules, on the two values.
    pub fn parse(pace: Option<&str>, scale: Option<&str>) -> Result<Pace> {
        match (pace.unwrap_or("fast"), scale) {
            ("fast", None) => Ok(Pace::Fast),
            ("fast", Some(s)) => {
                bail!("HANDOVER_SCALE={s:?} applies only with HANDOVER_PACE=real")
            }
            ("real", None) => bail!(
                "HANDOVER_PACE=real needs HANDOVER_SCALE, 1 to {MAX_SCALE} (k: the world runs k times faster than AWS)"
            ),
            ("real", Some(s)) => match s.parse::<u32>() {
                Ok(k) if (1..=MAX_SCALE).contains(&k) => Ok(Pace::Real { scale: k }),
                _ => bail!("HANDOVER_SCALE={s:?}: use a whole number from 1 to {MAX_SCALE}"),
            },
            (other, _) => bail!("HANDOVER_PACE={other:?}: use fast or real"),
        }
    }

    /// The modelled seconds of `f` at this pace.
    pub fn secs(self, f: &Figure) -> f64 {
        match self {
            Pace::Fast => f.fast_s,
            Pace::Real { scale } => f.real_s / f64::from(scale),
        }
    }

    /// [`Pace::secs`] as a duration.
    pub fn of(self, f: &Figure) -> Duration {
        Duration::from_secs_f64(self.secs(f))
    }

    /// Modelled seconds as real ones (k times), at the real pace only.
    pub fn to_real(self, modelled_s: f64) -> Option<f64> {
        match self {
            Pace::Fast => None,
            Pace::Real { scale } => Some(modelled_s * f64::from(scale)),
        }
    }

    /// Give `plan` the real pace's timings and targets, divided by k. At the
    /// fast pace the plan stays as written. Never below one second.
    pub fn scale_plan(self, plan: &mut Plan) {
        let Pace::Real { scale } = self else { return };
        let k = u64::from(scale);
        let s = |field: &str| {
            let f = PLAN
                .iter()
                .find(|f| f.field == field)
                .expect("a PLAN field");
            f.real_s.div_ceil(k).max(1)
        };
        plan.targets.rto_s = s("targets.rto_s");
        plan.targets.rpo_s = s("targets.rpo_s");
        let t = &mut plan.timings;
        t.approval_timeout_s = s("timings.approval_timeout_s");
        t.promotion_poll_s = s("timings.promotion_poll_s");
        let budget = s("timings.promotion_budget_s");
        t.promotion_max_polls =
            u32::try_from(budget.div_ceil(t.promotion_poll_s)).unwrap_or(u32::MAX);
        t.verify_deadline_s = s("timings.verify_deadline_s");
        t.cooldown_s = s("timings.cooldown_s");
        t.dns_sync_s = s("timings.dns_sync_s");
        plan.fence.confirm_s = s("fence.confirm_s");
        let sw = &mut plan.switchover;
        sw.poll_s = s("switchover.poll_s");
        sw.settle_s = s("switchover.settle_s").max(sw.poll_s);
        sw.timeout_s = s("switchover.timeout_s").max(sw.settle_s + sw.poll_s);
        // The lease taken covers the longest run by itself
        // (`Plan::failover_lease_s`): its tasks' timeouts are not scaled.
    }

    /// One line for the drill's log and summary.
    pub fn describe(self) -> String {
        match self {
            Pace::Fast => "fast (compressed figures; the plan as written)".into(),
            Pace::Real { scale } => format!(
                "real, k = {scale}: AWS's durations and the plan's timings divided by {scale}; figures are modelled and shown x{scale} as real time"
            ),
        }
    }
}

#[cfg(test)]
#[path = "pace_tests.rs"]
mod tests;
