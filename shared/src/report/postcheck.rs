//! Post-checks: what the world looks like after the run, as findings.
//!
//! [`Observed`] is gathered by `sources.rs` (RDS, SSM, Secrets Manager);
//! [`evaluate`] is a pure function of it and the run, so each check is tested
//! on states that trigger it and states that do not.
//!
//! | check | finding when |
//! |---|---|
//! | `split_brain` | S was promoted and P's old primary is available, not a replica, without the fence group: two writers |
//! | `backups` | the new primary has BackupRetentionPeriod 0, or no completed backup yet |
//! | `replication` | S still has a replication source after promotion |
//! | `dependency` | a plan-declared S value or SSM parameter mentions P's Region, ECR registry or endpoint |
//! | `alarm_region` | the Route 53 health-check alarm is outside us-east-1 (it never gets data) |
//! | `secret_username` | a DB secret for S names a user other than S's MasterUsername |

use super::dependencies::{dependencies, secret_usernames};
pub use super::observed::{BackupSeen, Observed, RunContext};

use super::model::{Finding, Severity, finding};
use crate::adapters::DbInstance;
use crate::plan::Plan;

/// The result of all checks.
#[derive(Debug, Clone, PartialEq)]
pub struct PostChecks {
    /// Findings, most severe first.
    pub findings: Vec<Finding>,
    /// First completed backup of the new primary (the conservative-RTO point).
    pub first_backup: Option<BackupSeen>,
}

fn describe(d: &DbInstance) -> String {
    format!(
        "{}: status={}, replication source={}, security groups=[{}], backup retention={} d",
        d.id,
        d.status,
        d.replication_source.as_deref().unwrap_or("none"),
        d.security_groups.join(", "),
        d.backup_retention_days
    )
}

/// Run every check.
pub fn evaluate(plan: &Plan, run: RunContext, seen: &Observed) -> PostChecks {
    let mut findings = vec![split_brain(plan, run, seen)];
    let (backup, first_backup) = backups(plan, run, seen);
    findings.push(backup);
    findings.push(replication(plan, run, seen));
    findings.extend(dependencies(plan, seen));
    findings.extend(secret_usernames(plan, seen));
    findings.sort_by_key(|f| std::cmp::Reverse(f.severity));
    PostChecks {
        findings,
        first_backup,
    }
}

/// RDS statuses in which the engine serves no client (RDS User Guide, "Viewing
/// Amazon RDS DB instance status").
const ENGINE_DOWN: &[&str] = &[
    "stopped",
    "stopping",
    "starting",
    "rebooting",
    "deleting",
    "failed",
    "incompatible-network",
    "incompatible-restore",
    "incompatible-parameters",
    "inaccessible-encryption-credentials",
    "restore-error",
];

fn split_brain(plan: &Plan, run: RunContext, seen: &Observed) -> Finding {
    const C: &str = "split_brain";
    let fence = &plan.regions.primary.fence_security_group_id;
    let s_writer = match &seen.s_db {
        Ok(Some(s)) => s.replication_source.is_none() && s.status == "available",
        _ => run.promoted,
    };
    match &seen.p_db {
        Err(e) => finding(
            C,
            if run.promoted {
                Severity::Warning
            } else {
                Severity::Info
            },
            "P's old primary could not be described: whether it still takes writes is unknown",
            vec![format!(
                "rds:DescribeDBInstances in {}: {e}",
                plan.regions.primary.region
            )],
            run.promoted.then_some(
                "Confirm by hand that P's database is fenced or stopped before P's Region returns.",
            ),
        ),
        Ok(None) => finding(
            C,
            Severity::Ok,
            "P's old primary no longer exists",
            vec![],
            None,
        ),
        Ok(Some(p)) => {
            // Fenced only when the deny-all group alone is in effect: a group
            // still `removing` (or another one `active`) lets clients in, and
            // a fence group still `adding` keeps nobody out yet.
            let fenced = p.security_groups.iter().all(|g| g == fence)
                && p.security_groups.iter().any(|g| g == fence)
                && p.unsettled_security_groups.is_empty();
            // P takes writes in any status but the ones where its engine is
            // down (`modifying` and `backing-up` still serve clients).
            let p_writer =
                p.replication_source.is_none() && !ENGINE_DOWN.contains(&p.status.as_str());
            let evidence = vec![describe(p)];
            if p_writer && s_writer && !fenced {
                let why = if !p.security_groups.iter().any(|g| g == fence) {
                    format!("fence group {fence} is not attached to {}", p.id)
                } else {
                    format!(
                        "fence group {fence} is attached to {} but is not the only group in effect: groups {:?}, not yet applied {:?}",
                        p.id, p.security_groups, p.unsettled_security_groups
                    )
                };
                finding(
                    C,
                    Severity::Critical,
                    "Split-brain: P's old primary and S both accept writes",
                    [evidence, vec![why]].concat(),
                    Some(
                        "Attach the fence security group to P's database (or stop it) now, then reconcile writes made on P.",
                    ),
                )
            } else if p_writer && s_writer {
                finding(
                    C,
                    Severity::Ok,
                    format!(
                        "P's old primary is fenced ({fence} attached); S is the only reachable writer"
                    ),
                    evidence,
                    None,
                )
            } else if p_writer {
                finding(
                    C,
                    Severity::Info,
                    "P is still the only writer (S was not promoted)",
                    evidence,
                    None,
                )
            } else {
                finding(
                    C,
                    Severity::Ok,
                    "P's old primary does not take writes",
                    evidence,
                    None,
                )
            }
        }
    }
}

fn backups(plan: &Plan, run: RunContext, seen: &Observed) -> (Finding, Option<BackupSeen>) {
    const C: &str = "backups";
    let first = seen
        .backups
        .as_ref()
        .ok()
        .and_then(|b| {
            b.iter()
                .filter(|b| run.promote_started_at.is_none_or(|p| b.at >= p))
                .min_by_key(|b| b.at)
        })
        .cloned();
    if !run.promoted {
        return (
            finding(
                C,
                Severity::Info,
                "S was not promoted: no new primary to back up",
                vec![],
                None,
            ),
            None,
        );
    }
    let s = match &seen.s_db {
        Ok(Some(s)) => s,
        Ok(None) => {
            return (
                finding(
                    C,
                    Severity::Critical,
                    "The new primary was not found",
                    vec![format!(
                        "{} does not exist in {}",
                        plan.regions.standby.db_instance_id, plan.regions.standby.region
                    )],
                    Some("Find out what happened to the promoted database."),
                ),
                first,
            );
        }
        Err(e) => {
            return (
                finding(
                    C,
                    Severity::Warning,
                    "The new primary could not be described: backups unknown",
                    vec![e.clone()],
                    Some("Check the new primary's automated backups by hand."),
                ),
                first,
            );
        }
    };
    let mut evidence = vec![format!(
        "{}: BackupRetentionPeriod={}",
        s.id, s.backup_retention_days
    )];
    if let Some(t) = s.latest_restorable_time {
        evidence.push(format!("LatestRestorableTime={}", t.to_rfc3339()));
    }
    if let Err(e) = &seen.backups {
        evidence.push(format!("backup history unavailable: {e}"));
    }
    let f = if s.backup_retention_days <= 0 {
        finding(
            C,
            Severity::Critical,
            "Automated backups are off on the new primary",
            evidence,
            Some(
                "Set BackupRetentionPeriod > 0 on the new primary now (the plan asks for database.backup_retention_days).",
            ),
        )
    } else if let Some(b) = &first {
        evidence.push(format!(
            "first backup completed {} ({})",
            b.at.to_rfc3339(),
            b.source
        ));
        finding(
            C,
            Severity::Ok,
            "The new primary has automated backups and a completed backup",
            evidence,
            None,
        )
    } else {
        finding(
            C,
            Severity::Warning,
            "No completed backup of the new primary yet: conservative RTO pending",
            evidence,
            Some(
                "Watch for the first automated backup of the new primary; until then a restore can only go back to P's last backup.",
            ),
        )
    };
    (f, first)
}

fn replication(plan: &Plan, run: RunContext, seen: &Observed) -> Finding {
    const C: &str = "replication";
    match &seen.s_db {
        Ok(Some(s)) => match (&s.replication_source, run.promoted) {
            (Some(src), true) => finding(
                C,
                Severity::Critical,
                "S still replicates from P after promotion",
                vec![
                    describe(s),
                    format!("ReadReplicaSourceDBInstanceIdentifier={src}"),
                ],
                Some(
                    "Check the promotion: the new primary must be standalone before it takes writes.",
                ),
            ),
            (Some(src), false) => finding(
                C,
                Severity::Info,
                "S is still P's replica (not promoted)",
                vec![format!("ReadReplicaSourceDBInstanceIdentifier={src}")],
                None,
            ),
            (None, _) => {
                let mut ev = vec![describe(s)];
                if !s.replicas.is_empty() {
                    ev.push(format!("replicas of S: {}", s.replicas.join(", ")));
                }
                let title = if s.replicas.is_empty() {
                    "S is standalone: the old replica link is gone"
                } else {
                    "S is standalone and replicates out (failback replication exists)"
                };
                finding(C, Severity::Ok, title, ev, None)
            }
        },
        Ok(None) => finding(
            C,
            Severity::Warning,
            "S's database was not found",
            vec![format!(
                "{} in {}",
                plan.regions.standby.db_instance_id, plan.regions.standby.region
            )],
            Some("Find S's database before relying on the failover."),
        ),
        Err(e) => finding(
            C,
            Severity::Warning,
            "S's database could not be described: replication state unknown",
            vec![e.clone()],
            Some("Check S's replication state by hand."),
        ),
    }
}
