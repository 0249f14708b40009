//! A loopback stand-in for a Region's app: `GET` answers with a status the
//! test sets, or hangs (a dead Region that accepts no answer), and every
//! request is counted.

use std::sync::Arc;
use std::sync::atomic::{AtomicU16, AtomicUsize, Ordering};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Status value meaning "accept the connection and never answer".
pub const HANG: u16 = 0;

/// A running stand-in. Dropping it stops the server.
pub struct App {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    status: Arc<AtomicU16>,
    hits: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl App {
    /// Start on a free 127.0.0.1 port, answering `status`.
    pub async fn start(status: u16) -> App {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let url = format!("http://{}", listener.local_addr().expect("local addr"));
        let status = Arc::new(AtomicU16::new(status));
        let hits = Arc::new(AtomicUsize::new(0));
        let (s, h) = (status.clone(), hits.clone());
        let task = tokio::spawn(async move {
            loop {
                let Ok((mut sock, _)) = listener.accept().await else {
                    return;
                };
                let (s, h) = (s.clone(), h.clone());
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 8192];
                    let _ = sock.read(&mut buf).await;
                    h.fetch_add(1, Ordering::SeqCst);
                    let code = s.load(Ordering::SeqCst);
                    if code == HANG {
                        tokio::time::sleep(std::time::Duration::from_secs(120)).await;
                        return;
                    }
                    let body = format!("{{\"status\":{code}}}");
                    let resp = format!(
                        "HTTP/1.1 {code} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = sock.write_all(resp.as_bytes()).await;
                });
            }
        });
        App {
            url,
            status,
            hits,
            task,
        }
    }

    /// Answer `status` from now on ([`HANG`] to hang).
    pub fn set_status(&self, status: u16) {
        self.status.store(status, Ordering::SeqCst);
    }

    /// Requests seen.
    pub fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

impl Drop for App {
    fn drop(&mut self) {
        self.task.abort();
    }
}
