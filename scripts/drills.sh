#!/usr/bin/env bash
# The drill five ways, non-interactively, as `make test` runs it.
# The drills run in two lanes side by side, each drill a world of its own
# (emulator, PostgreSQL, apps, functions on ports of their own). A drill
# mostly waits on the world's modelled delays, so two lanes on two cores
# take about half the time of one. Each line is prefixed with its drill.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
cargo build --workspace --bins --quiet
bin="${CARGO_TARGET_DIR:-$root/target}/debug/drill"
# One drill, its lines prefixed with its name.
drill() {
  local decision=$1 level=info pace=fast scale=
  # The reject drill runs the functions at TRACE: its log scan proves that
  # lambda_runtime's raw events (task token, response_url) stay out of the logs.
  [ "$decision" = reject ] && level=trace
  # The approve drill runs at AWS's pace (k = 10): the ratios a real
  # account has, and the comparison table. The others run fast.
  [ "$decision" = approve ] && pace=real && scale=10
  echo "==> drill: DRILL_DECISION=$decision HANDOVER_PACE=$pace${scale:+ HANDOVER_SCALE=$scale} (functions at RUST_LOG=$level)"
  HANDOVER_PACE=$pace HANDOVER_SCALE=$scale HANDOVER_DRILL_RUST_LOG=$level DRILL_DECISION=$decision "$bin"
}
# A lane runs its drills one after another and stops at the first failure.
# The lanes are balanced by each drill's length, measured alone: approve
# (124 s, at AWS's pace) + reject (48 s) + switchover (69 s), against the
# round trip (177 s, with its cooldown wait) + timeout (78 s).
lane() {
  local decision
  while [ $# -gt 0 ]; do
    decision=$1; shift
    if ! drill "$decision" > >(sed -u "s/^/[$decision] /") 2>&1; then
      echo "[$decision] drill FAILED${1:+; not run after it: $*}" >&2
      return 1
    fi
    echo "[$decision] drill passed"
  done
}
lane approve reject switchover &
a=$!
lane roundtrip timeout &
b=$!
failed=0
wait "$a" || failed=1
wait "$b" || failed=1
sleep 0.2 # the prefixing pipes drain
[ "$failed" = 0 ] || { echo "drills: a lane failed; see the [decision] lines above" >&2; exit 1; }
echo "drills: 5 passed, 0 failed"
