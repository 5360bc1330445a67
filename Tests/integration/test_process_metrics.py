"""The metrics every exporter has, and the listeners' own (docs/metrics.md): the standard
`process_` family checked against /proc of the relayd process itself, open TCP/TLS connections
as clients come and go, and the TLS certificate's expiry against `openssl x509 -enddate`."""

from __future__ import annotations

import os
import re
import socket
import ssl
import subprocess
import time
from datetime import datetime, timezone

import pytest

from conftest import RelayServer, running, server_kind

pytestmark = pytest.mark.skipif(server_kind() != "relayd", reason="relayd's own metrics")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    relay = RelayServer("relayd", tmp_path_factory.mktemp("relayd-process-metrics"), streams=True)
    with running(relay):
        yield relay


def scrape(server: RelayServer) -> dict[str, float]:
    text = server.http("GET", "/metrics").body.decode()
    return {m.group(1): float(m.group(2)) for m in re.finditer(r"^([a-z_]+) (\S+)$", text, re.M)}


def test_process_metrics_match_proc(server):
    pid = server.proc.pid
    m = scrape(server)
    status = open(f"/proc/{pid}/status").read()
    rss = int(re.search(r"^VmRSS:\s+(\d+) kB", status, re.M).group(1)) * 1024
    vsz = int(re.search(r"^VmSize:\s+(\d+) kB", status, re.M).group(1)) * 1024
    assert abs(m["process_resident_memory_bytes"] - rss) <= 0.25 * rss, (m["process_resident_memory_bytes"], rss)
    assert abs(m["process_virtual_memory_bytes"] - vsz) <= 0.1 * vsz, (m["process_virtual_memory_bytes"], vsz)
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    assert abs(m["process_open_fds"] - fds) <= 3, (m["process_open_fds"], fds)
    soft = int(re.search(r"^Max open files\s+(\d+)", open(f"/proc/{pid}/limits").read(), re.M).group(1))
    assert m["process_max_fds"] == soft
    # Start time: /proc/PID/stat field 22 (ticks after boot) plus the boot time.
    stat = open(f"/proc/{pid}/stat").read()
    ticks = int(stat[stat.rindex(")") + 2:].split()[19])
    boot = int(re.search(r"^btime (\d+)", open("/proc/stat").read(), re.M).group(1))
    assert abs(m["process_start_time_seconds"] - (boot + ticks / os.sysconf("SC_CLK_TCK"))) < 1.0
    # CPU: what the kernel says the process used, and it only grows.
    fields = stat[stat.rindex(")") + 2:].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    assert abs(m["process_cpu_seconds_total"] - cpu) < 0.5, (m["process_cpu_seconds_total"], cpu)
    assert scrape(server)["process_cpu_seconds_total"] >= m["process_cpu_seconds_total"]


def test_open_stream_connections_follow_clients(server):
    assert scrape(server)["relayd_stream_connections_open"] == 0
    tcp = socket.create_connection(server.address, timeout=5)
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    tls = context.wrap_socket(socket.create_connection(server.tls_address, timeout=5), server_hostname="localhost")
    try:
        deadline = time.monotonic() + 5
        while scrape(server)["relayd_stream_connections_open"] != 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert scrape(server)["relayd_stream_connections_open"] == 2
    finally:
        tcp.close()
        tls.close()
    deadline = time.monotonic() + 5
    while scrape(server)["relayd_stream_connections_open"] != 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert scrape(server)["relayd_stream_connections_open"] == 0


def test_certificate_expiry_is_the_served_certificates(server):
    out = subprocess.run(["openssl", "x509", "-in", str(server.cert_path), "-noout", "-enddate"],
                         capture_output=True, text=True, check=True, timeout=10).stdout.strip()
    not_after = datetime.strptime(out.split("=", 1)[1], "%b %d %H:%M:%S %Y %Z").replace(tzinfo=timezone.utc)
    assert scrape(server)["relayd_tls_certificate_expiry_timestamp_seconds"] == not_after.timestamp()
