"""TCP allocations (RFC 6062) end to end.

A client on a TCP or TLS control connection allocates with REQUESTED-TRANSPORT TCP. Connect
makes relayd connect from the relayed address to a peer (CONNECTION-ID); a peer connecting to
the relayed address is announced with a ConnectionAttempt. Either way the client opens a new
data connection and sends ConnectionBind, after which that connection carries raw bytes to and
from the peer. relayd runs two loop threads, so data connections land on either loop while
the allocation stays on one (docs/tcp-relay.md).

coturn's turnutils_uclient -T relays client to client through TCP allocations; it is run
against whichever server the suite tests (coturn is the reference). The rest uses the
Python client in tcprelay.py against a plain TCP echo server and raw peer sockets, against
relayd only: coturn differs where RFC 6062 leaves room (it connects without a permission,
keeps a peer without one, and answers Connect on a UDP allocation with 403).
"""

from __future__ import annotations

import json
import os
import re
import select
import socket
import socketserver
import ssl
import threading
import time

import pytest

import stunclient
from conftest import RelayServer, free_port, running, server_kind
from stunclient import TurnError
from tcprelay import TCPRelayClient, connection_id, recv_exactly, wait_eof
from test_http_metrics import scrape, value
from test_uclient import _tool, parse_report

WAIT = 5.0
UCLIENT_TIMEOUT = 120
# RFC 6062 §5.3: a peer connection not bound within 30 s is closed; relayd's sweep runs once a second.
BIND_DEADLINE = 30
relayd_only = pytest.mark.skipif(
    server_kind() != "relayd",
    reason="relayd's behaviour: coturn differs where RFC 6062 leaves room (docs/tcp-relay.md)")


class EchoHandler(socketserver.BaseRequestHandler):
    def handle(self):
        while True:
            try:
                data = self.request.recv(65536)
            except OSError:
                return
            if not data:
                return
            self.request.sendall(data)


class EchoServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


@pytest.fixture
def echo():
    """A TCP echo server on a free loopback port."""
    server = EchoServer(("127.0.0.1", free_port()), EchoHandler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    try:
        yield server.server_address
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def start(tmp_path, *extra) -> RelayServer:
    return RelayServer(server_kind(), tmp_path, streams=True, extra_args=["--relay-threads=2", *extra]
                       if server_kind() == "relayd" else list(extra))


def control(server: RelayServer, transport: str, user: str = "alice", timeout: float = 5.0) -> TCPRelayClient:
    client = TCPRelayClient(server.tls_address if transport == "tls" else server.address, tls=transport == "tls",
                            timeout=timeout)
    client.allocate(*server.credentials(user=user))
    return client


def connected_pipe(client: TCPRelayClient, peer) -> tuple[socket.socket, int]:
    """Connect to `peer`, then a data connection bound to it: the data socket and the id."""
    client.create_permission(peer)
    response = TCPRelayClient.check(client.connect_peer(peer), "Connect")
    cid = connection_id(response)
    sock, bound, rest = client.open_data_connection(cid)
    TCPRelayClient.check(bound, "ConnectionBind")
    assert rest == b""
    return sock, cid


def peer_connecting(client: TCPRelayClient, permitted_ip: str) -> socket.socket:
    """A permission for `permitted_ip`, then a peer from 127.0.0.1 connecting to the relayed address."""
    client.create_permission((permitted_ip, 9))
    return socket.create_connection(client.relayed, timeout=WAIT)


def metric(server: RelayServer, name: str, **labels) -> float:
    time.sleep(0.4)  # loops publish every 250 ms
    return value(scrape(server), name, **labels)


# -- coturn's client

@pytest.mark.parametrize("transport", ["tcp", "tls"])
def test_uclient_relays_client_to_client_over_tcp_allocations(tmp_path, processes, transport):
    """turnutils_uclient -T: pairs of clients Connect to each other's relayed addresses (one side
    gets a ConnectionAttempt), bind data connections, and exchange 4 x 100 messages of 120 bytes."""
    server = start(tmp_path)
    with running(server) as s:
        port = s.tls_port if transport == "tls" else s.port
        cmd = [_tool("turnutils_uclient"), "-T", *(["-S"] if transport == "tls" else []),
               "-m", "4", "-n", "100", "-l", "120", "-z", "10",
               "-W", s.secret, "-u", "uclient", "-p", str(port), "-L", "127.0.0.1", s.host]
        proc, log = processes.start("turnutils_uclient", cmd)
        proc.wait(timeout=UCLIENT_TIMEOUT)
        output = log.read_text(errors="replace")
        assert proc.returncode == 0, output[-3000:]
        report = parse_report(output)
        assert report.send_msgs == 400 and report.recv_msgs == 400, output[-2000:]
        assert report.send_bytes == report.recv_bytes == 400 * 120
        assert report.lost == 0 and report.send_dropped == 0
        if s.kind == "relayd":
            # Both directions of every pair went through relayd's pipes (ChannelData is not used).
            assert metric(s, "relayd_tcp_relayed_bytes_total", direction="to_peer") >= 400 * 120
            assert metric(s, "relayd_tcp_peer_connections_total", outcome="bound") >= 4


# -- Connect (RFC 6062 §5.2)

@relayd_only
@pytest.mark.parametrize("transport", ["tcp", "tls"])
def test_connect_to_a_tcp_echo_server_is_byte_exact(tmp_path, echo, transport):
    server = start(tmp_path)
    with running(server) as s, control(s, transport) as client:
        data, _ = connected_pipe(client, echo)
        with data:
            payload = os.urandom(300_000)
            got = echo_through(data, payload, timeout=20)
            assert got == payload
        if s.kind == "relayd":
            assert metric(s, "relayd_tcp_relayed_bytes_total", direction="to_client") >= len(payload)


def echo_through(sock: socket.socket, payload: bytes, timeout: float) -> bytes:
    """Sends `payload` and reads as many bytes back, both from one thread: a TLS socket must not
    be written by one thread while another reads it (one OpenSSL session under both)."""
    sock.setblocking(False)
    sent, got = 0, bytearray()
    deadline = time.monotonic() + timeout
    try:
        while len(got) < len(payload) and time.monotonic() < deadline:
            writing = [sock] if sent < len(payload) else []
            select.select([sock], writing, [], 0.05)
            if sent < len(payload):
                try:
                    sent += sock.send(payload[sent:sent + 16384])
                except (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError):
                    pass
            try:
                chunk = sock.recv(65536)
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError):
                continue
            if not chunk:
                break
            got += chunk
    finally:
        sock.setblocking(True)
    return bytes(got)


@relayd_only
def test_connect_errors(tmp_path, echo):
    """403 without a permission (relayd's deny-first policy: coturn connects), 446 for a peer
    connected already, 447 for a peer that refuses, 400 on a UDP allocation."""
    server = start(tmp_path)
    with running(server) as s, control(s, "tcp") as client:
        if s.kind == "relayd":
            assert client.connect_peer(echo).error_code()[0] == 403
        data, _ = connected_pipe(client, echo)
        with data:
            assert client.connect_peer(echo).error_code()[0] == 446
        closed_port = free_port()
        assert client.connect_peer(("127.0.0.1", closed_port)).error_code()[0] == 447
    with running(start(tmp_path / "udp")) as s, stunclient.TurnClient(s.address) as udp:
        udp.allocate(*s.credentials())
        udp.create_permission(echo)
        assert udp.authenticated_request(
            stunclient.Method.CONNECT,
            lambda tid: [(stunclient.Attr.XOR_PEER_ADDRESS, stunclient.encode_xor_address(echo, tid))],
        ).error_code()[0] == 400


@relayd_only
def test_tcp_allocate_over_udp_is_refused(tmp_path):
    with running(start(tmp_path)) as s, stunclient.TurnClient(s.address) as udp:
        udp.transport = stunclient.TCP_TRANSPORT
        with pytest.raises(TurnError) as refused:
            udp.allocate(*s.credentials())
        assert refused.value.code == 400


@relayd_only
def test_no_tcp_relay_answers_442(tmp_path):
    with running(start(tmp_path, "--no-tcp-relay")) as s:
        client = TCPRelayClient(s.address)
        with client, pytest.raises(TurnError) as refused:
            client.allocate(*s.credentials())
        assert refused.value.code == 442


# -- peers connecting in (RFC 6062 §5.3)

@relayd_only
@pytest.mark.parametrize("transport", ["tcp", "tls"])
def test_a_peer_connecting_in_gets_announced_and_piped(tmp_path, transport):
    server = start(tmp_path)
    with running(server) as s, control(s, transport) as client:
        client.create_permission(("127.0.0.1", 9))
        peer = socket.create_connection(client.relayed, timeout=WAIT)
        with peer:
            attempt = client.wait_connection_attempt(WAIT)
            assert attempt is not None, "no ConnectionAttempt"
            cid, announced = attempt
            assert announced == peer.getsockname()[:2]
            # The peer's first bytes wait in the kernel until the client binds.
            peer.sendall(b"hello before bind")
            data, bound, rest = client.open_data_connection(cid)
            with data:
                TCPRelayClient.check(bound, "ConnectionBind")
                got = rest + recv_exactly(data, len(b"hello before bind") - len(rest), timeout=WAIT)
                assert got == b"hello before bind"
                data.sendall(b"and back")
                assert recv_exactly(peer, 8, timeout=WAIT) == b"and back"
                # The client closing its data connection closes the peer's.
                data.close()
                assert wait_eof(peer, WAIT)


@relayd_only
def test_a_peer_without_permission_is_closed_unannounced(tmp_path):
    with running(start(tmp_path)) as s, control(s, "tcp") as client, peer_connecting(client, "127.0.0.2") as peer:
        assert wait_eof(peer, WAIT), "relayd kept a connection from a peer without permission"
        assert client.wait_connection_attempt(1.0) is None


# -- ConnectionBind (RFC 6062 §5.4) and limits

@relayd_only
def test_connection_bind_checks_id_and_user(tmp_path):
    server = start(tmp_path)
    with running(server) as s, control(s, "tcp") as alice, control(s, "tcp", user="bob") as bob:
        alice.create_permission(("127.0.0.1", 9))
        peer = socket.create_connection(alice.relayed, timeout=WAIT)
        with peer:
            cid, _ = alice.wait_connection_attempt(WAIT)
            # Another user's credentials: 441, and the connection stays for its owner.
            sock, refused, _ = bob.open_data_connection(cid)
            sock.close()
            assert refused.error_code()[0] == 441
            sock, unknown, _ = alice.open_data_connection(cid ^ 0x5A5A5A5A)
            sock.close()
            assert unknown.error_code()[0] == 400
            data, bound, _ = alice.open_data_connection(cid)
            with data:
                TCPRelayClient.check(bound, "ConnectionBind")
                # Bound once: a second ConnectionBind for it is 400.
                sock, again, _ = alice.open_data_connection(cid)
                sock.close()
                assert again.error_code()[0] == 400


@relayd_only
def test_connections_per_allocation_are_limited(tmp_path, echo):
    server = start(tmp_path, "--max-tcp-relay-connections=2")
    with running(server) as s, control(s, "tcp") as client:
        client.create_permission(echo)
        peers = []
        try:
            for _ in range(2):
                peers.append(socket.create_connection(client.relayed, timeout=WAIT))
                assert client.wait_connection_attempt(WAIT) is not None
            assert client.connect_peer(echo).error_code()[0] == 508
            third = socket.create_connection(client.relayed, timeout=WAIT)
            peers.append(third)
            assert wait_eof(third, WAIT)
            assert metric(s, "relayd_tcp_peer_connections_total", outcome="refused") >= 2
        finally:
            for p in peers:
                p.close()


@relayd_only
def test_an_unbound_peer_connection_is_closed_after_30_s(tmp_path):
    with running(start(tmp_path)) as s, control(s, "tcp") as client, peer_connecting(client, "127.0.0.1") as peer:
        started = time.monotonic()
        cid, _ = client.wait_connection_attempt(WAIT)
        assert not wait_eof(peer, BIND_DEADLINE - 5), "closed before the 30 s"
        assert wait_eof(peer, 10), "still open 35 s after the ConnectionAttempt"
        assert BIND_DEADLINE - 1 <= time.monotonic() - started <= BIND_DEADLINE + 5
        sock, late, _ = client.open_data_connection(cid)
        sock.close()
        assert late.error_code()[0] == 400
        assert metric(s, "relayd_tcp_peer_connections_total", outcome="expired") == 1


@relayd_only
def test_the_allocation_ending_closes_its_pipes(tmp_path, echo):
    server = start(tmp_path)
    with running(server) as s, control(s, "tcp") as client:
        pipes = [connected_pipe(client, echo)[0]]
        peer = None
        try:
            client.create_permission(("127.0.0.1", 9))
            peer = socket.create_connection(client.relayed, timeout=WAIT)
            cid, _ = client.wait_connection_attempt(WAIT)
            data, bound, _ = client.open_data_connection(cid)
            pipes.append(data)
            TCPRelayClient.check(bound, "ConnectionBind")
            TCPRelayClient.check(client.refresh(0), "Refresh")
            for data in pipes:
                assert wait_eof(data, WAIT), "a data connection outlived its allocation"
            assert wait_eof(peer, WAIT), "a peer connection outlived its allocation"
        finally:
            for p in pipes:
                p.close()
            if peer:
                peer.close()


# -- backpressure

def rss_kib(pid: int) -> int:
    status = open(f"/proc/{pid}/status").read()
    return int(re.search(r"VmRSS:\s+(\d+) kB", status).group(1))


def stream_path_capacity() -> int:
    """The most the kernel can queue between a writer and a reader that reads nothing, through
    one relayd pipe: the writer's send buffer and relayd's two sockets' buffers, each of which
    the kernel may grow to the `tcp_wmem` / `tcp_rmem` maximum, and the reader's receive buffer
    at its default. A machine's sysctls set it (about 10 MB with Linux's defaults, 40 MB where
    `tcp_rmem` allows 32 MB), so a fixed payload can fit in it whole under load."""
    rmem = [int(v) for v in open("/proc/sys/net/ipv4/tcp_rmem").read().split()]
    wmem = [int(v) for v in open("/proc/sys/net/ipv4/tcp_wmem").read().split()]
    return wmem[2] + rmem[2] + wmem[2] + rmem[1]


STALL_MARGIN = 4 << 20  # what relayd itself may hold for a pipe, well above its buffers
# A sender whose reader reads nothing stalls before this; the payload is well past it.
STALL_LIMIT = stream_path_capacity() + STALL_MARGIN
SLOW_PAYLOAD = STALL_LIMIT + 3 * STALL_MARGIN


def stall(sender: socket.socket, payload: bytes, seconds: float) -> int:
    """Writes `payload` without blocking for `seconds`: how much the kernel took."""
    sender.setblocking(False)
    sent = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and sent < len(payload):
        try:
            sent += sender.send(payload[sent:sent + 65536])
        except BlockingIOError:
            time.sleep(0.01)
    return sent  # at most stream_path_capacity() while the reader reads nothing


def stall_then_drain(server: RelayServer, sender: socket.socket, receiver: socket.socket) -> None:
    """`sender` writes SLOW_PAYLOAD for 3 s while `receiver` reads nothing: it must stall once
    the kernel's buffers on the way are full, with relayd's memory flat; then `receiver` reads
    and gets every byte in order."""
    payload = os.urandom(SLOW_PAYLOAD)
    before = rss_kib(server.proc.pid)
    sent = stall(sender, payload, 3)
    grown = rss_kib(server.proc.pid) - before
    assert sent < STALL_LIMIT, \
        f"{sent >> 20} MB written to a side that reads nothing (the kernel holds {STALL_LIMIT >> 20} MB)"
    assert grown < 4096, f"relayd grew by {grown} KiB while one side did not read"
    send_rest_and_check(sender, receiver, payload, sent)


def send_rest_and_check(sender: socket.socket, receiver: socket.socket, payload: bytes, sent: int) -> None:
    """`receiver` starts reading while `sender` writes the rest of `payload`: every byte arrives
    in order."""
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(recv_exactly(receiver, len(payload), timeout=60)))
    reader.start()
    sender.setblocking(True)
    sender.settimeout(60)
    sender.sendall(payload[sent:])
    reader.join(timeout=60)
    assert received and received[0] == payload


@relayd_only
@pytest.mark.parametrize("transport", ["tcp", "tls"])
def test_a_slow_client_stalls_the_peer_instead_of_growing_memory(tmp_path, transport):
    """The peer writes to a client that does not read: relayd stops reading the peer instead of
    buffering, and once the client reads, everything arrives in order."""
    with running(start(tmp_path)) as s, control(s, transport) as client:
        client.create_permission(("127.0.0.1", 9))
        peer = socket.create_connection(client.relayed, timeout=WAIT)
        peer.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 * 1024)
        with peer:
            cid, _ = client.wait_connection_attempt(WAIT)
            data, bound, _ = client.open_data_connection(cid, rcvbuf=64 * 1024)
            with data:
                TCPRelayClient.check(bound, "ConnectionBind")
                stall_then_drain(s, sender=peer, receiver=data)


@relayd_only
def test_a_slow_peer_stalls_the_client_instead_of_growing_memory(tmp_path):
    """The client writes to a peer that does not read: relayd stops reading the client, then the
    peer reads everything in order."""
    listener = socket.create_server(("127.0.0.1", 0))
    with listener, running(start(tmp_path)) as s, control(s, "tcp") as client:
        listener.settimeout(WAIT)
        peer_address = listener.getsockname()
        client.create_permission(peer_address)
        cid = connection_id(TCPRelayClient.check(client.connect_peer(peer_address), "Connect"))
        peer, _ = listener.accept()
        peer.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        data, bound, _ = client.open_data_connection(cid)
        with peer, data:
            TCPRelayClient.check(bound, "ConnectionBind")
            stall_then_drain(s, sender=data, receiver=peer)


# -- max-bps and the traffic figures (docs/tcp-relay.md, "Bandwidth and accounting")

MAX_BPS = 40_000
PACED_BYTES = 200_000  # five seconds of budget


def paced_transfer(sender: socket.socket, receiver: socket.socket, count: int, timeout: float = 30) -> tuple[bytes, float]:
    """`sender` writes `count` random bytes as fast as the pipe takes them; returns the bytes
    `receiver` got (checked byte-exact by the caller) and the seconds until the last arrived."""
    payload = os.urandom(count)
    started = time.monotonic()
    writer = threading.Thread(target=sender.sendall, args=(payload,), daemon=True)
    writer.start()
    got = recv_exactly(receiver, count, timeout=timeout)
    elapsed = time.monotonic() - started
    writer.join(timeout=timeout)
    assert got == payload, f"{len(got)} of {count} bytes arrived, or not in order"
    return got, elapsed


def assert_paced(elapsed: float, count: int) -> None:
    """`count` bytes took as long as max-bps allows. The budget's windows are whole seconds: the
    first burst goes at once, the next at the end of that (partial) second, then one a second;
    so n windows' worth takes between n - 2 and n - 1 seconds (plus loopback scheduling)."""
    windows = count / MAX_BPS
    assert windows - 2.2 <= elapsed <= windows + 0.5, \
        f"{count} bytes in {elapsed:.2f} s at max-bps {MAX_BPS}: {count / elapsed:.0f} B/s"


@relayd_only
@pytest.mark.parametrize("transport", ["tcp", "tls"])
@pytest.mark.parametrize("direction", ["to_peer", "to_client"])
def test_max_bps_paces_a_pipe_without_losing_a_byte(tmp_path, direction, transport):
    """With max-bps, a pipe carries about max-bps bytes a second each way: relayd stops reading
    the sending side until the next second instead of dropping bytes, so the stream arrives whole
    (RFC 6062 §5.5 carries a byte stream)."""
    listener = socket.create_server(("127.0.0.1", 0))
    with listener, running(start(tmp_path, f"--max-bps={MAX_BPS}")) as s, control(s, transport) as client:
        listener.settimeout(WAIT)
        client.create_permission(listener.getsockname())
        cid = connection_id(TCPRelayClient.check(client.connect_peer(listener.getsockname()), "Connect"))
        peer, _ = listener.accept()
        data, bound, _ = client.open_data_connection(cid)
        with peer, data:
            TCPRelayClient.check(bound, "ConnectionBind")
            sender, receiver = (data, peer) if direction == "to_peer" else (peer, data)
            _, elapsed = paced_transfer(sender, receiver, PACED_BYTES)
            assert_paced(elapsed, PACED_BYTES)
            assert metric(s, "relayd_tcp_relayed_bytes_total", direction=direction) == PACED_BYTES


@relayd_only
def test_max_bps_is_one_budget_for_all_pipes_of_an_allocation(tmp_path, echo):
    """Two pipes of one allocation (their data connections may run on either loop thread) share
    its budget: together they carry about max-bps a second, each stream whole."""
    with running(start(tmp_path, f"--max-bps={MAX_BPS}")) as s, control(s, "tcp") as client:
        client.create_permission(("127.0.0.1", 9))
        first, _ = connected_pipe(client, echo)
        peer = socket.create_connection(client.relayed, timeout=WAIT)
        cid, _ = client.wait_connection_attempt(WAIT)
        second, bound, _ = client.open_data_connection(cid)
        with first, second, peer:
            TCPRelayClient.check(bound, "ConnectionBind")
            results: list[float] = []
            other = threading.Thread(
                target=lambda: results.append(paced_transfer(second, peer, PACED_BYTES // 2)[1]), daemon=True)
            started = time.monotonic()
            other.start()
            # The echo pipe carries its half to the peer and back; the budget is per direction.
            paced_transfer(first, first, PACED_BYTES // 2)
            other.join(timeout=30)
            assert results, "the second pipe did not finish"
            assert_paced(time.monotonic() - started, PACED_BYTES)


ADMIN_TOKEN = "admin-token-for-the-tcp-relay-suite-0123456789"


def piped_traffic(s: RelayServer, client: TCPRelayClient, echo) -> tuple[list[socket.socket], int, int]:
    """Two pipes of `client`'s allocation carry known byte counts: a Connect to the echo server
    (sent, echoed back whole) and a peer connecting in (each side sends a little). Returns the
    open sockets (data connections and the peer) and the bytes to the peer and to the client."""
    echoed, from_peer, to_peer = 70_001, 33_333, 1_234
    first, _ = connected_pipe(client, echo)
    client.create_permission(("127.0.0.1", 9))
    peer = socket.create_connection(client.relayed, timeout=WAIT)
    cid, _ = client.wait_connection_attempt(WAIT)
    second, bound, rest = client.open_data_connection(cid)
    TCPRelayClient.check(bound, "ConnectionBind")
    paced_transfer(first, first, echoed)
    payload = os.urandom(from_peer)
    peer.sendall(payload)
    assert rest + recv_exactly(second, from_peer - len(rest), timeout=WAIT) == payload
    payload = os.urandom(to_peer)
    second.sendall(payload)
    assert recv_exactly(peer, to_peer, timeout=WAIT) == payload
    return [first, second, peer], echoed + to_peer, echoed + from_peer


def admin_json(s: RelayServer, path: str):
    result = s.http("GET", path, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    assert result.status == 200, (path, result.status, result.body)
    return json.loads(result.body)


@relayd_only
def test_admin_traffic_includes_piped_bytes(tmp_path, echo):
    """GET /api/v1/allocations counts what the allocation's pipes carried, exactly, whichever
    loop thread runs them; so does the status page's per-user traffic."""
    server = start(tmp_path, f"--api-key=ops:{ADMIN_TOKEN}:admin")
    with running(server) as s, control(s, "tcp") as client:
        sockets, to_peer, to_client = piped_traffic(s, client, echo)
        try:
            [record] = admin_json(s, "/api/v1/allocations?user=alice")["allocations"]
            assert record["transport"] == "tcp"
            assert (record["traffic"]["bytes_to_peer"], record["traffic"]["bytes_to_client"]) == (to_peer, to_client)
            page = s.http("GET", "/status", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}).body.decode()
            row = re.search(r'<td class="user">alice</td>.*?data-value="(\d+)".*?data-value="(\d+)"', page)
            assert row, page[-2000:]
            assert (int(row.group(1)), int(row.group(2))) == (to_peer, to_client)
        finally:
            for sock in sockets:
                sock.close()


@relayd_only
def test_session_summary_includes_piped_bytes(tmp_path, echo):
    """The allocation_deleted line counts every byte its pipes carried, exactly, when the
    allocation ends (Refresh 0) with its pipes still open: the end seals the count before the
    pipes close."""
    with running(start(tmp_path, "--log-format=json")) as s, control(s, "tcp") as client:
        sockets, to_peer, to_client = piped_traffic(s, client, echo)
        try:
            TCPRelayClient.check(client.refresh(0), "Refresh")
            for sock in sockets:
                assert wait_eof(sock, WAIT), "a pipe outlived its allocation"
        finally:
            for sock in sockets:
                sock.close()
        deadline = time.monotonic() + WAIT
        deleted: list[dict] = []
        while not deleted and time.monotonic() < deadline:
            deleted = [r for r in map(json.loads, filter(str.strip, s.log_text().splitlines()))
                       if r.get("event") == "allocation_deleted"]
            time.sleep(0.1)
        assert len(deleted) == 1, s.log_tail()
        assert (deleted[0]["bytes_to_peer"], deleted[0]["bytes_to_client"]) == (str(to_peer), str(to_client))


UCLIENT_PROGRESS = re.compile(r"^(\d+): : start_mclient: msz=\d+, .*tot_recv_bytes ~ (\d+)", re.MULTILINE)
UCLIENT_RTT = re.compile(r"Average round trip delay ([\d.]+) ms")


@relayd_only
def test_uclient_over_tcp_allocations_is_paced_by_max_bps_and_loses_nothing(tmp_path, processes):
    """turnutils_uclient -T under max-bps: every message arrives, none lost, while relayd carries
    them at the budget's pace. Each client sends 40 KB in half a second (a message every 5 ms),
    eight times max-bps: the messages wait their turn (seconds of round trip, where an unpaced
    relay answers in milliseconds), and what arrives in any second of uclient's progress lines
    stays within the budget's windows (two clients, each through its allocation's pipe and its
    partner's; a one-second sample spans parts of two windows)."""
    rate, messages, length = 10_000, 100, 400
    with running(start(tmp_path, f"--max-bps={rate}")) as s:
        cmd = [_tool("turnutils_uclient"), "-T", "-m", "2", "-n", str(messages), "-l", str(length), "-z", "5",
               "-W", s.secret, "-u", "uclient", "-p", str(s.port), "-L", "127.0.0.1", s.host]
        proc, log = processes.start("turnutils_uclient", cmd)
        proc.wait(timeout=UCLIENT_TIMEOUT)
        output = log.read_text(errors="replace")
        assert proc.returncode == 0, output[-3000:]
        report = parse_report(output)
        assert report.send_msgs == report.recv_msgs == 2 * messages, output[-2000:]
        assert report.send_bytes == report.recv_bytes == 2 * messages * length
        assert report.lost == 0 and report.send_dropped == 0
        rtt = UCLIENT_RTT.findall(output)
        assert rtt and float(rtt[-1]) >= 300, f"round trip {rtt}: messages did not wait for the budget"
        received = [int(b) for _, b in UCLIENT_PROGRESS.findall(output)]
        steps = [b - a for a, b in zip(received, received[1:])]
        assert steps and max(steps) <= 4 * rate, f"received per second: {steps}"
        assert metric(s, "relayd_tcp_relayed_bytes_total", direction="to_peer") >= 2 * messages * length
