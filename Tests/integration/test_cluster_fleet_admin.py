"""Admin across the fleet (docs/admin.md, "A fleet"): each node publishes its HTTPS admin API and
its certificate's SHA-256 in the registry; `relayd sessions` and `relayd kick` with `-c` naming
the cluster ask every live node, pinning each certificate by the registry's digest, merge the
answers with each node named, and report a node that does not answer instead of leaving it
out. The status page lists the fleet."""

from __future__ import annotations

import http.client
import json
import re
import secrets
import signal
import ssl
import subprocess

import pytest

from cluster_support import ClusterNode, eventually, relayd_binary
from conftest import server_kind
from redis_support import RedisServer
from stunclient import TurnClient, rest_credentials

pytestmark = pytest.mark.skipif(server_kind() != "relayd", reason="relayd's own admin API")

TOKEN = "fleet-admin-token-0123456789abcdef"
NODES = ("f1", "f2", "f3")


@pytest.fixture
def fleet(tmp_path):
    redis = RedisServer(tmp_path / "redis")
    redis.start()
    secret = secrets.token_hex(16)
    nodes = []
    try:
        for name in NODES:
            node = ClusterNode(tmp_path / name, name, redis, secret, streams=True,
                               extra=[f"--api-key=ops:{TOKEN}:admin", "--api-tls"])
            node.start()
            nodes.append(node)
        assert eventually(lambda: all(redis.command("HGET", f"relayd:node:{n}", "api_sha256") for n in NODES))
        # What the CLI needs of a node's relayd.conf: the cluster's Redis and an admin key (the
        # API address it names is loopback, where no node listens here).
        cli = tmp_path / "cli.conf"
        cli.write_text(f"use-auth-secret\nstatic-auth-secret={secret}\ncluster-redis={redis.url}\n"
                       f"api-key=ops:{TOKEN}:admin\napi-listening-port=1\n")
        yield redis, nodes, cli
    finally:
        problems = []
        for node in nodes:
            if node.proc is not None and node.proc.poll() is None:
                node.proc.send_signal(signal.SIGCONT)
            problems += node.stop()
        redis.stop()
        assert not problems, problems


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([relayd_binary(), *args], capture_output=True, text=True, timeout=60)


def allocate(node: ClusterNode, user: str) -> TurnClient:
    client = TurnClient(node.address)
    client.allocate(*rest_credentials(node.secret, user))
    return client


def test_sessions_and_kick_reach_every_node_and_name_the_one_that_does_not_answer(fleet):
    redis, (f1, f2, f3), conf = fleet
    clients = [allocate(f1, "alice"), allocate(f1, "alice"), allocate(f2, "alice"), allocate(f2, "bob")]
    try:
        # The registry publishes each node's HTTPS API and the digest of the certificate it serves.
        for node in (f1, f2, f3):
            assert redis.command("HGET", f"relayd:node:{node.name}", "api") == f"https://127.0.0.1:{node.api_port}"
            assert re.fullmatch(r"[0-9a-f]{64}", redis.command("HGET", f"relayd:node:{node.name}", "api_sha256"))

        listed = cli("sessions", "-c", str(conf), "--json")
        assert listed.returncode == 0, listed.stderr
        allocations = json.loads(listed.stdout)
        assert sorted((a["node"], a["user"]) for a in allocations) == [
            ("f1", "alice"), ("f1", "alice"), ("f2", "alice"), ("f2", "bob")]
        table = cli("sessions", "-c", str(conf), "--user", "alice")
        assert table.returncode == 0, table.stderr
        lines = table.stdout.splitlines()
        assert lines[0].startswith("NODE") and sorted(l.split()[0] for l in lines[1:]) == ["f1", "f1", "f2"]
        # --this-node keeps the old behaviour: the node -c names only (here none listens: an error).
        assert cli("sessions", "-c", str(conf), "--this-node").returncode != 0

        # A node that does not answer is named, and the status says the listing is partial.
        f3.proc.send_signal(signal.SIGSTOP)
        try:
            partial = cli("sessions", "-c", str(conf), "--json")
            assert partial.returncode == 3, (partial.returncode, partial.stderr)
            assert "node f3 did not answer" in partial.stderr
            assert len(json.loads(partial.stdout)) == 4
        finally:
            f3.proc.send_signal(signal.SIGCONT)
        # Stopped longer than the TTL, f3 left the registry; its next heartbeat puts it back.
        assert eventually(lambda: redis.command("EXISTS", "relayd:node:f3") == 1, timeout=5)

        kicked = cli("kick", "-c", str(conf), "--user", "alice")
        assert kicked.returncode == 0, kicked.stderr
        assert kicked.stdout.strip() == "terminated 3 allocations (f1 2, f2 1, f3 0)", kicked.stdout
        remaining = json.loads(cli("sessions", "-c", str(conf), "--json").stdout)
        assert [(a["node"], a["user"]) for a in remaining] == [("f2", "bob")]
        session = remaining[0]["session"]
        one = cli("kick", "-c", str(conf), session)
        assert one.returncode == 0 and one.stdout.startswith("terminated 1 allocation "), one.stdout

        # A certificate that is not the one the registry names is refused. The node rewrites its
        # entry every second, so the wrong digest is set and read at once, a few times over.
        refused = False
        for _ in range(10):
            redis.command("HSET", "relayd:node:f2", "api_sha256", "0" * 64)
            answer = cli("sessions", "-c", str(conf))
            if "does not serve the certificate the cluster's registry names" in answer.stderr:
                assert answer.returncode == 3 and "node f2 did not answer" in answer.stderr
                refused = True
                break
        assert refused, answer.stderr
    finally:
        for client in clients:
            client.close()


def test_the_status_page_lists_the_fleet(fleet):
    redis, (f1, f2, f3), _ = fleet
    assert not f2.proc.send_signal(signal.SIGUSR1)  # f2 drains
    page = ""

    def fleet_shown() -> bool:
        nonlocal page
        # The API is HTTPS only here (api-tls, the node's self-signed certificate).
        conn = http.client.HTTPSConnection("127.0.0.1", f1.api_port, timeout=5,
                                           context=ssl._create_unverified_context())
        try:
            conn.request("GET", "/status", headers={"Authorization": f"Bearer {TOKEN}"})
            result = conn.getresponse()
            status, page = result.status, result.read().decode()
        finally:
            conn.close()
        return status == 200 and 'data-node="f2"' in page and "draining" in page.split('data-node="f2"')[1][:200]

    assert eventually(fleet_shown, timeout=5), page
    section = page[page.index('id="fleet"'):]
    assert all(f'data-node="{n}"' in section for n in NODES)
    assert "f1 (this node)" in section
