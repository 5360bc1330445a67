#!/usr/bin/env bash
# Installs what building relayd needs on Debian: libevent, OpenSSL, libbpf, hiredis, SQLite and libpq headers, pkg-config.
set -euo pipefail
need=()
for pkg in libevent-dev libssl-dev libbpf-dev libhiredis-dev libsqlite3-dev libpq-dev pkg-config; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
