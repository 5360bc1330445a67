#!/usr/bin/env bash
# The whole test suite, from a fresh Debian machine with the Swift toolchain (run as root:
# the NAT tests build network namespaces, the fast path tests load BPF programs):
#   1. installs build and test dependencies (apt: libevent-dev libssl-dev libbpf-dev libhiredis-dev libsqlite3-dev libpq-dev postgresql coturn redis-server
#      chromium chromium-driver nftables iproute2 prometheus ...; PyPI: pytest aiortc selenium),
#   2. builds everything (the kernel fast path's BPF program too), checks the core imports no C
#      module or Foundation and its tests and fuzzer no Relay (check-layers.sh), and runs the
#      Swift unit and daemon tests (swift test), then again under ThreadSanitizer,
#   3. runs each libFuzzer target (decoder/framer, core state machine, state journal, TLS
#      session state) for a bounded time,
#   4. checks the codec's and the relay data path's hot paths allocate nothing (release benchmark),
#   5. runs the real-peer integration suite (turnutils_uclient, aiortc, headless Chromium,
#      NATed aiortc peers in network namespaces, adversarial and flood tests, reload/drain,
#      the Python STUN client) on pytest-xdist workers, then its serial tests alone
#      (Tests/integration/README.md).
# Set FUZZ_SECONDS to change the fuzz budget per target (default 60; the state journal's at most 20).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/opt/swift/usr/bin:$PATH"

step() { printf '\n=== %s\n' "$*"; }

step "dependencies"
./scripts/install-build-deps.sh
./scripts/install-test-deps.sh

step "build"
swift build --build-tests
./scripts/build-bpf.sh

step "layers (docs/architecture.md)"
./scripts/check-layers.sh

step "swift test"
swift test --skip-build

step "swift test under ThreadSanitizer (separate build in .build-tsan)"
swift build --build-tests --sanitize=thread --scratch-path .build-tsan
TSAN_OPTIONS="halt_on_error=1 ${TSAN_OPTIONS:-}" swift test --skip-build --sanitize=thread --scratch-path .build-tsan

step "fuzz (${FUZZ_SECONDS:-60} s per target)"
./scripts/fuzz.sh "${FUZZ_SECONDS:-60}"

step "allocation check (codec and relay data path)"
./scripts/bench-codec.sh --assert-zero-alloc

step "integration (real peers)"
RELAY_SERVER=relayd RELAYD_BIN="$PWD/.build/debug/relayd" ./scripts/integration-tests.sh
