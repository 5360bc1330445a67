#!/usr/bin/env bash
# Counts what relayd does per relayed packet, without timing anything: calls into the Swift
# runtime (swift_retain, swift_release, swift_beginAccess: reference counting and exclusivity
# checks) through uprobes on libswiftCore, and the relaying syscalls (recvmmsg, sendmmsg,
# epoll_wait) through their tracepoints, while relay-bench drives a fixed paced load. The counts
# do not depend on how busy the machine is, so two builds compare exactly where scripts/bench.sh
# sees 5-20 % of noise (docs/benchmark.md, "Counting instead of timing").
#
#   scripts/count-runtime-calls.sh [--pattern client-to-client|external-peer] [--seconds N] BIN...
#
# For each release binary BIN: starts it on loopback (UDP only, REST auth, the relay port range
# below the ephemeral range), runs relay-bench at 5,000 packets/s with 50 pairs and 100-byte
# payloads, waits 6 s, counts for N seconds (default 4) in the server process, stops both by PID.
# Prints one line per binary: the counts per 1,000 relayed packets (each message of the paced
# load is relayed twice, in both patterns). Needs root (perf probes);
# the probes it adds are removed on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
PATTERN=client-to-client
SECONDS_COUNTED=4
RATE=5000
while [ $# -gt 0 ]; do
    case "$1" in
        --pattern) PATTERN=$2; shift 2 ;;
        --seconds) SECONDS_COUNTED=$2; shift 2 ;;
        -h|--help) sed -n 2,15p "$0"; exit 0 ;;
        *) break ;;
    esac
done
[ $# -ge 1 ] || { echo "usage: $0 [--pattern P] [--seconds N] BIN..." >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "count-runtime-calls.sh: needs root for perf probes" >&2; exit 2; }
command -v perf >/dev/null || { echo "count-runtime-calls.sh: perf is not installed (linux-perf)" >&2; exit 2; }

export PATH=/opt/swift/usr/bin:$PATH
BENCH=$ROOT/.build/release/relay-bench
[ -x "$BENCH" ] || swift build -c release --product relay-bench >&2
LIBSWIFT=$(dirname "$(readlink -f "$(command -v swift)")")/../lib/swift/linux/libswiftCore.so
WORK=$(mktemp -d)
SERVER=""
LOAD=""
cleanup() {
    [ -n "$LOAD" ] && kill "$LOAD" 2>/dev/null || true
    [ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null || true
    perf probe -q -d 'probe_libswiftCore:*' 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
for function in swift_retain swift_release swift_beginAccess; do
    perf probe -q -x "$LIBSWIFT" "$function" >/dev/null
done
EVENTS=probe_libswiftCore:swift_retain,probe_libswiftCore:swift_release,probe_libswiftCore:swift_beginAccess
EVENTS=$EVENTS,syscalls:sys_enter_recvmmsg,syscalls:sys_enter_sendmmsg,syscalls:sys_enter_epoll_wait

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

printf '%-50s %9s %9s %9s %9s %9s %9s\n' "binary ($PATTERN, per 1000 packets)" retain release access \
    recvmmsg sendmmsg epoll
for binary in "$@"; do
    port=$(free_port)
    api=$(free_port)
    : > "$WORK/relayd.conf"
    "$binary" -c "$WORK/relayd.conf" --listening-ip=127.0.0.1 --listening-port="$port" --relay-ip=127.0.0.1 \
        --min-port=12768 --max-port=32767 --use-auth-secret --static-auth-secret=s3cret --realm=bench.local \
        --allow-loopback-peers --no-tcp --no-tls --no-dtls --api-listening-ip=127.0.0.1 \
        --api-listening-port="$api" --drain-timeout=0 --log-level=notice --log-file="$WORK/relayd.log" \
        >"$WORK/out.log" 2>&1 &
    SERVER=$!
    sleep 1
    timeout 60 "$BENCH" --server "127.0.0.1:$port" --secret s3cret --realm bench.local --server-pid "$SERVER" \
        --label count --pattern "$PATTERN" --payload 100 --pairs 50 --rate "$RATE" \
        --duration $((SECONDS_COUNTED + 20)) --warmup 1 >/dev/null 2>&1 &
    LOAD=$!
    sleep 6
    perf stat -x, -e "$EVENTS" -p "$SERVER" -o "$WORK/counts.csv" -- sleep "$SECONDS_COUNTED" >/dev/null 2>&1
    kill "$LOAD" "$SERVER" 2>/dev/null || true
    wait "$SERVER" 2>/dev/null || true
    LOAD=""
    SERVER=""
    # Both patterns relay each message twice (relay-bench's table says so), at a paced rate
    # relay-bench keeps without loss here.
    python3 - "$WORK/counts.csv" "$binary" "$((2 * RATE * SECONDS_COUNTED))" <<'EOF'
import sys
counts = {}
for line in open(sys.argv[1]):
    fields = line.strip().split(",")
    if len(fields) > 2 and fields[0].isdigit():
        counts[fields[2].split(":")[-1]] = int(fields[0])
packets = max(int(sys.argv[3]), 1) / 1000
names = ["swift_retain", "swift_release", "swift_beginAccess", "sys_enter_recvmmsg", "sys_enter_sendmmsg",
         "sys_enter_epoll_wait"]
label = sys.argv[2][-50:]
print(f"{label:<50} " + " ".join(f"{counts.get(n, 0) / packets:9.1f}" for n in names))
EOF
done
