"""Mobility (RFC 8016; docs/mobility.md) on loopback: a phone's network change, played by a
client that moves from 127.0.0.1 to 127.0.0.2, .3, ... (new address and port each time) in the
middle of a stream of ChannelData to a peer. relayd runs two loop threads, so a move often lands
on the thread that does not hold the allocation and is handed over.

Each move is a Refresh with the allocation's current MOBILITY-TICKET from the new 5-tuple. The
peer sees every datagram come from the same relayed address, and loses none (the client moves
between two datagrams, so none is in flight); its answers reach the client at its new address.
A stolen ticket used with another user's credentials gets 441; a used ticket gets 400.
relayd only (coturn does not implement RFC 8016 tickets this way)."""

from __future__ import annotations

import re
import socket
import struct
import time

import pytest

from conftest import RelayServer, running, server_kind
from stunclient import Attr, TurnClient, TurnError, recv_from, rest_credentials, udp_socket

pytestmark = pytest.mark.skipif(server_kind() != "relayd", reason="relayd's RFC 8016 mobility")

MOBILITY_TICKET = 0x8030
WAIT = 3.0
CHANNEL = 0x4001
MOVES = 6
PER_LEG = 40


@pytest.fixture(scope="module")
def mobile_relay(tmp_path_factory):
    with running(RelayServer("relayd", tmp_path_factory.mktemp("mobility"), extra_args=["--relay-threads=2"])) as s:
        yield s


def rebind(client: TurnClient, host: str) -> None:
    """The client's network changes: a new local address and port."""
    old = client.sock
    client.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    client.sock.bind((host, 0))
    old.close()


def refresh_with(client: TurnClient, ticket: bytes):
    """A Refresh carrying `ticket` (RFC 8016 §3.2.1); raises TurnError on an error answer."""
    return client.check(client.authenticated_request(
        0x004, [(Attr.LIFETIME, struct.pack("!I", 600)), (MOBILITY_TICKET, ticket)]), "Refresh with a ticket")


def move(client: TurnClient, ticket: bytes, host: str) -> bytes:
    """Rebinds the client to `host` and moves the allocation there with `ticket`; returns the new
    ticket."""
    rebind(client, host)
    new = refresh_with(client, ticket).get(MOBILITY_TICKET)
    assert new and new != ticket
    return new


def allocate_mobile(client: TurnClient, server: RelayServer, user: str, peer) -> bytes:
    """Allocates with an empty MOBILITY-TICKET (RFC 8016 §3.1.1) and binds CHANNEL to `peer`;
    returns the ticket."""
    resp = client.allocate(*rest_credentials(server.secret, user), extra=[(MOBILITY_TICKET, b"")])
    ticket = resp.get(MOBILITY_TICKET)
    assert ticket, "no MOBILITY-TICKET in the Allocate answer"
    client.channel_bind(CHANNEL, peer.getsockname())
    return ticket


def mobility_counter(server: RelayServer, outcome: str = "moved") -> int:
    body = server.http("GET", "/metrics").body.decode()
    found = re.search(rf'^relayd_mobility_total\{{outcome="{outcome}"\}} (\d+)$', body, re.M)
    assert found, "relayd_mobility_total missing"
    return int(found.group(1))


def test_a_client_moves_between_addresses_in_the_middle_of_a_stream(mobile_relay):
    peer = udp_socket("127.0.0.1")
    before = mobility_counter(mobile_relay)
    forwarded_before = mobility_counter(mobile_relay, "forwarded")
    try:
        with TurnClient(mobile_relay.address) as client:
            ticket = allocate_mobile(client, mobile_relay, "phone", peer)
            sent, answered = 0, 0
            for leg in range(MOVES + 1):
                if leg:
                    ticket = move(client, ticket, f"127.0.0.{leg + 1}")
                for _ in range(PER_LEG):
                    client.send_channel_data(CHANNEL, struct.pack("!I", sent))
                    sent += 1
                    time.sleep(0.002)
                # The peer answers the last datagram; the answer must reach the client where it is now.
                got = recv_from(peer, WAIT)
                assert got is not None
                peer.sendto(b"where are you", got[1])
                reply = client.receive(WAIT)
                while reply is not None and reply.kind != "channel":
                    reply = client.receive(WAIT)
                assert reply is not None and reply.payload == b"where are you", f"leg {leg}: {reply}"
                answered += 1
    finally:
        peer.close()
    time.sleep(0.5)  # loops publish their counters every 250 ms
    forwarded = mobility_counter(mobile_relay, "forwarded") - forwarded_before
    print(f"mobility: {MOVES} moves ({forwarded} requests handed to the other loop), {sent} datagrams sent, "
          f"{answered} answers back")
    assert answered == MOVES + 1
    assert mobility_counter(mobile_relay) - before == MOVES


def test_every_datagram_arrives_from_the_same_relayed_address(mobile_relay):
    peer = udp_socket("127.0.0.1")
    peer.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)  # the burst must not overrun it
    try:
        with TurnClient(mobile_relay.address) as client:
            ticket = allocate_mobile(client, mobile_relay, "phone-2", peer)
            relayed = client.relayed
            sent = 0
            for leg in range(MOVES + 1):
                if leg:
                    ticket = move(client, ticket, f"127.0.0.{leg + 10}")
                for _ in range(PER_LEG):
                    client.send_channel_data(CHANNEL, struct.pack("!I", sent))
                    sent += 1
            arrived, sources = set(), set()
            while (got := recv_from(peer, 1.0)) is not None:
                arrived.add(struct.unpack("!I", got[0])[0])
                sources.add(got[1])
    finally:
        peer.close()
    lost = sent - len(arrived)
    print(f"mobility: {MOVES} moves, {sent} sent, {lost} lost, from {sources}")
    assert sources == {relayed}
    assert lost == 0


def test_a_stolen_ticket_needs_the_owners_credentials_and_a_used_one_is_refused(mobile_relay):
    username, password = rest_credentials(mobile_relay.secret, "victim")
    with TurnClient(mobile_relay.address) as victim:
        ticket = victim.allocate(username, password, extra=[(MOBILITY_TICKET, b"")]).get(MOBILITY_TICKET)
        # The thief has valid credentials of its own, but not the victim's: 441.
        thief_name, thief_password = rest_credentials(mobile_relay.secret, "thief")
        with TurnClient(mobile_relay.address, bind_host="127.0.0.20") as thief:
            thief.allocate(thief_name, thief_password)
            rebind(thief, "127.0.0.21")
            with pytest.raises(TurnError) as refused:
                refresh_with(thief, ticket)
            assert refused.value.code == 441
        # The victim moves; its old ticket is used up afterwards.
        move(victim, ticket, "127.0.0.22")
        rebind(victim, "127.0.0.23")
        with pytest.raises(TurnError) as used:
            refresh_with(victim, ticket)
        assert used.value.code == 400


def test_moves_leave_every_other_client_on_its_loop(mobile_relay):
    """A moved client's socket joins the listeners' SO_REUSEPORT group. The group's selector
    (docs/mobility.md) keeps every other client on its loop: 24 bystanders, allocated before and
    refreshed after six moves, all still find their allocations (a Refresh that reached the other
    loop would get 437), and their channels still relay. Without the selector, kernels that count
    connected sockets in the group's hash would move some of them; the kernel-level property is
    tested in Tests/RelayTests/ListenerSelectorTests.swift."""
    peer = udp_socket("127.0.0.1")
    bystanders: list[TurnClient] = []
    try:
        for i in range(24):
            client = TurnClient(mobile_relay.address, bind_host=f"127.0.1.{i + 1}")
            bystanders.append(client)
            client.allocate(*rest_credentials(mobile_relay.secret, f"bystander-{i}"))
            client.channel_bind(CHANNEL, peer.getsockname())
        username, password = rest_credentials(mobile_relay.secret, "mover")
        with TurnClient(mobile_relay.address) as mover:
            ticket = mover.allocate(username, password, extra=[(MOBILITY_TICKET, b"")]).get(MOBILITY_TICKET)
            for leg in range(MOVES):
                ticket = move(mover, ticket, f"127.0.2.{leg + 1}")
            for i, client in enumerate(bystanders):
                client.refresh(600)  # TurnError (437) if it reached the loop without its allocation
                client.send_channel_data(CHANNEL, f"bystander {i}".encode())
            arrived = set()
            while (got := recv_from(peer, 1.0)) is not None:
                arrived.add(got[0])
        assert arrived == {f"bystander {i}".encode() for i in range(len(bystanders))}
    finally:
        for client in bystanders:
            client.close()
        peer.close()
