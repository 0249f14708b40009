//! Readiness: would a failover work now? Read-only checks of the plan
//! against the live world, before the incident.
//!
//! The reference drill (003) lost most of its preparation to drift nothing
//! watched: the DR secret's user was not the replica's master user, the
//! health-check alarm sat in the wrong Region, S's app pulled its image from
//! P's ECR, and the health check watched the failover name itself. Each
//! [`Check`] answers `pass`, `warn` or `fail` with what was observed, what
//! was expected and the fix in one line.
//!
//! [`Snapshot`] is gathered by [`observe`] with read calls only; [`evaluate`]
//! is a pure function of it, so each check is tested on the drift it
//! catches.
//!
//! [`output`] renders an evaluation for S3, CloudWatch (EMF) and
//! EventBridge; [`publish`] writes it there.
//!
//! [`iam`] simulates the fence and promote roles on the resources the
//! failover touches; [`capacity`] compares S's compute with the plan's
//! minimums. Both read through SDK clients only the readiness function, the
//! CLI and the harness build (features `iam` and `capacity`).

use crate::adapters::traffic::DnsAnswers;
use crate::adapters::{
    AwsError, DbInspector, DbInstance, LagSample, MaintenanceReader, PendingMaintenance, ReplicaLag,
};
use crate::adapters::{ParameterReader, SecretUsernames};
use crate::aws::GLOBAL_METRICS_REGION;
use crate::dependencies::{mention, mentions, p_markers};
use crate::failover::canary::{Secrets, probe_read_only};
use crate::plan::{Canary, Dependency, Plan};
use crate::store::lock::LockState;
use crate::store::primary::PrimaryRecord;
use chrono::{DateTime, Utc};

pub mod capacity;
pub mod iam;
pub mod output;
pub mod publish;

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// A check's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// As the plan needs it.
    Pass,
    /// Works, but weaker than it should be, or could not be checked.
    Warn,
    /// A failover would not work (or not safely) as things are.
    Fail,
}

impl Verdict {
    /// `pass`, `warn`, `fail`.
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Warn => "warn",
            Verdict::Fail => "fail",
        }
    }
}

/// One check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Check {
    /// Stable id, e.g. `secrets.db_user`.
    pub id: String,
    /// The verdict.
    pub verdict: Verdict,
    /// What was observed.
    pub observed: String,
    /// What the plan needs.
    pub expected: String,
    /// The fix, in one line (empty on a pass).
    pub fix: String,
}

/// All checks of one evaluation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Readiness {
    /// When the world was read.
    pub at: DateTime<Utc>,
    /// Every check, in a stable order.
    pub checks: Vec<Check>,
}

impl Readiness {
    /// How many checks have `verdict`.
    pub fn count(&self, verdict: Verdict) -> usize {
        self.checks.iter().filter(|c| c.verdict == verdict).count()
    }

    /// The worst verdict (pass when there is no check).
    pub fn worst(&self) -> Verdict {
        self.checks
            .iter()
            .map(|c| c.verdict)
            .max()
            .unwrap_or(Verdict::Pass)
    }

    /// `readiness: 1 fail, 2 warn, 14 pass`.
    pub fn summary(&self) -> String {
        format!(
            "readiness: {} fail, {} warn, {} pass",
            self.count(Verdict::Fail),
            self.count(Verdict::Warn),
            self.count(Verdict::Pass)
        )
    }

    /// "12 min ago: 1 fail, 1 warn, 14 pass (FAIL secrets.db_user)": the
    /// line the approval message and the report show.
    pub fn age_line(&self, now: DateTime<Utc>) -> String {
        let age = (now - self.at).num_minutes().max(0);
        let failing: Vec<&str> = self
            .checks
            .iter()
            .filter(|c| c.verdict == Verdict::Fail)
            .map(|c| c.id.as_str())
            .collect();
        format!(
            "{age} min ago: {}{}",
            self.summary().trim_start_matches("readiness: "),
            if failing.is_empty() {
                String::new()
            } else {
                format!(" (FAIL {})", failing.join(", "))
            }
        )
    }

    /// The summary, then one line per check that is not a pass.
    pub fn text(&self) -> String {
        let mut out = vec![format!(
            "{} (at {})",
            self.summary(),
            self.at.format("%Y-%m-%d %H:%M:%S UTC")
        )];
        for c in self.checks.iter().filter(|c| c.verdict != Verdict::Pass) {
            out.push(format!(
                "  {} {}: observed {}; expected {}. Fix: {}",
                c.verdict.label().to_uppercase(),
                c.id,
                c.observed,
                c.expected,
                c.fix
            ));
        }
        out.join("\n")
    }
}

/// What the health check of P watches (Route 53 GetHealthCheck).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthCheckTarget {
    /// `FullyQualifiedDomainName`, if the check names one.
    pub fqdn: Option<String>,
    /// `IPAddress`, if the check names one.
    pub ip: Option<String>,
    /// `ResourcePath`.
    pub path: Option<String>,
    /// `Type`, e.g. `HTTPS`.
    pub kind: String,
}

/// The fence security group as EC2 describes it (DescribeSecurityGroups).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FenceGroup {
    /// `sg-…`.
    pub id: String,
    /// Its VPC.
    pub vpc_id: Option<String>,
    /// Its inbound rules, one line each (`tcp 5432 from 10.0.0.0/8`).
    pub ingress: Vec<String>,
}

/// What Slack says of the bot, its channel and the approvers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlackFacts {
    /// `auth.test`: the bot's workspace and user id.
    pub bot: Result<(String, String), String>,
    /// `conversations.info`: is the bot a member of the plan's channel?
    pub in_channel: Result<bool, String>,
    /// `users.info` of each approver: `Ok(Some(deleted))`, `Ok(None)` when
    /// the workspace does not know them.
    pub approvers: Vec<(String, Result<Option<bool>, String>)>,
}

impl SlackFacts {
    /// Every read failed the same way (the bot token could not be read).
    pub fn unreadable(plan: &Plan, e: &str) -> Self {
        SlackFacts {
            bot: Err(e.to_owned()),
            in_channel: Err(e.to_owned()),
            approvers: plan
                .slack
                .approvers
                .iter()
                .map(|a| (a.user_id.clone(), Err(e.to_owned())))
                .collect(),
        }
    }
}

/// Everything [`evaluate`] reads; `Err` keeps the call's error text.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    /// When.
    pub at: DateTime<Utc>,
    /// P's instance.
    pub p_db: Result<Option<DbInstance>, String>,
    /// S's instance.
    pub s_db: Result<Option<DbInstance>, String>,
    /// S's newest ReplicaLag sample in the last 5 minutes.
    pub lag: Result<Option<LagSample>, String>,
    /// The maintenance RDS has pending for S.
    pub s_maintenance: Result<Vec<PendingMaintenance>, String>,
    /// S's DB secrets and the user each names.
    pub secret_usernames: Vec<(String, Result<Option<String>, String>)>,
    /// The canary's read-only probe of S (None: http canary).
    pub canary: Option<Result<(String, bool), String>>,
    /// What P's health check watches.
    pub p_health_check: Result<Option<HealthCheckTarget>, String>,
    /// TTLs of the public name's record sets, by set identifier.
    pub ttls: Result<Vec<(String, Option<i64>)>, String>,
    /// Plan-declared SSM parameters in S.
    pub parameters: Vec<(String, Result<Option<String>, String>)>,
    /// Handover's primary record.
    pub primary: Result<Option<PrimaryRecord>, String>,
    /// Handover's lock.
    pub lock: Result<Option<LockState>, String>,
    /// The fence group in P's Region (`Ok(None)`: no such group).
    pub fence_group: Result<Option<FenceGroup>, String>,
    /// Slack, as the bot sees it.
    pub slack: SlackFacts,
    /// S's compute the plan names.
    pub capacity: capacity::CapacityFacts,
    /// The policy simulation of the fence and promote roles.
    pub iam: iam::IamFacts,
}

/// Maintenance RDS applies within this long counts as under way: S may be
/// mid-maintenance (upgrading, rebooting) when a failover needs it, and
/// PromoteReadReplica is refused until S is available again.
const MAINTENANCE_IMMINENT_H: i64 = 24;

/// `rds.s_maintenance`: pending maintenance on S, the instance a failover
/// promotes. Applied in S's maintenance window (or at once past its forced
/// date), it makes S `upgrading` or `rebooting` for minutes.
fn maintenance_check(
    st: &crate::plan::Site,
    pending: &Result<Vec<PendingMaintenance>, String>,
    now: DateTime<Utc>,
) -> Check {
    const ID: &str = "rds.s_maintenance";
    const EXPECTED: &str = "no maintenance pending on S, or none due within a day";
    let actions = match pending {
        Ok(a) => a,
        Err(e) => return unread(ID, "S's pending maintenance", e, EXPECTED),
    };
    if actions.is_empty() {
        return check(
            ID,
            Verdict::Pass,
            format!("no maintenance pending on {}", st.db_instance_id),
            EXPECTED,
            "",
        );
    }
    let due = |a: &PendingMaintenance| {
        [a.current_apply, a.forced_apply]
            .into_iter()
            .flatten()
            .min()
    };
    let soon = actions.iter().any(|a| {
        due(a).is_some_and(|d| d <= now + chrono::Duration::hours(MAINTENANCE_IMMINENT_H))
    });
    let listed: Vec<String> = actions
        .iter()
        .map(|a| match due(a) {
            Some(d) => format!("{} (due {})", a.action, d.format("%Y-%m-%d %H:%M UTC")),
            None => format!("{} (not scheduled)", a.action),
        })
        .collect();
    check(
        ID,
        if soon { Verdict::Fail } else { Verdict::Warn },
        format!(
            "{} has pending maintenance: {}",
            st.db_instance_id,
            listed.join(", ")
        ),
        EXPECTED,
        &format!(
            "Apply it in a quiet hour, when no failover is likely (aws rds apply-pending-maintenance-action --region {} --resource-identifier <S's ARN> --apply-action <action> --opt-in-type immediate): while RDS applies it S is not available and cannot be promoted.",
            st.region
        ),
    )
}

fn check(id: &str, verdict: Verdict, observed: String, expected: &str, fix: &str) -> Check {
    Check {
        id: id.into(),
        verdict,
        observed,
        expected: expected.into(),
        fix: if verdict == Verdict::Pass {
            String::new()
        } else {
            fix.into()
        },
    }
}

/// S's replication: stopped as RDS shows it (read replication status), or
/// its ReplicaLag against the RPO target.
fn replica_lag_check(
    plan: &Plan,
    s_db: Option<&DbInstance>,
    lag: &Result<Option<LagSample>, String>,
) -> Check {
    if let Some(why) = s_db.and_then(DbInstance::replication_stopped) {
        return check(
            "rds.replica_lag",
            Verdict::Fail,
            why,
            "replication running, lag under the RPO target",
            "Replication is broken: read S's RDS events (RDS-EVENT-0045 \"replication has stopped\", RDS-EVENT-0057 \"replication streaming has been terminated\") and P's replication slots.",
        );
    }
    let target = plan.targets.rpo_s as f64;
    match lag {
        Ok(Some(l)) if l.seconds < 0.0 => check(
            "rds.replica_lag",
            Verdict::Fail,
            format!(
                "ReplicaLag -1 at {} (replication stopped)",
                l.at.format("%H:%M:%S")
            ),
            "replication running, lag under the RPO target",
            "Replication is broken: look at S's RDS events and P's replication slots.",
        ),
        Ok(Some(l)) if l.seconds > target => check(
            "rds.replica_lag",
            Verdict::Fail,
            format!("ReplicaLag {} s at {}", l.seconds, l.at.format("%H:%M:%S")),
            &format!("lag under the RPO target {target} s"),
            "S is behind by more than the RPO target: a failover now loses more than agreed; find what slows replication (P's write load, S's instance size, the network).",
        ),
        Ok(Some(l)) => check(
            "rds.replica_lag",
            if l.seconds > target * LAG_WARN_SHARE {
                Verdict::Warn
            } else {
                Verdict::Pass
            },
            format!("ReplicaLag {} s at {}", l.seconds, l.at.format("%H:%M:%S")),
            &format!("lag well under the RPO target {target} s"),
            "S's lag is over half the RPO target: watch it before it breaches.",
        ),
        Ok(None) => check(
            "rds.replica_lag",
            Verdict::Warn,
            "no ReplicaLag sample in the last 5 minutes".into(),
            "a ReplicaLag sample every minute",
            "CloudWatch has no ReplicaLag for S: check that S is a replica and that metrics are published.",
        ),
        Err(e) => unread(
            "rds.replica_lag",
            "ReplicaLag",
            e,
            "lag under the RPO target",
        ),
    }
}

fn unread(id: &str, what: &str, e: &str, expected: &str) -> Check {
    check(
        id,
        Verdict::Warn,
        format!("{what} could not be read: {e}"),
        expected,
        "Grant the read call to the role running readiness, or retry if AWS was throttling.",
    )
}

fn host_of(url: &str) -> &str {
    url.split("://")
        .nth(1)
        .unwrap_or(url)
        .split(['/', ':', '?'])
        .next()
        .unwrap_or_default()
}

/// `host[:port]` of a URL.
fn authority_of(url: &str) -> &str {
    url.split("://")
        .nth(1)
        .unwrap_or(url)
        .split(['/', '?'])
        .next()
        .unwrap_or_default()
}

fn same_name(a: &str, b: &str) -> bool {
    a.trim_end_matches('.')
        .eq_ignore_ascii_case(b.trim_end_matches('.'))
}

/// The record TTL readiness asks for at most, seconds: clients hold an
/// answer that long after Route 53 moved it.
pub const MAX_TTL_S: i64 = 60;

/// Replica lag over this share of the RPO target is a warning.
const LAG_WARN_SHARE: f64 = 0.5;

/// Evaluate every check on `s`.
pub fn evaluate(plan: &Plan, s: &Snapshot) -> Readiness {
    evaluate_for(plan, s, None)
}

/// [`evaluate`], asked by the run `own_run` (a planned switchover's gate):
/// the lock that run holds is not a run "going on" beside it.
pub fn evaluate_for(plan: &Plan, s: &Snapshot, own_run: Option<&str>) -> Readiness {
    let (p, st) = (&plan.regions.primary, &plan.regions.standby);
    let mut out = Vec::new();
    // --- RDS ---------------------------------------------------------------
    let p_db = match &s.p_db {
        Ok(Some(d)) => {
            out.push(check(
                "rds.p_exists",
                Verdict::Pass,
                format!("{} is {}", d.id, d.status),
                "P's instance exists",
                "",
            ));
            Some(d)
        }
        Ok(None) => {
            out.push(check(
                "rds.p_exists",
                Verdict::Fail,
                format!("no instance {} in {}", p.db_instance_id, p.region),
                "P's instance exists",
                "Correct regions.primary.db_instance_id in the plan.",
            ));
            None
        }
        Err(e) => {
            out.push(unread(
                "rds.p_exists",
                "P's instance",
                e,
                "P's instance exists",
            ));
            None
        }
    };
    let s_db = match &s.s_db {
        Ok(Some(d)) => Some(d),
        Ok(None) => {
            out.push(check(
                "rds.s_replica_of_p",
                Verdict::Fail,
                format!("no instance {} in {}", st.db_instance_id, st.region),
                "S's instance exists and replicates P",
                "Create the cross-Region read replica, or correct regions.standby.db_instance_id.",
            ));
            None
        }
        Err(e) => {
            out.push(unread(
                "rds.s_replica_of_p",
                "S's instance",
                e,
                "S's instance exists and replicates P",
            ));
            None
        }
    };
    if let Some(d) = s_db {
        let source = d.replication_source.as_deref();
        let replicates_p =
            source.is_some_and(|src| crate::adapters::rds::names_instance(src, &p.db_instance_id));
        out.push(check(
            "rds.s_replica_of_p",
            if replicates_p { Verdict::Pass } else { Verdict::Fail },
            match source {
                Some(src) => format!("{} replicates {src}", d.id),
                None => format!("{} has no replication source (a standalone instance)", d.id),
            },
            "S's instance is a read replica of P's",
            "S stands alone (a failover happened, or the replica was promoted by hand): re-protect with a new replica before relying on Handover.",
        ));
        // PromoteReadReplica is refused while S is backing up or modifying.
        let busy = !matches!(d.status.as_str(), "available");
        out.push(check(
            "rds.s_status",
            if busy { Verdict::Warn } else { Verdict::Pass },
            format!("{} is {}", d.id, d.status),
            "S is available (PromoteReadReplica is refused while S is backing-up, modifying or rebooting)",
            "Wait for S to be available; if it stays backing-up for long, check its backup window.",
        ));
    }
    if let Some(d) = p_db {
        out.push(check(
            "rds.p_backups",
            if d.backup_retention_days > 0 {
                Verdict::Pass
            } else {
                Verdict::Warn
            },
            format!("{} keeps backups {} days", d.id, d.backup_retention_days),
            "P keeps automated backups (retention > 0), the restore path if both sides are lost",
            "Set P's BackupRetentionPeriod to at least 1 day.",
        ));
    }
    out.push(replica_lag_check(plan, s_db, &s.lag));
    out.push(maintenance_check(st, &s.s_maintenance, s.at));
    // --- Secrets -----------------------------------------------------------
    for (arn, user) in &s.secret_usernames {
        let id = "secrets.db_user";
        let expected = "the DB secret's username is S's MasterUsername";
        out.push(match (user, s_db.and_then(|d| d.master_username.as_deref())) {
            (Ok(Some(u)), Some(m)) if u == m => {
                check(id, Verdict::Pass, format!("{arn} names {u}"), expected, "")
            }
            (Ok(Some(u)), Some(m)) => check(
                id,
                Verdict::Fail,
                format!("{arn} names {u:?}, S's master user is {m:?}"),
                expected,
                "Put S's master user (or a user that exists on S) in the secret: apps and the canary would fail to log in after the failover.",
            ),
            (Ok(None), _) => check(
                id,
                Verdict::Fail,
                format!("{arn} has no username"),
                expected,
                "Store the RDS credentials JSON {\"username\": …, \"password\": …} in the secret.",
            ),
            (Ok(Some(u)), None) => check(
                id,
                Verdict::Warn,
                format!("{arn} names {u:?}; S's master user is unknown"),
                expected,
                "Make S's instance readable (rds:DescribeDBInstances) so the user can be compared.",
            ),
            (Err(e), _) => unread(id, &format!("secret {arn}"), e, expected),
        });
    }
    // Every secret verify reads must be readable when P's Region is not:
    // a secret that lives in P's Region is a dependency on P.
    {
        let mut arns: Vec<&str> = Vec::new();
        if let crate::plan::Canary::Postgres {
            secret_arn,
            ca_secret_arn,
            ..
        } = &plan.canary
        {
            arns.push(secret_arn);
            arns.extend(ca_secret_arn.as_deref());
        }
        arns.extend(plan.regions.standby.db_secret_arn.as_deref());
        let in_p: Vec<&str> = arns
            .iter()
            .copied()
            .filter(|a| crate::slack::secrets::region_of(a) == Some(p.region.as_str()))
            .collect();
        let expected = "the secrets verify reads live outside P's Region";
        out.push(if in_p.is_empty() {
            check("secrets.region", Verdict::Pass, format!("{} secret(s), none in {}", arns.len(), p.region), expected, "")
        } else {
            check(
                "secrets.region",
                // A planned run's gate (both Regions up: a failback's reads
                // S's secrets from the reversed plan's P) only warns.
                if own_run.is_some() {
                    Verdict::Warn
                } else {
                    Verdict::Fail
                },
                format!("in P's Region {}: {}", p.region, in_p.join(", ")),
                expected,
                "Replicate each secret to S's Region (Secrets Manager replica secrets) and name S's copy in the plan: in an outage of P's Region verify could not read them.",
            )
        });
    }
    // --- The canary --------------------------------------------------------
    match &s.canary {
        Some(Ok((detail, in_recovery))) => out.push(check(
            "canary.connect",
            if *in_recovery { Verdict::Pass } else { Verdict::Warn },
            detail.clone(),
            "the canary reaches S over TLS and S is still a replica",
            "S answers but is not in recovery: it is already writable, so a failover would be a second writer's; check the primary record and P.",
        )),
        Some(Err(e)) => out.push(check(
            "canary.connect",
            Verdict::Fail,
            e.clone(),
            "the canary reaches S over TLS (from the canary's VPC)",
            "Fix the route, security group, credentials or CA bundle between the canary and S now: verify cannot prove a write otherwise.",
        )),
        None => {}
    }
    // --- The fence -----------------------------------------------------------
    let fence_id = &p.fence_security_group_id;
    let expected = "the fence group exists in P's VPC and allows nothing in";
    out.push(match &s.fence_group {
        Ok(None) => check(
            "fence.group",
            Verdict::Fail,
            format!("no security group {fence_id} in {}", p.region),
            expected,
            "Create a security group with no inbound rule in P's VPC and set regions.primary.fence_security_group_id to it: RDS refuses the fence's modify with a group it does not know.",
        ),
        Ok(Some(g)) if !g.ingress.is_empty() => check(
            "fence.group",
            Verdict::Fail,
            format!("{} allows in: {}", g.id, g.ingress.join("; ")),
            expected,
            "Remove every inbound rule from the fence group: a fence that admits anyone lets P's writers go on writing after the failover (split brain).",
        ),
        Ok(Some(g)) => {
            let p_vpc = p_db.and_then(|d| d.vpc_id.as_deref());
            match (g.vpc_id.as_deref(), p_vpc) {
                (Some(a), Some(b)) if a != b => check(
                    "fence.group",
                    Verdict::Fail,
                    format!("{} is in {a}, P is in {b}", g.id),
                    expected,
                    "Create the fence group in P's VPC: RDS refuses a group of another VPC, so the fence could not be applied.",
                ),
                (Some(v), None) if p_db.is_none() => check(
                    "fence.group",
                    Verdict::Warn,
                    format!("{} has no inbound rule, in {v}; P's instance could not be read, so its VPC was not compared", g.id),
                    expected,
                    "Make P's instance readable (rds:DescribeDBInstances in P's Region) so the fence group's VPC can be compared with P's.",
                ),
                (vpc, p_vpc) => check(
                    "fence.group",
                    Verdict::Pass,
                    format!(
                        "{} has no inbound rule{}",
                        g.id,
                        match (vpc, p_vpc) {
                            (Some(v), Some(_)) => format!(", in P's VPC {v}"),
                            (Some(v), None) => format!(", in {v} (RDS names no VPC for P: not compared)"),
                            _ => String::new(),
                        }
                    ),
                    expected,
                    "",
                ),
            }
        }
        Err(e) => unread("fence.group", "the fence group", e, expected),
    });
    iam::checks(&s.iam, &mut out);
    // --- Slack ---------------------------------------------------------------
    let slack_unread = |id: &str, what: &str, e: &str, expected: &str| {
        check(
            id,
            Verdict::Fail,
            format!("{what}: {e}"),
            expected,
            "Nobody could be asked in Slack: fix the bot token (Secrets Manager), its scopes (channels:read, groups:read, users:read, chat:write) or Slack's reachability; until then approvals go to the operator topic and `handover approve`.",
        )
    };
    match &s.slack.bot {
        Ok((team, user)) => {
            let other_team = plan.slack.team_id.as_deref().is_some_and(|t| t != team);
            out.push(check(
                "slack.bot_token",
                if other_team { Verdict::Fail } else { Verdict::Pass },
                format!("the bot token is valid: bot {user} in workspace {team}"),
                &match &plan.slack.team_id {
                    Some(t) => format!("a valid bot token of workspace {t}"),
                    None => "a valid bot token".to_owned(),
                },
                "The token is of another workspace than slack.team_id: clicks would be refused; store the right workspace's bot token.",
            ));
        }
        Err(e) => out.push(slack_unread(
            "slack.bot_token",
            "auth.test failed",
            e,
            "a valid bot token",
        )),
    }
    let channel = &plan.slack.channel;
    out.push(match &s.slack.in_channel {
        Ok(true) => check(
            "slack.channel",
            Verdict::Pass,
            format!("the bot is in {channel}"),
            "the bot is a member of the approval channel",
            "",
        ),
        Ok(false) => check(
            "slack.channel",
            Verdict::Fail,
            format!("the bot is not a member of {channel}"),
            "the bot is a member of the approval channel",
            "Invite the bot to the channel (/invite @handover): chat.postMessage fails with not_in_channel, and the approval goes to the operator topic instead.",
        ),
        Err(e) => slack_unread(
            "slack.channel",
            &format!("conversations.info of {channel} failed"),
            e,
            "the bot is a member of the approval channel",
        ),
    });
    for (user, found) in &s.slack.approvers {
        let name = plan
            .approver(user)
            .map_or(user.as_str(), |a| a.name.as_str());
        let expected = "every approver on the list is an active member of the workspace";
        out.push(match found {
            Ok(Some(false)) => check(
                "slack.approver",
                Verdict::Pass,
                format!("{name} ({user}) is active"),
                expected,
                "",
            ),
            Ok(Some(true)) => check(
                "slack.approver",
                Verdict::Warn,
                format!("{name} ({user}) is deactivated"),
                expected,
                "Replace them in slack.approvers: a deactivated person cannot click, so fewer people can decide at 3 a.m.",
            ),
            Ok(None) => check(
                "slack.approver",
                Verdict::Warn,
                format!("{name} ({user}) is not in the workspace"),
                expected,
                "Correct the user id in slack.approvers (Slack profile → Copy member ID).",
            ),
            Err(e) => check(
                "slack.approver",
                Verdict::Warn,
                format!("users.info of {user} failed: {e}"),
                expected,
                "Grant the bot the users:read scope, or retry if Slack was unreachable.",
            ),
        });
    }
    if !s.slack.approvers.is_empty()
        && s.slack
            .approvers
            .iter()
            .all(|(_, f)| !matches!(f, Ok(Some(false))))
        && s.slack.approvers.iter().any(|(_, f)| f.is_ok())
    {
        out.push(check(
            "slack.approvers_left",
            Verdict::Fail,
            "no approver on the list is an active member".into(),
            "at least one active approver",
            "Nobody can approve in Slack: add active people to slack.approvers (and IAM principals to cli_approvers).",
        ));
    }
    // --- Detection ---------------------------------------------------------
    let record = &plan.dns.record_name;
    let forbidden: Vec<&str> = vec![
        record.as_str(),
        plan.dns.standby_target.as_str(),
        host_of(&st.endpoint),
    ];
    out.push(match &s.p_health_check {
        Ok(Some(hc)) => {
            let watched = hc.fqdn.as_deref().or(hc.ip.as_deref()).unwrap_or("?");
            let bad = forbidden.iter().any(|f| !f.is_empty() && same_name(watched, f));
            check(
                "detection.health_check_target",
                if bad { Verdict::Fail } else { Verdict::Pass },
                format!(
                    "{} watches {} {}{}",
                    p.health_check_id,
                    hc.kind,
                    watched,
                    hc.path.as_deref().unwrap_or("")
                ),
                "P's health check watches a P-only endpoint, never the failover name or anything that resolves to S",
                "Point P's health check at P's own endpoint (its load balancer): watching the failover name turns it healthy as soon as S answers.",
            )
        }
        Ok(None) => check(
            "detection.health_check_target",
            Verdict::Fail,
            format!("no health check {}", p.health_check_id),
            "P's health check exists",
            "Create P's health check, or correct regions.primary.health_check_id.",
        ),
        Err(e) => unread(
            "detection.health_check_target",
            "P's health check",
            e,
            "P's health check watches a P-only endpoint",
        ),
    });
    // The failover names by host; S's own endpoint by host and port (two
    // endpoints may share a host on different ports).
    let probe = host_of(&p.endpoint);
    let probe_bad = [record.as_str(), plan.dns.standby_target.as_str()]
        .iter()
        .any(|f| same_name(probe, f))
        || same_name(authority_of(&p.endpoint), authority_of(&st.endpoint));
    out.push(check(
        "detection.probe_endpoint",
        if probe_bad { Verdict::Fail } else { Verdict::Pass },
        format!("detect probes {}", p.endpoint),
        "detect probes P's own endpoint, not the failover name",
        "Set regions.primary.endpoint to P's own endpoint: the failover name answers from S after Route 53 moves it.",
    ));
    if let Some(alarm) = &plan.detection.alarm {
        out.push(check(
            "detection.alarm_region",
            if alarm.region == GLOBAL_METRICS_REGION { Verdict::Pass } else { Verdict::Fail },
            format!("alarm {} lives in {}", alarm.name, alarm.region),
            "the health-check alarm lives in us-east-1, where Route 53 publishes its metrics",
            "Recreate the alarm in us-east-1: elsewhere it never gets data and sits in INSUFFICIENT_DATA.",
        ));
    }
    out.push(match &s.ttls {
        Ok(t) if t.is_empty() => check(
            "dns.ttl",
            Verdict::Fail,
            format!("no record set named {record}"),
            "the failover records exist",
            "Create the PRIMARY and SECONDARY failover records for the public name.",
        ),
        Ok(t) => {
            let worst = t.iter().filter_map(|(_, ttl)| *ttl).max();
            let over = worst.is_some_and(|w| w > MAX_TTL_S);
            check(
                "dns.ttl",
                if over { Verdict::Warn } else { Verdict::Pass },
                t.iter()
                    .map(|(id, ttl)| {
                        format!(
                            "{id}: {}",
                            ttl.map_or("alias (the target's TTL)".to_owned(), |v| format!("TTL {v} s"))
                        )
                    })
                    .collect::<Vec<_>>()
                    .join(", "),
                &format!("TTL at most {MAX_TTL_S} s"),
                "Lower the records' TTL to 60 s or less: clients keep P's answer that long after Route 53 moves the name.",
            )
        }
        Err(e) => unread("dns.ttl", "the public name's records", e, "TTL at most 60 s"),
    });
    // --- Dependencies --------------------------------------------------------
    let markers = p_markers(plan);
    let names_p = |v: &str| mentions(v, &markers);
    for dep in &plan.dependencies {
        if let Dependency::Value { name, value } = dep {
            out.push(match names_p(value) {
                Some(m) => check(
                    "dependencies.value",
                    Verdict::Fail,
                    format!("{name}: {}", mention(m)),
                    "S's resources do not depend on P",
                    "Point it at S (replicate the image to S's ECR, use S's endpoints and ARNs).",
                ),
                None => check(
                    "dependencies.value",
                    Verdict::Pass,
                    format!("{name} names nothing of P"),
                    "S's resources do not depend on P",
                    "",
                ),
            });
        }
    }
    for (name, value) in &s.parameters {
        let id = "dependencies.ssm_parameter";
        let expected = "S's SSM parameter exists and names nothing of P";
        out.push(match value {
            Ok(Some(v)) => match names_p(v) {
                Some(m) => check(
                    id,
                    Verdict::Fail,
                    format!("{name}: {}", mention(m)),
                    expected,
                    "Point it at S (replicate the image to S's ECR, use S's endpoints and ARNs).",
                ),
                None => check(
                    id,
                    Verdict::Pass,
                    format!("{name} names nothing of P"),
                    expected,
                    "",
                ),
            },
            Ok(None) => check(
                id,
                Verdict::Fail,
                format!("{name} does not exist in {}", st.region),
                expected,
                "Create it in S or remove it from the plan's dependencies.",
            ),
            Err(e) => unread(id, &format!("SSM parameter {name}"), e, expected),
        });
    }
    capacity::checks(plan, &s.capacity, &mut out);
    // --- Handover's own state ------------------------------------------------
    match &s.primary {
        Ok(Some(rec)) => {
            // The writer by RDS: the side that is not a replica.
            let writer = match (p_db, s_db) {
                (Some(pd), Some(sd)) => match (
                    pd.replication_source.is_none(),
                    sd.replication_source.is_none(),
                ) {
                    (true, false) => Some((p.region.as_str(), pd.id.as_str())),
                    (false, true) => Some((st.region.as_str(), sd.id.as_str())),
                    _ => None,
                },
                _ => None,
            };
            out.push(match writer {
                Some((region, id)) if rec.region == region && rec.db_instance_id == id => check(
                    "state.primary_record",
                    Verdict::Pass,
                    format!("the record names {id} in {region} (epoch {}), as RDS does", rec.epoch),
                    "the primary record names the writer RDS shows",
                    "",
                ),
                Some((region, id)) => check(
                    "state.primary_record",
                    Verdict::Fail,
                    format!(
                        "the record names {} in {} (epoch {}), RDS shows {id} in {region} as the writer",
                        rec.db_instance_id, rec.region, rec.epoch
                    ),
                    "the primary record names the writer RDS shows",
                    "Find out who changed RDS outside Handover; then set the record to RDS reality (handover init refuses to overwrite: correct it by hand with care).",
                ),
                None => check(
                    "state.primary_record",
                    Verdict::Warn,
                    format!("the record names {} in {} (epoch {}); RDS shows no single writer", rec.db_instance_id, rec.region, rec.epoch),
                    "one writer in RDS, named by the primary record",
                    "Check both instances' replication: two standalone instances are a split brain, two replicas leave no writer.",
                ),
            });
            let lock = s.lock.as_ref().ok().cloned().flatten();
            let lease_over = |l: &LockState| l.lease_until.is_none_or(|u| u < s.at);
            out.push(match &rec.transition {
                None => check(
                    "state.transition",
                    Verdict::Pass,
                    "no transition held".into(),
                    "no failover in progress, or one held by a live run",
                    "",
                ),
                Some(t) => {
                    let live = lock
                        .as_ref()
                        .is_some_and(|l| l.holder.is_some() && !lease_over(l));
                    check(
                        "state.transition",
                        if live { Verdict::Warn } else { Verdict::Fail },
                        format!(
                            "{} holds a transition ({:?}) since {}{}",
                            t.execution,
                            t.phase,
                            t.since.format("%Y-%m-%d %H:%M:%S"),
                            if live { ", with a live lock" } else { ", and no live lock holds it" }
                        ),
                        "no transition left behind by an ended run",
                        "A stale transition blocks every failover: check that its execution ended, let audit's sweep compensate it, or release it with the CLI after checking.",
                    )
                }
            });
        }
        Ok(None) => out.push(check(
            "state.primary_record",
            Verdict::Fail,
            "no primary record".into(),
            "the primary record exists",
            "Run `handover init` once after deploying.",
        )),
        Err(e) => out.push(unread(
            "state.primary_record",
            "the primary record",
            e,
            "the primary record exists",
        )),
    }
    out.push(match &s.lock {
        // A planned switchover's gate: the run asking must hold the lock
        // (`handover switchover` takes it), or detect could start a
        // failover beside it.
        // The gate cannot tell who holds it: it must not pass.
        Err(e) if own_run.is_some() => check(
            "state.lock",
            Verdict::Fail,
            format!("the lock could not be read: {e}"),
            "the lock held by the switchover asking",
            "Retry the switchover once the table answers: the gate must see that this run holds the lock.",
        ),
        Ok(lock) if own_run.is_some_and(|own| {
            lock.as_ref().and_then(|l| l.holder.as_deref()) != Some(own)
        }) =>
        {
            check(
                "state.lock",
                Verdict::Fail,
                match lock.as_ref().and_then(|l| l.holder.as_deref()) {
                    Some(h) => format!("{h} holds the lock, not this switchover"),
                    None => "this switchover does not hold the lock".into(),
                },
                "the lock held by the switchover asking",
                "Start a planned switchover with `handover switchover`, which takes the lock detect takes; a run started otherwise, or beside another run, stops here.",
            )
        }
        Ok(Some(l)) => match (&l.holder, l.lease_until) {
            (Some(h), Some(u)) if u < s.at => check(
                "state.lock",
                Verdict::Fail,
                format!("{h} holds the lock past its lease ({})", u.format("%Y-%m-%d %H:%M:%S")),
                "no lock held past its lease",
                "The holder's run ended without releasing it: audit's sweep releases it; check the execution.",
            ),
            (Some(h), _) if own_run == Some(h.as_str()) => check(
                "state.lock",
                Verdict::Pass,
                format!("{h} holds the lock: the run asking"),
                "no other run going on",
                "",
            ),
            (Some(h), _) => check(
                "state.lock",
                Verdict::Warn,
                format!("{h} holds the lock (a run is going on)"),
                "no run going on",
                "A failover is in progress: readiness is for quiet times.",
            ),
            (None, _) => check(
                "state.lock",
                Verdict::Pass,
                "the lock is free".into(),
                "no lock held past its lease",
                "",
            ),
        },
        Ok(None) => check(
            "state.lock",
            Verdict::Pass,
            "no lock item yet".into(),
            "no lock held past its lease",
            "",
        ),
        Err(e) => unread("state.lock", "the lock", e, "no lock held past its lease"),
    });
    Readiness {
        at: s.at,
        checks: out,
    }
}

/// Route 53 reads readiness needs beyond the functions' own.
pub trait DnsConfig {
    /// What health check `id` watches (`Ok(None)`: no such check).
    fn health_check_target(
        &self,
        id: &str,
    ) -> impl std::future::Future<Output = Result<Option<HealthCheckTarget>, AwsError>> + Send;
}

impl DnsConfig for crate::adapters::Route53 {
    async fn health_check_target(&self, id: &str) -> Result<Option<HealthCheckTarget>, AwsError> {
        match self
            .client()
            .get_health_check()
            .health_check_id(id)
            .send()
            .await
        {
            Ok(out) => Ok(out
                .health_check
                .and_then(|h| h.health_check_config)
                .map(|c| HealthCheckTarget {
                    fqdn: c.fully_qualified_domain_name,
                    ip: c.ip_address,
                    path: c.resource_path,
                    kind: c.r#type.as_str().to_owned(),
                })),
            Err(e)
                if e.as_service_error()
                    .is_some_and(|s| s.is_no_such_health_check()) =>
            {
                Ok(None)
            }
            Err(e) => Err(crate::adapters::call_error(
                "route53",
                "GetHealthCheck",
                "global",
                e,
            )),
        }
    }
}

/// EC2 reads readiness needs: the fence group.
pub trait FenceGroups {
    /// Security group `id` (`Ok(None)`: no such group).
    fn fence_group(
        &self,
        id: &str,
    ) -> impl std::future::Future<Output = Result<Option<FenceGroup>, AwsError>> + Send;
}

/// EC2 in P's Region (DescribeSecurityGroups).
#[cfg(feature = "ec2")]
#[derive(Debug, Clone)]
pub struct Ec2Groups {
    client: aws_sdk_ec2::Client,
    region: String,
}

#[cfg(feature = "ec2")]
impl Ec2Groups {
    /// EC2 in `region`.
    pub async fn new(aws: &crate::aws::Aws, region: &str) -> Self {
        Self {
            client: aws.ec2(region).await,
            region: region.to_owned(),
        }
    }
}

/// One inbound rule in words: `tcp 5432 from 10.0.0.0/8, sg-1`.
#[cfg(feature = "ec2")]
fn rule_text(p: &aws_sdk_ec2::types::IpPermission) -> String {
    let proto = match p.ip_protocol().unwrap_or("?") {
        "-1" => "all traffic".to_owned(),
        other => other.to_owned(),
    };
    let ports = match (p.from_port(), p.to_port()) {
        (Some(a), Some(b)) if a == b && a >= 0 => format!(" {a}"),
        (Some(a), Some(b)) if a >= 0 => format!(" {a}-{b}"),
        _ => String::new(),
    };
    let from: Vec<String> = p
        .ip_ranges()
        .iter()
        .filter_map(|r| r.cidr_ip().map(str::to_owned))
        .chain(
            p.ipv6_ranges()
                .iter()
                .filter_map(|r| r.cidr_ipv6().map(str::to_owned)),
        )
        .chain(
            p.prefix_list_ids()
                .iter()
                .filter_map(|r| r.prefix_list_id().map(str::to_owned)),
        )
        .chain(
            p.user_id_group_pairs()
                .iter()
                .filter_map(|r| r.group_id().map(str::to_owned)),
        )
        .collect();
    format!("{proto}{ports} from {}", from.join(", "))
}

#[cfg(feature = "ec2")]
impl FenceGroups for Ec2Groups {
    async fn fence_group(&self, id: &str) -> Result<Option<FenceGroup>, AwsError> {
        match self
            .client
            .describe_security_groups()
            .group_ids(id)
            .send()
            .await
        {
            Ok(out) => Ok(out.security_groups().first().map(|g| FenceGroup {
                id: g.group_id().unwrap_or(id).to_owned(),
                vpc_id: g.vpc_id().map(str::to_owned),
                ingress: g.ip_permissions().iter().map(rule_text).collect(),
            })),
            Err(e) => {
                let e =
                    crate::adapters::call_error("ec2", "DescribeSecurityGroups", &self.region, e);
                match e.code() {
                    Some("InvalidGroup.NotFound" | "InvalidGroupId.Malformed") => Ok(None),
                    _ => Err(e),
                }
            }
        }
    }
}

/// A build without the EC2 client (only the readiness function and the CLI
/// enable feature `ec2`): the fence group is reported unread.
#[cfg(not(feature = "ec2"))]
#[derive(Debug, Clone, Copy)]
pub struct Ec2Groups;

#[cfg(not(feature = "ec2"))]
impl Ec2Groups {
    /// No client.
    pub async fn new(_aws: &crate::aws::Aws, _region: &str) -> Self {
        Ec2Groups
    }
}

#[cfg(not(feature = "ec2"))]
impl FenceGroups for Ec2Groups {
    async fn fence_group(&self, _id: &str) -> Result<Option<FenceGroup>, AwsError> {
        Err(AwsError::Shape {
            service: "ec2",
            op: "DescribeSecurityGroups",
            region: String::new(),
            problem: "this binary is built without feature `ec2`".into(),
        })
    }
}

/// Slack reads readiness needs (read methods only).
pub trait SlackReads {
    /// The bot, its channel and the approvers, for `plan`.
    fn facts(&self, plan: &Plan) -> impl std::future::Future<Output = SlackFacts> + Send;
}

/// Slack's Web API with the plan's bot token.
pub struct SlackReader<'a, R> {
    /// The Web API.
    pub api: &'a crate::slack::api::SlackApi,
    /// Where the bot token is.
    pub secrets: &'a R,
}

impl<R: crate::slack::secrets::SecretReader + Sync> SlackReads for SlackReader<'_, R> {
    async fn facts(&self, plan: &Plan) -> SlackFacts {
        use crate::slack::secrets::{SlackSecret, read_slack};
        let token = match read_slack(
            self.secrets,
            &plan.slack.bot_token_secret_arn,
            SlackSecret::BotToken,
        )
        .await
        {
            Ok(t) => t,
            Err(e) => {
                return SlackFacts::unreadable(
                    plan,
                    &format!("the bot token: {}", crate::error::chain(&e)),
                );
            }
        };
        let text = |e: crate::slack::api::SlackError| crate::error::chain(&e);
        let token = &token;
        let bot = async {
            let a = self.api.read(token, "auth.test", &[]).await.map_err(text)?;
            match (a["team_id"].as_str(), a["user_id"].as_str()) {
                (Some(team), Some(user)) if !team.is_empty() && !user.is_empty() => {
                    Ok::<(String, String), String>((team.to_owned(), user.to_owned()))
                }
                _ => Err("auth.test answered ok without team_id and user_id".to_owned()),
            }
        };
        let channel = async {
            let a = self
                .api
                .read(
                    token,
                    "conversations.info",
                    &[("channel", &plan.slack.channel)],
                )
                .await
                .map_err(text)?;
            // A private channel the bot is not in answers channel_not_found;
            // a public one answers is_member.
            Ok::<bool, String>(a["channel"]["is_member"].as_bool().unwrap_or(false))
        };
        let approvers =
            futures_util::future::join_all(plan.slack.approvers.iter().map(|a| async {
                let found = match self
                    .api
                    .read(token, "users.info", &[("user", &a.user_id)])
                    .await
                {
                    Ok(u) => match u["user"]["deleted"].as_bool() {
                        Some(deleted) => Ok(Some(deleted)),
                        None => Err("users.info answered ok without user.deleted".to_owned()),
                    },
                    Err(crate::slack::api::SlackError::Api { error, .. })
                        if error == "user_not_found" =>
                    {
                        Ok(None)
                    }
                    Err(e) => Err(text(e)),
                };
                (a.user_id.clone(), found)
            }));
        let (bot, in_channel, approvers) = tokio::join!(bot, channel, approvers);
        SlackFacts {
            bot,
            in_channel: match in_channel {
                Err(e) if e.contains("channel_not_found") => Ok(false),
                other => other,
            },
            approvers,
        }
    }
}

/// The read calls [`observe`] makes.
pub struct Sources<'a, P, S, L, C, A, R, K, U, F, W> {
    /// RDS in P's Region.
    pub p_rds: &'a P,
    /// RDS in S's Region.
    pub s_rds: &'a S,
    /// CloudWatch in S's Region.
    pub lag: &'a L,
    /// Route 53: P's health check.
    pub dns: &'a C,
    /// Route 53: the public name's records.
    pub records: &'a A,
    /// SSM in S's Region.
    pub parameters: &'a R,
    /// Secrets Manager (the canary's secrets).
    pub secrets: &'a K,
    /// The DB secrets' usernames.
    pub usernames: &'a U,
    /// Handover's table.
    pub store: &'a crate::store::Store,
    /// EC2 in P's Region.
    pub fence: &'a F,
    /// Slack.
    pub slack: &'a W,
}

/// The read calls [`observe`] makes beyond [`Sources`]: S's compute, and
/// IAM's policy simulator with the roles it simulates.
pub struct Reach<'a, X, Y> {
    /// ECS, Auto Scaling and EKS in S's Region.
    pub capacity: &'a X,
    /// IAM's policy simulator.
    pub simulator: &'a Y,
    /// The fence and promote roles to simulate (`None`: not known here).
    pub roles: Option<&'a iam::FailoverRoles>,
}

/// Read the world with the real adapters (the readiness function and
/// `handover readiness`) and evaluate it.
///
/// `roles` are the fence and promote roles to simulate; without them the
/// two `iam.*` checks warn that they were not simulated.
pub async fn evaluate_now<W: SlackReads + Sync>(
    aws: &crate::aws::Aws,
    slack: &W,
    plan: &Plan,
    store: &crate::store::Store,
    roles: Option<&iam::FailoverRoles>,
    now: DateTime<Utc>,
    own_run: Option<&str>,
) -> Readiness {
    let (p, s) = (&plan.regions.primary, &plan.regions.standby);
    let p_rds = crate::adapters::Rds::new(aws, &p.region).await;
    let s_rds = crate::adapters::Rds::new(aws, &s.region).await;
    let lag = crate::adapters::CloudWatch::new(aws, &s.region).await;
    let dns = crate::adapters::Route53::new(aws).await;
    let records = crate::adapters::traffic::Route53Control::new(aws).await;
    let parameters = crate::adapters::SsmParameters::new(aws, &s.region).await;
    let secrets = crate::failover::canary::SecretsManager::new(aws, &s.region).await;
    let usernames = crate::adapters::SecretsManagerUsernames::new(aws, &s.region);
    let fence = Ec2Groups::new(aws, &p.region).await;
    let capacity = capacity::SdkCapacity::new(aws, &s.region).await;
    let simulator = iam::IamSimulator::new(aws).await;
    let sources = Sources {
        p_rds: &p_rds,
        s_rds: &s_rds,
        lag: &lag,
        dns: &dns,
        records: &records,
        parameters: &parameters,
        secrets: &secrets,
        usernames: &usernames,
        store,
        fence: &fence,
        slack,
    };
    let reach = Reach {
        capacity: &capacity,
        simulator: &simulator,
        roles,
    };
    evaluate_for(plan, &observe(plan, &sources, &reach, now).await, own_run)
}

/// Read the world (read calls only).
pub async fn observe<P, S, L, C, A, R, K, U, F, W, X, Y>(
    plan: &Plan,
    src: &Sources<'_, P, S, L, C, A, R, K, U, F, W>,
    reach: &Reach<'_, X, Y>,
    now: DateTime<Utc>,
) -> Snapshot
where
    P: DbInspector + Sync,
    S: DbInspector + MaintenanceReader + Sync,
    L: ReplicaLag + Sync,
    C: DnsConfig + Sync,
    A: DnsAnswers + Sync,
    R: ParameterReader + Sync,
    K: Secrets + Sync,
    U: SecretUsernames + Sync,
    F: FenceGroups + Sync,
    W: SlackReads + Sync,
    X: capacity::CapacityReader + Sync,
    Y: iam::PolicySimulator + Sync,
{
    let budget = Duration::from_millis(plan.timings.call_timeout_ms);
    let text = |e: AwsError| crate::error::chain(&e);
    let (p, st) = (&plan.regions.primary, &plan.regions.standby);
    let (p_db, s_db, s_maintenance, lag, hc, ttls) = tokio::join!(
        src.p_rds.describe(&p.db_instance_id, budget),
        src.s_rds.describe(&st.db_instance_id, budget),
        src.s_rds.pending_maintenance(&st.db_instance_id, budget),
        src.lag.latest_lag(
            &st.db_instance_id,
            now,
            chrono::Duration::minutes(5),
            budget
        ),
        src.dns.health_check_target(&p.health_check_id),
        src.records
            .record_ttls(&plan.dns.hosted_zone_id, &plan.dns.record_name),
    );
    let s_db = s_db.map_err(text);
    let endpoint = s_db
        .as_ref()
        .ok()
        .and_then(|d| d.as_ref())
        .and_then(|d| d.endpoint.clone());
    let canary = match &plan.canary {
        Canary::Postgres { .. } => {
            probe_read_only(&plan.canary, endpoint.as_deref(), src.secrets, budget).await
        }
        Canary::Http { .. } => None,
    };
    let parameters = crate::dependencies::dependency_parameters(plan, src.parameters).await;
    let secret_usernames = crate::dependencies::standby_secret_usernames(plan, src.usernames).await;
    let (primary, lock, fence_group, slack, capacity, iam) = tokio::join!(
        src.store.primary(),
        src.store.lock_state(),
        src.fence.fence_group(&p.fence_security_group_id),
        src.slack.facts(plan),
        capacity::observe(plan, reach.capacity),
        iam::observe(
            plan,
            reach.roles,
            (src.store.table(), src.store.region().unwrap_or(&st.region),),
            reach.simulator,
        ),
    );
    Snapshot {
        at: now,
        p_db: p_db.map_err(text),
        s_db,
        lag: lag.map_err(text),
        s_maintenance: s_maintenance.map_err(text),
        secret_usernames,
        canary,
        p_health_check: hc.map_err(text),
        ttls: ttls.map_err(text),
        parameters,
        primary: primary.map_err(|e| crate::error::chain(&e)),
        lock: lock.map_err(|e| crate::error::chain(&e)),
        fence_group: fence_group.map_err(text),
        slack,
        capacity,
        iam,
    }
}

#[cfg(test)]
mod tests;
