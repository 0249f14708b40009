//! The harness's own processes: the workspace they run from, a guard that
//! kills a child when dropped, and progress lines.

use std::fmt;
use std::path::PathBuf;
use std::process::Child;
use std::time::Instant;

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("harness/ has a parent")
        .to_path_buf()
}

/// A child process killed when dropped (on failure and on Ctrl-C too).
pub struct Guard(pub Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Print a progress line with the elapsed time.
pub fn say(started: Instant, msg: impl fmt::Display) {
    println!("[{:>6.1}s] {msg}", started.elapsed().as_secs_f64());
}
