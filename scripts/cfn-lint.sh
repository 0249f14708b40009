#!/usr/bin/env bash
# cfn-lint (with the serverless rules of cfn-lint-serverless) on the SAM
# template, then on the CloudFormation it expands to.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$root/.venv/bin/cfn-lint" --append-rules cfn_lint_serverless.rules -- "$root/infra/template.yaml"
"$root/.venv/bin/python" "$root/scripts/sam_expand.py" "$root/infra/template.yaml" "$tmp/expanded.json"
"$root/.venv/bin/cfn-lint" --append-rules cfn_lint_serverless.rules -- "$tmp/expanded.json"
echo "cfn-lint: template and expanded template clean ($(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["Resources"]))' "$tmp/expanded.json") resources)"
