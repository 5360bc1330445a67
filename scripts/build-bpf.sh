#!/usr/bin/env bash
# Builds the kernel fast path's BPF program (Sources/CRelayFastPath/bpf, docs/kernel-fast-path.md)
# into .build/bpf/relayd_fastpath.bpf.o with clang -target bpf (the Swift toolchain's clang, or
# Debian's) against libbpf-dev's headers, and the benchmark's load generator
# (relayd_loadgen.bpf.c, used by scripts/bench-fastpath.sh only) and the RFC 6062 pipes' sockmap
# program (relayd_tcp_splice.bpf.c, docs/tcp-relay.md) next to it. OUT overrides the fast path's
# output path, LOADGEN_OUT the generator's, SPLICE_OUT the splice program's (default: beside OUT).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/opt/swift/usr/bin:$PATH"
OUT=${OUT:-.build/bpf/relayd_fastpath.bpf.o}
LOADGEN_OUT=${LOADGEN_OUT:-$(dirname "$OUT")/relayd_loadgen.bpf.o}
SPLICE_OUT=${SPLICE_OUT:-$(dirname "$OUT")/relayd_tcp_splice.bpf.o}
mkdir -p "$(dirname "$OUT")" "$(dirname "$LOADGEN_OUT")" "$(dirname "$SPLICE_OUT")"
multiarch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
for pair in "relayd_fastpath:$OUT" "relayd_loadgen:$LOADGEN_OUT" "relayd_tcp_splice:$SPLICE_OUT"; do
    clang -O2 -g -target bpf -Wall -Werror \
        -I"/usr/include/$multiarch" -ISources/CRelayFastPath/include \
        -c "Sources/CRelayFastPath/bpf/${pair%%:*}.bpf.c" -o "${pair#*:}"
done
echo "build-bpf: $OUT $LOADGEN_OUT $SPLICE_OUT"
