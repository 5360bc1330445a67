#!/usr/bin/env bash
# relayd vs coturn, side by side on loopback. Builds release binaries, then for each
# repetition starts relayd and coturn in turn (the order alternates between repetitions; the
# two servers never run at the same time; --baseline adds a second relayd, below) with
# equivalent settings and drives each with the same relay-bench workloads:
#   - memory per allocation: RSS delta (VmRSS) with 10,000 idle allocations;
#   - allocation setup rate: 401 + authenticated Allocate, 15,000 fresh clients (--quick:
#     2,000), 64 in flight;
#   - per pattern (client-to-client, external-peer) and payload (100 B, 1200 B) over UDP, and
#     client-to-client 100 B over TLS (one TLS connection per client):
#       * a fixed moderate load: server CPU seconds per million relayed packets (utime+stime
#         from /proc/PID/stat over the measurement window) and p99 latency;
#       * a bounded step search for the highest paced rate with loss <= 0.1 %.
# It prints one table of medians with the ratio relayd/coturn.
#
#   scripts/bench.sh [--quick] [--reps N] [--skip-build] [--out DIR] [--fastpath]
#                    [--baseline BIN] [--no-max-rate] [--tls]
#
# --quick: one repetition, shorter runs, fewer rate steps (about 5 minutes).
# --baseline BIN: also measure a second relayd binary BIN (e.g. an older commit's release
#   build) as a third server, "baseline", started exactly as relayd is (same flags), in every
#   repetition. The order of the servers rotates between repetitions (relayd baseline coturn,
#   then baseline coturn relayd, then coturn relayd baseline, ...), so no server always goes
#   first and a before/after comparison sees the same noise. The table gets the columns
#   baseline and relayd/baseline; the baseline's --version line is printed under it. It does
#   not apply to --fastpath.
# --no-max-rate: skip the bounded step searches (UDP and TLS); memory, setup rates and the
#   fixed-load CPU and latency runs stay. The max paced rate rows are left out of the table.
#   With --fastpath, passed on to scripts/bench-fastpath.sh. 5 repetitions with --baseline
#   and --no-max-rate take about 10-15 minutes (--quick: under 2 minutes).
# --tls: then also TLS at fleet scale (scripts/bench-tls.sh, same repetitions): handshakes full
#   and resumed with ECDSA and RSA certificates, memory per idle TLS allocation at 4,000 and
#   9,000, TLS relay CPU and latency at 1,000 to 20,000 msg/s (about 3 minutes per repetition).
# --fastpath: then also the kernel fast path between network namespaces (scripts/bench-fastpath.sh,
#   root only): no relay, relayd with XDP, with TC, in user space, and coturn, with the same
#   repetitions (about 5 minutes more per repetition).
# Default: 3 repetitions (about 20-25 minutes; half as long again with --baseline). RELAYD_BIN
# overrides the relayd binary.
# Only loopback is used. Servers are stopped by PID on exit.
#
# Equivalence notes:
# - Both: REST auth (use-auth-secret, same secret and realm), listener 127.0.0.1 on a free
#   port (never 3478), relay-ip 127.0.0.1, the same relay port range, allow-loopback-peers,
#   UDP plus a TLS listener (self-signed P-256 certificate from conf/make-test-cert.sh, no
#   plain TCP listener), default relay threads (relayd: one per CPU; coturn: one
#   general relay thread per CPU), logs to a file in the work directory, quiet: coturn without
#   --verbose writes no per-session lines, so relayd gets log-level=notice (its info level
#   writes two lines per allocation).
# - The relay port range sits just below the kernel's ephemeral range, so relay-bench's own
#   client sockets (ephemeral ports) never take the servers' relay ports.
# - relayd runs on its shipped per-source limits (docs/rate-limits.md): every bench client is
#   127.0.0.1, and the defaults are made for thousands of users behind one address, so no limit
#   is lifted for the benchmark (401s given back by the signed Allocate; at most 64 Allocates
#   in flight). relayd gets drain-timeout=0 so SIGTERM stops it at once, as it does coturn, and
#   log-level=notice (below).
# - relayd's HTTP API gets a free loopback port; prometheus stays off (its default).
# - The baseline (--baseline) is started by the same code with the same flags as relayd; only
#   the binary differs. Flags it does not know make it fail to start (and the run stop).
# - Nothing is pinned to CPUs: the 2-core VM runs server and load generator together, as a
#   pinned layout would only hide the contention both servers face equally.
set -euo pipefail
CALLER_DIR=$(pwd)
cd "$(dirname "$0")/.."
ROOT=$(pwd)
export PATH="/opt/swift/usr/bin:$PATH"

QUICK=0
FASTPATH=0
TLS=0
REPS=3
BUILD=1
OUT=""
BASELINE=""
MAX_RATE=1
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) QUICK=1; REPS=1 ;;
        --reps) REPS="$2"; shift ;;
        --reps=*) REPS="${1#*=}" ;;
        --skip-build) BUILD=0 ;;
        --out) OUT="$2"; shift ;;
        --out=*) OUT="${1#*=}" ;;
        --fastpath) FASTPATH=1 ;;
        --tls) TLS=1 ;;
        --baseline) [ $# -ge 2 ] || { echo "bench.sh: --baseline needs a path" >&2; exit 2; }
                    BASELINE="$2"; shift ;;
        --baseline=*) BASELINE="${1#*=}" ;;
        --no-max-rate) MAX_RATE=0 ;;
        -h|--help) sed -n '2,/^set -e/{/^#/p}' "$0"; exit 0 ;;
        *) echo "bench.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
# A relative --baseline path is relative to where the script was started from.
case "$BASELINE" in ""|/*) ;; *) BASELINE="$CALLER_DIR/$BASELINE" ;; esac

log() { printf 'bench.sh: %s\n' "$*" >&2; }

# --- parameters --------------------------------------------------------------------------
IDLE_ALLOCATIONS=10000
PAIRS=50                 # 100 clients, each with its own socket
FIXED_RATE=20000         # messages/s for the CPU and latency measurement (40,000 relayed pkt/s)
if [ "$QUICK" = 1 ]; then
    SETUP_ALLOCATIONS=2000
    FIXED_DURATION=3
    STEP_DURATION=1.5
    RATE_STEPS="20000 40000 60000 90000 130000"
    TLS_STEPS="10000 20000 40000"
    IDLE_HOLD=2
else
    # 15,000: the node-capacity size (docs/benchmark.md). At 20,000 allocations a second a
    # 5,000-allocation run lasts a quarter of a second, 25 ticks of the CPU clock the
    # per-allocation row divides, and its first allocations pay the new process's first touch.
    SETUP_ALLOCATIONS=15000
    FIXED_DURATION=5
    STEP_DURATION=3
    RATE_STEPS="20000 40000 60000 80000 100000 130000 160000 200000"
    TLS_STEPS="10000 20000 30000 40000 60000 80000"
    IDLE_HOLD=3
fi
PATTERNS="client-to-client external-peer"
PAYLOADS="100 1200"
TLS_RATE=10000           # the TLS workload's fixed load (client-to-client, 100 B)
SECRET="bench-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
REALM="bench.local"

# --- build and tools -----------------------------------------------------------------------
if [ "$BUILD" = 1 ]; then
    log "building release binaries in .build-bench"
    swift build --quiet -c release --scratch-path .build-bench --product relayd
    swift build --quiet -c release --scratch-path .build-bench --product relay-bench
    if [ "$FASTPATH" = 1 ]; then swift build --quiet -c release --scratch-path .build-bench --product fastpath-bench; fi
fi
BIN=$(swift build -c release --scratch-path .build-bench --show-bin-path)
RELAYD="${RELAYD_BIN:-$BIN/relayd}"
BENCH="$BIN/relay-bench"
[ -x "$RELAYD" ] || { log "relayd not found at $RELAYD"; exit 1; }
[ -x "$BENCH" ] || { log "relay-bench not found at $BENCH"; exit 1; }
if [ -n "$BASELINE" ] && { [ ! -f "$BASELINE" ] || [ ! -x "$BASELINE" ]; }; then
    log "baseline relayd not found or not executable at $BASELINE"; exit 1
fi
if ! command -v turnserver >/dev/null 2>&1; then
    log "installing coturn (apt-get)"
    apt-get install -y coturn >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y coturn >/dev/null; }
fi
command -v python3 >/dev/null || { log "python3 is needed for the table"; exit 1; }

# 10,000 allocations need 10,000 relay sockets in the server and 10,000 client sockets here.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt $((IDLE_ALLOCATIONS + 1000)) ]; then
    log "ulimit -n is $(ulimit -n): too low for $IDLE_ALLOCATIONS allocations"
fi

WORK=$(mktemp -d /tmp/relayd-bench.XXXXXX)
# Private copies: a rebuild in the shared tree during the run cannot swap binaries under it.
mkdir -p "$WORK/bin"
cp "$RELAYD" "$WORK/bin/relayd"
cp "$BENCH" "$WORK/bin/relay-bench"
RELAYD="$WORK/bin/relayd"
BENCH="$WORK/bin/relay-bench"
BASELINE_SOURCE="$BASELINE"
if [ -n "$BASELINE" ]; then
    cp "$BASELINE" "$WORK/bin/relayd-baseline"
    BASELINE="$WORK/bin/relayd-baseline"
fi
OUT="${OUT:-$WORK}"
mkdir -p "$OUT"
RESULTS="$OUT/results.jsonl"
: > "$RESULTS"
"$ROOT/conf/make-test-cert.sh" "$WORK/tls" >/dev/null

# --- ports ---------------------------------------------------------------------------------
free_port() {
    python3 - "$@" <<'EOF'
import socket, sys
lo, hi = int(sys.argv[1]), int(sys.argv[2])
for _ in range(200):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]; s.close()
    if port == 3478 or lo <= port <= hi: continue
    t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try: t.bind(("127.0.0.1", port)); print(port); break
    except OSError: pass
    finally: t.close()
EOF
}
read -r EPHEMERAL_LOW _ < /proc/sys/net/ipv4/ip_local_port_range
MAX_PORT=$((EPHEMERAL_LOW - 1))
MIN_PORT=$((MAX_PORT - 19999))
[ "$MIN_PORT" -ge 1024 ] || MIN_PORT=1024
IN_USE=$(ss -Huan 2>/dev/null | awk -v lo="$MIN_PORT" -v hi="$MAX_PORT" \
    '{n=split($4,a,":"); p=a[n]+0; if (p>=lo && p<=hi) c++} END {print c+0}')
log "relay port range $MIN_PORT-$MAX_PORT ($((MAX_PORT - MIN_PORT + 1)) ports, $IN_USE in use by others)"

# --- servers -------------------------------------------------------------------------------
# shellcheck source=scripts/bench-server.sh
. "$ROOT/scripts/bench-server.sh"

# start_server KIND: starts relayd, baseline (the --baseline relayd, same flags) or coturn on
# fresh ports and waits until it listens.
start_server() {
    local kind=$1 dir="$WORK/$1"
    mkdir -p "$dir"
    PORT=$(free_port "$MIN_PORT" "$MAX_PORT")
    TLS_PORT=$(free_port "$MIN_PORT" "$MAX_PORT")
    while [ "$TLS_PORT" = "$PORT" ]; do TLS_PORT=$(free_port "$MIN_PORT" "$MAX_PORT"); done
    local common=(
        --listening-ip=127.0.0.1 "--listening-port=$PORT" --relay-ip=127.0.0.1
        "--min-port=$MIN_PORT" "--max-port=$MAX_PORT"
        --use-auth-secret "--static-auth-secret=$SECRET" "--realm=$REALM"
        --allow-loopback-peers --no-tcp
        "--tls-listening-port=$TLS_PORT" "--cert=$WORK/tls/cert.pem" "--pkey=$WORK/tls/pkey.pem"
    )
    if [ "$kind" = relayd ] || [ "$kind" = baseline ]; then
        local api binary=$RELAYD
        [ "$kind" = baseline ] && binary=$BASELINE
        api=$(free_port "$MIN_PORT" "$MAX_PORT")
        while [ "$api" = "$PORT" ] || [ "$api" = "$TLS_PORT" ]; do api=$(free_port "$MIN_PORT" "$MAX_PORT"); done
        : > "$dir/relayd.conf"
        "$binary" -c "$dir/relayd.conf" "${common[@]}" \
            --api-listening-ip=127.0.0.1 "--api-listening-port=$api" \
            --drain-timeout=0 --log-level=notice \
            "--log-file=$dir/relayd-file.log" >>"$dir/relayd.log" 2>&1 &
    else
        rm -f "$dir/turndb"
        turnserver -n "${common[@]}" --no-dtls --no-cli --no-rfc5780 \
            "--log-file=$dir/coturn.log" --simple-log --no-stdout-log \
            "--pidfile=$dir/turnserver.pid" "--userdb=$dir/turndb" >>"$dir/coturn.out" 2>&1 &
    fi
    SERVER_PID=$!
    for _ in $(seq 100); do
        if ss -Huln "sport = :$PORT" 2>/dev/null | grep -q .; then sleep 0.3; return 0; fi
        kill -0 "$SERVER_PID" 2>/dev/null || break
        sleep 0.05
    done
    log "$kind did not start; see $dir"
    tail -5 "$dir"/*.log "$dir"/*.out 2>/dev/null >&2 || true
    exit 1
}

# bench KIND REP WORKLOAD ARGS...: one relay-bench run; its JSON line (tagged) goes to RESULTS
# and is also echoed to stdout.
bench() {
    local kind=$1 rep=$2 workload=$3
    shift 3
    local line target="127.0.0.1:$PORT"
    [ "${1:-}" = "--transport" ] && [ "${2:-}" = tls ] && target="127.0.0.1:$TLS_PORT"
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then
        log "$kind (pid $SERVER_PID) is gone before $workload"
        return 1
    fi
    line=$("$BENCH" --server "$target" --secret "$SECRET" --realm "$REALM" \
        --server-pid "$SERVER_PID" --label "$kind/$workload" "$@" 2>>"$WORK/relay-bench.err" | grep '^{' || true)
    if [ -z "$line" ]; then
        log "relay-bench gave no result for $kind $workload"
        return 1
    fi
    python3 -c 'import json,sys; d=json.loads(sys.argv[1]); d.update(server=sys.argv[2], rep=int(sys.argv[3]), workload=sys.argv[4]); print(json.dumps(d))' \
        "$line" "$kind" "$rep" "$workload" >>"$RESULTS"
    LAST="$line"
}

jfield() { python3 -c 'import json,sys; print(json.loads(sys.argv[1]).get(sys.argv[2], ""))' "$LAST" "$1"; }

# run_server KIND REP: every workload against a fresh KIND.
run_server() {
    local kind=$1 rep=$2
    log "rep $rep: $kind"

    # Memory with idle allocations (fresh server, baseline after start-up).
    start_server "$kind"
    local ready="$WORK/ready.$kind.$rep" base held rss
    rm -f "$ready"
    base=$(awk '/^VmRSS:/ {print $2}' "/proc/$SERVER_PID/status")
    "$BENCH" --server "127.0.0.1:$PORT" --secret "$SECRET" --idle-allocations "$IDLE_ALLOCATIONS" \
        --hold "$IDLE_HOLD" --window 256 --ready-file "$ready" --label "$kind/idle" \
        >"$WORK/idle.$kind.$rep.out" 2>>"$WORK/relay-bench.err" &
    local bpid=$!
    while [ ! -f "$ready" ] && kill -0 "$bpid" 2>/dev/null; do sleep 0.1; done
    sleep 1
    rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$SERVER_PID/status" 2>/dev/null || echo 0)
    wait "$bpid" || true
    held=$(cat "$ready" 2>/dev/null || echo 0)
    python3 - "$kind" "$rep" "$base" "$rss" "$held" "$WORK/idle.$kind.$rep.out" >>"$RESULTS" <<'EOF'
import json, sys
kind, rep, base, rss, held, path = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
d = {}
for line in open(path):
    if line.startswith("{"): d = json.loads(line)
d.update(server=kind, rep=rep, workload="idle", rss_base_kb=base, rss_held_kb=rss, held=held,
         bytes_per_allocation=(rss - base) * 1024 / held if held else None)
print(json.dumps(d))
EOF
    cleanup

    start_server "$kind"
    bench "$kind" "$rep" setup --setup-only --allocations "$SETUP_ALLOCATIONS" --window 64 || true
    local pattern payload rate loss failed steps=$RATE_STEPS tls_steps=$TLS_STEPS
    # --no-max-rate: no step searches (the fixed-load runs stay).
    if [ "$MAX_RATE" = 0 ]; then steps=""; tls_steps=""; fi
    for pattern in $PATTERNS; do
        for payload in $PAYLOADS; do
            bench "$kind" "$rep" "fixed/$pattern/$payload" --pattern "$pattern" --payload "$payload" \
                --pairs "$PAIRS" --rate "$FIXED_RATE" --duration "$FIXED_DURATION" --warmup 1 || true
            for rate in $steps; do
                bench "$kind" "$rep" "step/$pattern/$payload/$rate" --pattern "$pattern" --payload "$payload" \
                    --pairs "$PAIRS" --rate "$rate" --duration "$STEP_DURATION" --warmup 0.5 --drain-ms 200 || break
                loss=$(jfield loss_pct)
                failed=$(jfield setup_failed)
                log "  $kind $pattern ${payload}B @$rate/s: loss $loss%"
                python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) <= 0.1 and sys.argv[2] in ("0","") else 1)' \
                    "$loss" "$failed" || break
            done
        done
    done
    bench "$kind" "$rep" "fixed/tls-client-to-client/100" --transport tls --pattern client-to-client \
        --payload 100 --pairs "$PAIRS" --rate "$TLS_RATE" --duration "$FIXED_DURATION" --warmup 1 || true
    for rate in $tls_steps; do
        bench "$kind" "$rep" "step/tls-client-to-client/100/$rate" --transport tls --pattern client-to-client \
            --payload 100 --pairs "$PAIRS" --rate "$rate" --duration "$STEP_DURATION" --warmup 0.5 --drain-ms 300 || break
        loss=$(jfield loss_pct)
        failed=$(jfield setup_failed)
        log "  $kind TLS client-to-client 100B @$rate/s: loss $loss%"
        python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) <= 0.1 and sys.argv[2] in ("0","") else 1)' \
            "$loss" "$failed" || break
    done
    cleanup
}

# The servers in turn; the order rotates by one each repetition, so none always goes first
# (two servers: relayd coturn, coturn relayd, ...; three: relayd baseline coturn, baseline
# coturn relayd, coturn relayd baseline, ...).
KINDS=(relayd coturn)
[ -n "$BASELINE" ] && KINDS=(relayd baseline coturn)
START=$(date +%s)
for rep in $(seq "$REPS"); do
    for i in "${!KINDS[@]}"; do
        run_server "${KINDS[$(( (i + rep - 1) % ${#KINDS[@]} ))]}" "$rep"
    done
done
ELAPSED=$(( $(date +%s) - START ))

# --- table ---------------------------------------------------------------------------------
COTURN_VERSION=$(turnserver --version 2>/dev/null | head -1 || echo "?")
HAS_BASELINE=0
[ -n "$BASELINE" ] && HAS_BASELINE=1
python3 - "$RESULTS" "$REPS" "$FIXED_RATE" "$IDLE_ALLOCATIONS" "$SETUP_ALLOCATIONS" "$RATE_STEPS" "$TLS_RATE" "$TLS_STEPS" \
    "$HAS_BASELINE" "$MAX_RATE" <<'EOF'
import json, statistics, sys
path, reps, fixed, idle, setup_n, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6].split()
tls_rate, tls_steps = int(sys.argv[7]), sys.argv[8].split()
has_baseline, max_rate = sys.argv[9] == "1", sys.argv[10] == "1"
rows = [json.loads(l) for l in open(path) if l.strip()]
def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None
def pick(server, workload, key):
    return med([r.get(key) for r in rows if r["server"] == server and r["workload"] == workload])
def maxrate(server, pattern, payload):
    best = []
    for rep in range(1, reps + 1):
        ok = 0
        for r in rows:
            if r["server"] != server or r["rep"] != rep or not r["workload"].startswith(f"step/{pattern}/{payload}/"):
                continue
            if r.get("loss_pct", 100) <= 0.1 and r.get("setup_failed", 0) == 0:
                ok = max(ok, int(r["workload"].rsplit("/", 1)[1]))
        best.append(ok)
    return med(best)
table = []
# Columns: relayd, coturn, relayd/coturn; with --baseline also baseline and relayd/baseline.
header = ("metric", "relayd", "coturn", "relayd/coturn", "unit", "better")
if has_baseline:
    header = ("metric", "relayd", "baseline", "coturn", "relayd/coturn", "relayd/baseline", "unit", "better")
def row(name, fn, unit, better, compare=True):
    a, b = fn("relayd"), fn("coturn")
    ratio = lambda x, y: f"{x / y:.2f}" if compare and x is not None and y else "-"
    f = lambda v: "-" if v is None else (f"{v:,.0f}" if abs(v) >= 100 else f"{v:.2f}")
    if has_baseline:
        c = fn("baseline")
        table.append((name, f(a), f(c), f(b), ratio(a, b), ratio(a, c), unit, better))
    else:
        table.append((name, f(a), f(b), ratio(a, b), unit, better))
row(f"allocation setup rate ({setup_n} allocs, 401+Allocate)", lambda s: pick(s, "setup", "setup_rate"), "allocs/s", "higher")
row("allocation setup: server CPU per allocation", lambda s: pick(s, "setup", "setup_server_cpu_us"), "us", "lower")
row("allocation setup: relay-bench own CPU per allocation", lambda s: pick(s, "setup", "setup_bench_cpu_us"), "us", "info", compare=False)
row(f"memory per idle allocation ({idle} held)", lambda s: (lambda v: v / 1024 if v is not None else None)(pick(s, "idle", "bytes_per_allocation")), "KiB", "lower")
row(f"idle allocation setup rate ({idle})", lambda s: pick(s, "idle", "setup_rate"), "allocs/s", "higher")
for pattern, payload in [(p, s) for p in ("client-to-client", "external-peer") for s in ("100", "1200")] + [("tls-client-to-client", "100")]:
        w = f"fixed/{pattern}/{payload}"
        basis = "rtt/2" if pattern == "external-peer" else "one-way"
        fixed = tls_rate if pattern.startswith("tls") else int(sys.argv[3])
        steps = tls_steps if pattern.startswith("tls") else sys.argv[6].split()
        row(f"{pattern} {payload}B: server CPU per 1M relayed pkts @{fixed}/s", lambda s: pick(s, w, "server_cpu_s_per_mpkt"), "cpu-s", "lower")
        if pattern == "external-peer":
            row(f"{pattern} {payload}B: echo peer CPU per 1M echoed pkts, same runs (floor)", lambda s: pick(s, w, "echo_cpu_s_per_mpkt"), "cpu-s", "info", compare=False)
        row(f"{pattern} {payload}B: p99 latency ({basis}) @{fixed}/s", lambda s: pick(s, w, "lat_p99_us"), "us", "lower")
        row(f"{pattern} {payload}B: p50 latency ({basis}) @{fixed}/s", lambda s: pick(s, w, "lat_p50_us"), "us", "lower")
        row(f"{pattern} {payload}B: loss @{fixed}/s", lambda s: pick(s, w, "loss_pct"), "%", "lower")
        if max_rate:
            row(f"{pattern} {payload}B: max paced rate, loss <= 0.1% (steps to {steps[-1]})", lambda s: maxrate(s, pattern, payload), "msg/s", "higher")
        row(f"{pattern} {payload}B: relay-bench own CPU @{fixed}/s", lambda s: pick(s, w, "bench_cpu_pct"), "% of 1 core", "info")
widths = [max(len(str(r[i])) for r in table + [header]) for i in range(len(header))]
def line(r): return "| " + " | ".join(str(c).ljust(widths[i]) for i, c in enumerate(r)) + " |"
print(line(header))
print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
for r in table: print(line(r))
print(f"\nmedians of {reps} repetition(s); tls-client-to-client: every client on its own TLS connection (relay side UDP), relay-bench single-threaded for TLS")
print("client-to-client: each message crosses the relay twice (2 relayed packets); external-peer: a round trip through relay-bench's own UDP echo peer (2 relayed packets), latency = RTT/2")
print(f"echo peer (floor): relay-bench's echo thread over the same window, in the {'relayd, the baseline' if has_baseline else 'relayd'} and the coturn runs. Each datagram it echoes is one")
print("  receive and one send, as each packet relayed to or from a peer is for the server, but on one socket in recvmmsg/sendmmsg batches")
print("  and with no other work: about what the kernel alone costs per packet on that path on this machine")
if has_baseline:
    print("baseline: a second relayd binary (--baseline), same flags as relayd; the order of the three servers rotated between repetitions")
if not max_rate:
    print("--no-max-rate: no step searches, so no max paced rate rows")
EOF
echo
echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), kernel $(uname -r)"
echo "coturn: $COTURN_VERSION; relayd: $("$RELAYD" --version 2>/dev/null | head -1)"
if [ -n "$BASELINE" ]; then
    echo "baseline: $("$BASELINE" --version 2>/dev/null | head -1) ($BASELINE_SOURCE)"
fi
echo "runtime ${ELAPSED}s; raw results: $RESULTS"
if [ "$TLS" = 1 ]; then
    echo
    "$ROOT/scripts/bench-tls.sh" --reps "$REPS" --skip-build
fi
if [ "$FASTPATH" = 1 ]; then
    echo
    fast=(--reps "$REPS" --skip-build)
    { [ "$QUICK" = 1 ] || [ "$MAX_RATE" = 0 ]; } && fast+=(--no-max-rate)
    "$ROOT/scripts/bench-fastpath.sh" "${fast[@]}"
fi
