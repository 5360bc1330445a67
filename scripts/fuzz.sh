#!/usr/bin/env bash
# Fuzzes the StunCodec decoders (Fuzz/DecoderFuzzer.swift) with libFuzzer and AddressSanitizer
# for SECONDS (default 30), starting from a fresh copy of the committed seeds in
# Fuzz/corpus/decoder/ (the copy, grown by the run, is left in fuzz-artifacts/corpus/; crash
# inputs go to fuzz-artifacts/ too). Prints one summary line; exits non-zero on a crash.
#   ./scripts/fuzz.sh [SECONDS]
# Reproduce a crash without sanitizers:
#   swift build --product stun-fuzz && .build/debug/stun-fuzz fuzz-artifacts/crash-<sha1>
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/opt/swift/usr/bin:$PATH"

seconds="${1:-30}"
case "$seconds" in
  '' | *[!0-9]*) echo "usage: $0 [SECONDS]" >&2; exit 2 ;;
esac

./scripts/install-build-deps.sh

# LLVMFuzzerRunDriver is declared with @_extern(c), hence the experimental feature flag.
flags=(-Xswiftc -sanitize=fuzzer,address -Xswiftc -DRELAYD_LIBFUZZER
       -Xswiftc -enable-experimental-feature -Xswiftc Extern)
swift build --quiet --scratch-path .build-fuzz -c debug --product stun-fuzz "${flags[@]}" 2>&1 \
  | grep -v "Cannot export local symbol '__asan" || true
bin="$(swift build --scratch-path .build-fuzz -c debug --show-bin-path "${flags[@]}")/stun-fuzz"
[ -x "$bin" ] || { echo "fuzz: build failed" >&2; exit 1; }

out=fuzz-artifacts
corpus="$out/corpus"
log="$out/fuzz.log"
mkdir -p "$out"
rm -rf "$corpus"
mkdir -p "$corpus"
cp Fuzz/corpus/decoder/* "$corpus/"
seeds=$(find "$corpus" -type f | wc -l)

# Swift's own crash backtracer would race libFuzzer's handler (and can hang under ASan).
status=0
SWIFT_BACKTRACE=enable=no ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}" \
  "$bin" "$corpus" -max_total_time="$seconds" -print_final_stats=1 -artifact_prefix="$out/" \
  >"$log" 2>&1 || status=$?

runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
size=$(find "$corpus" -type f | wc -l)
if [ "$status" -ne 0 ]; then
  tail -n 60 "$log" >&2
  artifact=$(sed -n "s/.*Test unit written to \(.*\)$/\1/p" "$log" | tail -n 1)
  echo "fuzz: FAILED (exit $status) after ${runs:-?} runs in ${seconds}s;" \
    "input: ${artifact:-none written}; log: $log" >&2
  exit 1
fi
echo "fuzz: ${runs:-?} runs in ${seconds}s, no crash; corpus ${seeds} seeds -> ${size} inputs"
