//! The fault campaign: many seeded runs of the real state machine and the
//! real binaries, each under a drawn scenario and fault schedule, with the
//! invariants Handover promises checked after every run. See `bin/campaign.rs`.
//!
//! One world serves every run: the functions bind one plan at cold start, as
//! in a stack, so the runs share its database identifiers, records and
//! table. Before each run the world is put back where a service stands
//! before an incident (P primary with S replicating, traffic on P), but only
//! what a completed failover changed: a run that did not promote leaves the
//! table, the lock and P's groups exactly as Handover left them, and the
//! next incident (a fault-free approve run, `follow-up`) must fail over from
//! there.

use crate::app::App;
use crate::blocks::collect_buttons;
use crate::lambdas::{Lambdas, definition};
use crate::process::{Guard, say, workspace_root};
use crate::world::{
    provision_databases, provision_dns, put_db_secret, put_replica_lag, realistic_pair,
};
use anyhow::{Context, Result, anyhow};
use chrono::Utc;
use handover::adapters::rds::{DbInspector, Rds};
use handover::aws::Aws;
use handover::plan::{Canary, OnUnconfirmed, Plan};
use handover::slack::message::{ACTION_APPROVE, ACTION_APPROVE_DATA_LOSS, ACTION_REJECT};
use handover::slack::stand_in::SlackStandIn;
use handover::store::Store;
use serde_json::{Value, json};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

const SIGNING_SECRET: &str = "campaign-signing-secret-7f8e9d";
const BOT_TOKEN: &str = "xoxb-campaign-bot-token-3c4d5e";
const REGION: &str = "ap-northeast-1";
const TABLE: &str = "handover-campaign";
const P_APP_GROUP: &str = "sg-0app000000000000p";

/// SplitMix64: small, seedable, and the same on every machine.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn chance(&mut self, p: f64) -> bool {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 > 1.0 - p
    }
    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len() as u64) as usize]
    }
}

/// What happens around the approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    /// A person approves.
    Approve,
    /// A person rejects.
    Reject,
    /// Nobody answers before the approval timeout.
    Timeout,
    /// P comes back while the approval waits; then someone approves.
    Recover,
    /// Replication stops while the approval waits (ReplicaLag -1); then someone approves.
    ReplicaBreaks,
    /// A second execution on the same epoch races the first; both are approved.
    Race,
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Scenario::Approve => "approve",
            Scenario::Reject => "reject",
            Scenario::Timeout => "timeout",
            Scenario::Recover => "p-recovers",
            Scenario::ReplicaBreaks => "replica-breaks",
            Scenario::Race => "race",
        })
    }
}

/// Where a fault can strike: a function's call to one AWS operation.
struct Spot {
    caller: &'static str,
    service: &'static str,
    action: &'static str,
    modes: &'static [&'static str],
}

const ALL: &[&str] = &["throttle", "error", "latency", "timeout", "lost", "kill"];
const READS: &[&str] = &["throttle", "error", "latency", "timeout"];

/// The calls Handover makes on its way, each with the faults AWS can give it.
const SPOTS: &[Spot] = &[
    Spot {
        caller: "detect",
        service: "dynamodb",
        action: "UpdateItem",
        modes: ALL,
    },
    Spot {
        caller: "detect",
        service: "dynamodb",
        action: "PutItem",
        modes: ALL,
    },
    Spot {
        caller: "detect",
        service: "dynamodb",
        action: "GetItem",
        modes: READS,
    },
    Spot {
        caller: "detect",
        service: "states",
        action: "StartExecution",
        modes: ALL,
    },
    Spot {
        caller: "detect",
        service: "route53",
        action: "GetHealthCheckStatus",
        modes: READS,
    },
    Spot {
        caller: "diagnose",
        service: "rds",
        action: "DescribeDBInstances",
        modes: READS,
    },
    Spot {
        caller: "diagnose",
        service: "monitoring",
        action: "GetMetricData",
        modes: READS,
    },
    Spot {
        caller: "diagnose",
        service: "bedrock",
        action: "InvokeModel",
        modes: READS,
    },
    Spot {
        caller: "diagnose",
        service: "route53",
        action: "GetHealthCheckStatus",
        modes: READS,
    },
    Spot {
        caller: "approval",
        service: "dynamodb",
        action: "PutItem",
        modes: ALL,
    },
    Spot {
        caller: "slack",
        service: "dynamodb",
        action: "UpdateItem",
        modes: ALL,
    },
    Spot {
        caller: "slack",
        service: "states",
        action: "SendTaskSuccess",
        modes: ALL,
    },
    Spot {
        caller: "fence",
        service: "dynamodb",
        action: "UpdateItem",
        modes: ALL,
    },
    Spot {
        caller: "fence",
        service: "rds",
        action: "DescribeDBInstances",
        modes: READS,
    },
    Spot {
        caller: "fence",
        service: "rds",
        action: "ModifyDBInstance",
        modes: ALL,
    },
    Spot {
        caller: "fence",
        service: "rds",
        action: "RebootDBInstance",
        modes: ALL,
    },
    Spot {
        caller: "promote",
        service: "dynamodb",
        action: "UpdateItem",
        modes: ALL,
    },
    Spot {
        caller: "promote",
        service: "dynamodb",
        action: "GetItem",
        modes: READS,
    },
    Spot {
        caller: "promote",
        service: "rds",
        action: "DescribeDBInstances",
        modes: READS,
    },
    Spot {
        caller: "promote",
        service: "rds",
        action: "PromoteReadReplica",
        modes: ALL,
    },
    Spot {
        caller: "promote",
        service: "monitoring",
        action: "GetMetricData",
        modes: READS,
    },
    Spot {
        caller: "switch",
        service: "route53",
        action: "ChangeResourceRecordSets",
        modes: ALL,
    },
    Spot {
        caller: "switch",
        service: "route53",
        action: "GetHealthCheckStatus",
        modes: READS,
    },
    Spot {
        caller: "switch",
        service: "route53",
        action: "GetHealthCheck",
        modes: READS,
    },
    Spot {
        caller: "switch",
        service: "route53",
        action: "ListResourceRecordSets",
        modes: READS,
    },
    Spot {
        caller: "verify",
        service: "route53",
        action: "TestDNSAnswer",
        modes: READS,
    },
    Spot {
        caller: "verify",
        service: "rds",
        action: "DescribeDBInstances",
        modes: READS,
    },
    Spot {
        caller: "audit",
        service: "states",
        action: "GetExecutionHistory",
        modes: READS,
    },
    Spot {
        caller: "audit",
        service: "s3",
        action: "PutObject",
        modes: ALL,
    },
    Spot {
        caller: "audit",
        service: "rds",
        action: "DescribeEvents",
        modes: READS,
    },
    Spot {
        caller: "audit",
        service: "dynamodb",
        action: "GetItem",
        modes: READS,
    },
    Spot {
        caller: "audit",
        service: "dynamodb",
        action: "UpdateItem",
        modes: ALL,
    },
    Spot {
        caller: "audit",
        service: "rds",
        action: "ModifyDBInstance",
        modes: ALL,
    },
];

/// One run's draw: its scenario and fault schedule, all from its seed.
#[derive(Debug, Clone)]
pub struct Draw {
    /// The seed it came from.
    pub seed: u64,
    /// What happens around the approval.
    pub scenario: Scenario,
    /// Router fault rules (see `World.rules` in harness/py/handover_emulator.py).
    pub rules: Vec<Value>,
    /// P's RDS API times out for the whole run (P's Region is unreachable).
    pub p_api_down: bool,
    /// The share of Route 53 checkers that still see P healthy.
    pub p_share: f64,
    /// Someone not on the allow-list clicks first.
    pub stranger_click: bool,
    /// The approver clicks twice.
    pub double_click: bool,
}

impl Draw {
    /// The draw of `seed`.
    pub fn of(seed: u64) -> Draw {
        let mut rng = Rng::new(seed);
        let scenario = *rng.pick(&[
            Scenario::Approve,
            Scenario::Approve,
            Scenario::Approve,
            Scenario::Race,
            Scenario::Race,
            Scenario::Reject,
            Scenario::Timeout,
            Scenario::Recover,
            Scenario::ReplicaBreaks,
        ]);
        let n = 2 + rng.below(4);
        let mut rules = Vec::new();
        for i in 0..n {
            let spot = rng.pick(SPOTS);
            let mode = *rng.pick(spot.modes);
            let mut rule = json!({
                "id": format!("{seed:016x}/{i}"),
                "mode": mode,
                "caller": spot.caller,
                "service": spot.service,
                "action": spot.action,
                // Most spots are called once or twice a run. The fence reads
                // P every 100 ms while a change is pending (about 5 reads for
                // the group, 10 for the reboot): its faults land anywhere in
                // those waits, the confirming reads included.
                "skip": if spot.caller == "fence" && spot.action == "DescribeDBInstances" {
                    rng.below(16)
                } else if rng.chance(0.7) {
                    0
                } else {
                    1 + rng.below(2)
                },
                "count": 1 + rng.below(2),
            });
            match mode {
                // Longer than the plan's call budget (1.5 s): the caller gives up.
                "timeout" | "lost" => rule["seconds"] = json!(2.0),
                "latency" => rule["seconds"] = json!(0.4 + rng.below(8) as f64 / 10.0),
                _ => {}
            }
            rules.push(rule);
        }
        Draw {
            seed,
            scenario,
            rules,
            p_api_down: rng.chance(0.25),
            p_share: *rng.pick(&[0.0, 0.0, 0.125]),
            stranger_click: rng.chance(0.2),
            double_click: rng.chance(0.3),
        }
    }

    /// A fault-free approve run: the next incident after `of`.
    pub fn follow_up(of: u64) -> Draw {
        Draw {
            seed: of,
            scenario: Scenario::Approve,
            rules: Vec::new(),
            p_api_down: false,
            p_share: 0.0,
            stranger_click: false,
            double_click: false,
        }
    }
}

/// What one run did and what it broke.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// Terminal status of each execution.
    pub statuses: Vec<String>,
    /// Faults the router applied in this run.
    pub faults: Vec<String>,
    /// Invariants broken.
    pub violations: Vec<String>,
    /// S was promoted.
    pub promoted: bool,
    /// Error and cause of each execution that did not succeed.
    pub causes: Vec<String>,
    /// Confirmed fences whose aftermath on P's database was checked.
    pub fenced_writes_checked: usize,
    /// Per promotion: the data loss measured on both disks and the run's estimate (s).
    pub losses: Vec<(f64, f64)>,
}

/// The campaign's world.
pub struct Campaign {
    _emulator: Guard,
    sdb: Arc<crate::pdb::SDatabase>,
    pg_password: String,
    lambdas: Lambdas,
    slack: SlackStandIn,
    p_app: App,
    s_app: App,
    aws: Aws,
    plan: Plan,
    store: Store,
    state_machine: String,
    records: Vec<(String, aws_sdk_route53::types::ResourceRecordSet)>,
    lag: Arc<AtomicU64>,
    pdb: crate::pdb::PDatabase,
    /// When a run last published ReplicaLag -1 (replication stopped).
    broken_at: Option<Instant>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    seen_executions: std::collections::BTreeSet<String>,
}

impl Campaign {
    /// Start the world: emulator, PostgreSQL behind S, apps, Slack stand-in,
    /// the plan in SSM and the functions under cargo lambda watch.
    pub async fn start(out: &Path, emulator: Guard, started: Instant) -> Result<Campaign> {
        let root = workspace_root();
        let slack = SlackStandIn::start().await?;
        let p_app = App::start(200).await;
        let s_app = App::start(200).await;
        s_app.set_writable(false);
        let aws = Aws::new();
        let mut plan: Plan =
            Plan::from_json(&std::fs::read_to_string(root.join("drill/plan.json"))?)?;
        plan.regions.primary.endpoint = format!("{}/health", p_app.url);
        plan.regions.standby.endpoint = format!("{}/health", s_app.url);
        plan.dns.read_url = Some(format!("{}/health", s_app.url));
        plan.regions.primary.target_group_arns.clear();
        plan.regions.standby.target_group_arns.clear();
        plan.detection.failures_to_trigger = 2;
        plan.timings.approval_timeout_s = 8;
        plan.timings.cooldown_s = 1;
        plan.fence.on_unconfirmed = OnUnconfirmed::Stop;
        plan.fence.confirm_s = 5;
        provision_dns(&aws, &mut plan, "p-alb.ap-northeast-2.elb.amazonaws.com").await;
        provision_databases(&aws, &plan).await;
        // The campaign runs at the fast pace: its plan is tuned for many short runs.
        realistic_pair(&plan, crate::pace::Pace::Fast).await;
        // P's database is real, with P's app writing through an open session;
        // S's is its streaming replica through a link a partition cuts.
        let (pdb, sdb) = crate::pdb::pair(out, &plan, "campaign", crate::pace::Pace::Fast).await?;
        let (pg_port, pg_password) = (sdb.port, sdb.password().to_owned());
        let secrets = aws.secrets(REGION).await;
        let secret = |name: &'static str, value: String| {
            let secrets = secrets.clone();
            async move {
                secrets
                    .create_secret()
                    .name(name)
                    .secret_string(value)
                    .send()
                    .await
                    .map(|o| o.arn.unwrap_or_default())
            }
        };
        plan.slack.bot_token_secret_arn =
            secret("handover/slack-bot-token", BOT_TOKEN.to_owned()).await?;
        plan.slack.signing_secret_arn =
            secret("handover/slack-signing-secret", SIGNING_SECRET.to_owned()).await?;
        if let Canary::Postgres {
            port,
            secret_arn,
            ca_secret_arn,
            database,
            ..
        } = &mut plan.canary
        {
            *port = pg_port;
            *database = "campaign".into();
            *secret_arn = put_db_secret(&aws, REGION, "handover", &pg_password).await;
            let ca = std::fs::read_to_string(out.join("pg/tls/ca.pem"))
                .context("the campaign database's CA")?;
            *ca_secret_arn = Some(secret("handover/rds-ca", ca).await?);
        }
        plan.validate()?;
        aws.s3(REGION)
            .await
            .create_bucket()
            .bucket(&plan.report.bucket)
            .create_bucket_configuration(
                aws_sdk_s3::types::CreateBucketConfiguration::builder()
                    .location_constraint(aws_sdk_s3::types::BucketLocationConstraint::from(REGION))
                    .build(),
            )
            .send()
            .await?;
        let ddb = aws.dynamodb(REGION).await;
        handover::store::create_table(&ddb, TABLE).await?;
        let store = Store::new(ddb, TABLE);
        let state_machine = aws
            .sfn(REGION)
            .await
            .create_state_machine()
            .name("handover-campaign")
            .definition(definition(REGION))
            .role_arn("arn:aws:iam::123456789012:role/handover-states")
            .send()
            .await?
            .state_machine_arn;
        let records = snapshot_records(&aws, &plan).await?;
        let plan_parameter = crate::world::put_plan_parameter(&aws, REGION, &plan).await;
        let operator_topic = crate::operator_topic(&aws, REGION).await;
        let roles = crate::stack::provision_failover_roles(&aws, &plan, TABLE).await;
        let mut env = crate::world::stack_environment(
            &plan,
            TABLE,
            &plan_parameter,
            &state_machine,
            &operator_topic,
            &roles,
            true,
        );
        env.push(("SLACK_API_BASE", slack.api_base()));
        let lambdas = Lambdas::start(&env).await;
        // NaN: publish what S's replica really lags.
        let lag = Arc::new(AtomicU64::new(f64::NAN.to_bits()));
        let mut campaign = Campaign {
            _emulator: emulator,
            sdb: Arc::new(sdb),
            pg_password,
            lambdas,
            slack,
            p_app,
            s_app,
            aws,
            plan,
            store,
            state_machine,
            records,
            lag,
            pdb,
            broken_at: None,
            tasks: Vec::new(),
            seen_executions: Default::default(),
        };
        campaign.lag_publisher();
        say(
            started,
            format!(
                "campaign world up: {} in {} replicating to {} in {}; functions under cargo lambda watch",
                campaign.plan.regions.primary.db_instance_id,
                campaign.plan.regions.primary.region,
                campaign.plan.regions.standby.db_instance_id,
                campaign.plan.regions.standby.region
            ),
        );
        Ok(campaign)
    }

    /// ReplicaLag samples every 2 s: S's real lag, or what the run forced.
    fn lag_publisher(&mut self) {
        self.tasks.push(crate::pdb::publish_lag(
            &self.plan.regions.standby,
            self.sdb.clone(),
            Some(self.lag.clone()),
        ));
    }

    /// Force ReplicaLag to `seconds` (-1: RDS says replication stopped).
    async fn set_lag(&self, seconds: f64) {
        self.lag.store(seconds.to_bits(), Ordering::SeqCst);
        let s = &self.plan.regions.standby;
        put_replica_lag(&self.aws, &s.region, &s.db_instance_id, seconds, Utc::now()).await;
    }

    async fn s_state(&self) -> Result<Option<handover::adapters::rds::DbInstance>> {
        let s = &self.plan.regions.standby;
        Ok(Rds::new(&self.aws, &s.region)
            .await
            .describe(&s.db_instance_id, Duration::from_secs(5))
            .await?)
    }

    /// Put the world back where a service stands before an incident, undoing
    /// only what a completed failover changed (see the module comment).
    async fn reset(&mut self) -> Result<()> {
        crate::control("rules", json!({ "clear": true })).await;
        let (p, s) = (&self.plan.regions.primary, &self.plan.regions.standby);
        let s_db = self.s_state().await?;
        let standing = s_db
            .as_ref()
            .is_some_and(|d| d.replication_source.is_some() && d.status == "available");
        if !standing {
            // A failover completed (or S is mid-promotion): a new pair.
            for _ in 0..100 {
                match self.s_state().await? {
                    Some(d) if d.status != "available" => {
                        tokio::time::sleep(Duration::from_millis(200)).await
                    }
                    _ => break,
                }
            }
            let _ = self
                .aws
                .rds(&s.region)
                .await
                .delete_db_instance()
                .db_instance_identifier(&s.db_instance_id)
                .skip_final_snapshot(true)
                .send()
                .await;
            let _ = self
                .aws
                .rds(&p.region)
                .await
                .delete_db_instance()
                .db_instance_identifier(&p.db_instance_id)
                .skip_final_snapshot(true)
                .send()
                .await;
            provision_databases(&self.aws, &self.plan).await;
            // S's database was promoted with it: a fresh replica of P, at the
            // same endpoint.
            self.pdb.partition(false);
            self.pdb.rebuild_standby(&self.sdb, s).await?;
            let ddb = self.aws.dynamodb(REGION).await;
            for pk in ["PRIMARY", "LOCK"] {
                ddb.delete_item()
                    .table_name(TABLE)
                    .key("pk", aws_sdk_dynamodb::types::AttributeValue::S(pk.into()))
                    .key(
                        "sk",
                        aws_sdk_dynamodb::types::AttributeValue::S("STATE".into()),
                    )
                    .send()
                    .await?;
            }
        }
        if self.store.primary().await?.is_none() {
            self.store
                .init_primary(&p.region, &p.db_instance_id, Utc::now())
                .await?;
        }
        // Traffic back on P: the records and P's health check as provisioned.
        let r53 = self.aws.route53().await;
        for (zone, record) in &self.records {
            use aws_sdk_route53::types::{Change, ChangeAction, ChangeBatch};
            r53.change_resource_record_sets()
                .hosted_zone_id(zone)
                .change_batch(
                    ChangeBatch::builder()
                        .changes(
                            Change::builder()
                                .action(ChangeAction::Upsert)
                                .resource_record_set(record.clone())
                                .build()?,
                        )
                        .build()?,
                )
                .send()
                .await?;
        }
        r53.update_health_check()
            .health_check_id(&p.health_check_id)
            .inverted(false)
            .disabled(false)
            .send()
            .await?;
        self.p_app.set_status(200);
        self.pdb.partition(false);
        self.s_app.set_writable(false);
        crate::control(
            "health",
            json!({ &p.health_check_id: 1.0, &s.health_check_id: 1.0 }),
        )
        .await;
        // S's real lag again (the replica catches up once the link is healed).
        self.lag.store(f64::NAN.to_bits(), Ordering::SeqCst);
        for _ in 0..100 {
            if self.sdb.lag_s().await.is_some_and(|l| l < 1.0) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // Replication repaired: Handover reads the newest minute's Minimum,
        // where a -1 stays until that minute has passed.
        // The -1 samples went on until the line above.
        if self.broken_at.take().is_some() {
            tokio::time::sleep(Duration::from_secs(62)).await;
        }
        // A long partition in the last run left a high lag in the minute
        // Handover reads (the minute's Maximum), and the next incident would
        // rightly stop before the fence over it: wait until the lag Handover
        // would read is within the target again, as it is before a fresh
        // incident (found by the long campaign, seed 173b83b955b3a000).
        {
            use handover::adapters::cloudwatch::{CloudWatch, ReplicaLag};
            let s = &self.plan.regions.standby;
            let cw = CloudWatch::new(&self.aws, &s.region).await;
            let target = self.plan.targets.rpo_s as f64;
            for _ in 0..80 {
                match cw
                    .latest_lag(
                        &s.db_instance_id,
                        Utc::now(),
                        chrono::Duration::minutes(5),
                        Duration::from_secs(5),
                    )
                    .await
                {
                    Ok(Some(l)) if (0.0..=target / 2.0).contains(&l.seconds) => break,
                    _ => tokio::time::sleep(Duration::from_secs(1)).await,
                }
            }
        }
        // The cooldown the last run's audit set.
        if let Some(until) = self
            .store
            .lock_state()
            .await?
            .and_then(|l| l.cooldown_until)
        {
            let wait = (until - Utc::now()).num_milliseconds();
            if wait > 0 {
                tokio::time::sleep(Duration::from_millis(wait as u64 + 50)).await;
            }
        }
        Ok(())
    }

    fn tick(&self) -> Value {
        crate::triggers::scheduled_payload("DetectFunction", REGION, Utc::now())
    }

    /// Executions of the state machine not seen before.
    async fn new_executions(&mut self) -> Result<Vec<String>> {
        let out = self
            .aws
            .sfn(REGION)
            .await
            .list_executions()
            .state_machine_arn(&self.state_machine)
            .max_results(1000)
            .send()
            .await?;
        let mut fresh = Vec::new();
        for e in out.executions() {
            if self.seen_executions.insert(e.execution_arn().to_owned()) {
                fresh.push(e.execution_arn().to_owned());
            }
        }
        Ok(fresh)
    }

    /// One run: break P, let detect start the execution, act out the
    /// scenario, deliver the terminal events to audit, check the invariants.
    pub async fn run(&mut self, draw: &Draw) -> Result<Outcome> {
        self.reset().await?;
        let writes = self.open_writes_when_promoted();
        let outcome = self.run_reset(draw).await;
        writes.abort();
        outcome
    }

    /// S's database takes writes only once RDS shows the replica promoted
    /// (as a read replica refuses them until then).
    fn open_writes_when_promoted(&self) -> tokio::task::JoinHandle<()> {
        let aws = Aws::new();
        let s = self.plan.regions.standby.clone();
        let gate = self.s_app.write_gate();
        tokio::spawn(async move {
            let rds = Rds::new(&aws, &s.region).await;
            loop {
                if let Ok(Some(d)) = rds
                    .describe(&s.db_instance_id, Duration::from_secs(5))
                    .await
                    && d.replication_source.is_none()
                    && d.status == "available"
                {
                    gate.store(true, Ordering::SeqCst);
                    return;
                }
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        })
    }

    async fn run_reset(&mut self, draw: &Draw) -> Result<Outcome> {
        let mut out = Outcome::default();
        let calls_mark = crate::call_log().await.len();
        let faults_mark = crate::fault_log().await.len();
        let log_mark = self.lambdas.output().len();
        self.new_executions().await?;
        let baseline = crate::lambdas::invoke("detect", &self.tick()).await?;
        if baseline["outcome"] != "healthy" {
            out.violations.push(format!(
                "before the break, detect said {} (the last run left the world unready)",
                baseline["outcome"]
            ));
        }
        let (p, s) = (
            self.plan.regions.primary.clone(),
            self.plan.regions.standby.clone(),
        );
        let mut rules = draw.rules.clone();
        if draw.p_api_down {
            rules.push(json!({"id": format!("{:016x}/p-region", draw.seed), "mode": "timeout", "seconds": 2.0,
                              "service": "rds", "region": p.region}));
        }
        // A kill strikes only this world's functions: those whose
        // environment names this emulator.
        for rule in &mut rules {
            rule["environ"] = json!(crate::endpoint());
        }
        crate::add_fault_rules(Value::Array(rules)).await;

        // BREAK P: a partition: its app answers 503, Route 53's checkers
        // lose it and replication to S stops, while P's app goes on writing.
        self.p_app.set_status(503);
        self.pdb.partition(true);
        crate::control(
            "health",
            json!({ &p.health_check_id: draw.p_share, &s.health_check_id: 1.0 }),
        )
        .await;
        let mut executions = Vec::new();
        for _ in 0..12 {
            tokio::time::sleep(Duration::from_millis(1100)).await;
            let r = crate::lambdas::invoke("detect", &self.tick()).await;
            executions.extend(self.new_executions().await?);
            if let Ok(r) = &r
                && r["outcome"] == "started"
                && !executions.is_empty()
            {
                break;
            }
        }
        // A tick or two more: detect must not start a second one.
        tokio::time::sleep(Duration::from_millis(1100)).await;
        let _ = crate::lambdas::invoke("detect", &self.tick()).await;
        executions.extend(self.new_executions().await?);
        match executions.len() {
            0 => out
                .violations
                .push("detect never started an execution in 12 ticks".into()),
            1 => {}
            n => out
                .violations
                .push(format!("detect started {n} executions for one outage")),
        }
        if let (Scenario::Race, Some(first)) = (draw.scenario, executions.first()) {
            executions.push(self.race(first).await?);
        }
        let incidents = self.incidents(&executions).await?;
        let act = self.act(draw, &incidents);
        let wait = self.wait_ended(&executions);
        let (acted, ended) = tokio::join!(act, wait);
        if acted? {
            self.broken_at = Some(Instant::now());
        }
        let mut ended = ended?;
        for (arn, status) in &mut ended {
            out.statuses.push(status.clone());
            if status == "RUNNING" {
                out.violations
                    .push(format!("{arn} still RUNNING long after its deadline"));
                // Stop it, as an operator would, so that its audit (ABORTED)
                // releases the lock and compensates: one stuck run is one
                // violation, not a world that refuses every later incident.
                let sfn = self.aws.sfn(REGION).await;
                let _ = sfn
                    .stop_execution()
                    .execution_arn(arn.as_str())
                    .error("Campaign.Deadline")
                    .cause("still running long after the campaign's deadline")
                    .send()
                    .await;
                *status = "ABORTED".into();
            }
        }
        let (mut tokens, mut fences, mut estimates) = (Vec::new(), Vec::new(), Vec::new());
        for (arn, status) in &ended {
            if status != "SUCCEEDED" {
                let d = self
                    .aws
                    .sfn(REGION)
                    .await
                    .describe_execution()
                    .execution_arn(arn)
                    .send()
                    .await?;
                out.causes.push(format!(
                    "{}: {}",
                    d.error().unwrap_or("?"),
                    d.cause()
                        .unwrap_or("")
                        .chars()
                        .take(400)
                        .collect::<String>()
                ));
            }
            let (t, fenced, estimated) = self.history_facts(arn).await?;
            tokens.extend(t);
            fences.extend(fenced);
            estimates.extend(estimated);
            if let Err(e) = self.audit(arn).await {
                out.violations.push(format!(
                    "audit of {arn} failed on every delivery EventBridge makes: {e:#}"
                ));
            }
        }
        crate::control("rules", json!({ "clear": true })).await;
        // Faults on Handover's own calls (the harness's reads of the world,
        // which the p-region rule also slows, are not counted).
        for f in crate::fault_log()
            .await
            .iter()
            .skip(faults_mark)
            .filter(|f| f["caller"].as_str().is_some_and(|c| !c.is_empty()))
        {
            out.faults.push(format!(
                "{}:{}:{}{}",
                f["caller"].as_str().unwrap_or("?"),
                f["action"].as_str().unwrap_or("?"),
                f["mode"].as_str().unwrap_or("?"),
                f.get("killed")
                    .map(|k| format!("(killed {k})"))
                    .unwrap_or_default()
            ));
        }
        let seen = Seen {
            incidents,
            calls_mark,
            log_mark,
            tokens,
            fences,
            estimates,
        };
        self.check(draw, &seen, &mut out).await?;
        Ok(out)
    }

    /// A second execution on the same epoch, as a duplicate start would make it.
    async fn race(&mut self, first: &str) -> Result<String> {
        let sfn = self.aws.sfn(REGION).await;
        let d = sfn.describe_execution().execution_arn(first).send().await?;
        let mut input: Value = serde_json::from_str(d.input().unwrap_or("{}"))?;
        let incident = crate::unique("race");
        input["incident_id"] = json!(incident);
        let arn = sfn
            .start_execution()
            .state_machine_arn(&self.state_machine)
            .name(&incident)
            .input(input.to_string())
            .send()
            .await?
            .execution_arn;
        self.seen_executions.insert(arn.clone());
        Ok(arn)
    }

    async fn incidents(&self, executions: &[String]) -> Result<Vec<String>> {
        let sfn = self.aws.sfn(REGION).await;
        let mut out = Vec::new();
        for arn in executions {
            let d = sfn.describe_execution().execution_arn(arn).send().await?;
            let input: Value = serde_json::from_str(d.input().unwrap_or("{}"))?;
            out.push(input["incident_id"].as_str().unwrap_or_default().to_owned());
        }
        Ok(out)
    }

    /// The approval message for `incident`, if it comes within 30 s.
    async fn buttons(&self, incident: &str) -> Option<Vec<(String, String)>> {
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(30) {
            for m in self.slack.messages() {
                if m.body.to_string().contains(incident) {
                    let mut out = Vec::new();
                    collect_buttons(&m.body, &mut out);
                    if !out.is_empty() {
                        return Some(out);
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        None
    }

    async fn click(&self, user: &str, action: &str, key: &str) -> (u16, String) {
        crate::lambdas::slack_click(
            SIGNING_SECRET,
            user,
            action,
            key,
            &self.slack.response_url(&crate::unique("r")),
        )
        .await
    }

    /// Act out the scenario on every execution's approval.
    async fn act(&self, draw: &Draw, incidents: &[String]) -> Result<bool> {
        let mut broke = false;
        if draw.scenario == Scenario::Timeout {
            return Ok(broke);
        }
        for incident in incidents {
            let Some(buttons) = self.buttons(incident).await else {
                continue;
            };
            match draw.scenario {
                Scenario::Recover => {
                    self.p_app.set_status(200);
                    self.pdb.partition(false);
                    let p = &self.plan.regions.primary;
                    crate::control("health", json!({ &p.health_check_id: 1.0 })).await;
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                Scenario::ReplicaBreaks => {
                    // RDS publishes ReplicaLag -1 when replication stops.
                    self.set_lag(-1.0).await;
                    broke = true;
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                _ => {}
            }
            let wanted: &[&str] = if draw.scenario == Scenario::Reject {
                &[ACTION_REJECT]
            } else {
                &[ACTION_APPROVE, ACTION_APPROVE_DATA_LOSS]
            };
            let Some((action, key)) = buttons.iter().find(|(a, _)| wanted.contains(&a.as_str()))
            else {
                continue;
            };
            if draw.stranger_click {
                // Refused with a clear answer, and nothing changes: the
                // approver's click after it must still count.
                let (status, body) = self.click("U0STRANGER9", action, key).await;
                anyhow::ensure!(
                    status == 403 && body.contains("not on this service's approver list"),
                    "a stranger's click got {status} {body}"
                );
            }
            self.click("U0ONCALL01", action, key).await;
            if draw.double_click {
                self.click("U0ONCALL01", action, key).await;
            }
        }
        Ok(broke)
    }

    /// Wait for every execution to end; (ARN, status) with RUNNING for one that did not.
    async fn wait_ended(&self, executions: &[String]) -> Result<Vec<(String, String)>> {
        let sfn = self.aws.sfn(REGION).await;
        let t = self.plan.timings;
        let deadline = Instant::now()
            + Duration::from_secs(
                t.approval_timeout_s + t.promotion_poll_s * u64::from(t.promotion_max_polls) + 120,
            );
        let mut out = Vec::new();
        for arn in executions {
            loop {
                let d = sfn.describe_execution().execution_arn(arn).send().await?;
                if d.status.as_str() != "RUNNING" || Instant::now() > deadline {
                    out.push((
                        arn.clone(),
                        match d.error() {
                            Some(e) => format!("{}({e})", d.status.as_str()),
                            None => d.status.as_str().to_owned(),
                        },
                    ));
                    break;
                }
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        }
        Ok(out)
    }

    /// From an execution's history: the task tokens it handed out (the
    /// approval's, to scan the logs for), when its fence was confirmed, and
    /// the RPO its promotion estimated (ReplicaLag and when it was sampled).
    #[allow(clippy::type_complexity)]
    async fn history_facts(
        &self,
        arn: &str,
    ) -> Result<(
        Vec<String>,
        Vec<chrono::DateTime<Utc>>,
        Vec<(f64, chrono::DateTime<Utc>)>,
    )> {
        let h = self
            .aws
            .sfn(REGION)
            .await
            .get_execution_history()
            .execution_arn(arn)
            .max_results(1000)
            .send()
            .await?;
        let tokens = h
            .events()
            .iter()
            .filter_map(|e| e.task_scheduled_event_details())
            .filter_map(|d| serde_json::from_str::<Value>(d.parameters()).ok())
            .filter_map(|v| v["Payload"]["token"].as_str().map(str::to_owned))
            .collect();
        let fences = h
            .events()
            .iter()
            .filter_map(|e| e.lambda_function_succeeded_event_details())
            .filter_map(|d| d.output())
            .filter_map(|o| serde_json::from_str::<Value>(o).ok())
            .filter(|v| v["outcome"] == "confirmed" && v.get("fence_security_group").is_some())
            .filter_map(|v| serde_json::from_value(v["fenced_at"].clone()).ok())
            .collect();
        let estimates = h
            .events()
            .iter()
            .filter_map(|e| e.lambda_function_succeeded_event_details())
            .filter_map(|d| d.output())
            .filter_map(|o| serde_json::from_str::<Value>(o).ok())
            .filter_map(|v| {
                Some((
                    v.get("rpo_s")?.as_f64()?,
                    serde_json::from_value(v.get("lag_sampled_at")?.clone()).ok()?,
                ))
            })
            .collect();
        Ok((tokens, fences, estimates))
    }

    /// Deliver the terminal status to audit as EventBridge does: an
    /// asynchronous invocation, which Lambda retries twice on a function
    /// error (the template's EventInvokeConfig; delays compressed to 1 s).
    async fn audit(&self, arn: &str) -> Result<Value> {
        let d = self
            .aws
            .sfn(REGION)
            .await
            .describe_execution()
            .execution_arn(arn)
            .send()
            .await?;
        let ms = |t: Option<&aws_sdk_sfn::primitives::DateTime>| t.and_then(|t| t.to_millis().ok());
        let event = crate::triggers::rule_event(
            "AuditFunction",
            REGION,
            "aws.states",
            "Step Functions Execution Status Change",
            &[arn.to_owned()],
            json!({
                "executionArn": arn, "stateMachineArn": self.state_machine, "name": d.name.clone().unwrap_or_default(),
                "status": d.status.as_str(), "startDate": ms(Some(&d.start_date)), "stopDate": ms(d.stop_date.as_ref()),
                "input": d.input, "inputDetails": {"included": true}, "output": d.output, "outputDetails": {"included": true},
                "error": d.error, "cause": d.cause,
            }),
            &[("Workflow", &self.state_machine)],
        );
        let mut last = anyhow!("not delivered");
        for attempt in 0..3 {
            if attempt > 0 {
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            match crate::lambdas::invoke("audit", &event).await {
                Ok(v) => return Ok(v),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// The invariants, after the run and its audits.
    async fn check(&self, draw: &Draw, seen: &Seen, out: &mut Outcome) -> Result<()> {
        let Seen {
            incidents,
            calls_mark,
            log_mark,
            tokens,
            fences,
            estimates,
        } = seen;
        let (calls_mark, log_mark) = (*calls_mark, *log_mark);
        let (p, s) = (&self.plan.regions.primary, &self.plan.regions.standby);
        let calls = crate::call_log().await;
        let promotions = calls
            .iter()
            .skip(calls_mark)
            // Every call that reached RDS, whatever it answered: RDS refuses
            // a second one here, but Handover must never make it.
            .filter(|c| {
                c["action"] == "PromoteReadReplica"
                    && c["target"] == s.db_instance_id.as_str()
                    && c.get("status").is_some()
            })
            .count();
        if promotions > 1 {
            out.violations.push(format!(
                "{promotions} PromoteReadReplica calls reached RDS for one epoch"
            ));
        }
        // S may still be rebooting from a promotion the run called.
        let mut s_db = self.s_state().await?;
        for _ in 0..50 {
            match &s_db {
                Some(d) if d.status != "available" => {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    s_db = self.s_state().await?;
                }
                _ => break,
            }
        }
        let promoted = s_db
            .as_ref()
            .is_some_and(|d| d.replication_source.is_none());
        out.promoted = promoted;
        // No write reached P between a confirmed fence and its undoing (audit's
        // compensation restoring P's groups), or now.
        let unfenced = calls
            .iter()
            .skip(calls_mark)
            .filter(|c| {
                c["caller"] == "audit"
                    && c["action"] == "ModifyDBInstance"
                    && c["target"] == p.db_instance_id.as_str()
                    && c["status"] == 200
            })
            .filter_map(|c| c["t"].as_f64())
            .filter_map(|t| chrono::DateTime::<Utc>::from_timestamp_millis((t * 1000.0) as i64))
            .next()
            .filter(|_| !promoted)
            .unwrap_or_else(Utc::now);
        // When the fence first acted on P: its first ModifyDBInstance that
        // reached RDS. A retried fence (a lost answer, a killed process)
        // confirms later than P was cut off.
        let first_fence_call = calls
            .iter()
            .skip(calls_mark)
            .filter(|c| {
                c["caller"] == "fence"
                    && c["action"] == "ModifyDBInstance"
                    && c["target"] == p.db_instance_id.as_str()
                    && c.get("status").is_some()
            })
            .filter_map(|c| c["t"].as_f64())
            .filter_map(|t| chrono::DateTime::<Utc>::from_timestamp_millis((t * 1000.0) as i64))
            .min();
        for fenced_at in fences {
            let n = self.pdb.writes_between(*fenced_at, unfenced).await?;
            if n > 0 {
                out.violations.push(format!(
                    "P accepted {n} writes after its fence was confirmed at {fenced_at}"
                ));
            }
            // The control: P's app was writing up to the fence, so the check
            // above could have seen a write.
            let acted = first_fence_call.map_or(*fenced_at, |t| t.min(*fenced_at));
            let before = self
                .pdb
                .writes_between(acted - chrono::Duration::seconds(5), acted)
                .await?;
            if before == 0 {
                out.violations.push(format!(
                    "P's app wrote nothing in the 5 s before the fence acted at {acted} (confirmed at {fenced_at}): the check above proves nothing"
                ));
            }
        }
        out.fenced_writes_checked += fences.len();
        // The report's RPO against what S really lost: the orders P took
        // after the newest one S replayed, read from both disks. The
        // estimate is the newest ReplicaLag sample; P kept writing until the
        // fence, so the loss may exceed it by at most the time from the
        // sample to the fence.
        if promoted && self.sdb.in_recovery().await.ok() == Some(false) {
            let loss = crate::pdb::loss(&self.pdb, &self.sdb).await?;
            match (estimates.last(), fences.first()) {
                (Some((estimate, sampled_at)), Some(fenced_at)) => {
                    let bound = estimate
                        + ((*fenced_at - *sampled_at).num_milliseconds() as f64 / 1000.0).max(0.0);
                    if loss.span_s > bound + 0.5 {
                        out.violations.push(format!(
                            "S lost {} orders spanning {:.1} s; the run estimated {estimate:.1} s (sampled at {sampled_at}), at most {bound:.1} s by the fence",
                            loss.rows, loss.span_s
                        ));
                    }
                    out.losses.push((loss.span_s, *estimate));
                }
                (None, _) => out.violations.push(format!(
                    "S was promoted ({} orders lost over {:.1} s) and no promotion result recorded an RPO",
                    loss.rows, loss.span_s
                )),
                (_, None) => {} // promoted without a confirmed fence: judged by the fence checks above
            }
        }
        // P's groups once RDS has applied the last change (audit may have
        // just restored them).
        let p_rds = Rds::new(&self.aws, &p.region).await;
        let mut p_groups = Vec::new();
        for _ in 0..50 {
            match p_rds
                .describe(&p.db_instance_id, Duration::from_secs(5))
                .await?
            {
                Some(d) if d.unsettled_security_groups.is_empty() => {
                    p_groups = d.security_groups;
                    break;
                }
                Some(d) => p_groups = d.security_groups,
                None => break,
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        if p_groups.contains(&p.fence_security_group_id) && !promoted {
            out.violations.push(format!(
                "P left fenced ({p_groups:?}) and S not promoted: no writer at all"
            ));
        }
        if promoted && !p_groups.contains(&p.fence_security_group_id) {
            out.violations.push(format!(
                "S was promoted and P is not fenced ({p_groups:?}): two writers"
            ));
        }
        if !promoted && p_groups != [P_APP_GROUP] {
            out.violations.push(format!(
                "P's groups are {p_groups:?}, not the {P_APP_GROUP} it had"
            ));
        }
        let rec = self.store.primary().await?;
        match &rec {
            None => out.violations.push("the primary record is gone".into()),
            Some(r) => {
                if let Some(t) = &r.transition {
                    out.violations
                        .push(format!("a transition is left behind: {t:?}"));
                }
                let expect = if promoted { &s.region } else { &p.region };
                if &r.region != expect {
                    out.violations.push(format!(
                        "the record says {} is primary, RDS says {expect}",
                        r.region
                    ));
                }
            }
        }
        match self.store.lock_state().await? {
            Some(l) if l.holder.is_some() => out
                .violations
                .push(format!("the lock is still held: {l:?}")),
            _ => {}
        }
        let s3 = self.aws.s3(REGION).await;
        for incident in incidents {
            let key = format!("{}{incident}/report.json", self.plan.report.prefix);
            if s3
                .head_object()
                .bucket(&self.plan.report.bucket)
                .key(&key)
                .send()
                .await
                .is_err()
            {
                out.violations.push(format!(
                    "no report at s3://{}/{key}",
                    self.plan.report.bucket
                ));
            }
        }
        let log = self.lambdas.output();
        let log = log.get(log_mark..).unwrap_or_default();
        let mut secrets = vec![
            ("the Slack signing secret", SIGNING_SECRET.to_owned()),
            ("the Slack bot token", BOT_TOKEN.to_owned()),
            ("the DB password", self.pg_password.clone()),
        ];
        secrets.extend(tokens.iter().map(|t| ("a task token", t.clone())));
        for (what, secret) in secrets {
            if log.contains(&secret) {
                out.violations.push(format!("{what} appears in the log"));
            }
        }
        if draw.rules.is_empty() && !draw.p_api_down && draw.scenario == Scenario::Approve {
            // A follow-up: the next incident must fail over.
            if !promoted || out.statuses.first().map(String::as_str) != Some("SUCCEEDED") {
                out.violations.push(format!(
                    "the next incident did not fail over: {:?} {:?}",
                    out.statuses, out.causes
                ));
            }
        }
        Ok(())
    }
}

impl Drop for Campaign {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
        let _ = std::fs::write(out_dir().join("functions.log"), self.lambdas.output());
    }
}

/// What a run left to check: its incidents, where the call log and the
/// functions' log stood when it began, the task tokens it handed out and
/// when its fences were confirmed.
struct Seen {
    incidents: Vec<String>,
    calls_mark: usize,
    log_mark: usize,
    tokens: Vec<String>,
    fences: Vec<chrono::DateTime<Utc>>,
    estimates: Vec<(f64, chrono::DateTime<Utc>)>,
}

/// The records of both zones as provisioned, to put traffic back on P.
async fn snapshot_records(
    aws: &Aws,
    plan: &Plan,
) -> Result<Vec<(String, aws_sdk_route53::types::ResourceRecordSet)>> {
    let r53 = aws.route53().await;
    let mut zones = vec![plan.dns.hosted_zone_id.clone()];
    if let handover::plan::WriterEndpoint::Cname { hosted_zone_id, .. } = &plan.dns.writer {
        zones.push(hosted_zone_id.clone());
    }
    let mut out = Vec::new();
    for zone in zones {
        let sets = r53
            .list_resource_record_sets()
            .hosted_zone_id(&zone)
            .send()
            .await?;
        for r in sets.resource_record_sets() {
            if matches!(r.r#type(), aws_sdk_route53::types::RrType::Cname) {
                out.push((zone.clone(), r.clone()));
            }
        }
    }
    anyhow::ensure!(!out.is_empty(), "no records to restore");
    Ok(out)
}

/// Run the campaign: `runs` seeded runs from `base_seed` (or the one seed
/// `replay`), each run that did not promote followed by a fault-free next
/// incident. Prints one line per run, each violation with its seed, and the
/// summary line. Returns the number of violations.
pub async fn campaign(
    out: &Path,
    emulator: Guard,
    started: Instant,
    runs: usize,
    base_seed: u64,
    replay: Option<u64>,
) -> Result<usize> {
    let mut world = Campaign::start(out, emulator, started).await?;
    let seeds: Vec<u64> = match replay {
        Some(seed) => vec![seed],
        None => {
            let mut rng = Rng::new(base_seed);
            (0..runs).map(|_| rng.next()).collect()
        }
    };
    let (mut r, mut f, mut violations) = (0usize, 0usize, Vec::<String>::new());
    let mut fence_checks = 0usize;
    let mut losses = Vec::new();
    let mut queue: std::collections::VecDeque<(Draw, bool)> =
        seeds.iter().map(|&s| (Draw::of(s), false)).collect();
    while let Some((draw, follow_up)) = queue.pop_front() {
        if replay.is_none() && r >= runs {
            break;
        }
        let t = Instant::now();
        let outcome = world
            .run(&draw)
            .await
            .with_context(|| format!("run of seed {:016x}", draw.seed))?;
        r += 1;
        f += outcome.faults.len();
        say(
            started,
            format!(
                "run {r:>3} seed {:016x} {}{}: {} faults [{}] -> {} ({:.1} s){}",
                draw.seed,
                draw.scenario,
                if follow_up { " (next incident)" } else { "" },
                outcome.faults.len(),
                outcome.faults.join(", "),
                outcome.statuses.join("+"),
                t.elapsed().as_secs_f64(),
                if outcome.promoted { ", S promoted" } else { "" }
            ),
        );
        fence_checks += outcome.fenced_writes_checked;
        losses.extend(outcome.losses.iter().copied());
        for v in &outcome.violations {
            let line = format!(
                "VIOLATION seed {:016x} ({}{}): {v}\n  replay: HANDOVER_CAMPAIGN_REPLAY={:016x} make campaign",
                draw.seed,
                draw.scenario,
                if follow_up { ", the next incident" } else { "" },
                draw.seed
            );
            println!("{line}");
            violations.push(line);
        }
        if !follow_up && !outcome.promoted {
            queue.push_front((Draw::follow_up(draw.seed), true));
        }
    }
    std::fs::write(out.join("violations.txt"), violations.join("\n"))?;
    std::fs::write(
        out.join("calls.json"),
        serde_json::to_string(&crate::call_log().await)?,
    )?;
    say(
        started,
        format!(
            "{fence_checks} confirmed fences checked against P's database: {} writes committed by P's app in all",
            world.pdb.writes().await?
        ),
    );
    if !losses.is_empty() {
        let worst = losses.iter().map(|l| l.0).fold(0.0, f64::max);
        let gaps: Vec<f64> = losses.iter().map(|(lost, est)| est - lost).collect();
        let (lo, hi) = (
            gaps.iter().copied().fold(f64::MAX, f64::min),
            gaps.iter().copied().fold(f64::MIN, f64::max),
        );
        say(
            started,
            format!(
                "{} promotions measured against both disks: S lost up to {worst:.1} s of P's writes; estimate minus loss from {lo:+.1} to {hi:+.1} s",
                losses.len()
            ),
        );
    }
    println!(
        "fault campaign: {r} runs, {f} faults injected, {} invariant violations",
        violations.len()
    );
    Ok(violations.len())
}

/// Where the campaign writes its logs: `HANDOVER_CAMPAIGN_OUT`, or
/// `out/campaign` (several campaigns can run side by side, each with its own).
/// A relative path is taken from the current directory and made absolute:
/// PostgreSQL runs in its data directory and would not find its TLS files
/// by a relative name.
pub fn out_dir() -> PathBuf {
    let dir = std::env::var_os("HANDOVER_CAMPAIGN_OUT")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("out/campaign"));
    if dir.is_absolute() {
        dir
    } else {
        std::env::current_dir()
            .map(|cwd| cwd.join(&dir))
            .unwrap_or(dir)
    }
}
