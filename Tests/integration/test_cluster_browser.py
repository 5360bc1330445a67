"""Chromium follows a draining node's redirect (docs/cluster.md, "Redirects").

Chromium refuses an ALTERNATE-SERVER on loopback (turn_port.cc, SetAlternateServer), so the
cluster runs in a network namespace this test creates, on a veth interface's address
(198.18.0.1, the benchmarking range): redis-server, two relayd nodes, the app server and
headless Chromium all inside it (netns_browser_redirect.py). The page's only TURN URL is the
draining node n1's; the call must be relayed by n2 (both peers' relay candidates in n2's port
range), n1 must have answered 300 and created nothing. Needs root; the namespace and every
process in it are removed at the end."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from browser_support import missing_browser_tools
from conftest import server_kind

ADDRESS = "198.18.0.1"
RUN_TIMEOUT = 150

pytestmark = [
    pytest.mark.skipif(server_kind() != "relayd", reason="relayd's own cluster"),
    pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root"),
]


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=10)


@pytest.fixture
def namespace():
    name = f"rd{os.getpid()}-{secrets.token_hex(2)}-cluster"
    ip("netns", "add", name)
    try:
        ip("-n", name, "link", "set", "lo", "up")
        # A veth pair with both ends inside (this kernel may lack the dummy driver).
        ip("-n", name, "link", "add", "v0", "type", "veth", "peer", "name", "v1")
        ip("-n", name, "addr", "add", f"{ADDRESS}/24", "dev", "v0")
        ip("-n", name, "link", "set", "v1", "up")
        ip("-n", name, "link", "set", "v0", "up")
        yield name
    finally:
        pids = subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True, timeout=10).stdout
        for pid in pids.split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass
        subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=10)


def test_chromium_follows_a_draining_nodes_redirect_and_relays_through_the_other(namespace, tmp_path):
    missing = missing_browser_tools() + [t for t in ("redis-server", "ip") if shutil.which(t) is None]
    if missing:
        pytest.fail("prerequisites missing: " + ", ".join(missing) + " (run scripts/install-test-deps.sh)")
    runner = Path(__file__).resolve().parent / "netns_browser_redirect.py"
    proc = subprocess.run(
        ["ip", "netns", "exec", namespace, sys.executable, str(runner), str(tmp_path), ADDRESS],
        capture_output=True, timeout=RUN_TIMEOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    out = proc.stdout.decode().strip().splitlines()
    assert proc.returncode == 0 and out, proc.stderr.decode()[-3000:]
    result = json.loads(out[-1])
    context = json.dumps({k: v for k, v in result.items() if k != "page"}, indent=1)[:4000]
    assert "error" not in result, context
    assert result["ok"], json.dumps(result.get("page"), indent=1)[:5000]
    assert not result["problems"], context

    n1, n2 = result["n1"], result["n2"]
    # n1 only redirected: one 300 per peer at least, no allocation.
    assert n1["allocations_created"] == 0, context
    assert n1["redirects"] >= 2, context
    assert n2["allocations_created"] >= 2, context
    assert n2["relayed_packets"] > 0, context

    report = result["page"]["report"]
    assert report["echoedIntact"] and report["echoesReceived"] == report["messagesSent"], context
    for side in ("a", "b"):
        stats = report["stats"][side]
        local, remote = stats["local"], stats["remote"]
        assert (local["candidateType"], remote["candidateType"]) == ("relay", "relay"), context
        assert local["address"] == ADDRESS
        # The relayed addresses are n2's: the call went where the redirect sent it.
        assert n2["min_port"] <= local["port"] <= n2["max_port"], (local, n2)
        assert n2["min_port"] <= remote["port"] <= n2["max_port"], (remote, n2)
        assert stats["pair"]["bytesSent"] > 0 and stats["pair"]["bytesReceived"] > 0
    print(f"\n{result['chromium']}: redirected from n1 to n2; n2 relayed {n2['relayed_packets']:.0f} packets")
