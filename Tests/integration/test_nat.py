"""Two aiortc peers behind two symmetric NATs, each in its own network namespace, and
relayd on a public segment (netns.py draws the topology).

(a) With relayd only as a STUN server (host and server-reflexive candidates), ICE
    fails within a bounded time: the NATs (address- and port-dependent mapping and
    filtering) block every direct path, although the addresses route. Both peers
    did learn their NAT's outside address as a srflx candidate from relayd.
(b) With relayd as a TURN server, ICE succeeds on a relay/relay pair and a data
    channel carries 50 messages each way, intact and in order: with
    iceTransportPolicy "relay", and with "all" (host, srflx and relay candidates;
    only the relayed pair can work).

relayd listens on 203.0.113.1 (TEST-NET-3) with its default peer policy, which
denies that range and all private ones; no allowed-peer-ip, no
allow-loopback-peers. The peers' relayed candidates are relayd's own relayed
addresses, which PeerPolicy allows (inside the relay port range) before the
special-purpose check, so (b) works as deployed: relay-only, relayd refuses no
permission (relayd_error_responses_total{code="403"} does not move); with "all"
it refuses the peers' permissions for each other's host and srflx addresses.

Needs root, ip (iproute2), nft (nftables) and aiortc; without one the test fails,
naming it. Each peer is its own process under `ip netns exec`; signaling goes
through files in a temporary directory. Every namespace and process is removed
afterwards, whatever happens.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from unittest import mock

import pytest

import conftest
import netns
from conftest import RelayServer, server_kind

pytestmark = pytest.mark.skipif(server_kind() != "relayd",
                                reason="starts relayd itself inside a network namespace")

PEER_SCRIPT = Path(__file__).resolve().parent / "nat_peer.py"
PORT = 23478  # inside the namespace nothing else listens
API_PORT = 28080
RELAY_PORTS = (50000, 50199)
MESSAGES = 50
PEER_TIMEOUT = 30.0  # each wait inside a peer
# STUN transmissions per connectivity check in case (a): at 0, .5, 1.5 and 3.5 s, giving
# up at 7.5 s (aioice's default, 6, gives up at 31.5 s). ICE must reach "failed" within
# PEER_TIMEOUT; the time it took is printed, not asserted.
FAIL_TRANSMISSIONS = 4


def missing_prerequisites() -> list[str]:
    missing = netns.missing_prerequisites()
    try:
        from aiortc import RTCIceTransportPolicy  # noqa: F401
    except ImportError:
        missing.append("Python package aiortc >= 1.16")
    return missing


MISSING = missing_prerequisites()


def ready(world):
    """The module's topology and relayd; fails the test (never skips) if a prerequisite is missing."""
    if MISSING:
        pytest.fail("NAT test prerequisites missing: " + ", ".join(MISSING)
                    + " (run scripts/install-test-deps.sh, and the tests as root)", pytrace=False)
    return world


class NamespacedRelayd(RelayServer):
    """relayd inside the topology's public namespace, bound to its public address."""

    def __init__(self, topology: netns.Topology, workdir: Path):
        # The namespace has ports of its own: no need to find a free relay range on
        # the host's loopback (which a benchmark running alongside may fill).
        with mock.patch.object(conftest, "free_port_range", lambda *a, **k: range(RELAY_PORTS[0], RELAY_PORTS[1] + 1)):
            super().__init__("relayd", workdir)
        self.topology = topology
        self.host = topology.relay_ip
        self.port, self.api_port = PORT, API_PORT
        self.min_port, self.max_port = RELAY_PORTS
        self.relay_ports = range(RELAY_PORTS[0], RELAY_PORTS[1] + 1)

    def command(self) -> list[str]:
        # The fixture's command, minus allow-loopback-peers: the default peer policy.
        cmd = [arg for arg in super().command() if arg != "--allow-loopback-peers"]
        return self.topology.exec_prefix(self.topology.pub) + cmd

    def wait_ready(self, timeout: float) -> None:
        """A Binding request from client 1's namespace, through NAT 1."""
        probe = subprocess.run(
            self.topology.exec_prefix(self.topology.c1)
            + [sys.executable, str(PEER_SCRIPT), "probe", self.host, str(self.port), str(timeout)],
            capture_output=True, text=True, timeout=timeout + 10)
        if probe.returncode != 0:
            raise RuntimeError(f"relayd at {self.host}:{self.port} not reachable from {self.topology.c1}: "
                               f"{probe.stdout.strip()} {probe.stderr.strip()}\n{self.log_tail()}")
        self.probe_mapped = json.loads(probe.stdout)["mapped"]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    if MISSING:
        yield None  # each test fails, naming what is missing
        return
    topology = netns.Topology()
    workdir = tmp_path_factory.mktemp("nat")
    try:
        topology.build()
        relayd = NamespacedRelayd(topology, workdir / "relayd")
        relayd.start()
        try:
            yield topology, relayd
        finally:
            problems = relayd.stop()
            if problems:
                pytest.fail("relayd problems:\n  " + "\n  ".join(problems)
                            + f"\nlog: {relayd.log_path}\n{relayd.log_tail()}", pytrace=False)
    finally:
        problems = topology.cleanup()
        left = netns.leftovers(topology.tag)
        if problems or left:
            pytest.fail(f"cleanup problems: {problems}, namespaces left: {left}", pytrace=False)


def run_call(topology: netns.Topology, workdir: Path, config: dict, check_transmissions: int = 0) -> dict:
    """Runs the two peers (client 1 offers, client 2 answers) and returns their results."""
    workdir.mkdir(parents=True, exist_ok=True)
    procs = {}
    for role, ns in (("offerer", topology.c1), ("answerer", topology.c2)):
        cmd = [sys.executable, str(PEER_SCRIPT), "peer", "--role", role, "--dir", str(workdir),
               "--config", json.dumps(config), "--messages", str(MESSAGES), "--timeout", str(PEER_TIMEOUT)]
        if check_transmissions:
            cmd += ["--check-transmissions", str(check_transmissions)]
        procs[role] = topology.start(ns, cmd, workdir / f"{role}.log")
    # Bounded: each peer bounds every wait by PEER_TIMEOUT; this bounds the whole.
    deadline = time.monotonic() + 4 * PEER_TIMEOUT + 10
    for role, proc in procs.items():
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    topology.stop_processes()
    results = {}
    for role in procs:
        path = workdir / f"result-{role}.json"
        log = (workdir / f"{role}.log").read_text(errors="replace")[-3000:]
        if not path.exists():
            pytest.fail(f"{role} wrote no result (exit {procs[role].returncode}); log:\n{log}", pytrace=False)
        results[role] = json.loads(path.read_text())
        results[role]["log"] = log
    return results


def relayd_metric(topology: netns.Topology, relayd: RelayServer, sample: str) -> float:
    """One sample of relayd's /metrics (e.g. 'relayd_error_responses_total{code="403"}'),
    read from inside the public namespace; 0 if absent."""
    script = ("import urllib.request,sys;"
              f"sys.stdout.write(urllib.request.urlopen('{relayd.api_url}/metrics', timeout=5).read().decode())")
    done = subprocess.run(topology.exec_prefix(topology.pub) + [sys.executable, "-c", script],
                          capture_output=True, text=True, timeout=20)
    assert done.returncode == 0, f"GET /metrics in {topology.pub}: {done.stderr}"
    for line in done.stdout.splitlines():
        if line.startswith(sample + " "):
            return float(line.split()[-1])
    return 0.0


def turn_server(relayd: RelayServer, user: str) -> dict:
    username, password = relayd.credentials(user)
    return {"urls": [f"turn:{relayd.host}:{relayd.port}?transport=udp"], "username": username,
            "credential": password}


def test_topology_nats_map_clients_to_their_outside_address(world):
    topology, relayd = ready(world)
    assert relayd.probe_mapped[0] == topology.nat1_outside, relayd.probe_mapped
    for ns in (topology.nat1, topology.nat2):
        rules = topology.nat_ruleset_listing(ns)
        assert "masquerade random" in rules and "policy drop" in rules, rules


def test_a_without_turn_ice_fails_behind_the_nats(world, tmp_path):
    topology, relayd = ready(world)
    config = {"iceServers": [{"urls": [f"stun:{relayd.host}:{relayd.port}"]}], "policy": "all"}
    started = time.monotonic()
    results = run_call(topology, tmp_path / "stun-only", config, check_transmissions=FAIL_TRANSMISSIONS)
    elapsed = time.monotonic() - started
    outside = {"offerer": topology.nat1_outside, "answerer": topology.nat2_outside}
    private = {"offerer": topology.client1_ip, "answerer": topology.client2_ip}
    for role, result in results.items():
        context = json.dumps(result, indent=1)[:4000]
        assert "error" not in result, context
        types = {(c["type"], c["ip"]) for c in result["local_candidates"]}
        # The peer saw its private address and, through relayd's STUN, its NAT's outside one.
        assert ("host", private[role]) in types, context
        assert ("srflx", outside[role]) in types, context
        assert not any(t == "relay" for t, _ in types), context
        assert result["ice_state"] == "failed", context
        assert not result["connected"], context
        assert not result.get("ice_timeout"), context
    print(f"\nICE failed without TURN after {[r['ice_seconds'] for r in results.values()]} s "
          f"(both peers done in {elapsed:.1f} s)")


@pytest.mark.parametrize("policy", ["relay", "all"])
def test_b_with_turn_the_call_goes_through_relayd(world, tmp_path, policy):
    topology, relayd = ready(world)
    servers = [turn_server(relayd, f"nat-{policy}")]
    if policy == "all":
        servers.insert(0, {"urls": [f"stun:{relayd.host}:{relayd.port}"]})
    denied = 'relayd_error_responses_total{code="403"}'
    denied_before = relayd_metric(topology, relayd, denied)
    results = run_call(topology, tmp_path / f"turn-{policy}", {"iceServers": servers, "policy": policy})
    denied_now = relayd_metric(topology, relayd, denied) - denied_before
    for role, result in results.items():
        context = json.dumps(result, indent=1)[:4000]
        assert "error" not in result, context
        assert result["connected"] and result["ice_state"] == "completed", context
        if policy == "relay":
            assert {c["type"] for c in result["local_candidates"]} == {"relay"}, context
        pair = result["selected_pair"]
        assert pair is not None, context
        for end in ("local", "remote"):
            assert pair[end]["type"] == "relay", context
            assert pair[end]["ip"] == relayd.host, context
            assert relayd.min_port <= pair[end]["port"] <= relayd.max_port, context
        assert result["received"] == MESSAGES and result["intact"], context
    # Relay to relay, relayd's default peer policy refused nothing although its own
    # address is in TEST-NET-3. With "all" the peers also ask for permissions to each
    # other's host (10/8) and srflx (TEST-NET-3) addresses, which it refuses with 403.
    if policy == "relay":
        assert denied_now == 0, f"relayd answered {denied_now:.0f} requests with 403"
    print(f"\n{policy}: {denied_now:.0f} permission requests refused (403) by the peer policy; "
          f"ICE completed after {[r['ice_seconds'] for r in results.values()]} s, "
          f"{MESSAGES} messages each way intact")
