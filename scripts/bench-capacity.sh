#!/usr/bin/env bash
# Node capacity (docs/benchmark.md, "Node capacity"): one relayd (release build) holds N idle UDP
# allocations over three relay addresses, made and refreshed by relay-bench, in a network
# namespace of its own (so 127.0.0.2 and 127.0.0.3 can be added to its loopback). Prints what
# each allocation costs the process (RSS) and the kernel (slab, the machine's; UDP socket memory
# from /proc/net/sockstat, both ends' sockets), the descriptors, the relay sockets per address,
# and the setup rate. Root. Every process is stopped by PID and the namespace removed.
#
#   scripts/bench-capacity.sh [--allocations N] [--skip-build]
#
# Default 15,000: with relay-bench's own socket per allocation, the most a process limit of
# 20,000 descriptors shows here.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
N=15000
BUILD=1
while [ $# -gt 0 ]; do
    case "$1" in
        --allocations) N=$2; shift 2 ;;
        --skip-build) BUILD=0; shift ;;
        -h|--help) sed -n '2,/^set -e/{/^#/p}' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench-capacity: unknown argument $1" >&2; exit 2 ;;
    esac
done
[ "$(id -u)" = 0 ] || { echo "bench-capacity: needs root (a network namespace)" >&2; exit 1; }
export PATH="/opt/swift/usr/bin:$PATH"
if [ "$BUILD" = 1 ]; then
    swift build --quiet -c release --scratch-path .build-bench --product relayd
    swift build --quiet -c release --scratch-path .build-bench --product relay-bench
fi
BIN=$(swift build -c release --scratch-path .build-bench --show-bin-path)
NS="relayd-capacity-$$"
WORK=$(mktemp -d /tmp/relayd-capacity.XXXXXX)
RELAYD_PID="" BENCH_PID=""
cleanup() {
    for pid in $BENCH_PID $RELAYD_PID; do kill -9 "$pid" 2>/dev/null || true; done
    for pid in $BENCH_PID $RELAYD_PID; do wait "$pid" 2>/dev/null || true; done
    ip netns del "$NS" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
ip netns add "$NS"
ip -n "$NS" link set lo up
ip -n "$NS" addr add 127.0.0.2/8 dev lo
ip -n "$NS" addr add 127.0.0.3/8 dev lo
: > "$WORK/relayd.conf"
ip netns exec "$NS" "$BIN/relayd" -c "$WORK/relayd.conf" --listening-ip=127.0.0.1 --listening-port=3478 \
    --relay-ip=127.0.0.1 --relay-ip=127.0.0.2 --relay-ip=127.0.0.3 --min-port=40000 --max-port=47999 \
    --use-auth-secret --static-auth-secret=capacity-secret-0123456789 --no-tcp --no-tls \
    --api-listening-ip=127.0.0.1 --api-listening-port=8080 --log-level=warning --drain-timeout=0 \
    > "$WORK/relayd.log" 2>&1 &
RELAYD_PID=$!
sleep 1
rss() { awk '/^VmRSS:/ {print $2}' "/proc/$RELAYD_PID/status"; }
slab() { awk '/^Slab:/ {print $2}' /proc/meminfo; }
udp_pages() { ip netns exec "$NS" awk '/^UDP:/ {print $5}' /proc/net/sockstat; }
r0=$(rss); s0=$(slab); u0=$(udp_pages); f0=$(ls "/proc/$RELAYD_PID/fd" | wc -l)
start=$(date +%s.%N)
ip netns exec "$NS" "$BIN/relay-bench" --server 127.0.0.1:3478 --secret capacity-secret-0123456789 \
    --idle-allocations "$N" --hold 8 --ready-file "$WORK/ready" > "$WORK/bench.out" 2> "$WORK/bench.err" &
BENCH_PID=$!
for _ in $(seq 600); do [ -f "$WORK/ready" ] && break; sleep 0.2; done
up=$(date +%s.%N)
sleep 2
r1=$(rss); s1=$(slab); u1=$(udp_pages); f1=$(ls "/proc/$RELAYD_PID/fd" | wc -l)
by_address=$(ip netns exec "$NS" ss -uanH | awk '{print $4}' | grep -oE '^127\.0\.0\.[23]:4[0-7][0-9]{3}$' \
    | cut -d: -f1 | sort | uniq -c | awk '{printf "%s %s, ", $2, $1}' || true)
wait "$BENCH_PID" || true
BENCH_PID=""
held=$(grep -o '"held":[0-9]*' "$WORK/bench.out" | cut -d: -f2)
python3 - "$N" "${held:-0}" "$r0" "$r1" "$s0" "$s1" "$u0" "$u1" "$f0" "$f1" "$start" "$up" "$by_address" <<'PY'
import sys
n, held, r0, r1, s0, s1, u0, u1, f0, f1 = (int(x) for x in sys.argv[1:11])
start, up, by = float(sys.argv[11]), float(sys.argv[12]), sys.argv[13]
print(f"allocations held: {held} of {n}")
print(f"process RSS: {r0} -> {r1} KiB, {(r1 - r0) / max(held, 1):.2f} KiB an allocation")
print(f"kernel slab (the machine's, both ends' sockets): {(s1 - s0) / max(held, 1):.2f} KiB an allocation")
print(f"UDP socket memory (both ends): {(u1 - u0) * 4 / max(held, 1):.2f} KiB an allocation")
print(f"relayd descriptors: {f0} -> {f1}")
print(f"relay sockets on the added addresses: {by.rstrip(', ')} (127.0.0.1 shares ports with relay-bench)")
print(f"setup (Allocate, refresh, ready): {held / max(up - start, 1e-9):.0f} allocations a second")
PY
tail -1 "$WORK/bench.out" | head -c 300; echo
