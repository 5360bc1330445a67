#!/usr/bin/env bash
# TURN over TLS at fleet scale, relayd vs coturn side by side on loopback (docs/benchmark.md,
# "TLS at fleet scale"). Builds release binaries (unless --skip-build), then for each
# repetition starts relayd and coturn in turn (the order alternates; the two never run at the
# same time), each on its defaults plus the same listener, REST secret, relay range and
# certificate, and measures with relay-bench:
#   - TLS handshakes per second and the server's CPU per handshake, full and resumed (TLS 1.3
#     PSK from the server's ticket), with an ECDSA P-256 certificate and an RSA-2048 one
#     (relay-bench --handshakes: 32 connections at a time, each closed once its handshake is done);
#   - memory per idle TLS allocation (RSS delta / allocations) with 4,000 and 9,000 held: each is
#     a TLS connection plus a relay socket, two descriptors of the 20,000 a process may hold here;
#   - TLS client <-> external peer and TLS client-to-client, 100 B, at 1,000, 10,000 and 20,000
#     msg/s: the server's CPU per million relayed packets, p50 and p99 latency.
# It prints one table of medians with the ratio relayd/coturn.
#
#   scripts/bench-tls.sh [--reps N] [--skip-build] [--memory-only]
#
# --memory-only: the memory rows alone (about 4 minutes for 3 repetitions).
# Default: 3 repetitions (about 15 minutes). Only loopback is used; servers are stopped by PID.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
# shellcheck source=scripts/bench-lib.sh
. "$ROOT/scripts/bench-lib.sh"
MEMORY_ONLY=0
ARGS=()
for arg in "$@"; do
    if [ "$arg" = --memory-only ]; then MEMORY_ONLY=1; else ARGS+=("$arg"); fi
done
bench_options 3 '2,/^set -e/{/^#/p}' "${ARGS[@]+"${ARGS[@]}"}"
log() { printf 'bench-tls.sh: %s\n' "$*" >&2; }

[ "$BUILD" = 1 ] && log "building release binaries in .build-bench"
bench_build
command -v turnserver >/dev/null || { log "coturn's turnserver is needed (scripts/install-test-deps.sh)"; exit 1; }
bench_workdir tls
bench_port_range
mkdir -p "$WORK/bin"
cp "$BIN/relayd" "$BIN/relay-bench" "$WORK/bin/"
RELAYD="$WORK/bin/relayd"
BENCH="$WORK/bin/relay-bench"
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
SECRET="bench-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
REALM="bench.local"
RESULTS="$WORK/results.jsonl"
: > "$RESULTS"

# The two certificates: P-256 (conf/make-test-cert.sh) and RSA-2048, both for "localhost".
"$ROOT/conf/make-test-cert.sh" "$WORK/ecdsa" >/dev/null
mkdir -p "$WORK/rsa"
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$WORK/rsa/pkey.pem" -out "$WORK/rsa/cert.pem" \
    -days 7 -subj "/CN=localhost" >/dev/null 2>&1

SERVER_PID=""
stop_server() {
    [ -n "$SERVER_PID" ] || return 0
    kill "$SERVER_PID" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=""
}
trap 'stop_server; stop_all; rm -rf "$WORK"' EXIT

# start_server KIND CERT: relayd or coturn with TLS on a fresh port and CERT's certificate.
start_server() {
    local kind=$1 cert=$2 dir="$WORK/$1"
    mkdir -p "$dir"
    PORT=$(free_port)
    TLS_PORT=$(free_port)
    while [ "$TLS_PORT" = "$PORT" ]; do TLS_PORT=$(free_port); done
    local common=(
        --listening-ip=127.0.0.1 "--listening-port=$PORT" --relay-ip=127.0.0.1
        "--min-port=$MIN_PORT" "--max-port=$MAX_PORT"
        --use-auth-secret "--static-auth-secret=$SECRET" "--realm=$REALM"
        --allow-loopback-peers --no-tcp
        "--tls-listening-port=$TLS_PORT" "--cert=$WORK/$cert/cert.pem" "--pkey=$WORK/$cert/pkey.pem"
    )
    if [ "$kind" = relayd ]; then
        : > "$dir/relayd.conf"
        "$RELAYD" -c "$dir/relayd.conf" "${common[@]}" --api-listening-ip=127.0.0.1 "--api-listening-port=$(free_port)" \
            --drain-timeout=0 --log-level=notice "--log-file=$dir/relayd-file.log" >>"$dir/relayd.log" 2>&1 &
    else
        rm -f "$dir/turndb"
        turnserver -n "${common[@]}" --no-dtls --no-cli --no-rfc5780 "--log-file=$dir/coturn.log" --simple-log \
            --no-stdout-log "--pidfile=$dir/turnserver.pid" "--userdb=$dir/turndb" >>"$dir/coturn.out" 2>&1 &
    fi
    SERVER_PID=$!
    for _ in $(seq 100); do
        if ss -Hltn "sport = :$TLS_PORT" 2>/dev/null | grep -q .; then sleep 0.3; return 0; fi
        kill -0 "$SERVER_PID" 2>/dev/null || break
        sleep 0.05
    done
    log "$kind did not start; see $dir"
    exit 1
}

# bench KIND REP WORKLOAD ARGS...: one relay-bench run against the TLS port, tagged into RESULTS.
bench() {
    local kind=$1 rep=$2 workload=$3 line
    shift 3
    line=$("$BENCH" --server "127.0.0.1:$TLS_PORT" --secret "$SECRET" --server-pid "$SERVER_PID" \
        --label "$kind/$workload" "$@" 2>>"$WORK/relay-bench.err" | grep '^{' || true)
    [ -n "$line" ] || { log "no result for $kind $workload"; return 0; }
    python3 -c 'import json,sys; d=json.loads(sys.argv[1]); d.update(server=sys.argv[2], rep=int(sys.argv[3]), workload=sys.argv[4]); print(json.dumps(d))' \
        "$line" "$kind" "$rep" "$workload" >>"$RESULTS"
}

# idle KIND REP N: RSS delta per idle TLS allocation with N held.
idle() {
    local kind=$1 rep=$2 n=$3 ready="$WORK/ready" base rss held bpid
    rm -f "$ready"
    base=$(awk '/^VmRSS:/ {print $2}' "/proc/$SERVER_PID/status")
    "$BENCH" --server "127.0.0.1:$TLS_PORT" --transport tls --secret "$SECRET" --idle-allocations "$n" --hold 14 \
        --window 256 --ready-file "$ready" --label "$kind/idle-$n" >"$WORK/idle.out" 2>>"$WORK/relay-bench.err" &
    bpid=$!
    while [ ! -f "$ready" ] && kill -0 "$bpid" 2>/dev/null; do sleep 0.1; done
    # Idle: 9 s after the last allocation was refreshed. relayd gives an idle connection's
    # OpenSSL buffers back after 2 s without input, on its once-a-second sweep, and trims the
    # heap at most every 5 s (docs/benchmark.md, "TLS at fleet scale").
    sleep 9
    rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$SERVER_PID/status" 2>/dev/null || echo 0)
    wait "$bpid" || true
    held=$(cat "$ready" 2>/dev/null || echo 0)
    python3 -c 'import json,sys; k,r,n,b,s,h=sys.argv[1:7]; h=int(h); print(json.dumps(dict(server=k, rep=int(r), workload="idle-"+n, held=h, bytes_per_allocation=(int(s)-int(b))*1024/h if h else None)))' \
        "$kind" "$rep" "$n" "$base" "$rss" "$held" >>"$RESULTS"
}

run_server() {
    local kind=$1 rep=$2 cert rate pattern
    log "rep $rep: $kind"
    local certs=(ecdsa rsa) patterns=(external-peer client-to-client)
    if [ "$MEMORY_ONLY" = 1 ]; then certs=(); patterns=(); fi
    for cert in "${certs[@]+"${certs[@]}"}"; do
        start_server "$kind" "$cert"
        bench "$kind" "$rep" "handshake/$cert/full" --handshakes 5 --concurrency 32
        bench "$kind" "$rep" "handshake/$cert/resumed" --handshakes 5 --concurrency 32 --resume
        stop_server
    done
    for n in 4000 9000; do
        start_server "$kind" ecdsa
        idle "$kind" "$rep" "$n"
        stop_server
    done
    [ "${#patterns[@]}" -gt 0 ] || return 0
    start_server "$kind" ecdsa
    for pattern in "${patterns[@]}"; do
        for rate in 1000 10000 20000; do
            bench "$kind" "$rep" "traffic/$pattern/$rate" --transport tls --pattern "$pattern" --payload 100 \
                --pairs 50 --rate "$rate" --duration 5 --warmup 1
        done
    done
    stop_server
}

KINDS=(relayd coturn)
for rep in $(seq "$REPS"); do
    for i in 0 1; do run_server "${KINDS[$(( (i + rep - 1) % 2 ))]}" "$rep"; done
done

python3 - "$RESULTS" "$REPS" "$(turnserver --version 2>/dev/null | head -1)" "$("$RELAYD" --version 2>/dev/null | head -1)" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
def med(server, workload, key):
    v = [r[key] for r in rows if r["server"] == server and r["workload"] == workload and r.get(key) is not None]
    return statistics.median(v) if v else None
table = []
def row(name, workload, key, unit, better, scale=1.0):
    a, b = med("relayd", workload, key), med("coturn", workload, key)
    a = a * scale if a is not None else None
    b = b * scale if b is not None else None
    ratio = f"{a / b:.2f}" if a is not None and b else "-"
    fmt = lambda x: "-" if x is None else (f"{x:,.0f}" if abs(x) >= 100 else f"{x:.2f}")
    table.append((name, fmt(a), fmt(b), ratio, unit, better))
for cert, label in (("ecdsa", "ECDSA P-256"), ("rsa", "RSA-2048")):
    for mode in ("full", "resumed"):
        w = f"handshake/{cert}/{mode}"
        row(f"TLS handshakes, {mode}, {label} (32 at a time)", w, "handshake_rate", "handshakes/s", "higher")
        row(f"  server CPU per {mode} handshake, {label}", w, "server_cpu_ms_per_handshake", "ms", "lower")
for n in (4000, 9000):
    # Each server's fewest held in the runs the median is of, so a row never claims more
    # allocations than a server held.
    held = [min((r["held"] for r in rows if r["server"] == k and r["workload"] == f"idle-{n}"
                 and r.get("bytes_per_allocation") is not None), default=0)
            for k in ("relayd", "coturn")]
    label = f"{n:,} held" if min(held) == n else f"{n:,} asked, relayd {held[0]:,} / coturn {held[1]:,} held"
    row(f"memory per idle TLS allocation ({label})", f"idle-{n}", "bytes_per_allocation", "KiB", "lower", 1 / 1024)
for pattern in ("external-peer", "client-to-client"):
    for rate in (1000, 10000, 20000):
        w = f"traffic/{pattern}/{rate}"
        row(f"TLS {pattern} 100B @{rate}/s: server CPU per 1M relayed pkts", w, "server_cpu_s_per_mpkt", "cpu-s", "lower")
        row(f"TLS {pattern} 100B @{rate}/s: p50 latency", w, "lat_p50_us", "us", "lower")
        row(f"TLS {pattern} 100B @{rate}/s: p99 latency", w, "lat_p99_us", "us", "lower")
        row(f"TLS {pattern} 100B @{rate}/s: loss", w, "loss_pct", "%", "lower")
width = max(len(r[0]) for r in table)
print(f"\n| {'metric':<{width}} | relayd | coturn | relayd/coturn | unit | better |")
print(f"|{'-' * (width + 2)}|---|---|---|---|---|")
for r in table:
    print(f"| {r[0]:<{width}} | {r[1]} | {r[2]} | {r[3]} | {r[4]} | {r[5]} |")
print(f"\nmedians of {sys.argv[2]} repetition(s); coturn {sys.argv[3]}; {sys.argv[4]}")
EOF
