#!/usr/bin/env bash
# Benchmarks the per-packet work in a release build: ns/op and heap allocations/op for
# (a) parsing + verifying a Binding request, (b) parsing ChannelData, (c) writing a Binding
# success response, and the relay core's data path: (d) client ChannelData -> peer,
# (e) peer -> client as ChannelData, (f) as a Data indication, (g) the relay-to-relay
# short-circuit, (h) the same across loop threads, (i) the same to a TCP client on another loop
# (framed for its stream and queued on its connection). Arguments go to stun-bench:
#   ./scripts/bench-codec.sh [ITERATIONS] [--assert-zero-alloc]
# With --assert-zero-alloc it exits non-zero when (a), (b) or any of (d)-(j) allocates.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/opt/swift/usr/bin:$PATH"

./scripts/install-build-deps.sh
swift build --quiet -c release --scratch-path .build-bench --product stun-bench
exec "$(swift build -c release --scratch-path .build-bench --show-bin-path)/stun-bench" "$@"
