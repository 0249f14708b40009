//! RPO measured, not estimated: the writes P committed that S never replayed.
//!
//! The figure at promotion is an estimate: the worst ReplicaLag of a minute
//! sampled before the call. Once both databases can be read again (at
//! failback, or when an operator reaches the fenced P on purpose to read
//! it), `handover rpo` measures the loss on the table the plan names
//! (`rpo_table`), whose column holds each row's write time:
//! - on S, the newest row written before the promotion call is the last of
//!   P's writes S replayed (everything newer on S is S's own, written after
//!   it was promoted);
//! - on P, the rows newer than that are the writes S never got. Their count
//!   is the transactions lost, and P's newest minus S's newest is the span
//!   of time they cover, the RPO as users lived it.
//!
//! Rows are compared by their time, as the issue of cross-Region RPO is a
//! question of time: a row P wrote with an earlier time than S's newest that
//! committed after it (concurrent transactions) is not counted. The two
//! hosts' clocks are NTP-synchronised on RDS; their skew enters the span.

use super::canary::db_error;
use crate::plan::RpoTable;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tokio_postgres::Client;

/// The measured loss of one failover.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MeasuredRpo {
    /// The table (as the plan names it).
    pub table: String,
    /// Its write-time column.
    pub column: String,
    /// The promotion call: S's rows after it are S's own.
    pub cut: DateTime<Utc>,
    /// S's newest row before the cut: the last of P's writes S replayed
    /// (`None`: S had none of the table's rows).
    pub s_newest_at: Option<DateTime<Utc>>,
    /// P's newest row before the cut.
    pub p_newest_at: Option<DateTime<Utc>>,
    /// P's rows newer than S's newest (and before the cut): the writes S
    /// never got.
    pub lost_rows: i64,
    /// P's rows after the cut: not part of this loss (P wrote after the
    /// promotion call: a fence that did not hold, or P rebuilt since).
    #[serde(default)]
    pub p_rows_after_cut: i64,
    /// The first of them.
    pub first_lost_at: Option<DateTime<Utc>>,
    /// P's newest minus S's newest (or minus the first lost row when S had
    /// none), seconds; 0 when nothing was lost.
    pub span_s: f64,
    /// When both sides were read.
    pub measured_at: DateTime<Utc>,
    /// Where each side was read, in words (host, port, TLS).
    pub read_from: String,
}

impl MeasuredRpo {
    /// "12.4 s (139 transactions) on orders.created_at".
    pub fn describe(&self) -> String {
        format!(
            "{} s ({} transaction{}) on {}.{}",
            crate::units::fmt_num((self.span_s * 10.0).round() / 10.0),
            self.lost_rows,
            if self.lost_rows == 1 { "" } else { "s" },
            self.table,
            self.column
        )
    }
}

fn seconds(a: DateTime<Utc>, b: DateTime<Utc>) -> f64 {
    (b - a).num_milliseconds() as f64 / 1000.0
}

/// Measure on `p` (the old primary) and `s` (the promoted replica). The
/// plan validated `table.table` and `table.column` as plain identifiers.
pub async fn measure(
    p: &Client,
    s: &Client,
    table: &RpoTable,
    cut: DateTime<Utc>,
    now: DateTime<Utc>,
    read_from: String,
) -> Result<MeasuredRpo, String> {
    let (t, c) = (&table.table, &table.column);
    // Read-only, bounded: S is today's primary.
    for (side, client) in [("P", p), ("S", s)] {
        client
            .batch_execute(
                "SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY; SET statement_timeout = '30s'",
            )
            .await
            .map_err(|e| format!("{side}: {}", db_error(&e)))?;
    }
    // The old primary is no replica, and the promoted S is none any more:
    // a session that is one reached the wrong database.
    for (side, client, want) in [
        ("P", p, "the old primary"),
        ("S", s, "the promoted replica"),
    ] {
        let in_recovery: bool = client
            .query_one("SELECT pg_is_in_recovery()", &[])
            .await
            .map_err(|e| format!("{side}: pg_is_in_recovery(): {}", db_error(&e)))?
            .get(0);
        if in_recovery {
            return Err(format!(
                "{side}'s session is a replica (in recovery), not {want}: check the address it reached"
            ));
        }
    }
    let s_newest: Option<DateTime<Utc>> = s
        .query_one(&format!("SELECT max({c}) FROM {t} WHERE {c} < $1"), &[&cut])
        .await
        .map_err(|e| format!("S: newest {t}.{c} before {cut}: {}", db_error(&e)))?
        .get(0);
    let row = p
        .query_one(
            &format!(
                "SELECT count(*), min({c}), max({c}), (SELECT max({c}) FROM {t} WHERE {c} < $2), (SELECT count(*) FROM {t} WHERE {c} >= $2) FROM {t} WHERE ($1::timestamptz IS NULL OR {c} > $1) AND {c} < $2"
            ),
            &[&s_newest, &cut],
        )
        .await
        .map_err(|e| format!("P: {t}.{c} after S's newest: {}", db_error(&e)))?;
    let lost_rows: i64 = row.get(0);
    let first_lost_at: Option<DateTime<Utc>> = row.get(1);
    let newest_lost: Option<DateTime<Utc>> = row.get(2);
    let p_newest_at: Option<DateTime<Utc>> = row.get(3);
    let p_rows_after_cut: i64 = row.get(4);
    let span_s = match (lost_rows, newest_lost, s_newest, first_lost_at) {
        (0, ..) | (_, None, ..) => 0.0,
        (_, Some(n), Some(s), _) => seconds(s, n),
        (_, Some(n), None, Some(f)) => seconds(f, n),
        (_, Some(_), None, None) => 0.0,
    };
    Ok(MeasuredRpo {
        table: t.clone(),
        column: c.clone(),
        cut,
        s_newest_at: s_newest,
        p_newest_at,
        lost_rows,
        p_rows_after_cut,
        first_lost_at,
        span_s,
        measured_at: now,
        read_from,
    })
}
