#!/usr/bin/env bash
# `make drill`: set up what is missing, build, and run one local failover drill.
#   DRILL_DECISION=approve|reject|timeout|interactive|switchover (default approve)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
t0=$SECONDS
step() { printf '[%6ss] %s\n' "$((SECONDS - t0))" "$*"; }
step "python tools (.venv: moto, cargo-lambda)"
scripts/venv.sh
scripts/ensure-postgres.sh
step "building the functions and the drill (a cold build of the AWS SDK takes several minutes on 2 cores)"
cargo build --workspace --bins
# Run the binary itself: `cargo run` would hold the target directory's lock,
# which `cargo lambda watch` needs to start each function.
exec "${CARGO_TARGET_DIR:-$root/target}/debug/drill"
