"""Unauthenticated floods: a per-source-IP limit on 401 answers, no per-source
state beyond the limiter's fixed table (memory stays flat), 401s carry nothing but
ERROR-CODE, REALM and NONCE, and a legitimate client from another address still gets an
allocation during the flood. Loopback only, bounded in time."""

from __future__ import annotations

import socket
import struct
import threading
import time

import pytest

from conftest import RelayServer, running, server_kind
from floods import flood, metric
from stunclient import Attr, Class, Method, StunMessage, TurnClient

RATE = 50  # unauth-rate-limit for this test (per second per source IP)
FLOOD_SECONDS = 3.0
LEGIT_SOURCE = "127.0.0.2"

pytestmark = [
    # A flood as fast as one core sends, with relayd's RSS measured: alone
    # (Tests/integration/README.md).
    pytest.mark.serial,
    pytest.mark.skipif(server_kind() != "relayd", reason="relayd's unauth-rate-limit"),
]


@pytest.fixture(scope="module")
def limited(tmp_path_factory):
    server = RelayServer("relayd", tmp_path_factory.mktemp("flood"),
                         extra_args=[f"--unauth-rate-limit={RATE}", f"--unauth-rate-burst={2 * RATE}",
                                     "--allocate-rate-limit=5"])
    with running(server):
        yield server


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def unauthenticated_allocate() -> bytes:
    req = StunMessage(Method.ALLOCATE, Class.REQUEST)
    req.add(Attr.REQUESTED_TRANSPORT, struct.pack("!B3x", 17))
    return req.encode()


def test_401s_are_minimal(limited):
    with TurnClient(limited.address) as client:
        challenge = client.allocate_unauthenticated()
        types = [t for t, _ in challenge.attributes]
        assert challenge.error_code()[0] == 401
        assert challenge.has(Attr.REALM) and challenge.has(Attr.NONCE)
        # PASSWORD-ALGORITHMS (RFC 8489 §9.2.4) is part of the challenge; SOFTWARE is not.
        assert set(types) <= {Attr.ERROR_CODE, Attr.REALM, Attr.NONCE, Attr.PASSWORD_ALGORITHMS, Attr.FINGERPRINT}, types


def test_flood_is_rate_limited_memory_flat_and_legit_clients_still_allocate(limited):
    pid = limited.proc.pid
    dropped_before = metric(limited, "relayd_dropped_packets_total", reason="rate_limit")
    # Warm up allocator/metrics paths so RSS growth reflects the flood only.
    with TurnClient(limited.address, bind_host=LEGIT_SOURCE) as warm:
        warm.allocate(*limited.credentials("warm"))
        warm.refresh(0)
    rss_before = rss_kib(pid)

    flooder = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    flooder.bind(("127.0.0.1", 0))
    request = unauthenticated_allocate()
    legit_result: dict = {}

    def legit():
        # A different source IP: its own bucket, unaffected by the flood.
        time.sleep(0.5)
        try:
            with TurnClient(limited.address, bind_host=LEGIT_SOURCE) as client:
                client.allocate(*limited.credentials("legit"))
                legit_result["relayed"] = client.relayed
                client.refresh(0)
        except Exception as e:  # reported below
            legit_result["error"] = repr(e)

    thread = threading.Thread(target=legit)
    thread.start()
    try:
        sent, answers = flood(flooder, limited.address, lambda: request, FLOOD_SECONDS)
    finally:
        flooder.close()
        thread.join(timeout=10)

    assert sent > 20 * RATE * FLOOD_SECONDS / 10, f"the flood itself was too slow to test anything ({sent} sent)"
    # Burst (2 x rate) plus the rate over the flood's duration, with one second of slack.
    allowed = 2 * RATE + RATE * (FLOOD_SECONDS + 1.5)
    assert answers <= allowed, f"{answers} answers to {sent} unauthenticated requests (limit ~{allowed})"
    assert answers >= RATE, f"only {answers} answers: the limit should still let {RATE}/s through"
    assert "relayed" in legit_result, legit_result
    time.sleep(0.3)
    dropped = metric(limited, "relayd_dropped_packets_total", reason="rate_limit") - dropped_before
    assert dropped >= sent - answers - 50, (dropped, sent, answers)
    growth = rss_kib(pid) - rss_before
    assert growth < 2048, f"RSS grew {growth} KiB during a flood of {sent} requests"
