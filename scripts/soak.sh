#!/usr/bin/env bash
# The soak with chaos (docs/operations.md, "Soak test"): three relayd nodes on Redis with
# Sentinel, clients calling over UDP, TCP and TLS, and a fault every 12 s in turn (kill -9 and
# restart, Redis failover, SIGHUP with a rotated secret, live upgrade, drain). Prints the
# figures as JSON and exits 1 if an invariant broke (Tests/integration/soak.py).
#
#   scripts/soak.sh [--minutes N] [--calls N]
#
# Builds relayd (debug, as the suite) unless RELAYD_BIN names one. Needs redis-server and
# redis-sentinel (scripts/install-test-deps.sh). Only loopback is used; processes are stopped
# by PID.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/opt/swift/usr/bin:$PATH"
if [ -z "${RELAYD_BIN:-}" ]; then
    swift build --quiet --product relayd
fi
cd Tests/integration
exec python3 soak.py "$@"
