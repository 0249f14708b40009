//! The HTTPS probe of a Region's own endpoint (no IAM permission: plain HTTPS).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

/// What one GET saw.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeResult {
    /// HTTP status, if a response came.
    pub status: Option<u16>,
    /// Error text when no response came (timeout, refused, TLS).
    pub error: Option<String>,
    /// Time to the answer or the failure, milliseconds.
    pub latency_ms: u64,
    /// When the probe started.
    pub at: DateTime<Utc>,
}

impl ProbeResult {
    /// A 2xx answer.
    pub fn ok(&self) -> bool {
        self.status.is_some_and(|s| (200..300).contains(&s))
    }
}

/// GET a URL with a bounded timeout.
pub trait EndpointProbe {
    /// GET `url`, giving up after `timeout`.
    fn get(
        &self,
        url: &str,
        timeout: Duration,
    ) -> impl std::future::Future<Output = ProbeResult> + Send;
}

/// The probe over reqwest (rustls).
#[derive(Debug, Clone)]
pub struct HttpProbe {
    client: reqwest::Client,
}

impl HttpProbe {
    /// A client with no redirects followed: a redirect is an answer, not health.
    pub fn new() -> Result<Self, reqwest::Error> {
        Ok(Self {
            client: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .user_agent("handover-probe/1")
                .build()?,
        })
    }

    /// The underlying client, for other plain-HTTP calls (verify's read check).
    pub fn client(&self) -> &reqwest::Client {
        &self.client
    }
}

impl EndpointProbe for HttpProbe {
    async fn get(&self, url: &str, timeout: Duration) -> ProbeResult {
        let at = Utc::now();
        let start = Instant::now();
        let res = self.client.get(url).timeout(timeout).send().await;
        let latency_ms = u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX);
        match res {
            Ok(r) => ProbeResult {
                status: Some(r.status().as_u16()),
                error: None,
                latency_ms,
                at,
            },
            Err(e) => ProbeResult {
                status: None,
                error: Some(if e.is_timeout() {
                    format!("timed out after {} ms", timeout.as_millis())
                } else {
                    crate::error::chain(&e)
                }),
                latency_ms,
                at,
            },
        }
    }
}
