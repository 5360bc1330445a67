"""The admin API and CLI (docs/admin.md): live allocations across loop threads, ending them,
blocking users; `relayd sessions`, `kick`, `block`, `unblock`. Real UDP TURN clients, a real
peer socket, two loop threads."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import threading
import time

import pytest

import stunclient
from conftest import RelayServer, running, server_kind
from stunclient import TurnClient, TurnError

pytestmark = pytest.mark.skipif(server_kind() != "relayd", reason="relayd's own admin API")

ADMIN_TOKEN = "admin-token-for-the-suite-0123456789"
# Enough clients that SO_REUSEPORT spreads them over both loop threads (all on one: 2^-13).
ALICE_CLIENTS = 8
BOB_CLIENTS = 6


def admin_headers(token: str = ADMIN_TOKEN) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def get_json(server: RelayServer, path: str, token: str = ADMIN_TOKEN):
    result = server.http("GET", path, headers=admin_headers(token))
    assert result.status == 200, (path, result.status, result.body)
    return json.loads(result.body)


def metric(server: RelayServer, name: str) -> float:
    text = server.http("GET", "/metrics").body.decode()
    match = re.search(rf"^{re.escape(name)} (\S+)$", text, re.MULTILINE)
    assert match, f"{name} not in /metrics"
    return float(match.group(1))


def wait_metric(server: RelayServer, name: str, expected: float, timeout: float = 5) -> float:
    """The metric once it reads `expected` (loop threads publish their counters every few
    hundred milliseconds), or its last value after `timeout`."""
    deadline = time.monotonic() + timeout
    value = metric(server, name)
    while value != expected and time.monotonic() < deadline:
        time.sleep(0.1)
        value = metric(server, name)
    return value


def allocate(server: RelayServer, user: str) -> TurnClient:
    client = TurnClient(server.address)
    username, password = server.credentials(user)
    client.allocate(username, password)
    return client


def cli(server: RelayServer, *args: str, token: str = ADMIN_TOKEN) -> subprocess.CompletedProcess:
    return subprocess.run(
        [server.binary, *args, "--api", server.api_url, f"--token={token}"],
        capture_output=True, text=True, timeout=30)


@pytest.fixture
def admin_server(tmp_path):
    server = RelayServer("relayd", tmp_path / "srv", extra_args=[
        "--relay-threads=2", f"--api-key=ops:{ADMIN_TOKEN}:admin"])
    with running(server):
        yield server


class Streamer(threading.Thread):
    """Sends ChannelData to a peer socket at a steady pace and counts what arrives there."""

    def __init__(self, client: TurnClient, peer: socket.socket, channel: int, count: int):
        super().__init__(daemon=True)
        self.client, self.peer, self.channel, self.count = client, peer, channel, count
        self.received = 0

    def run(self) -> None:
        reader = threading.Thread(target=self.read, daemon=True)
        reader.start()
        for i in range(self.count):
            self.client.send_channel_data(self.channel, b"x" * 100 + i.to_bytes(4, "big"))
            time.sleep(0.001)
        reader.join(timeout=5)

    def read(self) -> None:
        self.peer.settimeout(2)
        try:
            while self.received < self.count:
                self.peer.recv(2048)
                self.received += 1
        except socket.timeout:
            pass


def test_list_filter_page_and_scopes(admin_server):
    server = admin_server
    peer = stunclient.udp_socket()
    clients = [allocate(server, "alice") for _ in range(ALICE_CLIENTS)]
    clients += [allocate(server, "bob") for _ in range(BOB_CLIENTS)]
    try:
        first = clients[0]
        first.create_permission(peer.getsockname())
        first.channel_bind(0x4000, peer.getsockname())
        for i in range(5):
            first.send_channel_data(0x4000, b"hello" + bytes([i]))
            peer.recv(2048)

        listing = get_json(server, "/api/v1/allocations")
        assert listing["total"] == ALICE_CLIENTS + BOB_CLIENTS == listing["count"]
        assert listing["next_cursor"] is None
        records = listing["allocations"]
        # Held by both loop threads, and listed from both.
        assert {r["thread"] for r in records} == {0, 1}
        by_client = {r["client"]: r for r in records}
        mine = by_client[f"127.0.0.1:{first.local_address[1]}"]
        assert mine["user"] == "alice" and mine["transport"] == "udp"
        assert mine["relayed"] == [f"{first.relayed[0]}:{first.relayed[1]}"]
        assert mine["permissions"][0]["peer"] == "127.0.0.1"
        assert mine["channels"][0] == {"number": 0x4000, "peer": f"127.0.0.1:{peer.getsockname()[1]}",
                                       "remaining_seconds": mine["channels"][0]["remaining_seconds"]}
        assert mine["traffic"]["packets_to_peer"] == 5 and mine["traffic"]["bytes_to_peer"] == 30
        assert 0 < mine["remaining_seconds"] <= 600 and mine["age_seconds"] >= 0
        one = get_json(server, f"/api/v1/allocations/{mine['session']}")
        assert one["session"] == mine["session"] and one["client"] == mine["client"]

        bobs = get_json(server, "/api/v1/allocations?user=bob")
        assert bobs["total"] == BOB_CLIENTS and {r["user"] for r in bobs["allocations"]} == {"bob"}

        # Pages of 5 in session order, each session once.
        seen, cursor = [], None
        for _ in range(10):
            page = get_json(server, "/api/v1/allocations?limit=5" + (f"&cursor={cursor}" if cursor else ""))
            assert page["count"] <= 5
            seen += [r["session"] for r in page["allocations"]]
            cursor = page["next_cursor"]
            if cursor is None:
                break
        else:
            pytest.fail("the cursor did not reach the end in 10 pages of 5")
        assert seen == sorted(r["session"] for r in records)

        # No key: 401; the credentials-only key: 403; a wrong token: 401; a bad limit: 400.
        assert server.http("GET", "/api/v1/allocations").status == 401
        assert server.http("GET", "/api/v1/allocations", headers=admin_headers(server.api_token)).status == 403
        assert server.http("DELETE", "/api/v1/allocations?user=bob",
                           headers=admin_headers(server.api_token)).status == 403
        assert server.http("GET", "/api/v1/allocations", headers=admin_headers("wrong")).status == 401
        assert server.http("GET", "/api/v1/allocations?limit=0", headers=admin_headers()).status == 400
        assert server.http("GET", "/api/v1/allocations/0123456789abcdef", headers=admin_headers()).status == 404
        assert server.http("PUT", "/api/v1/allocations", headers=admin_headers()).status == 405
        # The admin key mints credentials too.
        assert server.http("GET", "/api/v1/credentials?user=x", headers=admin_headers()).status == 200
        assert get_json(server, "/api/v1/allocations")["total"] == ALICE_CLIENTS + BOB_CLIENTS
    finally:
        for c in clients:
            c.close()
        peer.close()


def test_kill_by_user_and_session_under_load_leaves_others_alone(admin_server):
    server = admin_server
    peer = stunclient.udp_socket()
    alices = [allocate(server, "alice") for _ in range(ALICE_CLIENTS)]
    bobs = [allocate(server, "bob") for _ in range(BOB_CLIENTS)]
    try:
        bob = bobs[0]
        bob.create_permission(peer.getsockname())
        bob.channel_bind(0x4001, peer.getsockname())
        streamer = Streamer(bob, peer, 0x4001, 1500)
        streamer.start()
        time.sleep(0.3)
        # Every alice, across both loop threads, while bob streams.
        result = server.http("DELETE", "/api/v1/allocations?user=alice", headers=admin_headers())
        assert result.status == 200 and json.loads(result.body) == {"terminated": ALICE_CLIENTS}
        streamer.join(timeout=20)
        assert streamer.received == 1500, "bob lost packets while alice's allocations ended"
        for client in alices:
            with pytest.raises(TurnError) as refused:
                client.refresh(600)
            assert refused.value.code == 437
        assert get_json(server, "/api/v1/allocations?user=alice")["total"] == 0

        # One of bob's by session id; the rest stay.
        victim = bobs[1]
        records = get_json(server, "/api/v1/allocations?user=bob")["allocations"]
        session = next(r["session"] for r in records if r["client"] == f"127.0.0.1:{victim.local_address[1]}")
        result = server.http("DELETE", f"/api/v1/allocations/{session}", headers=admin_headers())
        assert result.status == 200 and json.loads(result.body) == {"terminated": 1}
        assert server.http("DELETE", f"/api/v1/allocations/{session}", headers=admin_headers()).status == 404
        with pytest.raises(TurnError) as refused:
            victim.refresh(600)
        assert refused.value.code == 437
        for client in bobs[:1] + bobs[2:]:
            client.refresh(600)
        assert get_json(server, "/api/v1/allocations?user=bob")["total"] == BOB_CLIENTS - 1
        assert wait_metric(server, "relayd_allocations_terminated_total", ALICE_CLIENTS + 1) == ALICE_CLIENTS + 1
        assert re.search(rf"admin_terminate.*{session}|{session}.*admin_terminate", server.log_text())
    finally:
        for c in alices + bobs:
            c.close()
        peer.close()


def test_block_refuses_allocate_survives_sighup_and_lapses(admin_server):
    server = admin_server
    result = server.http("POST", "/api/v1/users/carol/block", headers=admin_headers(),
                         body=json.dumps({"seconds": 4}).encode())
    assert result.status == 200
    blocked = json.loads(result.body)
    assert blocked["user"] == "carol" and blocked["blocked"] is True
    assert get_json(server, "/api/v1/blocks")["blocks"] == [
        {"user": "carol", "until": blocked["until"], "set_by": "ops", "set_at": blocked["set_at"]}]
    with pytest.raises(TurnError) as refused:
        allocate(server, "carol").close()
    assert refused.value.code == 403
    allocate(server, "dave").close()  # others allocate

    server.proc.send_signal(signal.SIGHUP)
    time.sleep(0.5)
    with pytest.raises(TurnError) as refused:
        allocate(server, "carol").close()
    assert refused.value.code == 403
    assert wait_metric(server, "relayd_blocked_user_allocates_total", 2) == 2

    deadline = blocked["until"] + 1.5
    while time.time() < deadline:
        time.sleep(0.2)
    allocate(server, "carol").close()
    assert get_json(server, "/api/v1/blocks")["blocks"] == []

    # Lifted early; a bad length is refused.
    assert server.http("POST", "/api/v1/users/erin/block?seconds=600", headers=admin_headers()).status == 200
    assert server.http("DELETE", "/api/v1/users/erin/block", headers=admin_headers()).status == 200
    assert server.http("DELETE", "/api/v1/users/erin/block", headers=admin_headers()).status == 404
    allocate(server, "erin").close()
    assert server.http("POST", "/api/v1/users/erin/block?seconds=0", headers=admin_headers()).status == 400
    assert server.http("POST", "/api/v1/users/erin/block", headers=admin_headers(server.api_token)).status == 403


def test_cli_sessions_kick_block(admin_server, tmp_path):
    server = admin_server
    clients = [allocate(server, "frank") for _ in range(3)] + [allocate(server, "grace")]
    try:
        table = cli(server, "sessions")
        assert table.returncode == 0, table.stderr
        lines = table.stdout.splitlines()
        assert lines[0].split()[:3] == ["SESSION", "USER", "TRANSPORT"]
        assert sum(1 for line in lines[1:] if " frank " in line) == 3 and len(lines) == 5

        listed = cli(server, "sessions", "--user", "frank", "--json")
        assert listed.returncode == 0, listed.stderr
        records = json.loads(listed.stdout)
        assert len(records) == 3 and {r["user"] for r in records} == {"frank"}

        kicked = cli(server, "kick", records[0]["session"])
        assert kicked.returncode == 0 and kicked.stdout.strip() == "terminated 1 allocation"
        kicked = cli(server, "kick", "--user", "frank")
        assert kicked.returncode == 0 and kicked.stdout.strip() == "terminated 2 allocations"

        assert cli(server, "block", "frank", "--for", "10m").returncode == 0
        listing = cli(server, "block", "--list")
        assert listing.returncode == 0 and "frank" in listing.stdout
        with pytest.raises(TurnError) as refused:
            allocate(server, "frank").close()
        assert refused.value.code == 403
        assert cli(server, "unblock", "frank").returncode == 0
        allocate(server, "frank").close()

        # The wrong scope is refused with the API's reason, exit status 1.
        denied = cli(server, "sessions", token=server.api_token)
        assert denied.returncode == 1 and "HTTP 403" in denied.stderr and "admin scope" in denied.stderr

        # From a configuration file: the API's address and the admin key come from it.
        conf = tmp_path / "admin.conf"
        conf.write_text(f"use-auth-secret\nstatic-auth-secret={server.secret}\nrealm={server.realm}\n"
                        f"api-listening-ip=127.0.0.1\napi-listening-port={server.api_port}\n"
                        f"api-key=ops:{ADMIN_TOKEN}:admin\n")
        from_conf = subprocess.run([server.binary, "sessions", "-c", str(conf), "--user", "grace"],
                                   capture_output=True, text=True, timeout=30)
        assert from_conf.returncode == 0, from_conf.stderr
        assert len(from_conf.stdout.splitlines()) == 2 and " grace " in from_conf.stdout
    finally:
        for c in clients:
            c.close()
