#!/usr/bin/env bash
# The layers of docs/architecture.md, checked where the compiler cannot: the protocol core
# (Sources/RelayCore) imports only the codec, swift-log and the standard library's
# Synchronization (no C module, no Foundation, no libc), the codec keeps libcrypto (CCrypto)
# internal, only Sources/FastPath calls libbpf (and, outside relayd, the benchmark's
# kernel-loadgen), and the transports (Sources/Relay/Transport) know nothing of the daemon's
# lifecycle (Sources/Relay/Daemon: RelayServer, SystemdNotifier, SelfTest, StateDirectory) but the error type a
# failed start throws, RelayServer.StartError. The core's tests (Tests/RelayCoreTests, with
# Tests/CoreTestSupport) and its fuzzers (Sources/CoreFuzzing, FuzzCore, FuzzJournal) build on
# the core alone: the core, the codec, swift-log, Synchronization, the test libraries, each
# other, and (the fuzz driver's file reading) libc; no `Relay`, so no libevent, hiredis or
# libbpf behind them. The codec, the core, its tests and its fuzzers link libcrypto alone:
# neither their imports nor their targets' dependencies in Package.swift (swift package
# dump-package) reach libssl (COpenSSL, CStreamIO), libevent, hiredis or libbpf. SwiftPM
# already refuses a C module the core's target does not depend on (libevent); this catches the
# ones reachable through the codec or the SDK, and the folders of one target, which the
# compiler does not separate.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/opt/swift/usr/bin:$PATH"
status=0

# An import line (`@testable`, access levels and `import struct` forms too); \5 below is its module.
import_line='^[[:space:]]*(@[A-Za-z_]+[[:space:]]+)*((public|package|internal|fileprivate|private)[[:space:]]+)?import[[:space:]]'

# `file:module` for each import in the Swift files under the given paths.
imports() {
    grep -rnE "$import_line" "$@" --include='*.swift' | while IFS= read -r line; do
        module=$(sed -E "s/${import_line}+(class |struct |enum |func |var |let )?([A-Za-z0-9_]+).*/\\5/" <<<"${line#*:*:}")
        echo "${line%%:*}:$module"
    done || true
}

# The C modules over libssl, libevent, hiredis and libbpf; the manifest check below also refuses
# the Swift targets over them (Relay, FastPath).
native='COpenSSL|CStreamIO|CLibevent|CHiredis|CBPF|CRelayFastPath'
core_paths=(Sources/StunCodec Sources/RelayCore Sources/CoreFuzzing FuzzCore FuzzJournal Tests/RelayCoreTests Tests/CoreTestSupport)
core_targets=(StunCodec RelayCore CoreFuzzing core-fuzz journal-fuzz CoreTestSupport RelayCoreTests StunCodecTests)

while IFS=: read -r file module; do
    grep -qxE "$native" <<<"$module" || continue
    echo "layer violation: $file: the codec, the core and its tests and fuzzers link libcrypto alone, not $module" >&2
    status=1
done < <(imports "${core_paths[@]}")
manifest=$(swift package dump-package)
graph=$(python3 -c '
import json, re, sys
native, targets = re.compile(sys.argv[1]), {t["name"]: t for t in json.loads(sys.argv[2])["targets"]}
for root in sys.argv[3:]:
    path, todo = {root: [root]}, [root]
    while todo:
        name = todo.pop()
        for dep in targets[name]["dependencies"]:
            d = (dep.get("byName") or dep.get("target") or [None])[0]
            if d in targets and d not in path:
                path[d] = path[name] + [d]
                todo.append(d)
    for d in sorted(path):
        if native.fullmatch(d) or d in ("Relay", "FastPath"):
            print(root + " depends on " + d + " (" + " -> ".join(path[d]) + "): it must link libcrypto alone")
' "$native" "$manifest" "${core_targets[@]}")
while IFS= read -r line; do
    [ -n "$line" ] || continue
    echo "layer violation: Package.swift: $line" >&2
    status=1
done <<<"$graph"
while IFS=: read -r file module; do
    grep -qxE "$native" <<<"$module" && continue # reported above
    case "$module" in
        StunCodec | Logging | Synchronization) ;;
        *) echo "layer violation: $file: the core may not import $module" >&2; status=1 ;;
    esac
done < <(imports Sources/RelayCore)
while IFS=: read -r file module; do
    grep -qxE "$native" <<<"$module" && continue # reported above
    case "$module" in
        RelayCore | StunCodec | Logging | Synchronization | Testing | XCTest | CoreTestSupport | CoreFuzzing) ;;
        Glibc | Darwin)
            case "$file" in
                Sources/CoreFuzzing/*) ;;
                *)
                    echo "layer violation: $file: only Sources/CoreFuzzing may import $module (the fuzz driver's files)" >&2
                    status=1
                    ;;
            esac
            ;;
        *) echo "layer violation: $file: the core's tests and fuzzers may not import $module" >&2; status=1 ;;
    esac
done < <(imports Tests/RelayCoreTests Tests/CoreTestSupport Sources/CoreFuzzing FuzzCore FuzzJournal)
while IFS= read -r line; do
    echo "layer violation: ${line%%:*}: the codec must import CCrypto as 'internal import'" >&2
    status=1
done < <(grep -rnE '^[[:space:]]*((public|package)[[:space:]]+)?import[[:space:]]+CCrypto' Sources/StunCodec --include='*.swift' || true)
while IFS= read -r line; do
    echo "layer violation: ${line%%:*}: only Sources/FastPath (and the benchmark's kernel-loadgen) use libbpf (CBPF)" >&2
    status=1
done < <(grep -rlE '^[[:space:]]*((public|package|internal)[[:space:]]+)?import[[:space:]]+CBPF' Sources --include='*.swift' \
    | grep -vE '^Sources/(FastPath|kernel-loadgen)/' || true)
daemon='RelayServer|SystemdNotifier|SelfTest|StateDirectory'
while IFS= read -r line; do
    code="${line#*:*:}"
    grep -qwE "$daemon" <<<"${code//RelayServer.StartError/}" || continue
    echo "layer violation: ${line%%:"$code"}: a transport may not use the daemon's lifecycle ($daemon)" >&2
    status=1
done < <(grep -rnwE "$daemon" Sources/Relay/Transport --include='*.swift' || true)
[ "$status" = 0 ] && echo "layers: Sources/RelayCore imports only StunCodec, Logging, Synchronization;" \
    "the core's tests and fuzzers only the core, the codec, Logging, Synchronization and the test libraries;" \
    "the codec, the core, its tests and fuzzers reach no libssl, libevent, hiredis or libbpf;" \
    "only FastPath uses libbpf; Relay/Transport uses no daemon type but RelayServer.StartError"
exit "$status"
