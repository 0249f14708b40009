#!/usr/bin/env bash
# `make test`: everything a clean clone needs, then every check and test.
# Each step prints its elapsed time so a cold build never looks like a hang.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
step() { printf '==> [%4ss] %s\n' "$SECONDS" "$*"; }
step "python tools (.venv)"
scripts/venv.sh
scripts/lint.sh
step "build tests (first run compiles the AWS SDK: several minutes on 2 cores)"
cargo test --workspace --no-run --quiet
step "tests (unit + against the moto emulator)"
scripts/with-emulator.sh cargo test --workspace
step "done"
