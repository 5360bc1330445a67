#!/usr/bin/env bash
# Builds the kernel fast path's BPF program (Sources/CRelayFastPath/bpf, docs/kernel-fast-path.md)
# into .build/bpf/relayd_fastpath.bpf.o with clang -target bpf (the Swift toolchain's clang, or
# Debian's) against libbpf-dev's headers. OUT overrides the output path.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/opt/swift/usr/bin:$PATH"
OUT=${OUT:-.build/bpf/relayd_fastpath.bpf.o}
mkdir -p "$(dirname "$OUT")"
multiarch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
clang -O2 -g -target bpf -Wall -Werror \
    -I"/usr/include/$multiarch" -ISources/CRelayFastPath/include \
    -c Sources/CRelayFastPath/bpf/relayd_fastpath.bpf.c -o "$OUT"
echo "build-bpf: $OUT"
