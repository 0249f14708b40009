#!/usr/bin/env bash
# `make test`: everything a clean clone needs, then every check and test.
# Each step prints its elapsed time so a cold build never looks like a hang.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
step() { printf '==> [%4ss] %s\n' "$SECONDS" "$*"; }
# Every temporary file of the run (the functions' logs, about 150 MB for the
# drill at TRACE; PostgreSQL data dirs; plans) goes under one directory,
# removed when the run passes and kept, with its path printed, when it fails.
run_tmp=$(mktemp -d "${TMPDIR:-/tmp}/handover-test.XXXXXX")
chmod 755 "$run_tmp" # PostgreSQL runs as its own user under root
export TMPDIR=$run_tmp
# Two jobs run in the background, each in its own process group that the
# exit trap stops: the Python tools with the validators (beside the build),
# and the packaged-layout check (beside the tests, drills and campaign).
# `set -m` gives each job its group. Each stays in this session: a new
# session (setsid) would get its own scheduler autogroup, where nice 19 no
# longer yields to the tests.
bg_pids=()
trap 'rc=$?; for pid in "${bg_pids[@]}"; do kill -- -"$pid" 2>/dev/null || true; done; if [ $rc -eq 0 ]; then rm -rf "$run_tmp"; else echo "make test failed; its temporary files are in $run_tmp" >&2; fi' EXIT
# Start a background job with its own process group; its pid is $!. Its
# stdin is /dev/null: a job of its own group that read the terminal
# would be stopped, and the run would hang waiting for it.
bg() { set -m; "$@" </dev/null & set +m; bg_pids+=($!); }
# Wait for a background job and print its log; fail the run if it failed.
# A reaped job leaves the list, so the trap never signals a reused pid.
bg_wait() {
  local pid=$1 log=$2 what=$3 rc=0 p
  wait "$pid" || rc=$?
  local left=()
  for p in "${bg_pids[@]}"; do [ "$p" = "$pid" ] || left+=("$p"); done
  bg_pids=("${left[@]}")
  cat "$log"
  [ "$rc" -eq 0 ] || { echo "$what failed (exit $rc)" >&2; exit "$rc"; }
}
# PostgreSQL first, in the foreground: an install the trap stopped half
# way would leave dpkg interrupted. It does nothing when it is there.
scripts/ensure-postgres.sh
step "python tools (.venv) and the validators, in the background beside the build"
# The tools install mostly waits on the package registry, and the
# validators take one core for about 16 s: beside the test build, they
# save their 100 s of a clean run. Their log prints after the build.
tools_log="$run_tmp/tools.log"
bg bash -c 'scripts/venv.sh && scripts/validate.sh' >"$tools_log" 2>&1
tools_pid=$!
step "cargo fmt --check"
cargo fmt --all --check
# Clippy in the same pass as the test build: clippy-driver compiles the
# workspace's own crates (what `cargo clippy` does, with codegen), so the
# dependencies are built once, not once for `cargo check` and again for the
# tests (about 280 s on 2 cores). Every later cargo command here, and the
# `cargo lambda watch` the tests start, inherit it and reuse those builds.
# `make lint` is the standalone `cargo clippy`.
RUSTC_WORKSPACE_WRAPPER="$(rustc --print sysroot)/bin/clippy-driver"
[ -x "$RUSTC_WORKSPACE_WRAPPER" ] || { echo "clippy-driver not found at $RUSTC_WORKSPACE_WRAPPER (rustup component add clippy)" >&2; exit 1; }
export RUSTC_WORKSPACE_WRAPPER
export CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"
step "build tests and clippy -D warnings, every target (first run compiles the AWS SDK: several minutes on 2 cores)"
# Every target but the binaries' own test harnesses: the functions' and
# the tools' binaries have no tests (test = false in their manifests), and
# --all-targets would build a harness for each anyway, linking the AWS SDK
# again. The binaries themselves are built, and linted, just below.
cargo test --workspace --tests --benches --examples --no-run --quiet
cargo build --workspace --bins --quiet
step "python tools and the validators (started beside the build)"
bg_wait "$tools_pid" "$tools_log" "the tools set-up or a validator"
step "unit tests, with no emulator and no PostgreSQL (make unit)"
env -u HANDOVER_TEST_AWS_ENDPOINT -u AWS_ENDPOINT_URL -u HANDOVER_TEST_PG make --no-print-directory unit
step "bench, reduced: detect and slack cold against their Python peers (the debug build, 3 cold starts each; fails unless Rust's init is faster in this run)"
# Alone on the machine: it compares cold starts. Nothing runs beside it.
HANDOVER_BENCH_BIN="${CARGO_TARGET_DIR:-$root/target}/debug" HANDOVER_BENCH_RUNS=3 HANDOVER_BENCH_CLICKS=3 HANDOVER_BENCH_CHECK=1 \
  "${CARGO_TARGET_DIR:-$root/target}/debug/lambda_bench"
step "packaged layout, started in the background at the lowest CPU priority: sam build of DetectFunction (release, aarch64)"
# The tests, the drills and the campaign mostly wait: on the emulator, on
# the world's modelled delays. The arm64 build (300 to 540 s alone) takes
# the CPU they leave, at nice 19 so that they keep priority, and the
# disk at the idle I/O class. Cargo locks each profile's directory on its
# own, so this release build never holds the debug directory that
# `cargo lambda watch` needs.
package_log="$run_tmp/package-check.log"
bg env -u RUSTC_WORKSPACE_WRAPPER -u CLIPPY_ARGS nice -n 19 ionice -c 3 scripts/package-check.sh >"$package_log" 2>&1
package_pid=$!
step "tests (unit + against the moto emulator; path tests run the real binaries under cargo lambda watch)"
scripts/with-emulator.sh bash -c 'cargo test --workspace -- --skip path_ && scripts/paths.sh'
step "drills: approve, reject, approval timeout, switchover, roundtrip (full local runs)"
scripts/drills.sh
step "fault campaign: seeded incidents under injected faults (R >= 40 runs, 2 worlds side by side)"
HANDOVER_CAMPAIGN_RUNS=${HANDOVER_CAMPAIGN_RUNS:-40} HANDOVER_CAMPAIGN_SHARDS=${HANDOVER_CAMPAIGN_SHARDS:-2} scripts/campaign.sh
step "packaged layout: waiting for the background check (a plain production build, as make build makes it)"
bg_wait "$package_pid" "$package_log" "the packaged-layout check"
step "done"
