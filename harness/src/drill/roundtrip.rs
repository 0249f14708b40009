//! The round trip's way back (`DRILL_DECISION=roundtrip`): after the
//! failover leg, P heals; users go on writing in S; the operator runs the
//! real `handover failback`, which re-protects P (the router builds a real
//! PostgreSQL replica of S's database at P's endpoint), compares the data
//! and starts the switch back; it is approved in Slack; P is primary again
//! at epoch 3 with every order S took; `handover reprotect` then gives P a
//! standby in S again, and detect watches P.

use super::{Decision, Drill, REGION, Summary, fmt_secs};
use crate::pdb::{SDatabase, app_writer, open_gate, publish_lag};
use anyhow::{Context, Result, anyhow, bail};
use serde_json::{Value, json};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// The group that lets S's app reach S's database (see `world::provision_databases`).
const S_APP_GROUP: &str = "sg-0app000000000000s";

impl Drill {
    /// Run `handover <args>` with the drill's table, Region and plan file;
    /// its stdout, or an error with both outputs.
    async fn cli(&self, args: &[&str], plan_file: &std::path::Path) -> Result<String> {
        let cli = std::env::current_exe()?.with_file_name("handover");
        let mut cmd = Command::new(&cli);
        cmd.args(args)
            .args(["--region", REGION, "--table", self.store.table()])
            .arg("--plan-file")
            .arg(plan_file)
            .stdin(Stdio::null());
        let out = tokio::task::spawn_blocking(move || cmd.output())
            .await?
            .with_context(|| format!("running {}", cli.display()))?;
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        );
        for line in stderr.lines() {
            self.say(format!("  | {line}"));
        }
        anyhow::ensure!(
            out.status.success(),
            "handover {} failed ({}): {stdout}{stderr}",
            args.first().copied().unwrap_or(""),
            out.status
        );
        Ok(stdout)
    }

    /// The way back (see the module docs).
    pub(super) async fn failback_leg(&mut self) -> Result<Summary> {
        let (p, s) = (
            self.plan.regions.primary.clone(),
            self.plan.regions.standby.clone(),
        );
        let fb = self
            .plan
            .failback
            .clone()
            .ok_or_else(|| anyhow!("the drill plan has no failback section"))?;
        self.say("HEAL P: the partition ends; P's app and load balancer answer again. P's old database is still fenced, and holds the orders S never got");
        self.pdb.partition(false);
        self.pdb.stop_writer().await;
        self.p_app.set_status(200);
        for tg in &p.target_group_arns {
            crate::world::register_targets(&self.aws, &p.region, tg, 2).await;
        }
        // Users on S: S's app writes orders through a gate that honours S's
        // security groups, as P's does (the switch back's fence stops them).
        let (s_gate, _, gate_tasks) = open_gate(
            &self.aws,
            &s.region,
            &s.db_instance_id,
            S_APP_GROUP,
            self.sdb.port,
        )
        .await?;
        self.tasks.extend(gate_tasks);
        let (s_committed, s_failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let s_writing = Arc::new(AtomicBool::new(true));
        self.tasks.push(app_writer(
            s_gate,
            &self.pg_password,
            s_committed.clone(),
            s_failed.clone(),
            s_writing.clone(),
        ));
        // ReplicaLag of P's new replica, as RDS publishes it, once it exists
        // (at P's endpoint: re-protection gives it P's identifier).
        let p_replica = Arc::new(SDatabase::adopt(
            self.out.join(format!("pg-{}", p.db_instance_id)),
            self.pdb.server_port,
            &self.pg_password,
        ));
        self.tasks.push(publish_lag(&p, p_replica.clone(), None));
        tokio::time::sleep(Duration::from_secs(2)).await;
        anyhow::ensure!(
            s_committed.load(Ordering::SeqCst) > 0,
            "S's app took no order: the failback would move nothing worth checking"
        );
        let before = self
            .store
            .primary()
            .await?
            .ok_or_else(|| anyhow!("primary record missing"))?;
        let writer_before = before
            .switch_previous
            .get(&handover::plan::writer_lever(&self.plan.dns.writer))
            .cloned()
            .flatten()
            .ok_or_else(|| anyhow!("the failover recorded no writer value: {before:?}"))?;
        // The failover's cooldown holds every run off, a failback too.
        if let Some(until) = self
            .store
            .lock_state()
            .await?
            .and_then(|l| l.cooldown_until)
            && let Ok(wait) = (until - chrono::Utc::now()).to_std()
        {
            self.say(format!(
                "waiting {:.0} s for the cooldown the failover left (until {until})",
                wait.as_secs_f64()
            ));
            tokio::time::sleep(wait + Duration::from_millis(200)).await;
        }
        let plan_file = self.out.join("plan-failback.json");
        std::fs::write(&plan_file, serde_json::to_string_pretty(&self.plan)?)?;
        let messages = self.slack.messages().len();
        self.say(format!(
            "FAILBACK: users write in S ({} orders so far); the operator runs `handover failback --yes --drill`",
            s_committed.load(Ordering::SeqCst)
        ));
        let started = std::time::Instant::now();
        let stdout = self
            .cli(
                &[
                    "failback",
                    "--yes",
                    "--drill",
                    "--state-machine",
                    &self.state_machine,
                ],
                &plan_file,
            )
            .await?;
        let execution = stdout
            .lines()
            .find_map(|l| l.strip_prefix("started: "))
            .map(|l| l.split_whitespace().next().unwrap_or(l).to_owned())
            .ok_or_else(|| anyhow!("handover failback printed no execution: {stdout}"))?;
        self.say(format!(
            "handover failback: re-protected and checked in {:.1} s; started {execution}",
            started.elapsed().as_secs_f64()
        ));
        let name = execution
            .rsplit(':')
            .next()
            .unwrap_or(&execution)
            .to_owned();
        self.leg_dir = self.out.join("failback");
        std::fs::create_dir_all(&self.leg_dir)?;
        self.leg_run = Some(name);

        let mut answered = None;
        let end = {
            let follower = self.follow(&execution);
            let answer = self.answer_from(Decision::Switchover, messages);
            tokio::pin!(follower, answer);
            // A run that ends before anyone is asked (readiness refused it)
            // ends the wait for the question too.
            loop {
                tokio::select! {
                    e = &mut follower => break e,
                    a = &mut answer, if answered.is_none() => answered = Some(a),
                }
            }
        };
        let (status, error, cause, token) = end?;
        if status != "SUCCEEDED" {
            self.save_history(&execution).await?;
            bail!(
                "the failback ended {status} {error:?}: {cause:?} (history in {})",
                self.leg_dir.display()
            );
        }
        answered.unwrap_or(Ok(()))?;
        self.say(format!(
            "failback execution ended: {status} {}",
            error.as_deref().unwrap_or("")
        ));
        s_writing.store(false, Ordering::SeqCst);
        self.save_history(&execution).await?;
        // The switch back is a planned switchover in the reversed plan: its
        // report must say RPO 0, measured, with the writes-stopped window.
        let mut summary = self
            .audit(&execution, &status, error, cause, Decision::Switchover)
            .await?;
        anyhow::ensure!(
            status == "SUCCEEDED",
            "the failback did not succeed: {:?} {:?}",
            summary.error,
            summary.cause
        );
        let report: Value =
            serde_json::from_slice(&std::fs::read(self.leg_dir.join("report.json"))?)?;
        let reprotect_s = report["failback_run"]["reprotect_s"]
            .as_f64()
            .ok_or_else(|| {
                anyhow!(
                    "the failback's report has no re-protect time: {}",
                    report["failback_run"]
                )
            })?;
        anyhow::ensure!(
            report["summary"]["mode"] == "drill failback",
            "the failback's report is not a failback's: {}",
            report["summary"]["mode"]
        );
        summary.lines.insert(
            0,
            format!(
                "  re-protect: {} ({})",
                fmt_secs(reprotect_s),
                report["failback_run"]["reprotect"]["replica_id"]
            ),
        );
        self.failback_checks(&writer_before, &fb, &s_committed)
            .await?;
        // Users are back on P: P's app writes again, through its endpoint,
        // into the promoted replica.
        self.pdb.start_writer();
        self.scan_logs(token.as_deref())?;
        self.reprotect_s(&plan_file).await?;
        Ok(summary)
    }

    /// What a completed failback leaves (see the module docs).
    async fn failback_checks(
        &self,
        writer_before: &str,
        fb: &handover::plan::FailbackPolicy,
        s_committed: &AtomicU64,
    ) -> Result<()> {
        let (p, s) = (&self.plan.regions.primary, &self.plan.regions.standby);
        let rec = self
            .store
            .primary()
            .await?
            .ok_or_else(|| anyhow!("primary record missing"))?;
        anyhow::ensure!(
            rec.region == p.region && rec.db_instance_id == p.db_instance_id && rec.epoch == 3,
            "P is not primary at epoch 3: {rec:?}"
        );
        let lock = self.store.lock_state().await?;
        anyhow::ensure!(
            lock.as_ref().is_some_and(|l| l.holder.is_none()),
            "the lock was not released: {lock:?}"
        );
        let answers = self.dns_answers().await?;
        anyhow::ensure!(
            answers.contains(&fb.primary_target),
            "DNS does not answer P's target {}: {answers:?}",
            fb.primary_target
        );
        if let handover::plan::WriterEndpoint::Cname {
            hosted_zone_id,
            name,
            ..
        } = &self.plan.dns.writer
        {
            let writer = self
                .aws
                .route53()
                .await
                .test_dns_answer()
                .hosted_zone_id(hosted_zone_id)
                .record_name(name)
                .record_type(aws_sdk_route53::types::RrType::Cname)
                .send()
                .await?
                .record_data()
                .to_vec();
            anyhow::ensure!(
                writer
                    .iter()
                    .any(|w| w.trim_end_matches('.') == writer_before.trim_end_matches('.')),
                "the writer endpoint names {writer:?}, not its value before the failover ({writer_before})"
            );
        }
        // P's database is the new primary, out of recovery, and has every
        // order S's app committed, and the canary row the failover wrote in S
        // (read at P's endpoint, where the promoted replica answers).
        let p_client = self.pdb.disk_client().await?;
        let in_recovery: bool = p_client
            .query_one("SELECT pg_is_in_recovery()", &[])
            .await?
            .get(0);
        anyhow::ensure!(
            !in_recovery,
            "P's database is still in recovery after the failback"
        );
        let s_orders: i64 = self
            .sdb
            .client()
            .await?
            .query_one("SELECT count(*) FROM orders", &[])
            .await?
            .get(0);
        let p_orders: i64 = p_client
            .query_one("SELECT count(*) FROM orders", &[])
            .await?
            .get(0);
        anyhow::ensure!(
            p_orders >= s_orders,
            "P has {p_orders} orders, S {s_orders}: the failback lost S's writes"
        );
        let missing: i64 = {
            let s_ids: Vec<i64> = self
                .sdb
                .client()
                .await?
                .query("SELECT id FROM orders ORDER BY id", &[])
                .await?
                .iter()
                .map(|r| r.get(0))
                .collect();
            let row = p_client
                .query_one(
                    "SELECT count(*) FROM unnest($1::bigint[]) AS s(id) WHERE NOT EXISTS (SELECT 1 FROM orders o WHERE o.id = s.id)",
                    &[&s_ids],
                )
                .await?;
            row.get(0)
        };
        anyhow::ensure!(missing == 0, "{missing} of S's orders are not on P");
        let canary = {
            let (table, password) = match &self.plan.canary {
                handover::plan::Canary::Postgres { table, .. } => {
                    (table.clone(), &self.pg_password)
                }
                handover::plan::Canary::Http { .. } => bail!("the drill's canary is postgres"),
            };
            let (client, conn) = tokio_postgres::connect(
                &format!(
                    "host=127.0.0.1 port={} user=handover password={password} dbname=drill",
                    self.pdb.server_port
                ),
                tokio_postgres::NoTls,
            )
            .await?;
            let task = tokio::spawn(conn);
            let rows: i64 = client
                .query_one(
                    &format!("SELECT count(*) FROM {table} WHERE incident NOT LIKE '%failback%'"),
                    &[],
                )
                .await?
                .get(0);
            drop(client);
            task.abort();
            rows
        };
        anyhow::ensure!(
            canary > 0,
            "the canary row the failover wrote in S is not on P"
        );
        // S is fenced (the switch back's fence), and P's old instance is kept.
        let s_groups: Vec<String> = self
            .aws
            .rds(&s.region)
            .await
            .describe_db_instances()
            .db_instance_identifier(&s.db_instance_id)
            .send()
            .await?
            .db_instances()
            .first()
            .map(|d| {
                d.vpc_security_groups()
                    .iter()
                    .filter_map(|g| g.vpc_security_group_id().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        anyhow::ensure!(
            s_groups.contains(&s.fence_security_group_id),
            "S is not fenced after the switch back: {s_groups:?}"
        );
        let retired = format!("{}-retired-e2", p.db_instance_id);
        self.aws
            .rds(&p.region)
            .await
            .describe_db_instances()
            .db_instance_identifier(&retired)
            .send()
            .await
            .with_context(|| format!("P's old instance {retired} is gone"))?;
        self.say(format!(
            "checked: P is primary again (epoch {}), DNS answers {}, the writer names {writer_before} again, P has all {s_orders} orders S had ({} taken by S's app in S) and the failover's canary row, S is fenced, P's old instance kept as {retired}, lock released",
            rec.epoch,
            fb.primary_target,
            s_committed.load(Ordering::SeqCst)
        ));
        Ok(())
    }

    /// `handover reprotect`: S becomes P's replica again, and detect
    /// watches P with S as its standby.
    async fn reprotect_s(&mut self, plan_file: &std::path::Path) -> Result<()> {
        let s = self.plan.regions.standby.clone();
        self.say("REPROTECT: the operator runs `handover reprotect --yes`: S's old instance (the primary before) is renamed and a replica of P takes S's identifier");
        // The replica the router builds at S's endpoint stops with the
        // drill, whatever happens to the command.
        self.built.push(SDatabase::adopt(
            self.out.join(format!("pg-{}", s.db_instance_id)),
            self.sdb.port,
            &self.pg_password,
        ));
        let out = self.cli(&["reprotect", "--yes"], plan_file).await?;
        self.say(format!(
            "handover reprotect: {}",
            out.lines().last().unwrap_or("")
        ));
        anyhow::ensure!(
            self.sdb.in_recovery().await?,
            "S's database at S's endpoint is not a replica after `handover reprotect`"
        );
        let d = self
            .aws
            .rds(&s.region)
            .await
            .describe_db_instances()
            .db_instance_identifier(&s.db_instance_id)
            .send()
            .await?;
        let source = d
            .db_instances()
            .first()
            .and_then(|d| d.read_replica_source_db_instance_identifier())
            .map(str::to_owned);
        anyhow::ensure!(
            source.as_deref().is_some_and(
                |src| src.ends_with(&format!(":{}", self.plan.regions.primary.db_instance_id))
            ),
            "S's instance is not a replica of P: source {source:?}"
        );
        let tick = self.invoke("detect", &self.tick()).await?;
        anyhow::ensure!(
            tick["outcome"] == "healthy"
                && tick["region"] == json!(self.plan.regions.primary.region),
            "detect does not watch a healthy P after the round trip: {tick}"
        );
        self.say(format!(
            "checked: S ({}) is P's replica again and in recovery; detect watches P: {}",
            s.db_instance_id, tick
        ));
        Ok(())
    }
}
