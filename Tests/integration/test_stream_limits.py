"""Abuse limits on the TCP and TLS listeners (relayd's `tcp-idle-timeout`,
`tls-handshake-timeout`, `max-connections-per-ip`, `max-connections`, and the
bound on what a client that does not read may leave queued).

The server runs with short timeouts (IDLE, HANDSHAKE seconds). Waits are
bounded with generous slack; no test asserts how long anything took.
"""

from __future__ import annotations

import re
import socket
import ssl
import time
from pathlib import Path

import pytest

import stunclient
from conftest import RelayServer, running, server_kind
from floods import metric
from streamclient import FrameReader, StreamTurnClient, connect
from stunclient import Class, udp_socket

pytestmark = [
    # 2 s timeouts measured, and 600 connections x 5 rounds with relayd's RSS compared: alone
    # (Tests/integration/README.md).
    pytest.mark.serial,
    pytest.mark.skipif(server_kind() != "relayd", reason="relayd's limit settings"),
]

IDLE = 2
HANDSHAKE = 2
SLACK = 6.0  # beyond a timeout, for the once-a-second sweep and a busy machine
CHANNEL = 0x4003


@pytest.fixture(scope="module")
def limited(tmp_path_factory):
    server = RelayServer("relayd", tmp_path_factory.mktemp("relayd-limits"), streams=True, extra_args=[
        "--verbose", "--relay-threads=2", f"--tcp-idle-timeout={IDLE}", f"--tls-handshake-timeout={HANDSHAKE}",
        "--max-connections-per-ip=5000", "--max-pending-connections-per-ip=5000", "--max-connections=10000",
    ])
    with running(server) as s:
        yield s


def closes(server: RelayServer, reason: str) -> int:
    return len(re.findall(rf"event=connection_closed .*reason={reason}\b", server.log_text()))


def wait_count(server: RelayServer, reason: str, at_least: int, timeout: float = SLACK) -> int:
    deadline = time.monotonic() + timeout
    while (n := closes(server, reason)) < at_least and time.monotonic() < deadline:
        time.sleep(0.1)
    return n


def raw_tcp(address: tuple[str, int]) -> socket.socket:
    sock = socket.create_connection(address, timeout=5)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


# --- timeouts ---------------------------------------------------------------------


def test_silent_tcp_connection_is_closed_after_the_idle_timeout(limited):
    before = closes(limited, "idle_timeout")
    with raw_tcp(limited.address) as sock:
        assert FrameReader(sock).wait_closed(IDLE + SLACK)
    assert wait_count(limited, "idle_timeout", before + 1) == before + 1


def test_dripping_bytes_without_a_whole_message_is_closed(limited):
    """Slow-loris: a STUN header announcing 1000 bytes, then one byte every 0.3 s."""
    header = stunclient.binding_request().encode()[:20]
    header = header[:2] + (1000).to_bytes(2, "big") + header[4:]
    with raw_tcp(limited.address) as sock:
        sock.sendall(header)
        reader = FrameReader(sock)
        deadline = time.monotonic() + IDLE + SLACK
        closed = False
        while time.monotonic() < deadline and not closed:
            try:
                sock.sendall(b"\x00")
            except OSError:
                closed = True
                break
            closed = reader.wait_closed(0.3)
        assert closed, "a connection that never completes a message was kept open"


def test_tls_handshake_that_never_starts_is_closed(limited):
    before = closes(limited, "tls_handshake_timeout")
    with raw_tcp(limited.tls_address) as sock:
        assert FrameReader(sock).wait_closed(HANDSHAKE + SLACK)
    assert wait_count(limited, "tls_handshake_timeout", before + 1) == before + 1


def test_tls_connection_without_stun_is_closed_after_the_idle_timeout(limited):
    with connect(limited.tls_address, tls=True) as sock:
        assert FrameReader(sock).wait_closed(IDLE + SLACK)


@pytest.mark.parametrize("transport", ["tcp", "tls"])
def test_a_connection_with_an_allocation_outlives_the_idle_timeout(limited, transport):
    address = limited.tls_address if transport == "tls" else limited.address
    with StreamTurnClient(address, tls=transport == "tls") as client:
        client.allocate(*limited.credentials())
        time.sleep(IDLE + 2)
        assert client.refresh(600).lifetime() == 600


def test_binding_only_connection_is_closed_once_idle(limited):
    """A valid STUN message but no allocation: closed after IDLE seconds of silence."""
    with connect(limited.address) as sock:
        sock.sendall(stunclient.binding_request().encode())
        reader = FrameReader(sock)
        assert reader.read_frame(5) is not None
        assert reader.wait_closed(IDLE + SLACK)


# --- connection caps --------------------------------------------------------------


def refused_metric(server: RelayServer, reason: str, expected: int) -> float:
    """relayd_stream_connections_refused_total{reason}, polled until it reaches `expected` or 5 s
    pass (each loop publishes its counters about once a second)."""
    deadline = time.monotonic() + 5
    while True:
        value = metric(server, "relayd_stream_connections_refused_total", reason=reason)
        if value >= expected or time.monotonic() > deadline:
            return value
        time.sleep(0.2)


# limit -> (connections one source gets out of a cap of 8, the refusal reason): the hard per-source
# caps bind at the cap; the node-wide bounds are shared from half of them on, so one source alone
# gets half (docs/rate-limits.md).
REFUSALS = {"max-connections-per-ip": (8, "per_ip_limit"), "max-connections": (4, "total_share"),
            "max-pending-connections-per-ip": (8, "pending_per_ip_limit"),
            "max-pending-connections": (4, "pending_share")}


def raw_tcp_from(source: str, address: tuple[str, int]) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((source, 0))
    sock.settimeout(5)
    sock.connect(address)
    return sock


def answers_binding(sock: socket.socket) -> bool:
    try:
        sock.sendall(stunclient.binding_request().encode())
        return FrameReader(sock).read_frame(2) is not None
    except (OSError, ConnectionError):
        return False


@pytest.mark.parametrize("limit", list(REFUSALS))
def test_connections_beyond_the_cap_are_refused(tmp_path, limit):
    cap = 8
    admitted, reason = REFUSALS[limit]
    server = RelayServer("relayd", tmp_path / "relayd", streams=True,
                         extra_args=["--verbose", f"--{limit}={cap}"])
    with running(server):
        socks = [raw_tcp(server.address) for _ in range(cap + 4)]
        try:
            answered = sum(answers_binding(sock) for sock in socks)
            assert answered == admitted
            refused = cap + 4 - admitted
            assert len(re.findall(rf"event=connection_refused .*reason={reason}", server.log_text())) == refused
            assert refused_metric(server, reason, refused) == refused
            if admitted < cap:
                # A share, not a cap: another source address still gets in.
                with raw_tcp_from("127.0.0.2", server.address) as other:
                    assert answers_binding(other)
        finally:
            for sock in socks:
                sock.close()
        # Slots come back when connections close.
        deadline = time.monotonic() + SLACK
        while True:
            with raw_tcp(server.address) as sock:
                sock.sendall(stunclient.binding_request().encode())
                try:
                    if FrameReader(sock).read_frame(1) is not None:
                        break
                except ConnectionError:
                    pass
            assert time.monotonic() < deadline, "closed connections did not give their slots back"
            time.sleep(0.2)


def test_connections_with_an_allocation_are_not_pending(tmp_path):
    """max-pending-connections-per-ip counts only connections that have not allocated yet: a
    source whose connections all hold allocations may open more (docs/rate-limits.md)."""
    cap = 3
    server = RelayServer("relayd", tmp_path / "relayd", streams=True,
                         extra_args=["--verbose", f"--max-pending-connections-per-ip={cap}"])
    with running(server):
        clients = []
        try:
            for i in range(3 * cap):
                client = StreamTurnClient(server.address)
                clients.append(client)
                client.allocate(*server.credentials(f"held{i}"))
            assert "reason=pending_per_ip_limit" not in server.log_text()
            # Now `cap` connections that do not allocate fill the pending slots; one more is refused.
            idle = [raw_tcp(server.address) for _ in range(cap + 1)]
            try:
                answered = 0
                for sock in idle:
                    try:
                        sock.sendall(stunclient.binding_request().encode())
                        if FrameReader(sock).read_frame(2) is not None:
                            answered += 1
                    except (OSError, ConnectionError):
                        pass
                assert answered == cap
                assert len(re.findall(r"event=connection_refused .*reason=pending_per_ip_limit",
                                      server.log_text())) == 1
            finally:
                for sock in idle:
                    sock.close()
        finally:
            for client in clients:
                client.close()


def test_a_connection_whose_allocation_ended_is_pending_again(tmp_path):
    """A connection whose allocation was deleted (Refresh 0) while it stays open counts as
    pending again, against max-pending-connections-per-ip (docs/rate-limits.md)."""
    cap = 2
    server = RelayServer("relayd", tmp_path / "relayd", streams=True,
                         extra_args=["--verbose", f"--max-pending-connections-per-ip={cap}"])
    with running(server):
        client = StreamTurnClient(server.address)
        idle: list[socket.socket] = []
        try:
            client.allocate(*server.credentials("ended"))
            assert client.refresh(0).cls == Class.SUCCESS
            time.sleep(1.5)  # the transport's once-a-second sweep notices the allocation is gone
            idle = [raw_tcp(server.address) for _ in range(cap)]
            answered = sum(answers_binding(sock) for sock in idle)
            # The ended allocation's connection holds one of the two pending slots.
            assert answered == cap - 1
            assert refused_metric(server, "pending_per_ip_limit", 1) == 1
        finally:
            client.close()
            for sock in idle:
                sock.close()


# --- a client that does not read --------------------------------------------------


@pytest.mark.parametrize("transport", ["tcp", "tls"])
def test_a_client_that_does_not_read_is_disconnected(limited, transport):
    """The peer floods the allocation; the client never reads. Its pending output passes the
    per-connection bound (1 MiB) and relayd drops the connection instead of buffering on."""
    before = closes(limited, "slow_reader")
    peer = udp_socket()
    address = limited.tls_address if transport == "tls" else limited.address
    client = StreamTurnClient(address, tls=transport == "tls")
    client.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    with peer, client:
        client.allocate(*limited.credentials())
        client.create_permission(peer.getsockname()[:2])
        payload = b"x" * 1200
        deadline = time.monotonic() + 30
        while closes(limited, "slow_reader") == before and time.monotonic() < deadline:
            for _ in range(200):
                peer.sendto(payload, client.relayed)
            time.sleep(0.01)
        assert closes(limited, "slow_reader") == before + 1
        assert client.reader.wait_closed(SLACK)


# --- many idle connections and memory ---------------------------------------------


def open_idle_round(server: RelayServer, tcp: int, tls: int, tls_silent: int) -> list:
    socks = [raw_tcp(server.address) for _ in range(tcp)]
    socks += [connect(server.tls_address, tls=True) for _ in range(tls)]
    socks += [raw_tcp(server.tls_address) for _ in range(tls_silent)]
    return socks


def wait_all_closed(socks: list, timeout: float) -> int:
    """How many of `socks` the server closed within `timeout` (all waited on together)."""
    deadline = time.monotonic() + timeout
    open_socks = list(socks)
    closed = 0
    while open_socks and time.monotonic() < deadline:
        still = []
        for sock in open_socks:
            try:
                sock.setblocking(False)
                data = sock.recv(4096)
                if data == b"":
                    closed += 1
                    continue
            except ssl.SSLWantReadError:
                pass
            except BlockingIOError:
                pass
            except (ConnectionError, ssl.SSLError, OSError):
                closed += 1
                continue
            still.append(sock)
        open_socks = still
        time.sleep(0.1)
    for sock in socks:
        sock.close()
    return closed


def test_many_idle_connections_are_closed_and_memory_comes_back(limited):
    """600 idle connections at once (TCP, TLS after the handshake, TLS without one), a few
    rounds: every one is closed by the server, and its memory comes back."""
    pid = limited.proc.pid
    shape = dict(tcp=300, tls=150, tls_silent=150)
    total = sum(shape.values())
    # Warm-up rounds: allocator arenas, OpenSSL and libevent structures reach their working size.
    for _ in range(2):
        assert wait_all_closed(open_idle_round(limited, **shape), IDLE + HANDSHAKE + SLACK) == total
    time.sleep(1.5)
    baseline = rss_kib(pid)
    after = []
    for _ in range(3):
        socks = open_idle_round(limited, **shape)
        peak = rss_kib(pid)
        assert wait_all_closed(socks, IDLE + HANDSHAKE + SLACK) == total
        time.sleep(1.5)
        after.append(rss_kib(pid))
        print(f"idle round: baseline {baseline} KiB, {total} open {peak} KiB, all closed {after[-1]} KiB")
    # Bounded: three more rounds (1800 connections) leave less than 4 MiB behind, i.e. no
    # per-connection leak of even ~2 KiB.
    assert max(after) - baseline < 4096, (baseline, after)
    with connect(limited.address) as sock:
        sock.sendall(stunclient.binding_request().encode())
        assert FrameReader(sock).read_frame(5) is not None
