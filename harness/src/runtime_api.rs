//! A local Lambda Runtime API, for measuring a function process as Lambda
//! runs it: the bench (`make bench`, and its reduced form in `make test`)
//! spawns the function's process with `AWS_LAMBDA_RUNTIME_API` pointing
//! here, and times init (spawn → the first `next`), each invocation (the
//! event handed out → its response) and the process's peak RSS.
//!
//! The four routes of the Runtime API as the Lambda Developer Guide gives
//! them ("Using the Lambda runtime API for custom runtimes"):
//! `GET /2018-06-01/runtime/invocation/next` (long-polls; answers with the
//! event and the `Lambda-Runtime-Aws-Request-Id`, `-Deadline-Ms`,
//! `-Invoked-Function-Arn` and `-Trace-Id` headers),
//! `POST …/invocation/{id}/response`, `POST …/invocation/{id}/error` and
//! `POST /2018-06-01/runtime/init/error`. HTTP/1.1 with keep-alive, bodies
//! by `Content-Length` or chunked, which is what both `lambda_runtime`
//! (hyper) and `awslambdaric` (its C++ client, curl) send.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, oneshot};

/// How an invocation ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// `…/response` with this body.
    Response(String),
    /// `…/error` with this body (`{"errorType": …, "errorMessage": …}`).
    Error(String),
}

/// One invocation as the runtime saw it.
#[derive(Debug, Clone)]
pub struct Invocation {
    /// What the function answered.
    pub answer: Answer,
    /// The event handed out by `next` → the answer received.
    pub duration: Duration,
}

/// Where an invocation's answer goes, with its time since the hand-out.
type Reply = oneshot::Sender<(Answer, Duration)>;

struct Pending {
    id: String,
    event: String,
    answer: Reply,
}

#[derive(Default)]
struct State {
    queue: VecDeque<Pending>,
    /// Handed out, waiting for their answer: id → (sender, when handed out).
    out: Vec<(String, Reply, Instant)>,
    /// When the first `next` arrived since the last [`RuntimeApi::reset`].
    first_next: Option<Instant>,
    init_error: Option<String>,
    /// Bumped by [`RuntimeApi::reset`]: a `next` still waiting from a killed
    /// process must not take the next process's invocation.
    generation: u64,
}

/// The server. Serves one function process at a time.
#[derive(Clone)]
pub struct RuntimeApi {
    addr: std::net::SocketAddr,
    state: Arc<Mutex<State>>,
    queued: Arc<Notify>,
    nexted: Arc<Notify>,
}

/// The function ARN handed to the runtime.
const FUNCTION_ARN: &str = "arn:aws:lambda:ap-northeast-1:123456789012:function:handover-bench";

impl RuntimeApi {
    /// Listen on a free 127.0.0.1 port.
    pub async fn start() -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let api = RuntimeApi {
            addr: listener.local_addr()?,
            state: Arc::default(),
            queued: Arc::default(),
            nexted: Arc::default(),
        };
        let server = api.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                // No Nagle delay: an answer written while the client's ACK
                // of the last one is delayed would wait for it (~40 ms),
                // and that wait would count as the function's.
                let _ = stream.set_nodelay(true);
                let api = server.clone();
                tokio::spawn(async move {
                    let _ = api.serve(stream).await;
                });
            }
        });
        Ok(api)
    }

    /// `host:port`, the value of `AWS_LAMBDA_RUNTIME_API`.
    pub fn host(&self) -> String {
        self.addr.to_string()
    }

    /// Forget the last process: its first `next`, its init error, anything
    /// queued or handed out.
    pub fn reset(&self) {
        {
            let mut s = self.state.lock().unwrap();
            let generation = s.generation + 1;
            *s = State {
                generation,
                ..State::default()
            };
        }
        self.queued.notify_waiters();
    }

    /// Wait for the process's first `next` (its init is over), up to
    /// `timeout`. Returns when it came, or the init error it posted.
    pub async fn first_next(&self, timeout: Duration) -> Result<Instant, String> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.nexted.notified();
            {
                let s = self.state.lock().unwrap();
                if let Some(e) = &s.init_error {
                    return Err(format!("init error: {e}"));
                }
                if let Some(at) = s.first_next {
                    return Ok(at);
                }
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return Err(format!("no `next` within {timeout:?}"));
            }
        }
    }

    /// Hand `event` to the process and wait (up to `timeout`) for its answer.
    pub async fn invoke(&self, event: &str, timeout: Duration) -> Result<Invocation, String> {
        let (tx, rx) = oneshot::channel();
        let id = format!("{:032x}", rand_id());
        self.state.lock().unwrap().queue.push_back(Pending {
            id,
            event: event.to_owned(),
            answer: tx,
        });
        self.queued.notify_waiters();
        self.queued.notify_one();
        let (answer, duration) = tokio::time::timeout(timeout, rx)
            .await
            .map_err(|_| format!("no answer within {timeout:?}"))?
            .map_err(|_| "the invocation was dropped".to_owned())?;
        Ok(Invocation { answer, duration })
    }

    async fn serve(&self, stream: TcpStream) -> std::io::Result<()> {
        let (read, mut write) = stream.into_split();
        let mut read = BufReader::new(read);
        loop {
            let Some((method, path, body)) = read_request(&mut read).await? else {
                return Ok(());
            };
            let (status, headers, body) = self.route(&method, &path, body).await;
            let mut head = format!(
                "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n",
                body.len()
            );
            for (k, v) in headers {
                head.push_str(&format!("{k}: {v}\r\n"));
            }
            head.push_str("\r\n");
            // One write: head and body leave in one segment.
            head.push_str(&body);
            write.write_all(head.as_bytes()).await?;
            write.flush().await?;
        }
    }

    async fn route(
        &self,
        method: &str,
        path: &str,
        body: String,
    ) -> (&'static str, Vec<(&'static str, String)>, String) {
        const PREFIX: &str = "/2018-06-01/runtime/";
        let Some(rest) = path.strip_prefix(PREFIX) else {
            return ("404 Not Found", Vec::new(), "{}".into());
        };
        match (method, rest) {
            ("GET", "invocation/next") => {
                let generation = {
                    let mut s = self.state.lock().unwrap();
                    s.first_next.get_or_insert_with(Instant::now);
                    s.generation
                };
                self.nexted.notify_waiters();
                let pending = loop {
                    let notified = self.queued.notified();
                    {
                        let mut s = self.state.lock().unwrap();
                        if s.generation != generation {
                            return ("410 Gone", Vec::new(), "{}".into());
                        }
                        if let Some(p) = s.queue.pop_front() {
                            break p;
                        }
                    }
                    notified.await;
                };
                let deadline_ms = chrono::Utc::now().timestamp_millis() + 60_000;
                let headers = vec![
                    ("lambda-runtime-aws-request-id", pending.id.clone()),
                    ("lambda-runtime-deadline-ms", deadline_ms.to_string()),
                    ("lambda-runtime-invoked-function-arn", FUNCTION_ARN.into()),
                    (
                        "lambda-runtime-trace-id",
                        format!(
                            "Root=1-{:08x}-{:024x};Parent={:016x};Sampled=0",
                            chrono::Utc::now().timestamp(),
                            rand_id() & ((1u128 << 96) - 1),
                            rand_id() as u64
                        ),
                    ),
                ];
                let event = pending.event.clone();
                self.state
                    .lock()
                    .unwrap()
                    .out
                    .push((pending.id, pending.answer, Instant::now()));
                ("200 OK", headers, event)
            }
            ("POST", "init/error") => {
                self.state.lock().unwrap().init_error = Some(body);
                self.nexted.notify_waiters();
                ("202 Accepted", Vec::new(), r#"{"status":"OK"}"#.into())
            }
            ("POST", r) if r.starts_with("invocation/") => {
                let r = &r["invocation/".len()..];
                let (id, kind) = r.split_once('/').unwrap_or((r, ""));
                let answer = match kind {
                    "response" => Answer::Response(body),
                    "error" => Answer::Error(body),
                    _ => return ("404 Not Found", Vec::new(), "{}".into()),
                };
                let mut s = self.state.lock().unwrap();
                match s.out.iter().position(|(i, ..)| i == id) {
                    Some(p) => {
                        let (_, tx, at) = s.out.remove(p);
                        let _ = tx.send((answer, at.elapsed()));
                        ("202 Accepted", Vec::new(), r#"{"status":"OK"}"#.into())
                    }
                    None => (
                        "400 Bad Request",
                        Vec::new(),
                        r#"{"errorType":"InvalidRequestID","errorMessage":"unknown request id"}"#
                            .into(),
                    ),
                }
            }
            _ => ("404 Not Found", Vec::new(), "{}".into()),
        }
    }
}

fn rand_id() -> u128 {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).expect("random bytes");
    u128::from_le_bytes(b)
}

/// One request: method, path, body. `None` when the peer closed.
async fn read_request<R: tokio::io::AsyncBufRead + Unpin>(
    r: &mut R,
) -> std::io::Result<Option<(String, String, String)>> {
    let mut line = String::new();
    if r.read_line(&mut line).await? == 0 {
        return Ok(None);
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_owned();
    let path = parts.next().unwrap_or_default().to_owned();
    let (mut length, mut chunked) = (0usize, false);
    loop {
        let mut h = String::new();
        if r.read_line(&mut h).await? == 0 {
            return Ok(None);
        }
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
            if k == "content-length" {
                length = v.parse().unwrap_or(0);
            } else if k == "transfer-encoding" && v.eq_ignore_ascii_case("chunked") {
                chunked = true;
            }
        }
    }
    let mut body = Vec::new();
    if chunked {
        loop {
            let mut size = String::new();
            r.read_line(&mut size).await?;
            let n = usize::from_str_radix(size.trim().split(';').next().unwrap_or("0"), 16)
                .unwrap_or(0);
            let mut chunk = vec![0u8; n + 2];
            r.read_exact(&mut chunk).await?;
            if n == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..n]);
        }
    } else {
        body.resize(length, 0);
        r.read_exact(&mut body).await?;
    }
    Ok(Some((
        method,
        path,
        String::from_utf8_lossy(&body).into_owned(),
    )))
}
