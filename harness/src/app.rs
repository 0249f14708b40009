//! A loopback stand-in for a Region's app: `GET` answers with a status the
//! test sets, or hangs (a dead Region that accepts no answer); `POST` is the
//! app's write endpoint, which answers 503 "read-only" while its database
//! refuses writes. Every request is counted.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicUsize, Ordering};
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
    writable: Arc<AtomicBool>,
    served_by: Arc<std::sync::Mutex<Option<String>>>,
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
        let writable = Arc::new(AtomicBool::new(true));
        let served_by = Arc::new(std::sync::Mutex::new(None::<String>));
        let (s, h, wr, sb) = (
            status.clone(),
            hits.clone(),
            writable.clone(),
            served_by.clone(),
        );
        let task = tokio::spawn(async move {
            loop {
                let Ok((mut sock, _)) = listener.accept().await else {
                    return;
                };
                let (s, h, wr) = (s.clone(), h.clone(), wr.clone());
                let header = sb
                    .lock()
                    .unwrap()
                    .as_ref()
                    .map(|r| format!("x-served-by: {r}\r\n"))
                    .unwrap_or_default();
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 8192];
                    let n = sock.read(&mut buf).await.unwrap_or(0);
                    h.fetch_add(1, Ordering::SeqCst);
                    let mut code = s.load(Ordering::SeqCst);
                    if buf[..n].starts_with(b"POST") && code == 200 && !wr.load(Ordering::SeqCst) {
                        code = 503; // read-only: the database is still a replica
                    }
                    if code == HANG {
                        tokio::time::sleep(std::time::Duration::from_secs(120)).await;
                        return;
                    }
                    let body = format!("{{\"status\":{code}}}");
                    let resp = format!(
                        "HTTP/1.1 {code} X\r\ncontent-type: application/json\r\n{header}content-length: {}\r\nconnection: close\r\n\r\n{body}",
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
            writable,
            served_by,
            task,
        }
    }

    /// Name the Region that serves, in an `x-served-by` header (as a load
    /// balancer or the app adds it).
    pub fn set_served_by(&self, region: &str) {
        *self.served_by.lock().unwrap() = Some(region.to_owned());
    }

    /// Answer `status` from now on ([`HANG`] to hang).
    pub fn set_status(&self, status: u16) {
        self.status.store(status, Ordering::SeqCst);
    }

    /// Open or close the write endpoint (closed: POST answers 503).
    pub fn set_writable(&self, writable: bool) {
        self.writable.store(writable, Ordering::SeqCst);
    }

    /// The write endpoint's gate, for a task that opens it later.
    pub fn write_gate(&self) -> Arc<AtomicBool> {
        self.writable.clone()
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
