#!/usr/bin/env bash
# `make build`: `sam build` of infra/template.yaml, each function built by SAM's
# rust-cargolambda method (cargo lambda, release profile, arm64 for
# provided.al2023). Output: infra/.aws-sam/build (template.yaml + one
# directory per function with `bootstrap` at its root), which `sam deploy`
# uploads. Optional arguments: the logical ids of the functions to build.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/venv.sh"
# cargo lambda cross-compiles with Zig (the ziglang wheel beside it in .venv).
rustup target list --installed 2>/dev/null | grep -qx aarch64-unknown-linux-gnu \
  || rustup target add aarch64-unknown-linux-gnu
export PATH="$root/.venv/bin:$PATH"
# No telemetry calls from the SAM CLI (there is no network here, and CI has none).
export SAM_CLI_TELEMETRY=0
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
cd "$root/infra"
# rust-cargolambda is still a beta build method in the SAM CLI.
start=$SECONDS
sam build --beta-features --template-file template.yaml "$@"
echo "sam build: $((SECONDS - start)) s"
