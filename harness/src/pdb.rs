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

use crate::drill::Postgres;
use anyhow::{Context, Result};
use chrono::{DateTime, Utc};
use handover::aws::Aws;
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
    password: String,
    admitted: Arc<AtomicBool>,
    /// Commits P's app made, and writes that failed.
    pub committed: Arc<AtomicU64>,
    /// Writes P's app tried that failed (refused, cut, or in error).
    pub failed: Arc<AtomicU64>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
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
        let (pg, server_port, password) = Postgres::start(dir)?;
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
        crate::control(
            "databases",
            serde_json::json!({ db_instance_id: {"port": server_port} }),
        )
        .await;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let gate_port = listener.local_addr()?.port();
        let admitted = Arc::new(AtomicBool::new(true));
        let mut tasks = Vec::new();
        // The gate: admit by P's groups at connect time, then just carry bytes.
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
        // P's groups as RDS shows them.
        let rds = aws.rds(region).await;
        let (id, open) = (db_instance_id.to_owned(), admitted.clone());
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
                        g.vpc_security_group_id() == Some(P_APP_GROUP)
                            && matches!(g.status(), Some("active") | Some("removing"))
                    });
                    open.store(lets_app_in, Ordering::SeqCst);
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }));
        let p = PDatabase {
            _pg: pg,
            server_port,
            gate_port,
            password,
            admitted,
            committed: Arc::new(AtomicU64::new(0)),
            failed: Arc::new(AtomicU64::new(0)),
            tasks,
        };
        Ok(p)
    }

    /// P's app: one pooled connection through the gate, kept open, an order
    /// every 100 ms; when it breaks, the pool dials again.
    pub fn start_writer(&mut self) {
        let dsn = format!(
            "host=127.0.0.1 port={} user=handover password={} dbname=handover connect_timeout=1",
            self.gate_port, self.password
        );
        let (committed, failed) = (self.committed.clone(), self.failed.clone());
        self.tasks.push(tokio::spawn(async move {
            loop {
                if let Ok((client, conn)) =
                    tokio_postgres::connect(&dsn, tokio_postgres::NoTls).await
                {
                    let task = tokio::spawn(conn);
                    loop {
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
        }));
    }

    /// Does the gate admit new connections now?
    pub fn admits(&self) -> bool {
        self.admitted.load(Ordering::SeqCst)
    }

    async fn query_i64(&self, sql: &str, at: Option<DateTime<Utc>>) -> Result<i64> {
        // Straight to the server, not through the gate: this is the auditor
        // reading P's disk, not a client.
        let (client, conn) = tokio_postgres::connect(
            &format!(
                "host=127.0.0.1 port={} user=handover password={} dbname=handover",
                self.server_port, self.password
            ),
            tokio_postgres::NoTls,
        )
        .await?;
        let task = tokio::spawn(conn);
        let row = match at {
            Some(t) => client.query_one(sql, &[&t]).await?,
            None => client.query_one(sql, &[]).await?,
        };
        drop(client);
        let _ = task.await;
        Ok(row.get(0))
    }

    /// Orders P committed after `t`.
    pub async fn writes_after(&self, t: DateTime<Utc>) -> Result<i64> {
        self.query_i64("SELECT count(*) FROM orders WHERE at > $1", Some(t))
            .await
    }

    /// Orders P committed after `from` and before `to`.
    pub async fn writes_between(&self, from: DateTime<Utc>, to: DateTime<Utc>) -> Result<i64> {
        let (client, conn) = tokio_postgres::connect(
            &format!(
                "host=127.0.0.1 port={} user=handover password={} dbname=handover",
                self.server_port, self.password
            ),
            tokio_postgres::NoTls,
        )
        .await?;
        let task = tokio::spawn(conn);
        let row = client
            .query_one(
                "SELECT count(*) FROM orders WHERE at > $1 AND at < $2",
                &[&from, &to],
            )
            .await?;
        drop(client);
        let _ = task.await;
        Ok(row.get(0))
    }

    /// Orders P committed in all.
    pub async fn writes(&self) -> Result<i64> {
        self.query_i64("SELECT count(*) FROM orders", None).await
    }
}

impl Drop for PDatabase {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}
