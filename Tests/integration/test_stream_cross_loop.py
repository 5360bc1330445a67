"""Relay-to-relay between TCP/TLS clients on two loop threads (issue #6).

A TCP or TLS client's stream is written only by the loop thread that owns it. When both
parties of a call use the same relayd but landed on different loops, the sending loop hands
each packet to the owning loop's inbox instead of sending it out of one relay socket and back
in at the other; the owner checks the permission and frames it as if it had come in on the
relay socket (RFC 8656 §11.3, §12.7). Every message is then counted as short-circuited,
whichever loops the two clients landed on: relayd counts none of those that cross the relay
sockets.
"""

from __future__ import annotations

import struct
import time

import pytest

from conftest import RelayServer, running, server_kind
from streamclient import StreamTurnClient
from test_tcp_tls import receive_payload

PAIRS = 12  # SO_REUSEPORT spreads the 24 connections over 2 loops: all on one has p = 2**-23
CHANNEL = 0x4001
WAIT = 3.0

pytestmark = pytest.mark.skipif(server_kind() != "relayd", reason="relayd's short-circuit metric")


def short_circuited(server: RelayServer) -> float:
    resp = server.http("GET", "/metrics")
    assert resp.status == 200, resp
    for line in resp.body.decode().splitlines():
        if line.startswith("relayd_short_circuited_packets_total "):
            return float(line.split()[1])
    pytest.fail("no relayd_short_circuited_packets_total in /metrics")


@pytest.mark.parametrize("transport", ["tcp", "tls"])
def test_stream_clients_on_two_loops_reach_each_other_without_the_relay_sockets(tmp_path, transport):
    server = RelayServer("relayd", tmp_path, streams=True, extra_args=["--relay-threads=2"])
    address_of = (lambda s: s.tls_address) if transport == "tls" else (lambda s: s.address)
    with running(server) as s:
        clients = []
        try:
            for i in range(2 * PAIRS):
                client = StreamTurnClient(address_of(s), tls=transport == "tls")
                clients.append(client)
                client.allocate(*s.credentials(user=f"u{i}"))
            pairs = [(clients[2 * i], clients[2 * i + 1]) for i in range(PAIRS)]
            for a, b in pairs:
                a.channel_bind(CHANNEL, b.relayed)  # A sends ChannelData, gets ChannelData back
                b.create_permission(a.relayed)      # B sends Send, gets Data indications
            before = short_circuited(s)
            for n, (a, b) in enumerate(pairs):
                forward = struct.pack("!I", n) + b"forward"
                a.send_channel_data(CHANNEL, forward)
                got = receive_payload(b, "data")
                assert (got.payload, got.peer) == (forward, a.relayed)
                back = struct.pack("!I", n) + b"back"
                b.send_indication(a.relayed, back)
                got = receive_payload(a, "channel")
                assert (got.payload, got.channel) == (back, CHANNEL)
            # Loops publish their counters every 250 ms.
            deadline = time.monotonic() + WAIT
            while short_circuited(s) - before < 2 * PAIRS and time.monotonic() < deadline:
                time.sleep(0.1)
            assert short_circuited(s) - before == 2 * PAIRS
        finally:
            for client in clients:
                client.close()
