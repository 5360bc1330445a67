"""The kernel fast path (docs/kernel-fast-path.md) beyond one IPv4 client and one peer:
- IPv6 (RFC 6156): a client on ::1 with an IPv6 relayed address, and its peer on ::1;
- relay to relay: two of relayd's clients with channels to each other's relayed addresses,
  where the program takes each packet from one client straight to the other in one pass.
Each payload arrives byte-exact, and relayd's metrics show that the kernel relayed every one.
relayd only; needs root (the program is loaded into the kernel)."""

from __future__ import annotations

import os
import re
import socket
import time

import pytest

from conftest import RelayServer, running, server_kind
from stunclient import Class, TurnClient
from test_adversarial import allocate
from test_kernel_fast_path import counters

pytestmark = [
    # The fast path on the host's `lo`, as test_kernel_fast_path.py (Tests/integration/README.md).
    pytest.mark.serial,
    pytest.mark.skipif(server_kind() != "relayd", reason="relayd's own kernel fast path"),
    pytest.mark.skipif(os.geteuid() != 0, reason="loading a BPF program needs root"),
]

MESSAGES = 300


def payload(i: int) -> bytes:
    """Message i: sizes from 1 to 1,200 bytes, contents that differ per message."""
    size = 1 + (i * 37) % 1200
    return bytes((i + k * 7) & 0xFF for k in range(size))


def offload_server(tmp_path, *extra: str) -> RelayServer:
    return RelayServer("relayd", tmp_path, extra_args=[
        "--kernel-offload=on", "--kernel-offload-interface=lo", *extra])


def exchange(send, receive, messages: list[bytes]) -> list:
    """Sends `messages` in batches of 20, reading what arrives after each batch (a burst of
    300 datagrams would overflow a receive buffer nobody reads); `receive` returns None when
    nothing came within its timeout."""
    got = []
    for start in range(0, len(messages), 20):
        batch = messages[start:start + 20]
        for message in batch:
            send(message)
        deadline = time.monotonic() + 5
        while len(got) < start + len(batch) and time.monotonic() < deadline:
            item = receive()
            if item is not None:
                got.append(item)
    return got


def call_each_other(a, b) -> None:
    """A binds channel 0x4001 to B's relayed address and B 0x4ABC to A's; MESSAGES go each way
    and arrive intact, in order, as ChannelData on the receiver's own channel."""
    a.channel_bind(0x4001, tuple(b.relayed))
    b.channel_bind(0x4ABC, tuple(a.relayed))
    messages = [payload(i) for i in range(MESSAGES)]
    for sender, receiver, mine, theirs, sent in ((a, b, 0x4001, 0x4ABC, messages), (b, a, 0x4ABC, 0x4001, messages[::-1])):
        got = exchange(lambda m: sender.send_channel_data(mine, m), lambda: receiver.receive(1.0), sent)
        assert [(r.kind, r.channel) for r in got] == [("channel", theirs)] * MESSAGES
        assert [r.payload for r in got] == sent


def receive_from(sock: socket.socket):
    try:
        return sock.recvfrom(2048)
    except socket.timeout:
        return None


def test_ipv6_channels_are_relayed_in_the_kernel(tmp_path):
    server = offload_server(tmp_path, "--listening-ip=::1", "--relay-ip=::1")
    with running(server), socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as peer:
        peer.bind(("::1", 0))
        peer.settimeout(1.0)
        with TurnClient(("::1", server.port)) as client:
            resp = allocate(server, client, family=6)
            assert resp.cls == Class.SUCCESS, resp.error_code()
            assert ":" in client.relayed[0]
            client.channel_bind(0x4001, peer.getsockname()[:2])
            messages = [payload(i) for i in range(MESSAGES)]
            got = exchange(lambda m: client.send_channel_data(0x4001, m), lambda: receive_from(peer), messages)
            assert [data for data, _ in got] == messages
            assert {source[:2] for _, source in got} == {tuple(client.relayed)}
            back = exchange(lambda m: peer.sendto(m, tuple(client.relayed)), lambda: client.receive(1.0), messages)
            assert [(r.kind, r.channel) for r in back] == [("channel", 0x4001)] * MESSAGES
            assert [r.payload for r in back] == messages
            time.sleep(2.5)  # the loops collect the kernel's counters once a second
            c = counters(server)
    assert c[("relayd_offloaded_packets_total", "client_to_peer")] == MESSAGES
    assert c[("relayd_offloaded_packets_total", "peer_to_client")] == MESSAGES
    assert c[("relayd_relayed_packets_total", "client_to_peer")] == MESSAGES
    assert c[("relayd_relayed_packets_total", "peer_to_client")] == MESSAGES
    total = sum(len(payload(i)) for i in range(MESSAGES))
    assert c[("relayd_offloaded_bytes_total", "client_to_peer")] == total


@pytest.mark.parametrize("family", [4, 6])
def test_relay_to_relay_goes_from_client_to_client_in_the_kernel(tmp_path, family):
    host = "127.0.0.1" if family == 4 else "::1"
    extra = [] if family == 4 else ["--listening-ip=::1", "--relay-ip=::1"]
    server = offload_server(tmp_path, *extra)
    with running(server), TurnClient((host, server.port)) as a, TurnClient((host, server.port)) as b:
        for client, user in ((a, "alice"), (b, "bob")):
            resp = allocate(server, client, user=user, family=family)
            assert resp.cls == Class.SUCCESS, resp.error_code()
        call_each_other(a, b)
        time.sleep(2.5)
        c = counters(server)
    # Each message left one allocation towards a peer and reached the other's client: both
    # counted, and both by the kernel (a second trip through relayd would show as user space).
    assert c[("relayd_offloaded_packets_total", "client_to_peer")] == 2 * MESSAGES
    assert c[("relayd_offloaded_packets_total", "peer_to_client")] == 2 * MESSAGES
    assert c[("relayd_relayed_packets_total", "client_to_peer")] == 2 * MESSAGES
    assert c[("relayd_relayed_packets_total", "peer_to_client")] == 2 * MESSAGES


def offloaded_channels(server: RelayServer) -> int:
    return counters(server)[("relayd_offloaded_channels", None)]


def test_refresh_zero_and_a_policy_reload_remove_kernel_routes(tmp_path):
    """Refresh 0 withdraws an allocation's routes. A SIGHUP whose peer policy denies a bound
    peer unbinds the channel and withdraws its route: the peer receives nothing more, from the
    kernel or from relayd."""
    import secrets
    import signal

    from lifecycle import FileServer, conf, eventually, wait_for_log
    from stunclient import rest_credentials

    secret = secrets.token_hex(16)
    server = FileServer(tmp_path / "srv", conf(secret), extra_args=[
        "--kernel-offload=on", "--kernel-offload-interface=lo", "--drain-timeout=0"])
    with running(server), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as peer:
        peer.bind(("127.0.0.5", 0))
        peer.settimeout(1.0)
        with TurnClient(server.address) as gone, TurnClient(server.address) as kept:
            gone.allocate(*rest_credentials(secret, "gone"))
            gone.channel_bind(0x4000, peer.getsockname())
            assert eventually(lambda: offloaded_channels(server) == 1)
            gone.refresh(0)
            assert eventually(lambda: offloaded_channels(server) == 0)

            kept.allocate(*rest_credentials(secret, "kept"))
            kept.channel_bind(0x4000, peer.getsockname())
            for i in range(10):
                kept.send_channel_data(0x4000, b"before %d" % i)
            assert sorted(peer.recvfrom(2048)[0] for _ in range(10)) == sorted(b"before %d" % i for i in range(10))
            assert eventually(lambda: offloaded_channels(server) == 1)

            server.rewrite(conf(secret, denied_peer_ip="127.0.0.5"))
            server.proc.send_signal(signal.SIGHUP)
            wait_for_log(server, r"configuration reloaded")
            assert eventually(lambda: offloaded_channels(server) == 0)
            kept.send_channel_data(0x4000, b"after the reload")
            peer.settimeout(0.5)
            with pytest.raises(socket.timeout):
                peer.recvfrom(2048)
            time.sleep(1.5)
            c = counters(server)
    assert c[("relayd_offloaded_packets_total", "client_to_peer")] == 10


def test_a_mixed_call_one_side_offloaded_one_side_tls(tmp_path):
    """A UDP client (its channel in the kernel) and a TLS client (user space) call each other
    through their relayed addresses. A's channel points at a relayed address, so the kernel
    relays it only straight into a channel of B's it holds too, and B, a TLS client, has none:
    A's packets go to relayd, which checks that B's allocation lives and hands them to B's
    connection (never to whatever else might be bound on B's port, docs/peer-policy.md); B's
    packets go through relayd to A. Every payload arrives intact both ways, all counted by
    relayd."""
    from streamclient import StreamTurnClient

    server = RelayServer("relayd", tmp_path, streams=True, extra_args=[
        "--kernel-offload=on", "--kernel-offload-interface=lo"])
    with running(server):
        with TurnClient(server.address) as a:
            b = StreamTurnClient(server.tls_address, tls=True)
            try:
                a.allocate(*server.credentials("udp-side"))
                b.allocate(*server.credentials("tls-side"))
                call_each_other(a, b)
            finally:
                b.close()
        time.sleep(2.5)
        c = counters(server)
    assert c[("relayd_offloaded_packets_total", "client_to_peer")] == 0
    assert c[("relayd_offloaded_packets_total", "peer_to_client")] == 0
    assert c[("relayd_relayed_packets_total", "client_to_peer")] == 2 * MESSAGES
    assert c[("relayd_relayed_packets_total", "peer_to_client")] == 2 * MESSAGES


def test_max_bps_allocations_stay_in_user_space_and_within_budget(tmp_path):
    """An allocation with `max-bps` is metered packet by packet in relayd, so its channels are
    not offloaded: a burst of five seconds' budget gets one or two seconds' worth through, the
    rest is dropped and counted for bandwidth, and the kernel relays none of it."""
    from stunclient import recv_from, udp_socket
    from test_bandwidth import BURST, HIGH, LOW, MAX_BPS, PAYLOAD, drain

    server = offload_server(tmp_path, f"--max-bps={MAX_BPS}", "--relay-threads=1")
    with running(server), TurnClient(server.address) as client:
        peer = udp_socket()
        try:
            assert allocate(server, client, user="metered").cls == Class.SUCCESS
            client.channel_bind(0x4000, peer.getsockname())
            for _ in range(BURST):
                client.send_channel_data(0x4000, bytes(PAYLOAD))
            to_peer = drain(lambda t: recv_from(peer, t), 1.0)
            assert LOW <= to_peer <= HIGH, to_peer
            time.sleep(1.5)
            c = counters(server)
            assert c[("relayd_offloaded_channels", None)] == 0
            assert c[("relayd_offloaded_packets_total", "client_to_peer")] == 0
            assert c[("relayd_relayed_packets_total", "client_to_peer")] == to_peer
            text = server.http("GET", "/metrics").body.decode()
            dropped = int(re.search(r'^relayd_dropped_packets_total\{reason="bandwidth"\} (\d+)$', text, re.M).group(1))
            # Every packet that did not arrive was dropped for bandwidth (loopback may lose 2).
            assert BURST - to_peer - 2 <= dropped <= BURST - to_peer, (dropped, to_peer)
            client.refresh(0)
        finally:
            peer.close()
