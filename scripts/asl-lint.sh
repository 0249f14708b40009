#!/usr/bin/env bash
# Validate statemachine.asl.json with statelint, after the same
# DefinitionSubstitutions the SAM template applies (placeholder ARNs).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp --suffix .json)
trap 'rm -f "$tmp"' EXIT
sed -E 's/\$\{([A-Za-z]+)FunctionArn\}/arn:aws:lambda:ap-northeast-1:123456789012:function:\1/g' \
  "$root/statemachine.asl.json" > "$tmp"
if grep -q '\${' "$tmp"; then
  echo "statemachine.asl.json has a substitution the lint does not know: $(grep -o '\${[^}]*}' "$tmp" | sort -u | tr '\n' ' ')" >&2
  exit 1
fi
"$root/.venv/bin/statelint" "$tmp"
