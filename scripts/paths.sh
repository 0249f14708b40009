#!/usr/bin/env bash
# Build the path-test binary and run it directly (inside the emulator world).
# Not through `cargo test`: cargo holds the target directory's lock while its
# tests run, and `cargo lambda watch` needs that lock to start each function.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
cargo build --workspace --bins --quiet
bin=$(cargo test -p handover-testkit --test paths --no-run --message-format=json 2>/dev/null \
  | python3 -c 'import sys, json
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "paths":
        print(m["executable"])')
[ -n "$bin" ] || { echo "could not find the paths test binary" >&2; exit 1; }
# The path tests share one `cargo lambda watch` per function, held in a
# static, which Rust never drops: stop them (and the functions they started)
# when the binary is done. SIGTERM to all first, then wait for each.
pidfile=$(mktemp)
stop_lambdas() {
  local pid
  while read -r pid; do kill -TERM "$pid" 2>/dev/null || true; done < "$pidfile"
  while read -r pid; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- "-$pid" 2>/dev/null || true
  done < "$pidfile"
  rm -f "$pidfile"
}
trap stop_lambdas EXIT
HANDOVER_LAMBDAS_PIDFILE=$pidfile "$bin" --test-threads=1 "$@"
# Every AWS call a function made in these runs (the router logs each with the
# calling function) must be one that function declares and its role grants.
calls=$(mktemp)
.venv/bin/python -c 'import sys, urllib.request
sys.stdout.write(urllib.request.urlopen(sys.argv[1] + "/_handover/calls").read().decode())' \
  "${HANDOVER_TEST_AWS_ENDPOINT:?run inside scripts/with-emulator.sh}" > "$calls"
.venv/bin/python scripts/iam_check.py --observed "$calls"
rm -f "$calls"
