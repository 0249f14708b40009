//! A planned switchover's catch-up: promote only once S has every write P
//! made, proven by a measured condition, never by a fixed sleep.
//!
//! After the fence (deny-all group, then the restart that ends every
//! session) P can take no more writes. The condition is read on S, through
//! the canary's connection (S is the one database the canary reaches; the
//! fence group admits nothing to P), in `pg_stat_wal_receiver`:
//!
//! 1. S is still a replica and its WAL receiver runs (`pid`, `streaming`);
//! 2. the receiver has heard from P since the fence was confirmed: its
//!    `last_msg_send_time` (P's clock, from the last message of P's
//!    walsender) is later than the fence's confirmation plus
//!    [`CLOCK_MARGIN`]. A receiver that has heard nothing yet is told
//!    apart: PostgreSQL starts one with its send, receipt and end times all
//!    set to S's own clock (walreceiver.c, "Initialise to a sanish value"),
//!    so equal send and receipt times mean no message arrived;
//! 3. S has replayed up to the WAL end that message carried
//!    (`latest_end_lsn`, set from every message: P's flush position in
//!    WAL data, its sent position in a keepalive);
//! 4. all of it held, on the same receiver and with P's end unchanged, for
//!    the plan's `settle_s` and at least two readings. Since the fence ended
//!    P's sessions, P's end only moves by P's own background records; a
//!    move restarts the settle.
//!
//! RDS's ReplicaLag is not the condition: for PostgreSQL it is
//! `now() - pg_last_xact_replay_timestamp()` (RDS User Guide, "Monitoring
//! and tuning the replication process"), which grows while P takes no
//! writes, so after a fence it never reads 0 however caught up S is.
//!
//! A reading that fails, or a condition that does not hold within the
//! plan's `timeout_s`, ends in `timed_out`: the run stops before promotion,
//! and audit's compensation unfences P. A reading that can never succeed
//! (an http canary, a user without the grant to read the positions) ends
//! it at once. Nothing is promoted with lost writes.

use super::StepError;
use super::canary::{DbCredentials, Secrets, connect, db_error, pg_target};
use crate::execution::{
    CatchUpResult, CatchUpStatus, ExecutionState, FenceOutcome, FenceResult, Mode,
};
use crate::plan::SwitchoverPolicy;
use chrono::{DateTime, Utc};
use std::time::Duration;
use tracing::info;

/// How much later than the fence's confirmation (the Lambda's clock) P's
/// last message must be sent (P's clock) to count as sent after it.
pub const CLOCK_MARGIN: chrono::Duration = chrono::Duration::seconds(1);

/// What one reading of S's WAL receiver saw.
#[derive(Debug, Clone, PartialEq)]
pub struct WalReading {
    /// `pg_is_in_recovery()`: S is still a replica.
    pub in_recovery: bool,
    /// `pg_stat_wal_receiver.status` (`None`: no WAL receiver runs).
    pub receiver: Option<String>,
    /// The receiver's process id.
    pub pid: Option<i32>,
    /// P's WAL end as P's last message carried it (`latest_end_lsn`).
    pub p_wal_end: Option<u64>,
    /// When P sent its last message (`last_msg_send_time`, P's clock).
    pub p_sent_at: Option<DateTime<Utc>>,
    /// When S received it (`last_msg_receipt_time`, S's clock).
    pub s_received_at: Option<DateTime<Utc>>,
    /// `pg_last_wal_replay_lsn()`.
    pub s_replayed: Option<u64>,
}

/// Why a reading failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadError {
    /// Worth reading again (a timeout, a refused connection).
    Transient(String),
    /// It can never succeed with this plan and grant: stop now.
    Permanent(String),
}

/// Read S's WAL receiver (a trait so the condition is tested without a database).
pub trait WalReader {
    /// One reading within `budget`.
    fn read(
        &self,
        budget: Duration,
    ) -> impl std::future::Future<Output = Result<WalReading, ReadError>> + Send;
}

/// A PostgreSQL LSN (`16/B374D848`) as a number.
pub fn parse_lsn(s: &str) -> Option<u64> {
    let (hi, lo) = s.split_once('/')?;
    Some((u64::from_str_radix(hi, 16).ok()? << 32) | u64::from_str_radix(lo, 16).ok()?)
}

/// A number as a PostgreSQL LSN.
pub fn format_lsn(v: u64) -> String {
    format!("{:X}/{:X}", v >> 32, v & 0xFFFF_FFFF)
}

/// The canary's PostgreSQL connection to S, used read-only.
pub struct CanaryWal<'a, S> {
    /// The plan's canary.
    pub canary: &'a crate::plan::Canary,
    /// S's instance endpoint as RDS reports it (None when RDS did not say).
    pub standby_endpoint: Option<String>,
    /// Where the credentials are.
    pub secrets: &'a S,
}

impl<S: Secrets + Sync> WalReader for CanaryWal<'_, S> {
    async fn read(&self, budget: Duration) -> Result<WalReading, ReadError> {
        let attempt = async {
            let Some(t) = pg_target(self.canary, self.standby_endpoint.as_deref(), self.secrets)
                .await
                .map_err(ReadError::Transient)?
            else {
                return Err(ReadError::Permanent(
                    "the canary is http: a planned switchover needs a postgres canary to read S's replay position"
                        .to_string(),
                ));
            };
            let creds: &DbCredentials = &t.creds;
            let (client, conn) = connect(
                t.host,
                t.port,
                t.database,
                creds,
                t.tls.map(|(c, _)| c),
                "handover-catch-up",
            )
            .await
            .map_err(ReadError::Transient)?;
            // `pg_stat_wal_receiver` shows its positions only to roles with
            // pg_read_all_stats (pg_monitor); to others every column but
            // the pid is NULL.
            let row = client
                .query_one(
                    "SELECT pg_is_in_recovery(), pg_last_wal_replay_lsn()::text, \
                     r.status, r.latest_end_lsn::text, r.last_msg_send_time, r.pid, \
                     r.last_msg_receipt_time \
                     FROM (SELECT 1) one LEFT JOIN pg_stat_wal_receiver r ON true",
                    &[],
                )
                .await
                .map_err(|e| {
                    ReadError::Transient(format!("reading pg_stat_wal_receiver: {}", db_error(&e)))
                });
            drop(client);
            conn.abort();
            let row = row?;
            let receiver: Option<String> = row.get(2);
            let pid: Option<i32> = row.get(5);
            if pid.is_some() && receiver.is_none() {
                return Err(ReadError::Permanent(format!(
                    "user {} cannot read pg_stat_wal_receiver's positions: grant it pg_read_all_stats (or pg_monitor)",
                    creds.username
                )));
            }
            Ok(WalReading {
                in_recovery: row.get(0),
                s_replayed: row
                    .get::<_, Option<String>>(1)
                    .as_deref()
                    .and_then(parse_lsn),
                receiver,
                pid,
                p_wal_end: row
                    .get::<_, Option<String>>(3)
                    .as_deref()
                    .and_then(parse_lsn),
                p_sent_at: row.get(4),
                s_received_at: row.get(6),
            })
        };
        tokio::time::timeout(budget, attempt)
            .await
            .unwrap_or_else(|_| {
                Err(ReadError::Transient(format!(
                    "S's database did not answer within {} ms",
                    budget.as_millis()
                )))
            })
    }
}

/// Fold one reading into the catch-up so far (`prev`: the last result of
/// this run, `None` on the first reading). `fenced_at`: when the fence was
/// confirmed.
pub fn fold(
    prev: Option<&CatchUpResult>,
    reading: Result<WalReading, ReadError>,
    fenced_at: DateTime<Utc>,
    policy: &SwitchoverPolicy,
    now: DateTime<Utc>,
) -> CatchUpResult {
    // Only this fence's catch-up counts: a `$.catch_up` from before it (an
    // input that carried one) is no reading of this run.
    let prev = prev.filter(|p| {
        p.started_at >= fenced_at
            && p.started_at <= now
            && p.held_since.is_none_or(|h| h >= p.started_at && h <= now)
    });
    let started_at = prev.map_or(now, |p| p.started_at);
    let readings = prev.map_or(0, |p| p.readings) + 1;
    let mut out = CatchUpResult {
        status: CatchUpStatus::Waiting,
        poll_s: policy.poll_s,
        started_at,
        held_since: None,
        caught_up_at: None,
        p_wal_end: None,
        p_reported_at: None,
        receiver_pid: None,
        held_readings: 0,
        s_replayed: None,
        gap_bytes: None,
        readings,
        detail: String::new(),
    };
    let holds = match reading {
        Err(ReadError::Permanent(e)) => {
            out.status = CatchUpStatus::TimedOut;
            out.detail = format!("S's replay cannot be measured: {e}");
            return out;
        }
        Err(ReadError::Transient(e)) => {
            out.detail = format!("S could not be read: {e}");
            false
        }
        Ok(r) => {
            out.p_wal_end = r.p_wal_end.map(format_lsn);
            out.p_reported_at = r.p_sent_at;
            out.receiver_pid = r.pid;
            out.s_replayed = r.s_replayed.map(format_lsn);
            out.gap_bytes = match (r.p_wal_end, r.s_replayed) {
                (Some(p), Some(s)) => Some(p.saturating_sub(s)),
                _ => None,
            };
            let heard = r.p_sent_at.is_some() && r.p_sent_at != r.s_received_at;
            let fresh = heard && r.p_sent_at.is_some_and(|t| t > fenced_at + CLOCK_MARGIN);
            let (holds, why) = if !r.in_recovery {
                (false, "S is not a replica any more".to_string())
            } else if r.pid.is_none() || r.receiver.as_deref() != Some("streaming") {
                (
                    false,
                    format!(
                        "S's WAL receiver is {}, not streaming from P",
                        r.receiver.as_deref().unwrap_or("not running")
                    ),
                )
            } else if !heard {
                (
                    false,
                    "S's WAL receiver has not heard from P since it started".to_string(),
                )
            } else if !fresh {
                (
                    false,
                    format!(
                        "P has sent S nothing since the fence was confirmed at {} (its last message: {})",
                        fenced_at.to_rfc3339(),
                        r.p_sent_at
                            .map_or_else(|| "never".to_string(), |t| t.to_rfc3339())
                    ),
                )
            } else if out.gap_bytes != Some(0) {
                (
                    false,
                    format!(
                        "S has replayed {} of P's WAL end {}: {} bytes behind",
                        out.s_replayed.as_deref().unwrap_or("nothing"),
                        out.p_wal_end.as_deref().unwrap_or("unknown"),
                        out.gap_bytes
                            .map_or_else(|| "unknown".to_string(), |g| g.to_string())
                    ),
                )
            } else {
                (
                    true,
                    format!(
                        "S has replayed P's WAL end {}, which P sent at {} (after the fence)",
                        out.p_wal_end.as_deref().unwrap_or("?"),
                        r.p_sent_at.map(|t| t.to_rfc3339()).unwrap_or_default()
                    ),
                )
            };
            out.detail = why;
            holds
        }
    };
    if holds {
        // The settle goes on only on the same receiver with P's end where it
        // was: a new receiver, or P's end moving (P's own background
        // records), starts it again.
        let continued = prev.filter(|p| {
            p.held_since.is_some()
                && p.p_wal_end == out.p_wal_end
                && p.receiver_pid == out.receiver_pid
        });
        let held_since = continued.and_then(|p| p.held_since).unwrap_or(now);
        out.held_since = Some(held_since);
        out.held_readings = continued.map_or(0, |p| p.held_readings) + 1;
        let held = (now - held_since).num_milliseconds();
        let settle_ms = i64::try_from(policy.settle_s.saturating_mul(1000)).unwrap_or(i64::MAX);
        if held >= settle_ms && out.held_readings >= 2 {
            out.status = CatchUpStatus::CaughtUp;
            out.caught_up_at = Some(now);
            out.detail = format!(
                "{}; held {:.1} s over {} readings",
                out.detail,
                held as f64 / 1000.0,
                out.held_readings
            );
            return out;
        }
    }
    let waited = (now - started_at).num_milliseconds();
    if waited >= i64::try_from(policy.timeout_s.saturating_mul(1000)).unwrap_or(i64::MAX) {
        out.status = CatchUpStatus::TimedOut;
        out.detail = format!(
            "S did not catch up with P within switchover.timeout_s ({} s): {}",
            policy.timeout_s, out.detail
        );
    }
    out
}

/// One catch-up reading of the run in `state`.
pub async fn read<W: WalReader>(
    state: &ExecutionState,
    wal: &W,
    now: impl Fn() -> DateTime<Utc>,
) -> Result<CatchUpResult, StepError> {
    let plan = &state.input.plan;
    if state.input.mode != Mode::Switchover {
        return Err(StepError::Precondition(format!(
            "catch-up belongs to a planned switchover; this run is a {}",
            state.input.mode.as_str()
        )));
    }
    let fence: FenceResult = state
        .require("fence")
        .map_err(|e| StepError::Precondition(e.message))?;
    if fence.outcome != FenceOutcome::Confirmed {
        return Err(StepError::Precondition(
            "a planned switchover needs a confirmed fence: P may still take writes".into(),
        ));
    }
    if !plan.fence.end_sessions {
        // Without the restart, P's open sessions go on writing through the
        // deny-all group (it stops only new connections).
        return Err(StepError::Precondition(
            "a planned switchover needs fence.end_sessions: true: P's open sessions would go on writing".into(),
        ));
    }
    let prev: Option<CatchUpResult> = state
        .step("catch_up")
        .map_err(|e| StepError::Precondition(e.message))?;
    let budget = Duration::from_millis(plan.timings.call_timeout_ms);
    let reading = wal.read(budget).await;
    let out = fold(
        prev.as_ref(),
        reading,
        fence.fenced_at,
        &plan.switchover,
        now(),
    );
    info!(
        status = ?out.status,
        p_wal_end = ?out.p_wal_end,
        s_replayed = ?out.s_replayed,
        gap_bytes = ?out.gap_bytes,
        readings = out.readings,
        detail = %out.detail,
        "catch-up reading"
    );
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> SwitchoverPolicy {
        SwitchoverPolicy {
            settle_s: 4,
            timeout_s: 20,
            poll_s: 2,
        }
    }

    fn t(s: i64) -> DateTime<Utc> {
        chrono::TimeZone::timestamp_opt(&Utc, 1_800_000_000 + s, 0).unwrap()
    }

    /// A receiver (pid 7) that heard from P at `sent` (received a little later).
    fn reading(p_end: u64, sent: i64, replayed: u64) -> Result<WalReading, ReadError> {
        Ok(WalReading {
            in_recovery: true,
            receiver: Some("streaming".into()),
            pid: Some(7),
            p_wal_end: Some(p_end),
            p_sent_at: Some(t(sent)),
            s_received_at: Some(t(sent) + chrono::Duration::milliseconds(3)),
            s_replayed: Some(replayed),
        })
    }

    #[test]
    fn lsns_read_and_print_as_postgresql_writes_them() {
        assert_eq!(parse_lsn("0/3015FD0"), Some(0x3015FD0));
        assert_eq!(parse_lsn("16/B374D848"), Some((0x16 << 32) | 0xB374D848));
        assert_eq!(format_lsn(0x3015FD0), "0/3015FD0");
        assert_eq!(parse_lsn("nonsense"), None);
    }

    #[test]
    fn caught_up_only_after_the_condition_held_for_settle_s_over_two_readings() {
        let p = policy();
        let a = fold(None, reading(100, 2, 100), t(0), &p, t(2));
        assert_eq!(a.status, CatchUpStatus::Waiting);
        assert_eq!((a.held_since, a.held_readings), (Some(t(2)), 1));
        let b = fold(Some(&a), reading(100, 3, 100), t(0), &p, t(4));
        assert_eq!(b.status, CatchUpStatus::Waiting, "{}", b.detail);
        let c = fold(Some(&b), reading(100, 5, 100), t(0), &p, t(6));
        assert_eq!(c.status, CatchUpStatus::CaughtUp, "{}", c.detail);
        assert_eq!(c.caught_up_at, Some(t(6)));
        assert_eq!((c.gap_bytes, c.held_readings, c.readings), (Some(0), 3, 3));
        assert!(
            c.detail.ends_with("held 4.0 s over 3 readings"),
            "{}",
            c.detail
        );
        // A settle of 0 still takes two readings that agree.
        let zero = SwitchoverPolicy { settle_s: 0, ..p };
        let one = fold(None, reading(100, 2, 100), t(0), &zero, t(2));
        assert_eq!(one.status, CatchUpStatus::Waiting);
        let two = fold(Some(&one), reading(100, 3, 100), t(0), &zero, t(3));
        assert_eq!(two.status, CatchUpStatus::CaughtUp);
    }

    #[test]
    fn nothing_from_p_since_the_fence_or_a_gap_does_not_count() {
        let p = policy();
        // P's last message predates the fence (and the margin): P may have
        // written after it.
        let a = fold(None, reading(100, 1, 100), t(0), &p, t(2));
        assert_eq!(a.held_since, None);
        assert!(
            a.detail.contains("P has sent S nothing since the fence"),
            "{}",
            a.detail
        );
        // S is behind.
        let b = fold(Some(&a), reading(300, 3, 100), t(0), &p, t(4));
        assert_eq!(b.held_since, None);
        assert_eq!(b.gap_bytes, Some(200));
        assert!(b.detail.contains("200 bytes behind"), "{}", b.detail);
        // No receiver (a partition, or P down).
        let mut r = reading(300, 3, 300).unwrap();
        r.receiver = None;
        r.pid = None;
        let c = fold(Some(&b), Ok(r), t(0), &p, t(6));
        assert_eq!(c.held_since, None);
        assert!(c.detail.contains("not running"), "{}", c.detail);
        // A transient error is no reading.
        let d = fold(
            Some(&c),
            Err(ReadError::Transient("refused".into())),
            t(0),
            &p,
            t(8),
        );
        assert_eq!((d.held_since, d.status), (None, CatchUpStatus::Waiting));
        assert!(d.detail.contains("refused"));
    }

    /// PostgreSQL starts a WAL receiver with its send, receipt and end-time
    /// fields all set to S's clock, and keeps the WAL end of the connection
    /// before: a receiver restarted after the fence that has not heard from
    /// P yet (a partition holding its handshake) looks fresh and caught up
    /// to that old end. It must not count.
    #[test]
    fn a_restarted_receiver_that_has_not_heard_from_p_does_not_count() {
        let p = policy();
        let started = t(5);
        let fresh_looking = Ok(WalReading {
            in_recovery: true,
            receiver: Some("streaming".into()),
            pid: Some(8),
            p_wal_end: Some(100),
            p_sent_at: Some(started),
            s_received_at: Some(started),
            s_replayed: Some(100),
        });
        let mut prev = fold(None, fresh_looking.clone(), t(0), &p, t(6));
        for s in [8, 10, 12] {
            prev = fold(Some(&prev), fresh_looking.clone(), t(0), &p, t(s));
            assert_eq!(prev.status, CatchUpStatus::Waiting);
            assert_eq!(prev.held_since, None);
        }
        assert!(
            prev.detail.contains("has not heard from P"),
            "{}",
            prev.detail
        );
    }

    #[test]
    fn a_new_receiver_or_p_s_end_moving_restarts_the_settle() {
        let p = policy();
        let a = fold(None, reading(100, 2, 100), t(0), &p, t(2));
        let b = fold(Some(&a), reading(150, 3, 150), t(0), &p, t(4));
        assert_eq!(b.held_since, Some(t(4)), "P's end moved");
        let mut r = reading(150, 5, 150).unwrap();
        r.pid = Some(9);
        let c = fold(Some(&b), Ok(r), t(0), &p, t(6));
        assert_eq!(
            (c.held_since, c.held_readings),
            (Some(t(6)), 1),
            "another receiver"
        );
        let mut r = reading(150, 7, 150).unwrap();
        r.pid = Some(9);
        let d = fold(Some(&c), Ok(r.clone()), t(0), &p, t(8));
        assert_eq!(d.status, CatchUpStatus::Waiting);
        let e = fold(Some(&d), Ok(r), t(0), &p, t(10));
        assert_eq!(e.status, CatchUpStatus::CaughtUp);
    }

    #[test]
    fn a_catch_up_from_before_the_fence_is_not_this_run_s() {
        let p = policy();
        let mut forged = fold(None, reading(100, 2, 100), t(0), &p, t(2));
        forged.held_since = Some(t(-100));
        forged.held_readings = 9;
        forged.started_at = t(-100);
        let first = fold(Some(&forged), reading(100, 3, 100), t(0), &p, t(3));
        assert_eq!(first.status, CatchUpStatus::Waiting);
        assert_eq!((first.readings, first.held_readings), (1, 1));
        assert_eq!(first.started_at, t(3));
    }

    #[test]
    fn it_times_out_at_the_plan_s_bound_saying_why_and_at_once_when_it_never_can() {
        let p = policy();
        let mut prev = fold(None, reading(300, 2, 100), t(0), &p, t(0));
        for s in (2..20).step_by(2) {
            prev = fold(Some(&prev), reading(300, s, 100), t(0), &p, t(s));
            assert_eq!(prev.status, CatchUpStatus::Waiting);
        }
        let end = fold(Some(&prev), reading(300, 20, 100), t(0), &p, t(20));
        assert_eq!(end.status, CatchUpStatus::TimedOut);
        assert!(end.detail.contains("within switchover.timeout_s (20 s)"));
        assert!(end.detail.contains("200 bytes behind"), "{}", end.detail);
        assert_eq!(end.readings, 11);
        let never = fold(
            None,
            Err(ReadError::Permanent("grant it pg_read_all_stats".into())),
            t(0),
            &p,
            t(1),
        );
        assert_eq!(never.status, CatchUpStatus::TimedOut);
        assert!(
            never.detail.contains("cannot be measured"),
            "{}",
            never.detail
        );
    }
}
