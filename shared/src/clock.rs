//! Time, injectable. Every decision that depends on "now" takes a [`Clock`]
//! so tests can use fixed instants (Slack signature windows, leases, TTLs).

use chrono::{DateTime, Utc};

/// A source of the current time.
pub trait Clock: Send + Sync {
    /// Now, in UTC.
    fn now(&self) -> DateTime<Utc>;
}

/// The system clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// A clock that always answers the same instant.
#[derive(Debug, Clone, Copy)]
pub struct FixedClock(pub DateTime<Utc>);

impl Clock for FixedClock {
    fn now(&self) -> DateTime<Utc> {
        self.0
    }
}

/// A clock a test moves by hand. Clones share one time, so a test keeps one
/// and gives another to the code under test.
#[derive(Debug, Clone)]
pub struct ManualClock(std::sync::Arc<std::sync::Mutex<DateTime<Utc>>>);

impl ManualClock {
    /// A clock reading `at`.
    pub fn at(at: DateTime<Utc>) -> Self {
        ManualClock(std::sync::Arc::new(std::sync::Mutex::new(at)))
    }

    /// Move it on by `by`.
    pub fn advance(&self, by: chrono::Duration) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) += by;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        *self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}
