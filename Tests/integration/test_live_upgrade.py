"""A live upgrade hands the running relayd's sockets and UDP allocations to a new process
(docs/live-upgrade.md).

relayd runs with two loops, UDP and TLS listeners, a pid file. UDP clients allocate, each with a
channel to its own peer, and relay; one client keeps sending through the upgrade, and every one
of its datagrams must reach its peer. SIGUSR2 (or `POST /api/v1/upgrade`) starts the binary
again: the heir serves every UDP allocation on the same relayed address, accepts a Refresh under
the nonce issued before, takes new clients, owns the API port and the pid file, keeps the
admin API's blocks, and counts on from the old process's counters. A TLS session resumes with
the heir under a ticket the old process issued (TLS clients' connections:
test_live_upgrade_tls.py). A failed upgrade leaves the running relayd serving as before. In a cluster the old process goes on
under a name of its own while it drains, so the quota share of what it kept still counts.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import socket
import ssl
import struct
import threading
import time

import pytest

from cluster_support import ClusterNode, cluster_status, node_names
from conftest import RelayServer, free_port, pid_alive, server_kind
from floods import metric
from lifecycle import allocate_with_channel, error_code_of_allocate, eventually, round_trip, wait_for_log
from streamclient import StreamTurnClient
from redis_support import RedisServer
from stunclient import TurnClient, encode_channel_data, recv_from, rest_credentials, udp_socket

pytestmark = pytest.mark.skipif(server_kind() != "relayd", reason="relayd's live upgrade")

CLIENTS = 100
ADMIN_TOKEN = "live-upgrade-admin-token-0123456789"
ADMIN = [f"--api-key=upgrader:{ADMIN_TOKEN}:admin"]


def binding_request() -> bytes:
    """A STUN Binding request (RFC 8489 §5) with a random transaction id."""
    return struct.pack("!HHI", 0x0001, 0, 0x2112A442) + os.urandom(12)


def upgrade_through_api(server: RelayServer):
    return server.http(
        "POST", "/api/v1/upgrade", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=90)


def stop_pid(pid: int) -> None:
    """SIGTERM, then SIGKILL after 10 s; the heir is not this test's child, so poll /proc."""
    if not pid_alive(pid):
        return
    os.kill(pid, signal.SIGTERM)
    if not eventually(lambda: not pid_alive(pid), timeout=10):
        os.kill(pid, signal.SIGKILL)
        eventually(lambda: not pid_alive(pid), timeout=5)


def logged_heir(server: RelayServer) -> int | None:
    """The heir's pid if the log says an upgrade succeeded (for cleanup after a failed test)."""
    m = re.search(r"pid (\d+) serves now", server.log_text())
    return int(m.group(1)) if m else None


def stop_both(server: RelayServer, heir: int | None) -> list[str]:
    """Stops the heir (by the pid known or logged) and the old process if it still runs."""
    heir = heir or logged_heir(server)
    if heir is not None:
        stop_pid(heir)
    return server.stop() if server.proc and server.proc.poll() is None else []


def heir_pid(server: RelayServer) -> int:
    line = wait_for_log(server, "upgrade_succeeded")
    m = re.search(r"pid (\d+) serves now", line)
    assert m, line
    return int(m.group(1))


class Sender(threading.Thread):
    """Sends numbered ChannelData every 5 ms until stopped; the peer's socket is read after."""

    def __init__(self, client, channel: int):
        super().__init__(daemon=True)
        self.client, self.channel = client, channel
        self.sent = 0
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.is_set():
            self.client.send_channel_data(self.channel, b"media %06d" % self.sent)
            self.sent += 1
            time.sleep(0.005)

    def lost(self, peer) -> int:
        """Stops sending; how many of the datagrams sent never reached `peer`."""
        self.halt.set()
        self.join()
        received = set()
        while (got := recv_from(peer, 0.5)) is not None:
            received.add(got[0])
        return self.sent - len(received)


def test_udp_calls_go_on_through_sigusr2(tmp_path):
    pidfile = tmp_path / "relayd.pid"
    server = RelayServer(
        "relayd", tmp_path / "relayd", streams=True,
        extra_args=["--relay-threads=2", f"--pidfile={pidfile}", *ADMIN])
    server.start()
    pairs = []
    heir = None
    try:
        for i in range(CLIENTS):
            client, peer = allocate_with_channel(server, server.secret, user=f"up{i}", channel=0x4000 + i)
            round_trip(client, peer, 0x4000 + i, b"before %d" % i)
            pairs.append((client, peer))
        old = server.proc.pid
        assert pidfile.read_text().strip() == str(old)
        admin = {"Authorization": f"Bearer {ADMIN_TOKEN}", "Content-Type": "application/json"}
        resp = server.http("POST", "/api/v1/users/mallory/block", headers=admin, body=b'{"seconds": 600}')
        assert resp.status == 200, resp.body
        assert eventually(lambda: metric(server, "relayd_allocations_created_total") == CLIENTS)
        media_client, media_peer = pairs[0]
        # The peer's buffer must hold every datagram of the run (about 600).
        media_peer.setsockopt(__import__("socket").SOL_SOCKET, __import__("socket").SO_RCVBUF, 1 << 20)
        sender = Sender(media_client, 0x4000)
        sender.start()
        time.sleep(0.5)
        server.proc.send_signal(signal.SIGUSR2)
        heir = heir_pid(server)
        wait_for_log(server, "upgrade_took_over")
        time.sleep(0.5)
        lost = sender.lost(media_peer)
        print(f"live upgrade: {sender.sent} datagrams sent through the upgrade, {lost} lost")
        assert lost == 0, f"{lost} of {sender.sent} datagrams were lost in the upgrade"

        # No stream client: the old process has nothing to drain and exits.
        assert server.proc.wait(timeout=10) == 0, server.log_tail()
        assert pid_alive(heir)
        assert eventually(lambda: pidfile.exists() and pidfile.read_text().strip() == str(heir)), \
            "the pid file does not name the heir"
        assert server.log_text().count("allocation_restored") == CLIENTS, server.log_tail()
        assert "source=upgrade" in server.log_text() or '"source":"upgrade"' in server.log_text()
        wait_for_log(server, "upgrade_predecessor_exited")

        for i, (client, peer) in enumerate(pairs):
            round_trip(client, peer, 0x4000 + i, b"after %d" % i)
            nonce = client.nonce
            client.refresh(600)
            assert client.nonce == nonce, "the nonce issued before the upgrade was refused (438)"
        fresh, fresh_peer = allocate_with_channel(server, server.secret, user="fresh")
        round_trip(fresh, fresh_peer, 0x4000, b"new work")
        # The heir's counters go on from the old process's: the allocations it took over are
        # not counted again, the fresh one is.
        assert eventually(lambda: metric(server, "relayd_allocations_created_total") == CLIENTS + 1), \
            metric(server, "relayd_allocations_created_total")
        relayed = metric(server, "relayd_relayed_packets_total", direction="client_to_peer")
        assert relayed >= 2 * CLIENTS + sender.sent, relayed
        fresh.close()
        fresh_peer.close()
        # The API port is the heir's now, and the block set before the upgrade holds there.
        resp = server.http("GET", "/readyz")
        assert resp.status == 200
        blocks = json.loads(server.http("GET", "/api/v1/blocks", headers=admin).body)["blocks"]
        assert [b["user"] for b in blocks] == ["mallory"], blocks
        assert error_code_of_allocate(server, server.secret, user="mallory") == 403
    finally:
        for client, peer in pairs:
            peer.close()
            client.close()
        problems = stop_both(server, heir)
    assert not problems, problems
    assert "unused_sockets=0" in server.log_text() or '"unused_sockets":"0"' in server.log_text()


def test_a_failed_upgrade_leaves_relayd_serving(tmp_path):
    server = RelayServer("relayd", tmp_path / "relayd", extra_args=["--relay-threads=2", *ADMIN])
    server.start()
    client = peer = None
    try:
        client, peer = allocate_with_channel(server, server.secret, user="stays")
        round_trip(client, peer, 0x4000, b"before")
        conf = server.workdir / "relayd.conf"
        good = conf.read_text()
        # The heir reads the configuration again: one it refuses makes it exit.
        conf.write_text(good + "listening-port=not-a-port\n")
        resp = upgrade_through_api(server)
        assert resp.status == 409, resp.body
        assert json.loads(resp.body)["error"] == "upgrade_failed"
        wait_for_log(server, "upgrade_failed")
        # Listeners are restart-only: an heir whose configuration adds one is refused.
        conf.write_text(good + f"alt-listening-port={free_port()}\n")
        resp = upgrade_through_api(server)
        assert resp.status == 409, resp.body
        assert "keeps the listeners" in server.log_text(), server.log_tail()
        conf.write_text(good)
        round_trip(client, peer, 0x4000, b"after")
        nonce = client.nonce
        client.refresh(600)
        assert client.nonce == nonce
        assert server.is_running()
    finally:
        if client is not None:
            client.close()
            peer.close()
        problems = server.stop()
    assert not problems, problems


def client_context() -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def resume(server: RelayServer, context: ssl.SSLContext, session=None):
    """A TLS connection to the TURN port that answers a Binding; (session, reused)."""
    with socket.create_connection(server.tls_address, timeout=5) as raw:
        with context.wrap_socket(raw, session=session) as tls:
            tls.sendall(binding_request())
            assert len(tls.recv(2048)) >= 20, "no Binding answer over TLS"
            # The answer came after the session tickets: the session is resumable now.
            return tls.session, tls.session_reused


def test_tls_sessions_resume_with_the_heir(tmp_path):
    server = RelayServer("relayd", tmp_path / "relayd", streams=True, extra_args=["--relay-threads=2"])
    server.start()
    heir = None
    try:
        context = client_context()
        session, reused = resume(server, context)
        assert not reused
        assert resume(server, context, session)[1], "no resumption even without an upgrade"
        server.proc.send_signal(signal.SIGUSR2)
        heir = heir_pid(server)
        wait_for_log(server, "upgrade_took_over")
        assert server.proc.wait(timeout=10) == 0, server.log_tail()
        _, reused = resume(server, context, session)
        assert reused, "the heir did not resume a session the old process issued a ticket for"
        # A SIGHUP draws new ticket keys with the new context: the old ticket is refused.
        os.kill(heir, signal.SIGHUP)
        wait_for_log(server, "tls_reloaded")
        assert not resume(server, context, session)[1]
    finally:
        problems = stop_both(server, heir)
    assert not problems, problems


def test_cluster_counts_what_drains_in_the_old_process(tmp_path):
    """The old process goes on in the cluster under a name of its own while it drains: the
    quota share of the TLS allocation it kept is counted beside the heir's."""
    redis = RedisServer(tmp_path / "redis")
    redis.start()
    node = ClusterNode(
        tmp_path / "n1", "n1", redis, secrets.token_hex(16), streams=True,
        extra=["--user-quota=2", "--relay-threads=2", "--drain-timeout=60"])
    node.start()
    heir = None
    clients = []
    try:
        assert eventually(lambda: node_names(redis) == {"n1"}), cluster_status(redis)
        tls = StreamTurnClient(node.tls_address, tls=True)
        clients.append(tls)
        tls.allocate(*node.credentials(user="erin"))
        udp = TurnClient(node.address)
        clients.append(udp)
        udp.allocate(*rest_credentials(node.secret, "erin"))
        assert error_code_of_allocate(node, node.secret, user="erin") == 486
        old = node.proc.pid
        node.proc.send_signal(signal.SIGUSR2)
        heir = heir_pid(node)
        wait_for_log(node, "upgrade_took_over")
        assert eventually(lambda: node_names(redis) == {"n1", f"n1/upgraded-{old}"}), cluster_status(redis)
        # The heir holds the UDP allocation, the old process the TLS one: erin is at her quota.
        assert error_code_of_allocate(node, node.secret, user="erin") == 486
        tls.close()
        clients.remove(tls)
        assert node.proc.wait(timeout=10) == 0, node.log_tail()
        assert eventually(lambda: node_names(redis) == {"n1"}), cluster_status(redis)
        third = TurnClient(node.address)
        clients.append(third)
        third.allocate(*rest_credentials(node.secret, "erin"))
        udp.refresh(600)
    finally:
        for client in clients:
            client.close()
        problems = stop_both(node, heir)
        redis.stop()
    assert not problems, problems


TCP_CLIENTS = 50


def test_tcp_clients_move_to_the_heir(tmp_path):
    """Plain TCP clients' connections go to the heir with their allocations: the old process
    has nothing left to drain and exits, and every client relays on through the same
    connection and relayed address. A frame half sent before the upgrade is completed after it,
    and a connection without an allocation moves too."""
    server = RelayServer(
        "relayd", tmp_path / "relayd", streams=True,
        extra_args=["--relay-threads=2", "--drain-timeout=60", *ADMIN])
    server.start()
    heir = None
    pairs = []
    bare = None
    try:
        for i in range(TCP_CLIENTS):
            client = StreamTurnClient(server.address)
            client.allocate(*server.credentials(user=f"tcp{i}"))
            peer = udp_socket()
            client.channel_bind(0x4000 + i, peer.getsockname())
            round_trip(client, peer, 0x4000 + i, b"before %d" % i)
            pairs.append((client, peer))
        bare = StreamTurnClient(server.address)
        bare.send_raw(binding_request())
        assert bare.recv_raw(3.0) is not None
        relayed = [tuple(client.relayed) for client, _ in pairs]
        # Half a ChannelData frame: the old process holds it when the upgrade comes.
        split_client, split_peer = pairs[0]
        frame = encode_channel_data(0x4000, b"cut in two by the upgrade", pad=True)
        split_client.send_raw(frame[:9])
        time.sleep(0.3)

        resp = upgrade_through_api(server)
        assert resp.status == 200, resp.body
        answer = json.loads(resp.body)
        assert answer["allocations"] == TCP_CLIENTS, answer
        heir = answer["pid"]
        # Nothing stayed: the old process has nothing to drain.
        assert server.proc.wait(timeout=10) == 0, server.log_tail()
        restored = sum(int(n) for n in re.findall(r", (\d+) TCP and \d+ TLS connections from the live upgrade", server.log_text()))
        assert restored == TCP_CLIENTS + 1, server.log_tail()

        split_client.send_raw(frame[9:])
        got = recv_from(split_peer, 3.0)
        assert got is not None and got[0] == b"cut in two by the upgrade", got
        for i, (client, peer) in enumerate(pairs):
            assert tuple(client.relayed) == relayed[i]
            round_trip(client, peer, 0x4000 + i, b"after %d" % i)
            nonce = client.nonce
            client.refresh(600)
            assert client.nonce == nonce
        bare.send_raw(binding_request())
        assert bare.recv_raw(3.0) is not None, "the connection without an allocation did not move"
        assert metric(server, "relayd_stream_connections_open") == TCP_CLIENTS + 1
    finally:
        for client, peer in pairs:
            peer.close()
            client.close()
        if bare is not None:
            bare.close()
        problems = stop_both(server, heir)
    assert not problems, problems


MOBILE_CLIENTS = 8


def test_moved_mobile_clients_lose_nothing(tmp_path):
    """A mobile client that moved (RFC 8016) is read through a socket connected to it: the
    socket goes to the heir with its allocation, so what the client sends through the upgrade
    arrives, and its ticket moves it again afterwards."""
    from test_mobility import CHANNEL, allocate_mobile, move

    server = RelayServer("relayd", tmp_path / "relayd", extra_args=["--relay-threads=2"])
    server.start()
    heir = None
    clients = []
    try:
        for i in range(MOBILE_CLIENTS):
            peer = udp_socket()
            client = TurnClient(server.address)
            ticket = allocate_mobile(client, server, f"phone{i}", peer)
            ticket = move(client, ticket, f"127.0.0.{2 + i % 4}")
            round_trip(client, peer, CHANNEL, b"moved %d" % i)
            clients.append((client, peer, ticket))
        senders = []
        for client, peer, _ in clients:
            peer.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
            senders.append(Sender(client, CHANNEL))
        for sender in senders:
            sender.start()
        time.sleep(0.5)
        server.proc.send_signal(signal.SIGUSR2)
        heir = heir_pid(server)
        wait_for_log(server, "upgrade_took_over")
        assert server.proc.wait(timeout=10) == 0, server.log_tail()
        time.sleep(0.3)
        lost = [sender.lost(peer) for sender, (_, peer, _) in zip(senders, clients)]
        print(f"moved mobile clients through a live upgrade: {sum(s.sent for s in senders)} sent, lost {lost}")
        assert lost == [0] * MOBILE_CLIENTS
        assert "steer_failed" not in server.log_text()
        for i, (client, peer, ticket) in enumerate(clients):
            round_trip(client, peer, CHANNEL, b"after %d" % i)
            move(client, ticket, "127.0.0.9")
            round_trip(client, peer, CHANNEL, b"moved again %d" % i)
    finally:
        for client, peer, _ in clients:
            peer.close()
            client.close()
        problems = stop_both(server, heir)
    assert not problems, problems


def challenges_answered(server: RelayServer, count: int) -> int:
    """Sends `count` unauthenticated Allocates from one socket, one at a time; how many got a
    401 (a source past `unauth-rate-limit` gets none, docs/rate-limits.md)."""
    answered = 0
    sock = udp_socket()
    try:
        for _ in range(count):
            request = struct.pack("!HHI", 0x0003, 8, 0x2112A442) + os.urandom(12) + struct.pack("!HHB3x", 0x0019, 4, 17)
            sock.sendto(request, server.address)
            sock.settimeout(0.3)
            try:
                sock.recvfrom(2048)
                answered += 1
            except (socket.timeout, TimeoutError):
                pass
    finally:
        sock.close()
    return answered


def test_per_source_limiters_go_on_in_the_heir(tmp_path):
    """A source that spent its challenge burst in the old process has not got it back in the
    heir: the heir's bucket goes on from the old one and refills at the rate, 1 a second."""
    burst = 20
    server = RelayServer(
        "relayd", tmp_path / "relayd",
        extra_args=["--relay-threads=2", "--unauth-rate-limit=1", f"--unauth-rate-burst={burst}", *ADMIN])
    server.start()
    heir = None
    try:
        spent = time.monotonic()
        assert challenges_answered(server, burst + 5) <= burst + 2
        resp = upgrade_through_api(server)
        assert resp.status == 200, resp.body
        heir = json.loads(resp.body)["pid"]
        assert server.proc.wait(timeout=10) == 0, server.log_tail()
        # A full bucket would answer all of them; a carried one what the rate refilled since it
        # was spent (1 a second, and the asking takes seconds).
        answered = challenges_answered(server, burst)
        refilled = time.monotonic() - spent
        assert answered <= refilled + 2, (answered, refilled)
        assert answered < burst
    finally:
        problems = stop_both(server, heir)
    assert not problems, problems
