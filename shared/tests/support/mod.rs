//! Starting a private emulator whose router sends Lambda invokes to a
//! loopback endpoint of the test.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

/// The emulator process this test started; stopped by its id on drop.
pub struct Emulator {
    child: Child,
    pub endpoint: String,
    _dir: TempDir,
}

impl Drop for Emulator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub async fn start_emulator(lambda_upstream: &str) -> Emulator {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned();
    let python = root.join(".venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run scripts/venv.sh (make test does). This test does not skip.",
        python.display()
    );
    let dir = TempDir(std::env::temp_dir().join(format!("handover-rt-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).unwrap();
    let ready = dir.0.join("ready.json");
    let child = Command::new(python)
        .arg(root.join("harness/py/handover_emulator.py"))
        .arg("--ready-file")
        .arg(&ready)
        .arg("--lambda-upstream")
        .arg(lambda_upstream)
        .stdout(std::fs::File::create(dir.0.join("emulator.log")).unwrap())
        .stderr(std::fs::File::create(dir.0.join("emulator.err")).unwrap())
        .spawn()
        .expect("start the emulator");
    let mut emulator = Emulator {
        child,
        endpoint: String::new(),
        _dir: dir,
    };
    for _ in 0..300 {
        if let Ok(text) = std::fs::read_to_string(&ready) {
            let v: Value = serde_json::from_str(&text).unwrap();
            emulator.endpoint = v["endpoint"].as_str().unwrap().to_owned();
            return emulator;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the emulator did not become ready in 30 s");
}
