"""Bandwidth limits (docs/compatibility.md, docs/configuration.md): `max-bps` and `bps-capacity`, in
coturn's terms.

- `max-bps`: bytes a second one allocation may relay, client-to-peer and peer-to-client apart.
  A burst of five seconds' worth sent in a fraction of a second gets through only as far as the
  budget goes (one budget, or two when the burst crosses a second boundary); relayd counts the
  rest as relayd_dropped_packets_total{reason="bandwidth"}.
- `bps-capacity`: each new allocation reserves `max-bps` from it, or what is left; with nothing
  left Allocate gets 486 (RFC 8656 §7.2), and an allocation that ends gives its share back.
"""

from __future__ import annotations

import time

import pytest

from conftest import RelayServer, running, server_kind
from stunclient import Class, TurnClient, recv_from, udp_socket
from test_adversarial import IS_COTURN, allocate, baseline_metric, settle_metric

MAX_BPS = 20_000
CAPACITY = 50_000  # two whole max-bps shares and one half share
PAYLOAD = 1000
BURST = 100  # 100,000 bytes: five seconds' worth of the budget
# One second's budget, or two when the burst straddles a second boundary. coturn may count a
# few header bytes per packet, so its lower bound is one packet lower.
LOW = MAX_BPS // PAYLOAD - 1
HIGH = 2 * MAX_BPS // PAYLOAD


def limited_server(tmp_path_factory, name: str):
    s = RelayServer(server_kind(), tmp_path_factory.mktemp(name),
                    extra_args=[f"--max-bps={MAX_BPS}", f"--bps-capacity={CAPACITY}", "--relay-threads=1"])
    with running(s):
        yield s


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    yield from limited_server(tmp_path_factory, "bandwidth")


@pytest.fixture(scope="module")
def capacity_server(tmp_path_factory):
    """Its own server: coturn returns an ended allocation's share only some time later."""
    yield from limited_server(tmp_path_factory, "capacity")


def code(resp) -> int | None:
    err = resp.error_code()
    return None if resp.cls == Class.SUCCESS else (err[0] if err else -1)


def drain(receive, window: float) -> int:
    """Counts what `receive(timeout)` returns until nothing arrives for `window` seconds."""
    n = 0
    while receive(window) is not None:
        n += 1
    return n


def dropped_bandwidth(server: RelayServer) -> float:
    return baseline_metric(server, "relayd_dropped_packets_total", reason="bandwidth")


def test_max_bps_limits_client_to_peer_and_peer_to_client_apart(server):
    peer = udp_socket()
    client = TurnClient(server.address)
    try:
        assert code(allocate(server, client, user="bw")) is None
        client.create_permission(peer.getsockname())
        client.channel_bind(0x4000, peer.getsockname())
        before = None if IS_COTURN else dropped_bandwidth(server)

        # Client to peer: 100 ChannelData of 1,000 bytes, well within a second.
        start = time.monotonic()
        for _ in range(BURST):
            client.send_channel_data(0x4000, bytes(PAYLOAD))
        assert time.monotonic() - start < 0.5, "the burst must fit in about one budget window"
        to_peer = drain(lambda t: recv_from(peer, t), 1.0)
        assert LOW <= to_peer <= HIGH, to_peer

        # Peer to client, in a new second: its own budget, not spent by the burst above.
        time.sleep(1.0)
        start = time.monotonic()
        for _ in range(BURST):
            peer.sendto(bytes(PAYLOAD), client.relayed)
        assert time.monotonic() - start < 0.5
        to_client = drain(client.receive, 1.0)
        assert LOW <= to_client <= HIGH, to_client

        if not IS_COTURN:
            # Every packet that did not arrive was dropped for bandwidth (a datagram the kernel
            # lost on loopback would be missing from both: up to 2 allowed for).
            expected = before + (BURST - to_peer) + (BURST - to_client)
            value = settle_metric(server, "relayd_dropped_packets_total", expected, reason="bandwidth")
            assert expected - 2 <= value <= expected, (value, expected)
        client.refresh(0)
    finally:
        client.close()
        peer.close()


def test_bps_capacity_refuses_allocate_with_486_until_an_allocation_ends(capacity_server):
    server = capacity_server
    clients = [TurnClient(server.address) for _ in range(4)]
    try:
        # 20,000 + 20,000 + the last 10,000: the fourth finds nothing left.
        for c in clients[:3]:
            assert code(allocate(server, c, user="cap")) is None
        assert code(allocate(server, clients[3], user="cap")) == 486
        clients[0].refresh(0)
        # Each try from a new client (coturn answers any retry from a refused 5-tuple with 437);
        # coturn may take a moment to return the share of an allocation that ended.
        deadline = time.monotonic() + 5
        while True:
            clients.append(TurnClient(server.address))
            result = code(allocate(server, clients[-1], user="cap"))
            if result != 486 or not IS_COTURN or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert result is None
        for c in (clients[1], clients[2], clients[-1]):
            c.refresh(0)
    finally:
        for c in clients:
            c.close()
