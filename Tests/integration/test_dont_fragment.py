"""DONT-FRAGMENT (RFC 8656 §7.2, §18.9) between hosts: the namespaces of
test_kernel_fast_path_netns.py, with the link between the relay and the peer host at an MTU of
1,280. relayd relays in user space. A client sends ChannelData of 100, 1,200 and 1,400 bytes to
a peer on that host. Without DONT-FRAGMENT the 1,400-byte datagrams (1,428 bytes of IPv4) leave
the relay in fragments and arrive whole. With it they are not sent at all (relayd counts a send
failure), and the others still arrive. The same holds for Send indications that carry
DONT-FRAGMENT themselves (RFC 8656 §11.2) in an allocation that did not ask for it.

With a router between the relay and a farther peer whose next link has an MTU of 1,280, the client
of a DONT-FRAGMENT allocation learns the path MTU: the router's ICMP "fragmentation needed", and
then the relay's own refusals, reach it as Data indications with ICMP (3, 4, 1280) (RFC 8656
§11.5). relayd only; needs root."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from test_kernel_fast_path_netns import (  # noqa: F401  (hosts is a fixture)
    CLIENT_IP, PEER_IP, RELAY_CLIENT_SIDE, RELAY_PEER_SIDE, SECRET, hosts, ip, metrics_text, pytestmark, relayd_command,
    wait_for,
)

SIZES = [100, 1200, 1400]
# Listens on the peer host, says when it is bound (a datagram sent earlier would bring the client
# a port-unreachable ICMP), and prints the sizes of the datagrams that arrived (whole, after
# reassembly) as one JSON list.
PEER = """
import json, socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], int(sys.argv[2])))
print("bound", flush=True)
s.settimeout(0.2)
end, sizes = time.monotonic() + float(sys.argv[3]), []
while time.monotonic() < end:
    try:
        sizes.append(len(s.recv(65536)))
    except socket.timeout:
        pass
print(json.dumps(sorted(set(sizes))))
"""


@pytest.mark.parametrize("dont_fragment", [False, True, "send"], ids=["fragments", "dont-fragment", "per-indication"])
def test_dont_fragment_keeps_oversized_datagrams_from_being_fragmented(hosts, tmp_path, dont_fragment):
    for ns, link in ((hosts.relay, hosts.relay_links[1]), (hosts.peer, hosts.peer_link)):
        ip("-n", ns, "link", "set", "dev", link, "mtu", "1280")
    conf = tmp_path / "relayd.conf"
    conf.write_text("")
    proc, log = hosts.start(hosts.relay, "relayd", relayd_command(conf, RELAY_CLIENT_SIDE, RELAY_PEER_SIDE, PEER_IP))
    wait_for(lambda: "relayd started" in log.read_text(errors="replace") or proc.poll() is not None, "relayd to start")
    assert proc.poll() is None, log.read_text(errors="replace")
    peer, peer_log = hosts.start(hosts.peer, "peer", ["python3", "-c", PEER, PEER_IP, "6000", "6"])
    wait_for(lambda: "bound" in peer_log.read_text(errors="replace") or peer.poll() is not None, "the peer to bind")
    client = str(Path(__file__).with_name("netns_sizes_client.py"))
    sent = json.loads(hosts.run(hosts.client, [
        "python3", client, RELAY_CLIENT_SIDE, "3478", SECRET, PEER_IP, "6000",
        {False: "0", True: "1", "send": "send"}[dont_fragment], CLIENT_IP, *map(str, SIZES)]).strip().splitlines()[-1])
    assert sent["sent"] == SIZES
    peer.wait(timeout=20)
    arrived = json.loads(peer_log.read_text().strip().splitlines()[-1])
    print(f"DONT-FRAGMENT {dont_fragment}: arrived {arrived}")
    assert arrived == ([100, 1200] if dont_fragment else SIZES)
    # Each 1,400-byte datagram relayd could not send unfragmented is counted.
    failures = int(re.search(r"^relayd_send_failures_total (\d+)$", metrics_text(hosts), re.M).group(1))
    assert failures == (3 if dont_fragment else 0)
    # Each refusal also reaches the client as "fragmentation needed" with the link's MTU (the
    # relay host's own refusal names no port; docs/icmp.md).
    assert all(icmp == [3, 4, 1280, PEER_IP, 0] for icmp in sent["icmp"]), sent["icmp"]
    assert len(sent["icmp"]) == (3 if dont_fragment else 0)


FAR_PEER = "10.77.9.2"  # behind the peer host, which routes to it over a link with MTU 1280


def test_a_router_with_a_smaller_mtu_tells_the_client_fragmentation_needed(hosts, tmp_path):
    # The peer host forwards 10.77.9.0/24 out of a veth of MTU 1280 (its other end stays in the
    # same namespace, and nothing answers for 10.77.9.2): a 1,428-byte datagram with DF set gets
    # ICMP type 3 code 4 with that MTU back from it.
    ip("-n", hosts.peer, "link", "add", "far0", "type", "veth", "peer", "name", "far1")
    ip("-n", hosts.peer, "link", "set", "far1", "up")
    ip("-n", hosts.peer, "link", "set", "far0", "mtu", "1280", "up")
    ip("-n", hosts.peer, "addr", "add", "10.77.9.1/24", "dev", "far0")
    hosts.run(hosts.peer, ["sh", "-c", "echo 1 > /proc/sys/net/ipv4/ip_forward"])
    ip("-n", hosts.relay, "route", "add", "10.77.9.0/24", "via", PEER_IP)
    conf = tmp_path / "relayd.conf"
    conf.write_text("")
    proc, log = hosts.start(hosts.relay, "relayd", relayd_command(conf, RELAY_CLIENT_SIDE, RELAY_PEER_SIDE, FAR_PEER))
    wait_for(lambda: "relayd started" in log.read_text(errors="replace") or proc.poll() is not None, "relayd to start")
    assert proc.poll() is None, log.read_text(errors="replace")
    client = str(Path(__file__).with_name("netns_sizes_client.py"))
    report = json.loads(hosts.run(hosts.client, [
        "python3", client, RELAY_CLIENT_SIDE, "3478", SECRET, FAR_PEER, "6000", "1", CLIENT_IP, "100", "1400",
    ]).strip().splitlines()[-1])
    print(f"ICMP to the client: {report['icmp']}")
    # One for each of the three 1,400-byte datagrams: the router's for the first, naming the
    # peer's port; the relay's own refusals (it now knows the path MTU) for the others, with port
    # 0 (RFC 8656 §11.5: the port when known). None for the 100-byte ones.
    assert report["icmp"] == [[3, 4, 1280, FAR_PEER, 6000]] + [[3, 4, 1280, FAR_PEER, 0]] * 2
    indications = int(re.search(r"^relayd_icmp_indications_total (\d+)$", metrics_text(hosts), re.M).group(1))
    assert indications == 3
