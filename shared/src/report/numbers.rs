//! The four numbers, the further durations and the milestones.
//!
//! Pure functions of the execution input, the typed step outputs, the
//! history facts, the first backup time (post-check) and "now".

use super::facts::{RunFacts, seconds};
use super::model::{Measure, Numbers, Span, Status};
use crate::execution::{
    ApprovalResult, Check, Diagnosis, ExecutionInput, FenceOutcome, FenceResult, PromotionResult,
    PromotionStatus, SwitchResult, VerifyResult,
};
use crate::public::PublicObservation;
use crate::units::fmt_num;
use chrono::{DateTime, Utc};

/// The step outputs, typed (each `None` when the step did not run or its output was unreadable).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Steps {
    /// `$.diagnosis`.
    pub diagnosis: Option<Diagnosis>,
    /// `$.approval`.
    pub approval: Option<ApprovalResult>,
    /// `$.recheck`.
    pub recheck: Option<Diagnosis>,
    /// `$.fence`.
    pub fence: Option<FenceResult>,
    /// `$.promotion` (the last poll).
    pub promotion: Option<PromotionResult>,
    /// `$.catch_up`: a planned switchover's last catch-up reading.
    pub catch_up: Option<crate::execution::CatchUpResult>,
    /// `$.first_write`: the write canary right after promotion.
    pub first_write: Option<Check>,
    /// `$.switch`.
    pub switch: Option<SwitchResult>,
    /// `$.verify`.
    pub verify: Option<VerifyResult>,
}

impl Steps {
    /// When promotion was seen complete.
    pub fn promoted_at(&self) -> Option<DateTime<Utc>> {
        self.promotion
            .as_ref()
            .filter(|p| p.status == PromotionStatus::Promoted)
            .and_then(|p| p.promoted_at)
    }
    /// verify's first 200 from S.
    pub fn first_read(&self) -> Option<DateTime<Utc>> {
        self.verify.as_ref().and_then(|v| v.read.first_success_at)
    }
    /// First successful write users could make: S took a write and the
    /// writer endpoint named S.
    pub fn first_write(&self) -> Option<DateTime<Utc>> {
        self.first_write_with_source().map(|(t, _)| t)
    }
    /// When S itself took a write: the canary right after promotion, before
    /// the switch (users writing through the writer endpoint could not yet).
    pub fn s_writable(&self) -> Option<DateTime<Utc>> {
        self.first_write.as_ref().and_then(|c| c.first_success_at)
    }
    /// [`Steps::first_write`] and where it comes from: the later of S's
    /// first write and the switch (which moved the writer endpoint), or
    /// verify's write if that came first.
    pub fn first_write_with_source(&self) -> Option<(DateTime<Utc>, &'static str)> {
        let early = match (
            self.s_writable(),
            self.switch.as_ref().map(|s| s.switched_at),
        ) {
            (Some(w), Some(sw)) if w >= sw => Some((w, "$.first_write.first_success_at")),
            (Some(_), Some(sw)) => Some((
                sw,
                "$.switch.switched_at (S took the canary's write before it: users' writes waited for the writer endpoint)",
            )),
            // Never switched: S was writable, but not where users write.
            _ => None,
        };
        let verify = self
            .verify
            .as_ref()
            .and_then(|v| v.write.first_success_at)
            .map(|t| (t, "$.verify.write.first_success_at"));
        [early, verify]
            .into_iter()
            .flatten()
            .min_by_key(|(t, _)| *t)
    }
    /// When traffic was on S by the run's own record: the switch, or verify's
    /// first read if that came earlier.
    pub fn traffic_on_s(&self) -> Option<(DateTime<Utc>, &'static str)> {
        let switched = self.switch.as_ref().map(|s| s.switched_at);
        match (switched, self.first_read()) {
            (Some(s), Some(r)) if r < s => Some((r, "$.verify.read.first_success_at")),
            (Some(s), _) => Some((s, "$.switch.switched_at")),
            (None, Some(r)) => Some((r, "$.verify.read.first_success_at")),
            (None, None) => None,
        }
    }
}

/// Inputs of the computations.
pub struct Basis<'a> {
    /// The execution input.
    pub input: &'a ExecutionInput,
    /// Typed step outputs.
    pub steps: &'a Steps,
    /// History facts.
    pub facts: &'a RunFacts,
    /// First completed backup of the new primary (post-check), with its source.
    pub backup: Option<(DateTime<Utc>, String)>,
    /// Report time.
    pub now: DateTime<Utc>,
}

/// Every observation of the public name the run left, in time order:
/// detect's ticks (the input's evidence and the ones audit read from the
/// probe run), the diagnosis, the re-check, and verify's read as one more.
pub fn observations(b: &Basis<'_>) -> Vec<PublicObservation> {
    let mut all: Vec<PublicObservation> = b
        .input
        .evidence
        .iter()
        .filter_map(|e| e.get("public").cloned())
        .filter_map(|v| serde_json::from_value(v).ok())
        .chain(b.facts.observations.iter().cloned())
        .chain(b.steps.diagnosis.as_ref().and_then(|d| d.public.clone()))
        .chain(b.steps.recheck.as_ref().and_then(|d| d.public.clone()))
        .collect();
    if let Some(v) = &b.steps.verify
        && let Some(at) = v.read.first_success_at
    {
        all.push(PublicObservation {
            at,
            by: "verify".into(),
            dns: Vec::new(),
            dns_side: None,
            status: Some(200),
            served_by: Some(crate::public::Side::S),
            ttl_s: None,
            error: None,
        });
    }
    all.sort_by_key(|o| o.at);
    all.dedup_by(|a, b| a.at == b.at && a.by == b.by);
    all
}

/// Users' first read from S (at or after T0), with the last observation
/// before it that was not one.
fn first_read_from_s(b: &Basis<'_>) -> Option<(PublicObservation, Option<PublicObservation>)> {
    let all = observations(b);
    let i = all
        .iter()
        .position(|o| o.at >= b.input.t0 && o.reads_from_s())?;
    let before = all[..i]
        .iter()
        .rev()
        .find(|o| o.at >= b.input.t0 && !o.reads_from_s())
        .cloned();
    Some((all[i].clone(), before))
}

/// `m:ss` (or `h:mm:ss`), negative with a sign.
pub fn clock(s: f64) -> String {
    let sign = if s < 0.0 { "-" } else { "" };
    let total = s.abs().round() as i64;
    let (h, m, sec) = (total / 3600, (total % 3600) / 60, total % 60);
    if h > 0 {
        format!("{sign}{h}:{m:02}:{sec:02}")
    } else {
        format!("{sign}{m}:{sec:02}")
    }
}

fn rto(
    b: &Basis<'_>,
    key: &str,
    label: &str,
    to: Option<DateTime<Utc>>,
    source: &str,
    pending_note: &str,
) -> Measure {
    let t0 = b.input.t0;
    let target = b.input.plan.targets.rto_s;
    let value = to.map(|t| seconds(t0, t));
    // The conservative RTO's point (the new primary's first backup) comes
    // after the run: the run's end does not make it "not reached".
    let ended = b.facts.terminal.is_some() && key != "conservative_rto";
    let status = match value {
        Some(v) if v <= target as f64 => Status::Pass,
        Some(_) => Status::Miss,
        // The run ended without it: it will not happen (not "pending").
        None if ended => Status::NotReached,
        None if seconds(t0, b.now) > target as f64 => Status::Miss,
        None => Status::Pending,
    };
    let why = b.facts.terminal.as_ref().map(|t| {
        format!(
            "the run ended {}{}",
            t.kind.trim_start_matches("Execution").to_ascii_lowercase(),
            t.error
                .as_deref()
                .map(|e| format!(" ({e})"))
                .unwrap_or_default()
        )
    });
    let how = match (value, ended) {
        (Some(v), _) => format!("T0 {} → {source} {} = {}", hms(t0), hms_opt(to), clock(v)),
        (None, true) => format!(
            "not reached: {} before it ({pending_note})",
            why.unwrap_or_else(|| "the run ended".into())
        ),
        (None, _) if status == Status::Miss => format!(
            "not reached ({pending_note}); {} since T0 already exceeds the target",
            clock(seconds(t0, b.now))
        ),
        (None, false) => format!("pending: not reached yet ({pending_note})"),
    };
    Measure {
        key: key.into(),
        label: label.into(),
        value_s: value,
        target_s: target,
        status,
        how,
        from_at: Some(t0),
        to_at: to,
    }
}

pub(crate) fn hms(t: DateTime<Utc>) -> String {
    t.format("%H:%M:%S").to_string()
}

fn hms_opt(t: Option<DateTime<Utc>>) -> String {
    t.map_or_else(|| "?".into(), hms)
}

/// The four numbers.
pub fn numbers(b: &Basis<'_>) -> Numbers {
    let s = b.steps;
    let backup_source = b
        .backup
        .as_ref()
        .map_or("post-check", |(_, src)| src.as_str());
    let first = first_read_from_s(b);
    let mut read_rto = rto(
        b,
        "read_rto",
        "Read RTO",
        first.as_ref().map(|(o, _)| o.at),
        "the first 200 from S through the public name",
        "no 200 from S through the public name recorded",
    );
    if let Some((o, before)) = &first {
        let t0 = b.input.t0;
        read_rto.how = format!(
            "{} (between {} and {}, {}): T0 {} → the first 200 from S through the public name, at {} ({}); {}",
            clock(seconds(t0, o.at)),
            before
                .as_ref()
                .map_or_else(|| "T0".to_owned(), |p| clock(seconds(t0, p.at))),
            clock(seconds(t0, o.at)),
            o.by,
            hms(t0),
            hms(o.at),
            o.by,
            match before {
                Some(p) => format!(
                    "the observation before it did not read from S: {}",
                    p.describe()
                ),
                None => "no observation after T0 before it".into(),
            }
        );
    }
    let mut write_rto = rto(
        b,
        "write_rto",
        "Write RTO",
        s.first_write(),
        s.first_write_with_source()
            .map_or("$.verify.write.first_success_at", |(_, src)| src),
        "no successful write recorded",
    );
    if let Some(sw) = s.switch.as_ref().filter(|sw| !sw.unsynced.is_empty()) {
        write_rto.how.push_str(&format!(
            "; Route 53 had not confirmed every change at the switch ({}): resolvers may have answered the old value longer",
            sw.unsynced.join("; ")
        ));
    }
    let mut conservative_rto = rto(
        b,
        "conservative_rto",
        "Conservative RTO",
        b.backup.as_ref().map(|(t, _)| *t),
        backup_source,
        "no completed backup of the new primary yet",
    );
    if b.backup.is_none() && s.promoted_at().is_none() {
        conservative_rto.status = Status::NotApplicable;
        conservative_rto.how = "nothing was promoted: no new primary to back up".into();
    }
    let target = b.input.plan.targets.rpo_s;
    let switchover = b.input.mode == crate::execution::Mode::Switchover;
    let mut rpo = match &s.promotion {
        // A planned switchover promotes only what caught up: RPO 0, measured.
        Some(p) if switchover => Measure {
            key: "rpo".into(),
            label: "RPO".into(),
            value_s: Some(p.rpo_s),
            target_s: target,
            status: if p.rpo_s == 0.0 {
                Status::Pass
            } else {
                Status::Miss
            },
            how: match s.catch_up.as_ref() {
                Some(c) => format!(
                    "0, measured, not estimated: after the fence was confirmed{}, S replayed P's WAL end {} (in P's message sent at {}), and it held {} s over {} readings before the promotion call at {}",
                    s.fence
                        .as_ref()
                        .map(|f| format!(" at {}", hms(f.fenced_at)))
                        .unwrap_or_default(),
                    c.p_wal_end.as_deref().unwrap_or("?"),
                    c.p_reported_at.map(hms).unwrap_or_else(|| "?".into()),
                    match (c.held_since, c.caught_up_at) {
                        (Some(h), Some(u)) => fmt_num((u - h).num_milliseconds() as f64 / 1000.0),
                        _ => "?".into(),
                    },
                    c.held_readings,
                    hms(p.promote_started_at)
                ),
                None => "the run's catch-up reading is missing from the history: RPO 0 is the promotion's record ($.promotion.rpo_s), not shown here".into(),
            },
            from_at: Some(p.lag_sampled_at),
            to_at: Some(p.promote_started_at),
        },
        Some(p) => {
            let over = p.rpo_s < 0.0 || p.rpo_s > target as f64;
            Measure {
                key: "rpo".into(),
                label: "RPO".into(),
                value_s: (p.rpo_s >= 0.0).then_some(p.rpo_s),
                target_s: target,
                status: if over { Status::Miss } else { Status::Pass },
                how: if p.rpo_s < 0.0 {
                    format!(
                        "no ReplicaLag sample in the 5 minutes before {} and the approver accepted an unknown data loss ($.promotion.rpo_s = -1): the data lost is unknown",
                        hms(p.lag_sampled_at)
                    )
                } else {
                    // P went on taking writes after the sample until its
                    // fence ended them: the estimate is exact only if
                    // replication kept up in between.
                    let until_fence = s
                        .fence
                        .as_ref()
                        .filter(|f| f.outcome == FenceOutcome::Confirmed)
                        .map(|f| {
                            ((f.fenced_at - p.lag_sampled_at).num_milliseconds() as f64 / 1000.0)
                                .max(0.0)
                        });
                    format!(
                        "ReplicaLag of S's replica, the worst of the minute from {} read just before the promotion call ($.promotion.rpo_s) = {} s (an estimate: {})",
                        hms(p.lag_sampled_at),
                        fmt_num(p.rpo_s),
                        match until_fence {
                            Some(a) => format!(
                                "if replication stopped right after that minute began, the writes P took until its fence was confirmed {} s later are lost too, at most {} s in all",
                                fmt_num(a),
                                fmt_num(p.rpo_s + a)
                            ),
                            None => "P's fence was not confirmed, so writes P took after the sample may be lost too, without bound".into(),
                        }
                    )
                },
                from_at: Some(p.lag_sampled_at),
                to_at: Some(p.promote_started_at),
            }
        }
        None => Measure {
            key: "rpo".into(),
            label: "RPO".into(),
            value_s: None,
            target_s: target,
            status: if b.facts.terminal.is_some() {
                Status::NotApplicable
            } else {
                Status::Pending
            },
            how: match s.catch_up.as_ref() {
                Some(c) if switchover && c.status != crate::execution::CatchUpStatus::CaughtUp => {
                    format!(
                        "no promotion: S did not catch up ({}), so nothing was promoted and no write was given up",
                        c.detail
                    )
                }
                _ => "no promotion: no data was given up".into(),
            },
            from_at: None,
            to_at: None,
        },
    };
    // Measured on both databases after the run: the truth, shown next to
    // the estimate the approver and the promotion went by.
    if let (Some(m), Some(p)) = (&b.facts.measured_rpo, &s.promotion) {
        let estimate = if p.rpo_s < 0.0 {
            "unknown (no ReplicaLag sample; the approver accepted an unknown loss)".to_owned()
        } else {
            format!("{} s", fmt_num(p.rpo_s))
        };
        rpo.value_s = Some(m.span_s);
        rpo.status = if m.span_s <= target as f64 {
            Status::Pass
        } else {
            Status::Miss
        };
        let after = if m.p_rows_after_cut > 0 {
            format!(
                " P also holds {} rows written after the promotion call (a fence that did not hold, or P rebuilt since): not counted here.",
                m.p_rows_after_cut
            )
        } else {
            String::new()
        };
        rpo.how = format!(
            "RPO measured: {}, estimate was {estimate}. Measured at {} on both databases ({}): S's newest row before the promotion call {} was written at {}, P's newest at {}.{after} Estimate: {}",
            m.describe(),
            hms(m.measured_at),
            m.read_from,
            hms(m.cut),
            m.s_newest_at.map_or_else(
                || "never (S had none)".into(),
                |t| t.format("%H:%M:%S%.3f").to_string()
            ),
            m.p_newest_at.map_or_else(
                || "never (P had none)".into(),
                |t| t.format("%H:%M:%S%.3f").to_string()
            ),
            rpo.how
        );
        rpo.from_at = m.s_newest_at.or(m.first_lost_at);
        rpo.to_at = m.p_newest_at;
    }
    Numbers {
        read_rto,
        write_rto,
        conservative_rto,
        rpo,
    }
}

fn span(
    key: &str,
    label: &str,
    from: Option<(DateTime<Utc>, &str)>,
    to: Option<(DateTime<Utc>, &str)>,
) -> Span {
    let value_s = match (from, to) {
        (Some((a, _)), Some((b, _))) => Some(seconds(a, b)),
        _ => None,
    };
    let name = |p: Option<(DateTime<Utc>, &str)>| {
        p.map_or("?".to_owned(), |(t, s)| format!("{s} {}", hms(t)))
    };
    Span {
        key: key.into(),
        label: label.into(),
        value_s,
        how: format!("{} → {}", name(from), name(to)),
    }
}

/// Further durations, in display order.
pub fn durations(b: &Basis<'_>) -> Vec<Span> {
    let s = b.steps;
    let t0 = Some((b.input.t0, "T0"));
    let started = b.facts.started_at.map(|t| (t, "execution start"));
    let ended = b.facts.terminal.as_ref().map(|t| (t.at, "execution end"));
    let requested = s
        .approval
        .as_ref()
        .map(|a| (a.requested_at, "$.approval.requested_at"));
    let decided = s
        .approval
        .as_ref()
        .map(|a| (a.decided_at, "$.approval.decided_at"));
    let promote_call = s
        .promotion
        .as_ref()
        .map(|p| (p.promote_started_at, "$.promotion.promote_started_at"));
    let promoted = s.promoted_at().map(|t| (t, "$.promotion.promoted_at"));
    let first_write = s.first_write_with_source();
    // Users reach S when the public name first serves a 200 from S (Route
    // 53's health-check failover moves reads by itself, often long before
    // the switch); from then until the first write, S is read-only to them.
    let users_on_s = first_read_from_s(b)
        .map(|(o, _)| (o.at, "the first 200 from S through the public name"))
        .into_iter()
        .chain(s.traffic_on_s())
        .min_by_key(|(t, _)| *t);
    let mut out = vec![
        span("detection_delay", "Detection delay", t0, started),
        span("time_to_ask", "Time to ask", started, requested),
        span("human_decision", "Human decision", requested, decided),
        span(
            "approval_to_promotion",
            "Approval → promotion call",
            decided,
            promote_call,
        ),
        span("promotion", "Promotion", promote_call, promoted),
        span(
            "promotion_to_writable",
            "Promotion → S writable (the canary right after promotion)",
            promoted,
            s.s_writable()
                .map(|t| (t, "$.first_write.first_success_at")),
        ),
        span(
            "promotion_to_first_write",
            "Promotion → first write",
            promoted,
            first_write,
        ),
        span(
            "write_unavailable",
            "Write-unavailable window (users on S, S read-only)",
            users_on_s,
            first_write,
        ),
    ];
    let total = span("total", "Total (T0 → end)", t0, ended);
    let run = match (started, ended) {
        (Some((a, _)), Some((z, _))) => Some(seconds(a, z)),
        _ => None,
    };
    let external: f64 = [&out[2], &out[4]].iter().filter_map(|x| x.value_s).sum();
    debug_assert_eq!(
        (out[2].key.as_str(), out[4].key.as_str()),
        ("human_decision", "promotion")
    );
    // A planned switchover: users lose writes from the fence (P takes no
    // more) to the first write S takes for them, and the catch-up is the
    // part of it spent proving RPO 0.
    if b.input.mode == crate::execution::Mode::Switchover {
        let fence_start = s
            .fence
            .as_ref()
            .map(|f| (f.started_at, "$.fence.started_at"));
        out.push(span(
            "writes_stopped",
            "Writes stopped (the fence → the first write users could make on S)",
            fence_start,
            first_write,
        ));
        out.push(span(
            "catch_up",
            "Catch-up (fence confirmed → S proven to have all of P's WAL)",
            s.fence.as_ref().map(|f| (f.fenced_at, "$.fence.fenced_at")),
            s.catch_up
                .as_ref()
                .and_then(|c| c.caught_up_at)
                .map(|t| (t, "$.catch_up.caught_up_at")),
        ));
    }
    // A failback: re-protection ran before the execution started (the
    // replica's creation and catch-up, timed by `handover failback`).
    if let Some(fb) = &b.input.failback {
        out.push(Span {
            key: "reprotect".into(),
            label: "Re-protect (P's new replica of S created and caught up)".into(),
            value_s: fb
                .reprotect
                .started_at
                .map(|s| seconds(s, fb.reprotect.ready_at)),
            how: match fb.reprotect.started_at {
                Some(_) => format!(
                    "handover failback: CreateDBInstanceReadReplica of {} → available with ReplicaLag {}",
                    fb.reprotect.replica_id,
                    fb.reprotect
                        .lag_s
                        .map(|l| format!("{} s", fmt_num(l)))
                        .unwrap_or_else(|| "unknown".into())
                ),
                None => "the replica existed already when handover failback ran".into(),
            },
        });
    }
    out.push(Span {
        key: "automation_overhead".into(),
        label: "Automation overhead".into(),
        value_s: run.map(|r| r - external),
        how: "execution start → end, minus the external waits (human decision and promotion)"
            .into(),
    });
    out.push(total);
    out
}
