#!/usr/bin/env bash
# The kernel fast path measured (docs/kernel-fast-path.md): relayd with kernel-offload, relayd
# without it, and coturn, one after the other on loopback, each driven by the same relay-bench
# load: client to external peer (relay-bench's own UDP echo peer on 127.0.0.1), ChannelData,
# 100-byte payloads, a fixed rate. When the kernel relays, the work moves out of the server's
# process into softirq, which no process is charged for, so the figure that counts is the whole
# machine's busy CPU (/proc/stat) per million relayed packets (the load generator's share is in
# every column alike). Prints medians with the ratio to coturn. Needs root (the BPF program).
#
#   scripts/bench-fastpath.sh [--reps N] [--rate R] [--skip-build]
#
# Only loopback is used; servers are stopped by PID. The order of the three servers rotates
# between repetitions.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
export PATH="/opt/swift/usr/bin:$PATH"

REPS=3
RATE=20000
BUILD=1
while [ $# -gt 0 ]; do
    case "$1" in
        --reps) REPS=$2; shift 2 ;;
        --rate) RATE=$2; shift 2 ;;
        --skip-build) BUILD=0; shift ;;
        *) echo "usage: $0 [--reps N] [--rate R] [--skip-build]" >&2; exit 2 ;;
    esac
done
log() { printf 'bench-fastpath: %s\n' "$*" >&2; }
[ "$(id -u)" = 0 ] || { log "needs root (the kernel fast path loads a BPF program)"; exit 1; }

if [ "$BUILD" = 1 ]; then
    log "building release binaries in .build-bench and the BPF program"
    swift build --quiet -c release --scratch-path .build-bench --product relayd
    swift build --quiet -c release --scratch-path .build-bench --product relay-bench
fi
BIN=$(swift build -c release --scratch-path .build-bench --show-bin-path)
WORK=$(mktemp -d /tmp/relayd-bench-fastpath.XXXXXX)
mkdir -p "$WORK/bin"
cp "$BIN/relayd" "$BIN/relay-bench" "$WORK/bin/"
OUT=$WORK/bin/relayd_fastpath.bpf.o ./scripts/build-bpf.sh >/dev/null
command -v turnserver >/dev/null || { log "coturn (turnserver) is needed: apt-get install coturn"; exit 1; }
RESULTS="$WORK/results.jsonl"
: > "$RESULTS"
SECRET="bench-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
REALM="bench.local"

free_port() {
    python3 - <<'EOF'
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()
EOF
}
read -r EPHEMERAL_LOW _ < /proc/sys/net/ipv4/ip_local_port_range
MAX_PORT=$((EPHEMERAL_LOW - 1))
MIN_PORT=$((MAX_PORT - 9999))

# shellcheck source=scripts/bench-server.sh
. "$ROOT/scripts/bench-server.sh"

# run KIND REP: one server, one measurement.
run() {
    local kind=$1 rep=$2 dir="$WORK/$1-$2" port api
    mkdir -p "$dir"
    port=$(free_port)
    local common=(
        --listening-ip=127.0.0.1 "--listening-port=$port" --relay-ip=127.0.0.1
        "--min-port=$MIN_PORT" "--max-port=$MAX_PORT"
        --use-auth-secret "--static-auth-secret=$SECRET" "--realm=$REALM"
        --allow-loopback-peers --no-tcp --no-tls
    )
    case "$kind" in
        relayd | relayd-kernel)
            api=$(free_port)
            local extra=()
            [ "$kind" = relayd-kernel ] && extra=(--kernel-offload=on --kernel-offload-interface=lo)
            : > "$dir/relayd.conf"
            "$WORK/bin/relayd" -c "$dir/relayd.conf" "${common[@]}" "${extra[@]}" \
                --api-listening-ip=127.0.0.1 "--api-listening-port=$api" \
                --unauth-rate-limit=1000000 --allocate-rate-limit=1000000 --drain-timeout=0 --log-level=notice \
                "--log-file=$dir/relayd-file.log" >>"$dir/relayd.log" 2>&1 &
            ;;
        coturn)
            turnserver -n "${common[@]}" --no-dtls --no-cli --no-rfc5780 \
                "--log-file=$dir/coturn.log" --simple-log --no-stdout-log \
                "--pidfile=$dir/turnserver.pid" "--userdb=$dir/turndb" >>"$dir/coturn.out" 2>&1 &
            ;;
    esac
    SERVER_PID=$!
    for _ in $(seq 100); do
        ss -Huln "sport = :$port" 2>/dev/null | grep -q . && break
        kill -0 "$SERVER_PID" 2>/dev/null || { log "$kind did not start; see $dir"; exit 1; }
        sleep 0.05
    done
    sleep 0.3
    local line
    line=$("$WORK/bin/relay-bench" --server "127.0.0.1:$port" --secret "$SECRET" --realm "$REALM" \
        --server-pid "$SERVER_PID" --label "$kind" --pattern external-peer --payload 100 --pairs 50 \
        --rate "$RATE" --duration 5 --warmup 1 2>>"$WORK/relay-bench.err" | grep '^{' || true)
    [ -n "$line" ] || { log "relay-bench gave no result for $kind"; exit 1; }
    printf '{"kind":"%s","rep":%s,"r":%s}\n' "$kind" "$rep" "$line" >> "$RESULTS"
    log "$kind rep $rep done"
    cleanup
}

KINDS=(relayd-kernel relayd coturn)
for rep in $(seq "$REPS"); do
    for i in 0 1 2; do run "${KINDS[$(((i + rep) % 3))]}" "$rep"; done
done

python3 - "$RESULTS" "$RATE" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
kinds = ["relayd-kernel", "relayd", "coturn"]
def med(kind, key):
    values = [r["r"][key] for r in rows if r["kind"] == kind and isinstance(r["r"].get(key), (int, float))]
    return statistics.median(values) if values else float("nan")
metrics = [
    ("system CPU s per M relayed pkts (whole machine)", "system_cpu_s_per_mpkt"),
    ("server process CPU s per M relayed pkts", "server_cpu_s_per_mpkt"),
    ("loss %", "loss_pct"),
    ("p50 latency us (rtt/2)", "lat_p50_us"),
    ("p99 latency us (rtt/2)", "lat_p99_us"),
]
reps = len({r["rep"] for r in rows})
print(f"external peer, ChannelData, 100 B, {sys.argv[2]} msg/s, medians of {reps} repetition(s)")
print(f"{'':58} {'relayd-kernel':>14} {'relayd':>10} {'coturn':>10} {'kernel/coturn':>14} {'relayd/coturn':>14}")
for label, key in metrics:
    k, r, c = (med(x, key) for x in kinds)
    ratio = lambda a: f"{a / c:.2f}x" if c and c == c and c != 0 else "-"
    print(f"{label:58} {k:14.2f} {r:10.2f} {c:10.2f} {ratio(k):>14} {ratio(r):>14}")
EOF
log "raw results: $RESULTS"
