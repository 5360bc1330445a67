"""relayd's own relay address is a peer only at ports a live allocation holds (RFC 8656 §21.3:
the relay must not become a proxy into what its operator did not mean to open;
docs/peer-policy.md).

A UDP service on the relay's own address whose port falls in the relay port range (an SFU, a
game server: the default range 49152-65535 overlaps Linux's ephemeral ports) must stay out of
reach of anyone holding TURN credentials, while two clients of the relay still reach each
other's relayed addresses. The server runs with the default peer policy (no
allow-loopback-peers): loopback is open only as relayed addresses of live allocations.
"""

from __future__ import annotations

import socket
import time

import pytest

from conftest import LOOPBACK, running, server_kind
from stunclient import Class, TurnClient, recv_from
from test_adversarial import DefaultPolicyServer, IS_COTURN, allocate, error_code

QUIET = 0.4
RANGE = 100


@pytest.fixture
def setup(tmp_path):
    server = DefaultPolicyServer(server_kind(), tmp_path, relay_range_width=RANGE)
    # The co-located service: bound before relayd starts, on a port of its relay range.
    service = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    service.bind((LOOPBACK, server.min_port + RANGE // 2))
    with running(server):
        a, b = TurnClient(server.address), TurnClient(server.address)
        try:
            assert allocate(server, a, user="a").cls == Class.SUCCESS
            assert allocate(server, b, user="b").cls == Class.SUCCESS
            yield server, service, a, b
        finally:
            a.close()
            b.close()
            service.close()


def test_a_service_on_a_relay_port_is_refused(setup):
    """The issue's repro: CreatePermission for 127.0.0.1:<service port in the relay range> is
    403 (coturn answers 403 too), and so is ChannelBind."""
    _, service, a, _ = setup
    target = service.getsockname()
    assert error_code(a.create_permission, target) == 403
    assert error_code(a.channel_bind, 0x4000, target) == 403


@pytest.mark.skipif(IS_COTURN, reason="coturn denies loopback peers outright, relayed addresses included")
def test_relay_to_relay_works_and_the_service_stays_unreachable_both_ways(setup):
    """A's permission for B's relayed address (IP 127.0.0.1) carries data to B, but neither a
    Send nor the service's own datagrams cross between A and the service's port."""
    _, service, a, b = setup
    a.create_permission(b.relayed)
    b.create_permission(a.relayed)
    a.send_indication(b.relayed, b"to b")
    got = b.receive(2.0)
    assert got is not None and got.payload == b"to b" and got.peer == a.relayed
    # The IP is permitted; the service's port is not a live allocation.
    a.send_indication(service.getsockname(), b"to the service")
    assert recv_from(service, QUIET) is None
    service.sendto(b"from the service", a.relayed)
    assert a.receive(QUIET) is None


@pytest.mark.skipif(IS_COTURN, reason="coturn denies loopback peers outright, relayed addresses included")
def test_when_the_target_allocation_ends_its_permission_passes_nothing(setup):
    """B deletes its allocation; a socket that binds B's old port gets nothing of A's, and what it
    sends does not reach A, although A's permission for the IP is still live."""
    _, _, a, b = setup
    a.create_permission(b.relayed)
    old = b.relayed
    b.refresh(0)
    squatter = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        # relayd closes the deleted allocation's socket at the end of its loop's pass.
        deadline = time.monotonic() + 2.0
        while True:
            try:
                squatter.bind(old)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)
        a.send_indication(old, b"stale")
        assert recv_from(squatter, QUIET) is None
        squatter.sendto(b"from the old port", a.relayed)
        assert a.receive(QUIET) is None
    finally:
        squatter.close()
