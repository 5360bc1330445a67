"""Relay-to-relay between TCP/TLS clients on two loop threads.

When both parties of a call use the same relayd but landed on different loop threads, the
sending loop checks the target's permission, frames the packet as if it had come in on the
target's relay socket (RFC 8656 §11.3, §12.7) and queues it on the target's TCP/TLS connection
itself, under the connection's lock, instead of sending it out of one relay socket and back in
at the other. Every message is then counted as short-circuited, whichever loops the two
clients landed on: relayd counts none of those that cross the relay sockets.

The burst test makes two threads write one connection at once: B's own loop answering B's
Binding requests while A's loop queues A's packets on B. Over TLS both write records of one
session, so a missing lock shows as a broken record or a lost, reordered or doubled message.
"""

from __future__ import annotations

import struct
import time

import pytest

from conftest import RelayServer, running, server_kind
import stunclient
from streamclient import StreamTurnClient
from test_tcp_tls import receive_payload

PAIRS = 12  # SO_REUSEPORT spreads the 24 connections over 2 loops: all on one has p = 2**-23
CHANNEL = 0x4001
WAIT = 3.0
BURST = 200

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


def open_pairs(s: RelayServer, transport: str) -> tuple[list, list]:
    address_of = (lambda s: s.tls_address) if transport == "tls" else (lambda s: s.address)
    clients = []
    for i in range(2 * PAIRS):
        client = StreamTurnClient(address_of(s), tls=transport == "tls")
        clients.append(client)
        client.allocate(*s.credentials(user=f"u{i}"))
    return clients, [(clients[2 * i], clients[2 * i + 1]) for i in range(PAIRS)]


@pytest.mark.parametrize("transport", ["tcp", "tls"])
def test_two_loops_writing_one_stream_at_once_keep_every_message_whole_and_in_order(tmp_path, transport):
    server = RelayServer("relayd", tmp_path, streams=True, extra_args=["--relay-threads=2"])
    with running(server) as s:
        clients = []
        try:
            clients, pairs = open_pairs(s, transport)
            for a, b in pairs:
                a.channel_bind(CHANNEL, b.relayed)
                b.create_permission(a.relayed)
            before = short_circuited(s)
            expected_ids = []
            for n, (a, b) in enumerate(pairs):
                requests = [stunclient.binding_request() for _ in range(BURST)]
                expected_ids.append([r.transaction_id for r in requests])
                forward = b"".join(stunclient.encode_channel_data(CHANNEL, struct.pack("!II", n, i) + b"x" * 40, pad=True)
                                   for i in range(BURST))
                a.send_raw(forward)
                b.send_raw(b"".join(r.encode() for r in requests))
            for n, (a, b) in enumerate(pairs):
                payloads, answered = [], []
                deadline = time.monotonic() + 10
                while (len(payloads) < BURST or len(answered) < BURST) and time.monotonic() < deadline:
                    got = b.receive(deadline - time.monotonic())
                    if got is None:
                        break
                    if got.kind == "data":
                        assert got.peer == a.relayed
                        payloads.append(got.payload)
                    else:
                        assert got.kind == "stun", got
                        assert got.message.method == stunclient.Method.BINDING
                        assert got.message.cls == stunclient.Class.SUCCESS
                        answered.append(got.message.transaction_id)
                assert payloads == [struct.pack("!II", n, i) + b"x" * 40 for i in range(BURST)]
                assert answered == expected_ids[n]
            deadline = time.monotonic() + WAIT
            while short_circuited(s) - before < BURST * PAIRS and time.monotonic() < deadline:
                time.sleep(0.1)
            assert short_circuited(s) - before == BURST * PAIRS
        finally:
            for client in clients:
                client.close()
