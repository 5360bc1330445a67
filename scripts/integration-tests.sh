#!/usr/bin/env bash
# Runs the real-peer integration tests (Tests/integration) against a server:
#
#   RELAY_SERVER=relayd (default)  the binary at RELAYD_BIN (default .build/debug/relayd)
#   RELAY_SERVER=coturn            coturn's turnserver, the reference
#
# Extra arguments go to pytest (e.g. -k uclient, -x). Prerequisites come from
# scripts/install-test-deps.sh; a missing one fails the run, naming it.
#
# The suite runs in two parts (Tests/integration/README.md): every test not
# marked `serial` on INTEGRATION_WORKERS pytest-xdist workers (default 3; each test module stays
# on one worker), then the `serial` tests one after another, alone on the machine. The run ends
# with one pytest-style line adding both parts up, and fails if either part failed.
# INTEGRATION_WORKERS=1, or a -m of your own among the arguments, runs everything in one pytest
# process instead, in file order.
# The whole run, both parts, is bounded by INTEGRATION_TIMEOUT seconds: default 1200 on
# workers (about 950 tests: about 550 s on two cores, one of them building the Debian package
# in release mode), 1800 in one process (about 1,000 s).
set -uo pipefail

cd "$(dirname "$0")/.."

RELAY_SERVER=${RELAY_SERVER:-relayd}
RELAYD_BIN=${RELAYD_BIN:-.build/debug/relayd}
PYTHON=${PYTHON:-python3}
INTEGRATION_WORKERS=${INTEGRATION_WORKERS:-3}
export RELAY_SERVER RELAYD_BIN

fail() {
    printf 'integration-tests: %s\n' "$*" >&2
    exit 2
}

command -v "$PYTHON" >/dev/null 2>&1 || fail "missing prerequisite: $PYTHON"
"$PYTHON" -c 'import pytest' >/dev/null 2>&1 \
    || fail "missing prerequisite: Python package pytest (run scripts/install-test-deps.sh)"
"$PYTHON" -c 'import xdist' >/dev/null 2>&1 \
    || fail "missing prerequisite: Python package pytest-xdist (run scripts/install-test-deps.sh)"
"$PYTHON" -c 'from aiortc import RTCIceTransportPolicy' >/dev/null 2>&1 \
    || fail "missing prerequisite: Python package aiortc >= 1.16 (run scripts/install-test-deps.sh)"
"$PYTHON" -c 'import selenium' >/dev/null 2>&1 \
    || fail "missing prerequisite: Python package selenium (run scripts/install-test-deps.sh)"
for tool in turnutils_uclient turnutils_peer timeout; do
    command -v "$tool" >/dev/null 2>&1 \
        || fail "missing prerequisite: $tool (run scripts/install-test-deps.sh)"
done
# The browser test (test_browser.py): Debian packages chromium and chromium-driver.
# The NAT test (test_nat.py): ip (iproute2) and nft (nftables); it also needs root
# and fails, saying so, without it.
for tool in chromium chromedriver ip nft; do
    command -v "$tool" >/dev/null 2>&1 \
        || fail "missing prerequisite: $tool (run scripts/install-test-deps.sh)"
done

case "$RELAY_SERVER" in
    relayd)
        [ -x "$RELAYD_BIN" ] || fail "missing prerequisite: relayd binary at RELAYD_BIN=$RELAYD_BIN (build it with 'swift build', or set RELAYD_BIN)"
        ;;
    coturn)
        command -v turnserver >/dev/null 2>&1 \
            || fail "missing prerequisite: turnserver (Debian package coturn; run scripts/install-test-deps.sh)"
        ;;
    *)
        fail "RELAY_SERVER must be 'relayd' or 'coturn', not '$RELAY_SERVER'"
        ;;
esac

case "$INTEGRATION_WORKERS" in
    '' | *[!0-9]* | 0) fail "INTEGRATION_WORKERS must be a number of workers, 1 or more, not '$INTEGRATION_WORKERS'" ;;
esac
for arg in "$@"; do
    case "$arg" in -m | -m*) INTEGRATION_WORKERS=1 ;; esac
done
if [ "$INTEGRATION_WORKERS" -eq 1 ]; then
    INTEGRATION_TIMEOUT=${INTEGRATION_TIMEOUT:-1800}
else
    INTEGRATION_TIMEOUT=${INTEGRATION_TIMEOUT:-1200}
fi

deadline=$((SECONDS + INTEGRATION_TIMEOUT))
outputs=$(mktemp -d)
trap 'rm -rf "$outputs"' EXIT

# run_part NAME PYTEST-ARGS...: one pytest run within what is left of the deadline, its output
# shown and kept in $outputs/NAME; sets rc to pytest's exit status.
run_part() {
    local name=$1 left=$((deadline - SECONDS))
    shift
    if [ "$left" -le 0 ]; then
        printf 'integration-tests: no time left for the %s part\n' "$name" >&2
        rc=124
        return
    fi
    timeout --kill-after=30 "$left" "$PYTHON" -m pytest -q -rfEsxX "$@" | tee "$outputs/$name"
    rc=${PIPESTATUS[0]}
}

report() {
    case "$2" in
        0) ;;
        5) printf 'integration-tests: %s: pytest collected no tests\n' "$1" >&2 ;;
        124|137) printf 'integration-tests: %s: timed out (the run is bounded by %ss)\n' "$1" "$INTEGRATION_TIMEOUT" >&2 ;;
        *) printf 'integration-tests: %s: failed (pytest exit %s)\n' "$1" "$2" >&2 ;;
    esac
}

if [ "$INTEGRATION_WORKERS" -eq 1 ]; then
    printf 'integration-tests: server %s, one process, timeout %ss\n' "$RELAY_SERVER" "$INTEGRATION_TIMEOUT" >&2
    run_part all -p no:xdist Tests/integration "$@"
    report "the suite" "$rc"
    exit "$rc"
fi

printf 'integration-tests: server %s, %s workers then the serial tests, timeout %ss\n' \
    "$RELAY_SERVER" "$INTEGRATION_WORKERS" "$INTEGRATION_TIMEOUT" >&2
run_part parallel -n "$INTEGRATION_WORKERS" --dist loadfile -m "not serial" Tests/integration "$@"
parallel_rc=$rc
report "parallel part" "$parallel_rc"
run_part serial -p no:xdist -m serial Tests/integration "$@"
serial_rc=$rc
report "serial part" "$serial_rc"

# Failed if either part failed; "no tests" (5) only if neither collected any (e.g. a -k that
# selects only serial tests leaves the parallel part empty).
if [ "$parallel_rc" -ne 0 ] && [ "$parallel_rc" -ne 5 ]; then
    rc=$parallel_rc
elif [ "$serial_rc" -ne 0 ] && [ "$serial_rc" -ne 5 ]; then
    rc=$serial_rc
elif [ "$parallel_rc" -eq 5 ] && [ "$serial_rc" -eq 5 ]; then
    rc=5
else
    rc=0
fi
case "$rc" in
    0) ;;
    5) printf 'integration-tests: no tests collected\n' >&2 ;;
    *) printf 'integration-tests: failed (exit %s)\n' "$rc" >&2 ;;
esac
# Last, as one pytest run would end: both parts added up.
"$PYTHON" scripts/pytest-summary.py "$outputs/parallel" "$outputs/serial"
exit "$rc"
