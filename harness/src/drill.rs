//! The drill: a whole failover on a local world, end to end. See `bin/drill.rs`.

use crate::app::{App, HANG};
use crate::blocks::collect_buttons;
use crate::lambdas::{Lambdas, definition};
use crate::pace::{self, Pace};
use crate::process::{Guard, say, workspace_root};
use crate::world::{
    deregister_all_targets, provision_databases, provision_dns, provision_target_group,
    put_db_secret,
};
use anyhow::{Context, Result, anyhow, bail};
use chrono::Utc;
use handover::aws::Aws;
use handover::plan::{Canary, Plan};
use handover::slack::message::{ACTION_APPROVE, ACTION_APPROVE_DATA_LOSS, ACTION_REJECT};
use handover::slack::stand_in::SlackStandIn;
use handover::store::Store;
use serde_json::{Value, json};
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod real_time;
mod roundtrip;

/// What the drill answers to the approval request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Click Approve after a short "human" delay.
    Approve,
    /// Click Reject.
    Reject,
    /// Do not answer.
    Timeout,
    /// Ask on the terminal.
    Interactive,
    /// No break: the operator starts a planned switchover with the real
    /// `handover switchover`, and it is approved.
    Switchover,
    /// The round trip: break P, fail over and approve; heal P; the operator
    /// runs `handover failback`, it is approved, P is primary again; then
    /// `handover reprotect` gives P its standby in S again.
    Roundtrip,
}

impl Decision {
    /// From `DRILL_DECISION` (default approve).
    pub fn from_env() -> Result<Self> {
        match std::env::var("DRILL_DECISION").unwrap_or_default().as_str() {
            "" | "approve" => Ok(Decision::Approve),
            "reject" => Ok(Decision::Reject),
            "timeout" => Ok(Decision::Timeout),
            "interactive" => Ok(Decision::Interactive),
            "switchover" => Ok(Decision::Switchover),
            "roundtrip" => Ok(Decision::Roundtrip),
            other => bail!(
                "DRILL_DECISION={other:?}: use approve, reject, timeout, interactive, switchover or roundtrip"
            ),
        }
    }
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Decision::Approve => "approve",
            Decision::Reject => "reject",
            Decision::Timeout => "timeout",
            Decision::Interactive => "interactive",
            Decision::Switchover => "switchover",
            Decision::Roundtrip => "roundtrip",
        })
    }
}

/// What breaks P in a drill that breaks it (`DRILL_INCIDENT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Incident {
    /// A network partition: P's app stops answering and replication to S
    /// stops, while P's app goes on writing to P's database inside.
    #[default]
    Partition,
    /// P's app is down and writes nothing; P's database stays up and S keeps
    /// replaying its stream. Nothing is lost, and the source is quiet.
    AppDown,
}

impl Incident {
    /// `DRILL_INCIDENT`'s value (unset or empty: partition).
    pub fn parse(value: &str) -> Result<Self> {
        match value {
            "" | "partition" => Ok(Incident::Partition),
            "app-down" => Ok(Incident::AppDown),
            other => bail!("DRILL_INCIDENT={other:?}: use partition or app-down"),
        }
    }
}

impl fmt::Display for Incident {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Incident::Partition => "partition",
            Incident::AppDown => "app-down",
        })
    }
}

/// How a drill's world is set up: its pace and what breaks P.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Options {
    /// How fast the world runs.
    pub pace: Pace,
    /// What breaks P.
    pub incident: Incident,
}

impl Options {
    /// From `HANDOVER_PACE`, `HANDOVER_SCALE` and `DRILL_INCIDENT`. A planned
    /// switchover breaks nothing, so it refuses an incident.
    pub fn from_env(decision: Decision) -> Result<Self> {
        let incident = std::env::var("DRILL_INCIDENT").unwrap_or_default();
        Options::parse(decision, Pace::from_env()?, &incident)
    }

    /// [`Options::from_env`]'s rules, on the values.
    pub fn parse(decision: Decision, pace: Pace, incident: &str) -> Result<Self> {
        if !incident.is_empty() && decision == Decision::Switchover {
            bail!("DRILL_INCIDENT applies to a drill that breaks P, not to a switchover");
        }
        Ok(Options {
            pace,
            incident: Incident::parse(incident)?,
        })
    }
}

#[cfg(test)]
#[path = "drill/options_tests.rs"]
mod options_tests;

/// How the run ended and what it produced.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    /// Terminal status.
    pub status: String,
    /// Error name, for failed runs.
    pub error: Option<String>,
    /// Cause, for failed runs.
    pub cause: Option<String>,
    /// Lines to print: the four numbers and where the report is.
    pub lines: Vec<String>,
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "\n=== Handover drill: {} {}",
            self.status,
            self.error.as_deref().unwrap_or("")
        )?;
        for l in &self.lines {
            writeln!(f, "{l}")?;
        }
        Ok(())
    }
}

/// The Slack signing secret the world stores for the slack function.
pub const SIGNING_SECRET: &str = "drill-signing-secret-0b1c2d3e4f";
const BOT_TOKEN: &str = "xoxb-drill-bot-token-5a6b7c8d";
const REGION: &str = "ap-northeast-1";

/// The running world. Dropping it stops everything it started.
pub struct Drill {
    /// How fast the world runs.
    pace: Pace,
    /// What breaks P.
    incident: Incident,
    /// When the drill broke P (none for a switchover).
    broken_at: std::sync::Mutex<Option<chrono::DateTime<Utc>>>,
    /// The environment the stack gives the functions (what they run with).
    env: Vec<(&'static str, String)>,
    out: PathBuf,
    started: Instant,
    _emulator: Guard,
    sdb: std::sync::Arc<crate::pdb::SDatabase>,
    pg_password: String,
    lambdas: Option<Lambdas>,
    slack: SlackStandIn,
    p_app: App,
    s_app: App,
    _front: crate::public::PublicFront,
    aws: Aws,
    plan: Plan,
    store: Store,
    state_machine: String,
    pdb: crate::pdb::PDatabase,
    /// The router's DNS answers for the public name, each change with its
    /// time (polled every [`DNS_WATCH`]).
    dns_log: DnsLog,
    /// The same for the writer name (a CNAME writer endpoint).
    writer_log: DnsLog,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    /// Where this leg's history and reports go (`out/`, or `out/failback/`
    /// for the round trip's way back).
    leg_dir: PathBuf,
    /// The run whose reports this leg fetches (`None`: every one).
    leg_run: Option<String>,
    /// Servers the router built (re-protection's replicas), stopped with the drill.
    built: Vec<crate::pdb::SDatabase>,
}

type DnsLog = std::sync::Arc<std::sync::Mutex<Vec<(chrono::DateTime<Utc>, Vec<String>)>>>;

/// How often the drill reads the router's DNS answer for its log.
const DNS_WATCH: Duration = Duration::from_millis(200);

/// Start the emulator (moto behind the router) and point this process at it.
/// Called before the async runtime starts, so setting the environment is safe.
pub fn start_emulator(out: &Path) -> Result<Guard> {
    std::fs::create_dir_all(out)?;
    let root = workspace_root();
    let ready = out.join("emulator.ready.json");
    let log = std::fs::File::create(out.join("emulator.log"))?;
    let child = Command::new(root.join(".venv/bin/python"))
        .arg(root.join("harness/py/handover_emulator.py"))
        .arg("--ready-file")
        .arg(&ready)
        .stdout(Stdio::from(log.try_clone()?))
        .stderr(Stdio::from(log))
        .stdin(Stdio::null())
        .spawn()
        .context("starting the emulator (run `make venv`)")?;
    let child = Guard(child);
    let t = Instant::now();
    while !ready.exists() {
        if t.elapsed() > Duration::from_secs(30) {
            bail!(
                "the emulator did not start in 30 s; see {}",
                out.join("emulator.log").display()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&ready)?)?;
    let endpoint = doc["endpoint"]
        .as_str()
        .ok_or_else(|| anyhow!("no endpoint in {}", ready.display()))?;
    // SAFETY: called from main before the runtime and any other thread exist.
    unsafe {
        std::env::set_var("AWS_ENDPOINT_URL", endpoint);
        std::env::set_var("HANDOVER_TEST_AWS_ENDPOINT", endpoint);
        std::env::set_var("AWS_ACCESS_KEY_ID", "test");
        std::env::set_var("AWS_SECRET_ACCESS_KEY", "test");
        std::env::set_var("AWS_REGION", REGION);
        std::env::remove_var("AWS_PROFILE");
    }
    Ok(child)
}

impl Drill {
    /// The environment the functions run with: the stack's, for this world.
    pub fn function_env(&self) -> &[(&'static str, String)] {
        &self.env
    }

    /// The plan the world was provisioned for.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// The world's Handover table.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The world's AWS clients (the emulator).
    pub fn aws(&self) -> &Aws {
        &self.aws
    }

    /// How many `response_url` updates the Slack stand-in has received.
    pub fn slack_updates(&self) -> usize {
        self.slack.responses().len()
    }

    /// A `response_url` of the world's Slack stand-in, as Slack hands one
    /// out with each click.
    pub fn response_url(&self, name: &str) -> String {
        self.slack.response_url(name)
    }

    /// Start everything and provision the world from `drill/plan.json`,
    /// its durations and the plan's timings at the options' pace.
    pub async fn start(
        out: &Path,
        emulator: Guard,
        started: Instant,
        options: Options,
    ) -> Result<Drill> {
        let Options { pace, incident } = options;
        say(started, format!("pace: {}", pace.describe()));
        let root = workspace_root();
        say(started, format!("emulator up at {}", crate::endpoint()));
        let slack = SlackStandIn::start().await?;
        let p_app = App::start(200).await;
        let s_app = App::start(200).await;
        s_app.set_writable(false);
        say(
            started,
            format!(
                "apps: P {}  S {} (S refuses writes until promoted); Slack stand-in {}",
                p_app.url,
                s_app.url,
                slack.api_base()
            ),
        );

        let aws = Aws::new();
        let mut plan: Plan =
            Plan::from_json(&std::fs::read_to_string(root.join("drill/plan.json"))?)?;
        pace.scale_plan(&mut plan);
        plan.regions.primary.endpoint = format!("{}/health", p_app.url);
        plan.regions.standby.endpoint = format!("{}/health", s_app.url);
        plan.dns.read_url = Some(format!("{}/health", s_app.url));
        provision_dns(&aws, &mut plan, "p-alb.ap-northeast-2.elb.amazonaws.com").await;
        // The public name as users meet it: a front that sends each GET
        // where Route 53 answers, to apps that say which Region served.
        p_app.set_served_by(&plan.regions.primary.region);
        s_app.set_served_by(&plan.regions.standby.region);
        let front = crate::public::PublicFront::start(
            &aws,
            &plan,
            (p_app.url.clone(), s_app.url.clone()),
            pace.of(&pace::RECORD_TTL),
        )
        .await;
        plan.dns.read_url = Some(format!("{}/health", front.url));
        plan.dns.served_by_header = Some("x-served-by".into());
        crate::world::provision_fence_group(&aws, &mut plan).await;
        // S's compute, scaled down but up: readiness compares it with the
        // plan's minimums.
        crate::stack::provision_capacity(&aws, &mut plan).await;
        provision_databases(&aws, &plan).await;
        // RDS and Route 53 take their time, as in AWS, at the drill's pace.
        crate::world::realistic_pair(&plan, pace).await;
        // P's database is real, and P's app writes to it through one pooled
        // connection that stays open (a security group does not cut it); S's
        // is its streaming replica, read-only until RDS promotes it.
        let (pdb, sdb) = crate::pdb::pair(out, &plan, "drill", pace).await?;
        let (pg_port, pg_password) = (sdb.port, sdb.password().to_owned());
        // The failback's canary and data check reach P's database where
        // P's endpoint answers (re-protection's replica takes that port).
        if let Some(fb) = plan.failback.as_mut() {
            fb.canary_port = Some(pdb.server_port);
        }
        say(
            started,
            format!(
                "databases: P's PostgreSQL on 127.0.0.1:{} with P's app writing an order every 100 ms through one open connection; S's on 127.0.0.1:{pg_port}, P's streaming replica (read-only until promoted) through a link a partition cuts",
                pdb.server_port
            ),
        );
        for site in [&mut plan.regions.primary, &mut plan.regions.standby] {
            site.target_group_arns = vec![provision_target_group(&aws, &site.region, 2).await];
        }
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
            ..
        } = &mut plan.canary
        {
            *port = pg_port;
            *secret_arn = put_db_secret(&aws, REGION, "handover", &pg_password).await;
            // TLS as in AWS: the CA that signed the database's certificate,
            // which names S's instance endpoint as moto's RDS reports it; the
            // canary dials 127.0.0.1 and verifies that name.
            // The bundle holds P's CA too, as RDS's global bundle covers
            // every Region: `handover rpo` verifies P's endpoint with it.
            // Each certificate names its own Region's endpoints only.
            let ca = std::fs::read_to_string(out.join("pg/tls/ca.pem"))
                .context("the drill database's CA")?
                + &std::fs::read_to_string(out.join("pg-p/tls/ca.pem"))
                    .context("P's database's CA")?;
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
        let table = "handover-drill";
        let ddb = aws.dynamodb(REGION).await;
        handover::store::create_table(&ddb, table).await?;
        let store = Store::new(ddb, table);
        store
            .init_primary(
                &plan.regions.primary.region,
                &plan.regions.primary.db_instance_id,
                Utc::now(),
            )
            .await?;
        let state_machine = aws
            .sfn(REGION)
            .await
            .create_state_machine()
            .name("handover-drill")
            .definition(definition(REGION))
            .role_arn("arn:aws:iam::123456789012:role/handover-states")
            .send()
            .await?
            .state_machine_arn;
        let plan_file = out.join("plan.json");
        std::fs::write(&plan_file, serde_json::to_string_pretty(&plan)?)?;
        say(
            started,
            format!(
                "provisioned: {} primary in {} with replica {} in {}, failover records, table, primary record (epoch 1), secrets, bucket, state machine",
                plan.regions.primary.db_instance_id,
                plan.regions.primary.region,
                plan.regions.standby.db_instance_id,
                plan.regions.standby.region
            ),
        );

        say(started, "starting the functions under cargo lambda watch");
        // The plan goes where an operator puts it (SSM), and the functions
        // get the environment the stack would give them.
        let plan_parameter = crate::world::put_plan_parameter(&aws, REGION, &plan).await;
        let operator_topic = crate::operator_topic(&aws, REGION).await;
        let roles = crate::stack::provision_failover_roles(&aws, &plan, table).await;
        let mut env = crate::world::stack_environment(
            &plan,
            table,
            &plan_parameter,
            &state_machine,
            &operator_topic,
            &roles,
            true,
        );
        env.push(("SLACK_API_BASE", slack.api_base()));
        // One drill runs the functions at TRACE (scripts/drills.sh), so the
        // log scan sees what lambda_runtime and the SDK would print there.
        if let Ok(level) = std::env::var("HANDOVER_DRILL_RUST_LOG") {
            env.push(("RUST_LOG", level));
        }
        let lambdas = Lambdas::start(&env).await;
        let mut drill = Drill {
            pace,
            incident,
            broken_at: Default::default(),
            env,
            out: out.to_owned(),
            started,
            _emulator: emulator,
            sdb: std::sync::Arc::new(sdb),
            pg_password,
            lambdas: Some(lambdas),
            slack,
            p_app,
            s_app,
            _front: front,
            aws,
            plan,
            store,
            state_machine,
            pdb,
            dns_log: Default::default(),
            writer_log: Default::default(),
            tasks: Vec::new(),
            leg_dir: out.to_owned(),
            leg_run: None,
            built: Vec::new(),
        };
        drill.background();
        Ok(drill)
    }

    /// Stand-ins that follow the world: Route 53 health from the apps' real
    /// health, ReplicaLag samples, and S's writes opening when moto shows it promoted.
    fn background(&mut self) {
        let (p_url, s_url) = (
            self.plan.regions.primary.endpoint.clone(),
            self.plan.regions.standby.endpoint.clone(),
        );
        let (p_hc, s_hc) = (
            self.plan.regions.primary.health_check_id.clone(),
            self.plan.regions.standby.health_check_id.clone(),
        );
        let detection = self.pace.of(&pace::HEALTH_CHECK_DETECTION);
        self.tasks.push(tokio::spawn(async move {
            let http = reqwest::Client::new();
            // Route 53 marks an endpoint unhealthy only after several failed
            // checks (interval x failure threshold, at the drill's pace), so
            // DNS moves to S some time after P fails.
            let mut p_failing_since: Option<Instant> = None;
            loop {
                let ok = |url: String| {
                    let http = http.clone();
                    async move {
                        http.get(url)
                            .timeout(Duration::from_millis(400))
                            .send()
                            .await
                            .is_ok_and(|r| r.status().is_success())
                    }
                };
                let (p, s) = tokio::join!(ok(p_url.clone()), ok(s_url.clone()));
                let p = if p {
                    p_failing_since = None;
                    true
                } else {
                    let since = *p_failing_since.get_or_insert_with(Instant::now);
                    since.elapsed() < detection
                };
                crate::control("health", json!({ &p_hc: p, &s_hc: s })).await;
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }));
        self.tasks.push(crate::pdb::publish_lag(
            &self.plan.regions.standby,
            self.sdb.clone(),
            None,
        ));
        // The router's DNS answers, as logs of changes: what the report's
        // read RTO (the public name) and write RTO (the writer name: users'
        // writes reach S once it names S) are checked against.
        let mut watch = |log: DnsLog, zone: String, name: String| {
            self.tasks.push(tokio::spawn(async move {
                let r53 = Aws::new().route53().await;
                loop {
                    if let Ok(a) = r53
                        .test_dns_answer()
                        .hosted_zone_id(&zone)
                        .record_name(&name)
                        .record_type(aws_sdk_route53::types::RrType::Cname)
                        .send()
                        .await
                    {
                        let answer = a.record_data().to_vec();
                        let mut log = log.lock().unwrap_or_else(|e| e.into_inner());
                        if log.last().is_none_or(|(_, last)| *last != answer) {
                            log.push((Utc::now(), answer));
                        }
                    }
                    tokio::time::sleep(DNS_WATCH).await;
                }
            }));
        };
        watch(
            self.dns_log.clone(),
            self.plan.dns.hosted_zone_id.clone(),
            self.plan.dns.record_name.clone(),
        );
        if let handover::plan::WriterEndpoint::Cname {
            hosted_zone_id,
            name,
            ..
        } = &self.plan.dns.writer
        {
            watch(
                self.writer_log.clone(),
                hosted_zone_id.clone(),
                name.clone(),
            );
        }
        // S's app takes writes once moto shows the replica promoted (the
        // router promotes S's database itself).
        let aws = Aws::new();
        let (s_region, s_db) = (
            self.plan.regions.standby.region.clone(),
            self.plan.regions.standby.db_instance_id.clone(),
        );
        let gate = self.s_app.write_gate();
        let (sdb, started) = (self.sdb.clone(), self.started);
        self.tasks.push(tokio::spawn(async move {
            let rds = aws.rds(&s_region).await;
            loop {
                let promoted = rds
                    .describe_db_instances()
                    .db_instance_identifier(&s_db)
                    .send()
                    .await
                    .ok()
                    .and_then(|o| o.db_instances().first().map(|d| d.read_replica_source_db_instance_identifier().is_none()));
                if promoted == Some(true) {
                    gate.store(true, std::sync::atomic::Ordering::SeqCst);
                    match sdb.in_recovery().await {
                        Ok(false) => say(started, "  (S is promoted in moto and its PostgreSQL left recovery: S's app and database now take writes)"),
                        Ok(true) => say(started, "  (S is promoted in moto but its PostgreSQL is still in recovery)"),
                        Err(e) => say(started, format!("  (S's database: {e:#})")),
                    }
                    return;
                }
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        }));
    }

    fn say(&self, msg: impl fmt::Display) {
        say(self.started, msg);
    }

    /// Invoke a function through the router, as moto and EventBridge would.
    async fn invoke(&self, function: &str, event: &Value) -> Result<Value> {
        crate::lambdas::invoke(function, event).await
    }

    /// A detect tick exactly as the template's schedule delivers it.
    fn tick(&self) -> Value {
        crate::triggers::scheduled_payload("DetectFunction", REGION, Utc::now())
    }

    /// What a scheduled readiness run left: `readiness/latest.*` and a
    /// dated copy in the report bucket, newer than `after` (an earlier
    /// run's), and `events` change events at the consumer's queue. Keeps
    /// `latest.md` beside the drill's other output. Returns the run's time.
    async fn readiness_left(
        &self,
        summary: &str,
        consumer: &crate::bus::BusConsumer,
        events: usize,
        after: Option<chrono::DateTime<Utc>>,
    ) -> Result<chrono::DateTime<Utc>> {
        use handover::report::sources::{ReportReader, S3Reports};
        let s3 = S3Reports::new(&self.aws, REGION).await;
        let bucket = &self.plan.report.bucket;
        let latest = s3
            .get(bucket, &handover::readiness::output::latest_json_key())
            .await?
            .ok_or_else(|| anyhow!("readiness left no readiness/latest.json in {bucket}"))?;
        let doc: handover::readiness::output::Document = serde_json::from_slice(&latest)?;
        anyhow::ensure!(
            doc.summary == summary,
            "readiness/latest.json says {:?}, the run {summary:?}",
            doc.summary
        );
        anyhow::ensure!(
            after.is_none_or(|a| doc.readiness.at > a),
            "readiness/latest.json is still the run of {after:?}: this run wrote nothing"
        );
        let dated = handover::readiness::output::history_stem(doc.readiness.at);
        for ext in ["json", "md"] {
            s3.get(bucket, &format!("{dated}.{ext}"))
                .await?
                .ok_or_else(|| anyhow!("readiness left no {dated}.{ext} in {bucket}"))?;
        }
        let md = s3
            .get(bucket, "readiness/latest.md")
            .await?
            .ok_or_else(|| anyhow!("readiness left no readiness/latest.md in {bucket}"))?;
        std::fs::write(self.out.join("readiness.md"), md)?;
        let got = consumer.events().await;
        anyhow::ensure!(
            got.len() == events,
            "{} readiness change events reached the rule's target, expected {events}: {got:?}",
            got.len()
        );
        if events > 0 {
            self.say(format!(
                "readiness left s3://{bucket}/readiness/latest.json, {dated}.json and .md, and {events} \"{}\" event at a rule's target",
                handover::readiness::output::EVENT_DETAIL_TYPE
            ));
        }
        Ok(doc.readiness.at)
    }

    /// Run the scenario.
    pub async fn run(&mut self, decision: Decision) -> Result<Summary> {
        let report = self.invoke("detect", &self.tick()).await?;
        self.say(format!(
            "detect (baseline): {}",
            report["outcome"].as_str().unwrap_or("?")
        ));
        anyhow::ensure!(
            report["outcome"] == "healthy",
            "P should be healthy before the break: {report}"
        );
        // An operator's consumer of readiness changes on the default bus.
        let consumer = crate::bus::BusConsumer::new(
            &self.aws,
            REGION,
            handover::readiness::output::EVENT_SOURCE,
            &self.plan.service,
        )
        .await;
        // Would a failover work? Readiness once, as its schedule delivers it.
        let ready = self
            .invoke(
                "readiness",
                &crate::triggers::scheduled_payload("ReadinessFunction", REGION, Utc::now()),
            )
            .await?;
        let summary = ready["summary"].as_str().unwrap_or("?").to_owned();
        self.say(format!(
            "{summary} (posted: {})",
            ready["slack"].as_str().unwrap_or("nothing")
        ));
        anyhow::ensure!(
            summary.starts_with("readiness: 0 fail"),
            "the drill world is not ready to fail over: {ready}"
        );
        let first = self.readiness_left(&summary, &consumer, 1, None).await?;
        // The same world again: the same verdicts post nothing.
        let posted = self.slack.messages().len();
        let again = self
            .invoke(
                "readiness",
                &crate::triggers::scheduled_payload("ReadinessFunction", REGION, Utc::now()),
            )
            .await?;
        anyhow::ensure!(
            again["changed"] == false && self.slack.messages().len() == posted,
            "an unchanged readiness result posted again: {again}"
        );
        self.readiness_left(&summary, &consumer, 0, Some(first))
            .await?;
        tokio::time::sleep(Duration::from_millis(1100)).await;
        let execution = if decision == Decision::Switchover {
            self.start_switchover().await?
        } else {
            self.break_p().await?
        };

        let follower = self.follow(&execution);
        let answer = self.answer(decision);
        let (end, answered) = tokio::join!(follower, answer);
        answered?;
        let (status, error, cause, token) = end?;

        self.say(format!(
            "execution ended: {status} {}",
            error.as_deref().unwrap_or("")
        ));
        self.save_history(&execution).await?;
        let mut summary = self
            .audit(&execution, &status, error, cause, decision)
            .await?;
        self.after_checks(decision, &summary).await?;
        // After `handover rpo`: the comparison shows the measured RPO.
        let table = self.comparison(decision).await?;
        let at = summary.lines.iter().position(|l| l == "Report:");
        let at = at.unwrap_or(summary.lines.len());
        summary.lines.splice(at..at, table);
        self.scan_logs(token.as_deref())?;
        if decision == Decision::Roundtrip {
            print!("{summary}");
            return self.failback_leg().await;
        }
        Ok(summary)
    }

    /// The planned switchover: P stays healthy (its app writing) and the
    /// operator runs the real `handover switchover`; its execution ARN.
    async fn start_switchover(&self) -> Result<String> {
        let plan_file = self.out.join("plan-switchover.json");
        std::fs::write(&plan_file, serde_json::to_string_pretty(&self.plan)?)?;
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| workspace_root().join("target"));
        let cli = target.join("debug/handover");
        self.say("SWITCHOVER: P is healthy (its app writing every 100 ms); the operator runs `handover switchover --yes --drill`");
        let mut cmd = Command::new(&cli);
        cmd.arg("switchover")
            .args(["--yes", "--drill", "--region", REGION])
            .args(["--table", self.store.table()])
            .arg("--plan-file")
            .arg(&plan_file)
            .args(["--state-machine", &self.state_machine])
            .stdin(Stdio::null());
        let out = tokio::task::spawn_blocking(move || cmd.output())
            .await?
            .with_context(|| format!("running {}", cli.display()))?;
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        anyhow::ensure!(
            out.status.success(),
            "handover switchover failed ({}): {stdout}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let execution = stdout
            .lines()
            .find_map(|l| l.strip_prefix("started: "))
            .map(|l| l.split_whitespace().next().unwrap_or(l).to_owned())
            .ok_or_else(|| anyhow!("handover switchover printed no execution: {stdout}"))?;
        self.say(format!("handover switchover: started {execution}"));
        Ok(execution)
    }

    /// Break P (a partition) and tick detect until it starts a run; its
    /// execution ARN.
    async fn break_p(&self) -> Result<String> {
        self.say(match self.incident {
            Incident::Partition => "BREAK P: a partition cuts P off: its app stops answering, its load balancer loses every target and replication to S stops; inside, P's database stays up with P's app still writing through an open connection (the writes S will not have; the split brain a fence exists for)",
            Incident::AppDown => "BREAK P: P's app goes down: it stops answering and writing, and its load balancer loses every target; P's database stays up and S keeps replaying its stream (nothing is lost; the source is quiet)",
        });
        *self.broken_at.lock().expect("the break's time") = Some(Utc::now());
        self.p_app.set_status(HANG);
        match self.incident {
            Incident::Partition => self.pdb.partition(true),
            Incident::AppDown => self.pdb.stop_writer().await,
        }
        let p = &self.plan.regions.primary;
        for tg in &p.target_group_arns {
            deregister_all_targets(&self.aws, &p.region, tg).await;
        }
        tokio::time::sleep(self.pace.of(&pace::DETECT_FIRST_TICK)).await;

        let mut execution = None;
        for _ in 0..10 {
            let r = self.invoke("detect", &self.tick()).await?;
            let outcome = r["outcome"].as_str().unwrap_or("?").to_owned();
            self.say(format!(
                "detect tick: {outcome} {}",
                r.get("consecutive")
                    .map(|c| format!("({c}/{})", self.plan.detection.failures_to_trigger))
                    .unwrap_or_default()
            ));
            if outcome == "started" {
                execution = r["execution_arn"].as_str().map(str::to_owned);
                break;
            }
            tokio::time::sleep(self.pace.of(&pace::DETECT_TICK)).await;
        }
        let execution = execution.ok_or_else(|| anyhow!("detect never started an execution"))?;
        self.say(format!("execution started: {execution}"));
        Ok(execution)
    }

    /// Answer the approval request as `decision` says.
    async fn answer(&self, decision: Decision) -> Result<()> {
        self.answer_from(decision, 0).await
    }

    /// Answer the first approval request among Slack's messages from
    /// index `from` on.
    async fn answer_from(&self, decision: Decision, from: usize) -> Result<()> {
        let t = Instant::now();
        let message = loop {
            // The question is the message with buttons (readiness posted
            // its first result before the break).
            if let Some(m) = self.slack.messages().into_iter().skip(from).find(|m| {
                m.body["blocks"]
                    .as_array()
                    .is_some_and(|b| b.iter().any(|x| x["type"] == "actions"))
            }) {
                break m;
            }
            if t.elapsed() > Duration::from_secs(120) {
                bail!("no approval message in Slack within 120 s");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        let mut buttons = Vec::new();
        collect_buttons(&message.body, &mut buttons);
        // The plan enables the explanation: the message must carry it (from
        // the router's Bedrock stand-in), marked advisory, under the evidence.
        let blocks = message.body["blocks"].to_string();
        anyhow::ensure!(
            blocks.contains("*AI explanation* _(advisory"),
            "the approval message has no AI explanation: {blocks}"
        );
        anyhow::ensure!(
            blocks.contains("DescribeTargetHealth"),
            "the approval message shows no target-group evidence: {blocks}"
        );
        anyhow::ensure!(
            blocks.contains("*Last readiness*\\n") && blocks.contains(" min ago: 0 fail"),
            "the approval message does not carry the readiness run before the break: {blocks}"
        );
        self.say(format!(
            "Slack: approval requested in {} ({} buttons)",
            message.body["channel"].as_str().unwrap_or("?"),
            buttons.len()
        ));
        let approve = buttons
            .iter()
            .find(|(a, _)| a == ACTION_APPROVE || a == ACTION_APPROVE_DATA_LOSS)
            .cloned();
        let reject = buttons.iter().find(|(a, _)| a == ACTION_REJECT).cloned();
        if decision == Decision::Switchover {
            anyhow::ensure!(
                blocks.contains("SWITCHOVER approval") && blocks.contains("Approve switchover"),
                "the approval message does not ask for a switchover: {blocks}"
            );
        }
        let choice = match decision {
            Decision::Approve | Decision::Switchover | Decision::Roundtrip => approve,
            Decision::Reject => reject,
            Decision::Timeout => {
                self.say(format!(
                    "nobody answers (waiting for the {} s approval timeout)",
                    self.plan.timings.approval_timeout_s
                ));
                return Ok(());
            }
            Decision::Interactive => {
                let yes = tokio::task::spawn_blocking(|| {
                    use std::io::Write;
                    print!("Approve the failover to S? [y/N] ");
                    let _ = std::io::stdout().flush();
                    let mut line = String::new();
                    let _ = std::io::stdin().read_line(&mut line);
                    line.trim().eq_ignore_ascii_case("y")
                })
                .await?;
                if yes { approve } else { reject }
            }
        };
        let (action, key) =
            choice.ok_or_else(|| anyhow!("the approval message has no such button"))?;
        if decision != Decision::Interactive {
            // A person reads the message.
            tokio::time::sleep(self.pace.of(&pace::DECISION)).await;
        }
        let user = if action == ACTION_REJECT {
            "U0ONCALL02"
        } else {
            "U0ONCALL01"
        };
        anyhow::ensure!(self.lambdas.is_some(), "functions stopped");
        // Delivered as the template's HTTP API route delivers it (payload 2.0,
        // base64 form body), signed exactly as Slack signs it.
        let (status, text) = crate::lambdas::slack_click(
            SIGNING_SECRET,
            user,
            &action,
            &key,
            &self.slack.response_url("drill"),
        )
        .await;
        anyhow::ensure!(
            (200..300).contains(&status),
            "the slack function answered {status}: {text}"
        );
        self.say(format!(
            "Slack: {user} clicked {action} (signed request, HTTP {status})"
        ));
        Ok(())
    }

    /// Print one line per state as the execution goes; return its end.
    async fn follow(
        &self,
        execution: &str,
    ) -> Result<(String, Option<String>, Option<String>, Option<String>)> {
        let sfn = self.aws.sfn(REGION).await;
        let mut seen = 0usize;
        let mut token = None;
        let deadline =
            Instant::now() + Duration::from_secs(self.plan.timings.approval_timeout_s + 240);
        loop {
            let h = sfn
                .get_execution_history()
                .execution_arn(execution)
                .max_results(1000)
                .send()
                .await?;
            for e in h.events().iter().skip(seen) {
                if let Some(d) = e.state_entered_event_details() {
                    self.say(format!("  state: {}", d.name()));
                }
                // The task token, to prove later that no log holds it.
                if let Some(p) = e.task_scheduled_event_details()
                    && let Ok(v) = serde_json::from_str::<Value>(p.parameters())
                    && let Some(t) = v["Payload"]["token"].as_str()
                {
                    token = Some(t.to_owned());
                }
            }
            seen = h.events().len();
            let d = sfn
                .describe_execution()
                .execution_arn(execution)
                .send()
                .await?;
            if d.status.as_str() != "RUNNING" {
                return Ok((d.status.as_str().to_owned(), d.error, d.cause, token));
            }
            if Instant::now() > deadline {
                bail!("the execution did not end in time");
            }
            tokio::time::sleep(Duration::from_millis(400)).await;
        }
    }
}

impl Drill {
    /// Keep the execution history as the API returned it (`out/history.json`):
    /// the raw GetExecutionHistory pages, for the report's tests and for people.
    async fn save_history(&self, execution: &str) -> Result<()> {
        let mut pages = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let mut body = json!({"executionArn": execution, "maxResults": 1000});
            if let Some(t) = &token {
                body["nextToken"] = json!(t);
            }
            let scope = format!("Credential=test/20261130/{REGION}/states/aws4_request");
            let page: Value = reqwest::Client::new()
                .post(crate::endpoint())
                .header("content-type", "application/x-amz-json-1.0")
                .header("x-amz-target", "AWSStepFunctions.GetExecutionHistory")
                .header(
                    "authorization",
                    format!("AWS4-HMAC-SHA256 {scope}, SignedHeaders=host, Signature=0"),
                )
                .json(&body)
                .send()
                .await?
                .json()
                .await?;
            token = page["nextToken"].as_str().map(str::to_owned);
            pages.push(page);
            if token.is_none() {
                break;
            }
        }
        std::fs::write(
            self.leg_dir.join("history.json"),
            serde_json::to_string_pretty(&pages)?,
        )?;
        // And every AWS call the world saw, with its time and caller
        // (`out/calls.json`): where a step's time went, call by call.
        std::fs::write(
            self.leg_dir.join("calls.json"),
            serde_json::to_string_pretty(&crate::call_log().await)?,
        )?;
        Ok(())
    }

    /// Deliver the status-change event to `audit`, fetch the report, summarise.
    async fn audit(
        &self,
        execution: &str,
        status: &str,
        error: Option<String>,
        cause: Option<String>,
        decision: Decision,
    ) -> Result<Summary> {
        let sfn = self.aws.sfn(REGION).await;
        let d = sfn
            .describe_execution()
            .execution_arn(execution)
            .send()
            .await?;
        let ms = |t: Option<&aws_sdk_sfn::primitives::DateTime>| t.and_then(|t| t.to_millis().ok());
        // The status change as the template's EventBridge rule delivers it
        // (shape: Step Functions developer guide, "Execution status change").
        let event = crate::triggers::rule_event(
            "AuditFunction",
            REGION,
            "aws.states",
            "Step Functions Execution Status Change",
            &[execution.to_owned()],
            json!({
                "executionArn": execution, "stateMachineArn": self.state_machine, "name": d.name.clone().unwrap_or_default(),
                "status": status, "startDate": ms(Some(&d.start_date)), "stopDate": ms(d.stop_date.as_ref()),
                "input": d.input, "inputDetails": {"included": true}, "output": d.output, "outputDetails": {"included": true},
                "error": error, "cause": cause,
            }),
            &[("Workflow", &self.state_machine)],
        );
        let outcome = self.invoke("audit", &event).await.context("audit")?;
        self.say(format!(
            "audit: {}",
            outcome.to_string().chars().take(300).collect::<String>()
        ));
        // Fetch the report files into out/.
        let (paths, report_json) = self.fetch_reports().await?;
        let lines: Vec<String> = paths.iter().map(|p| format!("  {}", p.display())).collect();
        let report = report_json.ok_or_else(|| {
            anyhow!(
                "audit stored no report.json in s3://{}/{}",
                self.plan.report.bucket,
                self.plan.report.prefix
            )
        })?;
        let report = self.with_later_measures(report).await?;
        let mut numbers = vec!["Four numbers (T0 = first failing probe):".to_string()];
        for key in ["read_rto", "write_rto", "conservative_rto", "rpo"] {
            let m = &report["numbers"][key];
            let value = m["value_s"]
                .as_f64()
                .map(|v| self.shown(v))
                .unwrap_or_else(|| "—".into());
            numbers.push(format!(
                "  {:<18} {:>8}  target {:>6}  {}",
                m["label"].as_str().unwrap_or(key),
                value,
                self.shown(m["target_s"].as_f64().unwrap_or_default()),
                m["status"].as_str().unwrap_or("?").to_uppercase()
            ));
        }
        // The readiness run before the break, as the report carries it.
        let readiness = report["summary"]["last_readiness"]
            .as_str()
            .ok_or_else(|| anyhow!("the report does not carry the last readiness"))?;
        numbers.push(format!("  last readiness: {readiness}"));
        // Read RTO as users lived it, with its resolution; and the window in
        // which users were on S that could not take their writes yet.
        numbers.push(format!(
            "  read RTO: {}",
            report["numbers"]["read_rto"]["how"].as_str().unwrap_or("?")
        ));
        if let Some(w) = report["durations"]
            .as_array()
            .and_then(|d| d.iter().find(|s| s["key"] == "write_unavailable"))
            && let Some(v) = w["value_s"].as_f64()
        {
            numbers.push(format!(
                "  write-unavailable window: {} ({})",
                fmt_secs(v),
                w["how"].as_str().unwrap_or("")
            ));
        }
        if decision == Decision::Switchover && status == "SUCCEEDED" {
            // RPO 0, measured by the catch-up, in the report's own words.
            let rpo = &report["numbers"]["rpo"];
            anyhow::ensure!(
                rpo["value_s"].as_f64() == Some(0.0)
                    && rpo["status"] == "pass"
                    && rpo["how"]
                        .as_str()
                        .is_some_and(|h| h.starts_with("0, measured")),
                "the switchover's report does not say RPO 0, measured: {rpo}"
            );
            numbers.push(format!("  RPO: {}", rpo["how"].as_str().unwrap_or("?")));
            for key in ["writes_stopped", "catch_up"] {
                let span = report["durations"]
                    .as_array()
                    .and_then(|d| d.iter().find(|s| s["key"] == key))
                    .ok_or_else(|| anyhow!("the switchover's report has no {key} span"))?;
                let v = span["value_s"]
                    .as_f64()
                    .ok_or_else(|| anyhow!("{key} was not measured: {span}"))?;
                numbers.push(format!(
                    "  {}: {} ({})",
                    span["label"].as_str().unwrap_or(key),
                    fmt_secs(v),
                    span["how"].as_str().unwrap_or("")
                ));
            }
        } else if status == "SUCCEEDED" {
            let (read, write) = (
                report["numbers"]["read_rto"]["value_s"].as_f64(),
                report["numbers"]["write_rto"]["value_s"].as_f64(),
            );
            anyhow::ensure!(
                matches!((read, write), (Some(r), Some(w)) if r < w),
                "read RTO {read:?} is not below write RTO {write:?}: Route 53 moved reads before promotion, and the report should show it"
            );
            numbers.push(self.against_the_router(&report).await?);
        }
        numbers.push("Report:".into());
        numbers.extend(lines);
        Ok(Summary {
            status: status.to_owned(),
            error: d.error.clone(),
            cause: d.cause.clone(),
            lines: numbers,
        })
    }

    /// Copy the report files from S3 into out/: their paths, and report.json.
    async fn fetch_reports(&self) -> Result<(Vec<PathBuf>, Option<Value>)> {
        let s3 = self.aws.s3(REGION).await;
        let listing = s3
            .list_objects_v2()
            .bucket(&self.plan.report.bucket)
            .prefix(&self.plan.report.prefix)
            .send()
            .await?;
        let (mut paths, mut report) = (Vec::new(), None);
        for obj in listing.contents() {
            let key = obj.key().unwrap_or_default();
            if let Some(run) = &self.leg_run
                && !key.contains(&format!("/{run}/"))
            {
                continue;
            }
            let name = key.rsplit('/').next().unwrap_or(key);
            let body = s3
                .get_object()
                .bucket(&self.plan.report.bucket)
                .key(key)
                .send()
                .await?
                .body
                .collect()
                .await?
                .into_bytes();
            let path = self.leg_dir.join(name);
            std::fs::write(&path, &body)?;
            if name == "report.json" {
                report = Some(serde_json::from_slice::<Value>(&body)?);
            }
            paths.push(path);
        }
        Ok((paths, report))
    }

    /// An operator measures what S never got with `handover rpo`, through
    /// a tunnel to the fenced P (P's server port here; TLS verifies P's RDS
    /// endpoint), and the rewritten report gives it next to the estimate.
    /// It must equal what the harness read from both disks by id.
    async fn measured_rpo(&self, loss: &crate::pdb::Loss) -> Result<()> {
        let cli = std::env::current_exe()?.with_file_name("handover");
        let mut cmd = std::process::Command::new(&cli);
        cmd.arg("rpo")
            .args(["--p-host", "127.0.0.1", "--p-port"])
            .arg(self.pdb.server_port.to_string())
            .args(["--s-host", "127.0.0.1", "--s-port"])
            .arg(self.sdb.port.to_string())
            .args([
                "--table",
                self.store.table(),
                "--region",
                REGION,
                "--plan-file",
            ])
            .arg(self.out.join("plan.json"))
            .env("AWS_ENDPOINT_URL", crate::endpoint())
            .env("AWS_ACCESS_KEY_ID", "test")
            .env("AWS_SECRET_ACCESS_KEY", "test");
        let out = tokio::task::spawn_blocking(move || cmd.output())
            .await?
            .with_context(|| format!("run {}", cli.display()))?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        anyhow::ensure!(
            out.status.success(),
            "handover rpo failed ({}): {}{}",
            out.status,
            stdout,
            String::from_utf8_lossy(&out.stderr)
        );
        // The rewritten report files replace the ones fetched at the end.
        let (_, report) = self.fetch_reports().await?;
        let report = report.ok_or_else(|| anyhow!("no report.json after `handover rpo`"))?;
        let m = &report["rpo_measured"];
        let (rows, span) = (m["lost_rows"].as_i64(), m["span_s"].as_f64());
        anyhow::ensure!(
            rows == Some(loss.rows) && span.is_some_and(|s| (s - loss.span_s).abs() < 0.001),
            "the report's measured RPO ({rows:?} rows, {span:?} s) is not what S never got ({} rows, {:.3} s)",
            loss.rows,
            loss.span_s
        );
        let how = report["numbers"]["rpo"]["how"].as_str().unwrap_or_default();
        anyhow::ensure!(
            how.starts_with("RPO measured: "),
            "the report's RPO does not give the measurement: {how}"
        );
        self.say(format!(
            "checked: `handover rpo` (P through a tunnel to its server, TLS verifying P's endpoint) measured what the disks show; the report now says: {}",
            how.split(". Measured at").next().unwrap_or(how)
        ));
        Ok(())
    }

    /// The report's write RTO minus read RTO against the router's own
    /// record: when its DNS answer moved to S, and the first canary row S's
    /// database holds. They agree within the read RTO's resolution (the gap
    /// between the observation that first read from S and the one before).
    async fn against_the_router(&self, report: &Value) -> Result<String> {
        let secs = |a: chrono::DateTime<Utc>, b: chrono::DateTime<Utc>| {
            (b - a).num_milliseconds() as f64 / 1000.0
        };
        let moved_at = self
            .dns_log
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .find(|(_, a)| a.contains(&self.plan.dns.standby_target))
            .map(|(t, _)| *t)
            .ok_or_else(|| anyhow!("the router's DNS never answered S"))?;
        let Canary::Postgres {
            database, table, ..
        } = &self.plan.canary
        else {
            bail!("the drill's canary is postgres");
        };
        let (client, conn) = tokio_postgres::connect(
            &format!(
                "host=127.0.0.1 port={} user=handover password={} dbname={database}",
                self.sdb.port, self.pg_password
            ),
            tokio_postgres::NoTls,
        )
        .await?;
        let conn = tokio::spawn(conn);
        let first_write: Option<chrono::DateTime<Utc>> = client
            .query_one(&format!("SELECT min(written_at) FROM {table}"), &[])
            .await?
            .get(0);
        conn.abort();
        let first_row = first_write.ok_or_else(|| anyhow!("S's database holds no canary row"))?;
        // Users write through the writer name: they reach S once it names S.
        let writer_moved = match &self.plan.dns.writer {
            handover::plan::WriterEndpoint::Cname { standby_target, .. } => self
                .writer_log
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .find(|(_, a)| {
                    a.iter()
                        .any(|v| v.trim_end_matches('.') == standby_target.trim_end_matches('.'))
                })
                .map(|(t, _)| *t),
            handover::plan::WriterEndpoint::SsmParameter { .. } => None,
        };
        let first_write = writer_moved.map_or(first_row, |w| w.max(first_row));
        let n = &report["numbers"];
        let (read, write) = (
            n["read_rto"]["value_s"].as_f64().unwrap_or_default(),
            n["write_rto"]["value_s"].as_f64().unwrap_or_default(),
        );
        let observations: Vec<handover::public::PublicObservation> =
            serde_json::from_value(report["observations"].clone()).unwrap_or_default();
        let t0: chrono::DateTime<Utc> = serde_json::from_value(n["read_rto"]["from_at"].clone())?;
        let first = observations
            .iter()
            .position(|o| o.at >= t0 && o.reads_from_s())
            .ok_or_else(|| anyhow!("the report has no observation reading from S"))?;
        let interval = match observations[..first].iter().rev().find(|o| o.at >= t0) {
            Some(before) => secs(before.at, observations[first].at),
            None => secs(t0, observations[first].at),
        };
        let (reported, router) = (write - read, secs(moved_at, first_write));
        anyhow::ensure!(
            (reported - router).abs() <= interval + 1.0,
            "the report puts {reported:.1} s between reads and writes on S, the router {router:.1} s (DNS moved at {moved_at}, first write on S's disk at {first_write}): more than one observation interval ({interval:.1} s) apart"
        );
        Ok(format!(
            "  against the router: DNS moved to S at {}; S's disk holds its first write at {}, the writer name named S from {}: users could write from {}, {router:.1} s after reads moved; the report says write RTO − read RTO = {reported:.1} s (read RTO's resolution {interval:.1} s)",
            moved_at.format("%H:%M:%S%.3f"),
            first_row.format("%H:%M:%S%.3f"),
            writer_moved.map_or_else(|| "?".to_owned(), |t| t.format("%H:%M:%S%.3f").to_string()),
            first_write.format("%H:%M:%S%.3f"),
        ))
    }

    /// What Route 53 answers for the public name now.
    async fn dns_answers(&self) -> Result<Vec<String>> {
        Ok(self
            .aws
            .route53()
            .await
            .test_dns_answer()
            .hosted_zone_id(&self.plan.dns.hosted_zone_id)
            .record_name(&self.plan.dns.record_name)
            .record_type(aws_sdk_route53::types::RrType::Cname)
            .send()
            .await?
            .record_data()
            .to_vec())
    }

    /// What must be true after the scenario.
    async fn after_checks(&self, decision: Decision, summary: &Summary) -> Result<()> {
        // Look at P without the injected fault: the checks read moto's state, not P's availability.
        crate::control(
            "faults",
            json!({ format!("rds:{}", self.plan.regions.primary.region): null }),
        )
        .await;
        let rec = self
            .store
            .primary()
            .await?
            .ok_or_else(|| anyhow!("primary record missing"))?;
        let lock = self.store.lock_state().await?;
        anyhow::ensure!(
            lock.as_ref().is_some_and(|l| l.holder.is_none()),
            "the lock was not released: {lock:?}"
        );
        let p = self.aws.rds(&self.plan.regions.primary.region).await;
        let p_db = p
            .describe_db_instances()
            .db_instance_identifier(&self.plan.regions.primary.db_instance_id)
            .send()
            .await?;
        let p_groups: Vec<String> = p_db
            .db_instances()
            .first()
            .map(|d| {
                d.vpc_security_groups()
                    .iter()
                    .filter_map(|g| g.vpc_security_group_id().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        match (decision, summary.status.as_str()) {
            (Decision::Switchover, _) => {
                anyhow::ensure!(
                    summary.status == "SUCCEEDED",
                    "the switchover did not succeed: {:?} {:?}",
                    summary.error,
                    summary.cause
                );
                anyhow::ensure!(
                    rec.region == self.plan.regions.standby.region && rec.epoch == 2,
                    "S is not primary in the table: {rec:?}"
                );
                let answers = self.dns_answers().await?;
                anyhow::ensure!(
                    answers.contains(&self.plan.dns.standby_target),
                    "DNS does not answer S: {answers:?}"
                );
                let history = std::fs::read_to_string(self.leg_dir.join("history.json"))?;
                let fenced_at = fence_confirmed_at(&history)
                    .ok_or_else(|| anyhow!("the history shows no confirmed fence"))?;
                let after = self.pdb.writes_after(fenced_at).await?;
                anyhow::ensure!(
                    after == 0,
                    "P accepted {after} writes after its fence was confirmed at {fenced_at}"
                );
                // P's app was writing up to the fence: the checks below
                // are about writes that happened.
                let last_10_s = self
                    .pdb
                    .writes_between(fenced_at - chrono::Duration::seconds(10), fenced_at)
                    .await?;
                anyhow::ensure!(
                    last_10_s > 0,
                    "P's app took no write in the 10 s before the fence: the check proves nothing"
                );
                // RPO 0 on both disks: S has every order P's app committed.
                let loss = crate::pdb::loss(&self.pdb, &self.sdb).await?;
                anyhow::ensure!(
                    loss.rows == 0,
                    "the switchover lost {} orders spanning {:.1} s",
                    loss.rows,
                    loss.span_s
                );
                self.say(format!(
                    "checked: S is primary (epoch {}), DNS answers {}, P took {} orders and none after the fence, S has every one of them (RPO 0 on both disks), lock released",
                    rec.epoch,
                    self.plan.dns.standby_target,
                    self.pdb.writes().await?
                ));
            }
            (Decision::Approve | Decision::Roundtrip, _) | (Decision::Interactive, "SUCCEEDED") => {
                anyhow::ensure!(
                    rec.region == self.plan.regions.standby.region && rec.epoch == 2,
                    "S is not primary in the table: {rec:?}"
                );
                let answers = self.dns_answers().await?;
                anyhow::ensure!(
                    answers.contains(&self.plan.dns.standby_target),
                    "DNS does not answer S: {answers:?}"
                );
                // Handover's lever holds: P's app answering again (its
                // health check green) does not send users back to a fenced P.
                self.p_app.set_status(200);
                tokio::time::sleep(Duration::from_millis(1500)).await;
                let again = self.dns_answers().await?;
                anyhow::ensure!(
                    again.contains(&self.plan.dns.standby_target),
                    "P answers again and DNS went back to it: {again:?}"
                );
                self.say("checked: P's app answers again and DNS stays on S (P's health check pinned: Disabled + Inverted)");
                // The canary dialled 127.0.0.1 and verified TLS against S's
                // endpoint as RDS reports it: the write reached S's instance.
                let s_endpoint = self
                    .aws
                    .rds(&self.plan.regions.standby.region)
                    .await
                    .describe_db_instances()
                    .db_instance_identifier(&self.plan.regions.standby.db_instance_id)
                    .send()
                    .await?
                    .db_instances()
                    .first()
                    .and_then(|d| d.endpoint())
                    .and_then(|e| e.address())
                    .map(str::to_owned)
                    .ok_or_else(|| anyhow!("RDS reports no endpoint for S"))?;
                let history = std::fs::read_to_string(self.leg_dir.join("history.json"))?;
                anyhow::ensure!(
                    history.contains(&format!("TLS certificate verified for {s_endpoint}")),
                    "the write canary did not verify TLS against S's endpoint {s_endpoint}"
                );
                self.say(format!("checked: S is primary (epoch {}), DNS answers {}, the canary's TLS named {s_endpoint}, P's DB groups {:?}, lock released", rec.epoch, self.plan.dns.standby_target, p_groups));
                // P's own database: its app's open session wrote until the
                // fence ended it, and nothing after.
                let fenced_at = fence_confirmed_at(&history).ok_or_else(|| {
                    anyhow!("the history shows no confirmed fence (P's database is alive: the fence must be confirmed)")
                })?;
                let before = self.pdb.writes().await?;
                let after = self.pdb.writes_after(fenced_at).await?;
                anyhow::ensure!(
                    after == 0,
                    "P accepted {after} writes after its fence was confirmed at {fenced_at}"
                );
                anyhow::ensure!(before > 0, "P's app never wrote: the check proves nothing");
                self.say(format!(
                    "checked: P's database took {before} writes from P's app, none after the fence confirmed at {fenced_at} (its open session ended by the reboot; the redial refused by the deny-all group)"
                ));
                // What S never got: the rows P took while partitioned, read
                // from both disks, against the estimate the run recorded.
                let loss = crate::pdb::loss(&self.pdb, &self.sdb).await?;
                let (estimate, sampled_at) = promotion_estimate(&history)
                    .ok_or_else(|| anyhow!("the history shows no promotion estimate"))?;
                let bound = estimate
                    + ((fenced_at - sampled_at).num_milliseconds() as f64 / 1000.0).max(0.0);
                anyhow::ensure!(
                    loss.span_s <= bound + 0.5,
                    "S lost {} orders spanning {:.1} s, more than the estimate allows ({estimate:.1} s sampled at {sampled_at}, at most {bound:.1} s by the fence)",
                    loss.rows,
                    loss.span_s
                );
                self.say(format!(
                    "checked: S never got {} orders P took ({}), spanning {:.1} s; the run estimated {estimate:.1} s (ReplicaLag sampled at {}), at most {bound:.1} s by the fence",
                    loss.rows,
                    self.incident,
                    loss.span_s,
                    sampled_at.format("%H:%M:%S")
                ));
                self.measured_rpo(&loss).await?;
            }
            _ => {
                anyhow::ensure!(
                    rec.region == self.plan.regions.primary.region && rec.epoch == 1,
                    "something was promoted: {rec:?}"
                );
                anyhow::ensure!(
                    !p_groups.contains(&self.plan.regions.primary.fence_security_group_id),
                    "P was fenced"
                );
                self.say("checked: nothing promoted, P not fenced, lock released");
            }
        }
        Ok(())
    }

    /// No secret or task token in any log of the drill.
    fn scan_logs(&self, token: Option<&str>) -> Result<()> {
        let mut secrets: Vec<(&str, String)> = vec![
            ("the Slack signing secret", SIGNING_SECRET.to_owned()),
            ("the Slack bot token", BOT_TOKEN.to_owned()),
            ("the DB password", self.pg_password.clone()),
        ];
        if let Some(t) = token {
            secrets.push(("a task token", t.to_owned()));
        }
        // Whoever holds a response_url can post into the channel.
        secrets.push(("the Slack response_url", self.slack.response_url("drill")));
        let mut logs = vec![(
            "functions",
            self.lambdas
                .as_ref()
                .map(Lambdas::output)
                .unwrap_or_default(),
        )];
        logs.push((
            "emulator",
            std::fs::read_to_string(self.out.join("emulator.log")).unwrap_or_default(),
        ));
        // A level that never reached the functions would leave nothing to
        // scan: run at TRACE, their log must hold TRACE lines.
        if std::env::var("HANDOVER_DRILL_RUST_LOG").is_ok_and(|l| l == "trace") {
            anyhow::ensure!(
                logs[0].1.contains("\"level\":\"TRACE\""),
                "the functions ran at RUST_LOG=trace, but their log holds no TRACE line: the level did not reach them"
            );
        }
        for (what, secret) in &secrets {
            for (name, text) in &logs {
                anyhow::ensure!(
                    !text.contains(secret.as_str()),
                    "{what} appears in the {name} log"
                );
            }
        }
        std::fs::write(self.out.join("functions.log"), &logs[0].1)?;
        self.say(format!(
            "log scan: no secret or task token in {} log lines",
            logs.iter().map(|(_, t)| t.lines().count()).sum::<usize>()
        ));
        Ok(())
    }
}

impl Drop for Drill {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
        if let Some(l) = self.lambdas.take() {
            let _ = std::fs::write(self.out.join("functions.log"), l.output());
        }
        say(self.started, "stopping everything the drill started");
    }
}

/// When the fence of a saved history (`history.json`: GetExecutionHistory
/// pages) was confirmed: the fence task's result, `outcome: confirmed`.
pub fn fence_confirmed_at(history: &str) -> Option<chrono::DateTime<Utc>> {
    task_results(history)
        .find(|v| v["outcome"] == "confirmed" && v.get("fence_security_group").is_some())
        .and_then(|v| serde_json::from_value(v["fenced_at"].clone()).ok())
}

/// The RPO a saved history's promotion recorded: the ReplicaLag estimate
/// (`rpo_s`) and when that sample was taken (`lag_sampled_at`).
pub fn promotion_estimate(history: &str) -> Option<(f64, chrono::DateTime<Utc>)> {
    task_results(history)
        .filter_map(|v| {
            Some((
                v.get("rpo_s")?.as_f64()?,
                serde_json::from_value(v.get("lag_sampled_at")?.clone()).ok()?,
            ))
        })
        .last()
}

/// Every task result (Lambda output) in a saved history.
fn task_results(history: &str) -> impl Iterator<Item = Value> {
    let pages: Vec<Value> = serde_json::from_str(history).unwrap_or_default();
    pages
        .into_iter()
        .flat_map(|p| p["events"].as_array().cloned().unwrap_or_default())
        .filter_map(|e| {
            e["lambdaFunctionSucceededEventDetails"]["output"]
                .as_str()
                .and_then(|o| serde_json::from_str::<Value>(o).ok())
        })
}

fn fmt_secs(s: f64) -> String {
    let s = s.round() as i64;
    if s.abs() >= 60 {
        format!("{}:{:02}", s / 60, (s % 60).abs())
    } else {
        format!("{s} s")
    }
}
