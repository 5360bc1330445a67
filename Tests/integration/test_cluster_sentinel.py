"""A relayd cluster on Redis with Sentinel (docs/cluster.md, "Redis that survives its failover"):
three relayd nodes, a master and a replica, three sentinels, all real and on loopback.

The master is killed mid-traffic: no packet and no allocation is lost, every node finds the new
master through the sentinels and re-publishes its entry and its exact quota share within 5 s of
the election, and while Redis is away a user gets at most `user-quota` on each node (the
documented bound). A manual failover (the old master stays up, demoted) moves the nodes too.
`relayd cluster status` reads the fleet through the sentinels."""

from __future__ import annotations

import json
import secrets
import subprocess
import time

import pytest

from cluster_support import ClusterNode, eventually, relayd_binary
from cluster_support import allocate_or_code as allocate
from conftest import server_kind
from lifecycle import PacedStream, allocate_with_channel
from redis_support import RedisServer
from sentinel_support import MASTER_NAME, SentinelGroup
from stunclient import TurnClient

pytestmark = pytest.mark.skipif(server_kind() != "relayd", reason="relayd's own cluster")

QUOTA = 2
NODES = ("n1", "n2", "n3")


@pytest.fixture
def group(tmp_path):
    group = SentinelGroup(tmp_path)
    try:
        group.start()
        yield group
    finally:
        group.stop()


@pytest.fixture
def nodes(tmp_path, group):
    secret = secrets.token_hex(16)
    started = []
    try:
        for name in NODES:
            node = ClusterNode(tmp_path / name, name, None, secret, redis_args=[f"--cluster-redis={group.url}"],
                               extra=[f"--user-quota={QUOTA}"])
            node.start()
            started.append(node)
        assert eventually(lambda: registry(group.master) == set(NODES), timeout=8), registry(group.master)
        yield started
    finally:
        problems = []
        for node in started:
            problems += node.stop()
        assert not problems, problems


def registry(server: RedisServer) -> set[str]:
    """Names with a live entry in `server`."""
    names = server.command("SMEMBERS", "relayd:nodes")
    if not isinstance(names, list):
        return set()
    return {n for n in names if server.command("EXISTS", f"relayd:node:{n}") == 1}


def share(server: RedisServer, node: str, user: str) -> int:
    """`user`'s allocations in `node`'s quota share on `server`."""
    fields = server.command("HGETALL", f"relayd:quota:{node}")
    if not isinstance(fields, list):
        return 0
    return sum(int(v) for k, v in zip(fields[::2], fields[1::2]) if k.startswith("u:") and k.endswith(f":{user}"))




def status_through_sentinels(group: SentinelGroup) -> set[str]:
    result = subprocess.run([relayd_binary(), "cluster", "status", "--redis", group.url, "--json"],
                            capture_output=True, timeout=15)
    assert result.returncode == 0, result.stderr.decode()
    return {n["name"] for n in json.loads(result.stdout)["nodes"]}


def local_admissions(node: ClusterNode) -> float:
    return node.metric("relayd_cluster_admissions_total", '{outcome="local"}') or 0


def test_a_killed_master_costs_no_allocation_and_the_nodes_republish_on_the_new_one(group, nodes):
    n1, n2, n3 = nodes
    assert status_through_sentinels(group) == set(NODES)
    client, peer = allocate_with_channel(n1, n1.secret, user="caller")
    stream = PacedStream(client, peer, rate=200)
    carol = [allocate(n1, "carol"), allocate(n1, "carol")]
    held: list[TurnClient] = []
    try:
        assert all(isinstance(c, TurnClient) for c in carol), carol
        assert allocate(n2, "carol") == 486, "the quota counts across nodes through the master"
        assert eventually(lambda: SentinelGroup.replica_in_sync(group.master, group.replica)
                          and share(group.replica, "n1", "carol") == QUOTA, timeout=5)
        assert eventually(lambda: len(stream.received) > 50)

        group.master.kill()
        assert eventually(lambda: all(n.metric("relayd_cluster_redis_up") == 0 for n in nodes), timeout=4)
        # Redis away: n2 decides on its own counts. It grants carol at most QUOTA (the bound:
        # QUOTA on each node), and refuses the next whether or not Redis came back meanwhile.
        local_before = local_admissions(n2)
        answers = [allocate(n2, "carol") for _ in range(QUOTA + 1)]
        held += [a for a in answers if isinstance(a, TurnClient)]
        assert answers[-1] == 486, answers
        assert len(held) <= QUOTA
        assert local_admissions(n2) - local_before >= len(held), "only local decisions may exceed the cluster quota"

        assert eventually(lambda: group.current() is group.replica, timeout=20), "no failover"
        elected = time.monotonic()
        # Every node is back on the new master with its entry and its exact share.
        expected = {"n1": QUOTA, "n2": len(held), "n3": 0}
        assert eventually(lambda: registry(group.replica) == set(NODES)
                          and all(share(group.replica, n, "carol") == c for n, c in expected.items()), timeout=8)
        republished = time.monotonic() - elected
        print(f"republished {republished:.2f} s after the election")
        assert republished <= 5.0, republished
        assert eventually(lambda: all(n.metric("relayd_cluster_redis_up") == 1 for n in nodes), timeout=3)
        # Quotas count across nodes again, from the rebuilt shares.
        assert allocate(n3, "carol") == 486
        assert status_through_sentinels(group) == set(NODES)
        # The allocations made before the failover are still there.
        client.refresh(600)
        for c in carol:
            c.refresh(600)
    finally:
        sent, received = stream.stop()
    assert sent > 300
    assert len(received) == sent, f"lost {sent - len(received)} of {sent}"
    for node in nodes:
        masters = [e["master"] for e in node.log_events("cluster_redis_master")]
        assert masters == [f"127.0.0.1:{group.master.port}", f"127.0.0.1:{group.replica.port}"], (node.name, masters)
    for c in carol + held + [client]:
        c.refresh(0)
        c.close()


def test_a_demoted_master_sends_every_node_to_the_promoted_replica(group, nodes):
    assert eventually(lambda: SentinelGroup.replica_in_sync(group.master, group.replica), timeout=5)
    alice = allocate(nodes[0], "alice")
    assert isinstance(alice, TurnClient)
    assert eventually(lambda: share(group.replica, "n1", "alice") == 1, timeout=3)
    # A manual failover: the old master stays up and becomes a replica.
    reply = group.sentinels[0].command("SENTINEL", "FAILOVER", MASTER_NAME)
    assert reply == "OK", reply
    assert eventually(lambda: group.current() is group.replica, timeout=15), "no failover"
    elected = time.monotonic()
    # Writes reach the new master: an allocation made now is counted there, by every node.
    bobs = [allocate(node, f"bob-{node.name}") for node in nodes]
    assert all(isinstance(b, TurnClient) for b in bobs), bobs
    assert eventually(lambda: all(share(group.replica, n.name, f"bob-{n.name}") == 1 for n in nodes), timeout=3)
    moved = time.monotonic() - elected
    print(f"every node writes to the promoted replica {moved:.2f} s after the election")
    assert moved <= 5.0, moved
    assert eventually(lambda: registry(group.replica) == set(NODES), timeout=2)
    for node in nodes:
        assert node.log_events("cluster_redis_master")[-1]["master"] == f"127.0.0.1:{group.replica.port}"
        assert node.metric("relayd_cluster_redis_up") == 1
    for c in bobs + [alice]:
        c.refresh(0)
        c.close()


def test_sentinels_that_know_no_such_master_are_a_clear_error(tmp_path, group):
    url = group.url.replace(f"/{MASTER_NAME}/", "/no-such-master/")
    result = subprocess.run([relayd_binary(), "cluster", "status", "--redis", url], capture_output=True, timeout=15)
    assert result.returncode != 0
    err = result.stderr.decode()
    assert "no sentinel named the master 'no-such-master'" in err, err
    assert group.password not in err and group.sentinel_password not in err, err
    # A wrong sentinel password: each sentinel's refusal is in the message, never the password.
    wrong = group.url.replace(f"sentinel-password={group.sentinel_password}", "sentinel-password=wrong-one")
    result = subprocess.run([relayd_binary(), "cluster", "status", "--redis", wrong], capture_output=True, timeout=15)
    assert result.returncode != 0
    err = result.stderr.decode()
    assert "WRONGPASS" in err or "invalid password" in err, err
    assert "wrong-one" not in err, err
