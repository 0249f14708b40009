//! S3 addressing on the wire. In AWS a bucket is addressed virtual-hosted
//! (`bucket.s3.<region>.amazonaws.com`), as the S3 User Guide recommends;
//! path-style is for an endpoint override only (an emulator serves one
//! host). The request is read as it would leave for AWS.

use aws_config::SdkConfig;
use handover_testkit::wire::{Canned, Replay};

const REGION: &str = "ap-northeast-1";

/// Where a PutObject of `reports/key` into `handover-reports` goes.
async fn put_uri(replay: &Replay, config: &SdkConfig) -> String {
    handover::aws::s3_client(config)
        .put_object()
        .bucket("handover-reports")
        .key("reports/key")
        .body(b"x".to_vec().into())
        .send()
        .await
        .expect("PutObject");
    replay.sent().last().expect("one request").uri.clone()
}

#[tokio::test]
async fn in_aws_a_bucket_is_addressed_virtual_hosted() {
    let replay = Replay::new().then(Canned::xml(""));
    let config = replay.config(REGION).await;
    // As in Lambda: no endpoint override.
    let mut builder = config.into_builder();
    builder.set_endpoint_url(None);
    let config = builder.build();
    let uri = put_uri(&replay, &config).await;
    assert!(
        uri.starts_with("https://handover-reports.s3.ap-northeast-1.amazonaws.com/reports/key"),
        "{uri}"
    );
}

#[tokio::test]
async fn under_an_endpoint_override_the_bucket_is_in_the_path() {
    let replay = Replay::new().then(Canned::xml(""));
    let config = replay.config(REGION).await;
    let uri = put_uri(&replay, &config).await;
    assert!(
        uri.starts_with(
            "https://wire-test.ap-northeast-1.amazonaws.com/handover-reports/reports/key"
        ),
        "{uri}"
    );
}
