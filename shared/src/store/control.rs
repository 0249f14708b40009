//! The maintenance pause. While paused, `detect` probes and records but never
//! starts a failover.

use super::{Attrs, Store, StoreError, call_error, ms, s};
use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{DateTime, Utc};
use serde::Serialize;

const PK: &str = "CONTROL";

/// The pause flag as stored.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct Pause {
    /// Paused?
    pub paused: bool,
    /// Why, for the logs.
    pub reason: Option<String>,
    /// Who set it.
    pub by: Option<String>,
}

impl Store {
    /// Read the pause flag (absent means not paused).
    pub async fn pause(&self) -> Result<Pause, StoreError> {
        let Some(item) = self.get(PK).await? else {
            return Ok(Pause::default());
        };
        let a = Attrs::new(PK, &item);
        Ok(Pause {
            paused: a.bool("paused")?,
            reason: a.opt_s("reason")?,
            by: a.opt_s("by")?,
        })
    }

    /// Set or clear the pause flag.
    pub async fn set_pause(&self, pause: &Pause, now: DateTime<Utc>) -> Result<(), StoreError> {
        let mut item = Self::key(PK);
        item.insert("paused".into(), AttributeValue::Bool(pause.paused));
        if let Some(r) = &pause.reason {
            item.insert("reason".into(), s(r));
        }
        if let Some(b) = &pause.by {
            item.insert("by".into(), s(b));
        }
        item.insert("updated_ms".into(), ms(now));
        self.client()
            .put_item()
            .table_name(self.table())
            .set_item(Some(item))
            .send()
            .await
            .map_err(|e| call_error("PutItem", PK, e))?;
        Ok(())
    }
}
