//! Failback's data check: the same rows on S and on P's new replica.
//!
//! Before the switch back, `handover failback` compares each table the plan
//! names (and the canary table) between S, the primary, and P's new
//! replica of S: the row count and a checksum (the sum of each row's md5),
//! which streams in constant memory whatever the table's size. S goes on
//! taking writes meanwhile, so the two sides are compared up to the same
//! point:
//! 1. on P's replica, the highest key (the bound);
//! 2. on S, the rows up to the bound, then S's WAL position;
//! 3. on P's replica, once it has replayed that position, the rows up to
//!    the bound.
//!
//! Every row up to the bound that S had when it was read is on the replica
//! at step 3. A row up to the bound that S changes between steps 2 and 3
//! makes them differ for a moment, so a difference is read again (up to
//! [`ATTEMPTS`] times) before it counts. A replica that does not replay S's
//! position within the wait is a difference when the rows differ, and an
//! error when they agree (agreeing up to a stalled replica proves nothing).
//! A replica that is not in recovery (not a replica at all) is refused.

use crate::execution::TableCheck;
use crate::failover::canary::db_error;
use std::time::Duration;
use tokio_postgres::Client;

/// Readings of one table before a difference counts.
pub const ATTEMPTS: u32 = 4;

/// What one side holds of a table up to a bound.
struct Side {
    rows: i64,
    checksum: String,
}

/// `pg_typeof` names a key's type with letters, digits, spaces, `_` and
/// quotes only (`bigint`, `timestamp with time zone`, `"MyType"`): anything
/// else is refused before it is put into SQL.
fn plain_type(t: &str) -> bool {
    !t.is_empty()
        && t.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, ' ' | '_' | '"' | '.' | '[' | ']'))
}

async fn read_side(
    client: &Client,
    table: &str,
    key: &str,
    bound: Option<&(String, String)>,
) -> Result<Side, String> {
    // `table` and `key` are validated by the plan as plain identifiers.
    let sum = "coalesce(sum(('x' || substr(md5(t::text), 1, 16))::bit(64)::bigint), 0)::text";
    let row = match bound {
        Some((value, ty)) => {
            client
                .query_one(
                    &format!(
                        "SELECT count(*), {sum} FROM {table} t WHERE t.{key} <= $1::text::{ty}"
                    ),
                    &[value],
                )
                .await
        }
        None => {
            client
                .query_one(&format!("SELECT count(*), {sum} FROM {table} t"), &[])
                .await
        }
    }
    .map_err(|e| format!("{table}: {}", db_error(&e)))?;
    Ok(Side {
        rows: row.get(0),
        checksum: row.get(1),
    })
}

/// Wait until `replica` has replayed `lsn`; `false` when `wait` ran out.
async fn replayed(replica: &Client, lsn: &str, wait: Duration) -> Result<bool, String> {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let row = replica
            .query_one(
                "SELECT coalesce(pg_last_wal_replay_lsn() >= $1::text::pg_lsn, false)",
                &[&lsn],
            )
            .await
            .map_err(|e| format!("pg_last_wal_replay_lsn: {}", db_error(&e)))?;
        if row.get::<_, bool>(0) {
            return Ok(true);
        }
        if tokio::time::Instant::now() >= deadline {
            return Ok(false);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Make a data-check session read-only and bounded: it reads live tables
/// on S, and a scan must not run for ever on either side.
pub async fn bound_session(client: &Client) -> Result<(), String> {
    client
        .batch_execute("SET default_transaction_read_only = on; SET statement_timeout = '10min'")
        .await
        .map_err(|e| format!("setting the session read-only: {}", db_error(&e)))
}

/// Is `replica` a replica (in recovery)? An error says what it is instead.
pub async fn require_replica(replica: &Client, what: &str) -> Result<(), String> {
    let row = replica
        .query_one("SELECT pg_is_in_recovery()", &[])
        .await
        .map_err(|e| format!("pg_is_in_recovery: {}", db_error(&e)))?;
    if row.get::<_, bool>(0) {
        Ok(())
    } else {
        Err(format!(
            "{what} is not in recovery: it is not a replica of S (a standalone instance, or not the one re-protection built), so comparing it says nothing"
        ))
    }
}

/// Compare `table` (ordered by `key`) on `s` and on `replica`, waiting up
/// to `wait` for the replica to replay S's position each time. `label` is
/// how the table is named in the result (`database.table`).
pub async fn compare(
    s: &Client,
    replica: &Client,
    label: &str,
    table: &str,
    key: &str,
    wait: Duration,
) -> Result<TableCheck, String> {
    let mut last = None;
    for attempt in 1..=ATTEMPTS {
        let row = replica
            .query_one(
                &format!("SELECT max({key})::text, pg_typeof(max({key}))::text FROM {table}"),
                &[],
            )
            .await
            .map_err(|e| format!("{label} on P: {}", db_error(&e)))?;
        let bound: Option<(String, String)> = match (row.get::<_, Option<String>>(0), row.get(1)) {
            (Some(v), t) => {
                let t: String = t;
                if !plain_type(&t) {
                    return Err(format!(
                        "{label}: key {key} has a type Handover does not compare ({t:?})"
                    ));
                }
                Some((v, t))
            }
            (None, _) => None,
        };
        let on_s = read_side(s, table, key, bound.as_ref())
            .await
            .map_err(|e| format!("on S: {e}"))?;
        let lsn: String = s
            .query_one("SELECT pg_current_wal_lsn()::text", &[])
            .await
            .map_err(|e| format!("S's pg_current_wal_lsn: {}", db_error(&e)))?
            .get(0);
        let caught_up = replayed(replica, &lsn, wait).await?;
        let on_p = read_side(replica, table, key, bound.as_ref())
            .await
            .map_err(|e| format!("on P: {e}"))?;
        let check = TableCheck {
            table: label.to_owned(),
            key_bound: bound.map(|(v, _)| v),
            s_rows: on_s.rows,
            p_rows: on_p.rows,
            s_checksum: on_s.checksum,
            p_checksum: on_p.checksum,
        };
        if check.matches() && caught_up {
            return Ok(check);
        }
        if !caught_up {
            // The replica did not reach S's position within the wait:
            // reading again would wait as long for the same answer. Rows
            // that differ are a difference; rows that agree only up to a
            // replica that stopped replaying prove nothing.
            if check.matches() {
                return Err(format!(
                    "{label}: P's replica did not replay S's WAL position {lsn} within {} s: replication is stalled or far behind, so the rows cannot be compared",
                    wait.as_secs()
                ));
            }
            return Ok(check);
        }
        tracing::warn!(
            table = label,
            attempt,
            s_rows = check.s_rows,
            p_rows = check.p_rows,
            "data check: the sides differ; reading again"
        );
        last = Some(check);
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    Ok(last.expect("at least one attempt"))
}
