# Sourced by scripts/bench.sh and scripts/bench-fastpath.sh: the server under test is one
# process, SERVER_PID, stopped by PID (SIGTERM, then SIGKILL after 5 s) when a measurement ends
# and when the script exits or is interrupted.
SERVER_PID=""
cleanup() {
    if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
        kill "$SERVER_PID" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
    fi
    SERVER_PID=""
}
trap cleanup EXIT
trap 'exit 130' INT TERM
