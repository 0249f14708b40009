//! A 25,000-event history (the Step Functions maximum) is read page by page
//! at 1,000 events a page and fully processed. Timing and memory are
//! measured in `benches/report_history.rs`, not here.

use crate::synthetic;

use chrono::{TimeZone, Utc};
use handover::report::postcheck::PostChecks;
use handover::report::render::{html, markdown};
use handover::report::sources::{PAGE_SIZE, fold_history};
use handover::report::{Outcome, build};
use std::sync::atomic::Ordering;

#[tokio::test]
async fn a_25000_event_history_is_read_in_full_and_reported() {
    let pager = synthetic::Pager::new(25_000);
    let loops = pager.history.loops;
    let facts = fold_history(
        &pager,
        "arn:aws:states:ap-northeast-1:123456789012:execution:handover:x",
        PAGE_SIZE,
    )
    .await
    .unwrap();
    assert_eq!(pager.calls.load(Ordering::Relaxed), 25, "25 pages of 1,000");
    assert_eq!(pager.max_asked.load(Ordering::Relaxed), 1000);
    assert_eq!(facts.event_count, 25_000);
    assert_eq!(facts.last_event_id, 25_000);
    assert!(facts.warnings.is_empty(), "{:?}", facts.warnings);
    let polls = facts
        .states
        .iter()
        .filter(|s| s.name == "PromotionStatus")
        .count();
    assert_eq!(polls, loops, "every poll visit is kept");
    assert!(loops > 2700, "{loops}");
    assert!(
        facts.states.iter().all(|s| s.exited_at.is_some()),
        "every visit closed"
    );
    assert_eq!(
        facts.steps["promotion"]["polls"], loops,
        "the last poll's output wins"
    );
    assert_eq!(
        facts.terminal.as_ref().map(|t| t.kind.as_str()),
        Some("ExecutionSucceeded")
    );

    let now = Utc.with_ymd_and_hms(2026, 11, 30, 16, 0, 0).unwrap();
    let checks = PostChecks {
        findings: Vec::new(),
        first_backup: None,
    };
    let report = build("arn", &facts, &checks, now).unwrap();
    assert_eq!(report.summary.outcome, Outcome::Succeeded);
    assert_eq!(report.summary.history_events, 25_000);
    assert_eq!(
        report.states.len(),
        facts.states.len(),
        "all visits in report.json"
    );
    assert!(report.numbers.rpo.value_s.is_some());
    let page = html(&report);
    assert!(page.contains("more state visits (all are in report.json)"));
    assert!(
        page.contains(&format!("PromotionStatus ×{loops}")),
        "the poll loop is one bar"
    );
    assert!(
        page.len() < 1_000_000,
        "HTML stays small: {} bytes",
        page.len()
    );
    assert!(markdown(&report).contains("more state visits"));
}

#[tokio::test]
async fn a_short_history_is_one_page_and_an_empty_token_ends_it() {
    let pager = synthetic::Pager::new(1_000);
    let facts = fold_history(&pager, "arn", PAGE_SIZE).await.unwrap();
    assert_eq!(pager.calls.load(Ordering::Relaxed), 1);
    assert_eq!(facts.event_count, 1_000);
}
