#!/usr/bin/env bash
# The cluster's costs (docs/cluster.md), on loopback: credential API requests per second with
# wrk (relayd alone, one node of a three-node cluster, the three at once) and the latency a
# Redis round trip adds to an Allocate under `user-quota` (relayd alone, a cluster node, coturn
# as the reference). Builds a release relayd, starts a real redis-server; every process is
# stopped by PID. Prints one table of medians (scripts/bench_cluster.py).
#
#   scripts/bench-cluster.sh [--skip-build] [--reps N] [--seconds S] [--allocations N]
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
for tool in wrk redis-server turnserver; do
    command -v "$tool" >/dev/null || { echo "bench-cluster: missing $tool (apt: wrk redis-server coturn)" >&2; exit 1; }
done
if [ "$SKIP_BUILD" = 0 ]; then
    swift build --quiet -c release --scratch-path .build-bench --product relayd
fi
RELAYD_BIN="$PWD/.build-bench/release/relayd" exec python3 scripts/bench_cluster.py "${ARGS[@]}"
