//! The last readiness result: what the approval message and the report
//! show, and what a change is measured against (so a change is posted once
//! and an unchanged result posts nothing).

use super::{Attrs, Store, StoreError, call_error, ms, s};
use crate::readiness::Readiness;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{DateTime, Utc};

const PK: &str = "READINESS";

/// A change claimed but never marked posted is announced again after this
/// (the next scheduled evaluation, 30 minutes later, does).
pub const REANNOUNCE_AFTER: chrono::Duration = chrono::Duration::minutes(5);

/// The stored result.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredReadiness {
    /// The result.
    pub readiness: Readiness,
    /// Its signature (every check's id and verdict).
    pub signature: String,
    /// The detail of a change event that could not be put on the bus, to
    /// put again on the next evaluation ([`Store::keep_pending_event`]).
    pub event_pending: Option<String>,
}

/// What [`Store::record_readiness`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadinessChange {
    /// The verdicts changed (or this is the first result): post it. Only
    /// one of two racing evaluations with the same new verdicts gets this.
    Changed {
        /// The previous result, when its verdicts differ (None: the first
        /// result, or a change announced again after its claim went stale).
        previous: Option<Box<Readiness>>,
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
            event_pending: a.opt_s("event_pending")?,
        }))
    }

    /// Keep `r` as the last result; say whether its verdicts changed.
    ///
    /// One conditional write claims the announcement of a change: the
    /// verdicts differ from the stored ones, or the stored change was never
    /// marked posted ([`Store::mark_readiness_posted`]) and its claim is
    /// older than [`REANNOUNCE_AFTER`] (the evaluation that claimed it died
    /// or could post nowhere). Of evaluations racing with the same new
    /// verdicts, only one gets `Changed`.
    pub async fn record_readiness(
        &self,
        r: &Readiness,
        now: DateTime<Utc>,
    ) -> Result<ReadinessChange, StoreError> {
        let previous = self.readiness().await?;
        let sig = signature(r);
        let json = serde_json::to_string(r).unwrap_or_default();
        let mut item = Self::key(PK);
        item.insert("result".into(), s(&json));
        item.insert("signature".into(), s(&sig));
        item.insert("summary".into(), s(r.summary()));
        item.insert("updated_ms".into(), ms(now));
        item.insert("posted".into(), AttributeValue::Bool(false));
        item.insert("claimed_ms".into(), ms(now));
        let res = self
            .client()
            .put_item()
            .table_name(self.table())
            .set_item(Some(item))
            .condition_expression(
                "attribute_not_exists(pk) OR signature <> :sig \
                 OR (posted = :f AND claimed_ms < :stale)",
            )
            .expression_attribute_values(":sig", AttributeValue::S(sig.clone()))
            .expression_attribute_values(":f", AttributeValue::Bool(false))
            .expression_attribute_values(":stale", ms(now - REANNOUNCE_AFTER))
            .send()
            .await;
        match res {
            Ok(_) => Ok(ReadinessChange::Changed {
                previous: previous
                    .filter(|p| p.signature != sig)
                    .map(|p| Box::new(p.readiness)),
            }),
            Err(e)
                if matches!(
                    e.as_service_error(),
                    Some(PutItemError::ConditionalCheckFailedException(_))
                ) =>
            {
                // Same verdicts: refresh the stored values and time only,
                // and only if nobody stored other verdicts meanwhile.
                let refreshed = self
                    .client()
                    .update_item()
                    .table_name(self.table())
                    .set_key(Some(Self::key(PK)))
                    .update_expression("SET #r = :r, summary = :sum, updated_ms = :now")
                    .condition_expression("signature = :sig")
                    .expression_attribute_names("#r", "result")
                    .expression_attribute_values(":r", s(json))
                    .expression_attribute_values(":sum", s(r.summary()))
                    .expression_attribute_values(":now", ms(now))
                    .expression_attribute_values(":sig", AttributeValue::S(sig))
                    .send()
                    .await;
                match refreshed {
                    Ok(_) => Ok(ReadinessChange::Unchanged),
                    Err(e) if super::primary::conditional_old(&e).is_some() => {
                        Ok(ReadinessChange::Unchanged)
                    }
                    Err(e) => Err(call_error("UpdateItem", PK, e)),
                }
            }
            Err(e) => Err(call_error("PutItem", PK, e)),
        }
    }

    /// The change with these verdicts reached somebody: it is not announced
    /// again (unless the verdicts change).
    pub async fn mark_readiness_posted(&self, r: &Readiness) -> Result<(), StoreError> {
        let res = self
            .client()
            .update_item()
            .table_name(self.table())
            .set_key(Some(Self::key(PK)))
            .update_expression("SET posted = :t")
            .condition_expression("signature = :sig")
            .expression_attribute_values(":t", AttributeValue::Bool(true))
            .expression_attribute_values(":sig", AttributeValue::S(signature(r)))
            .send()
            .await;
        match res {
            Ok(_) => Ok(()),
            // Newer verdicts were stored meanwhile: theirs to announce.
            Err(e) if super::primary::conditional_old(&e).is_some() => Ok(()),
            Err(e) => Err(call_error("UpdateItem", PK, e)),
        }
    }

    /// Keep a change event that could not be put, so the next evaluation
    /// puts it (events must not be lost for a passing EventBridge fault).
    /// A newer change's claim replaces the item and with it this event:
    /// the newer event describes the newer verdicts.
    pub async fn keep_pending_event(&self, detail: &str) -> Result<(), StoreError> {
        self.client()
            .update_item()
            .table_name(self.table())
            .set_key(Some(Self::key(PK)))
            .update_expression("SET event_pending = :d")
            .condition_expression("attribute_exists(pk)")
            .expression_attribute_values(":d", s(detail))
            .send()
            .await
            .map(|_| ())
            .map_err(|e| call_error("UpdateItem", PK, e))
    }

    /// The pending event `detail` was put: forget it, unless another one
    /// replaced it meanwhile.
    pub async fn clear_pending_event(&self, detail: &str) -> Result<(), StoreError> {
        let res = self
            .client()
            .update_item()
            .table_name(self.table())
            .set_key(Some(Self::key(PK)))
            .update_expression("REMOVE event_pending")
            .condition_expression("event_pending = :d")
            .expression_attribute_values(":d", s(detail))
            .send()
            .await;
        match res {
            Ok(_) => Ok(()),
            Err(e) if super::primary::conditional_old(&e).is_some() => Ok(()),
            Err(e) => Err(call_error("UpdateItem", PK, e)),
        }
    }
}
