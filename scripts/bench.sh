#!/usr/bin/env bash
# `make bench`: what is measured so far, on this machine (figures in the
# page docs/explanation/performance.md, with the machine they were taken on).
#
# 1. The report: a synthetic 25,000-event execution history read, folded,
#    built and rendered (shared/benches/report_history.rs; release profile,
#    wall time and peak heap from a counting allocator).
# 2. Automation time in the RTO: a fresh approve drill, and from its report
#    and its call log (bench/automation.py) the seconds from the decision to
#    the PromoteReadReplica call, piece by piece: the world's RDS waits, the
#    re-check's probe timeout, cold starts, and Handover's own time.
# 3. Cold start, Rust against a Python peer (harness/src/bin/lambda_bench.rs):
#    the release `detect` and `slack` and the hello-world floor, and the
#    Python 3 + boto3 peers under awslambdaric (bench/python/), each spawned
#    cold under a local Lambda Runtime API against the drill's world, under a
#    cgroup CPU quota for the template's MemorySize where the machine allows
#    it; the Slack click (request -> 200 with the decision applied) cold and
#    warm, p50 and p99 over 20 cold starts.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
step() { printf '==> [%4ss] %s\n' "$SECONDS" "$*"; }
step "report bench (release profile: the first run builds the SDK optimised, several minutes on 2 cores)"
cargo bench -q -p handover --bench report_history
step "automation time from click to PromoteReadReplica (a fresh approve drill, call by call)"
scripts/venv.sh
scripts/ensure-postgres.sh
cargo build --workspace --bins --quiet
DRILL_DECISION=approve "${CARGO_TARGET_DIR:-$root/target}/debug/drill" > /dev/null
.venv/bin/python bench/automation.py "$(ls -d out/drill-*-approve | sort | tail -1)"
step "cold start: release detect, slack and the floor against the Python peers (local Lambda Runtime API)"
cargo build --release --quiet -p detect -p slack -p handover-testkit --bin detect --bin slack --bin floor
HANDOVER_BENCH_BIN="${CARGO_TARGET_DIR:-$root/target}/release" HANDOVER_BENCH_RUNS=${HANDOVER_BENCH_RUNS:-10} \
  "${CARGO_TARGET_DIR:-$root/target}/debug/lambda_bench"
step "package sizes: sam build of every function (release, aarch64), each directory zipped as sam deploy uploads it"
scripts/build.sh
.venv/bin/python - infra/.aws-sam/build <<'PY'
import io, os, sys, zipfile
out = sys.argv[1]
rows = []
for fn in sorted(os.listdir(out)):
    boot = os.path.join(out, fn, "bootstrap")
    if not os.path.isfile(boot):
        continue
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name in os.listdir(os.path.join(out, fn)):
            z.write(os.path.join(out, fn, name), name)
    rows.append((fn, os.path.getsize(boot), len(buf.getvalue())))
for fn, raw, zipped in rows:
    print(f"bench package {fn}: bootstrap {raw / 1e6:.1f} MB, {zipped / 1e6:.1f} MB zipped")
print(f"bench package: {len(rows)} functions, {sum(z for _, _, z in rows) / 1e6:.1f} MB zipped in all")
PY
