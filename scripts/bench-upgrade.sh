#!/usr/bin/env bash
# What a live upgrade and a crash cost calls in flight (docs/operations.md, "Upgrading without dropping calls"): relay-bench
# drives 200 UDP clients (100 client-to-client pairs, each with a channel) at 50 packets/s each
# through one relayd release build, and in the upgrade runs a second relay-bench 50 TCP clients
# (25 pairs, each over its own TCP connection) and a third 50 TLS 1.3 clients (25 pairs, each
# over its own TLS session) at 50 packets/s each; midway the server is
#   - upgrade: sent SIGUSR2 (docs/live-upgrade.md): the new process takes the allocations over;
#   - crash:   killed with SIGKILL and started again at once with the same configuration and
#              state-dir (docs/state-journal.md), as `Restart=on-failure` would. TCP and TLS
#              allocations end with their connections in a crash (RFC 8656), so only UDP clients
#              run then.
# Then relay-bench ends each allocation with a Refresh of lifetime 0, which succeeds only for an
# allocation the server still holds. Prints, per repetition and kind: datagrams sent and lost,
# the outage that loss amounts to at 10,000 datagrams/s, the largest one-way delay (the gap in
# relaying: datagrams wait in the socket buffers while no process reads), p99 delay, and the
# Refreshes that succeeded.
#
#   scripts/bench-upgrade.sh [--reps N] [--skip-build]
#
# Default 3 repetitions of each kind (about 2 minutes after the build). Loopback only; every
# server is stopped by PID. Uses the release binaries of scripts/bench.sh (.build-bench).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/bench-lib.sh
bench_options 3 '2,17p' "$@"
bench_build
bench_workdir upgrade
SECRET="bench-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
bench_port_range
conf/make-test-cert.sh "$WORK/tls" >/dev/null

# alive PID: the process exists and is not a zombie (it is not this shell's child).
alive() { [ -r "/proc/$1/stat" ] && ! awk '{ exit ($3 == "Z") ? 0 : 1 }' "/proc/$1/stat"; }

# start PORT API TLS_PORT: one relayd on the run's configuration; prints its pid.
start() {
    "$BIN/relayd" -c "$WORK/relayd.conf" --listening-ip=127.0.0.1 "--listening-port=$1" --relay-ip=127.0.0.1 \
        "--min-port=$MIN_PORT" "--max-port=$MAX_PORT" --use-auth-secret "--static-auth-secret=$SECRET" \
        --realm=bench.local --allow-loopback-peers "--tls-listening-port=$3" "--cert=$WORK/tls/cert.pem" \
        "--pkey=$WORK/tls/pkey.pem" --no-dtls --api-listening-ip=127.0.0.1 \
        "--api-listening-port=$2" --drain-timeout=5 --log-level=notice "--log-file=$WORK/relayd.log" \
        "--state-dir=$WORK/state" >>"$WORK/relayd.out" 2>&1 &
    echo $!
}

# run KIND: one server, one relay-bench run with the upgrade or the crash at its midpoint.
run() {
    local kind=$1 port api tls_port pid heir
    port=$(free_port)
    api=$(free_port)
    tls_port=$(free_port)
    rm -rf "$WORK/state" "$WORK/relayd.log"
    mkdir -m 0700 "$WORK/state"
    : > "$WORK/relayd.conf"
    pid=$(start "$port" "$api" "$tls_port")
    PIDS+=("$pid")
    for _ in $(seq 100); do ss -Huln "sport = :$port" | grep -q . && break; sleep 0.05; done
    "$BIN/relay-bench" --server "127.0.0.1:$port" --secret "$SECRET" --realm bench.local --label "$kind" \
        --pattern client-to-client --pairs 100 --rate 10000 --duration 10 --warmup 1 \
        >"$WORK/bench.json" 2>>"$WORK/relay-bench.err" &
    local bench=$! tcp="" tls=""
    : > "$WORK/bench-tcp.json"
    : > "$WORK/bench-tls.json"
    if [ "$kind" = upgrade ]; then
        "$BIN/relay-bench" --server "127.0.0.1:$port" --secret "$SECRET" --realm bench.local --label tcp \
            --transport tcp --pattern client-to-client --pairs 25 --rate 2500 --duration 10 --warmup 1 \
            >"$WORK/bench-tcp.json" 2>>"$WORK/relay-bench.err" &
        tcp=$!
        "$BIN/relay-bench" --server "127.0.0.1:$tls_port" --secret "$SECRET" --realm bench.local --label tls \
            --transport tls --pattern client-to-client --pairs 25 --rate 2500 --duration 10 --warmup 1 \
            >"$WORK/bench-tls.json" 2>>"$WORK/relay-bench.err" &
        tls=$!
    fi
    sleep 6
    if [ "$kind" = upgrade ]; then
        kill -USR2 "$pid"
        for _ in $(seq 200); do grep -q upgrade_succeeded "$WORK/relayd.log" 2>/dev/null && break; sleep 0.05; done
        heir=$(grep -o 'pid [0-9]* serves now' "$WORK/relayd.log" | awk '{print $2}' | tail -1)
        [ -n "$heir" ] && PIDS+=("$heir")
    else
        kill -9 "$pid"
        while alive "$pid"; do sleep 0.005; done
        PIDS+=("$(start "$port" "$api" "$tls_port")")
    fi
    wait "$bench" || true
    [ -n "$tcp" ] && { wait "$tcp" || true; }
    [ -n "$tls" ] && { wait "$tls" || true; }
    stop_all
    local line
    for line in "$kind $WORK/bench.json" "$kind-tcp $WORK/bench-tcp.json" "$kind-tls $WORK/bench-tls.json"; do
        set -- $line
        grep -q '^{' "$2" || continue
        grep '^{' "$2" | python3 -c '
import json, sys
r = json.loads(sys.stdin.read())
print(sys.argv[1], r["sent"], r["lost"], r["lat_max_us"] / 1000, r["lat_p99_us"] / 1000, r["release_ok"],
      r["release_ok"] + r["release_failed"])' "$1"
    done
}
for rep in $(seq "$REPS"); do
    run upgrade
    run crash
done | tee "$WORK/results"
python3 - "$WORK/results" <<'PY'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1]) if line.strip()]
# At 10,000 datagrams/s, each lost one is 0.1 ms with no process relaying.
print(f"{'kind':11} {'sent':>7} {'lost':>6} {'outage ms':>10} {'max delay ms':>13} {'p99 ms':>7} {'refreshed':>10}")
for kind, sent, lost, worst, p99, ok, total in rows:
    print(f"{kind:11} {sent:>7} {lost:>6} {int(lost) / 10:10.1f} {float(worst):13.1f} {float(p99):7.2f} {ok:>5}/{total}")
for kind in ("upgrade", "upgrade-tcp", "upgrade-tls", "crash"):
    mine = [r for r in rows if r[0] == kind]
    if mine:
        print(f"median {kind}: lost {statistics.median(int(r[2]) for r in mine):.0f}, "
              f"max delay {statistics.median(float(r[3]) for r in mine):.1f} ms")
PY
