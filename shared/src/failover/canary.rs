//! The write canary: proof that S takes writes.
//!
//! Kind `postgres` connects to the promoted database with credentials from
//! Secrets Manager, makes sure it is not in recovery, INSERTs a row into the
//! canary table and reads it back. Kind `http` POSTs to an app endpoint that
//! writes. Either way, one attempt is one call; verify retries.

use super::pg_tls::RustlsConnect;
use crate::adapters::{AwsError, call_error};
use crate::aws::Aws;
use crate::plan::Canary;
use chrono::{DateTime, Utc};
use serde::Deserialize;
use std::fmt;
use std::time::Duration;
use tracing::instrument;

/// Read a secret (secretsmanager:GetSecretValue).
pub trait Secrets {
    /// The secret string.
    fn secret_string(
        &self,
        arn: &str,
    ) -> impl std::future::Future<Output = Result<String, AwsError>> + Send;
}

/// Secrets Manager in one Region.
pub struct SecretsManager {
    client: aws_sdk_secretsmanager::Client,
    region: String,
}

impl SecretsManager {
    /// Secrets Manager in `region`.
    pub async fn new(aws: &Aws, region: &str) -> Self {
        Self {
            client: aws.secrets(region).await,
            region: region.to_owned(),
        }
    }
}

impl Secrets for SecretsManager {
    #[instrument(skip(self))]
    async fn secret_string(&self, arn: &str) -> Result<String, AwsError> {
        // A secret lives in the Region its ARN names: after a failover the
        // run's standby (P) is not where S's secrets are.
        let region = crate::slack::secrets::region_of(arn).unwrap_or(&self.region);
        let client = if region == self.region {
            self.client.clone()
        } else {
            aws_sdk_secretsmanager::Client::from_conf(
                self.client
                    .config()
                    .to_builder()
                    .region(aws_sdk_secretsmanager::config::Region::new(
                        region.to_owned(),
                    ))
                    .build(),
            )
        };
        let out = client
            .get_secret_value()
            .secret_id(arn)
            .send()
            .await
            .map_err(|e| call_error("secretsmanager", "GetSecretValue", region, e))?;
        out.secret_string.ok_or_else(|| AwsError::Shape {
            service: "secretsmanager",
            op: "GetSecretValue",
            region: self.region.clone(),
            problem: format!("secret {arn} has no string value"),
        })
    }
}

/// DB credentials as RDS stores them in Secrets Manager.
#[derive(Clone, Deserialize)]
pub struct DbCredentials {
    /// User name.
    pub username: String,
    /// Password (never logged: Debug redacts it).
    pub password: String,
}

impl fmt::Debug for DbCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DbCredentials")
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}

/// One successful canary write.
#[derive(Debug, Clone, PartialEq)]
pub struct Written {
    /// What was written and read back.
    pub detail: String,
    /// When the write was acknowledged.
    pub at: DateTime<Utc>,
}

/// Where and how the canary reaches S's PostgreSQL: the host (S's instance
/// endpoint as RDS reports it, unless the plan names one), the credentials,
/// and TLS verifying S's endpoint name (or the plan's `tls_server_name`).
pub(crate) struct PgTarget<'a> {
    pub(crate) host: &'a str,
    pub(crate) port: u16,
    pub(crate) database: &'a str,
    pub(crate) table: &'a str,
    pub(crate) creds: DbCredentials,
    pub(crate) tls: Option<(RustlsConnect, String)>,
}

pub(crate) async fn pg_target<'a, S: Secrets>(
    canary: &'a Canary,
    standby_endpoint: Option<&'a str>,
    secrets: &S,
) -> Result<Option<PgTarget<'a>>, String> {
    let Canary::Postgres {
        host,
        port,
        database,
        secret_arn,
        table,
        require_tls,
        ca_secret_arn,
        tls_server_name,
    } = canary
    else {
        return Ok(None);
    };
    let host = match (host.as_deref(), standby_endpoint) {
        (Some(h), _) | (None, Some(h)) => h,
        (None, None) => {
            return Err(
                "RDS reports no endpoint for S's instance yet, and canary.postgres.host names none"
                    .into(),
            );
        }
    };
    let tls = match (require_tls, ca_secret_arn) {
        (true, Some(arn)) => {
            let pem = secrets
                .secret_string(arn)
                .await
                .map_err(|e| crate::error::chain(&e))?;
            let connect = RustlsConnect::trusting(&pem).map_err(|e| format!("{arn}: {e}"))?;
            let name = tls_server_name.as_deref().or(standby_endpoint).ok_or(
                "no TLS name to verify: RDS reports no endpoint for S's instance and canary.postgres.tls_server_name is not set",
            )?;
            Some((connect.verifying(name)?, name.to_owned()))
        }
        (true, None) => {
            return Err(
                "canary.postgres.require_tls is true but no ca_secret_arn names the CA to trust"
                    .into(),
            );
        }
        (false, _) => None,
    };
    let secret = secrets
        .secret_string(secret_arn)
        .await
        .map_err(|e| crate::error::chain(&e))?;
    // serde's message can quote the value: only its category and position are kept.
    let creds: DbCredentials = serde_json::from_str(&secret).map_err(|e| {
        format!(
            "secret {secret_arn} is not the RDS credentials JSON {{\"username\": …, \"password\": …}} ({:?} error at line {} column {}; the value is not shown)",
            e.classify(),
            e.line(),
            e.column()
        )
    })?;
    Ok(Some(PgTarget {
        host,
        port: *port,
        database,
        table,
        creds,
        tls,
    }))
}

fn tls_note(verified: Option<&str>) -> String {
    verified.map_or_else(String::new, |name| {
        format!(" (TLS certificate verified for {name})")
    })
}

/// Readiness: connect as the canary would and ask, read-only, whether S is
/// a replica (it should be, before a failover). Nothing is written. `None`
/// for an http canary (its only probe is a POST, which writes).
pub async fn probe_read_only<S: Secrets>(
    canary: &Canary,
    standby_endpoint: Option<&str>,
    secrets: &S,
    budget: Duration,
) -> Option<Result<(String, bool), String>> {
    let target = match pg_target(canary, standby_endpoint, secrets).await {
        Ok(Some(t)) => t,
        Ok(None) => return None,
        Err(e) => return Some(Err(e)),
    };
    let PgTarget {
        host,
        port,
        database,
        creds,
        tls,
        ..
    } = target;
    let verified = tls.as_ref().map(|(_, n)| n.clone());
    let attempt = async {
        let (client, conn) = connect(
            host,
            port,
            database,
            &creds,
            tls.map(|(c, _)| c),
            "handover-readiness",
        )
        .await?;
        let row = client
            .query_one("SELECT pg_is_in_recovery()", &[])
            .await
            .map_err(|e| format!("SELECT pg_is_in_recovery(): {}", db_error(&e)));
        drop(client);
        conn.abort();
        let in_recovery: bool = row?.get(0);
        Ok((
            format!(
                "connected to {host}:{port}/{database} as {}, SELECT pg_is_in_recovery() = {in_recovery}{}",
                creds.username,
                tls_note(verified.as_deref())
            ),
            in_recovery,
        ))
    };
    Some(
        tokio::time::timeout(budget, attempt)
            .await
            .unwrap_or_else(|_| {
                Err(format!(
                    "postgres {host}:{port} did not answer within {} ms",
                    budget.as_millis()
                ))
            }),
    )
}

/// One canary attempt. `standby_endpoint` is S's instance endpoint as RDS
/// reports it now (None when RDS did not say): the host dialled unless the
/// plan names one, and the name TLS verifies unless the plan names another.
pub async fn write_once<S: Secrets>(
    canary: &Canary,
    standby_endpoint: Option<&str>,
    secrets: &S,
    http: &reqwest::Client,
    incident: &str,
    budget: Duration,
) -> Result<Written, String> {
    match canary {
        Canary::Postgres { .. } => {
            let PgTarget {
                host,
                port,
                database,
                table,
                creds,
                tls,
            } = pg_target(canary, standby_endpoint, secrets)
                .await?
                .ok_or("the canary is not postgres")?;
            let verified = tls.as_ref().map(|(_, name)| name.clone());
            let written = tokio::time::timeout(
                budget,
                postgres(
                    host,
                    port,
                    database,
                    &creds,
                    table,
                    incident,
                    tls.map(|(c, _)| c),
                ),
            )
            .await
            .map_err(|_| {
                format!(
                    "postgres {host}:{port} did not answer within {} ms",
                    budget.as_millis()
                )
            })??;
            Ok(match verified {
                Some(_) => Written {
                    detail: format!("{}{}", written.detail, tls_note(verified.as_deref())),
                    ..written
                },
                None => written,
            })
        }
        Canary::Http { url } => {
            let res = http
                .post(url)
                .timeout(budget)
                .json(&serde_json::json!({"handover_canary": incident, "at": Utc::now()}))
                .send()
                .await
                .map_err(|e| crate::error::chain(&e))?;
            let status = res.status();
            if status.is_success() {
                Ok(Written {
                    detail: format!("POST {url} -> HTTP {}", status.as_u16()),
                    at: Utc::now(),
                })
            } else {
                let body = res.text().await.unwrap_or_default();
                Err(format!(
                    "POST {url} -> HTTP {}: {}",
                    status.as_u16(),
                    body.chars().take(200).collect::<String>()
                ))
            }
        }
    }
}

/// An open session and the task driving it (abort it when done).
pub type Session = (
    tokio_postgres::Client,
    tokio::task::JoinHandle<Result<(), tokio_postgres::Error>>,
);

/// Connect to PostgreSQL as `creds`, over `tls` when given (verifying the
/// name it was built with), otherwise in the clear.
pub async fn connect(
    host: &str,
    port: u16,
    database: &str,
    creds: &DbCredentials,
    tls: Option<RustlsConnect>,
    application_name: &str,
) -> Result<Session, String> {
    let mut config = tokio_postgres::Config::new();
    config
        .host(host)
        .port(port)
        .dbname(database)
        .user(&creds.username)
        .password(&creds.password)
        .application_name(application_name)
        .connect_timeout(Duration::from_secs(5));
    let connect_error = |e: tokio_postgres::Error| format!("connect: {}", crate::error::chain(&e));
    let (client, conn) = match tls {
        Some(tls) => {
            config.ssl_mode(tokio_postgres::config::SslMode::Require);
            let (client, connection) = config.connect(tls).await.map_err(connect_error)?;
            (client, tokio::spawn(connection))
        }
        None => {
            config.ssl_mode(tokio_postgres::config::SslMode::Disable);
            let (client, connection) = config
                .connect(tokio_postgres::NoTls)
                .await
                .map_err(connect_error)?;
            (client, tokio::spawn(connection))
        }
    };
    Ok((client, conn))
}

async fn postgres(
    host: &str,
    port: u16,
    database: &str,
    creds: &DbCredentials,
    table: &str,
    incident: &str,
    tls: Option<RustlsConnect>,
) -> Result<Written, String> {
    let (client, conn) = connect(host, port, database, creds, tls, "handover-canary").await?;
    let result = async {
        let row = client.query_one("SELECT pg_is_in_recovery()", &[]).await.map_err(|e| format!("pg_is_in_recovery: {e}"))?;
        let in_recovery: bool = row.get(0);
        if in_recovery {
            return Err("the database is still in recovery (a replica): not writable".to_string());
        }
        // `table` is validated by the plan as [A-Za-z0-9_]+.
        client
            .batch_execute(&format!(
                "CREATE TABLE IF NOT EXISTS {table} (id bigserial PRIMARY KEY, incident text NOT NULL, written_at timestamptz NOT NULL DEFAULT now())"
            ))
            .await
            .map_err(|e| format!("create {table}: {}", db_error(&e)))?;
        let row = client
            .query_one(&format!("INSERT INTO {table} (incident) VALUES ($1) RETURNING id, written_at"), &[&incident])
            .await
            .map_err(|e| format!("insert into {table}: {}", db_error(&e)))?;
        let id: i64 = row.get(0);
        let at: DateTime<Utc> = row.get(1);
        let back = client
            .query_one(&format!("SELECT incident FROM {table} WHERE id = $1"), &[&id])
            .await
            .map_err(|e| format!("read back: {}", db_error(&e)))?;
        let read: String = back.get(0);
        if read != incident {
            return Err(format!("read back {read:?}, wrote {incident:?}"));
        }
        Ok(Written { detail: format!("INSERT INTO {table} id {id} at {} and read it back", at.to_rfc3339()), at })
    }
    .await;
    drop(client);
    conn.abort();
    result
}

pub(crate) fn db_error(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{}: {}", db.code().code(), db.message()),
        None => crate::error::chain(e),
    }
}
