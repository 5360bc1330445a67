#!/usr/bin/env bash
# The whole test suite, from a fresh Debian machine with the Swift toolchain:
#   1. installs build and test dependencies (apt: libevent-dev libssl-dev coturn ...; PyPI: pytest aiortc),
#   2. builds everything and runs the Swift unit and daemon tests (swift test),
#   3. runs the codec fuzzer for a bounded time over the committed corpus,
#   4. checks the codec's hot paths allocate nothing (release benchmark),
#   5. runs the real-peer integration suite (turnutils_uclient, aiortc, Python STUN client).
# Set FUZZ_SECONDS to change the fuzz budget (default 30).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/opt/swift/usr/bin:$PATH"

step() { printf '\n=== %s\n' "$*"; }

step "dependencies"
./scripts/install-build-deps.sh
./scripts/install-test-deps.sh

step "build"
swift build --build-tests

step "swift test"
swift test --skip-build

step "fuzz (${FUZZ_SECONDS:-30} s)"
./scripts/fuzz.sh "${FUZZ_SECONDS:-30}"

step "codec allocation check"
./scripts/bench-codec.sh --assert-zero-alloc

step "integration (real peers)"
RELAY_SERVER=relayd RELAYD_BIN="$PWD/.build/debug/relayd" ./scripts/integration-tests.sh
