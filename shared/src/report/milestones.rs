//! The milestones, in the order they are expected, flagged when out of order.

use super::facts::seconds;
use super::model::{Milestone, MilestoneKey};
use super::numbers::{Basis, clock, hms};
use chrono::{DateTime, Utc};

/// The milestones in expected order, each flagged when earlier than one that should precede it.
pub fn milestones(b: &Basis<'_>) -> (Vec<Milestone>, Vec<String>) {
    use MilestoneKey as K;
    let s = b.steps;
    let first_exit = |key: &str| b.facts.first_seen.get(key).copied();
    let diagnosed = s
        .diagnosis
        .as_ref()
        .map(|d| d.observed_at)
        .or_else(|| first_exit("diagnosis"));
    let mut list: Vec<(K, &str, Option<DateTime<Utc>>, &str)> = vec![
        (K::T0, "T0 (first failing probe)", Some(b.input.t0), "$.t0"),
        (
            K::Detected,
            "Detected",
            Some(b.input.detected_at),
            "$.detected_at",
        ),
        (
            K::ExecutionStarted,
            "Execution started",
            b.facts.started_at,
            "ExecutionStarted event",
        ),
        (
            K::Diagnosed,
            "Diagnosed",
            diagnosed,
            "$.diagnosis.observed_at",
        ),
        (
            K::ApprovalRequested,
            "Approval requested",
            s.approval.as_ref().map(|a| a.requested_at),
            "$.approval.requested_at",
        ),
        (
            K::Decided,
            "Decided",
            s.approval.as_ref().map(|a| a.decided_at),
            "$.approval.decided_at",
        ),
        (
            K::Fenced,
            "Fenced",
            s.fence.as_ref().map(|f| f.fenced_at),
            "$.fence.fenced_at",
        ),
        (
            K::PromotionStarted,
            "Promotion started",
            s.promotion.as_ref().map(|p| p.promote_started_at),
            "$.promotion.promote_started_at",
        ),
        (
            K::Promoted,
            "Promoted",
            s.promoted_at(),
            "$.promotion.promoted_at",
        ),
        (
            K::Switched,
            "Switched",
            s.switch.as_ref().map(|x| x.switched_at),
            "$.switch.switched_at",
        ),
        (
            K::FirstRead,
            "First read (200 from S)",
            s.first_read(),
            "$.verify.read.first_success_at",
        ),
        (
            K::FirstWrite,
            "First write",
            s.first_write(),
            s.first_write_with_source()
                .map_or("$.verify.write.first_success_at", |(_, src)| src),
        ),
        (
            K::BackupDone,
            "First backup done",
            b.backup.as_ref().map(|(t, _)| *t),
            "post-check",
        ),
        (
            K::Ended,
            "Ended",
            b.facts.terminal.as_ref().map(|t| t.at),
            "terminal event",
        ),
    ];
    // A first write from the canary or the switch is expected right after
    // the switch, before verify's read.
    if s.first_write_with_source()
        .is_some_and(|(_, src)| src != "$.verify.write.first_success_at")
        && let Some(from) = list.iter().position(|m| m.0 == K::FirstWrite)
        && let Some(switched) = list.iter().position(|m| m.0 == K::Switched)
    {
        let first_write = list.remove(from);
        list.insert(switched + 1, first_write);
    }
    let mut out = Vec::with_capacity(list.len());
    let mut problems = Vec::new();
    // The latest milestone so far; the backup is exempt before `Ended`
    // (audit runs at the end, the first backup usually completes later).
    let mut latest: Option<(DateTime<Utc>, &str)> = None;
    for (key, label, at, source) in list {
        let mut in_order = true;
        if let (Some(t), Some((prev, prev_label))) = (at, latest)
            && t < prev
            && !(key == K::Ended && prev_label == "First backup done")
        {
            in_order = false;
            problems.push(format!(
                "{label} ({}) is before {prev_label} ({}) by {}",
                hms(t),
                hms(prev),
                clock(seconds(t, prev))
            ));
        }
        if let Some(t) = at
            && latest.is_none_or(|(p, _)| t > p)
        {
            latest = Some((t, label));
        }
        out.push(Milestone {
            key,
            label: label.into(),
            at,
            t_plus_s: at.map(|t| seconds(b.input.t0, t)),
            source: source.into(),
            in_order,
        });
    }
    (out, problems)
}
