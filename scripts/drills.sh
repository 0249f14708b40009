#!/usr/bin/env bash
# The drill five ways, non-interactively, as `make test` runs it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
cargo build --workspace --bins --quiet
for decision in approve reject timeout switchover roundtrip; do
  # The reject drill runs the functions at TRACE: its log scan proves that
  # lambda_runtime's raw events (task token, response_url) stay out of the logs.
  level=info; [ "$decision" = reject ] && level=trace
  echo "==> drill: DRILL_DECISION=$decision (functions at RUST_LOG=$level)"
  HANDOVER_DRILL_RUST_LOG=$level DRILL_DECISION=$decision "${CARGO_TARGET_DIR:-$root/target}/debug/drill"
done
echo "drills: 5 passed, 0 failed"
