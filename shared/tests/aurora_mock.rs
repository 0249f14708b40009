//! Aurora global database promotion: the exact requests (moto has no global
//! cluster failover, so these use aws-smithy-mocks).

use aws_sdk_rds::Client;
use aws_sdk_rds::operation::describe_global_clusters::DescribeGlobalClustersOutput;
use aws_sdk_rds::operation::failover_global_cluster::FailoverGlobalClusterOutput;
use aws_sdk_rds::operation::switchover_global_cluster::SwitchoverGlobalClusterOutput;
use aws_sdk_rds::types::{GlobalCluster, GlobalClusterMember};
use aws_smithy_mocks::{RuleMode, mock, mock_client};
use handover::adapters::Rds;
use handover::failover::promote::{AuroraGlobal, ReplicaPromoter};
use std::time::Duration;

const TARGET: &str = "arn:aws:rds:ap-northeast-1:123456789012:cluster:shop-s";

fn global(writer_is_target: bool, status: &str) -> DescribeGlobalClustersOutput {
    DescribeGlobalClustersOutput::builder()
        .global_clusters(
            GlobalCluster::builder()
                .global_cluster_identifier("shop-global")
                .status(status)
                .global_cluster_members(
                    GlobalClusterMember::builder()
                        .db_cluster_arn("arn:aws:rds:ap-northeast-2:123456789012:cluster:shop-p")
                        .is_writer(!writer_is_target)
                        .build(),
                )
                .global_cluster_members(
                    GlobalClusterMember::builder()
                        .db_cluster_arn(TARGET)
                        .is_writer(writer_is_target)
                        .build(),
                )
                .build(),
        )
        .build()
}

fn promoter(rds: &Rds, planned: bool) -> AuroraGlobal<'_> {
    AuroraGlobal {
        rds,
        global_cluster_id: "shop-global".into(),
        target_cluster_arn: TARGET.into(),
        planned,
    }
}

#[tokio::test]
async fn failover_allows_data_loss_and_names_the_target() {
    let failover = mock!(Client::failover_global_cluster)
        .match_requests(|r| {
            r.global_cluster_identifier() == Some("shop-global")
                && r.target_db_cluster_identifier() == Some(TARGET)
                && r.allow_data_loss() == Some(true)
        })
        .then_output(|| FailoverGlobalClusterOutput::builder().build());
    let switchover = mock!(Client::switchover_global_cluster)
        .then_output(|| SwitchoverGlobalClusterOutput::builder().build());
    let rds = Rds::from_client(
        mock_client!(aws_sdk_rds, RuleMode::MatchAny, [&failover, &switchover]),
        "ap-northeast-1",
    );
    promoter(&rds, false)
        .promote(Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(failover.num_calls(), 1);
    assert_eq!(switchover.num_calls(), 0);
}

#[tokio::test]
async fn a_planned_switchover_uses_switchover_global_cluster() {
    let switchover = mock!(Client::switchover_global_cluster)
        .match_requests(|r| {
            r.global_cluster_identifier() == Some("shop-global")
                && r.target_db_cluster_identifier() == Some(TARGET)
        })
        .then_output(|| SwitchoverGlobalClusterOutput::builder().build());
    let failover = mock!(Client::failover_global_cluster)
        .then_output(|| FailoverGlobalClusterOutput::builder().build());
    let rds = Rds::from_client(
        mock_client!(aws_sdk_rds, RuleMode::MatchAny, [&failover, &switchover]),
        "ap-northeast-1",
    );
    promoter(&rds, true)
        .promote(Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!((switchover.num_calls(), failover.num_calls()), (1, 0));
}

#[tokio::test]
async fn readiness_and_progress_follow_the_writer_flag() {
    let seq = mock!(Client::describe_global_clusters)
        .sequence()
        .output(|| global(false, "available"))
        .output(|| global(false, "failing-over"))
        .output(|| global(true, "available"))
        .build();
    let rds = Rds::from_client(
        mock_client!(aws_sdk_rds, RuleMode::Sequential, [&seq]),
        "ap-northeast-1",
    );
    let p = promoter(&rds, false);
    assert_eq!(p.ready(Duration::from_secs(5)).await.unwrap(), Ok(()));
    assert!(!p.progress(Duration::from_secs(5)).await.unwrap().complete);
    assert!(p.progress(Duration::from_secs(5)).await.unwrap().complete);
}
