#!/usr/bin/env bash
# Makes a self-signed TLS certificate for testing relayd's TURN-over-TLS listener:
#   conf/make-test-cert.sh DIR [CN]
# writes DIR/cert.pem (certificate, CN and subjectAltName = CN, localhost, 127.0.0.1, ::1) and
# DIR/pkey.pem (its P-256 key, unencrypted, mode 600). Use with cert=DIR/cert.pem pkey=DIR/pkey.pem.
# Clients must be told to trust it (or to skip verification); for a real server use a
# certificate from a CA, e.g. Let's Encrypt (see docs/tls.md).
set -euo pipefail

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
    echo "usage: $0 DIR [COMMON-NAME]" >&2
    exit 2
fi
dir=$1
cn=${2:-localhost}
command -v openssl >/dev/null 2>&1 || { echo "$0: openssl not found (Debian package openssl)" >&2; exit 1; }
san="DNS:$cn"
[ "$cn" = localhost ] || san="$san,DNS:localhost"
san="$san,IP:127.0.0.1,IP:::1"
mkdir -p "$dir"
umask 077
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 825 \
    -subj "/CN=$cn" \
    -addext "subjectAltName=$san" \
    -addext "keyUsage=digitalSignature" -addext "extendedKeyUsage=serverAuth" \
    -keyout "$dir/pkey.pem" -out "$dir/cert.pem" 2>/dev/null
chmod 644 "$dir/cert.pem"
echo "$dir/cert.pem"
echo "$dir/pkey.pem"
