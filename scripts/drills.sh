#!/usr/bin/env bash
# The drill three ways, non-interactively, as `make test` runs it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
cargo build --workspace --bins --quiet
for decision in approve reject timeout; do
  echo "==> drill: DRILL_DECISION=$decision"
  DRILL_DECISION=$decision "${CARGO_TARGET_DIR:-$root/target}/debug/drill"
done
echo "drills: 3 passed, 0 failed"
