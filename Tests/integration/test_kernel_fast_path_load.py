"""The kernel fast path under a load no user-space client on this machine could offer
(docs/kernel-fast-path.md, "Max rate"): the hosts of test_kernel_fast_path_netns.py, relay-bench
setting up 100 external-peer clients of relayd (`--flows-file`), and the benchmark's kernel load
generator (kernel-loadgen: a BPF program in live-frames mode, with an XDP sink on each endpoint's
veth end) sending 50,000 packets a second each way for two seconds, ChannelData from the
clients and the peer's data to the relayed addresses. Nothing is lost, and relayd's counters,
read back from the kernel, match what was sent to the packet. relayd only; needs root."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

import test_kernel_fast_path_netns
from conftest import RelayServer
from test_kernel_fast_path_netns import (  # noqa: F401  (hosts is a fixture)
    CLIENT_IP, OBJECT, PEER_IP, RELAY_CLIENT_SIDE, RELAY_PEER_SIDE, SECRET, TIMEOUT, hosts, ip, relay_metrics,
    relayd_command, wait_for,
)

# 100,000 packets a second through veths for two seconds, none lost: the machine to itself
# (Tests/integration/README.md).
pytestmark = [*test_kernel_fast_path_netns.pytestmark, pytest.mark.serial]

RATE = 50_000
SECONDS = 2
LOADGEN_OBJECT = OBJECT.with_name("relayd_loadgen.bpf.o")

# A veth end with GRO on runs NAPI, which it needs to receive frames another end transmits with
# XDP (ndo_xdp_xmit). ETHTOOL_SGRO through SIOCETHTOOL.
GRO_ON = """
import array, fcntl, socket, struct, sys
value = array.array("I", [0x2C, 1])
with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
    fcntl.ioctl(s.fileno(), 0x8946, struct.pack("16sP16x", sys.argv[1].encode(), value.buffer_info()[0]))
"""


def link_address(ns: str, link: str) -> str:
    out = subprocess.run(["ip", "-n", ns, "-br", "link", "show", "dev", link], check=True, timeout=10,
                         capture_output=True, text=True).stdout
    return out.split()[2]


@pytest.mark.parametrize("mode", ["tc", "xdp"])
def test_a_kernel_generated_load_is_relayed_without_loss_and_counted_exactly(hosts, tmp_path, mode):
    binaries = Path(RelayServer.default_binary("relayd")).parent
    conf = tmp_path / "relayd.conf"
    conf.write_text("")
    proc, log = hosts.start(hosts.relay, "relayd", relayd_command(
        conf, RELAY_CLIENT_SIDE, RELAY_PEER_SIDE, PEER_IP, "--kernel-offload=on", "--allocate-rate-limit=0",
        *[f"--kernel-offload-interface={link}" for link in hosts.relay_links[:2]],
        *(["--kernel-offload-xdp"] if mode == "xdp" else [])))
    wait_for(lambda: "kernel fast path attached" in log.read_text(errors="replace") or proc.poll() is not None,
             "relayd to attach its program")
    assert proc.poll() is None, log.read_text(errors="replace")
    if mode == "tc":
        for link in hosts.relay_links[:2]:
            hosts.run(hosts.relay, ["python3", "-c", GRO_ON, link])
    flows = tmp_path / "flows"
    hosts.start(hosts.client, "relay-bench", [
        str(binaries / "relay-bench"), "--server", f"{RELAY_CLIENT_SIDE}:3478", "--secret", SECRET,
        "--client-ip", CLIENT_IP, "--peer-ip", PEER_IP, "--peer-netns", hosts.peer, "--pattern", "external-peer",
        "--pairs", "50", "--payload", "100", "--flows-file", str(flows), "--hold", "120",
    ])
    wait_for(flows.exists, "relay-bench to set up its clients", timeout=30)
    assert len(flows.read_text().splitlines()) == 101
    # XDP relays a route once relayd knows the next hop's link-layer address. The client's is in
    # the relay's neighbour table from the set-up; one datagram to the peer puts the peer's there,
    # and relayd fills it into the routes within a second or two.
    hosts.run(hosts.relay, ["python3", "-c", "import socket, sys; socket.socket(socket.AF_INET, socket.SOCK_DGRAM)"
                            ".sendto(b'.', (sys.argv[1], 9))", PEER_IP])
    time.sleep(2.5)
    start = time.time_ns() + 1_500_000_000
    sides = []
    for ns, side, link, relay_link in ((hosts.client, "client", hosts.client_link, hosts.relay_links[0]),
                                       (hosts.peer, "peer", hosts.peer_link, hosts.relay_links[1])):
        ip("-n", ns, "link", "add", "anchor", "type", "veth", "peer", "name", "anchor2")
        sides.append(hosts.start(ns, f"loadgen-{side}", [
            str(binaries / "kernel-loadgen"), "--object", str(LOADGEN_OBJECT), "--flows", str(flows),
            "--side", side, "--interface", link, "--anchor", "anchor",
            "--gateway-mac", link_address(hosts.relay, relay_link), "--server", f"{RELAY_CLIENT_SIDE}:3478",
            "--payload", "100", "--rate", str(RATE), "--duration", str(SECONDS), "--start-at", str(start),
        ]))
    results = {}
    for (generator, output), side in zip(sides, ("client", "peer")):
        assert generator.wait(timeout=TIMEOUT) == 0, output.read_text()
        results[side] = json.loads(output.read_text().strip().splitlines()[-1])
    print(f"{mode}: {results}")
    sent = RATE * SECONDS
    assert results["client"]["sent"] == sent and results["peer"]["sent"] == sent
    assert results["peer"]["received"] == sent, "lost on the way to the peer"
    assert results["client"]["received"] == sent, "lost on the way to the clients"
    time.sleep(2.5)
    found, xdp = relay_metrics(hosts)
    print(f"{mode}: offloaded {found[('relayd_offloaded_packets_total', 'client_to_peer')]} to the peer, "
          f"{found[('relayd_offloaded_packets_total', 'peer_to_client')]} back, XDP {xdp}")
    for direction in ("client_to_peer", "peer_to_client"):
        assert found[("relayd_offloaded_packets_total", direction)] == sent, direction
        assert found[("relayd_relayed_packets_total", direction)] == sent, direction
        assert found[("relayd_offloaded_bytes_total", direction)] == 100 * sent, direction
    if mode == "xdp":
        assert xdp == 2 * sent
    else:
        assert xdp == 0
