//! The failover plan: one JSON document, validated into typed values.
//!
//! The plan lives in SSM Parameter Store (or a file for drills and tests).
//! `detect` snapshots it into the execution input so every step and the
//! report see the exact plan that ran. Any missing or invalid field fails with
//! one [`PlanError`] that names its path, e.g.
//! `plan.regions.standby.db_instance_id: missing`.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A validated plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    /// Free-form version of this document; it goes into every report.
    pub version: String,
    /// Name of the protected service, used in messages and resource names.
    pub service: String,
    /// Region P (primary) and Region S (standby).
    pub regions: Regions,
    /// The database kind and its failover settings.
    pub database: Database,
    /// Public name, writer endpoint and how traffic moves.
    pub dns: Dns,
    /// How `verify` proves that writes work.
    pub canary: Canary,
    /// Where approvals are asked and who may give them.
    pub slack: Slack,
    /// RTO and RPO targets.
    #[serde(default)]
    pub targets: Targets,
    /// Signals and thresholds for `detect`.
    #[serde(default)]
    pub detection: Detection,
    /// Waits, polls, deadlines, lease and cooldown.
    #[serde(default)]
    pub timings: Timings,
    /// What to do when the old primary cannot be fenced.
    #[serde(default)]
    pub fence: FencePolicy,
    /// Where reports go.
    pub report: ReportTarget,
    /// Optional AI explanation (advisory text only).
    #[serde(default)]
    pub explain: Option<Explain>,
    /// Resources in S that must not depend on P (audited after failover).
    #[serde(default)]
    pub dependencies: Vec<Dependency>,
    /// S's compute that takes the traffic after a switch, with the least
    /// each must run (readiness compares them every half hour). Empty:
    /// capacity is not checked.
    #[serde(default)]
    pub capacity: Capacity,
    /// A table whose rows carry the time they were written, on which the
    /// data S never got is measured once both sides can be read
    /// (`handover rpo`). Without it only the estimate at promotion exists.
    #[serde(default)]
    pub rpo_table: Option<RpoTable>,
    /// IAM principals who may approve or reject by `handover approve` /
    /// `reject` when Slack cannot ask (the operator's own credentials, as
    /// API Gateway's IAM authoriser names them: `requestContext.authorizer.iam.userArn`,
    /// the ARN `sts:GetCallerIdentity` gives). Empty: nobody decides by CLI.
    #[serde(default)]
    pub cli_approvers: Vec<CliApprover>,
    /// How a planned switchover proves that S has every write of P.
    #[serde(default)]
    pub switchover: SwitchoverPolicy,
    /// How Handover goes back to P after a failover (`handover failback`):
    /// without it, failback is refused, naming this field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failback: Option<FailbackPolicy>,
}

/// Failback: re-protect (a new replica of S in P's Region under P's
/// identifier, the old P renamed and kept), compare the data, then a
/// planned switchover back to P.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FailbackPolicy {
    /// What the public name answers once P serves again (P's failover
    /// record target, e.g. P's load balancer): the switch back's verify
    /// checks DNS against it.
    pub primary_target: String,
    /// The tables compared between S and P's new replica before the switch
    /// back, each with a column that orders its rows (the primary key). The
    /// canary table (by `id`) is always compared too.
    #[serde(default)]
    pub tables: Vec<CheckedTable>,
    /// Where the canary reaches P's database when `canary.postgres.host`
    /// names a fixed address for S's (a proxy): the same for P. Required
    /// then; without a host the canary dials the RDS endpoint of P's instance.
    #[serde(default)]
    pub canary_host: Option<String>,
    /// The port for `canary_host` (default: `canary.postgres.port`).
    #[serde(default)]
    pub canary_port: Option<u16>,
    /// How long re-protection may take before `handover failback` stops:
    /// the replica's creation and its catch-up, seconds.
    #[serde(default = "defaults::default_reprotect_timeout_s")]
    pub reprotect_timeout_s: u64,
    /// ReplicaLag at or below which P's new replica counts as caught up, seconds.
    #[serde(default = "defaults::default_reprotect_lag_s")]
    pub lag_near_zero_s: f64,
}

/// A table the failback's data check compares.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckedTable {
    /// Table name, optionally schema-qualified.
    pub table: String,
    /// A column that orders its rows uniquely (the primary key).
    pub key: String,
    /// Database (default: the canary's).
    #[serde(default)]
    pub database: Option<String>,
}

/// A planned switchover's catch-up: after the fence stops P's writes,
/// promotion waits until S has replayed all of P's WAL, held for
/// `settle_s`, and gives up (P is unfenced) after `timeout_s`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwitchoverPolicy {
    /// How long the caught-up condition must hold, seconds.
    #[serde(default = "defaults::default_settle_s")]
    pub settle_s: u64,
    /// How long to wait for it before stopping, seconds.
    #[serde(default = "defaults::default_catch_up_timeout_s")]
    pub timeout_s: u64,
    /// Pause between two readings, seconds.
    #[serde(default = "defaults::default_catch_up_poll_s")]
    pub poll_s: u64,
}

impl Default for SwitchoverPolicy {
    fn default() -> Self {
        SwitchoverPolicy {
            settle_s: defaults::default_settle_s(),
            timeout_s: defaults::default_catch_up_timeout_s(),
            poll_s: defaults::default_catch_up_poll_s(),
        }
    }
}

/// An IAM role or user allowed to decide by CLI.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CliApprover {
    /// `arn:aws:iam::<account>:role/<path/>Name` (anyone who assumes the
    /// role) or `arn:aws:iam::<account>:user/<path/>Name`.
    pub arn: String,
    /// Display name for messages and the report.
    pub name: String,
}

/// An IAM ARN's parts: partition, account, `role` or `user`, and the name
/// (the last segment of the path).
fn iam_principal(arn: &str) -> Option<(&str, &str, &str, &str)> {
    let mut it = arn.splitn(6, ':');
    let (Some("arn"), Some(partition), Some("iam"), Some(""), Some(account), Some(resource)) = (
        it.next(),
        it.next(),
        it.next(),
        it.next(),
        it.next(),
        it.next(),
    ) else {
        return None;
    };
    let (kind, path) = resource.split_once('/')?;
    let name = path.rsplit('/').next()?;
    let ok = !partition.is_empty()
        && account.len() == 12
        && account.bytes().all(|b| b.is_ascii_digit())
        && matches!(kind, "role" | "user")
        && !name.is_empty();
    ok.then_some((partition, account, kind, name))
}

/// The caller API Gateway's IAM authoriser (or `sts:GetCallerIdentity`)
/// names, as the plan would list it:
/// an assumed role's session (`arn:aws:sts::<account>:assumed-role/Name/session`)
/// is the role (role names are unique in an account, whatever their path);
/// an IAM user is itself. Anything else (root, federated users) is None.
fn caller_principal(arn: &str) -> Option<(&str, &str, &str, &str)> {
    let mut it = arn.splitn(6, ':');
    match (
        it.next(),
        it.next(),
        it.next(),
        it.next(),
        it.next(),
        it.next(),
    ) {
        (Some("arn"), Some(partition), Some("sts"), Some(""), Some(account), Some(resource)) => {
            let mut parts = resource.split('/');
            match (parts.next(), parts.next(), parts.next()) {
                (Some("assumed-role"), Some(role), Some(session))
                    if !role.is_empty() && !session.is_empty() && !partition.is_empty() =>
                {
                    Some((partition, account, "role", role))
                }
                _ => None,
            }
        }
        (Some("arn"), _, Some("iam"), ..) => iam_principal(arn).filter(|p| p.2 == "user"),
        _ => None,
    }
}

/// The table the RPO is measured on: any table P's app writes steadily,
/// with a column holding each row's write (or commit) time, e.g. `orders`
/// and `created_at`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RpoTable {
    /// Table name, optionally schema-qualified (`shop.orders`).
    pub table: String,
    /// A `timestamptz` column set when the row was written (`DEFAULT now()`).
    pub column: String,
    /// The database it lives in (default: the canary's, `canary.postgres.database`).
    #[serde(default)]
    pub database: Option<String>,
}

/// The two sides.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Regions {
    /// Region P: app plus database primary.
    pub primary: Site,
    /// Region S: scaled-down app plus cross-Region replica.
    pub standby: Site,
}

/// One Region's resources.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Site {
    /// AWS Region code, e.g. `ap-northeast-2`.
    pub region: String,
    /// The RDS instance (or Aurora cluster member) in this Region.
    pub db_instance_id: String,
    /// This Region's own app endpoint (never the failover name), probed by `detect`.
    pub endpoint: String,
    /// This Region's own Route 53 health check.
    pub health_check_id: String,
    /// Security group that denies all traffic, attached when this site is fenced.
    pub fence_security_group_id: String,
    /// ALB target groups whose healthy-host counts `diagnose` reads.
    #[serde(default)]
    pub target_group_arns: Vec<String>,
    /// Secret holding this Region's DB credentials (JSON with username/password).
    #[serde(default)]
    pub db_secret_arn: Option<String>,
    /// ARC routing control for this Region (switch mode `routing_control`).
    #[serde(default)]
    pub routing_control_arn: Option<String>,
}

/// Which database technology is failed over.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Database {
    /// RDS instance with a cross-Region read replica, or an Aurora global cluster.
    pub kind: DatabaseKind,
    /// Aurora global cluster identifier (kind `aurora_global`).
    #[serde(default)]
    pub global_cluster_id: Option<String>,
    /// ARN of the Aurora cluster in S (kind `aurora_global`).
    #[serde(default)]
    pub standby_cluster_arn: Option<String>,
    /// Backup retention set on the promoted instance, in days (1..=35).
    #[serde(default = "defaults::default_backup_retention")]
    pub backup_retention_days: i32,
}

/// Database kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DatabaseKind {
    /// RDS instance plus cross-Region read replica: PromoteReadReplica.
    RdsInstance,
    /// Aurora global database: FailoverGlobalCluster / SwitchoverGlobalCluster.
    AuroraGlobal,
}

/// Names and the switch mechanism.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Dns {
    /// Public hosted zone of the failover name.
    pub hosted_zone_id: String,
    /// The public (failover) name clients use, e.g. `app.example.com`.
    pub record_name: String,
    /// How traffic moves to S.
    pub switch_mode: SwitchMode,
    /// The target the public name must answer with once S serves (for `verify`).
    pub standby_target: String,
    /// Health path on the public name for the read check.
    #[serde(default = "defaults::default_health_path")]
    pub health_path: String,
    /// Where the app finds its writer.
    pub writer: WriterEndpoint,
    /// URL verify's read check GETs; default `https://<record_name><health_path>`.
    #[serde(default)]
    pub read_url: Option<String>,
    /// ARC cluster endpoints (switch mode `routing_control`); tried in turn.
    #[serde(default)]
    pub arc_cluster_endpoints: Vec<ArcEndpoint>,
    /// The public name's records: `cname` (default) or `alias` (A records
    /// aliasing a load balancer, the common ALB setup).
    #[serde(default)]
    pub record_type: RecordType,
    /// A response header whose value names the Region that served a GET
    /// through the public name (e.g. `x-served-by: ap-northeast-1`); without
    /// it, the side is the one DNS answered.
    #[serde(default)]
    pub served_by_header: Option<String>,
}

/// What the public name's failover records are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecordType {
    /// CNAME records naming each side's target.
    #[default]
    Cname,
    /// Alias A records to each side's load balancer. Route 53 answers an
    /// alias with the target's addresses, so verify compares those with the
    /// addresses `standby_target` resolves to.
    Alias,
}

impl Dns {
    /// The URL of the read check.
    pub fn read_url(&self) -> String {
        self.read_url.clone().unwrap_or_else(|| {
            format!(
                "https://{}{}",
                self.record_name.trim_end_matches('.'),
                self.health_path
            )
        })
    }
}

/// One Route 53 ARC cluster endpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArcEndpoint {
    /// Endpoint URL, e.g. `https://host-xxxx.us-west-2.example.com/v1`.
    pub endpoint: String,
    /// Its Region (requests are signed for it).
    pub region: String,
}

/// Traffic switch mechanisms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SwitchMode {
    /// Route 53 failover records exist; make sure P's check fails.
    HealthCheckFailover,
    /// UPSERT the public record to S's target.
    RecordUpsert,
    /// Route 53 ARC routing controls (data plane).
    RoutingControl,
}

/// Writer endpoint repointing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum WriterEndpoint {
    /// A private CNAME, e.g. `writer.internal.example.com`.
    Cname {
        /// Private hosted zone.
        hosted_zone_id: String,
        /// Record name.
        name: String,
        /// Target in S (the promoted DB's endpoint).
        standby_target: String,
    },
    /// An SSM parameter the app reads.
    SsmParameter {
        /// Parameter name.
        name: String,
        /// Value for S.
        standby_value: String,
    },
}

/// The write canary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Canary {
    /// SQL INSERT on the promoted database.
    Postgres {
        /// Where to connect. Leave it out to connect to S's instance endpoint
        /// as RDS reports it (DescribeDBInstances): the write then does not
        /// wait for the writer CNAME's TTL. A name here (an RDS Proxy, a
        /// local database) is dialled instead; TLS still verifies
        /// `tls_server_name`.
        #[serde(default)]
        host: Option<String>,
        /// Port.
        #[serde(default = "defaults::default_pg_port")]
        port: u16,
        /// Database name.
        database: String,
        /// Secret with `username` and `password`.
        secret_arn: String,
        /// Canary table, created if missing.
        #[serde(default = "defaults::default_canary_table")]
        table: String,
        /// Require TLS (on in AWS; off for a local PostgreSQL).
        #[serde(default = "defaults::default_true")]
        require_tls: bool,
        /// Secret whose SecretString is the PEM bundle of the CA to trust
        /// (for RDS, the Region's bundle from the RDS documentation).
        /// Required when `require_tls` is true.
        #[serde(default)]
        ca_secret_arn: Option<String>,
        /// The name the server certificate must carry. Default: S's instance
        /// endpoint as RDS reports it, which only S's certificate names, so a
        /// connection that reached any other server (the old primary through
        /// a stale CNAME) is refused before any SQL.
        #[serde(default)]
        tls_server_name: Option<String>,
    },
    /// HTTP POST to an app endpoint that performs a write.
    Http {
        /// URL of the write endpoint.
        url: String,
    },
}

/// Slack settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Slack {
    /// Channel id for approvals and summaries.
    pub channel: String,
    /// Users who may approve or reject.
    pub approvers: Vec<Approver>,
    /// If set, clicks must come from this workspace.
    #[serde(default)]
    pub team_id: Option<String>,
    /// Secrets Manager ARN of the bot token.
    pub bot_token_secret_arn: String,
    /// Secrets Manager ARN of the signing secret.
    pub signing_secret_arn: String,
}

/// One allow-listed approver.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Approver {
    /// Slack user id, e.g. `U024BE7LH`.
    pub user_id: String,
    /// Display name for messages and the report.
    pub name: String,
}

/// Targets the report measures against.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Targets {
    /// Recovery time objective, seconds.
    #[serde(default = "defaults::default_rto")]
    pub rto_s: u64,
    /// Recovery point objective, seconds.
    #[serde(default = "defaults::default_rpo")]
    pub rpo_s: u64,
}

impl Default for Targets {
    fn default() -> Self {
        Self {
            rto_s: defaults::default_rto(),
            rpo_s: defaults::default_rpo(),
        }
    }
}

/// Detection settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Detection {
    /// Consecutive failing ticks before a failover starts (K).
    #[serde(default = "defaults::default_k")]
    pub failures_to_trigger: u32,
    /// How the signals combine into one verdict.
    #[serde(default)]
    pub rule: DetectionRule,
    /// Timeout of the HTTPS probe, milliseconds.
    #[serde(default = "defaults::default_probe_timeout")]
    pub probe_timeout_ms: u64,
    /// The health check counts as failing below this share of healthy checkers.
    #[serde(default = "defaults::default_healthy_share")]
    pub healthy_share_below: f64,
    /// Optional CloudWatch alarm (in us-east-1 for Route 53 metrics).
    #[serde(default)]
    pub alarm: Option<AlarmSignal>,
}

impl Default for Detection {
    fn default() -> Self {
        Self {
            failures_to_trigger: defaults::default_k(),
            rule: DetectionRule::default(),
            probe_timeout_ms: defaults::default_probe_timeout(),
            healthy_share_below: defaults::default_healthy_share(),
            alarm: None,
        }
    }
}

/// Rules over the signals.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DetectionRule {
    /// Endpoint down AND health check below the share (the alarm, if any, also in alarm).
    #[default]
    AllFailing,
    /// At least two of the configured signals failing.
    Majority,
}

/// A CloudWatch alarm used as a signal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlarmSignal {
    /// Alarm name.
    pub name: String,
    /// Region of the alarm; Route 53 health-check alarms live in us-east-1.
    #[serde(default = "defaults::default_alarm_region")]
    pub region: String,
}

/// Timings. Defaults suit production; drills shrink them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Timings {
    /// How long a person has to decide, seconds.
    #[serde(default = "defaults::default_approval_timeout")]
    pub approval_timeout_s: u64,
    /// Wait between promotion status polls, seconds.
    #[serde(default = "defaults::default_poll")]
    pub promotion_poll_s: u64,
    /// Polls before promotion counts as stuck.
    #[serde(default = "defaults::default_max_polls")]
    pub promotion_max_polls: u32,
    /// Deadline for verify's checks, seconds.
    #[serde(default = "defaults::default_verify_deadline")]
    pub verify_deadline_s: u64,
    /// Least lease of the failover lock, seconds. The lease taken is never
    /// shorter than the longest run ([`Plan::failover_lease_s`]).
    #[serde(default = "defaults::default_lease")]
    pub lock_lease_s: u64,
    /// Quiet period after a run before another may start, seconds.
    #[serde(default = "defaults::default_cooldown")]
    pub cooldown_s: u64,
    /// Budget for one diagnose snapshot call, milliseconds.
    #[serde(default = "defaults::default_call_budget")]
    pub call_timeout_ms: u64,
    /// How long switch waits for its Route 53 changes to be INSYNC, seconds.
    #[serde(default = "defaults::default_dns_sync")]
    pub dns_sync_s: u64,
}

impl Default for Timings {
    fn default() -> Self {
        Self {
            approval_timeout_s: defaults::default_approval_timeout(),
            promotion_poll_s: defaults::default_poll(),
            promotion_max_polls: defaults::default_max_polls(),
            verify_deadline_s: defaults::default_verify_deadline(),
            lock_lease_s: defaults::default_lease(),
            cooldown_s: defaults::default_cooldown(),
            call_timeout_ms: defaults::default_call_budget(),
            dns_sync_s: defaults::default_dns_sync(),
        }
    }
}

/// Fence policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FencePolicy {
    /// May the run go on when the fence could not be confirmed?
    #[serde(default)]
    pub on_unconfirmed: OnUnconfirmed,
    /// Bound on the fence's RDS calls, milliseconds.
    #[serde(default = "defaults::default_call_budget")]
    pub timeout_ms: u64,
    /// How long the fence waits for RDS to apply the change, seconds: the
    /// fence is confirmed only when the deny-all group alone is `active`
    /// (a new group shows `adding`, the old ones `removing`, meanwhile).
    #[serde(default = "defaults::default_fence_confirm_s")]
    pub confirm_s: u64,
    /// End P's open sessions once the deny-all group is active, by
    /// rebooting P (rds:RebootDBInstance): a security group refuses new
    /// connections only, and a pool's open connections would keep writing.
    #[serde(default = "defaults::default_true")]
    pub end_sessions: bool,
}

/// Longest fence confirmation wait (the group change and P's reboot): the
/// fence's Lambda timeout is 300 s and its calls need their own budget.
pub const MAX_FENCE_CONFIRM_S: u64 = 240;
/// The most the fence waits for an unfence (audit's sweep, or a run's
/// compensation) to end its claim on P's groups (its 40 s lease,
/// `store::primary::UNFENCE_LEASE`, and 5 s).
pub const FENCE_SWEEP_WAIT_MS: u64 = 45_000;

impl Default for FencePolicy {
    fn default() -> Self {
        Self {
            on_unconfirmed: OnUnconfirmed::default(),
            timeout_ms: defaults::default_call_budget(),
            confirm_s: defaults::default_fence_confirm_s(),
            end_sessions: true,
        }
    }
}

/// What an unconfirmed fence means.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnUnconfirmed {
    /// Stop: a person must fence P by hand.
    #[default]
    Stop,
    /// Go on, but only when P's RDS API answered none of the fence's calls:
    /// P's whole Region is assumed unreachable to its clients too. A P that
    /// answered (a refused reboot, a group change still applying) keeps
    /// its open sessions, so the run stops as under `stop`.
    Proceed,
}

/// Report destination.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReportTarget {
    /// S3 bucket (in S) for reports. The stack owns it: leave it out and the
    /// stack's bucket is filled in at cold start; a different name is refused
    /// (see [`crate::stack`]).
    #[serde(default)]
    pub bucket: String,
    /// Key prefix; reports go to `<prefix><incident>/`.
    #[serde(default = "defaults::default_report_prefix")]
    pub prefix: String,
}

/// Optional Bedrock explanation: advisory text for the approver, from the
/// Converse API. The state machine never reads it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Explain {
    /// Bedrock model id or inference-profile id.
    pub model_id: String,
    /// Region of the Bedrock endpoint. Defaults to S's Region: P is the one
    /// that may be down.
    #[serde(default)]
    pub region: Option<String>,
    /// Time budget, milliseconds (at most 20 000: diagnose must finish well
    /// within its Lambda timeout).
    #[serde(default = "defaults::default_explain_budget")]
    pub timeout_ms: u64,
}

/// The state machine's `TimeoutSeconds` (statemachine.asl.json): two days.
pub const MAX_RUN_S: u64 = 2 * 24 * 60 * 60;
/// The longest a planned switchover's catch-up may wait: P takes no writes
/// meanwhile.
pub const MAX_CATCH_UP_S: u64 = 900;
/// verify runs in one Lambda invocation (Timeout 900 s) with time to report.
pub const MAX_VERIFY_DEADLINE_S: u64 = 840;
/// One AWS call's budget inside a step whose Lambda timeout is 60 s.
pub const MAX_CALL_TIMEOUT_MS: u64 = 20_000;
/// The longest switch waits for INSYNC: its Lambda timeout is 120 s, and
/// its other calls need the rest.
pub const MAX_DNS_SYNC_S: u64 = 90;

/// `s` seconds as a span of time, at most [`MAX_SPAN_S`]. A plan inside an
/// execution's input is not validated again; a larger span would overflow
/// the date it is added to.
pub fn span_s(s: u64) -> chrono::Duration {
    chrono::Duration::seconds(i64::try_from(s.min(MAX_SPAN_S)).unwrap_or(0))
}

/// The longest span [`span_s`] gives: about a hundred years.
pub const MAX_SPAN_S: u64 = 100 * 365 * 24 * 60 * 60;

impl Plan {
    /// The lock lease a failover takes: the plan's lease, or the longest
    /// failover run ([`run_bound::failover_run_s`]) when that is longer.
    pub fn failover_lease_s(&self) -> u64 {
        self.timings
            .lock_lease_s
            .max(run_bound::failover_run_s(&self.timings))
    }

    /// The lock lease a planned switchover takes: the plan's lease, or the
    /// longest switchover run ([`run_bound::switchover_run_s`]) when that
    /// is longer.
    pub fn switchover_lease_s(&self) -> u64 {
        self.timings
            .lock_lease_s
            .max(run_bound::switchover_run_s(self))
    }
}

impl Timings {
    /// How long promotion may take from its call before the run stops
    /// polling: `promotion_poll_s x promotion_max_polls`.
    pub fn promotion_budget_s(&self) -> u64 {
        self.promotion_poll_s
            .saturating_mul(u64::from(self.promotion_max_polls))
    }

    /// [`Self::promotion_budget_s`] as a span of time.
    pub fn promotion_budget(&self) -> chrono::Duration {
        span_s(self.promotion_budget_s())
    }
}

/// Longest service name: `<service>-<region>-<YYYYMMDDTHHMMSSZ>` must fit
/// an execution name's 80 characters with the longest Region codes (about 20).
pub const MAX_SERVICE_LEN: usize = 40;

/// Longest explanation budget a plan may set.
pub const EXPLAIN_MAX_TIMEOUT_MS: u64 = 20_000;

impl Explain {
    /// The Region to call Bedrock in.
    pub fn region<'a>(&'a self, plan: &'a Plan) -> &'a str {
        self.region
            .as_deref()
            .unwrap_or(&plan.regions.standby.region)
    }
}

/// A resource in S whose configuration must not reference P.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Dependency {
    /// An SSM parameter in S.
    SsmParameter {
        /// Parameter name.
        name: String,
    },
    /// A literal configuration value declared in the plan (image URI, env var).
    Value {
        /// What it is.
        name: String,
        /// Its value.
        value: String,
    },
}

/// S's compute, each with the least it must run to take P's traffic. All
/// live in S's Region.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Capacity {
    /// ECS services (DescribeServices: `runningCount`).
    #[serde(default)]
    pub ecs_services: Vec<EcsServiceMinimum>,
    /// EC2 Auto Scaling groups (DescribeAutoScalingGroups: instances
    /// `InService` and `Healthy`).
    #[serde(default)]
    pub auto_scaling_groups: Vec<AutoScalingGroupMinimum>,
    /// EKS managed node groups (DescribeNodegroup, then the Auto Scaling
    /// group EKS made for it).
    #[serde(default)]
    pub eks_node_groups: Vec<EksNodeGroupMinimum>,
}

impl Capacity {
    /// Nothing named.
    pub fn is_empty(&self) -> bool {
        self.ecs_services.is_empty()
            && self.auto_scaling_groups.is_empty()
            && self.eks_node_groups.is_empty()
    }
}

/// An ECS service in S and the tasks it must run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EcsServiceMinimum {
    /// Cluster name or ARN.
    pub cluster: String,
    /// Service name or ARN.
    pub service: String,
    /// Tasks that must be running.
    pub min_running: u32,
}

/// An Auto Scaling group in S and the instances it must have in service.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AutoScalingGroupMinimum {
    /// The group's name.
    pub name: String,
    /// Instances `InService` and `Healthy`.
    pub min_in_service: u32,
}

/// An EKS managed node group in S and the nodes it must have.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EksNodeGroupMinimum {
    /// The EKS cluster.
    pub cluster: String,
    /// The node group.
    pub node_group: String,
    /// Nodes in service.
    pub min_nodes: u32,
}

/// One problem with a plan, with the path of the field that has it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {problem}")]
pub struct PlanError {
    /// `plan.regions.standby.db_instance_id`.
    pub path: String,
    /// `missing`, `must be at least 1`, …
    pub problem: String,
}

impl crate::error::Classify for PlanError {
    fn error_name(&self) -> crate::error::ErrorName {
        crate::error::ErrorName::InvalidInput
    }
}

impl Plan {
    /// Parse and validate a plan document. `//` line comments are allowed.
    pub fn from_json(text: &str) -> Result<Plan, PlanError> {
        let text = strip_comments(text);
        let de = &mut serde_json::Deserializer::from_str(&text);
        let plan: Plan = serde_path_to_error::deserialize(de).map_err(shape_error)?;
        plan.validate()?;
        Ok(plan)
    }

    /// Validate a plan that is already a JSON value (the snapshot in an execution input).
    pub fn from_value(value: serde_json::Value) -> Result<Plan, PlanError> {
        let plan: Plan = serde_path_to_error::deserialize(value).map_err(shape_error)?;
        plan.validate()?;
        Ok(plan)
    }

    /// Is this user allowed to approve? Returns the approver's record.
    pub fn approver(&self, user_id: &str) -> Option<&Approver> {
        self.slack.approvers.iter().find(|a| a.user_id == user_id)
    }

    /// May the IAM caller `caller_arn` (as API Gateway's IAM authoriser
    /// gives it) decide by CLI? Returns the plan's entry. A role entry admits
    /// every session of that role; a user entry that user only.
    pub fn cli_approver(&self, caller_arn: &str) -> Option<&CliApprover> {
        let caller = caller_principal(caller_arn)?;
        self.cli_approvers
            .iter()
            .find(|a| iam_principal(&a.arn) == Some(caller))
    }

    /// The name of whoever `id` is on either list: a Slack user id, or an
    /// IAM caller ARN the CLI recorded. None: nobody the plan lets decide.
    pub fn decider_name(&self, id: &str) -> Option<&str> {
        self.approver(id)
            .map(|a| a.name.as_str())
            .or_else(|| self.cli_approver(id).map(|a| a.name.as_str()))
    }
}

/// Turn serde's error into `plan.a.b.c: problem`.
fn shape_error<E: fmt::Display>(err: serde_path_to_error::Error<E>) -> PlanError {
    let mut path = err.path().to_string();
    let inner = err.inner().to_string();
    // serde reports a missing field at its parent: move the name into the path.
    if path == "?" {
        path = ".".into();
    }
    let (problem, field) = if let Some(rest) = inner.strip_prefix("missing field `") {
        (
            "missing".to_string(),
            rest.split('`').next().map(str::to_owned),
        )
    } else if inner.starts_with("unknown field `") {
        ("unknown field (check the spelling)".to_string(), None)
    } else {
        (strip_position(&inner), None)
    };
    if let Some(field) = field {
        path = if path == "." {
            field
        } else {
            format!("{path}.{field}")
        };
    }
    let path = if path == "." {
        "plan".to_string()
    } else {
        format!("plan.{path}")
    };
    PlanError { path, problem }
}

fn strip_position(msg: &str) -> String {
    match msg.find(" at line ") {
        Some(i) => msg[..i].to_string(),
        None => msg.to_string(),
    }
}

mod defaults;
mod jsonc;
mod reverse;
pub mod run_bound;
mod validate;

pub use jsonc::strip_comments;
pub use reverse::{ReverseError, writer_lever};

#[cfg(test)]
mod tests;
