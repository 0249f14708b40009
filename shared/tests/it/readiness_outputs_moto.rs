//! What a readiness evaluation leaves behind, against moto (the real S3
//! and EventBridge wire protocols): the report files in the bucket, and the
//! change event as a rule's target receives it.

use chrono::{TimeZone, Utc};
use handover::adapters::{BusPublisher, DefaultBus};
use handover::readiness::output::{ChangeDetail, Document, EVENT_DETAIL_TYPE, EVENT_SOURCE};
use handover::readiness::publish::{PublishError, put_change, store};
use handover::readiness::{Check, Readiness, Verdict};
use handover::report::sources::{ReportReader, S3Reports};
use handover_testkit::bus::BusConsumer;
use handover_testkit::{TEST_REGION, aws, report_bucket, unique};

fn readiness(minute: u32, slack: Verdict) -> Readiness {
    let check = |id: &str, verdict| Check {
        id: id.into(),
        verdict,
        observed: format!("{id} as seen"),
        expected: "as planned".into(),
        fix: if verdict == Verdict::Pass {
            String::new()
        } else {
            format!("fix {id}")
        },
    };
    Readiness {
        at: Utc.with_ymd_and_hms(2026, 12, 5, 13, minute, 0).unwrap(),
        checks: vec![
            check("rds.p_exists", Verdict::Pass),
            check("slack.channel", slack),
        ],
    }
}

#[tokio::test]
async fn each_evaluation_leaves_latest_and_a_dated_copy_in_the_bucket() {
    let aws = aws();
    let bucket = unique("handover-reports");
    report_bucket(&aws, TEST_REGION, &bucket).await;
    let s3 = S3Reports::new(&aws, TEST_REGION).await;
    let first = readiness(4, Verdict::Pass);
    let second = readiness(34, Verdict::Fail);
    let at = store(&s3, &bucket, &first, "shop").await.unwrap();
    assert_eq!(at, format!("s3://{bucket}/readiness/latest.json"));
    store(&s3, &bucket, &second, "shop").await.unwrap();
    let read = |key: &'static str| {
        let (s3, bucket) = (&s3, &bucket);
        async move {
            s3.get(bucket, key)
                .await
                .unwrap()
                .unwrap_or_else(|| panic!("no {key}"))
        }
    };
    let latest: Document = serde_json::from_slice(&read("readiness/latest.json").await).unwrap();
    assert_eq!(latest.readiness, second, "latest is the newest");
    assert_eq!(latest.worst, Verdict::Fail);
    let older: Document =
        serde_json::from_slice(&read("readiness/history/2026-12-05/130400.000Z.json").await)
            .unwrap();
    assert_eq!(older.readiness, first, "history keeps the older one");
    read("readiness/history/2026-12-05/133400.000Z.md").await;
    let md = String::from_utf8(read("readiness/latest.md").await).unwrap();
    assert!(
        md.contains("`slack.channel`") && md.contains("fix slack.channel"),
        "{md}"
    );
    let head = aws
        .s3(TEST_REGION)
        .await
        .head_object()
        .bucket(&bucket)
        .key("readiness/latest.md")
        .send()
        .await
        .unwrap();
    assert_eq!(head.content_type(), Some("text/markdown; charset=utf-8"));
}

#[tokio::test]
async fn a_bucket_that_refuses_fails_naming_the_key() {
    let aws = aws();
    let s3 = S3Reports::new(&aws, TEST_REGION).await;
    let e = store(
        &s3,
        &unique("no-such-bucket"),
        &readiness(4, Verdict::Pass),
        "shop",
    )
    .await
    .unwrap_err();
    assert!(matches!(e, PublishError::Store { .. }), "{e:?}");
    let text = handover::error::chain(&e);
    assert!(
        text.contains("readiness/history/2026-12-05/130400.000Z.json"),
        "{text}"
    );
    assert!(text.contains("NoSuchBucket"), "{text}");
}

#[tokio::test]
async fn the_change_event_reaches_a_rules_target_with_the_checks_that_changed() {
    let aws = aws();
    let service = unique("shop");
    let consumer = BusConsumer::new(&aws, TEST_REGION, EVENT_SOURCE, &service).await;
    let bus = DefaultBus::new(&aws, TEST_REGION).await;
    let before = readiness(4, Verdict::Pass);
    let now = readiness(34, Verdict::Fail);
    let id = put_change(&bus, Some(&before), &now, &service)
        .await
        .unwrap();
    assert!(!id.is_empty());
    let events = consumer.events().await;
    assert_eq!(events.len(), 1, "{events:#?}");
    let e = &events[0];
    assert_eq!(e["source"], EVENT_SOURCE);
    assert_eq!(e["detail-type"], EVENT_DETAIL_TYPE);
    assert_eq!(e["region"], TEST_REGION);
    let detail: ChangeDetail = serde_json::from_value(e["detail"].clone()).unwrap();
    assert_eq!(detail.service, service);
    assert_eq!(detail.changed.len(), 1, "{detail:?}");
    assert_eq!(detail.changed[0].id, "slack.channel");
    assert_eq!(detail.changed[0].was, Some(Verdict::Pass));
    assert_eq!(detail.changed[0].now, Some(Verdict::Fail));
    assert_eq!(detail.counts.fail, 1);
}

/// PutEvents answers 200 with the entry's failure inside: that is an error.
#[tokio::test]
async fn an_event_the_bus_refuses_is_an_error_not_an_id() {
    let aws = aws();
    let bus = DefaultBus::new(&aws, TEST_REGION).await;
    let e = bus.put("", EVENT_DETAIL_TYPE, "{}").await.unwrap_err();
    let text = handover::error::chain(&e);
    assert!(
        text.contains("not put") && text.contains("InvalidArgument"),
        "{text}"
    );
}

/// A change event the bus refused is kept on the readiness item for the
/// next evaluation, and forgotten only once that very event was put.
#[tokio::test]
async fn a_refused_event_is_kept_until_it_is_put() {
    let aws = aws();
    let store = handover_testkit::fresh_store(&aws).await;
    let r = readiness(4, Verdict::Fail);
    store.record_readiness(&r, r.at).await.unwrap();
    let detail = r#"{"service":"shop","summary":"readiness: 1 fail"}"#;
    store.keep_pending_event(detail).await.unwrap();
    let pending = || async { store.readiness().await.unwrap().unwrap().event_pending };
    assert_eq!(pending().await.as_deref(), Some(detail));
    // The same verdicts again: the pending event stays.
    store
        .record_readiness(&readiness(34, Verdict::Fail), r.at)
        .await
        .unwrap();
    assert_eq!(pending().await.as_deref(), Some(detail));
    // Clearing another event leaves it; clearing it removes it.
    store.clear_pending_event("{}").await.unwrap();
    assert_eq!(pending().await.as_deref(), Some(detail));
    store.clear_pending_event(detail).await.unwrap();
    assert_eq!(pending().await, None);
}
