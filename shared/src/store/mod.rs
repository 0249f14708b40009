//! The DynamoDB state store: one table, `pk`/`sk`.
//!
//! | item | `pk` | job |
//! |---|---|---|
//! | [`primary`] | `PRIMARY` | who is primary, the epoch (fencing token), the transition in progress |
//! | [`lock`] | `LOCK` | the one running execution: lease and cooldown |
//! | [`probe`] | `PROBE#<region>` | consecutive failures and T0 of the current failing run |
//! | [`approval`] | `APPROVAL#<key>` | short key → task token, single use, TTL |
//! | [`control`] | `CONTROL` | the maintenance pause flag |
//! | [`readiness`] | `READINESS` | the last readiness result and its verdicts |
//! | [`rpo`] | `RPO#<execution>` | the data S never got, measured after the run |
//!
//! Every state change is one conditional write and returns a typed outcome.
//! A lost race is an outcome, never a retry loop that overwrites. DynamoDB TTL
//! deletes late (and moto never), so expiry is checked by the code itself.

pub mod approval;
pub mod control;
pub mod lock;
pub mod primary;
pub mod probe;
#[cfg(feature = "respond")]
pub mod readiness;
#[cfg(feature = "respond")]
pub mod rpo;

use crate::aws::{SdkError, is_transient};
use crate::error::{Classify, ErrorName};
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::AttributeValue;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;
use chrono::{DateTime, TimeZone, Utc};
use std::collections::HashMap;

/// The sort key every item uses: each `pk` holds one item.
pub const SK: &str = "STATE";
/// The attribute the table's TTL is configured on (epoch seconds).
pub const TTL_ATTRIBUTE: &str = "expires_at";

pub(crate) type Item = HashMap<String, AttributeValue>;

/// Typed access to the Handover table.
#[derive(Debug, Clone)]
pub struct Store {
    client: Client,
    table: String,
}

/// A DynamoDB call failed, or an item does not have the shape we wrote.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The call itself failed (network, throttling, permissions, …).
    #[error("dynamodb {op} on {key} failed")]
    Call {
        /// The operation, e.g. `UpdateItem`.
        op: &'static str,
        /// The item's `pk`.
        key: String,
        /// Worth retrying?
        transient: bool,
        /// The SDK error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// An item is missing an attribute or has the wrong type.
    #[error("item {key}: attribute {attribute} {problem}")]
    Corrupt {
        /// The item's `pk`.
        key: String,
        /// Attribute name.
        attribute: String,
        /// What is wrong.
        problem: &'static str,
    },
}

impl Classify for StoreError {
    fn error_name(&self) -> ErrorName {
        match self {
            StoreError::Call {
                transient: true, ..
            } => ErrorName::Transient,
            _ => ErrorName::Fatal,
        }
    }
}

impl Store {
    /// A store on `table` using `client`.
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self {
            client,
            table: table.into(),
        }
    }

    /// The table named by `TABLE_NAME`, in the function's Region (`AWS_REGION`).
    pub async fn from_env(aws: &crate::aws::Aws) -> Result<Store, crate::config::ConfigError> {
        let region = crate::config::required("AWS_REGION")?;
        let table = crate::config::required("TABLE_NAME")?;
        Ok(Store::new(aws.dynamodb(&region).await, table))
    }

    /// The table name.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// The Region the table is called in (the stack's).
    pub fn region(&self) -> Option<&str> {
        self.client.config().region().map(|r| r.as_ref())
    }

    pub(crate) fn client(&self) -> &Client {
        &self.client
    }

    pub(crate) fn key(pk: &str) -> Item {
        HashMap::from([
            ("pk".to_owned(), AttributeValue::S(pk.to_owned())),
            ("sk".to_owned(), AttributeValue::S(SK.to_owned())),
        ])
    }

    /// Read one item, strongly consistent.
    pub(crate) async fn get(&self, pk: &str) -> Result<Option<Item>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(Self::key(pk)))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| call_error("GetItem", pk, e))?;
        Ok(out.item)
    }
}

pub(crate) fn call_error<E>(
    op: &'static str,
    key: &str,
    err: SdkError<E, aws_smithy_runtime_api::http::Response>,
) -> StoreError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    StoreError::Call {
        op,
        key: key.to_owned(),
        transient: is_transient(&err),
        source: Box::new(err),
    }
}

/// Reading attributes out of an item, with errors that name them.
pub(crate) struct Attrs<'a> {
    pub key: &'a str,
    pub item: &'a Item,
}

impl<'a> Attrs<'a> {
    pub fn new(key: &'a str, item: &'a Item) -> Self {
        Self { key, item }
    }

    fn corrupt(&self, attribute: &str, problem: &'static str) -> StoreError {
        StoreError::Corrupt {
            key: self.key.to_owned(),
            attribute: attribute.to_owned(),
            problem,
        }
    }

    pub fn opt_s(&self, name: &str) -> Result<Option<String>, StoreError> {
        match self.item.get(name) {
            None | Some(AttributeValue::Null(_)) => Ok(None),
            Some(AttributeValue::S(s)) => Ok(Some(s.clone())),
            Some(_) => Err(self.corrupt(name, "is not a string")),
        }
    }

    pub fn s(&self, name: &str) -> Result<String, StoreError> {
        self.opt_s(name)?
            .ok_or_else(|| self.corrupt(name, "is missing"))
    }

    pub fn opt_i64(&self, name: &str) -> Result<Option<i64>, StoreError> {
        match self.item.get(name) {
            None | Some(AttributeValue::Null(_)) => Ok(None),
            Some(AttributeValue::N(n)) => n
                .parse()
                .map(Some)
                .map_err(|_| self.corrupt(name, "is not an integer")),
            Some(_) => Err(self.corrupt(name, "is not a number")),
        }
    }

    pub fn i64(&self, name: &str) -> Result<i64, StoreError> {
        self.opt_i64(name)?
            .ok_or_else(|| self.corrupt(name, "is missing"))
    }

    pub fn bool(&self, name: &str) -> Result<bool, StoreError> {
        match self.item.get(name) {
            None | Some(AttributeValue::Null(_)) => Ok(false),
            Some(AttributeValue::Bool(b)) => Ok(*b),
            Some(_) => Err(self.corrupt(name, "is not a boolean")),
        }
    }

    pub fn opt_time_ms(&self, name: &str) -> Result<Option<DateTime<Utc>>, StoreError> {
        match self.opt_i64(name)? {
            None => Ok(None),
            Some(ms) => from_ms(ms)
                .map(Some)
                .ok_or_else(|| self.corrupt(name, "is not a valid time")),
        }
    }

    pub fn time_ms(&self, name: &str) -> Result<DateTime<Utc>, StoreError> {
        self.opt_time_ms(name)?
            .ok_or_else(|| self.corrupt(name, "is missing"))
    }

    pub fn opt_map(&self, name: &str) -> Result<Option<&'a Item>, StoreError> {
        match self.item.get(name) {
            None | Some(AttributeValue::Null(_)) => Ok(None),
            Some(AttributeValue::M(m)) => Ok(Some(m)),
            Some(_) => Err(self.corrupt(name, "is not a map")),
        }
    }

    pub fn strings(&self, name: &str) -> Result<Vec<String>, StoreError> {
        match self.item.get(name) {
            None | Some(AttributeValue::Null(_)) => Ok(Vec::new()),
            Some(AttributeValue::L(l)) => l
                .iter()
                .map(|v| match v {
                    AttributeValue::S(s) => Ok(s.clone()),
                    _ => Err(self.corrupt(name, "has a non-string element")),
                })
                .collect(),
            Some(_) => Err(self.corrupt(name, "is not a list")),
        }
    }
}

pub(crate) fn s(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}

pub(crate) fn n(v: i64) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

pub(crate) fn ms(t: DateTime<Utc>) -> AttributeValue {
    n(t.timestamp_millis())
}

pub(crate) fn from_ms(ms: i64) -> Option<DateTime<Utc>> {
    Utc.timestamp_millis_opt(ms).single()
}

/// Create the Handover table (`pk`/`sk`, on-demand, TTL on [`TTL_ATTRIBUTE`]).
/// Used by drills and tests; in AWS the SAM template creates it.
pub async fn create_table(client: &Client, table: &str) -> Result<(), StoreError> {
    use aws_sdk_dynamodb::types::{
        AttributeDefinition, BillingMode, KeySchemaElement, KeyType, ScalarAttributeType,
        TimeToLiveSpecification,
    };
    let attr = |name: &str| {
        AttributeDefinition::builder()
            .attribute_name(name)
            .attribute_type(ScalarAttributeType::S)
            .build()
            .expect("attribute definition has all required fields")
    };
    let key = |name: &str, kind| {
        KeySchemaElement::builder()
            .attribute_name(name)
            .key_type(kind)
            .build()
            .expect("key schema element has all required fields")
    };
    client
        .create_table()
        .table_name(table)
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(attr("pk"))
        .attribute_definitions(attr("sk"))
        .key_schema(key("pk", KeyType::Hash))
        .key_schema(key("sk", KeyType::Range))
        .send()
        .await
        .map_err(|e| call_error("CreateTable", table, e))?;
    client
        .update_time_to_live()
        .table_name(table)
        .time_to_live_specification(
            TimeToLiveSpecification::builder()
                .enabled(true)
                .attribute_name(TTL_ATTRIBUTE)
                .build()
                .expect("TTL specification has all required fields"),
        )
        .send()
        .await
        .map_err(|e| call_error("UpdateTimeToLive", table, e))?;
    Ok(())
}
