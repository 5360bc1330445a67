#!/usr/bin/env bash
# The kernel fast path measured (docs/kernel-fast-path.md) between three network namespaces this
# script creates, joined by veth pairs:
#
#   client (10.78.1.2) --veth-- (10.78.1.1) relay (10.78.2.1) --veth-- (10.78.2.2) peer
#                                  relay (10.78.3.1) --veth-- (10.78.3.2) client 2
#
# relay-bench runs in the client namespace; its echo peer's socket lives in the peer namespace,
# and for client to client the second client of each pair lives in the client 2 namespace. The
# server runs in the relay namespace, which also routes between the others (ip_forward) for the
# baseline. Five kinds, one after the other under the same load:
#   direct         no relay: the same traffic straight between the endpoints (relay-bench --direct)
#   relayd-xdp     relayd with kernel-offload=on and kernel-offload-xdp (XDP on the relay's veth ends)
#   relayd-kernel  relayd with kernel-offload=on (the TC program)
#   relayd         relayd in user space
#   coturn
# Workloads: external peer with 100 and 1,200-byte payloads, client to client (the two clients
# of a pair on two hosts, both on the relay: relay to relay) with 100 bytes; ChannelData, 50 pairs. For each: the whole machine's
# busy CPU per million relayed packets (/proc/stat, all CPUs, softirq included: when the kernel
# relays, the work runs in softirq and is charged to no process), the relay-attributable share
# (that minus the direct baseline of the same repetition), the server process's own CPU and
# latency p50/p99. Medians; ratios to coturn.
# Then, for the external peer, the highest rate each kind carries with loss <= 0.1 %, offered by
# the kernel load generator (kernel-loadgen: a BPF program in live-frames mode that sends without
# sockets, and an XDP sink that counts) at steps from 20,000 to 1,500,000 packets a second each
# way; relay-bench's own sockets would give out first on two vCPUs (docs/kernel-fast-path.md,
# "Max rate"). A step fails on loss, or when a generator cannot keep up with it.
# Then the program's own cost per packet from BPF_PROG_TEST_RUN (fastpath-bench).
# Needs root (namespaces, the BPF programs) and ip (iproute2).
#
#   scripts/bench-fastpath.sh [--reps N] [--rate R] [--no-max-rate | --only-max-rate] [--kinds "KIND ..."]
#                             [--perf] [--skip-build]
#
# The max rate runs in the first repetition only; --only-max-rate runs it alone, in every
# repetition (the table then gives the median of each repetition's highest step). --kinds picks
# some of the five kinds.
#
# --perf: also records a whole-system profile (perf record -a -g, kernel symbols) for 3 s in
# the middle of each kind's first external-peer 100-byte run, and prints where the time goes
# (that run's figures then include the profiler's own cost: take the table from a run without).
#
# Namespaces are removed and servers stopped by PID when the script ends, also on failure.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
export PATH="/opt/swift/usr/bin:$PATH"

REPS=3
RATE=20000
BUILD=1
MAX_RATE=1
PERF=0
ONLY_KINDS=""
LOADGEN_STEPS="20000 40000 60000 90000 130000 180000 240000 320000 440000 600000 800000 1100000 1500000"
while [ $# -gt 0 ]; do
    case "$1" in
        --reps) REPS=$2; shift 2 ;;
        --rate) RATE=$2; shift 2 ;;
        --no-max-rate) MAX_RATE=0; shift ;;
        --only-max-rate) MAX_RATE=only; shift ;;
        --kinds) ONLY_KINDS=$2; shift 2 ;;
        --perf) PERF=1; shift ;;
        --skip-build) BUILD=0; shift ;;
        *) echo "usage: $0 [--reps N] [--rate R] [--no-max-rate | --only-max-rate] [--kinds "KIND ..."] [--perf] [--skip-build]" >&2; exit 2 ;;
    esac
done
log() { printf 'bench-fastpath: %s\n' "$*" >&2; }
[ "$(id -u)" = 0 ] || { log "needs root (network namespaces, the BPF program)"; exit 1; }
command -v ip >/dev/null || { log "needs ip (iproute2)"; exit 1; }
command -v turnserver >/dev/null || { log "coturn (turnserver) is needed: apt-get install coturn"; exit 1; }
[ "$PERF" = 0 ] || command -v perf >/dev/null || { log "--perf needs perf (apt-get install linux-perf)"; exit 1; }

if [ "$BUILD" = 1 ]; then
    log "building release binaries in .build-bench and the BPF program"
    swift build --quiet -c release --scratch-path .build-bench --product relayd
    swift build --quiet -c release --scratch-path .build-bench --product relay-bench
    swift build --quiet -c release --scratch-path .build-bench --product fastpath-bench
    swift build --quiet -c release --scratch-path .build-bench --product kernel-loadgen
fi
BIN=$(swift build -c release --scratch-path .build-bench --show-bin-path)
WORK=$(mktemp -d /tmp/relayd-bench-fastpath.XXXXXX)
mkdir -p "$WORK/bin"
cp "$BIN/relayd" "$BIN/relay-bench" "$BIN/fastpath-bench" "$BIN/kernel-loadgen" "$WORK/bin/"
OUT=$WORK/bin/relayd_fastpath.bpf.o LOADGEN_OUT=$WORK/bin/relayd_loadgen.bpf.o ./scripts/build-bpf.sh >/dev/null
RESULTS="$WORK/results.jsonl"
: > "$RESULTS"
SECRET="bench-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
REALM="bench.local"

# --- the three hosts -----------------------------------------------------------------------
TAG="bf$(($$ % 100000))"
NS_C="$TAG-c" NS_R="$TAG-r" NS_P="$TAG-p" NS_D="$TAG-d"
CLIENT_IP=10.78.1.2 RELAY_C=10.78.1.1 RELAY_P=10.78.2.1 PEER_IP=10.78.2.2 RELAY_D=10.78.3.1 PARTNER_IP=10.78.3.2
PORT=3478

# shellcheck source=scripts/bench-server.sh
. "$ROOT/scripts/bench-server.sh"
teardown() {
    cleanup
    for ns in "$NS_C" "$NS_R" "$NS_P" "$NS_D"; do ip netns del "$ns" 2>/dev/null || true; done
}
trap teardown EXIT

for ns in "$NS_C" "$NS_R" "$NS_P" "$NS_D"; do
    ip netns add "$ns"
    ip -n "$ns" link set lo up
done
# link OUTER-NS OUTER-IP INNER-IP NAME: a veth pair between OUTER-NS and the relay namespace.
link() {
    ip link add "$4o" type veth peer name "$4i"
    ip link set "$4o" netns "$1"
    ip link set "$4i" netns "$NS_R"
    ip -n "$1" addr add "$2/24" dev "$4o"
    ip -n "$NS_R" addr add "$3/24" dev "$4i"
    ip -n "$1" link set "$4o" up
    ip -n "$NS_R" link set "$4i" up
}
link "$NS_C" "$CLIENT_IP" "$RELAY_C" "${TAG}c"
link "$NS_P" "$PEER_IP" "$RELAY_P" "${TAG}p"
link "$NS_D" "$PARTNER_IP" "$RELAY_D" "${TAG}d"
ip -n "$NS_C" route add default via "$RELAY_C"
ip -n "$NS_P" route add default via "$RELAY_P"
ip -n "$NS_D" route add default via "$RELAY_D"
ip netns exec "$NS_R" sysctl -qw net.ipv4.ip_forward=1
# A frame an XDP program redirects into a veth reaches the other end only if that end runs NAPI:
# the outer ends get an XDP program of their own (relayd's object, whose empty maps pass
# everything), for every kind alike.
for pair in "$NS_C ${TAG}co" "$NS_P ${TAG}po" "$NS_D ${TAG}do"; do
    read -r ns dev <<<"$pair"
    ip -n "$ns" link set dev "$dev" xdpdrv obj "$WORK/bin/relayd_fastpath.bpf.o" sec xdp
done
# The load generators' anchors: a veth pair that carries nothing, in each generator's namespace
# (kernel-loadgen keeps its program attached there; relayd_loadgen.h says why).
for ns in "$NS_C" "$NS_P"; do ip -n "$ns" link add "${TAG}ga" type veth peer name "${TAG}gb"; done
log "namespaces $NS_C, $NS_R, $NS_P, $NS_D up"

# start_server KIND: relayd (with or without the fast path) or coturn in the relay namespace.
start_server() {
    local kind=$1 dir=$2
    local common=(
        "--listening-ip=$RELAY_C" "--listening-port=$PORT" "--relay-ip=$RELAY_P"
        --min-port=40000 --max-port=49999 --use-auth-secret "--static-auth-secret=$SECRET" "--realm=$REALM"
        "--allowed-peer-ip=$PEER_IP" --no-tcp --no-tls
    )
    case "$kind" in
        relayd | relayd-kernel | relayd-xdp)
            local extra=()
            [ "$kind" = relayd ] || extra=(--kernel-offload=on "--kernel-offload-interface=${TAG}ci"
                "--kernel-offload-interface=${TAG}pi" "--kernel-offload-interface=${TAG}di")
            [ "$kind" = relayd-xdp ] && extra+=(--kernel-offload-xdp)
            : > "$dir/relayd.conf"
            ip netns exec "$NS_R" "$WORK/bin/relayd" -c "$dir/relayd.conf" "${common[@]}" "${extra[@]}" \
                --api-listening-ip=127.0.0.1 --api-listening-port=8080 \
                --drain-timeout=0 --log-level=notice \
                "--log-file=$dir/relayd-file.log" >>"$dir/relayd.log" 2>&1 &
            ;;
        coturn)
            ip netns exec "$NS_R" turnserver -n "${common[@]}" --no-dtls --no-cli --no-rfc5780 \
                "--log-file=$dir/coturn.log" --simple-log --no-stdout-log \
                "--pidfile=$dir/turnserver.pid" "--userdb=$dir/turndb" >>"$dir/coturn.out" 2>&1 &
            ;;
    esac
    SERVER_PID=$!
    for _ in $(seq 100); do
        ip netns exec "$NS_R" ss -Huln "sport = :$PORT" 2>/dev/null | grep -q . && break
        kill -0 "$SERVER_PID" 2>/dev/null || { log "$kind did not start; see $dir"; exit 1; }
        sleep 0.05
    done
    sleep 0.3
}

# measure KIND REP LABEL PATTERN PAYLOAD RATE DURATION: one relay-bench run; its JSON line goes to
# RESULTS; prints the loss in percent.
measure() {
    local kind=$1 rep=$2 label=$3 pattern=$4 payload=$5 rate=$6 duration=$7 line
    local args=(--server "$RELAY_C:$PORT" --secret "$SECRET" --realm "$REALM" --client-ip "$CLIENT_IP"
        --peer-ip "$PEER_IP" --peer-netns "$NS_P" --label "$label" --pattern "$pattern" --payload "$payload"
        --pairs 50 --rate "$rate" --duration "$duration" --warmup 1)
    if [ "$kind" = direct ]; then args+=(--direct); else args+=(--server-pid "$SERVER_PID"); fi
    local profiler=""
    if [ "$PERF" = 1 ] && [ "$rep" = 1 ] && [ "$label" = fixed/external-peer/100 ]; then
        (sleep 2.5; perf record -q -a -g -o "$WORK/perf-$kind.data" -- sleep 3 >/dev/null 2>&1) &
        profiler=$!
    fi
    [ "$pattern" = client-to-client ] && args+=(--partner-ip "$PARTNER_IP" --partner-netns "$NS_D")
    line=$(ip netns exec "$NS_C" "$WORK/bin/relay-bench" "${args[@]}" 2>>"$WORK/relay-bench.err" | grep '^{' || true)
    [ -z "$profiler" ] || wait "$profiler" || true
    if [ -z "$line" ]; then
        log "relay-bench gave no result for $kind $label"
        echo 100
        return
    fi
    printf '{"kind":"%s","rep":%s,"label":"%s","rate":%s,"r":%s}\n' "$kind" "$rep" "$label" "$rate" "$line" >> "$RESULTS"
    python3 -c 'import json,sys; print(json.loads(sys.argv[1])["loss_pct"])' "$line"
}

# gro DEV on|off, in the relay namespace: a veth end with GRO on runs NAPI, which it needs to
# receive the frames the load generator transmits from the other end (XDP_TX, ndo_xdp_xmit). The
# fixed-rate runs leave it off, as the fast path's own XDP program would find it.
gro() {
    ip netns exec "$NS_R" python3 - "$1" "$2" <<'PY'
import array, fcntl, socket, struct, sys
value = array.array("I", [0x2C, 1 if sys.argv[2] == "on" else 0])  # ETHTOOL_SGRO
request = struct.pack("16sP16x", sys.argv[1].encode(), value.buffer_info()[0])
with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
    fcntl.ioctl(s.fileno(), 0x8946, request)  # SIOCETHTOOL
PY
}

# max_rate KIND REP PAYLOAD: the highest rate the relay carries with loss <= 0.1 %, offered by the
# kernel load generator (kernel-loadgen) rather than relay-bench, whose sockets on this machine's
# two vCPUs give out first. relay-bench sets up the 100 external-peer clients and holds them
# (--flows-file); then, at each step, one generator in the client namespace sends ChannelData
# to the relay at the step's rate while one in the peer namespace sends the peer's data to the
# relayed addresses at the same rate, and each counts what arrives from the other through the
# relay (an XDP sink on its own veth end, in place of the NAPI program).
max_rate() {
    local kind=$1 rep=$2 payload=$3 flows="$WORK/flows-$1-$2-$3" holder step start
    local args=(--server "$RELAY_C:$PORT" --secret "$SECRET" --realm "$REALM" --client-ip "$CLIENT_IP"
        --peer-ip "$PEER_IP" --peer-netns "$NS_P" --pattern external-peer --payload "$payload" --pairs 50
        --flows-file "$flows" --hold 600)
    [ "$kind" = direct ] && args+=(--direct)
    rm -f "$flows"
    ip netns exec "$NS_C" "$WORK/bin/relay-bench" "${args[@]}" >>"$WORK/relay-bench.err" 2>&1 &
    holder=$!
    for _ in $(seq 300); do [ -f "$flows" ] && break; sleep 0.1; done
    if [ ! -f "$flows" ]; then
        log "relay-bench did not set up the flows for $kind"
        kill "$holder" 2>/dev/null || true
        return
    fi
    ip -n "$NS_C" link set dev "${TAG}co" xdpdrv off
    ip -n "$NS_P" link set dev "${TAG}po" xdpdrv off
    [ "$kind" = relayd-xdp ] || { gro "${TAG}ci" on; gro "${TAG}pi" on; }
    local mac_c mac_p
    mac_c=$(ip -n "$NS_R" -br link show dev "${TAG}ci" | awk '{print $3}')
    mac_p=$(ip -n "$NS_R" -br link show dev "${TAG}pi" | awk '{print $3}')
    for step in $LOADGEN_STEPS; do
        start=$(($(date +%s%N) + 700000000))
        local common=(--object "$WORK/bin/relayd_loadgen.bpf.o" --flows "$flows" --payload "$payload"
            --rate "$step" --duration 2 --start-at "$start")
        ip netns exec "$NS_C" "$WORK/bin/kernel-loadgen" "${common[@]}" --side client --interface "${TAG}co" --anchor "${TAG}ga" \
            --gateway-mac "$mac_c" --server "$RELAY_C:$PORT" >"$WORK/loadgen-client.json" 2>&1 &
        local client=$!
        ip netns exec "$NS_P" "$WORK/bin/kernel-loadgen" "${common[@]}" --side peer --interface "${TAG}po" --anchor "${TAG}ga" \
            --gateway-mac "$mac_p" >"$WORK/loadgen-peer.json" 2>&1 || true
        wait "$client" || true
        local verdict
        verdict=$(python3 - "$WORK/loadgen-client.json" "$WORK/loadgen-peer.json" "$kind" "$rep" "$payload" "$step" \
            "$RESULTS" <<'PY'
import json, sys
try:
    client, peer = (json.loads(open(p).read().strip().splitlines()[-1]) for p in sys.argv[1:3])
except Exception as error:
    print(f"fail generator output unreadable ({error})")
    sys.exit()
kind, rep, payload, step, results = sys.argv[3], int(sys.argv[4]), sys.argv[5], int(sys.argv[6]), sys.argv[7]
sent = client["sent"] + peer["sent"]
received = client["received"] + peer["received"]
loss = 100.0 * (sent - received) / sent
behind = min(client["sent_rate"], peer["sent_rate"]) < 0.98 * step
r = {"loss_pct": loss, "sent": sent, "received": received, "behind": behind,
     "lost_to_peer": client["sent"] - peer["received"], "lost_to_client": peer["sent"] - client["received"],
     "to_peer_p50_us": peer["lat_p50_us"], "to_peer_p99_us": peer["lat_p99_us"],
     "to_client_p50_us": client["lat_p50_us"], "to_client_p99_us": client["lat_p99_us"],
     "generator_cpu_s": client["generator_cpu_s"] + peer["generator_cpu_s"]}
with open(results, "a") as out:
    out.write(json.dumps({"kind": kind, "rep": rep, "label": f"kstep/external-peer/{payload}", "rate": step, "r": r}) + "\n")
ok = loss <= 0.1 and not behind
print(("ok" if ok else "fail") + f" loss {loss:.3f}% ({received}/{sent}; lost to peer {r['lost_to_peer']},"
      + f" to client {r['lost_to_client']})" + (" generator behind" if behind else "")
      + f", one-way p50/p99 to peer {peer['lat_p50_us']}/{peer['lat_p99_us']} us, to client {client['lat_p50_us']}/{client['lat_p99_us']} us")
PY
        )
        log "  $kind external-peer ${payload}B @$step/s each way (kernel load generator): $verdict"
        [ "${verdict%% *}" = ok ] || break
    done
    [ "$kind" = relayd-xdp ] || { gro "${TAG}ci" off; gro "${TAG}pi" off; }
    ip -n "$NS_C" link set dev "${TAG}co" xdpdrv obj "$WORK/bin/relayd_fastpath.bpf.o" sec xdp
    ip -n "$NS_P" link set dev "${TAG}po" xdpdrv obj "$WORK/bin/relayd_fastpath.bpf.o" sec xdp
    kill "$holder" 2>/dev/null || true
    wait "$holder" 2>/dev/null || true
}

WORKLOADS=("external-peer 100" "external-peer 1200" "client-to-client 100")
KINDS=(direct relayd-xdp relayd-kernel relayd coturn)
for rep in $(seq "$REPS"); do
    for i in 0 1 2 3 4; do
        kind=${KINDS[$(((i + rep) % 5))]}
        [ -z "$ONLY_KINDS" ] || [[ " $ONLY_KINDS " == *" $kind "* ]] || continue
        dir="$WORK/$kind-$rep"
        mkdir -p "$dir"
        [ "$kind" = direct ] || start_server "$kind" "$dir"
        for workload in "${WORKLOADS[@]}"; do
            read -r pattern payload <<<"$workload"
            if [ "$MAX_RATE" != only ]; then
                loss=$(measure "$kind" "$rep" "fixed/$pattern/$payload" "$pattern" "$payload" "$RATE" 5)
                log "$kind rep $rep $pattern ${payload}B @$RATE/s: loss $loss%"
            fi
            if [ "$MAX_RATE" = only ] || { [ "$MAX_RATE" = 1 ] && [ "$rep" = 1 ]; } && [ "$pattern" = external-peer ]; then
                max_rate "$kind" "$rep" "$payload"
            fi
        done
        [ "$kind" = direct ] || cleanup
    done
done

python3 - "$RESULTS" "$RATE" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
kinds = ["direct", "relayd-xdp", "relayd-kernel", "relayd", "coturn"]
reps = sorted({r["rep"] for r in rows})

def values(kind, label, key):
    return [r["r"][key] for r in rows
            if r["kind"] == kind and r["label"] == label and isinstance(r["r"].get(key), (int, float))]

def med(vs):
    return statistics.median(vs) if vs else float("nan")

def attributable(kind, label):
    """The kind's whole-machine CPU minus the direct baseline's, per repetition."""
    out = []
    for rep in reps:
        mine = [r["r"]["system_cpu_s_per_mpkt"] for r in rows if r["kind"] == kind and r["label"] == label and r["rep"] == rep]
        base = [r["r"]["system_cpu_s_per_mpkt"] for r in rows if r["kind"] == "direct" and r["label"] == label and r["rep"] == rep]
        if mine and base:
            out.append(mine[0] - base[0])
    return out

def max_rate(kind, label):
    """The median over repetitions of the highest step passed (loss <= 0.1 %, generator on time)."""
    best = []
    for rep in reps:
        ok = [r["rate"] for r in rows if r["kind"] == kind and r["label"] == label and r["rep"] == rep
              and r["r"]["loss_pct"] <= 0.1 and not r["r"].get("behind")]
        if ok:
            best.append(max(ok))
    return med(best)

print(f"network namespaces over veth; ChannelData, 50 pairs, {sys.argv[2]} msg/s; medians of {len(reps)} repetition(s)")
for workload in ("external-peer/100", "external-peer/1200", "client-to-client/100"):
    label = f"fixed/{workload}"
    table = [
        ("whole machine CPU s / M relayed pkts", [med(values(k, label, "system_cpu_s_per_mpkt")) for k in kinds]),
        ("relay-attributable CPU s / M pkts", [float("nan")] + [med(attributable(k, label)) for k in kinds[1:]]),
        ("server process CPU s / M pkts", [float("nan")] + [med(values(k, label, "server_cpu_s_per_mpkt")) for k in kinds[1:]]),
        ("latency p50 us", [med(values(k, label, "lat_p50_us")) for k in kinds]),
        ("latency p99 us", [med(values(k, label, "lat_p99_us")) for k in kinds]),
        ("loss %", [med(values(k, label, "loss_pct")) for k in kinds]),
    ]
    if workload.startswith("external-peer") and any(r["label"] == f"kstep/{workload}" for r in rows):
        table.append(("max rate each way, loss <= 0.1 % (pkt/s)", [max_rate(k, f"kstep/{workload}") for k in kinds]))
    print(f"\n{workload.replace('/', ' ')} B")
    print(f"{'':42} {'direct':>10} {'xdp':>10} {'tc':>10} {'relayd':>10} {'coturn':>10} {'xdp/coturn':>11} {'tc/coturn':>10} {'relayd/coturn':>14}")
    for name, (d, x, k, r, c) in table:
        ratio = lambda a: f"{a / c:.2f}x" if c == c and c not in (0,) and a == a else "-"
        print(f"{name:42} {d:10.2f} {x:10.2f} {k:10.2f} {r:10.2f} {c:10.2f} {ratio(x):>11} {ratio(k):>10} {ratio(r):>14}")
EOF
echo
"$WORK/bin/fastpath-bench" --object "$WORK/bin/relayd_fastpath.bpf.o"
if [ "$PERF" = 1 ]; then
    for kind in "${KINDS[@]}"; do
        [ -f "$WORK/perf-$kind.data" ] || continue
        printf '\n%s, external-peer 100 B: whole system (3 s, both CPUs), share of samples by command\n' "$kind"
        perf report -q -i "$WORK/perf-$kind.data" --no-children -g none --sort comm --stdio 2>/dev/null \
            | grep -E '^ +[0-9]' | sed -n 1,8p || true
        printf '%s: top symbols by self time, the idle loop left out\n' "$kind"
        perf report -q -i "$WORK/perf-$kind.data" --no-children -g none --sort comm,dso,sym --stdio 2>/dev/null \
            | grep -E '^ +[0-9]' | grep -vE 'swapper .*(safe_halt|finish_task_switch|do_idle|cpuidle|tick_nohz)' \
            | sed -n 1,25p || true
    done
fi
log "raw results: $RESULTS"
