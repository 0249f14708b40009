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
  # The approve drill runs at AWS's pace (k = 10): the ratios a real
  # account has, and the comparison table. The others run fast.
  pace=fast; scale=; [ "$decision" = approve ] && pace=real && scale=10
  echo "==> drill: DRILL_DECISION=$decision HANDOVER_PACE=$pace${scale:+ HANDOVER_SCALE=$scale} (functions at RUST_LOG=$level)"
  HANDOVER_PACE=$pace HANDOVER_SCALE=$scale HANDOVER_DRILL_RUST_LOG=$level DRILL_DECISION=$decision \
    "${CARGO_TARGET_DIR:-$root/target}/debug/drill"
done
echo "drills: 5 passed, 0 failed"
