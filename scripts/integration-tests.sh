#!/usr/bin/env bash
# Runs the real-peer integration tests (Tests/integration) against a server:
#
#   RELAY_SERVER=relayd (default)  the binary at RELAYD_BIN (default .build/debug/relayd)
#   RELAY_SERVER=coturn            coturn's turnserver, the reference
#
# Extra arguments go to pytest (e.g. -k uclient, -x). Prerequisites come from
# scripts/install-test-deps.sh; a missing one fails the run, naming it.
# The whole run is bounded by INTEGRATION_TIMEOUT seconds (default 1500: about 900 tests, one
# of them building the Debian package in release mode).
set -uo pipefail

cd "$(dirname "$0")/.."

RELAY_SERVER=${RELAY_SERVER:-relayd}
RELAYD_BIN=${RELAYD_BIN:-.build/debug/relayd}
PYTHON=${PYTHON:-python3}
INTEGRATION_TIMEOUT=${INTEGRATION_TIMEOUT:-1500}
export RELAY_SERVER RELAYD_BIN

fail() {
    printf 'integration-tests: %s\n' "$*" >&2
    exit 2
}

command -v "$PYTHON" >/dev/null 2>&1 || fail "missing prerequisite: $PYTHON"
"$PYTHON" -c 'import pytest' >/dev/null 2>&1 \
    || fail "missing prerequisite: Python package pytest (run scripts/install-test-deps.sh)"
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

printf 'integration-tests: server %s, timeout %ss\n' "$RELAY_SERVER" "$INTEGRATION_TIMEOUT" >&2
timeout --kill-after=30 "$INTEGRATION_TIMEOUT" "$PYTHON" -m pytest -q -rfEsxX Tests/integration "$@"
rc=$?
case "$rc" in
    0) ;;
    5) printf 'integration-tests: pytest collected no tests\n' >&2 ;;
    124|137) printf 'integration-tests: timed out after %ss\n' "$INTEGRATION_TIMEOUT" >&2 ;;
    *) printf 'integration-tests: failed (pytest exit %s)\n' "$rc" >&2 ;;
esac
exit "$rc"
