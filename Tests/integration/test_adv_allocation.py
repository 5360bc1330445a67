"""Adversarial suite, part 3: allocation abuse (RFC 8656 §7.2, §9, §18.7).

Every REQUESTED-TRANSPORT value, LIFETIME 0xFFFFFFFF, EVEN-PORT churn without a port leak,
the per-user quota (486) and port exhaustion (508) with recovery when allocations end, and
more permissions than relayd's per-allocation cap (max-permissions-per-allocation, 32 by
default, answered 508 by Sources/RelayCore/Core/RelayCore+Permissions.swift).
"""

from __future__ import annotations

import struct

import pytest

from conftest import RelayServer, running, server_kind
from stunclient import Attr, Class, Method, TurnClient
from test_adversarial import (
    IS_COTURN,
    allocate,
    baseline_metric,
    coturn_differs,
    error_code,
    relayd_only,
    requested_transport,
    settle_metric,
)

MAX_LIFETIME = 1800
PERMISSION_CAP = 32


def code(resp) -> int | None:
    err = resp.error_code()
    return None if resp.cls == Class.SUCCESS else (err[0] if err else -1)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = RelayServer(server_kind(), tmp_path_factory.mktemp("allocation"),
                    extra_args=[f"--max-allocate-lifetime={MAX_LIFETIME}", "--relay-threads=1"])
    with running(s):
        yield s


@pytest.fixture(scope="module")
def credentials(server):
    """USERNAME, REALM, NONCE and key of one 401 dance, reused by the 256 probes."""
    with TurnClient(server.address) as client:
        assert allocate(server, client, user="rt").cls == Class.SUCCESS
        client.refresh(0)
        return client.username, client.realm, client.nonce, client.key


@pytest.mark.parametrize("protocol", [
    pytest.param(p, id=f"proto-{p}", marks=[] if p in (6, 17) else [
        coturn_differs("coturn answers an unknown REQUESTED-TRANSPORT with 400, not 442")])
    for p in range(256)])
def test_requested_transport_other_than_udp_is_442(server, credentials, protocol):
    """RFC 8656 §7.2: REQUESTED-TRANSPORT names the relay transport; relayd relays UDP, and TCP
    (RFC 6062) only for clients on TCP or TLS, so over UDP: UDP (17) -> success, TCP (6) -> 400
    (RFC 6062 §5.1; test_tcp_relay.py), any other protocol number -> 442."""
    with TurnClient(server.address) as client:
        client.username, client.realm, client.nonce, client.key = credentials
        resp = client.authenticated_request(Method.ALLOCATE,
                                            [(Attr.REQUESTED_TRANSPORT, requested_transport(protocol))])
        if protocol == 17:
            assert code(resp) is None
            client.refresh(0)
        elif protocol == 6:
            assert code(resp) == 400
        else:
            assert code(resp) == 442


@pytest.mark.parametrize("method", ["allocate", "refresh"])
def test_lifetime_ffffffff_is_capped_at_max_allocate_lifetime(server, method):
    """RFC 8656 §7.2, §8.2: the server caps the requested LIFETIME at its maximum."""
    with TurnClient(server.address) as client:
        huge = [(Attr.LIFETIME, struct.pack("!I", 0xFFFFFFFF))]
        resp = allocate(server, client, user="life", extra=huge if method == "allocate" else [])
        assert code(resp) is None
        if method == "refresh":
            resp = client.refresh(0xFFFFFFFF)
        assert resp.lifetime() == MAX_LIFETIME
        client.refresh(0)


def even_port(reserve: bool) -> tuple[int, bytes]:
    """EVEN-PORT (RFC 8656 §18.7): the R bit asks to reserve the next port too."""
    return (Attr.EVEN_PORT, bytes([0x80 if reserve else 0]))


RESERVATION_TOKEN = 0x0022


@relayd_only
def test_even_port_churn_leaks_no_port(server):
    """Repeated Allocate with EVEN-PORT, with and without R (RFC 8656 §7.2, §18.7): each
    relayed port is even; a second EVEN-PORT Allocate on a live 5-tuple is 437 and claims
    nothing; a RESERVATION-TOKEN survives a refused Allocate (442) and then gives port + 1.
    Once the allocations end, relayd_relay_ports_in_use is back at its baseline."""
    base = baseline_metric(server, "relayd_relay_ports_in_use")
    for i in range(12):
        with TurnClient(server.address) as a, TurnClient(server.address) as b:
            reserve = i % 2 == 1
            resp = allocate(server, a, user=f"even{i}", extra=[even_port(reserve)])
            assert code(resp) is None
            assert a.relayed[1] % 2 == 0, a.relayed
            again = a.authenticated_request(Method.ALLOCATE, [(Attr.REQUESTED_TRANSPORT, requested_transport(17)),
                                                             even_port(True)])
            assert code(again) == 437
            token = resp.get(RESERVATION_TOKEN)
            assert (token is not None and len(token) == 8) == reserve
            if reserve:
                taken = allocate(server, b, user=f"tok{i}", extra=[(RESERVATION_TOKEN, token)])
                assert code(taken) is None
                assert b.relayed[1] == a.relayed[1] + 1
                b.refresh(0)
            a.refresh(0)
    assert settle_metric(server, "relayd_relay_ports_in_use", base) == base


@relayd_only
def test_reservation_token_survives_a_refused_allocate(server):
    """A RESERVATION-TOKEN in an Allocate refused for another reason (442: SCTP) is not used up."""
    base = baseline_metric(server, "relayd_relay_ports_in_use")
    with TurnClient(server.address) as a, TurnClient(server.address) as b:
        resp = allocate(server, a, user="keep", extra=[even_port(True)])
        token = resp.get(RESERVATION_TOKEN)
        assert token is not None
        assert code(allocate(server, b, user="keep2", extra=[(RESERVATION_TOKEN, token)],
                             transport=132)) == 442
        assert code(b.authenticated_request(Method.ALLOCATE, [(Attr.REQUESTED_TRANSPORT, requested_transport(17)),
                                                             (RESERVATION_TOKEN, token)])) is None
        b.refresh(0)
        a.refresh(0)
    assert settle_metric(server, "relayd_relay_ports_in_use", base) == base


# --- quota and exhaustion -------------------------------------------------------------------


@pytest.fixture(scope="module")
def quota_server(tmp_path_factory):
    s = RelayServer(server_kind(), tmp_path_factory.mktemp("quota"), extra_args=["--user-quota=2"])
    with running(s):
        yield s


@coturn_differs("coturn frees a deleted allocation's quota only some time after Refresh 0")
def test_user_quota_is_486_then_recovers(quota_server):
    """RFC 8656 §7.2: past the user's quota -> 486 Allocation Quota Reached; once one of the
    user's allocations ends, the next Allocate succeeds. Other users are not affected."""
    server = quota_server
    clients = [TurnClient(server.address) for _ in range(4)]
    try:
        assert code(allocate(server, clients[0], user="quota")) is None
        assert code(allocate(server, clients[1], user="quota")) is None
        assert code(allocate(server, clients[2], user="quota")) == 486
        assert code(allocate(server, clients[3], user="other")) is None
        clients[0].refresh(0)
        assert code(allocate(server, clients[2], user="quota")) is None
        for c in clients[1:]:
            c.refresh(0)
    finally:
        for c in clients:
            c.close()


@pytest.fixture(scope="module")
def tiny_range_server(tmp_path_factory):
    s = RelayServer(server_kind(), tmp_path_factory.mktemp("ports"))
    s.extra_args += [f"--max-port={s.min_port + 1}", "--relay-threads=1"]
    with running(s):
        yield s


@coturn_differs("coturn frees a deleted allocation's relay port only some time after Refresh 0")
def test_port_exhaustion_is_508_then_recovers(tiny_range_server):
    """RFC 8656 §7.2: no relay port left -> 508 Insufficient Capacity; a port freed by Refresh
    LIFETIME 0 is used again by the next Allocate."""
    server = tiny_range_server
    clients = [TurnClient(server.address) for _ in range(3)]
    try:
        assert code(allocate(server, clients[0], user="p0")) is None
        assert code(allocate(server, clients[1], user="p1")) is None
        ports = {clients[0].relayed[1], clients[1].relayed[1]}
        assert ports == {server.min_port, server.min_port + 1}
        assert code(allocate(server, clients[2], user="p2")) == 508
        freed = clients[0].relayed[1]
        clients[0].refresh(0)
        assert code(allocate(server, clients[2], user="p2")) is None
        assert clients[2].relayed[1] == freed
        clients[1].refresh(0)
        clients[2].refresh(0)
    finally:
        for c in clients:
            c.close()


# --- permissions per allocation --------------------------------------------------------------------


def public_peer(i: int) -> tuple[str, int]:
    return (f"93.184.{i // 250}.{i % 250 + 1}", 7000)


@coturn_differs("coturn has no per-allocation permission cap by default")
def test_more_permissions_than_the_cap_is_508_and_installs_none(server):
    """relayd caps live permissions per allocation (max-permissions-per-allocation = 32): a
    CreatePermission that would pass the cap -> 508 and installs none of its peers (RFC 8656
    §10.2 all-or-nothing); ChannelBind to a new peer at the cap -> 508; refreshing an existing
    permission still works; after the allocation ends a new one starts from zero."""
    with TurnClient(server.address) as client:
        assert code(allocate(server, client, user="perm")) is None
        try:
            too_many = [public_peer(i) for i in range(PERMISSION_CAP + 1)]
            assert error_code(client.create_permission, *too_many) == 508
            # None installed: the cap's worth still fits afterwards.
            assert error_code(client.create_permission, *too_many[:PERMISSION_CAP - 1]) is None
            assert error_code(client.create_permission, public_peer(PERMISSION_CAP - 1)) is None
            assert error_code(client.create_permission, public_peer(PERMISSION_CAP)) == 508
            assert error_code(client.create_permission, public_peer(PERMISSION_CAP), public_peer(0)) == 508
            assert error_code(client.channel_bind, 0x4000, public_peer(PERMISSION_CAP + 1)) == 508
            assert error_code(client.create_permission, public_peer(0)) is None  # a refresh
            assert error_code(client.channel_bind, 0x4000, public_peer(1)) is None  # existing peer
        finally:
            client.refresh(0)
