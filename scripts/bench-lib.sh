# Shared by scripts/bench-state-dir.sh, scripts/bench-upgrade.sh and scripts/bench-userdb.sh (sourced, not run): their
# options, the release build they measure, and loopback helpers.
#
#   bench_options DEFAULT_REPS USAGE_LINES "$@"   sets REPS and BUILD (--reps N, --skip-build)
#   bench_build                                   builds relayd and relay-bench (.build-bench), sets BIN
#   bench_workdir NAME                            makes WORK (removed at exit) and PIDS; stop_all
#                                                 stops the PIDS (TERM, then KILL), also at exit
#   bench_port_range                              sets MIN_PORT and MAX_PORT below the ephemeral range
#   free_port                                     a free loopback TCP port

bench_options() {
    REPS=$1
    local usage=$2
    shift 2
    BUILD=1
    while [ $# -gt 0 ]; do
        case "$1" in
            --reps) REPS="$2"; shift ;;
            --reps=*) REPS="${1#*=}" ;;
            --skip-build) BUILD=0 ;;
            -h|--help) sed -n "$usage" "$0"; exit 0 ;;
            *) echo "$(basename "$0"): unknown option $1" >&2; exit 2 ;;
        esac
        shift
    done
}

bench_build() {
    export PATH="/opt/swift/usr/bin:$PATH"
    if [ "$BUILD" = 1 ]; then
        swift build --quiet -c release --scratch-path .build-bench --product relayd
        swift build --quiet -c release --scratch-path .build-bench --product relay-bench
    fi
    BIN=$(swift build -c release --scratch-path .build-bench --show-bin-path)
}

bench_workdir() {
    WORK=$(mktemp -d "/tmp/relayd-bench-$1.XXXXXX")
    PIDS=()
    trap 'stop_all; rm -rf "$WORK"' EXIT
}

stop_all() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    sleep 0.5
    for pid in "${PIDS[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
    PIDS=()
}

bench_port_range() {
    local low
    read -r low _ < /proc/sys/net/ipv4/ip_local_port_range
    MAX_PORT=$((low - 1))
    MIN_PORT=$((MAX_PORT - 19999))
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
