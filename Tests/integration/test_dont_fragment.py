"""DONT-FRAGMENT (RFC 8656 §7.2, §18.9) between hosts: the namespaces of
test_kernel_fast_path_netns.py, with the link between the relay and the peer host at an MTU of
1,280. relayd relays in user space. A client sends ChannelData of 100, 1,200 and 1,400 bytes to
a peer on that host. Without DONT-FRAGMENT the 1,400-byte datagrams (1,428 bytes of IPv4) leave
the relay in fragments and arrive whole. With it they are not sent at all (relayd counts a send
failure), and the others still arrive. relayd only; needs root."""

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
# Listens on the peer host and prints the sizes of the datagrams that arrived (whole, after
# reassembly) as one JSON list.
PEER = """
import json, socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], int(sys.argv[2])))
s.settimeout(0.2)
end, sizes = time.monotonic() + float(sys.argv[3]), []
while time.monotonic() < end:
    try:
        sizes.append(len(s.recv(65536)))
    except socket.timeout:
        pass
print(json.dumps(sorted(set(sizes))))
"""


@pytest.mark.parametrize("dont_fragment", [False, True], ids=["fragments", "dont-fragment"])
def test_dont_fragment_keeps_oversized_datagrams_from_being_fragmented(hosts, tmp_path, dont_fragment):
    for ns, link in ((hosts.relay, hosts.relay_links[1]), (hosts.peer, hosts.peer_link)):
        ip("-n", ns, "link", "set", "dev", link, "mtu", "1280")
    conf = tmp_path / "relayd.conf"
    conf.write_text("")
    proc, log = hosts.start(hosts.relay, "relayd", relayd_command(conf, RELAY_CLIENT_SIDE, RELAY_PEER_SIDE, PEER_IP))
    wait_for(lambda: "relayd started" in log.read_text(errors="replace") or proc.poll() is not None, "relayd to start")
    assert proc.poll() is None, log.read_text(errors="replace")
    peer, peer_log = hosts.start(hosts.peer, "peer", ["python3", "-c", PEER, PEER_IP, "6000", "6"])
    client = str(Path(__file__).with_name("netns_sizes_client.py"))
    sent = json.loads(hosts.run(hosts.client, [
        "python3", client, RELAY_CLIENT_SIDE, "3478", SECRET, PEER_IP, "6000", "1" if dont_fragment else "0", CLIENT_IP,
        *map(str, SIZES)]).strip().splitlines()[-1])
    assert sent == {"sent": SIZES}
    peer.wait(timeout=20)
    arrived = json.loads(peer_log.read_text().strip().splitlines()[-1])
    print(f"DONT-FRAGMENT {dont_fragment}: arrived {arrived}")
    assert arrived == ([100, 1200] if dont_fragment else SIZES)
    # Each 1,400-byte datagram relayd could not send unfragmented is counted.
    failures = int(re.search(r"^relayd_send_failures_total (\d+)$", metrics_text(hosts), re.M).group(1))
    assert failures == (3 if dont_fragment else 0)
