#!/usr/bin/env bash
# Run a command with the local AWS world up: moto (patched, Step Functions
# execution on) behind the Handover router on a free 127.0.0.1 port.
# Exports AWS_ENDPOINT_URL and dummy credentials for the command, and stops
# the emulator afterwards, on failure and on Ctrl-C too.
#   scripts/with-emulator.sh cargo test --workspace
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/venv.sh"
state=$(mktemp -d "${TMPDIR:-/tmp}/handover-emulator.XXXXXX")
chmod 755 "$state"
ready="$state/ready.json"
"$root/.venv/bin/python" "$root/harness/py/handover_emulator.py" --ready-file "$ready" \
  ${HANDOVER_LAMBDA_UPSTREAM:+--lambda-upstream "$HANDOVER_LAMBDA_UPSTREAM"} \
  >"$state/emulator.log" 2>&1 &
pid=$!
cleanup() {
  "$root/scripts/postgres.sh" stop "$state/pg" || true
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  rm -rf "$state"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
for _ in $(seq 1 300); do
  [ -s "$ready" ] && break
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "emulator failed to start:" >&2; cat "$state/emulator.log" >&2; exit 1
  fi
  sleep 0.1
done
[ -s "$ready" ] || { echo "emulator did not become ready in 30 s" >&2; cat "$state/emulator.log" >&2; exit 1; }
endpoint=$("$root/.venv/bin/python" -c 'import json,sys; print(json.load(open(sys.argv[1]))["endpoint"])' "$ready")
export AWS_ENDPOINT_URL="$endpoint" HANDOVER_TEST_AWS_ENDPOINT="$endpoint"
export AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_REGION="${AWS_REGION:-ap-northeast-1}"
unset AWS_PROFILE AWS_SESSION_TOKEN
echo "==> emulator at $endpoint"
# PostgreSQL for the write canary. Under CI it must start; elsewhere its tests fail with a message.
if pg_port=$("$root/scripts/postgres.sh" start "$state/pg" 2>"$state/pg.err"); then
  export HANDOVER_TEST_PG="host=127.0.0.1 port=$pg_port user=handover password=$(cat "$state/pg/password") ca=$state/pg/tls/ca.pem other_ca=$state/pg/tls/other-ca.pem"
  echo "==> postgres at 127.0.0.1:$pg_port"
elif [ "${CI:-}" = true ]; then
  echo "PostgreSQL failed to start under CI:" >&2; cat "$state/pg.err" >&2; exit 1
else
  echo "==> postgres unavailable ($(head -c 200 "$state/pg.err")); canary tests will fail" >&2
fi
set +e
"$@"
status=$?
set -e
if [ $status -ne 0 ] && [ -s "$state/emulator.log" ]; then
  echo "--- emulator log (last 40 lines) ---" >&2; tail -n 40 "$state/emulator.log" >&2
fi
exit $status
