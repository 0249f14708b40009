//! Stable error names for Step Functions.
//!
//! lambda_runtime reports a handler error's Rust type name as `errorType`
//! unless told otherwise. ASL `Retry`/`Catch` cannot match that reliably, so
//! every Handover function maps its errors to one of these names through
//! [`lambda_runtime::Diagnostic`]. `statemachine.asl.json` matches exactly
//! these strings.

use lambda_runtime::Diagnostic;
use serde::Serialize;
use std::fmt;

/// The few error names the state machine can tell apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum ErrorName {
    /// Worth retrying: throttling, timeouts, 5xx from a dependency.
    #[serde(rename = "Handover.Transient")]
    Transient,
    /// The world is not in the state this step needs (lag over limit, replica
    /// not available). Retrying will not help; a person must look.
    #[serde(rename = "Handover.Precondition")]
    Precondition,
    /// Another execution moved the epoch or holds the transition: this run
    /// lost a race and must stop without touching anything.
    #[serde(rename = "Handover.Refused")]
    Refused,
    /// The input event or the plan is malformed.
    #[serde(rename = "Handover.InvalidInput")]
    InvalidInput,
    /// Verification missed its deadline: the failover cannot take traffic.
    #[serde(rename = "Handover.VerifyFailed")]
    VerifyFailed,
    /// A person rejected the failover (sent with SendTaskFailure).
    #[serde(rename = "Handover.Rejected")]
    Rejected,
    /// Anything else: a bug or a permanent misconfiguration.
    #[serde(rename = "Handover.Fatal")]
    Fatal,
}

impl ErrorName {
    /// Every name, for tests that check the ASL matches them.
    pub const ALL: [ErrorName; 7] = [
        ErrorName::Transient,
        ErrorName::Precondition,
        ErrorName::Refused,
        ErrorName::InvalidInput,
        ErrorName::VerifyFailed,
        ErrorName::Rejected,
        ErrorName::Fatal,
    ];

    /// The string the state machine matches.
    pub const fn as_str(self) -> &'static str {
        match self {
            ErrorName::Transient => "Handover.Transient",
            ErrorName::Precondition => "Handover.Precondition",
            ErrorName::Refused => "Handover.Refused",
            ErrorName::InvalidInput => "Handover.InvalidInput",
            ErrorName::VerifyFailed => "Handover.VerifyFailed",
            ErrorName::Rejected => "Handover.Rejected",
            ErrorName::Fatal => "Handover.Fatal",
        }
    }
}

impl fmt::Display for ErrorName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Errors that know which stable name they fall under.
pub trait Classify: std::error::Error {
    /// The name the state machine should see for this error.
    fn error_name(&self) -> ErrorName;
}

/// The error every handler returns. It keeps the stable name and the full
/// message (with the chain of causes) for the `Cause` the state machine sees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionError {
    /// Stable name for Retry/Catch.
    pub name: ErrorName,
    /// Human-readable message, including the chain of causes.
    pub message: String,
}

impl FunctionError {
    /// An error with an explicit name.
    pub fn new(name: ErrorName, message: impl Into<String>) -> Self {
        Self {
            name,
            message: message.into(),
        }
    }

    /// A malformed input event.
    pub fn invalid_input(message: impl Into<String>) -> Self {
        Self::new(ErrorName::InvalidInput, message)
    }
}

impl fmt::Display for FunctionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.name, self.message)
    }
}

impl std::error::Error for FunctionError {}

impl<E: Classify> From<E> for FunctionError {
    fn from(err: E) -> Self {
        FunctionError {
            name: err.error_name(),
            message: chain(&err),
        }
    }
}

impl From<FunctionError> for Diagnostic {
    fn from(err: FunctionError) -> Self {
        Diagnostic {
            error_type: err.name.as_str().to_owned(),
            error_message: err.message,
        }
    }
}

/// `outer: cause: root cause`, so a `format!` never loses the chain.
pub fn chain(err: &dyn std::error::Error) -> String {
    let mut out = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !out.ends_with(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = cause.source();
    }
    out
}

/// Parse a handler's raw JSON event into a typed input. A shape mismatch is
/// `Handover.InvalidInput` naming the path, never lambda_runtime's type name.
pub fn parse_event<T: serde::de::DeserializeOwned>(
    what: &str,
    value: serde_json::Value,
) -> Result<T, FunctionError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let at = if path == "." {
            String::new()
        } else {
            format!(" at {path}")
        };
        FunctionError::invalid_input(format!("{what}{at}: {}", e.inner()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] std::io::Error);
    impl Classify for Outer {
        fn error_name(&self) -> ErrorName {
            ErrorName::Transient
        }
    }

    #[test]
    fn diagnostic_uses_the_stable_name_not_the_rust_type() {
        let err: FunctionError = Outer(std::io::Error::other("socket closed")).into();
        let diag: Diagnostic = err.into();
        assert_eq!(diag.error_type, "Handover.Transient");
        assert_eq!(diag.error_message, "outer: socket closed");
        assert!(!diag.error_type.contains("::"));
    }

    #[test]
    fn names_serialize_to_their_strings() {
        for name in ErrorName::ALL {
            assert_eq!(
                serde_json::to_value(name).unwrap(),
                serde_json::Value::String(name.as_str().into())
            );
        }
    }

    #[test]
    fn parse_event_names_the_path() {
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct In {
            inner: Inner,
        }
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct Inner {
            count: u32,
        }
        let err = parse_event::<In>("detect event", serde_json::json!({"inner": {"count": "x"}}))
            .unwrap_err();
        assert_eq!(err.name, ErrorName::InvalidInput);
        assert!(err.message.contains("inner.count"), "{}", err.message);
    }
}
