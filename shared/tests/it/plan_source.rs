//! Loading the plan from SSM Parameter Store (moto) and from a file.

use handover::config::{ConfigError, PlanSource};
use handover::error::{Classify, ErrorName};
use handover_testkit::{aws, unique};

const EXAMPLE: &str = include_str!("../../../infra/plan.example.jsonc");

#[tokio::test]
async fn the_plan_loads_from_an_ssm_parameter() {
    let aws = aws();
    let name = format!("/handover/{}/plan", unique("t"));
    aws.ssm("ap-northeast-1")
        .await
        .put_parameter()
        .name(&name)
        .value(EXAMPLE)
        .r#type(aws_sdk_ssm::types::ParameterType::String)
        .send()
        .await
        .unwrap();
    let source = PlanSource::Parameter {
        name,
        region: "ap-northeast-1".into(),
    };
    let plan = source.load(&aws).await.unwrap();
    assert_eq!(plan.service, "shop");
}

#[tokio::test]
async fn a_missing_parameter_is_a_named_error() {
    let aws = aws();
    let source = PlanSource::Parameter {
        name: "/handover/none".into(),
        region: "ap-northeast-1".into(),
    };
    let err = source.load(&aws).await.unwrap_err();
    assert!(err.to_string().contains("/handover/none"), "{err}");
    assert_eq!(err.error_name(), ErrorName::Fatal);
}

#[tokio::test]
async fn an_invalid_plan_file_names_the_field() {
    let dir = std::env::temp_dir().join(unique("plan"));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("plan.json");
    std::fs::write(
        &path,
        EXAMPLE.replace("\"db_instance_id\": \"shop-db-replica\",", ""),
    )
    .unwrap();
    let err = PlanSource::File(path.display().to_string())
        .load(&aws())
        .await
        .unwrap_err();
    assert!(matches!(err, ConfigError::Plan(_)));
    assert_eq!(
        err.to_string(),
        "plan.regions.standby.db_instance_id: missing"
    );
    assert_eq!(err.error_name(), ErrorName::InvalidInput);
}
