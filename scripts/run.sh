#!/usr/bin/env bash
# Builds relayd (release) and runs it on conf/relayd.conf; extra arguments are passed through
# as coturn-style long options, e.g. ./scripts/run.sh --listening-port=3479 --verbose
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-build-deps.sh
swift build -c release --product relayd
exec ./.build/release/relayd -c conf/relayd.conf "$@"
