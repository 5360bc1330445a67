"""ICMP errors from peers reach the client (RFC 8656 §11.5, §18.13; docs/icmp.md).

A datagram relayed to a loopback port with nothing listening draws an ICMP port unreachable.
relayd reads it off the relay socket's error queue and sends the client a Data indication with
XOR-PEER-ADDRESS (the peer's address and port) and ICMP (type 3, code 3), and no DATA, whether the
datagram left as a Send indication or as ChannelData, over UDP or TCP. At most five a second per
allocation; the rest are counted as dropped ("icmp"). The error does not cost the datagrams sent
right after it to a live peer. relayd only: coturn does not relay ICMP."""

from __future__ import annotations

import re
import socket
import struct
import time

import pytest

from conftest import RelayServer, running, server_kind
from streamclient import StreamTurnClient
from stunclient import Attr, TurnClient, recv_from, udp_socket

pytestmark = pytest.mark.skipif(server_kind() != "relayd", reason="relayd relays ICMP errors; coturn does not")

WAIT = 3.0
CHANNEL = 0x4001
PORT_UNREACHABLE = (3, 3, 0)


def closed_port() -> int:
    """A loopback UDP port with nothing listening (bound, then closed)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def icmp_of(received) -> tuple[int, int, int] | None:
    """(type, code, error data) of a Data indication's ICMP attribute, or None."""
    if received is None or received.kind != "data" or received.message is None:
        return None
    value = received.message.get(Attr.ICMP)
    if value is None:
        return None
    assert len(value) == 8 and value[:2] == b"\0\0", value.hex()
    return value[2], value[3], struct.unpack("!I", value[4:])[0]


def icmp_indications(client: TurnClient, seconds: float) -> list:
    """Every Data indication with ICMP that arrives within `seconds`."""
    found, deadline = [], time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        got = client.receive(min(left, 0.2))
        if icmp_of(got) is not None:
            found.append(got)
    return found


def dropped_icmp(server: RelayServer) -> int:
    resp = server.http("GET", "/metrics")
    assert resp.status == 200, resp
    found = re.search(r'^relayd_dropped_packets_total\{reason="icmp"\} (\d+)$', resp.body.decode(), re.M)
    assert found, "no icmp drop reason in /metrics"
    return int(found.group(1))


@pytest.fixture(scope="module")
def icmp_relay(tmp_path_factory):
    with running(RelayServer("relayd", tmp_path_factory.mktemp("relayd-icmp"), streams=True)) as s:
        yield s


def allocated(client: TurnClient, server: RelayServer, user: str) -> None:
    username, password = server.credentials(user)
    client.allocate(username, password)


@pytest.mark.parametrize("how", ["send-indication", "channel-data"])
def test_a_closed_peer_port_gives_the_client_port_unreachable(icmp_relay, how):
    peer = ("127.0.0.1", closed_port())
    with TurnClient(icmp_relay.address) as client:
        allocated(client, icmp_relay, "icmp-udp")
        if how == "channel-data":
            client.channel_bind(CHANNEL, peer)
            client.send_channel_data(CHANNEL, b"anyone there?")
        else:
            client.create_permission(peer)
            client.send_indication(peer, b"anyone there?")
        found = icmp_indications(client, WAIT)
    assert len(found) == 1, found
    assert icmp_of(found[0]) == PORT_UNREACHABLE
    assert found[0].peer == peer
    assert found[0].message.get(Attr.DATA) is None


def test_over_a_tcp_control_connection(icmp_relay):
    peer = ("127.0.0.1", closed_port())
    with StreamTurnClient(icmp_relay.address) as client:
        allocated(client, icmp_relay, "icmp-tcp")
        client.create_permission(peer)
        client.send_indication(peer, b"anyone there?")
        found = icmp_indications(client, WAIT)
    assert [(icmp_of(g), g.peer) for g in found] == [(PORT_UNREACHABLE, peer)]


def test_at_most_five_a_second_and_the_rest_counted(icmp_relay):
    peer = ("127.0.0.1", closed_port())
    before = dropped_icmp(icmp_relay)
    with TurnClient(icmp_relay.address) as client:
        allocated(client, icmp_relay, "icmp-rate")
        client.channel_bind(CHANNEL, peer)
        start = time.monotonic()
        for i in range(30):
            client.send_channel_data(CHANNEL, bytes([i]))
        sending = time.monotonic() - start
        found = icmp_indications(client, 2.0)
    # 30 datagrams inside at most two of relayd's one-second windows (the sends took well under
    # a second): 5 in each window at most, at least 5 in the first.
    assert sending < 0.5
    assert 5 <= len(found) <= 10, len(found)
    time.sleep(0.5)  # loops publish their counters every 250 ms
    assert dropped_icmp(icmp_relay) - before == 30 - len(found)


def test_an_icmp_error_costs_no_datagram_to_a_live_peer(icmp_relay):
    closed = ("127.0.0.1", closed_port())
    live = udp_socket()
    try:
        with TurnClient(icmp_relay.address) as client:
            allocated(client, icmp_relay, "icmp-live")
            client.channel_bind(CHANNEL, closed)
            client.channel_bind(CHANNEL + 1, live.getsockname())
            for i in range(40):
                client.send_channel_data(CHANNEL, b"x")
                client.send_channel_data(CHANNEL + 1, struct.pack("!I", i))
                time.sleep(0.005)
            arrived = set()
            while (got := recv_from(live, 1.0)) is not None:
                arrived.add(struct.unpack("!I", got[0])[0])
            # The closed port's errors came in between (so the sends above met pending errors).
            errors = icmp_indications(client, 1.0)
        assert arrived == set(range(40))
        assert errors and all(icmp_of(g) == PORT_UNREACHABLE for g in errors)
    finally:
        live.close()
