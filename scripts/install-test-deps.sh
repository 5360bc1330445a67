#!/usr/bin/env bash
# Installs what the integration tests (Tests/integration) need on a fresh
# Debian 12 machine: coturn's turnutils_* (real TURN peers, and the reference
# server), the C libraries relayd builds against, iproute2 and nftables (the
# NAT test's namespaces), headless Chromium with chromedriver (the browser
# test), and the Python packages pytest, pytest-xdist, aiortc and selenium. Safe to run
# again: it installs only what is missing and runs `apt-get update` at most
# once (skipped if lists are fresh).
set -euo pipefail

APT_PACKAGES=(coturn libevent-dev libssl-dev libhiredis-dev libsqlite3-dev libpq-dev pkg-config iproute2)
APT_PACKAGES+=(postgresql)  # coturn's user database in PostgreSQL (Tests/integration/test_userdb.py starts its own)
APT_PACKAGES+=(redis-server)  # the cluster's shared store (Tests/integration/test_cluster.py starts its own)
APT_PACKAGES+=(redis-sentinel)  # Redis high availability (Tests/integration/test_cluster_sentinel.py starts its own)
APT_PACKAGES+=(buildah podman runc)  # the OCI image, built and run (Tests/integration/test_package.py)
APT_PACKAGES+=(stunnel4)  # TLS to Redis through a local tunnel (Tests/integration/test_cluster_redis_tls.py)
APT_PACKAGES+=(strace)  # the order of the journal write and the answer (Tests/integration/test_state_journal.py)
APT_PACKAGES+=(openssl)  # openssl s_client and conf/make-test-cert.sh (TLS tests)
APT_PACKAGES+=(curl)  # the docs' curl commands, run by Tests/integration/test_docs.py
APT_PACKAGES+=(prometheus)  # promtool: checks the /metrics exposition (Tests/integration/test_http_metrics.py)
APT_PACKAGES+=(chromium chromium-driver)  # a real WebRTC stack (Tests/integration/test_browser.py)
APT_PACKAGES+=(nftables)  # NATs between network namespaces (Tests/integration/test_nat.py)
APT_PACKAGES+=(haproxy)  # a load balancer sending PROXY protocol v2 headers (Tests/integration/test_shared_port.py)
# The Debian package's build and checks (scripts/package-deb.sh, Tests/integration/test_package.py):
# dpkg-shlibdeps, lintian, systemd-analyze, and man to render the generated pages.
APT_PACKAGES+=(dpkg-dev lintian systemd man-db)
# Independent NAT behaviour discovery clients (Tests/integration/test_nat_discovery.py): the
# classic RFC 3489 client, and pion/stun's RFC 5780 tool built from Debian's Go sources.
APT_PACKAGES+=(stun-client golang-go golang-github-pion-stun-dev)
# Validated with pytest 9.0.3 and aiortc 1.16.0 (aioice 0.13.0). aiortc 1.16 is
# the first release with RTCConfiguration.iceTransportPolicy, which
# test_aiortc.py uses to keep both peers relay-only; the upper bound keeps an
# untested release out. selenium (validated with 4.51.0) talks to Debian's
# chromedriver, which test_browser.py starts itself: no Selenium Manager download.
# kubernetes-validate (validated with 1.37.0) bundles the Kubernetes schemas, so
# test_kubernetes_manifests.py checks deploy/kubernetes/ offline.
# schemathesis (validated with 3.39.16) checks the daemon against docs/openapi.yaml.
# pytest-xdist (validated with 3.8.0) runs the integration suite on several workers
# (scripts/integration-tests.sh).
PIP_PACKAGES=("pytest>=7,<10" "aiortc>=1.16,<1.17" "selenium>=4.10,<5" "kubernetes-validate>=1.37,<2"
              "schemathesis>=3.39,<4" "pytest-xdist>=3.5,<4")

log() { printf 'install-test-deps: %s\n' "$*" >&2; }

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO=(sudo)
    else
        log "need root (or sudo) for apt-get"
        exit 1
    fi
fi

missing_apt() {
    local pkg
    for pkg in "${APT_PACKAGES[@]}"; do
        if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
            printf '%s\n' "$pkg"
        fi
    done
}

lists_are_fresh() {
    # Fresh = some Packages list downloaded within the last 6 hours.
    [ -n "$(find /var/lib/apt/lists -maxdepth 1 -name '*_Packages*' -mmin -360 -print -quit 2>/dev/null)" ]
}

stop_coturn_service() {
    # The Debian package ships a coturn service (systemd unit / init script)
    # that would listen on 3478. The tests run their own servers on free
    # ports; the packaged service must not run. Stop and disable it through
    # the service manager only (a developer's own coturn is left alone).
    if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
        "${SUDO[@]}" systemctl disable --now coturn.service >/dev/null 2>&1 || true
    elif [ -x /etc/init.d/coturn ]; then
        "${SUDO[@]}" /etc/init.d/coturn stop >/dev/null 2>&1 || true
    fi
    if [ -f /etc/default/coturn ] && grep -q '^TURNSERVER_ENABLED=1' /etc/default/coturn; then
        log "note: /etc/default/coturn has TURNSERVER_ENABLED=1 (left as is)"
    fi
    if command -v ss >/dev/null 2>&1 && ss -Hlnup 'sport = :3478' 2>/dev/null | grep -q turnserver; then
        log "note: a turnserver still listens on 3478 (not the packaged service, or not stoppable);"
        log "      the tests never use 3478, so this is harmless"
    fi
}

stop_redis_service() {
    # The packaged Redis and Sentinel would listen on 6379 and 26379; the cluster tests start their own on free ports.
    if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
        "${SUDO[@]}" systemctl disable --now redis-server.service redis-sentinel.service >/dev/null 2>&1 || true
    else
        for service in redis-server redis-sentinel; do
            if [ -x "/etc/init.d/$service" ]; then "${SUDO[@]}" "/etc/init.d/$service" stop >/dev/null 2>&1 || true; fi
        done
    fi
}

mapfile -t TO_INSTALL < <(missing_apt)
# INSTALL_TEST_DEPS_FORCE=1 runs apt-get update/install even if all is there.
if [ "${INSTALL_TEST_DEPS_FORCE:-0}" = 1 ]; then TO_INSTALL=("${APT_PACKAGES[@]}"); fi
if [ "${#TO_INSTALL[@]}" -gt 0 ]; then
    if lists_are_fresh && [ "${INSTALL_TEST_DEPS_FORCE:-0}" != 1 ]; then
        log "apt lists are fresh, skipping apt-get update"
    else
        log "apt-get update"
        "${SUDO[@]}" apt-get update -q
    fi
    # Keep the packaged coturn service from starting during the install:
    # a policy-rc.d that says "no" (only if the machine has none already).
    POLICY=/usr/sbin/policy-rc.d
    ADDED_POLICY=0
    if [ ! -e "$POLICY" ]; then
        printf '#!/bin/sh\nexit 101\n' | "${SUDO[@]}" tee "$POLICY" >/dev/null
        "${SUDO[@]}" chmod 755 "$POLICY"
        ADDED_POLICY=1
    fi
    log "apt-get install ${TO_INSTALL[*]}"
    set +e
    "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${TO_INSTALL[@]}"
    rc=$?
    set -e
    if [ "$ADDED_POLICY" = 1 ]; then "${SUDO[@]}" rm -f "$POLICY"; fi
    if [ "$rc" -ne 0 ]; then
        log "apt-get install failed ($rc)"
        exit "$rc"
    fi
else
    log "apt packages already installed: ${APT_PACKAGES[*]}"
fi
stop_coturn_service

stop_redis_service

for tool in turnserver turnutils_uclient turnutils_peer ss ip nft chromium chromedriver pkg-config openssl redis-server redis-sentinel \
    stunnel4 strace buildah podman runc stun go lintian dpkg-shlibdeps systemd-analyze curl; do
    command -v "$tool" >/dev/null 2>&1 || { log "missing after install: $tool"; exit 1; }
done

PYTHON=${PYTHON:-python3}
PY_CHECK='import pytest, xdist, aiortc, aioice, selenium, kubernetes_validate, yaml, schemathesis; from aiortc import RTCIceTransportPolicy'
if ! "$PYTHON" -c "$PY_CHECK" >/dev/null 2>&1; then
    log "$PYTHON -m pip install ${PIP_PACKAGES[*]}"
    # PyAV (pulled in by aiortc) must come as a wheel: building it needs FFmpeg.
    "$PYTHON" -m pip install -q --disable-pip-version-check --only-binary=av "${PIP_PACKAGES[@]}"
else
    log "python packages already installed: pytest pytest-xdist aiortc selenium kubernetes-validate schemathesis"
fi
"$PYTHON" -c "$PY_CHECK" >/dev/null 2>&1 || { log "missing after install: a Python package of: ${PIP_PACKAGES[*]}"; exit 1; }
# pynat (validated with 0.7.0), a classic NAT type client: its setup.py imports six, so it is
# built without build isolation once six and wheel are there.
if ! "$PYTHON" -c 'import pynat' >/dev/null 2>&1; then
    log "$PYTHON -m pip install pynat"
    "$PYTHON" -m pip install -q --disable-pip-version-check six wheel
    "$PYTHON" -m pip install -q --disable-pip-version-check --no-build-isolation "pynat>=0.7,<0.8"
fi
"$PYTHON" -c 'import pynat' >/dev/null 2>&1 || { log "missing after install: pynat"; exit 1; }
"$PYTHON" -c 'import pytest, xdist, aiortc, aioice, selenium; print("install-test-deps: pytest", pytest.__version__, "pytest-xdist", xdist.__version__, "aiortc", aiortc.__version__, "aioice", aioice.__version__, "selenium", selenium.__version__)' >&2
log "ok"
