//! Parts of the stack the emulated world creates as CloudFormation would:
//! the fence and promote roles (from the expanded template's policies, so a
//! change to the template changes what readiness simulates), and S's compute
//! as a warm standby runs it.

use handover::aws::Aws;
use handover::plan::{Capacity, DatabaseKind, EcsServiceMinimum, EksNodeGroupMinimum, Plan};
use handover::readiness::iam::FailoverRoles;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// The account moto answers for.
pub const ACCOUNT: &str = "123456789012";

/// The value CloudFormation would give each `${…}` and `Ref` the two roles'
/// policies use, for a stack in S's Region deployed for `plan`.
fn substitutions(plan: &Plan) -> BTreeMap<&'static str, String> {
    BTreeMap::from([
        ("AWS::Partition", "aws".to_owned()),
        ("AWS::AccountId", ACCOUNT.to_owned()),
        ("AWS::Region", plan.regions.standby.region.clone()),
        ("AWS::URLSuffix", "amazonaws.com".to_owned()),
        ("AWS::StackName", "handover-local".to_owned()),
        ("PrimaryRegion", plan.regions.primary.region.clone()),
        (
            "PrimaryDbInstanceId",
            plan.regions.primary.db_instance_id.clone(),
        ),
        (
            "StandbyDbInstanceId",
            plan.regions.standby.db_instance_id.clone(),
        ),
    ])
}

/// Resolve the intrinsics of a policy as CloudFormation would (`Fn::Sub`,
/// `Ref`, `Fn::GetAtt StateTable.Arn`, `Fn::If IsAurora`, `AWS::NoValue`).
/// `None`: the value is `AWS::NoValue`. Anything else panics, naming it, so
/// a template change the harness does not model fails loudly.
fn resolve(
    v: &Value,
    vars: &BTreeMap<&str, String>,
    table_arn: &str,
    aurora: bool,
) -> Option<Value> {
    let att = |name: &str| match name {
        "StateTable.Arn" => table_arn.to_owned(),
        other => panic!("the harness cannot resolve {other} in a role policy"),
    };
    match v {
        Value::Array(items) => Some(Value::Array(
            items
                .iter()
                .filter_map(|i| resolve(i, vars, table_arn, aurora))
                .collect(),
        )),
        Value::Object(o) if o.len() == 1 && o.contains_key("Fn::Sub") => {
            let text = o["Fn::Sub"].as_str().expect("Fn::Sub of a string");
            let mut out = String::new();
            let mut rest = text;
            while let Some(start) = rest.find("${") {
                out.push_str(&rest[..start]);
                let end = rest[start..].find('}').expect("a closing brace") + start;
                let name = &rest[start + 2..end];
                out.push_str(&match vars.get(name) {
                    Some(v) => v.clone(),
                    None => att(name),
                });
                rest = &rest[end + 1..];
            }
            out.push_str(rest);
            Some(Value::String(out))
        }
        Value::Object(o) if o.len() == 1 && o.contains_key("Ref") => {
            let name = o["Ref"].as_str().expect("Ref of a name");
            if name == "AWS::NoValue" {
                return None;
            }
            Some(Value::String(vars.get(name).cloned().unwrap_or_else(
                || panic!("the harness cannot resolve Ref {name} in a role policy"),
            )))
        }
        Value::Object(o) if o.len() == 1 && o.contains_key("Fn::GetAtt") => {
            let parts = o["Fn::GetAtt"].as_array().expect("Fn::GetAtt of a list");
            Some(Value::String(att(&format!(
                "{}.{}",
                parts[0].as_str().unwrap_or_default(),
                parts[1].as_str().unwrap_or_default()
            ))))
        }
        Value::Object(o) if o.len() == 1 && o.contains_key("Fn::If") => {
            let parts = o["Fn::If"].as_array().expect("Fn::If of a list");
            let holds = match parts[0].as_str() {
                Some("IsAurora") => aurora,
                other => panic!("the harness cannot evaluate condition {other:?} in a role policy"),
            };
            resolve(&parts[if holds { 1 } else { 2 }], vars, table_arn, aurora)
        }
        Value::Object(o) => Some(Value::Object(
            o.iter()
                .filter_map(|(k, v)| resolve(v, vars, table_arn, aurora).map(|v| (k.clone(), v)))
                .collect::<Map<String, Value>>(),
        )),
        other => Some(other.clone()),
    }
}

/// The inline policies of role `logical_id` in the expanded template,
/// resolved for `plan` and `table`: `(name, document)` each.
pub fn role_policies(logical_id: &str, plan: &Plan, table: &str) -> Vec<(String, Value)> {
    let role = &crate::triggers::expanded_template()["Resources"][logical_id];
    assert_eq!(role["Type"], "AWS::IAM::Role", "{logical_id} is a role");
    let vars = substitutions(plan);
    let table_arn = format!(
        "arn:aws:dynamodb:{}:{ACCOUNT}:table/{table}",
        plan.regions.standby.region
    );
    let aurora = plan.database.kind == DatabaseKind::AuroraGlobal;
    role["Properties"]["Policies"]
        .as_array()
        .expect("inline policies")
        .iter()
        .map(|p| {
            (
                p["PolicyName"].as_str().expect("a policy name").to_owned(),
                resolve(&p["PolicyDocument"], &vars, &table_arn, aurora).expect("a document"),
            )
        })
        .collect()
}

/// The IAM client moto serves (IAM is global).
pub async fn iam(aws: &Aws) -> aws_sdk_iam::Client {
    aws_sdk_iam::Client::new(&aws.config("us-east-1").await)
}

/// Create `doc` as a managed policy and make it the permissions boundary of
/// each role (by ARN), in moto's IAM.
pub async fn set_boundary(
    iam: &aws_sdk_iam::Client,
    prefix: &str,
    doc: serde_json::Value,
    roles: &[&str],
) {
    let arn = iam
        .create_policy()
        .policy_name(crate::unique(prefix))
        .policy_document(doc.to_string())
        .send()
        .await
        .expect("CreatePolicy")
        .policy
        .and_then(|p| p.arn)
        .expect("a policy ARN");
    for role in roles {
        iam.put_role_permissions_boundary()
            .role_name(role.rsplit('/').next().unwrap_or(role))
            .permissions_boundary(&arn)
            .send()
            .await
            .expect("PutRolePermissionsBoundary");
    }
}

/// The fence and promote roles as the stack creates them: the template's
/// `FenceRole` and `PromoteRole` with their inline policies resolved for
/// `plan` and `table`, in moto's IAM. Returns their ARNs.
pub async fn provision_failover_roles(aws: &Aws, plan: &Plan, table: &str) -> FailoverRoles {
    let iam = iam(aws).await;
    let trust = serde_json::json!({
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}]
    })
    .to_string();
    let mut arns = Vec::new();
    for prefix in ["handover-fence", "handover-promote"] {
        let arn = iam
            .create_role()
            .role_name(crate::unique(prefix))
            .assume_role_policy_document(&trust)
            .send()
            .await
            .expect("create the role in moto")
            .role
            .expect("a role")
            .arn;
        arns.push(arn);
    }
    let roles = FailoverRoles {
        promote: arns.pop().expect("promote"),
        fence: arns.pop().expect("fence"),
    };
    apply_failover_policies(aws, &roles, plan, table).await;
    roles
}

/// Write the two roles' policies as a deploy of the stack for `plan` would
/// (its parameters name `plan`'s databases): a test whose run carries
/// another plan than the world's redeploys, or readiness rightly finds the
/// roles refused on that plan's instances.
pub async fn apply_failover_policies(aws: &Aws, roles: &FailoverRoles, plan: &Plan, table: &str) {
    let iam = iam(aws).await;
    for (logical_id, arn) in [("FenceRole", &roles.fence), ("PromoteRole", &roles.promote)] {
        let name = arn.rsplit('/').next().expect("a role name");
        for (policy, doc) in role_policies(logical_id, plan, table) {
            iam.put_role_policy()
                .role_name(name)
                .policy_name(policy)
                .policy_document(doc.to_string())
                .send()
                .await
                .expect("put the role's policy in moto");
        }
    }
}

/// S's compute as a warm standby runs it, named in `plan.capacity`: an ECS
/// service running 2 tasks, and an EKS managed node group of 2 nodes with
/// the Auto Scaling group EKS makes for it (moto's EKS names the group but
/// does not create it; EKS does).
pub async fn provision_capacity(aws: &Aws, plan: &mut Plan) {
    let region = plan.regions.standby.region.clone();
    let config = aws.config(&region).await;
    let ecs = aws_sdk_ecs::Client::new(&config);
    let cluster = crate::unique("app");
    ecs.create_cluster()
        .cluster_name(&cluster)
        .send()
        .await
        .expect("create the ECS cluster in moto");
    let family = crate::unique("web");
    ecs.register_task_definition()
        .family(&family)
        .container_definitions(
            aws_sdk_ecs::types::ContainerDefinition::builder()
                .name("web")
                .image(format!("{ACCOUNT}.dkr.ecr.{region}.amazonaws.com/shop:1"))
                .memory(512)
                .build(),
        )
        .send()
        .await
        .expect("register the task definition in moto");
    let service = "web".to_owned();
    ecs_service(aws, &region, &cluster, &service, &family, 2, true).await;
    let (eks_cluster, node_group, _) = node_group(aws, &region, 2).await;
    plan.capacity = Capacity {
        ecs_services: vec![EcsServiceMinimum {
            cluster,
            service,
            min_running: 2,
        }],
        auto_scaling_groups: vec![],
        eks_node_groups: vec![EksNodeGroupMinimum {
            cluster: eks_cluster,
            node_group,
            min_nodes: 2,
        }],
    };
}

/// An ECS service of `desired` tasks of `family` in `cluster`. `started`:
/// its tasks came up (moto counts none running until the service is
/// updated, then all it desires).
pub async fn ecs_service(
    aws: &Aws,
    region: &str,
    cluster: &str,
    service: &str,
    family: &str,
    desired: i32,
    started: bool,
) {
    let ecs = aws_sdk_ecs::Client::new(&aws.config(region).await);
    ecs.create_service()
        .cluster(cluster)
        .service_name(service)
        .task_definition(family)
        .desired_count(desired)
        .send()
        .await
        .expect("create the ECS service in moto");
    if started {
        ecs.update_service()
            .cluster(cluster)
            .service(service)
            .desired_count(desired)
            .send()
            .await
            .expect("update the ECS service in moto");
    }
}

/// A VPC subnet in `region` and an image moto can launch there.
async fn subnet_and_image(aws: &Aws, region: &str) -> (String, String) {
    let ec2 = aws.ec2(region).await;
    let vpc = ec2
        .create_vpc()
        .cidr_block("10.40.0.0/16")
        .send()
        .await
        .expect("create a VPC in moto")
        .vpc
        .and_then(|v| v.vpc_id)
        .expect("a VPC id");
    let subnet = ec2
        .create_subnet()
        .vpc_id(&vpc)
        .cidr_block("10.40.1.0/24")
        .availability_zone(format!("{region}a"))
        .send()
        .await
        .expect("create a subnet in moto")
        .subnet
        .and_then(|s| s.subnet_id)
        .expect("a subnet id");
    let image = ec2
        .describe_images()
        .owners("amazon")
        .send()
        .await
        .expect("moto's images")
        .images
        .unwrap_or_default()
        .into_iter()
        .find_map(|i| i.image_id)
        .expect("moto has an Amazon image in every Region");
    (subnet, image)
}

/// An Auto Scaling group `name` of `desired` instances (moto launches them
/// `InService` and `Healthy`), at most `max`.
pub async fn auto_scaling_group(aws: &Aws, region: &str, name: &str, desired: i32, max: i32) {
    let (subnet, image) = subnet_and_image(aws, region).await;
    let asg = aws_sdk_autoscaling::Client::new(&aws.config(region).await);
    let launch = crate::unique("lc");
    asg.create_launch_configuration()
        .launch_configuration_name(&launch)
        .image_id(image)
        .instance_type("t3.medium")
        .send()
        .await
        .expect("create the launch configuration in moto");
    asg.create_auto_scaling_group()
        .auto_scaling_group_name(name)
        .launch_configuration_name(&launch)
        .min_size(0)
        .max_size(max)
        .desired_capacity(desired)
        .vpc_zone_identifier(subnet)
        .send()
        .await
        .expect("create the Auto Scaling group in moto");
}

/// An EKS cluster with a managed node group of `nodes` nodes, and the Auto
/// Scaling group its nodes run in. Returns (cluster, node group, group).
pub async fn node_group(aws: &Aws, region: &str, nodes: i32) -> (String, String, String) {
    let (subnet, _) = subnet_and_image(aws, region).await;
    let eks = aws_sdk_eks::Client::new(&aws.config(region).await);
    let cluster = crate::unique("eks");
    eks.create_cluster()
        .name(&cluster)
        .role_arn(format!("arn:aws:iam::{ACCOUNT}:role/eks-cluster"))
        .resources_vpc_config(
            aws_sdk_eks::types::VpcConfigRequest::builder()
                .subnet_ids(&subnet)
                .build(),
        )
        .send()
        .await
        .expect("create the EKS cluster in moto");
    let node_group = "workers".to_owned();
    let created = eks
        .create_nodegroup()
        .cluster_name(&cluster)
        .nodegroup_name(&node_group)
        .node_role(format!("arn:aws:iam::{ACCOUNT}:role/eks-nodes"))
        .subnets(&subnet)
        .scaling_config(
            aws_sdk_eks::types::NodegroupScalingConfig::builder()
                .min_size(nodes)
                .max_size(nodes * 2)
                .desired_size(nodes)
                .build(),
        )
        .send()
        .await
        .expect("create the node group in moto")
        .nodegroup
        .expect("a node group");
    let group = created
        .resources
        .and_then(|r| r.auto_scaling_groups)
        .and_then(|g| g.into_iter().find_map(|g| g.name))
        .expect("EKS names the node group's Auto Scaling group");
    auto_scaling_group(aws, region, &group, nodes, nodes * 2).await;
    (cluster, node_group, group)
}

#[cfg(test)]
mod tests {
    use super::*;
    use handover::readiness::iam::{Role, asks};
    use std::collections::BTreeSet;

    /// What readiness simulates for each role is what the template grants
    /// it (tracing and logs aside): a call added to the fence or promote
    /// without its simulation, or a grant dropped, fails here.
    #[test]
    fn readiness_simulates_every_call_the_template_grants_the_fence_and_promote() {
        let plan = crate::example_plan();
        for (logical_id, role) in [("FenceRole", Role::Fence), ("PromoteRole", Role::Promote)] {
            let granted: BTreeSet<String> = role_policies(logical_id, &plan, "t")
                .iter()
                .flat_map(|(_, doc)| doc["Statement"].as_array().cloned().unwrap_or_default())
                .flat_map(|st| match &st["Action"] {
                    Value::Array(a) => a.clone(),
                    one => vec![one.clone()],
                })
                .filter_map(|a| a.as_str().map(str::to_owned))
                .filter(|a| !a.starts_with("xray:") && !a.starts_with("logs:"))
                .collect();
            let asked: BTreeSet<String> = asks(
                &plan,
                "arn:aws:iam::123456789012:role/r",
                "t",
                "ap-northeast-1",
                role,
            )
            .into_iter()
            .flat_map(|a| a.actions)
            .map(str::to_owned)
            .collect();
            assert_eq!(granted, asked, "{logical_id}");
        }
    }
}
