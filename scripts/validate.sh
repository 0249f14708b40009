#!/usr/bin/env bash
# The validators for the state machine and the SAM template: statelint,
# cfn-lint (+ the SAM-expanded template), and the IAM roles against the code.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
step() { printf '==> [%4ss] %s\n' "$SECONDS" "$*"; }
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
