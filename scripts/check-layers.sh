#!/usr/bin/env bash
# The layers of docs/architecture.md, checked where the compiler cannot: the protocol core
# (Sources/RelayCore) imports only the codec, swift-log and the standard library's
# Synchronization (no C module, no Foundation, no libc), the codec keeps OpenSSL internal, and
# only Sources/Relay/FastPath calls libbpf (and, outside relayd, the benchmark's kernel-loadgen).
# SwiftPM already refuses a C module the core's target does not depend on (libevent);
# this catches the ones reachable through the codec or the SDK.
set -euo pipefail
cd "$(dirname "$0")/.."
status=0
while IFS= read -r line; do
    module=$(sed -E 's/^[[:space:]]*(@[A-Za-z_]+[[:space:]]+)*((public|package|internal|fileprivate|private)[[:space:]]+)?import[[:space:]]+(class |struct |enum |func |var |let )?([A-Za-z0-9_]+).*/\5/' <<<"${line#*:*:}")
    case "$module" in
        StunCodec | Logging | Synchronization) ;;
        *) echo "layer violation: ${line%%:*}: the core may not import $module" >&2; status=1 ;;
    esac
done < <(grep -rnE '^[[:space:]]*(@[A-Za-z_]+[[:space:]]+)*((public|package|internal|fileprivate|private)[[:space:]]+)?import[[:space:]]' Sources/RelayCore --include='*.swift' || true)
while IFS= read -r line; do
    echo "layer violation: ${line%%:*}: the codec must import COpenSSL as 'internal import'" >&2
    status=1
done < <(grep -rnE '^[[:space:]]*(public[[:space:]]+)?import[[:space:]]+COpenSSL' Sources/StunCodec --include='*.swift' || true)
while IFS= read -r line; do
    echo "layer violation: ${line%%:*}: only Sources/Relay/FastPath (and the benchmark's kernel-loadgen) use libbpf (CBPF)" >&2
    status=1
done < <(grep -rlE '^[[:space:]]*((public|package|internal)[[:space:]]+)?import[[:space:]]+CBPF' Sources --include='*.swift' \
    | grep -vE '^Sources/(Relay/FastPath|kernel-loadgen)/' || true)
[ "$status" = 0 ] && echo "layers: Sources/RelayCore imports only StunCodec, Logging, Synchronization; only Relay/FastPath uses libbpf"
exit "$status"
