"""A relayd cluster (docs/cluster.md): three nodes and a real redis-server on loopback.

The registry lists every node and forgets a killed one within the TTL; credentials name live
nodes only, preferring the labels asked for; a per-user quota and a cluster-wide quota hold
across nodes, and a killed node's share comes back; a draining node redirects with 300 to the
least loaded live node, where the client relays; Redis killed mid-call costs no packet, new
allocations still succeed, and everything is republished when Redis returns; a wrong Redis
password is a clear log line without the password."""

from __future__ import annotations

import re
import secrets
import signal
import struct
import time

import pytest

from cluster_support import TTL, ClusterNode, cluster_status, eventually, node_names, start_nodes
from cluster_support import allocate_or_code as allocate
from conftest import server_kind
from lifecycle import PacedStream, allocate_with_channel, challenged_allocate
from redis_support import RedisServer
from stunclient import Attr, Class, Method, TurnClient, decode_plain_address

pytestmark = pytest.mark.skipif(server_kind() != "relayd", reason="relayd's own cluster")


@pytest.fixture
def redis(tmp_path):
    server = RedisServer(tmp_path / "redis")
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def nodes(tmp_path, redis, request):
    marker = request.node.get_closest_marker("node_args")
    extra = list(marker.args) if marker else []
    started = start_nodes(tmp_path, redis, labels={"n2": "region=eu-west,zone=b"}, extra=extra)
    try:
        assert eventually(lambda: node_names(redis) == {"n1", "n2", "n3"}), cluster_status(redis)
        for node in started:
            assert eventually(lambda: node.metric("relayd_cluster_nodes") == 3), node.name
        yield started
    finally:
        problems = []
        for node in started:
            problems += node.stop()
        assert not problems, problems




def release(client: TurnClient) -> None:
    client.refresh(0)
    client.close()


def uri_ports(uris: list[str]) -> set[int]:
    return {int(re.search(r":(\d+)(\?|$)", u).group(1)) for u in uris}


def test_registry_lists_every_node_and_drops_a_killed_one_within_the_ttl(nodes, redis):
    table = cluster_status(redis, as_json=False)
    assert table.splitlines()[0].split()[:3] == ["NODE", "STATE", "ALLOCATIONS"]
    for node in nodes:
        assert re.search(rf"^{node.name}\s+serving\s+0\s", table, re.M), table
    entry = {n["name"]: n for n in cluster_status(redis)["nodes"]}["n2"]
    assert entry["labels"] == {"region": "eu-west", "zone": "b"}
    assert entry["addresses"] == [f"127.0.0.1:{nodes[1].port}"]
    assert entry["turn"] == [f"turn:127.0.0.1:{nodes[1].port}?transport=udp"]
    assert eventually(lambda: nodes[0].metric("relayd_cluster_nodes") == 3)
    assert nodes[0].metric("relayd_cluster_redis_up") == 1

    nodes[2].kill()
    killed = time.monotonic()
    assert eventually(lambda: node_names(redis) == {"n1", "n2"}, timeout=TTL + 2)
    gone_after = time.monotonic() - killed
    # Within the TTL, plus the one-second read interval of the node that reports it.
    assert gone_after <= TTL + 1.5, gone_after
    assert eventually(lambda: nodes[0].metric("relayd_cluster_nodes") == 2, timeout=2)


def test_coturn_redis_statsdb_joins_the_same_cluster(tmp_path, redis):
    node = ClusterNode(tmp_path / "statsdb", "coturn-style", None, secrets.token_hex(8),
                       redis_args=[f"--redis-statsdb=ip=127.0.0.1 port={redis.port} dbname=0 connect_timeout=5"])
    node.start()
    try:
        assert eventually(lambda: node_names(redis) == {"coturn-style"})
    finally:
        assert not node.stop()


def test_credentials_name_live_nodes_best_first_and_honour_labels(nodes, redis):
    every = {n.port for n in nodes}
    body = nodes[0].credentials_api("user=alice&nodes=3")
    assert uri_ports(body["uris"]) == every
    # Two by default, for ICE to race them.
    assert len(uri_ports(nodes[2].credentials_api("user=alice")["uris"])) == 2
    # A label preference puts the labelled node first; nodes=1 returns it alone.
    preferred = nodes[0].credentials_api("user=alice&region=eu-west&nodes=1")
    assert uri_ports(preferred["uris"]) == {nodes[1].port}
    ice = nodes[2].credentials_api("user=alice&zone=b&format=ice-servers")
    turn = next(s for s in ice["iceServers"] if "username" in s)
    assert f"turn:127.0.0.1:{nodes[1].port}?transport=udp" == turn["urls"][0]
    # REST credentials are stateless: minted on one node, valid on another.
    client = TurnClient(nodes[2].address)
    client.allocate(body["username"], body["password"])
    # Load decides among equals: n3 now holds an allocation, so n1 and n2 come first.
    assert eventually(lambda: uri_ports(nodes[0].credentials_api("user=bob&nodes=2")["uris"])
                      == {nodes[0].port, nodes[1].port}, timeout=3)
    release(client)

    nodes[2].kill()
    assert eventually(lambda: uri_ports(nodes[0].credentials_api("user=alice&nodes=3")["uris"])
                      == {nodes[0].port, nodes[1].port}, timeout=TTL + 2)


@pytest.mark.node_args("--user-quota=2")
def test_user_quota_holds_across_nodes(nodes):
    first, second = allocate(nodes[0], "bob"), allocate(nodes[1], "bob")
    assert isinstance(first, TurnClient) and isinstance(second, TurnClient)
    assert allocate(nodes[2], "bob") == 486
    assert allocate(nodes[0], "bob") == 486
    # Other users are not affected.
    other = allocate(nodes[2], "carol")
    assert isinstance(other, TurnClient)
    # One ends: the user may allocate again, on any node.
    release(first)
    third = None
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        third = allocate(nodes[2], "bob")
        if isinstance(third, TurnClient):
            break
        time.sleep(0.1)
    assert isinstance(third, TurnClient), third
    assert nodes[2].metric("relayd_cluster_admissions_total", '{outcome="refused"}') >= 1
    assert nodes[2].metric("relayd_cluster_admissions_total", '{outcome="granted"}') >= 2
    for c in (second, third, other):
        release(c)


@pytest.mark.node_args("--user-quota=2", "--cluster-total-quota=3")
def test_a_killed_node_gives_its_quota_share_back_within_the_ttl(nodes):
    held = [allocate(nodes[0], "dave"), allocate(nodes[0], "dave")]
    assert all(isinstance(c, TurnClient) for c in held)
    assert allocate(nodes[1], "dave") == 486
    erin = allocate(nodes[1], "erin")
    assert isinstance(erin, TurnClient)
    # cluster-total-quota 3: a fourth allocation anywhere is 508.
    assert allocate(nodes[2], "frank") == 508
    nodes[0].kill()
    killed = time.monotonic()
    got = None
    while time.monotonic() - killed < TTL + 2:
        got = allocate(nodes[1], "dave")
        if isinstance(got, TurnClient):
            break
        time.sleep(0.2)
    assert isinstance(got, TurnClient), f"dave still refused {time.monotonic() - killed:.1f} s after the kill: {got}"
    assert time.monotonic() - killed <= TTL + 1.5
    for c in held:
        c.close()
    release(got)
    release(erin)


def redirected_allocate(node: ClusterNode, user: str) -> tuple[TurnClient, tuple[str, int]]:
    """An authenticated Allocate to a draining `node`: the 300's ALTERNATE-SERVER, checked signed."""
    client, resp = challenged_allocate(node, node.secret, user)
    assert resp.cls == Class.ERROR and resp.error_code()[0] == 300, resp.error_code()
    assert resp.verify_integrity(client.key)
    return client, decode_plain_address(resp.get(Attr.ALTERNATE_SERVER))


def test_a_draining_node_redirects_to_the_least_loaded_live_node(nodes, redis):
    busy = allocate(nodes[1], "busy")
    assert isinstance(busy, TurnClient)
    assert eventually(lambda: {n["name"]: n["allocations"] for n in cluster_status(redis)["nodes"]}["n2"] == 1, timeout=3)
    # n1 redirects by the fleet it read back at its own last heartbeat (docs/cluster.md, "What a
    # node does"), up to a second behind Redis. Its credential service ranks that same view: wait
    # until it puts n2 last, so the view the redirect uses has seen n2's allocation.
    assert eventually(lambda: uri_ports(nodes[0].credentials_api("user=x&nodes=2")["uris"])
                      == {nodes[0].port, nodes[2].port}, timeout=3)
    nodes[0].proc.send_signal(signal.SIGUSR1)
    assert eventually(lambda: nodes[0].http("GET", "/readyz").status == 503)
    client, alternate = redirected_allocate(nodes[0], "mallory")
    # n2 holds an allocation, n3 none: n3 is the least loaded.
    assert alternate == ("127.0.0.1", nodes[2].port)
    # Chromium's way (turn_port.cc): the next Allocate goes to the alternate with the same
    # credentials and nonce. The nodes share the nonce key, so it succeeds at once, no 401/438.
    follow = TurnClient(alternate)
    follow.realm, follow.nonce, follow.username, follow.key = client.realm, client.nonce, client.username, client.key
    resp = follow.authenticated_request(Method.ALLOCATE, [(Attr.REQUESTED_TRANSPORT, struct.pack("!B3x", 17))])
    assert resp.cls == Class.SUCCESS, resp.error_code()
    assert resp.verify_integrity(follow.key)
    # The draining node tells the others: it leaves the candidates of credentials and redirects.
    assert eventually(lambda: {n["name"]: n["draining"] for n in cluster_status(redis)["nodes"]}["n1"] is True, timeout=3)
    assert eventually(lambda: nodes[0].port not in uri_ports(nodes[1].credentials_api("user=x&nodes=3")["uris"]),
                      timeout=3)
    follow.refresh(0)
    for c in (client, follow):
        c.close()
    release(busy)


@pytest.mark.node_args("--user-quota=2")
def test_redis_killed_mid_call_costs_nothing_and_everything_comes_back(nodes, redis):
    client, peer = allocate_with_channel(nodes[0], nodes[0].secret, user="caller")
    stream = PacedStream(client, peer, rate=200)
    held = []
    try:
        assert eventually(lambda: len(stream.received) > 50)
        redis.kill()
        for node in nodes:
            assert eventually(lambda: node.metric("relayd_cluster_redis_up") == 0, timeout=3), node.name
        # New allocations still succeed, quotas counted per node: two for carol on n1 now.
        held = [allocate(nodes[0], "carol"), allocate(nodes[0], "carol"), allocate(nodes[1], "dan")]
        assert all(isinstance(c, TurnClient) for c in held), held
        assert allocate(nodes[0], "carol") == 486
        # Credentials fall back to the node itself.
        assert uri_ports(nodes[1].credentials_api("user=x&nodes=3")["uris"]) == {nodes[1].port}
        before = len(stream.received)
        assert eventually(lambda: len(stream.received) > before + 100), "traffic stopped without Redis"
        time.sleep(1.5)  # several reconnection attempts, each must not log again
        redis.start()  # the same port, empty: nothing survived
        restarted = time.monotonic()
        assert eventually(lambda: node_names(redis) == {"n1", "n2", "n3"}, timeout=4)
        republished = time.monotonic() - restarted
        assert republished <= 2.5, republished
        for node in nodes:
            assert eventually(lambda: node.metric("relayd_cluster_redis_up") == 1, timeout=3)
        # n1 wrote its share anew: carol's two allocations count on n2 too.
        assert allocate(nodes[1], "carol") == 486
        assert eventually(lambda: uri_ports(nodes[1].credentials_api("user=x&nodes=3")["uris"])
                          == {n.port for n in nodes}, timeout=3)
    finally:
        sent, received = stream.stop()
    assert sent > 300
    assert len(received) == sent, f"lost {sent - len(received)} of {sent}"
    for node in nodes:
        downs, ups = node.log_events("cluster_redis_down"), node.log_events("cluster_redis_up")
        assert len(downs) == 1, (node.name, downs)
        assert len(ups) == 2, (node.name, ups)  # the first connection and the return
    release(client)
    for c in held:
        if isinstance(c, TurnClient):
            release(c)


def test_a_wrong_redis_password_is_a_clear_error_without_the_password(tmp_path):
    password = "correct-" + secrets.token_hex(8)
    redis = RedisServer(tmp_path / "redis", password=password)
    redis.start()
    wrong = "wrong-" + secrets.token_hex(8)
    secret = secrets.token_hex(8)
    bad = ClusterNode(tmp_path / "bad", "bad", None, secret,
                      redis_args=[f"--cluster-redis=redis://:{wrong}@127.0.0.1:{redis.port}/0"])
    good = ClusterNode(tmp_path / "good", "good", redis, secret)
    try:
        bad.start()
        good.start()
        assert eventually(lambda: bad.log_events("cluster_redis_down"), timeout=3), bad.log_tail()
        line = bad.log_events("cluster_redis_down")[0]
        assert "AUTH refused" in line["reason"] and ("WRONGPASS" in line["reason"] or "invalid" in line["reason"])
        assert wrong not in bad.log_text()
        assert password not in good.log_text()
        assert bad.metric("relayd_cluster_redis_up") == 0
        # Without Redis the node still serves.
        c = allocate(bad, "alice")
        assert isinstance(c, TurnClient)
        release(c)
        assert eventually(lambda: good.metric("relayd_cluster_redis_up") == 1, timeout=3)
        assert eventually(lambda: node_names(redis) == {"good"})
        time.sleep(1.2)
        assert len(bad.log_events("cluster_redis_down")) == 1, "the same failure must not be logged again"
    finally:
        problems = bad.stop() + good.stop()
        redis.stop()
    assert not problems, problems


def test_turnutils_uclient_follows_a_draining_nodes_redirect_and_relays_on_the_other(nodes, processes):
    """coturn's client, pointed at a draining node, takes the 300 and relays through the
    ALTERNATE-SERVER it names: no allocation on the draining node, none lost on the other."""
    from test_uclient import run_uclient, start_peer

    nodes[0].proc.send_signal(signal.SIGUSR1)
    assert eventually(lambda: nodes[0].http("GET", "/readyz").status == 503)
    assert eventually(lambda: all(n.metric("relayd_cluster_nodes") == 3 for n in nodes[1:]), timeout=3)
    report, output = run_uclient(nodes[0], processes, ["-c"], start_peer(processes))
    assert "300" in output  # uclient prints the redirect it followed
    assert report.send_msgs == report.recv_msgs > 0, output[-2000:]
    assert report.lost == 0
    assert nodes[0].metric("relayd_allocations_created_total") == 0
    assert nodes[0].metric("relayd_error_responses_total", '{code="300"}') >= 1
    served = sum(n.metric("relayd_allocations_created_total") for n in nodes[1:])
    assert served >= 4, served  # uclient's 4 clients, on the least loaded live nodes
