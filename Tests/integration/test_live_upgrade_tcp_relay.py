"""A live upgrade moves TCP allocations (RFC 6062) with everything they hold
(docs/live-upgrade.md, "RFC 6062 connections").

relayd runs two loops. One client on a plain TCP control connection holds a TCP allocation
with, at the moment of the upgrade:
- a pipe to an echo server;
- a pipe whose peer does not read and whose client does not read, so that both directions hold
  bytes in relayd's user space (the client is not read past 256 KiB buffered, docs/tcp-relay.md);
- a connection to a peer, connected by Connect and not yet bound;
- a peer that connected in and was announced, not yet bound;
- a Connect whose connect is still in progress: its peer's accept queue is full, so the SYN
  is dropped until the queue drains after the upgrade.

The old process has nothing left to drain and exits at once. After the upgrade every pipe
carries on byte-exact, the held bytes arrive whole and in order, the two waiting connections
bind, the pending Connect is answered by the heir, a Refresh keeps the relayed address, and the
admin API counts every byte the pipes carried, before and after, exactly.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time

import pytest

from conftest import RelayServer, free_port, server_kind
from tcprelay import TCPRelayClient, connection_id, recv_exactly
from test_live_upgrade import ADMIN, ADMIN_TOKEN, stop_both, upgrade_through_api
from test_tcp_relay import EchoHandler, EchoServer

pytestmark = pytest.mark.skipif(server_kind() != "relayd", reason="relayd's live upgrade")

WAIT = 5.0
# Bytes each way through the pipe whose ends do not read: more than relayd buffers
# (256 KiB) plus what the kernel's socket buffers take.
HELD = 3 * 1024 * 1024


def echo_server() -> tuple[EchoServer, threading.Thread]:
    server = EchoServer(("127.0.0.1", free_port()), EchoHandler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    return server, thread


def bind(client: TCPRelayClient, cid: int, rcvbuf: int | None = None) -> socket.socket:
    sock, response, rest = client.open_data_connection(cid, rcvbuf=rcvbuf)
    TCPRelayClient.check(response, "ConnectionBind")
    assert rest == b""
    return sock


def echoes(sock: socket.socket, payload: bytes) -> None:
    sock.sendall(payload)
    assert recv_exactly(sock, len(payload), timeout=WAIT) == payload


class Pusher(threading.Thread):
    """Sends `payload` on `sock` until it is all gone (blocking while the other side is full)."""

    def __init__(self, sock: socket.socket, payload: bytes):
        super().__init__(daemon=True)
        self.sock, self.payload = sock, payload
        self.error: Exception | None = None

    def run(self) -> None:
        try:
            self.sock.settimeout(60)
            self.sock.sendall(self.payload)
        except Exception as e:  # noqa: BLE001 - reported by the test
            self.error = e


class Scene:
    """One TCP allocation with a connection in every state RFC 6062 has (see the module's
    docstring), and the checks that it all goes on afterwards, in whichever process."""

    def __init__(self, server: RelayServer):
        self.server = server
        self.sockets: list[socket.socket] = []
        self.echoes = [echo_server(), echo_server()]
        self.to_peer = self.to_client = 0
        self.connect_e: dict[str, object] = {}
        self.pushers: list[Pusher] = []

    def close(self) -> None:
        for sock in self.sockets:
            sock.close()
        for echo, thread in self.echoes:
            echo.shutdown()
            echo.server_close()
            thread.join(timeout=5)

    def build(self) -> None:
        client = self.client = TCPRelayClient(self.server.address, timeout=20)
        self.sockets.append(client.sock)
        client.allocate(*self.server.credentials(user="pipes"))
        self.relayed = tuple(client.relayed)
        client.create_permission(("127.0.0.1", 9))

        # A: a pipe to an echo server.
        self.cid_a = connection_id(TCPRelayClient.check(client.connect_peer(self.echoes[0][0].server_address), "Connect"))
        self.pipe_a = bind(client, self.cid_a)
        self.sockets.append(self.pipe_a)
        self.echo(self.pipe_a, b"before the upgrade")

        # B: a pipe whose two ends stop reading, so relayd holds bytes both ways.
        sink = socket.socket()
        sink.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sink.bind(("127.0.0.1", 0))
        sink.listen(1)
        self.sockets.append(sink)
        cid_b = connection_id(TCPRelayClient.check(client.connect_peer(sink.getsockname()), "Connect"))
        self.peer_b, _ = sink.accept()
        self.sockets.append(self.peer_b)
        # Small receive buffers, set before the handshake: the kernel then holds little, and
        # relayd's own buffers fill.
        self.pipe_b = bind(client, cid_b, rcvbuf=4096)
        self.sockets.append(self.pipe_b)
        self.up, self.down = os.urandom(HELD), os.urandom(HELD)
        self.pushers = [Pusher(self.pipe_b, self.up), Pusher(self.peer_b, self.down)]
        for pusher in self.pushers:
            pusher.start()

        # C: connected by Connect, not bound yet.
        self.cid_c = connection_id(TCPRelayClient.check(client.connect_peer(self.echoes[1][0].server_address), "Connect"))

        # D: a peer that connected in and was announced, not bound yet.
        self.peer_d = socket.create_connection(self.relayed, timeout=WAIT)
        self.sockets.append(self.peer_d)
        attempt = client.wait_connection_attempt(WAIT)
        assert attempt is not None, "no ConnectionAttempt"
        self.cid_d = attempt[0]

        # E: a Connect whose connect is in progress: the peer's accept queue is full, so its SYN
        # is dropped until the queue drains.
        self.crowded = socket.socket()
        self.crowded.bind(("127.0.0.1", 0))
        self.crowded.listen(0)
        self.sockets.append(self.crowded)
        for _ in range(2):
            filler = socket.socket()
            filler.setblocking(False)
            filler.connect_ex(self.crowded.getsockname())
            self.sockets.append(filler)
        time.sleep(0.2)

        def connect_crowded() -> None:
            try:
                self.connect_e["response"] = client.connect_peer(self.crowded.getsockname())
            except Exception as e:  # noqa: BLE001 - reported by the test
                self.connect_e["error"] = e

        self.connecting = threading.Thread(target=connect_crowded, daemon=True)
        self.connecting.start()
        time.sleep(1.0)  # B's buffers fill; E's connect is under way
        assert self.connecting.is_alive(), self.connect_e

    def echo(self, sock: socket.socket, payload: bytes) -> None:
        sock.sendall(payload)
        assert recv_exactly(sock, len(payload), timeout=WAIT) == payload
        self.to_peer += len(payload)
        self.to_client += len(payload)

    def check_all_goes_on(self) -> None:
        client = self.client
        # E: the queue drains, the SYN gets through, and the Connect is answered. The fillers and
        # relayd's connection come in whatever order their SYNs got through: relayd's is the one
        # from the relayed address.
        self.crowded.settimeout(1.0)
        peer_e = None
        deadline = time.monotonic() + 20
        while peer_e is None and time.monotonic() < deadline:
            try:
                conn, address = self.crowded.accept()
            except (socket.timeout, TimeoutError):
                continue
            self.sockets.append(conn)
            if address == self.relayed:
                peer_e = conn
        assert peer_e is not None, "relayd's connect never reached the peer"
        self.connecting.join(timeout=20)
        assert "response" in self.connect_e, self.connect_e
        cid_e = connection_id(TCPRelayClient.check(self.connect_e["response"], "Connect"))
        pipe_e = bind(client, cid_e)
        self.sockets.append(pipe_e)
        pipe_e.sendall(b"connected after the upgrade")
        assert recv_exactly(peer_e, 27, timeout=WAIT) == b"connected after the upgrade"
        self.to_peer += 27

        # B: both ends read now, and every byte arrives, in order.
        got_up = recv_exactly(self.peer_b, HELD, timeout=60)
        got_down = recv_exactly(self.pipe_b, HELD, timeout=60)
        for pusher in self.pushers:
            pusher.join(timeout=10)
            assert pusher.error is None, pusher.error
        assert len(got_up) == HELD and got_up == self.up, f"{len(got_up)} of {HELD} bytes to the peer"
        assert len(got_down) == HELD and got_down == self.down, f"{len(got_down)} of {HELD} bytes to the client"
        self.to_peer += HELD
        self.to_client += HELD

        # A goes on.
        self.echo(self.pipe_a, b"after")

        # C and D bind.
        pipe_c = bind(client, self.cid_c)
        self.sockets.append(pipe_c)
        self.echo(pipe_c, b"bound after the upgrade")
        pipe_d = bind(client, self.cid_d)
        self.sockets.append(pipe_d)
        self.peer_d.sendall(b"from the peer")
        assert recv_exactly(pipe_d, 13, timeout=WAIT) == b"from the peer"
        self.to_client += 13

        # A new peer connecting in is announced.
        self.sockets.append(socket.create_connection(self.relayed, timeout=WAIT))
        assert client.wait_connection_attempt(WAIT) is not None, "no ConnectionAttempt after the upgrade"

        nonce = client.nonce
        client.refresh(600)
        assert client.nonce == nonce
        assert tuple(client.relayed) == self.relayed

        # Every byte the pipes carried, before and after the upgrade, counted once.
        result = self.server.http(
            "GET", "/api/v1/allocations?user=pipes", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
        assert result.status == 200, result.body
        [record] = json.loads(result.body)["allocations"]
        traffic = record["traffic"]
        assert (traffic["bytes_to_peer"], traffic["bytes_to_client"]) == (self.to_peer, self.to_client), traffic


def start(tmp_path) -> RelayServer:
    server = RelayServer(
        "relayd", tmp_path / "relayd", streams=True,
        extra_args=["--relay-threads=2", "--drain-timeout=60", *ADMIN])
    server.start()
    return server


def test_rfc6062_connections_move_to_the_heir(tmp_path):
    server = start(tmp_path)
    scene = Scene(server)
    heir = None
    try:
        scene.build()
        resp = upgrade_through_api(server)
        assert resp.status == 200, resp.body
        answer = json.loads(resp.body)
        assert answer["allocations"] == 1, answer
        heir = answer["pid"]
        # Everything moved: the old process has nothing to drain.
        assert server.proc.wait(timeout=10) == 0, server.log_tail()
        scene.check_all_goes_on()
    finally:
        scene.close()
        problems = stop_both(server, heir)
    assert not problems, problems


def test_a_failed_upgrade_leaves_rfc6062_connections_serving(tmp_path):
    """The heir refuses the configuration after everything paused: the old process takes it all
    up again, and every connection goes on there as it would have in the heir."""
    server = start(tmp_path)
    scene = Scene(server)
    try:
        scene.build()
        conf = server.workdir / "relayd.conf"
        good = conf.read_text()
        # Listeners are restart-only: an heir whose configuration adds one gives up once it has
        # received everything, and the old process resumes.
        conf.write_text(good + f"alt-listening-port={free_port()}\n")
        resp = upgrade_through_api(server)
        assert resp.status == 409, resp.body
        assert "keeps the listeners" in server.log_text(), server.log_tail()
        conf.write_text(good)
        scene.check_all_goes_on()
        assert server.is_running()
    finally:
        scene.close()
        problems = server.stop()
    assert not problems, problems


def test_a_tls_pipe_stays_with_the_old_process_and_goes_on(tmp_path):
    """A TCP allocation whose control connection is plain TCP moves, but its pipe over a TLS data
    connection cannot (OpenSSL cannot move a session): it relays on in the old process, which
    drains it and exits once it closes, while the allocation serves on in the heir."""
    import copy

    server = start(tmp_path)
    heir = None
    echo, thread = echo_server()
    sockets: list[socket.socket] = []
    try:
        client = TCPRelayClient(server.address, timeout=20)
        sockets.append(client.sock)
        client.allocate(*server.credentials(user="tls-pipe"))
        relayed = tuple(client.relayed)
        client.create_permission(("127.0.0.1", 9))
        cid = connection_id(TCPRelayClient.check(client.connect_peer(echo.server_address), "Connect"))
        over_tls = copy.copy(client)
        over_tls.server, over_tls.tls = server.tls_address, True
        pipe = bind(over_tls, cid)
        sockets.append(pipe)
        echoes(pipe, b"before the upgrade")

        resp = upgrade_through_api(server)
        assert resp.status == 200, resp.body
        heir = json.loads(resp.body)["pid"]
        # The TLS pipe keeps the old process alive, and relays on there.
        time.sleep(1)
        assert server.proc.poll() is None, "the old process left with a pipe still open"
        echoes(pipe, b"after the upgrade, in the old process")
        # The allocation is the heir's: a Refresh keeps its relayed address, and a peer
        # connecting in is announced by the heir.
        client.refresh(600)
        assert tuple(client.relayed) == relayed
        sockets.append(socket.create_connection(relayed, timeout=WAIT))
        assert client.wait_connection_attempt(WAIT) is not None
        # The pipe closes: the old process has nothing left and exits.
        pipe.close()
        assert server.proc.wait(timeout=15) == 0, server.log_tail()
    finally:
        for sock in sockets:
            sock.close()
        echo.shutdown()
        echo.server_close()
        thread.join(timeout=5)
        problems = stop_both(server, heir)
    assert not problems, problems
