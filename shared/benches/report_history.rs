//! Benchmark: reading and processing a 25,000-event execution history.
//!
//! `cargo bench -p handover --bench report_history` (harness = false, std::time).
//! Reports wall time (min and median of several runs) and peak heap (a
//! counting global allocator) for:
//! - generating the pages alone (the fake API's own cost, to subtract);
//! - streaming: pages of 1,000 folded as they come (what `audit` does);
//! - all events collected first, then folded (for comparison);
//! - building the report and rendering JSON, Markdown and HTML.

#[path = "../tests/support/synthetic_history.rs"]
mod synthetic;

use chrono::{TimeZone, Utc};
use handover::report::postcheck::PostChecks;
use handover::report::render::{html, json, markdown};
use handover::report::sources::{ExecutionHistory, PAGE_SIZE, fold_history};
use handover::report::{RunFacts, build};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

struct Counting;

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: delegates to the system allocator and only counts bytes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = CURRENT.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        CURRENT.fetch_sub(layout.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

const EVENTS: usize = 25_000;
const RUNS: usize = 5;

fn mib(b: usize) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

/// Run `f` RUNS times; print min/median time and the peak heap above the baseline.
fn measure<T>(name: &str, mut f: impl FnMut() -> T) -> T {
    let mut times = Vec::new();
    let mut peak = 0;
    let mut last = None;
    for _ in 0..RUNS {
        drop(last.take());
        let base = CURRENT.load(Ordering::Relaxed);
        PEAK.store(base, Ordering::Relaxed);
        let start = Instant::now();
        let out = f();
        times.push(start.elapsed());
        peak = peak.max(PEAK.load(Ordering::Relaxed) - base);
        last = Some(out);
    }
    times.sort();
    println!(
        "{name:<48} min {:>8.1} ms  median {:>8.1} ms  peak heap {:>7.1} MiB",
        ms(times[0]),
        ms(times[RUNS / 2]),
        mib(peak)
    );
    last.expect("ran")
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let pager = synthetic::Pager::new(EVENTS);
    println!(
        "history: {EVENTS} events, {} promotion poll cycles, pages of {PAGE_SIZE}",
        pager.history.loops
    );
    measure("generate pages only (fake API cost)", || {
        rt.block_on(async {
            let mut token = None;
            let mut n = 0;
            loop {
                let page = pager
                    .page("arn", token.take(), PAGE_SIZE)
                    .await
                    .expect("page");
                n += page.events.len();
                match page.next_token {
                    Some(t) => token = Some(t),
                    None => break n,
                }
            }
        })
    });
    let facts = measure("stream: fold page by page (audit's path)", || {
        rt.block_on(fold_history(&pager, "arn", PAGE_SIZE))
            .expect("fold")
    });
    assert_eq!(facts.event_count, EVENTS);
    measure("collect all events, then fold", || {
        let all: Vec<_> = (0..EVENTS).map(|i| pager.history.event(i)).collect();
        RunFacts::from_events(&all)
    });
    let now = Utc.with_ymd_and_hms(2026, 11, 30, 16, 0, 0).unwrap();
    let checks = PostChecks {
        findings: Vec::new(),
        first_backup: None,
    };
    let report = measure("build the report from the facts", || {
        build("arn", &facts, &checks, now).expect("report")
    });
    let sizes = measure("render report.json + report.md + report.html", || {
        (
            json(&report).len(),
            markdown(&report).len(),
            html(&report).len(),
        )
    });
    println!(
        "sizes: report.json {:.1} KiB, report.md {:.1} KiB, report.html {:.1} KiB ({} state visits)",
        sizes.0 as f64 / 1024.0,
        sizes.1 as f64 / 1024.0,
        sizes.2 as f64 / 1024.0,
        report.states.len()
    );
}
