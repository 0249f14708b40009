#!/usr/bin/env bash
# The fault campaign (harness/src/campaign.rs): seeded failover incidents
# through the real state machine and binaries under injected faults, with
# Handover's invariants checked after each run. It starts its own emulator,
# PostgreSQL and functions, like the drill.
#   HANDOVER_CAMPAIGN_RUNS (default 40), HANDOVER_CAMPAIGN_SEED,
#   HANDOVER_CAMPAIGN_REPLAY=<seed> (one seed, as a violation line prints it),
#   HANDOVER_CAMPAIGN_OUT (default out/campaign),
#   HANDOVER_CAMPAIGN_SHARDS (default 1): split the runs over that many
#   worlds side by side, each with its own emulator, database and functions,
#   shard i drawing from seed + i. A run mostly waits on the world's modelled
#   delays, so two shards on two cores take little more than half the time.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
scripts/venv.sh
scripts/ensure-postgres.sh
cargo build --workspace --bins --quiet
bin="${CARGO_TARGET_DIR:-$root/target}/debug/campaign"
shards=${HANDOVER_CAMPAIGN_SHARDS:-1}
if [ "$shards" = 1 ] || [ -n "${HANDOVER_CAMPAIGN_REPLAY:-}" ]; then
  exec "$bin"
fi
runs=${HANDOVER_CAMPAIGN_RUNS:-40}
seed=${HANDOVER_CAMPAIGN_SEED:-20261201}
out=${HANDOVER_CAMPAIGN_OUT:-$root/out/campaign}
rm -rf "$out"; mkdir -p "$out"
pids=()
for ((i = 0; i < shards; i++)); do
  n=$(( runs / shards + (i < runs % shards ? 1 : 0) ))
  HANDOVER_CAMPAIGN_RUNS=$n HANDOVER_CAMPAIGN_SEED=$((seed + i)) HANDOVER_CAMPAIGN_OUT="$out/shard-$i" \
    "$bin" > >(sed -u "s/^/[shard $i] /" | tee "$out/shard-$i.log") 2>&1 &
  pids+=($!)
done
failed=0
for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
sleep 0.2 # the log pipes drain
# One summary for the whole campaign, from each shard's own line.
python3 - "$out" "$shards" <<'PY'
import re, sys, pathlib
out, shards = pathlib.Path(sys.argv[1]), int(sys.argv[2])
r = f = v = 0
for i in range(shards):
    text = (out / f"shard-{i}.log").read_text()
    m = re.findall(r"fault campaign: (\d+) runs, (\d+) faults injected, (\d+) invariant violations", text)
    if not m:
        sys.exit(f"campaign: shard {i} printed no summary; see {out}/shard-{i}.log")
    r, f, v = r + int(m[-1][0]), f + int(m[-1][1]), v + int(m[-1][2])
print(f"fault campaign: {r} runs, {f} faults injected, {v} invariant violations ({shards} shards)")
PY
exit $failed
