"""TLS to the cluster's Redis through a local stunnel (docs/cluster.md, "TLS to Redis"): Debian
12's hiredis has no TLS, so each node talks plain RESP to a stunnel client on its own loopback,
which verifies Redis's certificate and carries the connection over TLS to Redis's `tls-port`.
Redis here has no plain port at all: a node that registers and counts a quota did so over TLS."""

from __future__ import annotations

import secrets
import shutil
import subprocess
import time

import pytest

from cluster_support import ClusterNode, eventually
from cluster_support import allocate_or_code as allocate
from conftest import LOOPBACK, REPO_ROOT, die_with_parent, free_port, server_kind
from redis_support import RedisServer
from stunclient import TurnClient

pytestmark = pytest.mark.skipif(server_kind() != "relayd", reason="relayd's own cluster")


@pytest.fixture
def tunnel(tmp_path):
    """Redis with TLS only, and a stunnel client in front of it; yields the Redis seen through
    the tunnel (its `port` is stunnel's)."""
    binary = shutil.which("stunnel4") or shutil.which("stunnel")
    if binary is None:
        pytest.fail("stunnel not found (Debian package stunnel4; run scripts/install-test-deps.sh)")
    certs = tmp_path / "certs"
    subprocess.run([str(REPO_ROOT / "conf" / "make-test-cert.sh"), str(certs)], check=True, capture_output=True)
    tls_port = free_port()
    redis = RedisServer(tmp_path / "redis", password="tunnel-pw", extra=[
        "--port", "0", "--tls-port", str(tls_port), "--tls-cert-file", str(certs / "cert.pem"),
        "--tls-key-file", str(certs / "pkey.pem"), "--tls-ca-cert-file", str(certs / "cert.pem"),
        "--tls-auth-clients", "no"])
    config = tmp_path / "stunnel.conf"
    config.write_text("\n".join([
        "foreground = yes", "pid =", f"output = {tmp_path / 'stunnel.log'}", "[redis]", "client = yes",
        f"accept = {LOOPBACK}:{redis.port}", f"connect = {LOOPBACK}:{tls_port}", "verifyChain = yes",
        f"CAfile = {certs / 'cert.pem'}", "checkHost = localhost", ""]))
    stunnel = subprocess.Popen([binary, str(config)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, preexec_fn=die_with_parent)
    try:
        deadline = time.monotonic() + 5
        while not (tmp_path / "stunnel.log").exists() or "Configuration successful" not in (tmp_path / "stunnel.log").read_text():
            assert stunnel.poll() is None and time.monotonic() < deadline, "stunnel did not start"
            time.sleep(0.05)
        redis.start()  # its PING goes through the tunnel
        yield redis
    finally:
        redis.stop()
        stunnel.terminate()
        stunnel.wait(timeout=5)




def test_nodes_reach_a_tls_only_redis_through_a_local_stunnel(tmp_path, tunnel):
    secret = secrets.token_hex(16)
    nodes = [ClusterNode(tmp_path / name, name, tunnel, secret, extra=["--user-quota=1"]) for name in ("t1", "t2")]
    try:
        for node in nodes:
            node.start()
        assert eventually(lambda: tunnel.command("SMEMBERS", "relayd:nodes") is not None
                          and set(tunnel.command("SMEMBERS", "relayd:nodes")) == {"t1", "t2"})
        first = allocate(nodes[0], "erin")
        assert isinstance(first, TurnClient), first
        # The quota is counted across the two nodes, in the Redis behind TLS.
        assert allocate(nodes[1], "erin") == 486
        assert nodes[1].metric("relayd_cluster_admissions_total", '{outcome="refused"}') == 1
        first.refresh(0)
        first.close()
    finally:
        problems = []
        for node in nodes:
            problems += node.stop()
        assert not problems, problems
    # The Redis password went through the tunnel only: nothing listens in plain text.
    assert tunnel.command("CONFIG", "GET", "port") == ["port", "0"]
