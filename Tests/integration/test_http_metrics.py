"""relayd's /metrics: valid Prometheus text (promtool), live values summed over the loop
threads, and exact packet and byte counts after a known relayed traffic pattern.

The server runs two loop threads, so the scrape sums two snapshots; `prometheus`
also opens coturn's separate metrics listener.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time

import pytest

from conftest import RelayServer, free_port, server_kind
from stunclient import TurnClient, recv_from, udp_socket

pytestmark = pytest.mark.skipif(server_kind() != "relayd", reason="relayd's own metrics")

SCRAPE_DEADLINE = 5.0  # bound for the scrape to show traffic (published every 250 ms)
SETTLE = 0.6  # more than two publish intervals: earlier traffic is in a baseline scrape
WAIT = 3.0
CHANNEL = 0x4001
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


@pytest.fixture(scope="module")
def metrics_server(tmp_path_factory):
    prometheus_port = free_port()
    server = RelayServer("relayd", tmp_path_factory.mktemp("relayd-metrics"), extra_args=[
        "--relay-threads=2", "--prometheus", "--prometheus-address=127.0.0.1",
        f"--prometheus-port={prometheus_port}",
    ])
    server.prometheus_port = prometheus_port
    server.start()
    try:
        yield server
    finally:
        problems = server.stop()
        if problems:
            pytest.fail("server problems:\n  " + "\n  ".join(problems), pytrace=False)


def scrape_text(server: RelayServer, port: int | None = None) -> str:
    resp = server.http("GET", "/metrics", port=port)
    assert resp.status == 200, resp
    assert resp.headers["content-type"].startswith("text/plain; version=0.0.4")
    return resp.body.decode()


def parse(text: str) -> dict[tuple[str, frozenset], float]:
    samples = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        assert m, f"not a sample line: {line!r}"
        labels = frozenset(LABEL.findall(m.group(3) or ""))
        samples[(m.group(1), labels)] = float(m.group(4))
    return samples


def scrape(server: RelayServer) -> dict[tuple[str, frozenset], float]:
    return parse(scrape_text(server))


def baseline(server: RelayServer) -> dict[tuple[str, frozenset], float]:
    """A scrape that includes everything sent before it (loops publish every 250 ms)."""
    time.sleep(SETTLE)
    return scrape(server)


def value(samples, name: str, **labels) -> float:
    return samples[(name, frozenset(labels.items()))]


def eventually(server: RelayServer, predicate) -> dict:
    """Scrape until `predicate(samples)` holds, bounded by SCRAPE_DEADLINE; returns the last scrape."""
    deadline = time.monotonic() + SCRAPE_DEADLINE
    while True:
        samples = scrape(server)
        if predicate(samples) or time.monotonic() >= deadline:
            return samples
        time.sleep(0.1)


@pytest.mark.parametrize("listener", ["api", "prometheus"])
def test_promtool_accepts_the_exposition(metrics_server, listener):
    promtool = shutil.which("promtool")
    assert promtool, "promtool not found (Debian package prometheus; run scripts/install-test-deps.sh)"
    port = metrics_server.api_port if listener == "api" else metrics_server.prometheus_port
    text = scrape_text(metrics_server, port=port)
    result = subprocess.run([promtool, "check", "metrics"], input=text.encode(), capture_output=True, timeout=30)
    assert result.returncode == 0, result.stdout.decode() + result.stderr.decode()
    assert (result.stdout + result.stderr).strip() == b"", result.stdout.decode() + result.stderr.decode()


def test_prometheus_listener_serves_only_metrics_and_health(metrics_server):
    port = metrics_server.prometheus_port
    assert metrics_server.http("GET", "/api/v1/credentials?user=a", port=port).status == 404
    assert metrics_server.http("GET", "/healthz", port=port).status == 200


def test_exposition_has_the_documented_families(metrics_server):
    samples = baseline(metrics_server)
    names = {name for name, _ in samples}
    for name in [
        "relayd_allocations_active", "relayd_allocations_created_total", "relayd_allocations_expired_total",
        "relayd_allocations_deleted_total", "relayd_permissions_active", "relayd_channels_active",
        "relayd_relayed_packets_total", "relayd_relayed_bytes_total", "relayd_dropped_packets_total",
        "relayd_auth_results_total", "relayd_error_responses_total", "relayd_stun_binding_requests_total",
        "relayd_relay_ports_in_use", "relayd_relay_ports_free", "relayd_tls_handshakes_total",
        "relayd_stream_connections_refused_total",
        "relayd_allocation_lifetime_seconds_bucket", "relayd_allocation_lifetime_seconds_sum",
        "relayd_allocation_lifetime_seconds_count",
    ]:
        assert name in names, name
    assert value(samples, "relayd_loop_threads") == 2
    assert value(samples, "relayd_tls_handshakes_total", result="ok") == 0
    # Both threads' port slices together are the whole relay range.
    width = metrics_server.max_port - metrics_server.min_port + 1
    assert value(samples, "relayd_relay_ports_in_use") + value(samples, "relayd_relay_ports_free") == width


def test_binding_requests_are_counted(metrics_server):
    before = value(baseline(metrics_server), "relayd_stun_binding_requests_total")
    with TurnClient(metrics_server.address) as client:
        for _ in range(3):
            client.binding()
    after = eventually(metrics_server, lambda s: value(s, "relayd_stun_binding_requests_total") >= before + 3)
    assert value(after, "relayd_stun_binding_requests_total") == before + 3


def test_relayed_traffic_is_counted_exactly(metrics_server):
    """N ChannelData packets of M bytes each way: packet and byte counters move by exactly
    N and N*M per direction, the gauges show the allocation, permission and channel while
    they live, and ending the allocation moves deleted_total and the lifetime histogram."""
    n, m = 25, 100
    server = metrics_server
    before = baseline(server)
    peer = udp_socket()
    peer_addr = peer.getsockname()
    try:
        with TurnClient(server.address) as client:
            client.allocate(*server.credentials("metrics"))
            client.create_permission(peer_addr)
            client.channel_bind(CHANNEL, peer_addr)
            relayed = client.relayed

            for i in range(n):
                client.send_channel_data(CHANNEL, bytes([i]) * m)
                got = recv_from(peer, WAIT)
                assert got == (bytes([i]) * m, relayed)
            for i in range(n):
                peer.sendto(bytes([0x80 + i]) * m, relayed)
                got = client.receive(WAIT)
                assert got is not None and got.kind == "channel" and got.payload == bytes([0x80 + i]) * m

            def moved(s, name, **labels):
                return value(s, name, **labels) - value(before, name, **labels)

            def traffic_done(s):
                return (moved(s, "relayd_relayed_packets_total", direction="client_to_peer") >= n
                        and moved(s, "relayd_relayed_packets_total", direction="peer_to_client") >= n)

            during = eventually(server, traffic_done)
            assert moved(during, "relayd_relayed_packets_total", direction="client_to_peer") == n
            assert moved(during, "relayd_relayed_packets_total", direction="peer_to_client") == n
            assert moved(during, "relayd_relayed_bytes_total", direction="client_to_peer") == n * m
            assert moved(during, "relayd_relayed_bytes_total", direction="peer_to_client") == n * m
            assert moved(during, "relayd_allocations_created_total") == 1
            assert value(during, "relayd_allocations_active", transport="udp", family="ipv4") == 1
            assert value(during, "relayd_permissions_active") == 1
            assert value(during, "relayd_channels_active") == 1
            assert moved(during, "relayd_relay_ports_in_use") == 1
            assert moved(during, "relayd_auth_results_total", result="challenge") == 1
            assert moved(during, "relayd_auth_results_total", result="ok") == 3  # Allocate, CreatePermission, ChannelBind
            assert moved(during, "relayd_error_responses_total", code="401") == 1

            client.refresh(0)

        after = eventually(server, lambda s: value(s, "relayd_allocation_lifetime_seconds_count")
                           > value(before, "relayd_allocation_lifetime_seconds_count"))
        assert value(after, "relayd_allocations_active", transport="udp", family="ipv4") == 0
        assert value(after, "relayd_allocations_deleted_total") - value(before, "relayd_allocations_deleted_total") == 1
        assert (value(after, "relayd_allocation_lifetime_seconds_count")
                - value(before, "relayd_allocation_lifetime_seconds_count")) == 1
        assert value(after, "relayd_relayed_packets_total", direction="client_to_peer") \
            - value(before, "relayd_relayed_packets_total", direction="client_to_peer") == n
    finally:
        peer.close()


def test_no_user_name_appears_in_labels(metrics_server):
    text = scrape_text(metrics_server)
    assert "metrics" not in re.sub(r"^#.*$", "", text, flags=re.M).replace("relayd_", "")
    assert ":" not in "".join(v for (_, labels) in parse(text) for (_, v) in labels)
