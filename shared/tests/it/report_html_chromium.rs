//! report.html renders in headless Chromium with no network request.
//!
//! Renders the golden drill's report, writes it to a temporary directory,
//! screenshots it with `chromium --headless` (Debian's `chromium`, or the
//! binary named by `CHROMIUM`) and records Chromium's NetLog. The test fails,
//! never skips, when Chromium is missing. The screenshot is kept at
//! `target/report-html/report.png` for a person to look at.

use chrono::{TimeZone, Utc};
use handover::report::postcheck::{BackupSeen, PostChecks};
use handover::report::render::html;
use handover::report::{RunFacts, build, parse_history_json};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

const REFERENCE: &str = include_str!("../fixtures/history_reference_drill.json");

fn out_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/report-html");
    std::fs::create_dir_all(&dir).expect("output dir");
    // Chromium ignores a NetLog path with `..` in it.
    dir.canonicalize().expect("output dir")
}

#[test]
fn report_html_renders_in_headless_chromium_without_network() {
    let events = parse_history_json(REFERENCE).unwrap();
    let facts = RunFacts::from_events(&events);
    let at = |h, m, s| Utc.with_ymd_and_hms(2026, 11, 30, h, m, s).unwrap();
    let checks = PostChecks {
        findings: Vec::new(),
        first_backup: Some(BackupSeen {
            at: at(14, 25, 0),
            source: "rds:DescribeEvents".into(),
        }),
    };
    let report = build(
        "arn:aws:states:ap-northeast-1:123456789012:execution:handover:ref",
        &facts,
        &checks,
        at(14, 30, 0),
    )
    .unwrap();
    let page = html(&report);

    // Static check: no attribute or CSS that would load anything.
    let lower = page.to_ascii_lowercase();
    for pattern in [
        "src=", "href=", "url(", "@import", "<script", "<link", "<iframe", "<img",
    ] {
        assert!(!lower.contains(pattern), "report.html contains {pattern:?}");
    }
    let svg_start = page.find("<svg").expect("an inline SVG");
    let svg_end = page[svg_start..].find("</svg>").expect("closed SVG") + svg_start;
    let svg = &page[svg_start..svg_end];
    assert!(
        svg.contains("<rect") && svg.contains("<text") && svg.len() > 2_000,
        "SVG is not empty"
    );

    let dir = out_dir();
    let (png, requests) = render(&dir, "report", &page);
    let shot = std::fs::read(&png).expect("screenshot written");
    assert!(shot.starts_with(b"\x89PNG\r\n\x1a\n"), "a PNG");
    assert!(
        shot.len() > 20_000,
        "the screenshot has content ({} bytes)",
        shot.len()
    );
    assert!(
        requests.is_empty(),
        "report.html made network requests: {requests:?}"
    );

    // The check can fail: the same page with one external image and without
    // its Content-Security-Policy (which would block the image) is caught.
    let csp_start = page
        .find("<meta http-equiv=\"Content-Security-Policy\"")
        .expect("a CSP");
    let csp_end = page[csp_start..].find('>').expect("meta closes") + csp_start + 1;
    let leaky = format!("{}{}", &page[..csp_start], &page[csp_end..]).replace(
        "</body>",
        "<img src=\"http://127.0.0.1:9/pixel.png\"></body>",
    );
    let (_, requests) = render(&dir, "leaky", &leaky);
    assert!(
        requests
            .iter()
            .any(|u| u.starts_with("http://127.0.0.1:9/pixel.png")),
        "the NetLog check sees page requests: {requests:?}"
    );
}

/// Screenshot `html` with headless Chromium; return the PNG path and the
/// network requests the *page* started (from Chromium's NetLog: requests
/// whose initiator is an origin; the browser's own background requests have
/// none).
fn render(dir: &Path, name: &str, html: &str) -> (PathBuf, Vec<String>) {
    let html_path = dir.join(format!("{name}.html"));
    let png = dir.join(format!("{name}.png"));
    let netlog = dir.join(format!("{name}.netlog.json"));
    let profile = dir.join(format!("{name}.profile"));
    let _ = std::fs::remove_file(&png);
    let _ = std::fs::remove_file(&netlog);
    let _ = std::fs::remove_dir_all(&profile);
    std::fs::write(&html_path, html).unwrap();
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    let out = Command::new(&chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--hide-scrollbars",
            "--window-size=1100,3000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--log-net-log={}", netlog.display()))
        .arg(format!("--screenshot={}", png.display()))
        .arg(format!("file://{}", html_path.display()))
        .output()
        .unwrap_or_else(|e| panic!("running {chromium} (install Debian's chromium): {e}"));
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let log: Value =
        serde_json::from_str(&std::fs::read_to_string(&netlog).expect("netlog written"))
            .expect("netlog is JSON");
    let start_job = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"].clone();
    let requests = log["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["type"] == start_job)
        .filter_map(|e| {
            let url = e["params"]["url"].as_str()?;
            let initiator = e["params"]["initiator"].as_str().unwrap_or("not an origin");
            let local = url.starts_with("file:") || url.starts_with("data:");
            (initiator != "not an origin" && !local).then(|| url.to_owned())
        })
        .collect();
    (png, requests)
}
