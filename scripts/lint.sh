#!/usr/bin/env bash
# Static checks: formatting, clippy with warnings as errors, and the validators
# for the state machine and the SAM template (scripts/validate.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
step() { printf '==> [%4ss] %s\n' "$SECONDS" "$*"; }
step "cargo fmt --check"
cargo fmt --all --check
step "cargo clippy --all-targets -D warnings"
cargo clippy --workspace --all-targets --quiet -- -D warnings
scripts/validate.sh
