#!/usr/bin/env bash
# Fuzzes with libFuzzer and AddressSanitizer for SECONDS (default 30) per target:
#   decoder  the StunCodec decoders (Fuzz/DecoderFuzzer.swift), seeds in Fuzz/corpus/decoder/
#   core     the RelayCore state machine (Sources/CoreFuzzing/FuzzSession.swift), seeds in FuzzCore/corpus/core/
#   journal  the state journal's reader (Sources/CoreFuzzing/JournalFuzzSession.swift, docs/state-journal.md),
#            seeds in FuzzJournal/corpus/journal/; a small codec, so in a run of every target it
#            gets at most 20 s of SECONDS (named on the command line, all of them)
#   tlsstate the TLS session state a live upgrade hands over (FuzzTLSState/tls_state_fuzzer.c, C,
#            built with clang), seeds in FuzzTLSState/corpus/tlsstate/; at most 10 s in a run of
#            every target
# Each target starts from a fresh copy of its committed seeds in fuzz-artifacts/<target>/corpus/
# (grown by the run and left there); its log and crash inputs go to fuzz-artifacts/<target>/.
# Prints one summary line per target; exits non-zero if any target crashed.
#   ./scripts/fuzz.sh [SECONDS] [TARGET...]
# Reproduce a crash without sanitizers:
#   swift build --product stun-fuzz && .build/debug/stun-fuzz fuzz-artifacts/decoder/crash-<sha1>
#   swift build --product core-fuzz && .build/debug/core-fuzz fuzz-artifacts/core/crash-<sha1>
#   swift build --product journal-fuzz && .build/debug/journal-fuzz fuzz-artifacts/journal/crash-<sha1>
#   .build-fuzz/tls-state-fuzz fuzz-artifacts/tlsstate/crash-<sha1>   (libFuzzer runs one input)
# A crash input worth keeping goes to the target's corpus directory, which `swift test`
# replays (CoreFuzzRegressionTests for core, JournalFuzzRegressionTests for journal).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/opt/swift/usr/bin:$PATH"

seconds="${1:-30}"
case "$seconds" in
  '' | *[!0-9]*) echo "usage: $0 [SECONDS] [decoder|core|journal|tlsstate ...]" >&2; exit 2 ;;
esac
shift || true
targets=("$@")
named=1
[ ${#targets[@]} -gt 0 ] || { targets=(decoder core journal tlsstate); named=0; }

product_of() {
  case "$1" in
    decoder) echo stun-fuzz ;;
    core) echo core-fuzz ;;
    journal) echo journal-fuzz ;;
    tlsstate) echo tls-state-fuzz ;;
    *) echo "fuzz: unknown target '$1' (decoder, core, journal, tlsstate)" >&2; exit 2 ;;
  esac
}

# The core target runs optimized: its inputs drive the whole protocol (HMACs, allocations), ten
# times slower under -Onone with AddressSanitizer; so does the journal target, which shares its
# build of the core; the decoder target stays a debug build.
config_of() {
  case "$1" in
    decoder) echo debug ;;
    core | journal) echo release ;;
  esac
}

seeds_of() {
  case "$1" in
    decoder) echo Fuzz/corpus/decoder ;;
    core) echo FuzzCore/corpus/core ;;
    journal) echo FuzzJournal/corpus/journal ;;
    tlsstate) echo FuzzTLSState/corpus/tlsstate ;;
  esac
}

# The seconds a target runs: SECONDS, but the journal's few record decoders are covered long
# before the protocol is, so in a run of every target it stops after 20.
seconds_of() {
  if [ "$1" = journal ] && [ "$named" = 0 ] && [ "$seconds" -gt 20 ]; then echo 20
  elif [ "$1" = tlsstate ] && [ "$named" = 0 ] && [ "$seconds" -gt 10 ]; then echo 10
  else echo "$seconds"; fi
}

for target in "${targets[@]}"; do product_of "$target" >/dev/null; done

./scripts/install-build-deps.sh

# LLVMFuzzerRunDriver is declared with @_extern(c), hence the experimental feature flag.
flags=(-Xswiftc -sanitize=fuzzer,address -Xswiftc -DRELAYD_LIBFUZZER
       -Xswiftc -enable-experimental-feature -Xswiftc Extern)
failed=0
for target in "${targets[@]}"; do
  product="$(product_of "$target")"
  config="$(config_of "$target")"
  budget="$(seconds_of "$target")"
  if [ "$target" = tlsstate ]; then
    # C only: the toolchain's clang builds it with the record layer it fuzzes.
    mkdir -p .build-fuzz
    bin=".build-fuzz/$product"
    rm -f "$bin"
    clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
      -I Sources/CStreamIO/include -I Sources/CStreamIO FuzzTLSState/tls_state_fuzzer.c \
      Sources/CStreamIO/tls_records.c Sources/CStreamIO/tls_records_state.c Sources/CStreamIO/stream_io.c \
      -lssl -lcrypto -lpthread -o "$bin" 2>&1 | { grep -v "Cannot export local symbol" || true; }
    [ -x "$bin" ] || { echo "fuzz: $target: build of $product failed" >&2; exit 1; }
  else
    swift build --quiet --scratch-path .build-fuzz -c "$config" --product "$product" "${flags[@]}" 2>&1 \
      | grep -v "Cannot export local symbol '__asan" || true
    bin="$(swift build --scratch-path .build-fuzz -c "$config" --show-bin-path "${flags[@]}")/$product"
  fi
  [ -x "$bin" ] || { echo "fuzz: $target: build of $product failed" >&2; exit 1; }

  out="fuzz-artifacts/$target"
  corpus="$out/corpus"
  log="$out/fuzz.log"
  mkdir -p "$out"
  rm -rf "$corpus"
  mkdir -p "$corpus"
  cp "$(seeds_of "$target")"/* "$corpus/"
  seeds=$(find "$corpus" -type f | wc -l)

  # Swift's own crash backtracer would race libFuzzer's handler (and can hang under ASan).
  status=0
  SWIFT_BACKTRACE=enable=no ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}" \
    "$bin" "$corpus" -max_total_time="$budget" -print_final_stats=1 -artifact_prefix="$out/" \
    >"$log" 2>&1 || status=$?

  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  size=$(find "$corpus" -type f | wc -l)
  if [ "$status" -ne 0 ]; then
    tail -n 60 "$log" >&2
    artifact=$(sed -n "s/.*Test unit written to \(.*\)$/\1/p" "$log" | tail -n 1)
    echo "fuzz: $target: FAILED (exit $status) after ${runs:-?} runs in ${budget}s;" \
      "input: ${artifact:-none written}; log: $log" >&2
    failed=1
    continue
  fi
  echo "fuzz: $target: ${runs:-?} runs in ${budget}s, no crash; corpus ${seeds} seeds -> ${size} inputs"
done
exit "$failed"
