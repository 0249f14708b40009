//! The measured RPO of a failover, one item per execution, written by
//! `handover rpo` and read by audit whenever it writes that run's report.

use super::{Attrs, Store, StoreError, call_error, ms, s};
use crate::failover::rpo::MeasuredRpo;
use chrono::{DateTime, Utc};

fn pk(execution: &str) -> String {
    format!("RPO#{execution}")
}

impl Store {
    /// Keep the measurement of `execution` (the last one wins: a later
    /// measurement saw at least as much of both sides).
    pub async fn record_measured_rpo(
        &self,
        execution: &str,
        measured: &MeasuredRpo,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let key = pk(execution);
        let mut item = Self::key(&key);
        // Serialising a struct of strings, numbers and times cannot fail.
        let json = serde_json::to_string(measured).unwrap_or_default();
        item.insert("measured".into(), s(json));
        item.insert("updated_ms".into(), ms(now));
        self.client()
            .put_item()
            .table_name(self.table())
            .set_item(Some(item))
            .send()
            .await
            .map_err(|e| call_error("PutItem", &key, e))?;
        Ok(())
    }

    /// The measurement of `execution`, if one was taken.
    pub async fn measured_rpo(&self, execution: &str) -> Result<Option<MeasuredRpo>, StoreError> {
        let key = pk(execution);
        let Some(item) = self.get(&key).await? else {
            return Ok(None);
        };
        let json = Attrs::new(&key, &item).s("measured")?;
        serde_json::from_str(&json)
            .map(Some)
            .map_err(|_| StoreError::Corrupt {
                key,
                attribute: "measured".into(),
                problem: "is not a measured RPO",
            })
    }
}
