//! The last readiness result: what the approval message and the report
//! show, and what a change is measured against (so a change is posted once
//! and an unchanged result posts nothing).

use super::{Attrs, Store, StoreError, call_error, ms, s};
use crate::readiness::Readiness;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{DateTime, Utc};

const PK: &str = "READINESS";

/// The stored result.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredReadiness {
    /// The result.
    pub readiness: Readiness,
    /// Its signature (every check's id and verdict).
    pub signature: String,
}

/// What [`Store::record_readiness`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadinessChange {
    /// The verdicts changed (or this is the first result): post it. Only
    /// one of two racing evaluations with the same new verdicts gets this.
    Changed {
        /// The previous summary line, if there was one.
        previous: Option<String>,
    },
    /// The same verdicts as the stored result: the time and the observed
    /// values were refreshed, nothing is posted.
    Unchanged,
}

/// Every check's id and verdict, in order: what a change is.
pub fn signature(r: &Readiness) -> String {
    r.checks
        .iter()
        .map(|c| format!("{}={}", c.id, c.verdict.label()))
        .collect::<Vec<_>>()
        .join(",")
}

impl Store {
    /// The last readiness result (None: readiness never ran).
    pub async fn readiness(&self) -> Result<Option<StoredReadiness>, StoreError> {
        let Some(item) = self.get(PK).await? else {
            return Ok(None);
        };
        let a = Attrs::new(PK, &item);
        let readiness = serde_json::from_str(&a.s("result")?).map_err(|_| StoreError::Corrupt {
            key: PK.into(),
            attribute: "result".into(),
            problem: "is not a readiness result",
        })?;
        Ok(Some(StoredReadiness {
            readiness,
            signature: a.s("signature")?,
        }))
    }

    /// Keep `r` as the last result; say whether its verdicts changed. The
    /// change is one conditional write on the signature.
    pub async fn record_readiness(
        &self,
        r: &Readiness,
        now: DateTime<Utc>,
    ) -> Result<ReadinessChange, StoreError> {
        let previous = self.readiness().await?;
        let sig = signature(r);
        let json = serde_json::to_string(r).unwrap_or_default();
        let mut item = Self::key(PK);
        item.insert("result".into(), s(json));
        item.insert("signature".into(), s(&sig));
        item.insert("summary".into(), s(r.summary()));
        item.insert("updated_ms".into(), ms(now));
        let res = self
            .client()
            .put_item()
            .table_name(self.table())
            .set_item(Some(item.clone()))
            .condition_expression("attribute_not_exists(pk) OR signature <> :sig")
            .expression_attribute_values(":sig", AttributeValue::S(sig))
            .send()
            .await;
        match res {
            Ok(_) => Ok(ReadinessChange::Changed {
                previous: previous.map(|p| p.readiness.summary()),
            }),
            Err(e)
                if matches!(
                    e.as_service_error(),
                    Some(PutItemError::ConditionalCheckFailedException(_))
                ) =>
            {
                // Same verdicts: refresh the stored values and time only.
                self.client()
                    .put_item()
                    .table_name(self.table())
                    .set_item(Some(item))
                    .send()
                    .await
                    .map_err(|e| call_error("PutItem", PK, e))?;
                Ok(ReadinessChange::Unchanged)
            }
            Err(e) => Err(call_error("PutItem", PK, e)),
        }
    }
}
