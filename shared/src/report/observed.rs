//! What the post-checks observed of the world after a run, and the run
//! facts they need. `sources` gathers it; `postcheck` judges it.

use crate::adapters::DbInstance;
use chrono::{DateTime, Utc};

/// A completed backup of the new primary, as RDS reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackupSeen {
    /// When it completed (event time, or the snapshot's create time).
    pub at: DateTime<Utc>,
    /// Where that came from, e.g. `rds:DescribeEvents "Finished automated backup"`.
    pub source: String,
}

/// What the post-checks observed. `Err` holds the call's error text.
#[derive(Debug, Clone, PartialEq)]
pub struct Observed {
    /// P's old primary.
    pub p_db: Result<Option<DbInstance>, String>,
    /// S's database (the new primary after a promotion).
    pub s_db: Result<Option<DbInstance>, String>,
    /// Completed backups of S's database since the promotion call.
    pub backups: Result<Vec<BackupSeen>, String>,
    /// Plan-declared SSM parameters in S: (name, value).
    pub parameters: Vec<(String, Result<Option<String>, String>)>,
    /// DB secrets for S: (ARN, username in the secret).
    pub secret_usernames: Vec<(String, Result<Option<String>, String>)>,
}

/// The run facts the checks need.
#[derive(Debug, Clone, Copy)]
pub struct RunContext {
    /// Was S promoted in this run?
    pub promoted: bool,
    /// When the promotion call was accepted.
    pub promote_started_at: Option<DateTime<Utc>>,
}
