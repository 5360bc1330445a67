"""Blocks that last (docs/admin.md, "Blocks that last"): in a cluster, a block set through one
node's admin API holds on every node within a second, is listed everywhere with who set it and
when, survives a restart of every node and of Redis, and a block set while Redis is away is
published when it returns; without a cluster, blocks survive a restart through `state-dir`."""

from __future__ import annotations

import json
import secrets
import time

import pytest

from cluster_support import ClusterNode, allocation_answer, eventually
from conftest import RelayServer, server_kind
from redis_support import RedisServer

pytestmark = pytest.mark.skipif(server_kind() != "relayd", reason="relayd's own admin API")

ADMIN_TOKEN = "blocks-admin-token-0123456789abcdef"
ADMIN_KEY = f"--api-key=ops:{ADMIN_TOKEN}:admin"


def admin(server: RelayServer, method: str, path: str, body: dict | None = None):
    result = server.http(method, path, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
                         body=json.dumps(body).encode() if body is not None else b"")
    return result.status, (json.loads(result.body) if result.body else None)




@pytest.fixture
def redis(tmp_path):
    server = RedisServer(tmp_path / "redis")
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def nodes(tmp_path, redis):
    secret = secrets.token_hex(16)
    started = []
    try:
        for name in ("b1", "b2", "b3"):
            node = ClusterNode(tmp_path / name, name, redis, secret,
                               extra=[ADMIN_KEY, f"--state-dir={tmp_path / name / 'state'}"])
            node.start()
            started.append(node)
        yield started
    finally:
        problems = []
        for node in started:
            problems += node.stop()
        assert not problems, problems


def test_a_block_holds_on_every_node_within_a_second_and_outlives_every_restart(nodes, redis):
    b1, b2, b3 = nodes
    secret = b1.secret
    assert all(allocation_answer(n, secret, "mallory") == 200 for n in nodes)
    assert eventually(lambda: all(n.metric("relayd_cluster_redis_up") == 1 for n in nodes), timeout=3)
    status, block = admin(b1, "POST", "/api/v1/users/mallory/block", {"seconds": 600})
    assert status == 200 and block["set_by"] == "ops" and abs(block["set_at"] - time.time()) < 5, block
    set_at = time.monotonic()
    assert eventually(lambda: allocation_answer(b2, secret, "mallory") == 403
                      and allocation_answer(b3, secret, "mallory") == 403, timeout=3)
    took = time.monotonic() - set_at
    print(f"a block set on b1 held on b2 and b3 after {took:.2f} s")
    assert took <= 1.0, took
    for node in nodes:
        assert admin(node, "GET", "/api/v1/blocks")[1]["blocks"] == [
            {"user": "mallory", "until": block["until"], "set_by": "ops", "set_at": block["set_at"]}], node.name
    assert allocation_answer(b2, secret, "trent") == 200, "others allocate"

    # Every node restarts: the block comes back from Redis.
    for node in nodes:
        assert not node.stop()
    for node in nodes:
        node.start()
    assert eventually(lambda: all(allocation_answer(n, secret, "mallory") == 403 for n in nodes), timeout=3)
    assert admin(b3, "GET", "/api/v1/users/mallory/block")[1]["set_by"] == "ops"

    # Redis restarts empty: the nodes give it their blocks back.
    redis.kill()
    redis.start()
    assert eventually(lambda: redis.command("HEXISTS", "relayd:blocks", "mallory") == 1, timeout=5)
    # A block set while Redis is down reaches every node once it returns.
    redis.kill()
    assert eventually(lambda: b2.metric("relayd_cluster_redis_up") == 0, timeout=3)
    assert admin(b2, "POST", "/api/v1/users/oscar/block", {"seconds": 600})[0] == 200
    assert allocation_answer(b2, secret, "oscar") == 403
    assert allocation_answer(b1, secret, "oscar") == 200, "b1 cannot know yet"
    redis.start()
    assert eventually(lambda: allocation_answer(b1, secret, "oscar") == 403
                      and allocation_answer(b3, secret, "oscar") == 403, timeout=5)
    assert eventually(lambda: all(allocation_answer(n, secret, "mallory") == 403 for n in nodes), timeout=3)
    # Nothing settles back: no node's reconnection undid another's block.
    eventually(lambda: False, timeout=1)
    assert all(allocation_answer(n, secret, u) == 403 for n in nodes for u in ("mallory", "oscar"))

    # A change made while Redis is away survives a restart of its node (state-dir), and every
    # node and Redis restart at once: the blocks come back from the nodes' files.
    redis.kill()
    assert eventually(lambda: b3.metric("relayd_cluster_redis_up") == 0, timeout=3)
    assert admin(b3, "POST", "/api/v1/users/peggy/block", {"seconds": 600})[0] == 200
    for node in nodes:
        assert not node.stop()
    redis.start()
    for node in nodes:
        node.start()
    assert eventually(lambda: all(allocation_answer(n, secret, u) == 403
                                  for n in nodes for u in ("mallory", "oscar", "peggy")), timeout=5)

    # Lifted on one node: lifted everywhere.
    assert admin(b3, "DELETE", "/api/v1/users/mallory/block")[0] == 200
    assert eventually(lambda: all(allocation_answer(n, secret, "mallory") == 200 for n in nodes), timeout=2)
    assert [b["user"] for b in admin(b1, "GET", "/api/v1/blocks")[1]["blocks"]] == ["oscar", "peggy"]
    # A lift is kept in Redis as an entry with until 0 and its time, so no node's older copy
    # brings the block back.
    lifted = redis.command("HGET", "relayd:blocks", "mallory")
    until, set_at, by = lifted.split(" ")
    assert until == "0" and abs(int(set_at) - time.time()) < 60 and by == "ops", lifted

    # Redis loses everything without dropping a connection: the nodes notice the version going
    # back and give their blocks back.
    redis.command("FLUSHALL")
    assert eventually(lambda: redis.command("HEXISTS", "relayd:blocks", "oscar") == 1, timeout=3)
    assert all(allocation_answer(n, secret, "oscar") == 403 for n in nodes)

    # A change Redis refuses (it holds a later one, here from a node whose clock is ahead) is
    # not kept where it was made: that node takes Redis's.
    later = f"{int(time.time()) + 600} {int(time.time()) + 100} other"
    redis.command("HSET", "relayd:blocks", "victor", later)
    redis.command("INCR", "relayd:blocks:version")
    assert eventually(lambda: all(allocation_answer(n, secret, "victor") == 403 for n in nodes), timeout=3)
    assert admin(b1, "DELETE", "/api/v1/users/victor/block")[0] == 200
    assert eventually(lambda: allocation_answer(b1, secret, "victor") == 403, timeout=3)
    assert redis.command("HGET", "relayd:blocks", "victor") == later


def test_malformed_blocks_in_redis_are_ignored_and_counted(nodes, redis):
    b1 = nodes[0]
    redis.command("HSET", "relayd:blocks", "eve", "not a block")
    redis.command("HSET", "relayd:blocks", "frank", f"{int(time.time()) + 600} 0 ci")
    redis.command("INCR", "relayd:blocks:version")
    assert eventually(lambda: allocation_answer(b1, b1.secret, "frank") == 403, timeout=3)
    assert allocation_answer(b1, b1.secret, "eve") == 200
    assert eventually(lambda: b1.log_events("cluster_blocks_malformed"), timeout=2)
    assert [b["user"] for b in admin(b1, "GET", "/api/v1/blocks")[1]["blocks"]] == ["frank"]


def test_without_a_cluster_blocks_survive_a_restart_through_the_state_dir(tmp_path):
    state = tmp_path / "state"
    server = RelayServer("relayd", tmp_path / "relayd", extra_args=[f"--state-dir={state}", ADMIN_KEY])
    server.start()
    try:
        secret = server.secret
        status, block = admin(server, "POST", "/api/v1/users/mallory/block", {"seconds": 600})
        assert status == 200
        assert admin(server, "POST", "/api/v1/users/short/block", {"seconds": 1})[0] == 200
        assert not server.stop()
        time.sleep(1.2)  # short lapses meanwhile
        server.start()
        assert allocation_answer(server, secret, "mallory") == 403
        assert allocation_answer(server, secret, "short") == 200
        assert admin(server, "GET", "/api/v1/blocks")[1]["blocks"] == [
            {"user": "mallory", "until": block["until"], "set_by": "ops", "set_at": block["set_at"]}]
        assert oct((state / "blocks").stat().st_mode & 0o777) == "0o600"
        # A damaged file costs its bad lines only.
        assert admin(server, "DELETE", "/api/v1/users/mallory/block")[0] == 200
        assert not server.stop()
        (state / "blocks").write_text(
            f"relayd-blocks 1\n{int(time.time()) + 600} 0 zoe -\n%%%% nonsense\n{int(time.time()) + 600} 5 yan ops\n")
        server.start()
        assert allocation_answer(server, secret, "yan") == 403
        assert allocation_answer(server, secret, "mallory") == 200
        assert "blocks_file_damaged" in server.log_text()
    finally:
        problems = server.stop()
    assert not problems, problems


def test_a_redis_back_from_an_older_snapshot_brings_no_lifted_block_back(nodes, redis):
    """Redis saves its data with the block in force, the block is lifted, and Redis is killed
    and comes back from that snapshot: the nodes, which keep lifts for a day, merge the lift
    back (the later change wins) and the block stays lifted everywhere."""
    b1, b2, b3 = nodes
    secret = b1.secret
    assert eventually(lambda: all(n.metric("relayd_cluster_redis_up") == 1 for n in nodes), timeout=3)
    assert admin(b1, "POST", "/api/v1/users/mallory/block", {"seconds": 600})[0] == 200
    assert admin(b1, "POST", "/api/v1/users/oscar/block", {"seconds": 600})[0] == 200
    assert eventually(lambda: all(allocation_answer(n, secret, "mallory") == 403 for n in nodes), timeout=3)
    redis.command("SET", "snapshot-probe", "before")  # a key no node writes
    assert redis.command("SAVE") == "OK"
    redis.command("SET", "snapshot-probe", "after")
    old = redis.command("HGET", "relayd:blocks", "mallory")
    # A second later, so the lift's time is later than the block's.
    time.sleep(1.1)
    assert admin(b2, "DELETE", "/api/v1/users/mallory/block")[0] == 200
    assert eventually(lambda: all(allocation_answer(n, secret, "mallory") == 200 for n in nodes), timeout=3)
    redis.kill()
    redis.start()
    assert redis.command("GET", "snapshot-probe") == "before", "Redis came back from the snapshot"
    # Redis is back in the past, and the nodes merge what they know into it.
    assert eventually(lambda: (redis.command("HGET", "relayd:blocks", "mallory") or "").startswith("0 "), timeout=5), \
        redis.command("HGET", "relayd:blocks", "mallory")
    assert old.split(" ")[0] != "0"
    eventually(lambda: False, timeout=1)
    assert all(allocation_answer(n, secret, "mallory") == 200 for n in nodes)
    assert all(allocation_answer(n, secret, "oscar") == 403 for n in nodes), "the snapshot's other block holds"
    for node in nodes:
        assert [b["user"] for b in admin(node, "GET", "/api/v1/blocks")[1]["blocks"]] == ["oscar"], node.name
