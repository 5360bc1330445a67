#!/usr/bin/env bash
# RFC 6062 relaying's cost (docs/benchmark.md, "TCP relaying"), on loopback: relayd with its
# pipes in user space, relayd with them spliced in the kernel (kernel-offload=on, needs root),
# coturn, and HAProxy in TCP mode with `option splice-auto` as the floor; throughput, server CPU
# and whole-system CPU per relayed MiB. Builds a release relayd and its BPF programs; every
# process is stopped by PID. Prints one table of medians (scripts/bench_tcp_relay.py).
#
#   scripts/bench-tcp-relay.sh [--skip-build] [--reps N] [--streams N] [--megabytes N]
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/opt/swift/usr/bin:$PATH"
SKIP_BUILD=0
ARGS=()
for arg in "$@"; do
    case "$arg" in
        --skip-build) SKIP_BUILD=1 ;;
        *) ARGS+=("$arg") ;;
    esac
done
for tool in turnserver haproxy; do
    command -v "$tool" >/dev/null || { echo "bench-tcp-relay: missing $tool (apt: coturn haproxy)" >&2; exit 1; }
done
[ "$(id -u)" = 0 ] || { echo "bench-tcp-relay: kernel-offload needs root" >&2; exit 1; }
if [ "$SKIP_BUILD" = 0 ]; then
    swift build --quiet -c release --scratch-path .build-bench --product relayd
fi
OUT=.build-bench/bpf/relayd_fastpath.bpf.o ./scripts/build-bpf.sh >/dev/null
RELAYD_BIN="$PWD/.build-bench/release/relayd" exec python3 scripts/bench_tcp_relay.py "${ARGS[@]}"
