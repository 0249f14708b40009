#!/usr/bin/env bash
# `make bench`: what is measured so far, on this machine (figures in the
# README with the machine they were taken on).
#
# 1. The report: a synthetic 25,000-event execution history read, folded,
#    built and rendered (shared/benches/report_history.rs; release profile,
#    wall time and peak heap from a counting allocator).
# 2. Automation time in the RTO: from the newest approve drill's report (one
#    is run if there is none), the seconds from the decision to the
#    PromoteReadReplica call, and each state's time between them.
# 3. Cold start, Rust against a Python peer (harness/src/bin/lambda_bench.rs):
#    the release `detect` and the hello-world floor, and the Python 3 + boto3
#    peer under awslambdaric (bench/python/), each spawned cold under a local
#    Lambda Runtime API against the drill's world, under a cgroup CPU quota
#    for the template's MemorySize where the machine allows it.
#
# Not built yet (issue "Performance, measured side by side"): the Python peer
# of `slack` and the Slack click's cold p50/p99.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
step() { printf '==> [%4ss] %s\n' "$SECONDS" "$*"; }
step "report bench (release profile: the first run builds the SDK optimised, several minutes on 2 cores)"
cargo bench -q -p handover --bench report_history
step "automation time from click to PromoteReadReplica (the approve drill)"
report=$(ls -d out/drill-*-approve 2>/dev/null | sort | tail -1)
if [ -z "$report" ]; then
  scripts/venv.sh
  scripts/ensure-postgres.sh
  cargo build --workspace --bins --quiet
  DRILL_DECISION=approve "${CARGO_TARGET_DIR:-$root/target}/debug/drill" > /dev/null
  report=$(ls -d out/drill-*-approve | sort | tail -1)
fi
python3 - "$report/report.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
d = {x["key"]: x for x in r["durations"]}
a = d["approval_to_promotion"]
print(f"bench automation: decision -> PromoteReadReplica {a['value_s']:.2f} s ({a['how']})")
states = r["states"]
names = [s["name"] for s in states]
try:
    i, j = names.index("RequestApproval"), names.index("Promote")
except ValueError:
    sys.exit("the drill's report has no RequestApproval and Promote states")
for s in states[i + 1 : j + 1]:
    print(f"  {s['name']:<16} {s['duration_s']:6.3f} s")
print(f"  (from {sys.argv[1]})")
PY
step "cold start: release detect and the floor against the Python peer (local Lambda Runtime API)"
scripts/venv.sh
scripts/ensure-postgres.sh
cargo build --release --quiet -p detect -p handover-testkit --bin detect --bin floor
cargo build --workspace --bins --quiet
HANDOVER_BENCH_BIN="${CARGO_TARGET_DIR:-$root/target}/release" HANDOVER_BENCH_RUNS=${HANDOVER_BENCH_RUNS:-10} \
  "${CARGO_TARGET_DIR:-$root/target}/debug/lambda_bench"
