"""Exact usage accounting (docs/usage.md).

Known traffic for three users of two tenants (UDP through the default tenant's shared address,
an RFC 6062 pipe, and TURN over TLS) must come out of `GET /api/v1/usage`, the usage journal in
`state-dir` and the `allocation_deleted` session records exactly as the test's own generator
counted it; allocations that never relayed a byte are counted as such; a tenant's admin key sees
its own usage only; the figures survive a restart (the journal).
"""

from __future__ import annotations

import json
import secrets
import socket
import threading
import time

import pytest

from conftest import RelayServer, running, server_kind
from lifecycle import eventually
from streamclient import StreamTurnClient
from stunclient import TurnClient
from tcprelay import TCPRelayClient, connection_id
from test_tcp_relay import EchoHandler, EchoServer, echo_through

pytestmark = pytest.mark.skipif(server_kind() != "relayd", reason="relayd's usage accounting")

OPERATOR = secrets.token_hex(20)


class Tenant:
    def __init__(self, name: str, directory):
        self.name = name
        self.secret = secrets.token_hex(16)
        self.admin = secrets.token_hex(20)
        self.token = secrets.token_hex(20)
        (directory / f"{name}.conf").write_text(
            f"static-auth-secret={self.secret}\napi-key={name}-app:{self.token}\napi-key={name}-ops:{self.admin}:admin\n")
        self.file = directory / f"{name}.conf"

    def credentials(self, server: RelayServer, user: str) -> tuple[str, str]:
        resp = server.http("GET", f"/api/v1/credentials?user={user}", headers={"Authorization": f"Bearer {self.token}"})
        assert resp.status == 200, resp
        return resp.json()["username"], resp.json()["password"]


def usage(server: RelayServer, token: str = OPERATOR, **query) -> dict:
    q = "&".join(f"{k}={v}" for k, v in query.items())
    resp = server.http("GET", "/api/v1/usage" + (f"?{q}" if q else ""), headers={"Authorization": f"Bearer {token}"})
    assert resp.status == 200, resp
    return resp.json()


def by_user(body: dict) -> dict[tuple[str, str], dict]:
    """Rows summed over hours, by (tenant, user)."""
    out: dict[tuple[str, str], dict] = {}
    for row in body["rows"]:
        key = (row["tenant"], row["user"])
        acc = out.setdefault(key, {})
        for field, value in row.items():
            if field not in ("hour", "tenant", "user"):
                acc[field] = acc.get(field, 0) + value
    return out


def udp_echo_peer() -> tuple[socket.socket, threading.Event]:
    """A UDP peer that echoes every datagram until stopped."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(0.1)
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            try:
                data, addr = sock.recvfrom(65536)
            except (socket.timeout, TimeoutError):
                continue
            except OSError:
                return
            sock.sendto(data, addr)

    threading.Thread(target=serve, daemon=True).start()
    return sock, stop


@pytest.fixture
def setup(tmp_path):
    voice = Tenant("voice", tmp_path)
    chat = Tenant("chat", tmp_path)
    server = RelayServer(
        "relayd", tmp_path / "relayd", streams=True,
        extra_args=[f"--state-dir={tmp_path / 'state'}", f"--api-key=ops:{OPERATOR}:admin", "--log-format=json",
                    f"--tenant={voice.file}", f"--tenant={chat.file}"])
    (tmp_path / "state").mkdir()
    return server, voice, chat, tmp_path


def exchange_udp(client, peer: tuple[str, int], count: int, size: int) -> int:
    """Sends `count` datagrams of `size` bytes through a channel to the echo peer and waits for
    each echo; returns how many came back."""
    client.create_permission(peer)
    client.channel_bind(0x4001, peer)
    back = 0
    for i in range(count):
        client.send_channel_data(0x4001, bytes([i % 256]) * size)
        got = client.receive(2.0)
        if got is not None and got.kind == "channel":
            back += 1
    return back


def test_usage_equals_what_the_generator_sent_and_received(setup):
    server, voice, chat, tmp_path = setup
    peer, stop = udp_echo_peer()
    echo = EchoServer(("127.0.0.1", 0), EchoHandler)
    echo_thread = threading.Thread(target=echo.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    echo_thread.start()
    try:
        with running(server) as s:
            expected: dict[tuple[str, str], dict] = {}
            # UDP, voice's alice: 40 datagrams of 100 bytes each way.
            with TurnClient(s.address, bind_host="127.0.0.1") as alice:
                alice.allocate(*voice.credentials(s, "alice"))
                back = exchange_udp(alice, peer.getsockname(), 40, 100)
                assert back == 40
                alice.refresh(0)
            expected[("voice", "alice")] = {"packets_to_peer": 40, "bytes_to_peer": 4000,
                                            "packets_to_client": 40, "bytes_to_client": 4000,
                                            "allocations": 1, "unused_allocations": 0}
            # TLS, chat's carol: 25 datagrams of 300 bytes each way.
            tls = StreamTurnClient(s.tls_address, tls=True)
            try:
                tls.allocate(*chat.credentials(s, "carol"))
                assert exchange_udp(tls, peer.getsockname(), 25, 300) == 25
                tls.refresh(0)
            finally:
                tls.close()
            expected[("chat", "carol")] = {"packets_to_peer": 25, "bytes_to_peer": 7500,
                                           "packets_to_client": 25, "bytes_to_client": 7500,
                                           "allocations": 1, "unused_allocations": 0}
            # DTLS, chat's dina: 15 datagrams of 120 bytes each way.
            from dtlsclient import DTLSTurnClient
            dtls = DTLSTurnClient(s.tls_address)
            try:
                dtls.handshake()
                dtls.allocate(*chat.credentials(s, "dina"))
                assert exchange_udp(dtls, peer.getsockname(), 15, 120) == 15
                dtls.refresh(0)
            finally:
                dtls.close()
            expected[("chat", "dina")] = {"packets_to_peer": 15, "bytes_to_peer": 1800,
                                          "packets_to_client": 15, "bytes_to_client": 1800,
                                          "allocations": 1, "unused_allocations": 0}
            # An RFC 6062 pipe, voice's bob: 200,000 bytes each way through a TCP echo server.
            control = TCPRelayClient(s.address)
            try:
                control.allocate(*voice.credentials(s, "bob"))
                control.create_permission(echo.server_address)
                cid = connection_id(TCPRelayClient.check(control.connect_peer(echo.server_address), "Connect"))
                data, bound, rest = control.open_data_connection(cid)
                TCPRelayClient.check(bound, "ConnectionBind")
                payload = secrets.token_bytes(200_000)
                assert echo_through(data, payload, timeout=20) == payload
                data.close()
                control.refresh(0)
            finally:
                control.close()
            expected[("voice", "bob")] = {"bytes_to_peer": 200_000, "bytes_to_client": 200_000,
                                          "allocations": 1, "unused_allocations": 0}
            # Two allocations that never relay a byte: the default tenant's dave.
            for _ in range(2):
                with TurnClient(s.address, bind_host="127.0.0.1") as idle:
                    idle.allocate(*s.credentials("dave"))
                    idle.refresh(0)
            expected[("default", "dave")] = {"bytes_to_peer": 0, "bytes_to_client": 0,
                                             "allocations": 2, "unused_allocations": 2}

            def settled():
                got = by_user(usage(s))
                return all(got.get(k, {}).get(f) == v for k, want in expected.items() for f, v in want.items())
            assert eventually(settled, timeout=5), (by_user(usage(s)), expected)
            got = by_user(usage(s))
            assert set(got) == set(expected), got
            assert got[("voice", "alice")]["allocation_seconds"] >= 0
            metrics = s.http("GET", "/metrics").body.decode()
            assert 'relayd_tenant_relayed_bytes_total{tenant="voice",direction="client_to_peer"} 204000' in metrics
            assert 'relayd_tenant_unused_allocations_total{tenant="default"} 2' in metrics
            # A tenant's admin key sees its own tenant only, and is refused another's.
            mine = by_user(usage(s, voice.admin))
            assert set(mine) == {("voice", "alice"), ("voice", "bob")}, mine
            refused = s.http("GET", "/api/v1/usage?tenant=chat", headers={"Authorization": f"Bearer {voice.admin}"})
            assert refused.status == 403
            # The session records say the same: the allocation_deleted lines, with the tenant.
            records = [json.loads(line) for line in s.log_text().splitlines()
                       if line.startswith("{") and '"allocation_deleted"' in line]
            summed: dict[tuple[str, str], dict] = {}
            for r in records:
                tenant = r.get("tenant", "default")
                user = r["user"].removeprefix(tenant + "/")
                acc = summed.setdefault((tenant, user), {"allocations": 0})
                acc["allocations"] += 1
                for field in ("packets_to_peer", "bytes_to_peer", "packets_to_client", "bytes_to_client"):
                    acc[field] = acc.get(field, 0) + int(r[field])
            for key, want in expected.items():
                for field, value in want.items():
                    if field != "unused_allocations":
                        assert summed[key][field] == value, (key, field, summed[key])
        # The journal holds every record; a restart reads it back.
        journal = (tmp_path / "state" / "usage.jsonl").read_text().splitlines()
        ends = [json.loads(line) for line in journal if '"end"' in line]
        assert sum(int(e["bytes_to_peer"]) for e in ends if e["tenant"] == "voice") == 204_000
        with running(server) as s:
            assert by_user(usage(s)) == got
    finally:
        stop.set()
        peer.close()
        echo.shutdown()
        echo.server_close()


def test_usage_api_refuses_bad_windows_and_keys(setup):
    server, voice, chat, _ = setup
    with running(server) as s:
        bad = s.http("GET", "/api/v1/usage?from=10&to=5", headers={"Authorization": f"Bearer {OPERATOR}"})
        assert bad.status == 400
        wide = s.http("GET", f"/api/v1/usage?from=0&to={40 * 86400}", headers={"Authorization": f"Bearer {OPERATOR}"})
        assert wide.status == 400
        assert s.http("GET", "/api/v1/usage").status == 401
        # A credentials key is no admin key.
        assert s.http("GET", "/api/v1/usage", headers={"Authorization": f"Bearer {voice.token}"}).status == 403
        assert usage(s)["rows"] == []


def test_usage_goes_on_through_a_live_upgrade_without_counting_twice(setup):
    """One allocation relays before and after a live upgrade: one allocation made, not unused,
    and the traffic of both processes in the heir's book (the shared usage journal)."""
    from test_live_upgrade import heir_pid, stop_both
    import signal
    server, voice, _, tmp_path = setup
    peer, stop = udp_echo_peer()
    heir = None
    server.start()
    try:
        with TurnClient(server.address, bind_host="127.0.0.1") as client:
            client.allocate(*voice.credentials(server, "uma"))
            assert exchange_udp(client, peer.getsockname(), 10, 50) == 10
            with TurnClient(server.address, bind_host="127.0.0.1") as idle:
                idle.allocate(*voice.credentials(server, "ivo"))
                server.proc.send_signal(signal.SIGUSR2)
                heir = heir_pid(server)
                # After the upgrade: 15 more each way through the same channel, in the heir.
                back = 0
                for i in range(15):
                    client.send_channel_data(0x4001, b"x" * 50)
                    got = client.receive(2.0)
                    back += got is not None and got.kind == "channel"
                assert back == 15
                client.refresh(0)
                idle.refresh(0)
            want = {"allocations": 1, "unused_allocations": 0, "packets_to_peer": 25, "bytes_to_peer": 1250,
                    "packets_to_client": 25, "bytes_to_client": 1250}
            idle_want = {"allocations": 1, "unused_allocations": 1, "bytes_to_peer": 0}

            def settled():
                got = by_user(usage(server))
                return all(got.get(("voice", "uma"), {}).get(k) == v for k, v in want.items()) and all(
                    got.get(("voice", "ivo"), {}).get(k) == v for k, v in idle_want.items())
            assert eventually(settled, timeout=8), by_user(usage(server))
    finally:
        stop.set()
        peer.close()
        problems = stop_both(server, heir)
    assert not problems, problems


def test_the_redis_stream_holds_every_record_of_a_cluster_node(tmp_path):
    """In a cluster, each record goes to the `relayd:usage` stream with the node's name; the
    stream's sums equal the generator's counts."""
    from cluster_support import ClusterNode
    from redis_support import RedisServer
    redis = RedisServer(tmp_path / "redis")
    redis.start()
    voice = Tenant("voice", tmp_path)
    node = ClusterNode(tmp_path / "node", "billing-n1", redis, "s3cret",
                       extra=[f"--tenant={voice.file}", f"--api-key=ops:{OPERATOR}:admin"])
    peer, stop = udp_echo_peer()
    try:
        node.start()
        assert eventually(lambda: node.metric("relayd_cluster_redis_up") == 1)
        with TurnClient(node.address, bind_host="127.0.0.1") as client:
            client.allocate(*voice.credentials(node, "vic"))
            assert exchange_udp(client, peer.getsockname(), 12, 80) == 12
            client.refresh(0)

        def entries():
            raw = redis.command("XRANGE", "relayd:usage", "-", "+")
            out = []
            for _, fields in raw or []:
                fields = [f.decode() if isinstance(f, bytes) else f for f in fields]
                out.append(dict(zip(fields[::2], fields[1::2])))
            return out
        assert eventually(lambda: any(e.get("kind") == "end" for e in entries()), timeout=5), entries()
        got = entries()
        assert {e["node"] for e in got} == {"billing-n1"}
        assert [e["kind"] for e in got] == ["start", "end"]
        end = got[1]
        assert (end["tenant"], end["user"], end["final"]) == ("voice", "vic", "1")
        assert (int(end["packets_to_peer"]), int(end["bytes_to_peer"])) == (12, 960)
        assert (int(end["packets_to_client"]), int(end["bytes_to_client"])) == (12, 960)
    finally:
        stop.set()
        peer.close()
        problems = node.stop()
        redis.stop()
    assert not problems, problems
