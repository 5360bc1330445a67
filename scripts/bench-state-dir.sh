#!/usr/bin/env bash
# What the state journal (state-dir, docs/state-journal.md) costs the allocation rate: one
# relayd release build started again and again, without and with state-dir, in alternating
# order, each driven by `relay-bench --setup-only --allocations 5000 --window 64` (401 +
# Allocate, 64 in flight). Prints each run's rate, then the medians and their ratio.
#
#   scripts/bench-state-dir.sh [--reps N] [--skip-build]
#
# Default 7 repetitions (about 3 minutes after the build). Loopback only; servers are stopped by
# PID. Uses the release binaries of scripts/bench.sh (.build-bench).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/bench-lib.sh
bench_options 7 '2,11p' "$@"
bench_build
WORK=$(mktemp -d /tmp/relayd-bench-state.XXXXXX)
PID=""
trap '[ -n "$PID" ] && kill "$PID" 2>/dev/null; rm -rf "$WORK"' EXIT
SECRET="bench-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
bench_port_range
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

# run KIND: one server of KIND (plain or journal), one setup run; prints "KIND RATE".
run() {
    local kind=$1 port api extra=()
    port=$(free_port)
    api=$(free_port)
    if [ "$kind" = journal ]; then rm -rf "$WORK/state"; extra=("--state-dir=$WORK/state"); fi
    : > "$WORK/relayd.conf"
    "$BIN/relayd" -c "$WORK/relayd.conf" --listening-ip=127.0.0.1 "--listening-port=$port" --relay-ip=127.0.0.1 \
        "--min-port=$MIN_PORT" "--max-port=$MAX_PORT" --use-auth-secret "--static-auth-secret=$SECRET" \
        --realm=bench.local --allow-loopback-peers --no-tcp --no-tls --api-listening-ip=127.0.0.1 \
        "--api-listening-port=$api" --drain-timeout=0 --log-level=notice "--log-file=$WORK/relayd.log" \
        "${extra[@]}" >>"$WORK/relayd.out" 2>&1 &
    PID=$!
    for _ in $(seq 100); do ss -Huln "sport = :$port" | grep -q . && break; sleep 0.05; done
    "$BIN/relay-bench" --server "127.0.0.1:$port" --secret "$SECRET" --realm bench.local --server-pid "$PID" \
        --label "$kind" --setup-only --allocations 5000 --window 64 2>>"$WORK/relay-bench.err" | grep '^{' |
        python3 -c 'import json,sys; print(sys.argv[1], json.loads(sys.stdin.read())["setup_rate"])' "$kind"
    kill "$PID"
    wait "$PID" 2>/dev/null || true
    PID=""
}
for rep in $(seq "$REPS"); do
    if [ $((rep % 2)) = 1 ]; then run plain; run journal; else run journal; run plain; fi
done | tee "$WORK/rates"
python3 - "$WORK/rates" <<'PY'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1]) if line.strip()]
plain = statistics.median(float(v) for k, v in rows if k == "plain")
journal = statistics.median(float(v) for k, v in rows if k == "journal")
print(f"medians: without state-dir {plain:,.0f} allocs/s, with state-dir {journal:,.0f} allocs/s, ratio {journal / plain:.2f}")
PY
