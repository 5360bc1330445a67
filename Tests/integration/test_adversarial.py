"""Adversarial suite, part 1: the peer policy (RFC 8656 §21.3 "the server must not
become a proxy into networks its operator did not intend"; docs/peer-policy.md).

Every special-purpose range the architecture denies is probed at its first and last address,
plus the IPv6 spellings of loopback, link-local, ULA, multicast and embedded private IPv4, on
every path: CreatePermission and ChannelBind (403 Forbidden), Send indications (silently
dropped and counted as reason="policy"), and datagrams arriving at a relayed address from a
peer the policy refuses. Relay-to-relay between two allocations of the same server keeps
working. The server runs with the default policy (no --allow-loopback-peers), with one
relay address per family (127.0.0.1 and ::1).

The other parts are test_adv_auth.py, test_adv_allocation.py and test_adv_malformed.py; the
small helpers they share live at the top of this file.
"""

from __future__ import annotations

import struct
import time

import pytest

from conftest import RelayServer, free_port, running, server_kind
from stunclient import (
    Attr,
    Class,
    Method,
    StunMessage,
    TurnClient,
    TurnError,
    long_term_key,
    recv_from,
    udp_socket,
)

IS_COTURN = server_kind() == "coturn"
WAIT = 3.0  # bound for an answer that must come
QUIET = 0.3  # how long "nothing arrives" is waited for
SCRAPE_DEADLINE = 5.0  # relayd publishes loop counters every 250 ms
PEER_PORT = 9999  # below every relay range (conftest.relay_port_space) and never a service port here


# --- helpers shared by the test_adv_* files ------------------------------------------------


def coturn_differs(reason: str):
    """Marks an expectation coturn does not meet: a strict xfail when RELAY_SERVER=coturn."""
    return pytest.mark.xfail(IS_COTURN, reason=f"coturn differs: {reason}", strict=True)


relayd_only = pytest.mark.skipif(IS_COTURN, reason="relayd's own metrics or settings")


class DefaultPolicyServer(RelayServer):
    """A server with the default peer policy: conftest's --allow-loopback-peers left out."""

    def command(self) -> list[str]:
        return [arg for arg in super().command() if arg != "--allow-loopback-peers"]


def metric(server: RelayServer, name: str, **labels) -> float:
    """One sample from relayd's /metrics (bearer token as for the rest of the API); 0 if absent."""
    resp = server.http("GET", "/metrics", headers={"Authorization": f"Bearer {server.api_token}"})
    assert resp.status == 200, resp
    want = name + ("{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}" if labels else "")
    for line in resp.body.decode().splitlines():
        if line.startswith("#"):
            continue
        key, _, value = line.rpartition(" ")
        if _normalize(key) == want:
            return float(value)
    return 0.0


def _normalize(key: str) -> str:
    """`name{b="2",a="1"}` with the labels sorted, so label order does not matter."""
    if "{" not in key:
        return key
    name, _, rest = key.partition("{")
    labels = sorted(part for part in rest.rstrip("}").split(",") if part)
    return name + "{" + ",".join(labels) + "}"


def dropped(server: RelayServer, reason: str) -> float:
    return metric(server, "relayd_dropped_packets_total", reason=reason)


def settle_metric(server: RelayServer, name: str, expected: float, **labels) -> float:
    """Scrapes until `name` equals `expected` (bounded), then once more after two publish
    intervals so that an overshoot is seen too; returns the last value."""
    deadline = time.monotonic() + SCRAPE_DEADLINE
    value = metric(server, name, **labels)
    while value != expected and time.monotonic() < deadline:
        time.sleep(0.1)
        value = metric(server, name, **labels)
    time.sleep(0.55)
    return metric(server, name, **labels)


def baseline_metric(server: RelayServer, name: str, **labels) -> float:
    """A value that includes everything sent before (two publish intervals later)."""
    time.sleep(0.55)
    return metric(server, name, **labels)


def requested_transport(protocol: int) -> bytes:
    """REQUESTED-TRANSPORT (RFC 8656 §18.8): protocol number then 3 RFFU bytes."""
    return struct.pack("!B3x", protocol)


def allocate(server: RelayServer, client: TurnClient, user: str = "alice", family: int = 4,
             extra=(), username: str | None = None, password: str | None = None,
             transport: int = 17) -> StunMessage:
    """Allocate (RFC 8656 §7.2) after the 401 challenge, IPv6 via REQUESTED-ADDRESS-FAMILY
    (RFC 8656 §18.6); returns the final response (success or error) without raising."""
    if username is None:
        username, password = server.credentials(user)
    challenge = client.allocate_unauthenticated()
    assert challenge.cls == Class.ERROR and challenge.error_code()[0] == 401, challenge.error_code()
    client.realm = challenge.text(Attr.REALM)
    client.nonce = challenge.get(Attr.NONCE)
    client.username = username
    client.key = long_term_key(username, client.realm, password)
    attrs = [(Attr.REQUESTED_TRANSPORT, requested_transport(transport))]
    if family == 6:
        attrs.append((Attr.REQUESTED_ADDRESS_FAMILY, b"\x02\x00\x00\x00"))
    attrs += list(extra)
    resp = client.authenticated_request(Method.ALLOCATE, attrs)
    if resp.cls == Class.SUCCESS:
        client.relayed = resp.xor_address(Attr.XOR_RELAYED_ADDRESS)
        client.mapped = resp.xor_address(Attr.XOR_MAPPED_ADDRESS)
    return resp


def error_code(fn, *args) -> int | None:
    """The error code a TurnClient request raises, or None when it succeeds."""
    try:
        fn(*args)
    except TurnError as exc:
        return exc.code
    return None


def assert_dropped_silently(client: TurnClient) -> None:
    """Nothing came back for what was just sent: a Binding sent after it on the same 5-tuple
    is answered (the server is alive and handled the earlier datagram first), and nothing
    else arrived before that answer or within QUIET after it."""
    resp = client.binding()
    assert resp.cls == Class.SUCCESS
    assert not client.inbox, f"unexpected datagrams: {list(client.inbox)!r}"
    assert client.recv_raw(QUIET) is None


def peer(host: str, port: int = PEER_PORT) -> tuple[str, int]:
    return (host, port)


# --- fixtures -------------------------------------------------------------------------


# Non-prefix-aligned operator ranges (coturn syntax: `a-b`, inclusive): one opened inside a
# default-denied documentation range, one closed inside public space, one IPv6.
ALLOWED_RANGE = "198.51.100.10-198.51.100.20"
DENIED_RANGE = "93.184.216.10-93.184.216.20"
DENIED_RANGE_V6 = "2606:4700::10-2606:4700::20"


@pytest.fixture(scope="module")
def policy_server(tmp_path_factory):
    server = DefaultPolicyServer(server_kind(), tmp_path_factory.mktemp("policy"), extra_args=[
        "--relay-ip=::1",
        f"--allowed-peer-ip={ALLOWED_RANGE}",
        f"--denied-peer-ip={DENIED_RANGE}",
        f"--denied-peer-ip={DENIED_RANGE_V6}",
    ])
    with running(server):
        yield server


@pytest.fixture(scope="module")
def clients(policy_server):
    """One allocation per family for the refused probes, one per family for the allowed ones
    (so the permission cap is never what answers), all reused by the whole module."""
    made = {}
    try:
        for name, family in (("v4", 4), ("v6", 6), ("v4ok", 4), ("v6ok", 6)):
            client = TurnClient(policy_server.address)
            made[name] = client
            resp = allocate(policy_server, client, user=name, family=family)
            assert resp.cls == Class.SUCCESS, resp.error_code()
        yield made
    finally:
        for client in made.values():
            try:
                client.refresh(0)
            except TurnError:
                pass
            client.close()


@pytest.fixture
def policy(policy_server):
    """The module's server, checked alive after each test (like conftest's `relay`)."""
    yield policy_server
    assert policy_server.is_running(), policy_server.log_tail()


# Send indications and peer datagrams this module expects relayd to count under reason="policy".
_POLICY_DROPS: list[str] = []


# --- the denied ranges ------------------------------------------------------------------

# (range, first, last) for every IPv4 range docs/peer-policy.md lists as denied by default.
IPV4_RANGES = [
    ("0.0.0.0/8 unspecified", "0.0.0.0", "0.255.255.255"),
    ("10.0.0.0/8 RFC 1918", "10.0.0.0", "10.255.255.255"),
    ("100.64.0.0/10 CGNAT", "100.64.0.0", "100.127.255.255"),
    ("127.0.0.0/8 loopback", "127.0.0.0", "127.255.255.255"),
    ("169.254.0.0/16 link-local", "169.254.0.0", "169.254.255.255"),
    ("172.16.0.0/12 RFC 1918", "172.16.0.0", "172.31.255.255"),
    ("192.0.0.0/24 IETF", "192.0.0.0", "192.0.0.255"),
    ("192.0.2.0/24 TEST-NET-1", "192.0.2.0", "192.0.2.255"),
    ("192.168.0.0/16 RFC 1918", "192.168.0.0", "192.168.255.255"),
    ("198.18.0.0/15 benchmarking", "198.18.0.0", "198.19.255.255"),
    ("198.51.100.0/24 TEST-NET-2", "198.51.100.0", "198.51.100.255"),
    ("203.0.113.0/24 TEST-NET-3", "203.0.113.0", "203.0.113.255"),
    ("224.0.0.0/4 multicast", "224.0.0.0", "239.255.255.255"),
    ("240.0.0.0/4 reserved", "240.0.0.0", "255.255.255.254"),
]
IPV4_EXTRA = ["127.0.0.1", "169.254.169.254", "255.255.255.255"]  # metadata, broadcast

# (range, first, last) for the IPv6 ranges.
IPV6_RANGES = [
    ("fc00::/7 ULA", "fc00::", "fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"),
    ("fe80::/10 link-local", "fe80::", "febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff"),
    ("fec0::/10 site-local", "fec0::", "feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"),
    ("ff00::/8 multicast", "ff00::", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"),
    ("2001:db8::/32 documentation", "2001:db8::", "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff"),
]
# The list: loopback/unspecified, IPv4-mapped, IPv4-compatible, NAT64, 6to4, ...
IPV6_FORMS = [
    "::1", "::", "::ffff:127.0.0.1", "::ffff:169.254.169.254", "::127.0.0.1", "64:ff9b::7f00:1",
    "2002:7f00:1::", "fe80::1", "fc00::1", "fd00:ec2::254", "fec0::1", "ff02::1",
]

DENIED_V4 = sorted({a for _, first, last in IPV4_RANGES for a in (first, last)} | set(IPV4_EXTRA),
                   key=lambda a: tuple(int(x) for x in a.split(".")))
DENIED_V6 = list(dict.fromkeys(IPV6_FORMS + [a for _, first, last in IPV6_RANGES for a in (first, last)]))

# coturn 4.6 denies only loopback and ::/0.0.0.0-style addresses unless configured otherwise.
COTURN_DENIES = {"0.0.0.0", "0.255.255.255", "127.0.0.0", "127.0.0.1", "127.255.255.255", "::", "::1"}


def _case(address: str):
    marks = [] if address in COTURN_DENIES else [
        coturn_differs("no default denial of special-purpose ranges (needs denied-peer-ip)")]
    return pytest.param(address, id=address, marks=marks)


def _client_for(clients, address: str) -> TurnClient:
    return clients["v6" if ":" in address else "v4"]


# --- CreatePermission, ChannelBind, Send: refused --------------------------------------------


@pytest.mark.parametrize("address", [_case(a) for a in DENIED_V4 + DENIED_V6])
def test_create_permission_to_a_denied_address_is_403(policy, clients, address):
    """RFC 8656 §10.2: a peer the server's policy refuses gets 403 (Forbidden)."""
    client = _client_for(clients, address)
    assert error_code(client.create_permission, peer(address)) == 403


@pytest.mark.parametrize("address", [_case(a) for a in DENIED_V4 + DENIED_V6])
def test_channel_bind_to_a_denied_address_is_403(policy, clients, address):
    """RFC 8656 §12.2: ChannelBind installs a permission, so the same policy answers 403."""
    client = _client_for(clients, address)
    channel = 0x4000 + (DENIED_V4 + DENIED_V6).index(address)  # a fresh channel per peer (RFC 8656 §12)
    assert error_code(client.channel_bind, channel, peer(address)) == 403


@pytest.mark.parametrize("address", DENIED_V4 + DENIED_V6)
def test_send_indication_to_a_denied_address_is_dropped(policy, clients, address):
    """RFC 8656 §11.2: a Send indication the server will not relay is discarded silently."""
    client = _client_for(clients, address)
    client.send_indication(peer(address), b"should never leave the relay")
    _POLICY_DROPS.append(f"send {address}")
    assert_dropped_silently(client)


# --- the server's own service ports ------------------------------------------------------------


@pytest.fixture(scope="module")
def open_server(tmp_path_factory):
    """Loopback peers allowed (conftest's default), plus a Prometheus listener: only the
    service ports on the server's own addresses must still be refused."""
    extra = ["--relay-ip=::1"]
    if not IS_COTURN:
        extra += ["--prometheus", "--prometheus-address=127.0.0.1", f"--prometheus-port={free_port()}"]
    server = RelayServer(server_kind(), tmp_path_factory.mktemp("service-ports"), extra_args=extra)
    with running(server):
        yield server


def _service_ports(server: RelayServer) -> dict[str, int]:
    ports = {"stun-turn": server.port}
    if not IS_COTURN:
        ports["http-api"] = server.api_port
        ports["metrics"] = int(next(a.split("=")[1] for a in server.extra_args if a.startswith("--prometheus-port")))
    return ports


SERVICE_CASES = ["stun-turn", "http-api", "metrics"]
SERVICE_HOSTS = ["127.0.0.1", "::ffff:127.0.0.1", "::1"]


@coturn_differs("permissions are per IP: a loopback service port is not refused once loopback is allowed")
@pytest.mark.parametrize("host", SERVICE_HOSTS)
@pytest.mark.parametrize("service", SERVICE_CASES)
def test_own_service_ports_are_refused(open_server, service, host):
    """docs/peer-policy.md: the server's own service ports on its own addresses are denied even
    when loopback peers are allowed: CreatePermission and ChannelBind 403, Send dropped."""
    ports = _service_ports(open_server)
    if service not in ports:
        pytest.skip("coturn has no separate HTTP API / metrics listener here")
    target = (host, ports[service])
    with TurnClient(open_server.address) as client:
        resp = allocate(open_server, client, user="svc", family=6 if ":" in host else 4)
        assert resp.cls == Class.SUCCESS, resp.error_code()
        try:
            assert error_code(client.create_permission, target) == 403
            assert error_code(client.channel_bind, 0x4000, target) == 403
            before = None if IS_COTURN else dropped(open_server, "policy")
            client.send_indication(target, b"to a service port")
            assert_dropped_silently(client)
            if before is not None:
                assert settle_metric(open_server, "relayd_dropped_packets_total", before + 1, reason="policy") \
                    == before + 1
        finally:
            client.refresh(0)


def test_loopback_outside_service_ports_is_relayed_when_allowed(open_server):
    """The control case: with loopback peers allowed, an ordinary loopback port is reachable."""
    target = udp_socket()
    try:
        with TurnClient(open_server.address) as client:
            assert allocate(open_server, client, user="ctl").cls == Class.SUCCESS
            client.create_permission(target.getsockname())
            client.send_indication(target.getsockname(), b"ordinary port")
            assert recv_from(target, WAIT) == (b"ordinary port", client.relayed)
            client.refresh(0)
    finally:
        target.close()


# --- operator ranges that are not prefix-aligned ---------------------------------------------------


RANGE_CASES = [
    ("198.51.100.9", 403), ("198.51.100.10", None), ("198.51.100.15", None), ("198.51.100.20", None),
    ("198.51.100.21", 403),
    ("93.184.216.9", None), ("93.184.216.10", 403), ("93.184.216.20", 403), ("93.184.216.21", None),
    ("2606:4700::f", None), ("2606:4700::10", 403), ("2606:4700::20", 403), ("2606:4700::21", None),
]


@pytest.mark.parametrize("address,expected", [
    pytest.param(a, e, id=f"{a}->{e or 'ok'}",
                 marks=[coturn_differs("198.51.100.0/24 is not denied by default")]
                 if a in ("198.51.100.9", "198.51.100.21") else [])
    for a, e in RANGE_CASES])
def test_allowed_and_denied_ranges_are_honoured_to_the_address(policy, clients, address, expected):
    """allowed-peer-ip / denied-peer-ip `a-b` ranges count every address from a to b, no more:
    the first and last are in, their neighbours out."""
    client = clients["v6ok" if ":" in address else "v4ok"]
    assert error_code(client.create_permission, peer(address)) == expected


@coturn_differs("10.0.0.0/8 is not denied by default")
def test_one_forbidden_peer_refuses_the_whole_create_permission(policy, clients):
    """RFC 8656 §10.2: CreatePermission with several XOR-PEER-ADDRESS is all or nothing; with
    a forbidden one it is 403 and none is installed."""
    client, other = clients["v4ok"], clients["v4"]
    assert error_code(client.create_permission, ("93.184.216.34", PEER_PORT), ("10.0.0.1", PEER_PORT),
                      ("8.8.8.8", 53)) == 403
    # The other allocation's relayed address is allowed (relay-to-relay); next to a forbidden
    # peer in the same request it must not be installed: a Send to it is not relayed.
    other.create_permission(client.relayed)
    assert error_code(client.create_permission, other.relayed, ("169.254.169.254", 80)) == 403
    client.send_indication(other.relayed, b"no permission was installed")
    assert other.recv_raw(QUIET) is None
    # Control: alone, the same peer is installed and the same Send is relayed.
    client.create_permission(other.relayed)
    client.send_indication(other.relayed, b"now it is")
    got = other.receive(WAIT)
    assert got is not None and (got.kind, got.payload, got.peer) == ("data", b"now it is", client.relayed)


# --- relay-to-relay and incoming packets ------------------------------------------------------------


@coturn_differs("without --allow-loopback-peers coturn refuses its own loopback relayed addresses")
@pytest.mark.parametrize("family", [4, 6])
def test_relay_to_relay_between_two_allocations_works(policy_server, family):
    """docs/peer-policy.md: two clients of the same relay talking relay-to-relay must work under
    the default policy, though the relayed addresses are loopback here."""
    with TurnClient(policy_server.address) as a, TurnClient(policy_server.address) as b:
        assert allocate(policy_server, a, user="a", family=family).cls == Class.SUCCESS
        assert allocate(policy_server, b, user="b", family=family).cls == Class.SUCCESS
        try:
            a.create_permission(b.relayed)
            b.channel_bind(0x4001, a.relayed)
            a.send_indication(b.relayed, b"a to b")
            got = b.receive(WAIT)
            assert got is not None and (got.kind, got.payload, got.channel) == ("channel", b"a to b", 0x4001)
            b.send_channel_data(0x4001, b"b to a")
            got = a.receive(WAIT)
            assert got is not None and (got.kind, got.payload, got.peer) == ("data", b"b to a", b.relayed)
        finally:
            a.refresh(0)
            b.refresh(0)


EXTERNAL_IP = "198.51.100.77"  # inside a default-denied documentation range on purpose


@pytest.fixture(scope="module")
def external_ip_server(tmp_path_factory):
    """The default policy behind 1:1 NAT: relayed addresses are advertised as EXTERNAL_IP."""
    server = DefaultPolicyServer(server_kind(), tmp_path_factory.mktemp("external-ip"),
                                 extra_args=[f"--external-ip={EXTERNAL_IP}/127.0.0.1"])
    with running(server):
        yield server


@pytest.mark.parametrize("target,expected", [
    pytest.param("relayed", None, id="other-allocations-advertised-address-allowed",
                 marks=[coturn_differs("coturn refuses its own external-ip as a peer, relay-to-relay included")]),
    pytest.param("other-port", 403, id="external-ip-outside-relay-range-403"),
    pytest.param("listener", 403, id="external-ip-listening-port-403"),
])
def test_relay_to_relay_via_external_ip(external_ip_server, target, expected):
    """docs/peer-policy.md: relay-to-relay must also work via `external-ip`: the advertised
    (public) form of another allocation's relayed address is allowed, though EXTERNAL_IP is in
    a denied range; the same address on a port outside the relay range, or on the listening
    port, is not."""
    server = external_ip_server
    with TurnClient(server.address) as a, TurnClient(server.address) as b:
        assert allocate(server, a, user="ext-a").cls == Class.SUCCESS
        assert allocate(server, b, user="ext-b").cls == Class.SUCCESS
        try:
            assert a.relayed[0] == EXTERNAL_IP
            peer_address = {"relayed": b.relayed, "other-port": (EXTERNAL_IP, PEER_PORT),
                            "listener": (EXTERNAL_IP, server.port)}[target]
            assert error_code(a.create_permission, peer_address) == expected
            assert error_code(a.channel_bind, 0x4000, peer_address) == expected
        finally:
            a.refresh(0)
            b.refresh(0)


@coturn_differs("a permission for 127.0.0.1 lets every loopback port in")
def test_incoming_from_a_denied_port_of_a_permitted_ip_is_dropped(policy_server):
    """A permission is per IP (RFC 8656 §9), but the policy judges the whole transport
    address on incoming packets too: after a relay-to-relay permission for 127.0.0.1, a
    datagram from another loopback port (not a relayed address) is dropped and counted. The
    outsider's port must lie outside the server's relay port range: the policy lets the server's
    own relay addresses through on any port of that range (relay to relay)."""
    outsider = udp_socket()
    while policy_server.min_port <= outsider.getsockname()[1] <= policy_server.max_port:
        outsider.close()
        outsider = udp_socket()
    try:
        with TurnClient(policy_server.address) as a, TurnClient(policy_server.address) as b:
            assert allocate(policy_server, a, user="in-a").cls == Class.SUCCESS
            assert allocate(policy_server, b, user="in-b").cls == Class.SUCCESS
            try:
                a.create_permission(b.relayed)  # installs the permission for 127.0.0.1
                for i in range(3):
                    outsider.sendto(b"from a loopback port %d" % i, a.relayed)
                    _POLICY_DROPS.append("incoming")
                assert a.recv_raw(QUIET) is None
                # The permitted relayed address itself still gets through.
                b.create_permission(a.relayed)
                b.send_indication(a.relayed, b"relay to relay still works")
                got = a.receive(WAIT)
                assert got is not None and got.payload == b"relay to relay still works"
            finally:
                a.refresh(0)
                b.refresh(0)
    finally:
        outsider.close()


@relayd_only
def test_every_refused_send_and_incoming_packet_was_counted_as_policy(policy_server):
    """Each Send indication and peer datagram this module expected to be refused was counted
    once under reason="policy" (and ran last in this file)."""
    expected = len(_POLICY_DROPS)
    assert settle_metric(policy_server, "relayd_dropped_packets_total", expected, reason="policy") == expected
