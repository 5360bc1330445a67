"""A UDP relay socket is read from its allocation's first permission on (docs/architecture.md,
"Relay sockets"): before it, the socket holds only the kernel's smallest receive buffer and is
not polled; at the first CreatePermission what it queued is dropped, counted as no_permission
(RFC 8656 §9: those datagrams came without a permission), and it gets its full buffer. Seen
from outside: the socket's buffer in `ss`, the drop counter in /metrics, and what the client
receives.
"""

from __future__ import annotations

import re
import subprocess
import time

import pytest

from conftest import server_kind
from stunclient import TurnClient, udp_socket
from test_http_metrics import eventually, scrape, value

pytestmark = pytest.mark.skipif(server_kind() != "relayd", reason="relayd's relay socket life cycle")

WAIT = 3.0
QUIET = 0.5


def receive_buffer(relayed: tuple[str, int]) -> int:
    """The receive buffer (skmem rb) of the UDP socket bound to `relayed`, from ss."""
    out = subprocess.run(
        ["ss", "-uanmH", "src", f"{relayed[0]}:{relayed[1]}"], capture_output=True, text=True, timeout=10,
        check=True).stdout
    found = re.search(r"skmem:\(r\d+,rb(\d+),", out)
    assert found, f"no socket on {relayed}: {out!r}"
    return int(found.group(1))


def no_permission(server) -> float:
    return value(scrape(server), "relayd_dropped_packets_total", reason="no_permission")


def test_datagrams_before_the_first_permission_are_dropped_when_it_comes(relay):
    username, password = relay.credentials("watch")
    peer = udp_socket()
    try:
        with TurnClient(relay.address) as client:
            client.allocate(username, password)
            relayed = client.relayed
            # Not read yet: the kernel's smallest buffer (a few KiB), not relayd's 256 KiB.
            assert receive_buffer(relayed) < 16 * 1024
            time.sleep(0.3)
            before = no_permission(relay)
            for n in range(3):
                peer.sendto(b"early %d" % n, relayed)
            time.sleep(0.3)
            # Queued, not read: nothing counted yet.
            assert no_permission(relay) == before

            client.create_permission(peer.getsockname())
            samples = eventually(
                relay, lambda s: value(s, "relayd_dropped_packets_total", reason="no_permission") > before)
            dropped = value(samples, "relayd_dropped_packets_total", reason="no_permission") - before
            # At least the first fit in the small buffer; no more than were sent.
            assert 1 <= dropped <= 3, dropped
            assert receive_buffer(relayed) >= 256 * 1024
            # None of the early ones reaches the client; the next one does.
            assert client.receive(QUIET) is None
            peer.sendto(b"after the permission", relayed)
            got = client.receive(WAIT)
            assert got is not None and got.payload == b"after the permission"
            # A second permission changes nothing of the socket and drops nothing.
            client.create_permission(("127.0.0.2", 9))
            peer.sendto(b"still relayed", relayed)
            got = client.receive(WAIT)
            assert got is not None and got.payload == b"still relayed"
    finally:
        peer.close()
