#!/usr/bin/env bash
# Static checks: formatting, clippy with warnings as errors, and the validators
# for the state machine and the SAM template (when present).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
step() { printf '==> [%4ss] %s\n' "$SECONDS" "$*"; }
step "cargo fmt --check"
cargo fmt --all --check
step "cargo clippy --all-targets -D warnings"
cargo clippy --workspace --all-targets --quiet -- -D warnings
if [ -f statemachine.asl.json ]; then
  step "statelint statemachine.asl.json"
  scripts/asl-lint.sh
fi
if [ -f infra/template.yaml ]; then
  step "cfn-lint infra/template.yaml (+ the SAM-expanded template)"
  scripts/cfn-lint.sh
  step "IAM roles match the code"
  .venv/bin/python scripts/iam_check.py
fi
