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
exec "$bin" --test-threads=1 "$@"
