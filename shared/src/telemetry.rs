//! Logging and metrics.
//!
//! Logs are JSON lines through `tracing`, with fields rather than formatted
//! strings. Metrics go out as CloudWatch Embedded Metric Format (EMF) lines on
//! stdout, which Lambda ships to CloudWatch Logs and CloudWatch turns into
//! metrics with no extra calls.

use serde_json::{Map, Value, json};
use tracing_subscriber::EnvFilter;

/// Directives added on top of `RUST_LOG`, whatever it says: at TRACE the AWS
/// SDK logs response bodies, and a DynamoDB item can hold a task token;
/// lambda_runtime logs every raw event, and the approval task's holds the
/// task token, a Slack click's the `response_url`.
pub const SDK_LOG_CAP: [&str; 5] = [
    "aws_smithy_runtime=debug",
    "aws_smithy_runtime_api=debug",
    "aws_smithy_http_client=debug",
    "lambda_runtime=debug",
    "lambda_runtime_api_client=debug",
];

/// The filter: `RUST_LOG` (default `info`). When that enables TRACE, the
/// SDK's crates are held at DEBUG; otherwise nothing is added.
pub fn log_filter() -> EnvFilter {
    let base = std::env::var("RUST_LOG")
        .ok()
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| "info".into());
    capped(&base)
}

/// `directives` with the SDK capped at DEBUG when they enable TRACE.
pub fn capped(directives: &str) -> EnvFilter {
    let mut filter = EnvFilter::try_new(directives).unwrap_or_else(|_| EnvFilter::new("info"));
    if filter.max_level_hint() == Some(tracing_subscriber::filter::LevelFilter::TRACE) {
        for cap in SDK_LOG_CAP {
            if let Ok(d) = cap.parse() {
                filter = filter.add_directive(d);
            }
        }
    }
    filter
}

/// Is this event one the cap holds back whatever `RUST_LOG` says? TRACE
/// from the crates in [`SDK_LOG_CAP`] (a directive such as
/// `lambda_runtime::layers::api_response=trace` is more specific than the
/// cap's crate-level ones and would otherwise win).
pub fn capped_out(metadata: &tracing::Metadata<'_>) -> bool {
    *metadata.level() == tracing::Level::TRACE
        && SDK_LOG_CAP.iter().any(|cap| {
            let krate = cap.split('=').next().unwrap_or(cap);
            metadata.target() == krate || metadata.target().starts_with(&format!("{krate}::"))
        })
}

/// JSON logs to stdout, level from `RUST_LOG` (default `info`), the SDK and
/// lambda_runtime never below DEBUG. Call once in `main`.
pub fn init_logging() {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::{Layer, filter::filter_fn};
    let layer = tracing_subscriber::fmt::layer()
        .json()
        .with_current_span(false)
        .with_span_list(false)
        .with_target(false)
        .without_time()
        .with_filter(log_filter())
        .with_filter(filter_fn(|m| !capped_out(m)));
    let _ = tracing_subscriber::registry().with(layer).try_init();
}

/// A unit CloudWatch understands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Seconds.
    Seconds,
    /// Milliseconds.
    Milliseconds,
    /// A plain count.
    Count,
}

impl Unit {
    fn as_str(self) -> &'static str {
        match self {
            Unit::Seconds => "Seconds",
            Unit::Milliseconds => "Milliseconds",
            Unit::Count => "Count",
        }
    }
}

/// One EMF document: a namespace, dimensions and metric values.
#[derive(Debug, Clone)]
pub struct Emf {
    namespace: String,
    dimensions: Vec<(String, String)>,
    metrics: Vec<(String, f64, Unit)>,
    properties: Map<String, Value>,
}

impl Emf {
    /// Start a document in `namespace` (Handover uses `Handover`).
    pub fn new(namespace: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            dimensions: Vec::new(),
            metrics: Vec::new(),
            properties: Map::new(),
        }
    }

    /// Add a dimension (e.g. `Service`, `Outcome`).
    pub fn dimension(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.dimensions.push((name.into(), value.into()));
        self
    }

    /// Add a metric value.
    pub fn metric(mut self, name: impl Into<String>, value: f64, unit: Unit) -> Self {
        self.metrics.push((name.into(), value, unit));
        self
    }

    /// Add a searchable property that is not a metric (e.g. the incident id).
    pub fn property(mut self, name: impl Into<String>, value: impl Into<Value>) -> Self {
        self.properties.insert(name.into(), value.into());
        self
    }

    /// The EMF JSON line for `timestamp_ms`.
    pub fn render(&self, timestamp_ms: i64) -> String {
        let mut root = self.properties.clone();
        for (k, v) in &self.dimensions {
            root.insert(k.clone(), Value::String(v.clone()));
        }
        for (k, v, _) in &self.metrics {
            root.insert(k.clone(), json!(v));
        }
        let dims: Vec<&str> = self.dimensions.iter().map(|(k, _)| k.as_str()).collect();
        let defs: Vec<Value> = self
            .metrics
            .iter()
            .map(|(k, _, u)| json!({"Name": k, "Unit": u.as_str()}))
            .collect();
        root.insert(
            "_aws".into(),
            json!({
                "Timestamp": timestamp_ms,
                "CloudWatchMetrics": [{
                    "Namespace": self.namespace,
                    "Dimensions": [dims],
                    "Metrics": defs,
                }]
            }),
        );
        Value::Object(root).to_string()
    }

    /// Print the line to stdout (Lambda's log stream), now.
    pub fn emit(&self) {
        if self.metrics.is_empty() {
            return;
        }
        println!("{}", self.render(chrono::Utc::now().timestamp_millis()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cap is a filter of its own, so no RUST_LOG directive can lift it.
    #[test]
    fn trace_from_the_capped_crates_is_dropped_whatever_the_directives() {
        use tracing::Level;
        use tracing::callsite::Identifier;
        use tracing::metadata::{Kind, Metadata};
        struct Site;
        static SITE: Site = Site;
        impl tracing::callsite::Callsite for Site {
            fn set_interest(&self, _: tracing::subscriber::Interest) {}
            fn metadata(&self) -> &Metadata<'_> {
                unreachable!()
            }
        }
        let meta = |target: &'static str, level: Level| {
            Metadata::new(
                "e",
                target,
                level,
                None,
                None,
                None,
                tracing::field::FieldSet::new(&[], Identifier(&SITE)),
                Kind::EVENT,
            )
        };
        assert!(capped_out(&meta(
            "lambda_runtime::layers::api_response",
            Level::TRACE
        )));
        assert!(capped_out(&meta(
            "aws_smithy_runtime::client",
            Level::TRACE
        )));
        assert!(!capped_out(&meta(
            "lambda_runtime::layers::api_response",
            Level::DEBUG
        )));
        assert!(!capped_out(&meta("handover::detect", Level::TRACE)));
        assert!(
            !capped_out(&meta("lambda_runtime_extra", Level::TRACE)),
            "a prefix, not a crate"
        );
    }

    #[test]
    fn the_sdk_is_capped_when_trace_is_asked_for_and_untouched_otherwise() {
        let trace = capped("trace").to_string();
        for cap in SDK_LOG_CAP {
            assert!(trace.contains(cap), "{trace}");
        }
        let info = capped("info").to_string();
        assert!(
            !info.contains("aws_smithy"),
            "info must not raise the SDK to debug: {info}"
        );
    }

    #[test]
    fn emf_line_has_the_shape_cloudwatch_expects() {
        let line = Emf::new("Handover")
            .dimension("Service", "shop")
            .metric("ReadRtoSeconds", 329.0, Unit::Seconds)
            .metric("RpoSeconds", 126.0, Unit::Seconds)
            .property("incident", "inc-1")
            .render(1_700_000_000_000);
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["ReadRtoSeconds"], 329.0);
        assert_eq!(v["Service"], "shop");
        assert_eq!(v["incident"], "inc-1");
        let cw = &v["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(v["_aws"]["Timestamp"], 1_700_000_000_000i64);
        assert_eq!(cw["Namespace"], "Handover");
        assert_eq!(cw["Dimensions"], json!([["Service"]]));
        assert_eq!(
            cw["Metrics"][1],
            json!({"Name": "RpoSeconds", "Unit": "Seconds"})
        );
    }
}
