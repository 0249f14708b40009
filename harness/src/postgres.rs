//! A private PostgreSQL server for the drill and the campaign
//! (scripts/postgres.sh), and one-statement SQL against it.

use crate::process::workspace_root;
use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The drill's PostgreSQL, stopped when dropped.
pub struct Postgres(PathBuf);

impl Postgres {
    /// Start a private PostgreSQL under `dir` (scripts/postgres.sh): its
    /// guard, port and the `handover` user's password.
    pub fn start(dir: PathBuf) -> Result<(Postgres, u16, String)> {
        Self::start_named(dir, None)
    }

    /// [`Postgres::start`], its certificate naming `tls_name` (an RDS
    /// endpoint pattern) instead of S's Region's endpoints.
    pub fn start_named(dir: PathBuf, tls_name: Option<&str>) -> Result<(Postgres, u16, String)> {
        let mut script = Command::new(workspace_root().join("scripts/postgres.sh"));
        if let Some(name) = tls_name {
            script.env("PG_TLS_NAME", name);
        }
        let port = script
            .arg("start")
            .arg(&dir)
            .output()
            .context("scripts/postgres.sh")?;
        let pg = Postgres(dir);
        if !port.status.success() {
            bail!(
                "PostgreSQL did not start: {}",
                String::from_utf8_lossy(&port.stderr)
            );
        }
        let pg_port: u16 = String::from_utf8_lossy(&port.stdout).trim().parse()?;
        let password = std::fs::read_to_string(pg.0.join("password"))?
            .trim()
            .to_owned();
        Ok((pg, pg_port, password))
    }

    /// The guard of a server scripts/postgres.sh already started under `dir`.
    pub fn adopt(dir: PathBuf) -> Postgres {
        Postgres(dir)
    }

    /// Its directory (TLS material under `tls/`).
    pub fn dir(&self) -> &Path {
        &self.0
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = Command::new(workspace_root().join("scripts/postgres.sh"))
            .arg("stop")
            .arg(&self.0)
            .status();
    }
}

/// Run one SQL statement as the superuser (trust auth on the drill's own server).
pub async fn sql(port: u16, statement: &str) -> Result<()> {
    let (client, conn) = tokio_postgres::connect(
        &format!("host=127.0.0.1 port={port} user=postgres dbname=postgres"),
        tokio_postgres::NoTls,
    )
    .await?;
    let task = tokio::spawn(conn);
    client.batch_execute(statement).await?;
    drop(client);
    let _ = task.await;
    Ok(())
}
