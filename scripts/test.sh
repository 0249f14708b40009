#!/usr/bin/env bash
# `make test`: everything a clean clone needs, then every check and test.
# Each step prints its elapsed time so a cold build never looks like a hang.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
step() { printf '==> [%4ss] %s\n' "$SECONDS" "$*"; }
step "python tools (.venv)"
scripts/venv.sh
scripts/ensure-postgres.sh
scripts/lint.sh
step "build tests (first run compiles the AWS SDK: several minutes on 2 cores)"
cargo test --workspace --no-run --quiet
step "tests (unit + against the moto emulator; path tests run the real binaries under cargo lambda watch)"
scripts/with-emulator.sh bash -c 'cargo test --workspace -- --skip path_ && scripts/paths.sh' 
step "drills: approve, reject, approval timeout (full local runs)"
scripts/drills.sh
step "fault campaign: seeded incidents under injected faults (R >= 40 runs)"
HANDOVER_CAMPAIGN_RUNS=${HANDOVER_CAMPAIGN_RUNS:-40} scripts/campaign.sh
step "packaged layout: sam build of DetectFunction (release, aarch64; the first run builds the SDK for arm64)"
scripts/package-check.sh
step "done"
