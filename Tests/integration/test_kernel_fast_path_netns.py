"""The kernel fast path between hosts (docs/kernel-fast-path.md): four network namespaces
this test creates, joined by veth pairs, stand for two client hosts, the relay host and a peer
host:

    client (10.77.1.2) --veth-- (10.77.1.1) relay (10.77.2.1) --veth-- (10.77.2.2) peer
                                  relay (10.77.3.1) --veth-- (10.77.3.2) client 2

relayd listens on 10.77.1.1 only, runs in the relay namespace with `kernel-offload` on its
three veth ends; turnutils_uclient runs in both client namespaces at once, turnutils_peer in the
peer namespace. The kernel rewrites each ChannelData and sends it out of the peer-side interface
(bpf_redirect_neigh), and the peer's echoes out of the interface the routing table picks for
each client: client 2's leave by the third veth, not by the one carrying the server address.
Nothing is lost, and the kernel relayed everything. relayd only; needs root, `ip` (iproute2). Namespaces and processes are removed by
name and PID, also when the test fails."""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from conftest import RelayServer, server_kind
from test_uclient import CLIENTS, INTERVAL_MS, LENGTH, MESSAGES, parse_report

pytestmark = [
    pytest.mark.skipif(server_kind() != "relayd", reason="relayd's own kernel fast path"),
    pytest.mark.skipif(os.geteuid() != 0, reason="namespaces and BPF programs need root"),
    pytest.mark.skipif(shutil.which("ip") is None, reason="needs ip (iproute2)"),
]

CLIENT_IP, RELAY_CLIENT_SIDE = "10.77.1.2", "10.77.1.1"
RELAY_PEER_SIDE, PEER_IP = "10.77.2.1", "10.77.2.2"
CLIENT2_IP, RELAY_CLIENT2_SIDE = "10.77.3.2", "10.77.3.1"
SECRET = secrets.token_hex(16)
TIMEOUT = 60


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, timeout=10, capture_output=True)


class Hosts:
    """The three namespaces and the processes started in them."""

    def __init__(self, workdir: Path):
        tag = f"rf{os.getpid() % 10000}{secrets.token_hex(2)}"
        self.client, self.relay, self.peer, self.client2 = f"{tag}-c", f"{tag}-r", f"{tag}-p", f"{tag}-d"
        self.workdir = workdir
        self.procs: list[subprocess.Popen] = []
        created: list[str] = []
        try:
            for ns in (self.client, self.relay, self.peer, self.client2):
                ip("netns", "add", ns)
                created.append(ns)
                ip("-n", ns, "link", "set", "lo", "up")
            self.client_link, self.peer_link = f"{tag}c", f"{tag}p"
            self._link(self.client_link, self.client, CLIENT_IP, f"{tag}cr", RELAY_CLIENT_SIDE)
            self._link(self.peer_link, self.peer, PEER_IP, f"{tag}pr", RELAY_PEER_SIDE)
            self.client2_link = f"{tag}d"
            self._link(self.client2_link, self.client2, CLIENT2_IP, f"{tag}dr", RELAY_CLIENT2_SIDE)
            ip("-n", self.client2, "route", "add", "default", "via", RELAY_CLIENT2_SIDE)
            self.relay_links = [f"{tag}cr", f"{tag}pr", f"{tag}dr"]
        except BaseException:
            for ns in created:
                subprocess.run(["ip", "netns", "del", ns], timeout=10, capture_output=True)
            raise

    def _link(self, outer: str, ns: str, address: str, inner: str, relay_address: str) -> None:
        ip("link", "add", outer, "type", "veth", "peer", "name", inner)
        ip("link", "set", outer, "netns", ns)
        ip("link", "set", inner, "netns", self.relay)
        ip("-n", ns, "addr", "add", f"{address}/24", "dev", outer)
        ip("-n", self.relay, "addr", "add", f"{relay_address}/24", "dev", inner)
        ip("-n", ns, "link", "set", outer, "up")
        ip("-n", self.relay, "link", "set", inner, "up")

    def start(self, ns: str, name: str, cmd: list[str]) -> tuple[subprocess.Popen, Path]:
        log = self.workdir / f"{name}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(["ip", "netns", "exec", ns, *cmd], stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT)
        self.procs.append(proc)
        return proc, log

    def run(self, ns: str, cmd: list[str]) -> str:
        return subprocess.run(["ip", "netns", "exec", ns, *cmd], check=True, timeout=TIMEOUT,
                              capture_output=True, text=True).stdout

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=10)
        for ns in (self.client, self.relay, self.peer, self.client2):
            subprocess.run(["ip", "netns", "del", ns], timeout=10, capture_output=True)


@pytest.fixture
def hosts(tmp_path):
    h = Hosts(tmp_path)
    try:
        yield h
    finally:
        h.close()


def wait_for(predicate, what: str, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    pytest.fail(f"timed out waiting for {what}")


def relayd_command(conf: Path, listen: str, relay: str, peer: str, *extra: str) -> list[str]:
    """relayd in the relay namespace: listening on `listen`, relaying from `relay`, `peer` allowed
    as a peer, REST credentials under SECRET, UDP only, its HTTP API on 127.0.0.1:8080."""
    return [
        RelayServer.default_binary("relayd"), "-c", str(conf), f"--listening-ip={listen}", "--listening-port=3478",
        f"--relay-ip={relay}", "--min-port=50000", "--max-port=50999", "--use-auth-secret",
        f"--static-auth-secret={SECRET}", "--realm=fastpath.test", f"--allowed-peer-ip={peer}", "--no-tcp", "--no-tls",
        "--api-listening-ip=127.0.0.1", "--api-listening-port=8080", "--drain-timeout=0", "--unauth-rate-limit=0",
        *extra,
    ]


def metrics_text(hosts: Hosts) -> str:
    """relayd's /metrics, read inside the relay namespace."""
    return hosts.run(hosts.relay, ["python3", "-c",
                                   "import urllib.request;"
                                   "print(urllib.request.urlopen('http://127.0.0.1:8080/metrics').read().decode())"])


def relay_metrics(hosts: Hosts) -> tuple[dict[tuple[str, str], int], int]:
    """relayd's per-direction counters from /metrics in the relay namespace, by (metric name,
    direction), and the packets its XDP program relayed."""
    metrics = metrics_text(hosts)
    found = {(m[0], m[1]): int(m[2]) for m in
             re.findall(r'^(relayd_[a-z_]+)\{direction="([a-z_]+)"\} (\d+)$', metrics, re.M)}
    xdp = int(re.search(r"^relayd_offloaded_xdp_packets_total (\d+)$", metrics, re.M).group(1))
    return found, xdp


OBJECT = Path(__file__).resolve().parents[2] / ".build" / "bpf" / "relayd_fastpath.bpf.o"


@pytest.mark.parametrize("mode", ["tc", "xdp"])
def test_channels_between_hosts_are_relayed_in_the_kernel(hosts, tmp_path, mode):
    """With `mode` xdp relayd also attaches its XDP program natively on its three veth ends.
    A frame an XDP program redirects into a veth reaches the other end only if that end runs
    NAPI (an XDP program of its own, or GRO), so the test gives the outer ends one: the same
    object, whose empty maps pass everything. Routes get their next hop's link-layer address
    once the neighbour table has it (the client's at once, the peer's after the first packets
    the TC program sent), and from then on the XDP program relays."""
    if mode == "xdp":
        for ns, link in ((hosts.client, hosts.client_link), (hosts.client2, hosts.client2_link),
                         (hosts.peer, hosts.peer_link)):
            ip("-n", ns, "link", "set", "dev", link, "xdpdrv", "obj", str(OBJECT), "sec", "xdp")
    conf = tmp_path / "relayd.conf"
    conf.write_text("")
    proc, log = hosts.start(hosts.relay, "relayd", relayd_command(
        conf, RELAY_CLIENT_SIDE, RELAY_PEER_SIDE, PEER_IP, "--kernel-offload=on",
        *[f"--kernel-offload-interface={link}" for link in hosts.relay_links],
        *(["--kernel-offload-xdp"] if mode == "xdp" else [])))
    wait_for(lambda: "kernel fast path attached" in log.read_text(errors="replace") or proc.poll() is not None,
             "relayd to attach its program")
    assert proc.poll() is None, log.read_text(errors="replace")
    if mode == "xdp":
        assert f"xdp={','.join(hosts.relay_links)}" in log.read_text(errors="replace")
    hosts.start(hosts.peer, "turnutils_peer", ["turnutils_peer", "-L", PEER_IP, "-p", "6000"])
    # Captures at the far ends: what the kernel sent the peer (to port 6000) and the ChannelData
    # it sent each client (from relayd's listener port; relayd's own STUN answers are not counted).
    capture = str(Path(__file__).with_name("udpcapture.py"))
    captures = [
        (*hosts.start(hosts.peer, "capture-peer", ["python3", capture, hosts.peer_link, "6000", "30"]), "peer", 2),
        (*hosts.start(hosts.client, "capture-client", ["python3", capture, hosts.client_link, "-3478", "30",
                                                       "channeldata"]), "client", 1),
        (*hosts.start(hosts.client2, "capture-client2", ["python3", capture, hosts.client2_link, "-3478", "30",
                                                         "channeldata"]), "client 2", 1),
    ]
    time.sleep(0.5)
    uclients = [
        hosts.start(ns, name, [
            "turnutils_uclient", "-c", "-m", str(CLIENTS), "-n", str(MESSAGES), "-l", str(LENGTH),
            "-z", str(INTERVAL_MS), "-W", SECRET, "-u", name, "-p", "3478", "-L", address,
            "-e", PEER_IP, "-r", "6000", RELAY_CLIENT_SIDE,
        ])
        for ns, name, address in ((hosts.client, "uclient", CLIENT_IP), (hosts.client2, "uclient2", CLIENT2_IP))
    ]
    expected = CLIENTS * MESSAGES
    for uclient, output_log in uclients:
        uclient.wait(timeout=TIMEOUT)
        output = output_log.read_text(errors="replace")
        report = parse_report(output)
        assert report.send_msgs == expected, output[-3000:]
        assert report.recv_msgs == expected, output[-3000:]
        assert report.lost == 0
    time.sleep(2.5)
    found, xdp = relay_metrics(hosts)
    kernel_to_peer = found[("relayd_offloaded_packets_total", "client_to_peer")]
    kernel_to_client = found[("relayd_offloaded_packets_total", "peer_to_client")]
    print(f"kernel relayed {kernel_to_peer} to the peer, {kernel_to_client} to the clients, of {2 * expected} each way")
    assert found[("relayd_relayed_packets_total", "client_to_peer")] == 2 * expected
    assert found[("relayd_relayed_packets_total", "peer_to_client")] == 2 * expected
    assert kernel_to_peer == 2 * expected
    assert kernel_to_client == 2 * expected
    print(f"of {kernel_to_peer + kernel_to_client} kernel-relayed packets, XDP relayed {xdp}")
    if mode == "xdp":
        assert xdp >= (kernel_to_peer + kernel_to_client) // 2, xdp
    else:
        assert xdp == 0
    # Every datagram the kernel rewrote carried correct IPv4 and UDP checksums on the wire, and
    # each client host got its own share.
    for proc, log, what, share in captures:
        proc.wait(timeout=45)
        seen = json.loads(log.read_text().strip().splitlines()[-1])
        print(f"capture at the {what}: {seen}")
        assert seen["seen"] >= share * expected, seen
        assert seen["bad_ip_checksum"] == 0 and seen["bad_udp_checksum"] == 0, seen


CLIENT6, RELAY_CLIENT6 = "fd00:77:1::2", "fd00:77:1::1"
RELAY_PEER6, PEER6 = "fd00:77:2::1", "fd00:77:2::2"


@pytest.mark.parametrize("mode", ["tc", "xdp"])
def test_ipv6_channels_between_hosts_are_relayed_in_the_kernel(hosts, tmp_path, mode):
    """The same hosts over IPv6 (RFC 6156): a client with an IPv6 relayed address and an echo
    peer on the peer host. The kernel relays every message both ways, each echo arrives
    intact, and every datagram the kernel rewrote carries a correct UDP checksum on the wire."""
    for ns, link, address in ((hosts.client, hosts.client_link, CLIENT6), (hosts.peer, hosts.peer_link, PEER6),
                              (hosts.relay, hosts.relay_links[0], RELAY_CLIENT6),
                              (hosts.relay, hosts.relay_links[1], RELAY_PEER6)):
        ip("-n", ns, "addr", "add", f"{address}/64", "dev", link, "nodad")
    ip("-n", hosts.client, "-6", "route", "add", "default", "via", RELAY_CLIENT6)
    ip("-n", hosts.peer, "-6", "route", "add", "default", "via", RELAY_PEER6)
    if mode == "xdp":
        for ns, link in ((hosts.client, hosts.client_link), (hosts.peer, hosts.peer_link)):
            ip("-n", ns, "link", "set", "dev", link, "xdpdrv", "obj", str(OBJECT), "sec", "xdp")
    conf = tmp_path / "relayd.conf"
    conf.write_text("")
    proc, log = hosts.start(hosts.relay, "relayd", relayd_command(
        conf, RELAY_CLIENT6, RELAY_PEER6, PEER6, "--kernel-offload=on",
        *[f"--kernel-offload-interface={link}" for link in hosts.relay_links[:2]],
        *(["--kernel-offload-xdp"] if mode == "xdp" else [])))
    wait_for(lambda: "kernel fast path attached" in log.read_text(errors="replace") or proc.poll() is not None,
             "relayd to attach its program")
    assert proc.poll() is None, log.read_text(errors="replace")
    hosts.start(hosts.peer, "turnutils_peer", ["turnutils_peer", "-L", PEER6, "-p", "6000"])
    capture = str(Path(__file__).with_name("udpcapture.py"))
    at_peer, peer_log = hosts.start(hosts.peer, "capture-peer", ["python3", capture, hosts.peer_link, "6000", "20"])
    at_client, client_log = hosts.start(hosts.client, "capture-client",
                                        ["python3", capture, hosts.client_link, "-3478", "20", "channeldata"])
    time.sleep(0.5)
    messages = 300
    driver = str(Path(__file__).with_name("netns_turn_client.py"))
    result = json.loads(hosts.run(hosts.client, [
        "python3", driver, RELAY_CLIENT6, "3478", SECRET, PEER6, "6000", str(messages), "6", CLIENT6]).strip().splitlines()[-1])
    assert result == {"sent": messages, "echoed": messages, "intact": True}, result
    time.sleep(2.5)
    found, xdp = relay_metrics(hosts)
    print(f"IPv6, {mode}: kernel relayed {found[('relayd_offloaded_packets_total', 'client_to_peer')]} to the peer, "
          f"{found[('relayd_offloaded_packets_total', 'peer_to_client')]} back, XDP {xdp}")
    assert found[("relayd_offloaded_packets_total", "client_to_peer")] == messages
    assert found[("relayd_offloaded_packets_total", "peer_to_client")] == messages
    if mode == "xdp":
        assert xdp >= messages // 2, xdp
    for proc, log, share in ((at_peer, peer_log, messages), (at_client, client_log, messages)):
        proc.wait(timeout=40)
        seen = json.loads(log.read_text().strip().splitlines()[-1])
        print(f"capture: {seen}")
        assert seen["seen"] >= share, seen
        assert seen["bad_udp_checksum"] == 0, seen
