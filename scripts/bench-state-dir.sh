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
export PATH="/opt/swift/usr/bin:$PATH"
REPS=7
BUILD=1
while [ $# -gt 0 ]; do
    case "$1" in
        --reps) REPS="$2"; shift ;;
        --reps=*) REPS="${1#*=}" ;;
        --skip-build) BUILD=0 ;;
        -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
        *) echo "bench-state-dir.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
if [ "$BUILD" = 1 ]; then
    swift build --quiet -c release --scratch-path .build-bench --product relayd
    swift build --quiet -c release --scratch-path .build-bench --product relay-bench
fi
BIN=$(swift build -c release --scratch-path .build-bench --show-bin-path)
WORK=$(mktemp -d /tmp/relayd-bench-state.XXXXXX)
PID=""
trap '[ -n "$PID" ] && kill "$PID" 2>/dev/null; rm -rf "$WORK"' EXIT
SECRET="bench-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
read -r LOW _ < /proc/sys/net/ipv4/ip_local_port_range
MAX_PORT=$((LOW - 1))
MIN_PORT=$((MAX_PORT - 19999))
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

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
