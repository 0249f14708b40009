//! Capture what `tracing` writes, in the JSON format the functions use, so a
//! test can assert that no secret or task token ever reaches a log line.

use std::io::Write;
use std::sync::{Arc, Mutex};
use tracing_subscriber::fmt::MakeWriter;

/// A shared buffer that collects log output.
#[derive(Clone, Default)]
pub struct Captured(Arc<Mutex<Vec<u8>>>);

impl Captured {
    /// Everything logged so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().expect("log buffer")).into_owned()
    }
}

/// Writer handed to tracing.
pub struct CapturedWriter(Arc<Mutex<Vec<u8>>>);

impl Write for CapturedWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("log buffer").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Captured {
    type Writer = CapturedWriter;
    fn make_writer(&'a self) -> Self::Writer {
        CapturedWriter(self.0.clone())
    }
}

/// Run `f` with JSON logs at TRACE level captured (every level, so nothing hides).
pub async fn capture<F: std::future::Future>(f: F) -> (F::Output, String) {
    let captured = Captured::default();
    // TRACE everywhere but the SDK, which is capped as in production.
    let filter = handover::telemetry::capped("trace");
    let subscriber = tracing_subscriber::fmt()
        .json()
        .with_env_filter(filter)
        .with_writer(captured.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let out = f.await;
    (out, captured.text())
}
