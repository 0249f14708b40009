//! P's database, for real: its own PostgreSQL, reached through a gate that
//! behaves as P's security groups do, and P's app writing through one pooled
//! connection that stays open.
//!
//! AWS (VPC User Guide, "Security group connection tracking"): a security
//! group is checked when a connection is opened; removing the rule that
//! allowed it does not cut a tracked connection that is already open. So the
//! gate admits a new connection only while a group that lets P's app in is
//! attached to P (`active`, or still `removing`), and never cuts one. What
//! ends an open session is the engine restarting: the router's
//! RebootDBInstance ends every session on this server
//! (`POST /_handover/databases`).
//!
//! S's database is P's streaming replica ([`SDatabase`]): a physical copy
//! that replays P's WAL through the replication link, reads only, and is
//! promoted by the router when RDS finishes PromoteReadReplica. The link is a
//! relay that a partition of P stops carrying bytes through (as dropped
//! packets do: nothing is closed, the data just does not arrive), so the
//! rows P takes during a partition are exactly what S will not have: the
//! data loss, measured ([`loss`]).

use crate::postgres::Postgres;
use anyhow::{Context, Result};
use chrono::{DateTime, Utc};
use handover::aws::Aws;
use handover::plan::Plan;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// The group that lets P's app reach P's database (see `world::provision_databases`).
pub const P_APP_GROUP: &str = "sg-0app000000000000p";

/// P's database and P's app writing to it.
pub struct PDatabase {
    _pg: Postgres,
    /// The server's own port (what RDS's engine listens on; the gate's target).
    pub server_port: u16,
    /// The gate's port: what P's app dials (P's endpoint).
    pub gate_port: u16,
    /// The replication link's port: what S's replica dials.
    pub link_port: u16,
    dir: PathBuf,
    partitioned: Arc<AtomicBool>,
    password: String,
    admitted: Arc<AtomicBool>,
    /// Commits P's app made, and writes that failed.
    pub committed: Arc<AtomicU64>,
    /// Writes P's app tried that failed (refused, cut, or in error).
    pub failed: Arc<AtomicU64>,
    /// P's app goes on writing while set ([`PDatabase::stop_writer`]).
    writing: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    /// The world's pace, for the replicas built from P (fast unless set).
    pub pace: crate::pace::Pace,
}

impl PDatabase {
    /// Start P's PostgreSQL under `dir`, register it with the router as the
    /// database behind `db_instance_id`, open the gate and start P's app's writer.
    pub async fn start(
        dir: PathBuf,
        aws: &Aws,
        region: &str,
        db_instance_id: &str,
    ) -> Result<PDatabase> {
        // P's certificate names P's Region's endpoints only (as RDS's names
        // P's instance): TLS to S's name can never verify against P.
        let (pg, server_port, password) = Postgres::start_named(
            dir.clone(),
            Some(&format!("*.aaaaaaaaaa.{region}.rds.amazonaws.com")),
        )?;
        let (client, conn) = tokio_postgres::connect(
            &format!("host=127.0.0.1 port={server_port} user=handover password={password} dbname=handover"),
            tokio_postgres::NoTls,
        )
        .await
        .context("P's database")?;
        let task = tokio::spawn(conn);
        client
            .batch_execute(
                "CREATE TABLE orders (id bigserial PRIMARY KEY, at timestamptz NOT NULL DEFAULT clock_timestamp())",
            )
            .await?;
        drop(client);
        let _ = task.await;
        // With its directory and Region, the router can build a real
        // replica of it (CreateDBInstanceReadReplica at failback).
        crate::control(
            "databases",
            serde_json::json!({ db_instance_id: {"port": server_port, "dir": dir, "region": region} }),
        )
        .await;
        let mut tasks = Vec::new();
        let (gate_port, admitted, gate_tasks) =
            open_gate(aws, region, db_instance_id, P_APP_GROUP, server_port).await?;
        tasks.extend(gate_tasks);
        // The replication link: it carries bytes unless P is partitioned.
        let link = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let link_port = link.local_addr()?.port();
        let partitioned = Arc::new(AtomicBool::new(false));
        let cut = partitioned.clone();
        tasks.push(tokio::spawn(async move {
            while let Ok((inbound, _)) = link.accept().await {
                let cut = cut.clone();
                tokio::spawn(async move {
                    if let Ok(outbound) =
                        tokio::net::TcpStream::connect(("127.0.0.1", server_port)).await
                    {
                        let (ri, wi) = inbound.into_split();
                        let (ro, wo) = outbound.into_split();
                        tokio::join!(relay(ri, wo, cut.clone()), relay(ro, wi, cut));
                    }
                });
            }
        }));
        let p = PDatabase {
            _pg: pg,
            server_port,
            gate_port,
            link_port,
            dir,
            partitioned,
            password,
            admitted,
            committed: Arc::new(AtomicU64::new(0)),
            failed: Arc::new(AtomicU64::new(0)),
            writing: Arc::new(AtomicBool::new(true)),
            tasks,
            pace: crate::pace::Pace::Fast,
        };
        Ok(p)
    }

    /// P's app: one pooled connection through the gate, kept open, an order
    /// every 100 ms; when it breaks, the pool dials again.
    pub fn start_writer(&mut self) {
        let writing = self.writing.clone();
        writing.store(true, Ordering::SeqCst);
        self.tasks.push(app_writer(
            self.gate_port,
            &self.password,
            self.committed.clone(),
            self.failed.clone(),
            writing,
        ));
    }

    /// P's app stops writing (its last order is committed when this returns
    /// within 100 ms: the loop checks before each one).
    pub async fn stop_writer(&self) {
        self.writing.store(false, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(250)).await;
    }

    /// A session straight to P's server, not through the gate: an operator
    /// reading P's disk on purpose (a tunnel to the fenced instance).
    pub async fn disk_client(&self) -> Result<tokio_postgres::Client> {
        session(self.server_port, &self.password).await
    }

    /// Partition P (`true`) or heal it: the replication link stops carrying
    /// bytes, in both directions, until healed.
    pub fn partition(&self, cut: bool) {
        self.partitioned.store(cut, Ordering::SeqCst);
    }

    /// Is P partitioned now?
    pub fn partitioned(&self) -> bool {
        self.partitioned.load(Ordering::SeqCst)
    }

    /// (Re)build S's database under `dir` as a streaming replica of P through
    /// the link (on `port` when given: a rebuilt replica keeps its endpoint),
    /// and register it with the router as the database behind
    /// `db_instance_id`, promoted when RDS promotes that instance.
    pub async fn start_standby(
        &self,
        dir: PathBuf,
        site: &handover::plan::Site,
        port: Option<u16>,
    ) -> Result<SDatabase> {
        let guard = Postgres::adopt(dir.clone());
        let port = self.build_standby(dir, site, port).await?;
        Ok(SDatabase {
            _pg: guard,
            port,
            password: self.password.clone(),
        })
    }

    /// Rebuild `s` from P (after S was promoted): a fresh replica at the same endpoint.
    pub async fn rebuild_standby(&self, s: &SDatabase, site: &handover::plan::Site) -> Result<()> {
        self.build_standby(s._pg.dir().to_owned(), site, Some(s.port))
            .await
            .map(|_| ())
    }

    async fn build_standby(
        &self,
        dir: PathBuf,
        site: &handover::plan::Site,
        port: Option<u16>,
    ) -> Result<u16> {
        let script = crate::process::workspace_root().join("scripts/postgres.sh");
        let mut cmd = std::process::Command::new(script);
        cmd.arg("standby")
            .arg(&dir)
            .arg(self.link_port.to_string())
            .arg(&self.dir)
            .env(
                "PG_WAL_RECEIVER_TIMEOUT_MS",
                self.pace
                    .of(&crate::pace::WAL_RECEIVER_TIMEOUT)
                    .as_millis()
                    .to_string(),
            );
        if let Some(p) = port {
            cmd.arg(p.to_string());
        }
        let out = tokio::task::spawn_blocking(move || cmd.output())
            .await?
            .context("scripts/postgres.sh standby")?;
        anyhow::ensure!(
            out.status.success(),
            "S's replica did not start: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let port: u16 = String::from_utf8_lossy(&out.stdout).trim().parse()?;
        crate::control(
            "databases",
            serde_json::json!({ &site.db_instance_id: {"port": port, "promote": true, "dir": dir, "region": &site.region} }),
        )
        .await;
        Ok(port)
    }

    /// Does the gate admit new connections now?
    pub fn admits(&self) -> bool {
        self.admitted.load(Ordering::SeqCst)
    }

    async fn query_i64(&self, sql: &str, at: Option<DateTime<Utc>>) -> Result<i64> {
        // Straight to the server, not through the gate: this is the auditor
        // reading P's disk, not a client.
        let client = self.disk_client().await?;
        let row = match at {
            Some(t) => client.query_one(sql, &[&t]).await?,
            None => client.query_one(sql, &[]).await?,
        };
        Ok(row.get(0))
    }

    /// Orders P committed after `t`.
    pub async fn writes_after(&self, t: DateTime<Utc>) -> Result<i64> {
        self.query_i64("SELECT count(*) FROM orders WHERE at > $1", Some(t))
            .await
    }

    /// Orders P committed after `from` and before `to`.
    pub async fn writes_between(&self, from: DateTime<Utc>, to: DateTime<Utc>) -> Result<i64> {
        let row = self
            .disk_client()
            .await?
            .query_one(
                "SELECT count(*) FROM orders WHERE at > $1 AND at < $2",
                &[&from, &to],
            )
            .await?;
        Ok(row.get(0))
    }

    /// Orders P committed in all.
    pub async fn writes(&self) -> Result<i64> {
        self.query_i64("SELECT count(*) FROM orders", None).await
    }
}

/// An app's writer: one pooled connection to `port`, kept open, an order
/// every 100 ms while `writing`; when it breaks, the pool dials again.
pub fn app_writer(
    port: u16,
    password: &str,
    committed: Arc<AtomicU64>,
    failed: Arc<AtomicU64>,
    writing: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<()> {
    let dsn = format!(
        "host=127.0.0.1 port={port} user=handover password={password} dbname=handover connect_timeout=1"
    );
    tokio::spawn(async move {
        while writing.load(Ordering::SeqCst) {
            if let Ok((client, conn)) = tokio_postgres::connect(&dsn, tokio_postgres::NoTls).await {
                let task = tokio::spawn(conn);
                while writing.load(Ordering::SeqCst) {
                    match client
                        .execute("INSERT INTO orders DEFAULT VALUES", &[])
                        .await
                    {
                        Ok(_) => committed.fetch_add(1, Ordering::SeqCst),
                        Err(_) => {
                            failed.fetch_add(1, Ordering::SeqCst);
                            break;
                        }
                    };
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                task.abort();
            } else {
                failed.fetch_add(1, Ordering::SeqCst);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
}

/// A gate in front of the server on `server_port` that behaves as the
/// security groups of `db_instance_id` do: it admits a new connection only
/// while `group` is attached (`active`, or still `removing`), and never
/// cuts one (connection tracking). Its port, whether it admits now, and
/// its tasks (abort them to close it).
pub async fn open_gate(
    aws: &Aws,
    region: &str,
    db_instance_id: &str,
    group: &str,
    server_port: u16,
) -> Result<(u16, Arc<AtomicBool>, Vec<tokio::task::JoinHandle<()>>)> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let gate_port = listener.local_addr()?.port();
    let admitted = Arc::new(AtomicBool::new(true));
    let mut tasks = Vec::new();
    let open = admitted.clone();
    tasks.push(tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            if !open.load(Ordering::SeqCst) {
                drop(inbound); // no rule lets it in: the connection never completes
                continue;
            }
            tokio::spawn(async move {
                if let Ok(mut outbound) =
                    tokio::net::TcpStream::connect(("127.0.0.1", server_port)).await
                {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
            });
        }
    }));
    // The groups as RDS shows them.
    let rds = aws.rds(region).await;
    let (id, open, group) = (
        db_instance_id.to_owned(),
        admitted.clone(),
        group.to_owned(),
    );
    tasks.push(tokio::spawn(async move {
        loop {
            if let Ok(out) = rds
                .describe_db_instances()
                .db_instance_identifier(&id)
                .send()
                .await
                && let Some(d) = out.db_instances().first()
            {
                let lets_app_in = d.vpc_security_groups().iter().any(|g| {
                    g.vpc_security_group_id() == Some(group.as_str())
                        && matches!(g.status(), Some("active") | Some("removing"))
                });
                open.store(lets_app_in, Ordering::SeqCst);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }));
    Ok((gate_port, admitted, tasks))
}

/// Carry bytes from `from` to `to`, holding them while `cut` is set.
async fn relay(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    cut: Arc<AtomicBool>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        while cut.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}

/// S's database: P's streaming replica, stopped when dropped.
pub struct SDatabase {
    _pg: Postgres,
    /// Its port (S's instance endpoint; the canary's).
    pub port: u16,
    password: String,
}

impl SDatabase {
    /// The server scripts/postgres.sh runs under `dir` on `port` (one the
    /// router built: re-protection's replica), stopped when dropped.
    pub fn adopt(dir: PathBuf, port: u16, password: &str) -> SDatabase {
        SDatabase {
            _pg: Postgres::adopt(dir),
            port,
            password: password.to_owned(),
        }
    }

    /// The `handover` user's password (the same as P's: it replicates).
    pub fn password(&self) -> &str {
        &self.password
    }

    /// A session to S's database.
    pub async fn client(&self) -> Result<tokio_postgres::Client> {
        session(self.port, &self.password).await
    }

    /// ReplicaLag as RDS derives it for PostgreSQL: how far behind P's last
    /// replayed commit is, in seconds; `None` once S is promoted (RDS
    /// publishes no ReplicaLag for a standalone instance) or unreachable.
    pub async fn lag_s(&self) -> Option<f64> {
        let client = self.client().await.ok()?;
        let row = client
            .query_one(
                "SELECT CASE WHEN pg_is_in_recovery() THEN \
                 extract(epoch FROM clock_timestamp() - pg_last_xact_replay_timestamp())::float8 END",
                &[],
            )
            .await
            .ok()?;
        row.get::<_, Option<f64>>(0).map(|v| v.max(0.0))
    }

    /// Is S still a replica (in recovery)?
    pub async fn in_recovery(&self) -> Result<bool> {
        Ok(self
            .client()
            .await?
            .query_one("SELECT pg_is_in_recovery()", &[])
            .await?
            .get(0))
    }

    /// The newest order S has: its id and when P committed it.
    pub async fn newest_order(&self) -> Result<Option<(i64, DateTime<Utc>)>> {
        let row = self
            .client()
            .await?
            .query_opt("SELECT id, at FROM orders ORDER BY id DESC LIMIT 1", &[])
            .await?;
        Ok(row.map(|r| (r.get(0), r.get(1))))
    }
}

/// P's database with its app writing, and S's as its streaming replica,
/// under `out/pg-p` and `out/pg`, registered as the plan's two instances.
/// `database` is created on P before the copy (the canary's database).
/// S's replication keeps the timings of `pace`.
pub async fn pair(
    out: &std::path::Path,
    plan: &Plan,
    database: &str,
    pace: crate::pace::Pace,
) -> Result<(PDatabase, SDatabase)> {
    let aws = Aws::new();
    let mut p = PDatabase::start(
        out.join("pg-p"),
        &aws,
        &plan.regions.primary.region,
        &plan.regions.primary.db_instance_id,
    )
    .await?;
    p.pace = pace;
    crate::postgres::sql(
        p.server_port,
        &format!("CREATE DATABASE {database} OWNER handover"),
    )
    .await?;
    p.start_writer();
    let s = p
        .start_standby(out.join("pg"), &plan.regions.standby, None)
        .await?;
    Ok((p, s))
}

/// ReplicaLag samples of S every 2 s: what S's replica really lags
/// ([`SDatabase::lag_s`]), or the value in `forced` when it holds one (not
/// NaN), e.g. -1 for replication that RDS reports stopped.
pub fn publish_lag(
    s: &handover::plan::Site,
    db: Arc<SDatabase>,
    forced: Option<Arc<AtomicU64>>,
) -> tokio::task::JoinHandle<()> {
    let (region, id) = (s.region.clone(), s.db_instance_id.clone());
    tokio::spawn(async move {
        let aws = Aws::new();
        loop {
            let forced = forced
                .as_ref()
                .map(|f| f64::from_bits(f.load(Ordering::SeqCst)))
                .filter(|v| !v.is_nan());
            let value = match forced {
                Some(v) => Some(v),
                None => db.lag_s().await,
            };
            if let Some(v) = value {
                crate::world::put_replica_lag(&aws, &region, &id, v, Utc::now()).await;
            }
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
    })
}

/// What S never got: the orders P committed after the newest one S has, and
/// the time they span (from S's newest to P's newest), read from both disks.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Loss {
    /// Orders P committed that S does not have.
    pub rows: i64,
    /// Seconds from the newest order S has to the newest P committed (0 with none lost).
    pub span_s: f64,
}

/// Compare P's orders with S's (after S stopped replaying, i.e. promoted).
pub async fn loss(p: &PDatabase, s: &SDatabase) -> Result<Loss> {
    let (s_id, s_at) = s
        .newest_order()
        .await?
        .ok_or_else(|| anyhow::anyhow!("S has no order at all"))?;
    let row = p
        .disk_client()
        .await?
        .query_one(
            "SELECT count(*), max(at) FROM orders WHERE id > $1",
            &[&s_id],
        )
        .await?;
    let rows: i64 = row.get(0);
    let newest: Option<DateTime<Utc>> = row.get(1);
    Ok(Loss {
        rows,
        span_s: newest.map_or(0.0, |n| (n - s_at).num_milliseconds() as f64 / 1000.0),
    })
}

impl Drop for PDatabase {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// A session as the `handover` user to the server on `port` (its
/// connection runs until the client is dropped).
async fn session(port: u16, password: &str) -> Result<tokio_postgres::Client> {
    let (client, conn) = tokio_postgres::connect(
        &format!(
            "host=127.0.0.1 port={port} user=handover password={password} dbname=handover connect_timeout=2"
        ),
        tokio_postgres::NoTls,
    )
    .await?;
    tokio::spawn(conn);
    Ok(client)
}
