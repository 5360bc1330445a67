"""Dual allocations (RFC 8656 §7.2 step 9, §8.1; docs/dual-stack.md) on loopback: relayd relays
from 127.0.0.1 and ::1, and one Allocate with ADDITIONAL-ADDRESS-FAMILY gets a relayed address
of each family.

- coturn's turnutils_uclient -Z (an independent client; it sends the attribute under coturn's
  draft code point, which relayd accepts) relays to an IPv6 peer through the IPv4-chosen
  allocation and to an IPv4 peer through the IPv6-chosen one, with nothing lost; its Refreshes
  name one family or none at random.
- The Python client checks the details: both XOR-RELAYED-ADDRESS attributes, each peer reached
  from the relayed address of its family and answering through it, permissions of both families
  in one CreatePermission, a Refresh that ends one family (443 for it afterwards, the other still
  relaying), and ADDRESS-ERROR-CODE 440 from a server with IPv4 relay addresses only.
relayd only for the Python tests (coturn uses the draft code points)."""

from __future__ import annotations

import socket
import struct

import pytest

from conftest import RelayServer, free_port, running, server_kind
from stunclient import (
    Attr, Class, Method, TurnClient, TurnError, decode_xor_address, recv_from, rest_credentials, udp_socket,
)
from test_uclient import CLIENTS, LENGTH, MESSAGES, _tool, parse_report

WAIT = 3.0
IPV4, IPV6 = b"\x01\x00\x00\x00", b"\x02\x00\x00\x00"
ADDITIONAL = (0x8000, IPV6)  # ADDITIONAL-ADDRESS-FAMILY, RFC 8656 §18.11
ADDRESS_ERROR_CODE = 0x8001
relayd_only = pytest.mark.skipif(server_kind() != "relayd", reason="RFC 8656 code points; coturn uses the draft's")


def have_ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


pytestmark = pytest.mark.skipif(not have_ipv6_loopback(), reason="needs an IPv6 loopback (::1)")


@pytest.fixture(scope="module")
def dual_relay(tmp_path_factory):
    with running(RelayServer(server_kind(), tmp_path_factory.mktemp("dual"), extra_args=["--relay-ip=::1"])) as s:
        yield s


def relayed_addresses(resp) -> list[tuple[str, int]]:
    return [decode_xor_address(v, resp.transaction_id) for t, v in resp.attributes if t == Attr.XOR_RELAYED_ADDRESS]


def refresh(client: TurnClient, lifetime: int, family: bytes | None):
    attrs = [(Attr.LIFETIME, struct.pack("!I", lifetime))]
    if family is not None:
        attrs.append((Attr.REQUESTED_ADDRESS_FAMILY, family))
    return client.authenticated_request(Method.REFRESH, attrs)


@pytest.mark.parametrize("client_family,peer_host", [("ipv4", "::1"), ("ipv6", "127.0.0.1")])
def test_uclient_dual_allocation_relays_to_the_other_family(dual_relay, processes, client_family, peer_host):
    peer_port = free_port()
    processes.start("turnutils_peer", [_tool("turnutils_peer"), "-L", "127.0.0.1", "-L", "::1", "-p", str(peer_port)])
    # Ready when it echoes on the family the test uses (bounded).
    family = socket.AF_INET6 if ":" in peer_host else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as probe:
        probe.settimeout(0.2)
        for _ in range(25):
            probe.sendto(b"ping", (peer_host, peer_port))
            try:
                if probe.recvfrom(64)[0] == b"ping":
                    break
            except socket.timeout:
                continue
        else:
            pytest.fail("turnutils_peer did not echo")
    cmd = [_tool("turnutils_uclient"), "-Z", *(["-x"] if client_family == "ipv6" else []),
           "-m", str(CLIENTS), "-n", str(MESSAGES), "-l", str(LENGTH), "-z", "20",
           "-W", dual_relay.secret, "-u", "dual", "-p", str(dual_relay.port), "-L", "127.0.0.1",
           "-e", peer_host, "-r", str(peer_port), dual_relay.host]
    proc, log = processes.start("turnutils_uclient", cmd)
    proc.wait(timeout=120)
    output = log.read_text(errors="replace")
    assert proc.returncode == 0, output[-3000:]
    report = parse_report(output)
    print(f"uclient -Z ({client_family} relay, peer {peer_host}): {report}")
    assert report.send_msgs == CLIENTS * MESSAGES, output[-3000:]
    assert report.recv_msgs == report.send_msgs and report.lost == 0
    if dual_relay.kind == "relayd":
        created = [line for line in dual_relay.log_text().splitlines() if "allocation_created" in line]
        assert created and all("relayed_additional=[::1]" in line for line in created[-CLIENTS:])


@relayd_only
def test_each_family_relays_from_its_own_relayed_address(dual_relay):
    username, password = rest_credentials(dual_relay.secret, "dual-py")
    peer4, peer6 = udp_socket("127.0.0.1"), udp_socket("::1")
    try:
        with TurnClient(dual_relay.address) as client:
            resp = client.allocate(username, password, extra=[ADDITIONAL])
            relayed = relayed_addresses(resp)
            assert [host for host, _ in relayed] == ["127.0.0.1", "::1"], relayed
            assert resp.get(ADDRESS_ERROR_CODE) is None
            a4, a6 = peer4.getsockname()[:2], peer6.getsockname()[:2]
            client.create_permission(a4, a6)  # both families in one request (§10.1)
            for peer, sock, relay in ((a4, peer4, relayed[0]), (a6, peer6, relayed[1])):
                client.send_indication(peer, b"hello " + peer[0].encode())
                got = recv_from(sock, WAIT)
                assert got is not None and got[0] == b"hello " + peer[0].encode()
                assert got[1][:2] == relay, f"{peer[0]} was sent to from {got[1]}, not {relay}"
                sock.sendto(b"back", relay)
                back = client.receive(WAIT)
                assert back is not None and back.kind == "data" and back.payload == b"back" and back.peer == peer
            # A channel to the IPv6 peer.
            client.channel_bind(0x4002, a6)
            client.send_channel_data(0x4002, b"on a channel")
            got = recv_from(peer6, WAIT)
            assert got is not None and got[0] == b"on a channel" and got[1][:2] == relayed[1]

            # Ending the IPv6 address: its peers are gone (443), IPv4 keeps relaying (§8.1).
            assert refresh(client, 0, IPV6).cls == Class.SUCCESS
            with pytest.raises(TurnError) as refused:
                client.create_permission(a6)
            assert refused.value.code == 443
            client.send_indication(a4, b"still here")
            got = recv_from(peer4, WAIT)
            assert got is not None and got[0] == b"still here"
            client.send_channel_data(0x4002, b"gone")
            assert recv_from(peer6, 0.5) is None
            client.refresh(0)
    finally:
        peer4.close()
        peer6.close()


@relayd_only
def test_a_server_with_ipv4_relays_only_grants_ipv4_with_address_error_code_440(relay):
    username, password = rest_credentials(relay.secret, "dual-v4-only")
    with TurnClient(relay.address) as client:
        resp = client.allocate(username, password, extra=[ADDITIONAL])
        assert [host for host, _ in relayed_addresses(resp)] == ["127.0.0.1"]
        value = resp.get(ADDRESS_ERROR_CODE)
        assert value is not None
        family, code = value[0], (value[2] & 0x07) * 100 + value[3]
        assert (family, code) == (2, 440)
        client.refresh(0)


@relayd_only
@pytest.mark.parametrize("extra", [[(0x8000, IPV4)], [ADDITIONAL, (Attr.REQUESTED_ADDRESS_FAMILY, IPV6)]],
                         ids=["ipv4-value", "with-requested-family"])
def test_bad_combinations_get_400(dual_relay, extra):
    username, password = rest_credentials(dual_relay.secret, "dual-400")
    with TurnClient(dual_relay.address) as client:
        with pytest.raises(TurnError) as refused:
            client.allocate(username, password, extra=extra)
        assert refused.value.code == 400
