//! `capacity.*`: S's compute against the plan's minimums.
//!
//! A warm standby runs S scaled down; what the plan names here is the least
//! that must be up for S to take P's traffic. The reference drill's app on S
//! sat in CrashLoopBackOff for most of the preparation: desired, never
//! running. So each check compares what is *running* (ECS `runningCount`,
//! Auto Scaling instances `InService` and `Healthy`, the nodes of an EKS node
//! group's Auto Scaling group) with the minimum, and tells a scale that is
//! too low (raise the desired count) from work that does not stay up (desired
//! but not running: read why it stops).
//!
//! What it does not see: an EKS node group is counted by the EC2 instances
//! of its Auto Scaling group, not by Kubernetes (a node that never joined
//! the cluster counts, and pods crash-looping on healthy nodes pass); an ECS
//! service's running tasks are counted, not whether they answer behind the
//! load balancer. The app's own health in S is verify's read check.

use super::{Check, Verdict, check, unread};
use crate::adapters::AwsError;
use crate::plan::Plan;
use std::future::Future;

/// An ECS service as DescribeServices shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EcsService {
    /// `ACTIVE`, `DRAINING` or `INACTIVE`.
    pub status: String,
    /// `desiredCount`.
    pub desired: i32,
    /// `runningCount`.
    pub running: i32,
    /// `pendingCount`.
    pub pending: i32,
}

/// An Auto Scaling group as DescribeAutoScalingGroups shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AutoScalingGroup {
    /// `DesiredCapacity`.
    pub desired: i32,
    /// `MaxSize`.
    pub max: i32,
    /// Instances `InService` and `Healthy`.
    pub in_service: i32,
    /// All its instances, whatever their state.
    pub instances: i32,
}

/// An EKS managed node group as DescribeNodegroup shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeGroup {
    /// `ACTIVE`, `DEGRADED`, `UPDATING`, …
    pub status: String,
    /// `scalingConfig.desiredSize`.
    pub desired: i32,
    /// `scalingConfig.maxSize`.
    pub max: i32,
    /// `health.issues`, `code: message` each.
    pub issues: Vec<String>,
    /// `resources.autoScalingGroups`: where its nodes run.
    pub auto_scaling_groups: Vec<String>,
}

/// The read calls the capacity checks make, in S's Region. `Ok(None)`: no
/// such resource.
pub trait CapacityReader {
    /// ECS DescribeServices.
    fn ecs_service(
        &self,
        cluster: &str,
        service: &str,
    ) -> impl Future<Output = Result<Option<EcsService>, AwsError>> + Send;
    /// Auto Scaling DescribeAutoScalingGroups.
    fn auto_scaling_group(
        &self,
        name: &str,
    ) -> impl Future<Output = Result<Option<AutoScalingGroup>, AwsError>> + Send;
    /// EKS DescribeNodegroup.
    fn node_group(
        &self,
        cluster: &str,
        node_group: &str,
    ) -> impl Future<Output = Result<Option<NodeGroup>, AwsError>> + Send;
}

/// What was read for one node group: the group, then its Auto Scaling
/// groups (each `Ok(None)` when it does not exist).
pub type NodeGroupFacts = (
    Result<Option<NodeGroup>, String>,
    Vec<(String, Result<Option<AutoScalingGroup>, String>)>,
);

/// Everything the capacity checks read, in the plan's order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CapacityFacts {
    /// One per `plan.capacity.ecs_services`.
    pub ecs_services: Vec<Result<Option<EcsService>, String>>,
    /// One per `plan.capacity.auto_scaling_groups`.
    pub auto_scaling_groups: Vec<Result<Option<AutoScalingGroup>, String>>,
    /// One per `plan.capacity.eks_node_groups`.
    pub eks_node_groups: Vec<NodeGroupFacts>,
}

/// Read every resource the plan names (concurrently).
pub async fn observe<R: CapacityReader + Sync>(plan: &Plan, reader: &R) -> CapacityFacts {
    use futures_util::future::join_all;
    let text = |e: AwsError| crate::error::chain(&e);
    let c = &plan.capacity;
    let ecs = join_all(c.ecs_services.iter().map(|e| async {
        reader
            .ecs_service(&e.cluster, &e.service)
            .await
            .map_err(text)
    }));
    let asgs = join_all(
        c.auto_scaling_groups
            .iter()
            .map(|g| async { reader.auto_scaling_group(&g.name).await.map_err(text) }),
    );
    let nodes = join_all(c.eks_node_groups.iter().map(|n| async {
        let group = reader
            .node_group(&n.cluster, &n.node_group)
            .await
            .map_err(text);
        let names = match &group {
            Ok(Some(g)) => g.auto_scaling_groups.clone(),
            _ => Vec::new(),
        };
        let asgs = join_all(names.into_iter().map(|name| async {
            let found = reader.auto_scaling_group(&name).await.map_err(text);
            (name, found)
        }))
        .await;
        (group, asgs)
    }));
    let (ecs_services, auto_scaling_groups, eks_node_groups) = tokio::join!(ecs, asgs, nodes);
    CapacityFacts {
        ecs_services,
        auto_scaling_groups,
        eks_node_groups,
    }
}

/// One check per resource the plan names.
pub fn checks(plan: &Plan, facts: &CapacityFacts, out: &mut Vec<Check>) {
    let region = &plan.regions.standby.region;
    let c = &plan.capacity;
    for (want, got) in c.ecs_services.iter().zip(&facts.ecs_services) {
        out.push(ecs_check(region, want, got));
    }
    for (want, got) in c.auto_scaling_groups.iter().zip(&facts.auto_scaling_groups) {
        out.push(asg_check(region, want, got));
    }
    for (want, got) in c.eks_node_groups.iter().zip(&facts.eks_node_groups) {
        out.push(node_group_check(region, want, got));
    }
}

fn ecs_check(
    region: &str,
    want: &crate::plan::EcsServiceMinimum,
    got: &Result<Option<EcsService>, String>,
) -> Check {
    const ID: &str = "capacity.ecs_service";
    let name = format!("{}/{}", want.cluster, want.service);
    let expected = format!("{name} runs at least {} tasks in S", want.min_running);
    let s = match got {
        Err(e) => return unread(ID, &format!("ECS service {name}"), e, &expected),
        Ok(None) => {
            return check(
                ID,
                Verdict::Fail,
                format!("no ECS service {name} in {region}"),
                &expected,
                "Create the service in S (or correct plan.capacity.ecs_services): nothing would serve the traffic Handover moves to S.",
            );
        }
        Ok(Some(s)) => s,
    };
    let min = i64::from(want.min_running);
    let observed = format!(
        "{name} is {}: {} running, {} pending, {} desired",
        s.status, s.running, s.pending, s.desired
    );
    if s.status != "ACTIVE" {
        return check(
            ID,
            Verdict::Fail,
            observed,
            &expected,
            "The service is being deleted (DRAINING or INACTIVE): recreate it in S.",
        );
    }
    if i64::from(s.running) >= min {
        return check(ID, Verdict::Pass, observed, &expected, "");
    }
    let fix = if i64::from(s.desired) < min {
        format!(
            "Raise the desired count: aws ecs update-service --region {region} --cluster {} --service {} --desired-count {min}",
            want.cluster, want.service
        )
    } else {
        format!(
            "Tasks are desired but do not stay running (the reference drill's CrashLoopBackOff): read why they stop with aws ecs list-tasks --region {region} --cluster {} --service-name {} --desired-status STOPPED, then describe-tasks (stoppedReason).",
            want.cluster, want.service
        )
    };
    check(ID, Verdict::Fail, observed, &expected, &fix)
}

fn asg_check(
    region: &str,
    want: &crate::plan::AutoScalingGroupMinimum,
    got: &Result<Option<AutoScalingGroup>, String>,
) -> Check {
    const ID: &str = "capacity.auto_scaling_group";
    let expected = format!(
        "{} has at least {} instances InService and Healthy in S",
        want.name, want.min_in_service
    );
    let g = match got {
        Err(e) => {
            return unread(
                ID,
                &format!("Auto Scaling group {}", want.name),
                e,
                &expected,
            );
        }
        Ok(None) => {
            return check(
                ID,
                Verdict::Fail,
                format!("no Auto Scaling group {} in {region}", want.name),
                &expected,
                "Create the group in S (or correct plan.capacity.auto_scaling_groups).",
            );
        }
        Ok(Some(g)) => g,
    };
    let min = i64::from(want.min_in_service);
    let observed = format!(
        "{}: {} of {} instances in service, {} desired, max {}",
        want.name, g.in_service, g.instances, g.desired, g.max
    );
    if i64::from(g.in_service) >= min {
        return check(ID, Verdict::Pass, observed, &expected, "");
    }
    check(
        ID,
        Verdict::Fail,
        observed,
        &expected,
        &scale_fix(region, &want.name, g, min),
    )
}

/// The fix for an Auto Scaling group short of `min`.
fn scale_fix(region: &str, name: &str, g: &AutoScalingGroup, min: i64) -> String {
    if i64::from(g.max) < min {
        format!(
            "The group cannot reach the minimum: aws autoscaling update-auto-scaling-group --region {region} --auto-scaling-group-name {name} --max-size {min} --desired-capacity {min}"
        )
    } else if i64::from(g.desired) < min {
        format!(
            "Raise the desired capacity: aws autoscaling set-desired-capacity --region {region} --auto-scaling-group-name {name} --desired-capacity {min}"
        )
    } else {
        format!(
            "Instances are desired but not in service: read why with aws autoscaling describe-scaling-activities --region {region} --auto-scaling-group-name {name}"
        )
    }
}

fn node_group_check(
    region: &str,
    want: &crate::plan::EksNodeGroupMinimum,
    (group, asgs): &NodeGroupFacts,
) -> Check {
    const ID: &str = "capacity.eks_node_group";
    let name = format!("{}/{}", want.cluster, want.node_group);
    let expected = format!(
        "{name} has at least {} nodes in service in S",
        want.min_nodes
    );
    let g = match group {
        Err(e) => return unread(ID, &format!("EKS node group {name}"), e, &expected),
        Ok(None) => {
            return check(
                ID,
                Verdict::Fail,
                format!("no EKS node group {name} in {region}"),
                &expected,
                "Create the node group in S (or correct plan.capacity.eks_node_groups).",
            );
        }
        Ok(Some(g)) => g,
    };
    let min = i64::from(want.min_nodes);
    let mut in_service = 0i64;
    let mut unread_asgs = Vec::new();
    for (asg, found) in asgs {
        match found {
            Ok(Some(a)) => in_service += i64::from(a.in_service),
            Ok(None) => unread_asgs.push(format!("{asg} (not found)")),
            Err(e) => unread_asgs.push(format!("{asg} ({e})")),
        }
    }
    let issues = if g.issues.is_empty() {
        String::new()
    } else {
        format!("; health issues: {}", g.issues.join("; "))
    };
    let observed = format!(
        "{name} is {}: {in_service} nodes in service, {} desired, max {}{issues}",
        g.status, g.desired, g.max
    );
    if g.status != "ACTIVE" && g.status != "UPDATING" {
        return check(
            ID,
            Verdict::Fail,
            observed,
            &expected,
            &format!(
                "Repair the node group (aws eks describe-nodegroup --region {region} --cluster-name {} --nodegroup-name {} shows its health issues).",
                want.cluster, want.node_group
            ),
        );
    }
    if in_service >= min {
        return check(ID, Verdict::Pass, observed, &expected, "");
    }
    if !unread_asgs.is_empty() && g.desired as i64 >= min {
        // The nodes could not be counted, but EKS wants enough of them.
        return check(
            ID,
            Verdict::Warn,
            format!(
                "{observed}; its Auto Scaling groups could not be read: {}",
                unread_asgs.join(", ")
            ),
            &expected,
            "Let readiness read the node group's Auto Scaling groups (autoscaling:DescribeAutoScalingGroups), or count the Ready nodes with kubectl get nodes.",
        );
    }
    let fix = if i64::from(g.max) < min || i64::from(g.desired) < min {
        format!(
            "Scale the node group: aws eks update-nodegroup-config --region {region} --cluster-name {} --nodegroup-name {} --scaling-config minSize={min},maxSize={},desiredSize={min}",
            want.cluster,
            want.node_group,
            i64::from(g.max).max(min)
        )
    } else {
        format!(
            "Nodes are desired but not in service: read why with aws autoscaling describe-scaling-activities --region {region} --auto-scaling-group-name {}",
            g.auto_scaling_groups
                .first()
                .map(String::as_str)
                .unwrap_or("<the node group's group>")
        )
    };
    check(ID, Verdict::Fail, observed, &expected, &fix)
}

/// The SDK clients behind [`CapacityReader`].
#[cfg(feature = "capacity")]
pub struct SdkCapacity {
    ecs: aws_sdk_ecs::Client,
    autoscaling: aws_sdk_autoscaling::Client,
    eks: aws_sdk_eks::Client,
    region: String,
}

#[cfg(feature = "capacity")]
impl SdkCapacity {
    /// Clients in `region` (S's).
    pub async fn new(aws: &crate::aws::Aws, region: &str) -> Self {
        let config = aws.config(region).await;
        SdkCapacity {
            ecs: aws_sdk_ecs::Client::new(&config),
            autoscaling: aws_sdk_autoscaling::Client::new(&config),
            eks: aws_sdk_eks::Client::new(&config),
            region: region.to_owned(),
        }
    }
}

#[cfg(feature = "capacity")]
impl CapacityReader for SdkCapacity {
    async fn ecs_service(
        &self,
        cluster: &str,
        service: &str,
    ) -> Result<Option<EcsService>, AwsError> {
        const OP: &str = "DescribeServices";
        let out = match self
            .ecs
            .describe_services()
            .cluster(cluster)
            .services(service)
            .send()
            .await
        {
            Ok(out) => out,
            Err(e) => {
                let e = crate::adapters::call_error("ecs", OP, &self.region, e);
                return match e.code() {
                    Some("ClusterNotFoundException") => Ok(None),
                    _ => Err(e),
                };
            }
        };
        // A missing service is a `failures` entry (reason MISSING), not an error.
        Ok(out.services().first().map(|s| EcsService {
            status: s.status().unwrap_or("UNKNOWN").to_owned(),
            desired: s.desired_count(),
            running: s.running_count(),
            pending: s.pending_count(),
        }))
    }

    async fn auto_scaling_group(&self, name: &str) -> Result<Option<AutoScalingGroup>, AwsError> {
        let out = self
            .autoscaling
            .describe_auto_scaling_groups()
            .auto_scaling_group_names(name)
            .send()
            .await
            .map_err(|e| {
                crate::adapters::call_error(
                    "autoscaling",
                    "DescribeAutoScalingGroups",
                    &self.region,
                    e,
                )
            })?;
        Ok(out.auto_scaling_groups().first().map(|g| {
            let instances = g.instances();
            AutoScalingGroup {
                desired: g.desired_capacity().unwrap_or(0),
                max: g.max_size().unwrap_or(0),
                in_service: instances
                    .iter()
                    .filter(|i| {
                        i.lifecycle_state().map(|s| s.as_str()) == Some("InService")
                            && i.health_status() == Some("Healthy")
                    })
                    .count() as i32,
                instances: instances.len() as i32,
            }
        }))
    }

    async fn node_group(
        &self,
        cluster: &str,
        node_group: &str,
    ) -> Result<Option<NodeGroup>, AwsError> {
        let out = match self
            .eks
            .describe_nodegroup()
            .cluster_name(cluster)
            .nodegroup_name(node_group)
            .send()
            .await
        {
            Ok(out) => out,
            Err(e) => {
                let e = crate::adapters::call_error("eks", "DescribeNodegroup", &self.region, e);
                return match e.code() {
                    Some("ResourceNotFoundException") => Ok(None),
                    _ => Err(e),
                };
            }
        };
        Ok(out.nodegroup().map(|g| {
            let scaling = g.scaling_config();
            NodeGroup {
                status: g
                    .status()
                    .map(|s| s.as_str().to_owned())
                    .unwrap_or_else(|| "UNKNOWN".into()),
                desired: scaling.and_then(|s| s.desired_size()).unwrap_or(0),
                max: scaling.and_then(|s| s.max_size()).unwrap_or(0),
                issues: g
                    .health()
                    .map(|h| {
                        h.issues()
                            .iter()
                            .map(|i| {
                                format!(
                                    "{}: {}",
                                    i.code().map(|c| c.as_str()).unwrap_or("?"),
                                    i.message().unwrap_or_default()
                                )
                            })
                            .collect()
                    })
                    .unwrap_or_default(),
                auto_scaling_groups: g
                    .resources()
                    .map(|r| {
                        r.auto_scaling_groups()
                            .iter()
                            .filter_map(|a| a.name().map(str::to_owned))
                            .collect()
                    })
                    .unwrap_or_default(),
            }
        }))
    }
}

/// A build without the ECS, Auto Scaling and EKS clients (only readiness,
/// the CLI and the harness enable feature `capacity`): every read fails,
/// so the checks say the capacity was not read.
#[cfg(not(feature = "capacity"))]
#[derive(Debug, Clone, Copy)]
pub struct SdkCapacity;

#[cfg(not(feature = "capacity"))]
impl SdkCapacity {
    /// No clients.
    pub async fn new(_aws: &crate::aws::Aws, _region: &str) -> Self {
        SdkCapacity
    }
}

#[cfg(not(feature = "capacity"))]
fn without(op: &'static str) -> AwsError {
    AwsError::Shape {
        service: "capacity",
        op,
        region: String::new(),
        problem: "this binary is built without feature `capacity`".into(),
    }
}

#[cfg(not(feature = "capacity"))]
impl CapacityReader for SdkCapacity {
    async fn ecs_service(&self, _: &str, _: &str) -> Result<Option<EcsService>, AwsError> {
        Err(without("DescribeServices"))
    }
    async fn auto_scaling_group(&self, _: &str) -> Result<Option<AutoScalingGroup>, AwsError> {
        Err(without("DescribeAutoScalingGroups"))
    }
    async fn node_group(&self, _: &str, _: &str) -> Result<Option<NodeGroup>, AwsError> {
        Err(without("DescribeNodegroup"))
    }
}
