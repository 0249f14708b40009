#!/usr/bin/env bash
# Create or refresh .venv with the pinned Python tools (moto, cfn-lint, statelint,
# cargo-lambda, aws-sam-translator). Idempotent: does nothing when the pins
# have not changed since the last install.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv="$root/.venv"
req="$root/harness/py/requirements.txt"
stamp="$venv/.requirements.sha256"
want=$(sha256sum "$req" | cut -d' ' -f1)
if [ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  exit 0
fi
echo "==> setting up $venv (pinned: $(grep -v '^#' "$req" | tr '\n' ' '))"
python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --upgrade pip
"$venv/bin/pip" install --quiet -r "$req"
echo "$want" > "$stamp"
