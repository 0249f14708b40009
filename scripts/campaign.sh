#!/usr/bin/env bash
# The fault campaign (harness/src/campaign.rs): seeded failover incidents
# through the real state machine and binaries under injected faults, with
# Handover's invariants checked after each run. It starts its own emulator,
# PostgreSQL and functions, like the drill.
#   HANDOVER_CAMPAIGN_RUNS (default 40), HANDOVER_CAMPAIGN_SEED,
#   HANDOVER_CAMPAIGN_REPLAY=<seed> (one seed, as a violation line prints it),
#   HANDOVER_CAMPAIGN_OUT (default out/campaign).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
scripts/venv.sh
scripts/ensure-postgres.sh
cargo build --workspace --bins --quiet
exec "${CARGO_TARGET_DIR:-$root/target}/debug/campaign"
