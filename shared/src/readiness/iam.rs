//! `iam.fence_role`, `iam.promote_role`: would the fence and promote roles
//! be allowed what the failover asks of them, today?
//!
//! The template writes both roles from the stack's parameters, and
//! `scripts/iam_check.py` proves at build time that each grants what its
//! code calls. What neither sees is the account after deploy: a statement
//! edited by hand, a permissions boundary, a service control policy. IAM's
//! policy simulator (`iam:SimulatePrincipalPolicy`) evaluates all of them for
//! the role as it is, on the very resources the failover touches, without
//! calling them.

use super::{Check, Verdict, check, unread};
use crate::adapters::AwsError;
use crate::plan::Plan;
use std::future::Future;

/// The roles the failover acts with (the stack's `FenceRoleArn` and
/// `PromoteRoleArn` outputs; the readiness function has them as
/// `HANDOVER_FENCE_ROLE_ARN` and `HANDOVER_PROMOTE_ROLE_ARN`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailoverRoles {
    /// The fence function's role.
    pub fence: String,
    /// The promote function's role.
    pub promote: String,
}

impl FailoverRoles {
    /// From `HANDOVER_FENCE_ROLE_ARN` and `HANDOVER_PROMOTE_ROLE_ARN`, when
    /// both are set.
    pub fn from_env() -> Option<Self> {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        Some(FailoverRoles {
            fence: var(FENCE_ROLE_ENV)?,
            promote: var(PROMOTE_ROLE_ENV)?,
        })
    }
}

/// The fence role's ARN, in the readiness function's environment.
pub const FENCE_ROLE_ENV: &str = "HANDOVER_FENCE_ROLE_ARN";
/// The promote role's ARN, in the readiness function's environment.
pub const PROMOTE_ROLE_ENV: &str = "HANDOVER_PROMOTE_ROLE_ARN";

/// One simulation: actions on one resource, with the request context the
/// real call carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ask {
    /// `rds:PromoteReadReplica`, …
    pub actions: Vec<&'static str>,
    /// The resource ARN (`*` for actions without resource-level permissions).
    pub resource: String,
    /// Condition keys and their values (a string list each).
    pub context: Vec<(&'static str, Vec<String>)>,
}

/// The fence's calls on P's instance (`failover::fence`).
pub const FENCE_DB_ACTIONS: &[&str] = &[
    "rds:DescribeDBInstances",
    "rds:ModifyDBInstance",
    "rds:RebootDBInstance",
];
/// The promote's calls on S's instance (`failover::promote`).
pub const PROMOTE_DB_ACTIONS: &[&str] = &["rds:DescribeDBInstances", "rds:PromoteReadReplica"];

/// What the failover asks of each role, on the plan's resources. `role_arn`
/// gives the partition and account; `table` is Handover's, in the stack's
/// Region `table_region` (S's, also when the plan is a failback's reversed
/// one, whose standby is P).
pub fn asks(plan: &Plan, role_arn: &str, table: &str, table_region: &str, role: Role) -> Vec<Ask> {
    // arn:<partition>:iam::<account>:role/<name>
    let parts: Vec<&str> = role_arn.split(':').collect();
    let partition = parts.get(1).copied().unwrap_or("aws");
    let account = parts.get(4).copied().unwrap_or_default();
    let db = |site: &crate::plan::Site| {
        format!(
            "arn:{partition}:rds:{}:{account}:db:{}",
            site.region, site.db_instance_id
        )
    };
    let table = format!("arn:{partition}:dynamodb:{table_region}:{account}:table/{table}");
    // What every real call carries: the Region it is sent to and who sends
    // it. Without them, a service control policy or boundary that denies
    // "unless aws:RequestedRegion is one of ours" (StringNotEquals on a
    // missing key is true) would read as a refusal the real call never meets.
    let carried = |region: &str| {
        vec![
            ("aws:RequestedRegion", vec![region.to_owned()]),
            ("aws:PrincipalArn", vec![role_arn.to_owned()]),
            ("aws:PrincipalAccount", vec![account.to_owned()]),
        ]
    };
    let primary = &plan.regions.primary.region;
    let standby = &plan.regions.standby.region;
    match role {
        Role::Fence => vec![
            Ask {
                actions: FENCE_DB_ACTIONS.to_vec(),
                resource: db(&plan.regions.primary),
                context: carried(primary),
            },
            // The transition.
            Ask {
                actions: vec!["dynamodb:UpdateItem"],
                resource: table.clone(),
                context: carried(table_region),
            },
            // The run's approval key, through its pointer.
            Ask {
                actions: vec!["dynamodb:GetItem"],
                resource: table,
                context: [
                    carried(table_region),
                    vec![(
                        LEADING_KEYS,
                        vec!["APPROVAL_FOR#readiness".into(), "APPROVAL#readiness".into()],
                    )],
                ]
                .concat(),
            },
            // P's restart event (no resource-level permissions exist for it).
            Ask {
                actions: vec!["rds:DescribeEvents"],
                resource: "*".into(),
                context: carried(primary),
            },
        ],
        Role::Promote => vec![
            Ask {
                actions: PROMOTE_DB_ACTIONS.to_vec(),
                resource: db(&plan.regions.standby),
                context: carried(standby),
            },
            // The lag gate (no resource-level permissions exist for it),
            // read where the replica is.
            Ask {
                actions: vec!["cloudwatch:GetMetricData"],
                resource: "*".into(),
                context: carried(standby),
            },
            Ask {
                actions: vec!["dynamodb:GetItem", "dynamodb:UpdateItem"],
                resource: table,
                context: carried(table_region),
            },
        ],
    }
}

/// The one multi-valued condition key the asks carry.
const LEADING_KEYS: &str = "dynamodb:LeadingKeys";

/// Which role.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// `FenceRole`.
    Fence,
    /// `PromoteRole`.
    Promote,
}

impl Role {
    fn id(self) -> &'static str {
        match self {
            Role::Fence => "iam.fence_role",
            Role::Promote => "iam.promote_role",
        }
    }
    fn name(self) -> &'static str {
        match self {
            Role::Fence => "fence",
            Role::Promote => "promote",
        }
    }
}

/// One evaluated action, as the simulator answers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// `rds:PromoteReadReplica`.
    pub action: String,
    /// The resource.
    pub resource: String,
    /// `allowed`, `explicitDeny` or `implicitDeny`.
    pub decision: String,
    /// Condition keys the simulator lacked, if any.
    pub missing_context: Vec<String>,
}

/// `iam:SimulatePrincipalPolicy`. `Ok(None)`: the role does not exist.
pub trait PolicySimulator {
    /// Every action of `ask` on its resource, for `role_arn`.
    fn simulate(
        &self,
        role_arn: &str,
        ask: &Ask,
    ) -> impl Future<Output = Result<Option<Vec<Decision>>, AwsError>> + Send;
}

/// What was simulated for one role.
pub type RoleFacts = (String, Result<Option<Vec<Decision>>, String>);

/// The simulations, per role (`None`: the caller does not know the roles).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IamFacts {
    /// Fence's role and its decisions.
    pub fence: Option<RoleFacts>,
    /// Promote's role and its decisions.
    pub promote: Option<RoleFacts>,
}

/// Simulate what the failover asks of both roles.
pub async fn observe<S: PolicySimulator + Sync>(
    plan: &Plan,
    roles: Option<&FailoverRoles>,
    (table, table_region): (&str, &str),
    simulator: &S,
) -> IamFacts {
    let Some(roles) = roles else {
        return IamFacts::default();
    };
    let one = |role: Role, arn: &str| {
        let arn = arn.to_owned();
        async move {
            let mut all = Vec::new();
            for ask in asks(plan, &arn, table, table_region, role) {
                match simulator.simulate(&arn, &ask).await {
                    Ok(Some(d)) => all.extend(d),
                    Ok(None) => return (arn, Ok(None)),
                    Err(e) => return (arn, Err(crate::error::chain(&e))),
                }
            }
            (arn, Ok(Some(all)))
        }
    };
    let (fence, promote) = tokio::join!(
        one(Role::Fence, &roles.fence),
        one(Role::Promote, &roles.promote)
    );
    IamFacts {
        fence: Some(fence),
        promote: Some(promote),
    }
}

/// `iam.fence_role` and `iam.promote_role`.
pub fn checks(facts: &IamFacts, out: &mut Vec<Check>) {
    for (role, got) in [(Role::Fence, &facts.fence), (Role::Promote, &facts.promote)] {
        out.push(role_check(role, got.as_ref()));
    }
}

fn role_check(role: Role, got: Option<&RoleFacts>) -> Check {
    let expected = format!(
        "the {} role is allowed every call the failover makes with it (IAM policy simulation, boundaries and SCPs included)",
        role.name()
    );
    let Some((arn, got)) = got else {
        return check(
            role.id(),
            Verdict::Warn,
            format!(
                "not simulated: this caller was not given the {} role's ARN",
                role.name()
            ),
            &expected,
            "Give the roles' ARNs (the stack's outputs FenceRoleArn and PromoteRoleArn) as --fence-role-arn and --promote-role-arn, or read the readiness function's own result (handover status).",
        );
    };
    let decisions = match got {
        Err(e) => {
            return unread(role.id(), &format!("the simulation of {arn}"), e, &expected);
        }
        Ok(None) => {
            return check(
                role.id(),
                Verdict::Fail,
                format!("no role {arn}"),
                &expected,
                "The role is gone: redeploy the stack (sam deploy) so the function has its role back.",
            );
        }
        Ok(Some(d)) => d,
    };
    let refused: Vec<String> = decisions
        .iter()
        .filter(|d| d.decision != "allowed")
        .map(|d| {
            let missing = if d.missing_context.is_empty() {
                String::new()
            } else {
                format!(" (missing context {})", d.missing_context.join(", "))
            };
            format!("{} on {}: {}{missing}", d.action, d.resource, d.decision)
        })
        .collect();
    if decisions.is_empty() {
        return check(
            role.id(),
            Verdict::Warn,
            format!("the simulation of {arn} answered no decision"),
            &expected,
            "Run aws iam simulate-principal-policy by hand for the role.",
        );
    }
    if refused.is_empty() {
        return check(
            role.id(),
            Verdict::Pass,
            format!("{arn}: {} calls allowed", decisions.len()),
            &expected,
            "",
        );
    }
    check(
        role.id(),
        Verdict::Fail,
        format!("{arn} would be refused: {}", refused.join("; ")),
        &expected,
        &format!(
            "Restore the {} role's policy from the template (sam deploy), and look for a permissions boundary or SCP that denies it: the failover would stop at this step.",
            role.name()
        ),
    )
}

/// `iam:SimulatePrincipalPolicy` through the SDK (IAM is global: the
/// client is built in us-east-1).
#[cfg(feature = "iam")]
pub struct IamSimulator {
    client: aws_sdk_iam::Client,
}

#[cfg(feature = "iam")]
impl IamSimulator {
    /// The IAM client.
    pub async fn new(aws: &crate::aws::Aws) -> Self {
        IamSimulator {
            client: aws_sdk_iam::Client::new(&aws.config(crate::aws::GLOBAL_METRICS_REGION).await),
        }
    }
}

#[cfg(feature = "iam")]
impl PolicySimulator for IamSimulator {
    async fn simulate(&self, role_arn: &str, ask: &Ask) -> Result<Option<Vec<Decision>>, AwsError> {
        use aws_sdk_iam::types::{ContextEntry, ContextKeyTypeEnum};
        let context: Vec<ContextEntry> = ask
            .context
            .iter()
            .map(|(k, v)| {
                ContextEntry::builder()
                    .context_key_name(*k)
                    .context_key_type(if *k == LEADING_KEYS {
                        ContextKeyTypeEnum::StringList
                    } else {
                        ContextKeyTypeEnum::String
                    })
                    .set_context_key_values(Some(v.clone()))
                    .build()
            })
            .collect();
        let mut out = Vec::new();
        let mut marker: Option<String> = None;
        loop {
            let answer = self
                .client
                .simulate_principal_policy()
                .policy_source_arn(role_arn)
                .set_action_names(Some(ask.actions.iter().map(|a| (*a).to_owned()).collect()))
                .resource_arns(&ask.resource)
                .set_context_entries((!context.is_empty()).then(|| context.clone()))
                .set_marker(marker.take())
                .send()
                .await;
            let answer = match answer {
                Ok(a) => a,
                Err(e) => {
                    let e =
                        crate::adapters::call_error("iam", "SimulatePrincipalPolicy", "global", e);
                    return match e.code() {
                        Some("NoSuchEntity") => Ok(None),
                        _ => Err(e),
                    };
                }
            };
            for r in answer.evaluation_results() {
                // With ResourceArns given, IAM names missing keys per
                // resource (ResourceSpecificResults), not at the top.
                let mut missing = r.missing_context_values().to_vec();
                for per in r.resource_specific_results() {
                    for k in per.missing_context_values() {
                        if !missing.contains(k) {
                            missing.push(k.clone());
                        }
                    }
                }
                out.push(Decision {
                    action: r.eval_action_name().to_owned(),
                    resource: r.eval_resource_name().unwrap_or(&ask.resource).to_owned(),
                    decision: r.eval_decision().as_str().to_owned(),
                    missing_context: missing,
                });
            }
            match answer.marker() {
                Some(m) if answer.is_truncated() => marker = Some(m.to_owned()),
                _ => break,
            }
        }
        Ok(Some(out))
    }
}

/// A build without the IAM client (only readiness, the CLI and the harness
/// enable feature `iam`): the simulation is reported unread.
#[cfg(not(feature = "iam"))]
#[derive(Debug, Clone, Copy)]
pub struct IamSimulator;

#[cfg(not(feature = "iam"))]
impl IamSimulator {
    /// No client.
    pub async fn new(_aws: &crate::aws::Aws) -> Self {
        IamSimulator
    }
}

#[cfg(not(feature = "iam"))]
impl PolicySimulator for IamSimulator {
    async fn simulate(&self, _: &str, _: &Ask) -> Result<Option<Vec<Decision>>, AwsError> {
        Err(AwsError::Shape {
            service: "iam",
            op: "SimulatePrincipalPolicy",
            region: String::new(),
            problem: "this binary is built without feature `iam`".into(),
        })
    }
}
