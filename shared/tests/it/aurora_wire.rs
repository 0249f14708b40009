//! Aurora global database promotion: the exact requests on the wire (moto
//! has no global cluster failover). Requests are read as RDS receives them
//! (the Query protocol's form fields); answers are the RDS API Reference's
//! XML shapes (FailoverGlobalCluster, SwitchoverGlobalCluster,
//! DescribeGlobalClusters; the error shape of "Common Errors").

use handover::adapters::Rds;
use handover::failover::promote::{AuroraGlobal, ReplicaPromoter};
use handover_testkit::wire::{Canned, Replay};
use std::time::Duration;

const REGION: &str = "ap-northeast-1";
const TARGET: &str = "arn:aws:rds:ap-northeast-1:123456789012:cluster:shop-s";
const SOURCE: &str = "arn:aws:rds:ap-northeast-2:123456789012:cluster:shop-p";
const NS: &str = "http://rds.amazonaws.com/doc/2014-10-31/";

/// A GlobalCluster element (RDS API Reference, "GlobalCluster").
fn global_cluster(writer_is_target: bool, status: &str) -> String {
    format!(
        "<GlobalClusterIdentifier>shop-global</GlobalClusterIdentifier>\
         <GlobalClusterArn>arn:aws:rds::123456789012:global-cluster:shop-global</GlobalClusterArn>\
         <Status>{status}</Status><Engine>aurora-postgresql</Engine><EngineVersion>16.4</EngineVersion>\
         <GlobalClusterMembers>\
           <GlobalClusterMember><DBClusterArn>{SOURCE}</DBClusterArn><IsWriter>{}</IsWriter>\
             <Readers><member>{TARGET}</member></Readers></GlobalClusterMember>\
           <GlobalClusterMember><DBClusterArn>{TARGET}</DBClusterArn><IsWriter>{}</IsWriter>\
             <GlobalWriteForwardingStatus>disabled</GlobalWriteForwardingStatus></GlobalClusterMember>\
         </GlobalClusterMembers>",
        !writer_is_target, writer_is_target
    )
}

fn response(action: &str, inner: &str) -> Canned {
    Canned::xml(format!(
        "<{action}Response xmlns=\"{NS}\"><{action}Result>{inner}</{action}Result>\
         <ResponseMetadata><RequestId>3d2b5c1e-8f4a-4a47-9b8e-5f2a1c0d9e71</RequestId></ResponseMetadata>\
         </{action}Response>"
    ))
}

fn described(writer_is_target: bool, status: &str) -> Canned {
    response(
        "DescribeGlobalClusters",
        &format!(
            "<GlobalClusters><GlobalClusterMember>{}</GlobalClusterMember></GlobalClusters>",
            global_cluster(writer_is_target, status)
        ),
    )
}

fn started(action: &str) -> Canned {
    response(
        action,
        &format!(
            "<GlobalCluster>{}</GlobalCluster>",
            global_cluster(false, "failing-over")
        ),
    )
}

async fn rds(replay: &Replay) -> Rds {
    Rds::from_client(
        aws_sdk_rds::Client::new(&replay.config(REGION).await),
        REGION,
    )
}

fn promoter(rds: &Rds, planned: bool) -> AuroraGlobal<'_> {
    AuroraGlobal {
        rds,
        global_cluster_id: "shop-global".into(),
        target_cluster_arn: TARGET.into(),
        planned,
    }
}

/// Promote (`planned`: a switchover) against an RDS that would accept
/// either call: what went out.
async fn promote_with_both_answers(planned: bool) -> Vec<handover_testkit::wire::Sent> {
    let replay = Replay::new()
        .on_action("FailoverGlobalCluster", started("FailoverGlobalCluster"))
        .on_action(
            "SwitchoverGlobalCluster",
            started("SwitchoverGlobalCluster"),
        );
    let rds = rds(&replay).await;
    promoter(&rds, planned)
        .promote(Duration::from_secs(5))
        .await
        .unwrap();
    replay.sent()
}

#[tokio::test]
async fn failover_allows_data_loss_and_names_the_target() {
    let sent = promote_with_both_answers(false).await;
    assert_eq!(sent.len(), 1, "{sent:?}");
    let form = sent[0].form();
    let field = |k: &str| form.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    assert_eq!(sent[0].method, "POST");
    assert_eq!(field("Action"), Some("FailoverGlobalCluster"));
    assert_eq!(field("Version"), Some("2014-10-31"));
    assert_eq!(field("GlobalClusterIdentifier"), Some("shop-global"));
    assert_eq!(field("TargetDbClusterIdentifier"), Some(TARGET));
    assert_eq!(field("AllowDataLoss"), Some("true"));
    assert_eq!(form.len(), 5, "nothing else is asked: {form:?}");
    assert!(
        sent[0]
            .header("authorization")
            .is_some_and(|a| a.contains("/ap-northeast-1/rds/aws4_request")),
        "signed for RDS in S's Region"
    );
}

#[tokio::test]
async fn a_planned_switchover_uses_switchover_global_cluster() {
    let sent = promote_with_both_answers(true).await;
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(
        sent[0].field("Action").as_deref(),
        Some("SwitchoverGlobalCluster")
    );
    assert_eq!(
        sent[0].field("TargetDbClusterIdentifier").as_deref(),
        Some(TARGET)
    );
    assert_eq!(
        sent[0].field("AllowDataLoss"),
        None,
        "a switchover loses nothing"
    );
}

/// The irreversible call is never repeated by the SDK: a 500 whose request
/// may have been applied is one request, and the error goes to the caller
/// (the promote step decides from the world, not from a retry).
#[tokio::test]
async fn a_server_error_on_the_failover_call_is_not_retried() {
    let replay = Replay::new().on_action(
        "FailoverGlobalCluster",
        Canned {
            status: 500,
            headers: vec![("content-type", "text/xml".into())],
            body: format!(
                "<ErrorResponse xmlns=\"{NS}\"><Error><Type>Receiver</Type><Code>InternalFailure</Code>\
                 <Message>We encountered an internal error. Please try again.</Message></Error>\
                 <RequestId>9b1d2e3f-0000-4a47-9b8e-5f2a1c0d9e71</RequestId></ErrorResponse>"
            ),
        },
    );
    let rds = rds(&replay).await;
    let err = promoter(&rds, false)
        .promote(Duration::from_secs(5))
        .await
        .unwrap_err();
    assert_eq!(replay.actions("FailoverGlobalCluster").len(), 1);
    assert!(err.to_string().contains("FailoverGlobalCluster"), "{err}");
}

#[tokio::test]
async fn readiness_and_progress_follow_the_writer_flag() {
    let replay = Replay::new()
        .then(described(false, "available"))
        .then(described(false, "failing-over"))
        .then(described(true, "available"));
    let rds = rds(&replay).await;
    let p = promoter(&rds, false);
    assert_eq!(p.ready(Duration::from_secs(5)).await.unwrap(), Ok(()));
    assert!(!p.progress(Duration::from_secs(5)).await.unwrap().complete);
    assert!(p.progress(Duration::from_secs(5)).await.unwrap().complete);
    let asked = replay.actions("DescribeGlobalClusters");
    assert_eq!(asked.len(), 3);
    assert!(
        asked
            .iter()
            .all(|s| s.field("GlobalClusterIdentifier").as_deref() == Some("shop-global"))
    );
}
