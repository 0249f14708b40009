//! The public name, as users' resolvers meet it: a loopback front that asks
//! Route 53 (the router's TestDNSAnswer, which follows the failover rule and
//! the health checks) where the name points on every request, and forwards
//! the GET to that side's app. So a GET "through the public name" reaches P
//! or S exactly as DNS would send it. Like a resolver, the front keeps an
//! answer for the record's TTL before it asks again.

use handover::aws::Aws;
use handover::plan::Plan;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A running front. Dropping it stops the server.
pub struct PublicFront {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    task: tokio::task::JoinHandle<()>,
}

impl PublicFront {
    /// Serve the plan's public name: `s_url` while Route 53 answers the
    /// plan's `standby_target`, `p_url` otherwise. An answer is kept for
    /// `ttl` (zero: asked on every request).
    pub async fn start(
        aws: &Aws,
        plan: &Plan,
        (p_url, s_url): (String, String),
        ttl: Duration,
    ) -> PublicFront {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let url = format!("http://{}", listener.local_addr().expect("local addr"));
        let r53 = aws.route53().await;
        let (zone, name, target) = (
            plan.dns.hosted_zone_id.clone(),
            plan.dns.record_name.clone(),
            plan.dns.standby_target.trim_end_matches('.').to_owned(),
        );
        let http = reqwest::Client::new();
        let cache: Cached = Default::default();
        let task = tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                let (r53, zone, name, target, http, cache) = (
                    r53.clone(),
                    zone.clone(),
                    name.clone(),
                    target.clone(),
                    http.clone(),
                    cache.clone(),
                );
                let (p_url, s_url) = (p_url.clone(), s_url.clone());
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 8192];
                    let n = sock.read(&mut buf).await.unwrap_or(0);
                    let line = String::from_utf8_lossy(&buf[..n]).to_string();
                    let path = line.split_whitespace().nth(1).unwrap_or("/").to_owned();
                    let kept = *cache.lock().expect("the answer cache");
                    let on_s = match kept {
                        Some((at, on_s)) if at.elapsed() < ttl => on_s,
                        _ => {
                            let on_s = r53
                                .test_dns_answer()
                                .hosted_zone_id(&zone)
                                .record_name(&name)
                                .record_type(aws_sdk_route53::types::RrType::Cname)
                                .send()
                                .await
                                .is_ok_and(|a| {
                                    a.record_data().iter().any(|v| {
                                        v.trim_end_matches('.').eq_ignore_ascii_case(&target)
                                    })
                                });
                            *cache.lock().expect("the answer cache") =
                                Some((std::time::Instant::now(), on_s));
                            on_s
                        }
                    };
                    let upstream = if on_s { s_url } else { p_url };
                    // A side that does not answer: the client waits, as it
                    // would on a dead Region (no response at all).
                    let Ok(r) = http
                        .get(format!("{upstream}{path}"))
                        .timeout(Duration::from_secs(60))
                        .send()
                        .await
                    else {
                        return;
                    };
                    let code = r.status().as_u16();
                    let served = r
                        .headers()
                        .get("x-served-by")
                        .and_then(|v| v.to_str().ok())
                        .map(|v| format!("x-served-by: {v}\r\n"))
                        .unwrap_or_default();
                    let body = r.text().await.unwrap_or_default();
                    let resp = format!(
                        "HTTP/1.1 {code} X\r\ncontent-type: application/json\r\n{served}content-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = sock.write_all(resp.as_bytes()).await;
                });
            }
        });
        PublicFront { url, task }
    }
}

/// The last answer and when it was fetched.
type Cached = std::sync::Arc<std::sync::Mutex<Option<(std::time::Instant, bool)>>>;

impl Drop for PublicFront {
    fn drop(&mut self) {
        self.task.abort();
    }
}
