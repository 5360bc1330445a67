"""NAT behaviour discovery (RFC 5780, docs/nat-discovery.md) with two listening addresses,
127.0.0.1 and 127.0.0.2, and two ports: three independent clients (Debian's classic RFC 3489
`stun` client, PyPI's pynat, and pion/stun's stun-nat-behaviour built from Debian's Go sources)
report the same result against relayd as against coturn; the attributes, CHANGE-REQUEST,
RESPONSE-PORT and PADDING are checked byte by byte; nothing is ever sent to a third party."""

from __future__ import annotations

import os
import re
import shutil
import socket
import struct
import subprocess
import time
from pathlib import Path

import pytest

import stunclient
from conftest import LOOPBACK, RelayServer, free_port, running
from stunclient import Attr, Class, Method, StunMessage

SECOND = "127.0.0.2"
CHANGE_REQUEST = 0x0003
PADDING = 0x0026
RESPONSE_PORT = 0x0027
RESPONSE_ORIGIN = 0x802B
OTHER_ADDRESS = 0x802C
UNKNOWN_ATTRIBUTES = 0x000A


class DiscoveryServer(RelayServer):
    """The suite's server with RFC 5780 left on for coturn (the suite turns it off elsewhere)."""

    def command(self) -> list[str]:
        return [arg for arg in super().command() if arg != "--no-rfc5780"]


def discovery_server(kind: str, workdir: Path, rfc5780: bool = True) -> RelayServer:
    server = DiscoveryServer(kind, workdir)
    alt = free_port(avoid=server.relay_ports)
    while alt in (server.port, server.api_port):
        alt = free_port(avoid=server.relay_ports)
    server.alt_port = alt
    server.extra_args += [f"--listening-ip={SECOND}", f"--alt-listening-port={alt}"]
    if kind == "relayd" and rfc5780:
        server.extra_args += ["--rfc5780", "--rfc3489-compatibility"]
    return server


@pytest.fixture(scope="module", params=["relayd", "coturn"])
def server(request, tmp_path_factory):
    if request.param == "coturn" and shutil.which("turnserver") is None:
        pytest.skip("coturn not installed")
    relay = discovery_server(request.param, tmp_path_factory.mktemp(f"{request.param}-discovery"))
    with running(relay):
        yield relay


@pytest.fixture(scope="module")
def nat_behaviour_tool(tmp_path_factory) -> Path:
    """pion/stun's cmd/stun-nat-behaviour, built in GOPATH mode from golang-github-pion-stun-dev."""
    source = Path("/usr/share/gocode/src/github.com/pion/stun/cmd/stun-nat-behaviour")
    if shutil.which("go") is None or not source.is_dir():
        pytest.fail("go or golang-github-pion-stun-dev missing (scripts/install-test-deps.sh)", pytrace=False)
    out = tmp_path_factory.mktemp("pion") / "stun-nat-behaviour"
    env = {**os.environ, "GOPATH": "/usr/share/gocode", "GO111MODULE": "off", "GOFLAGS": "",
           "GOCACHE": str(out.parent / "cache")}
    result = subprocess.run(["go", "build", "-o", str(out), "github.com/pion/stun/cmd/stun-nat-behaviour"],
                            capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr
    return out


def binding(attrs=(), fingerprint: bool = False) -> StunMessage:
    msg = StunMessage(Method.BINDING, Class.REQUEST)
    for t, v in attrs:
        msg.add(t, v)
    return msg


def exchange(sock: socket.socket, msg: StunMessage, to, fingerprint: bool = False, timeout: float = 2):
    wire = msg.encode(fingerprint=fingerprint)
    sock.sendto(wire, to)
    sock.settimeout(timeout)
    data, source = sock.recvfrom(65535)
    return StunMessage.decode(data), source, data, wire


def plain_address(msg: StunMessage, attr: int) -> tuple[str, int] | None:
    value = msg.get(attr)
    return stunclient.decode_plain_address(value) if value else None


# -- independent clients, relayd and coturn side by side -----------------------------------------


def test_classic_stun_client_runs_every_test(server):
    result = subprocess.run(["stun", f"{LOOPBACK}:{server.port}", "-v"], capture_output=True, text=True, timeout=60)
    out = result.stdout + result.stderr
    # No NAT on loopback: every test is answered, and the verdict is "Open".
    for test in ("test I = 1", "test II = 1", "test III = 1", "test I(2) = 1"):
        assert test in out, out[-2000:]
    assert "Primary: Open" in out, out[-2000:]
    assert re.search(rf"ChangedAddress = {re.escape(SECOND)}:{server.alt_port}", out), out[-2000:]


def test_pynat_reports_open_internet(server):
    import pynat
    topology, ext_ip, ext_port, internal = pynat.get_ip_info(
        source_ip=LOOPBACK, source_port=free_port(), stun_host=LOOPBACK, stun_port=server.port, include_internal=True)
    assert topology == pynat.OPEN and ext_ip == LOOPBACK == internal


def test_pion_nat_behaviour_mapping_and_filtering(server, nat_behaviour_tool):
    result = subprocess.run([str(nat_behaviour_tool), "-server", f"{LOOPBACK}:{server.port}", "-timeout", "2"],
                            capture_output=True, text=True, timeout=60)
    out = result.stdout + result.stderr
    assert "NAT mapping behavior: endpoint independent" in out, out[-3000:]
    assert "NAT filtering behavior: endpoint independent" in out, out[-3000:]
    assert f"Response from {SECOND}:{server.alt_port}" in out, out[-3000:]


# -- the attributes and flags, on relayd -----------------------------------------------------------


@pytest.fixture(scope="module")
def relayd(tmp_path_factory):
    relay = discovery_server("relayd", tmp_path_factory.mktemp("relayd-rfc5780"))
    relay.suite_limits = False
    with running(relay):
        yield relay


@pytest.fixture
def limited(tmp_path):
    """relayd with a small per-source bucket for unauthenticated answers: 5 a second, 10 at most."""
    relay = discovery_server("relayd", tmp_path / "limited")
    relay.extra_args += ["--unauth-rate-limit=5", "--unauth-rate-burst=10"]
    relay.suite_limits = False
    with running(relay):
        yield relay


def test_binding_carries_mapped_response_origin_and_other_address(relayd):
    sock = stunclient.udp_socket()
    try:
        resp, source, _, _ = exchange(sock, binding(), relayd.address)
        assert source == relayd.address
        assert resp.xor_address(Attr.XOR_MAPPED_ADDRESS) == sock.getsockname()
        assert plain_address(resp, Attr.MAPPED_ADDRESS) == sock.getsockname()
        assert plain_address(resp, RESPONSE_ORIGIN) == relayd.address
        assert plain_address(resp, OTHER_ADDRESS) == (SECOND, relayd.alt_port)
        # Asked on the second address and port, the other address is the first pair.
        resp, source, _, _ = exchange(sock, binding(), (SECOND, relayd.alt_port))
        assert source == (SECOND, relayd.alt_port)
        assert plain_address(resp, OTHER_ADDRESS) == (LOOPBACK, relayd.port)
    finally:
        sock.close()


@pytest.mark.parametrize("flags,expected", [
    (0x4, lambda s: (SECOND, s.port)), (0x2, lambda s: (LOOPBACK, s.alt_port)),
    (0x6, lambda s: (SECOND, s.alt_port)), (0x0, lambda s: (LOOPBACK, s.port))])
def test_change_request_answers_from_table_1(relayd, flags, expected):
    sock = stunclient.udp_socket()
    try:
        resp, source, _, _ = exchange(sock, binding([(CHANGE_REQUEST, struct.pack("!I", flags))]), relayd.address)
        assert resp.cls == Class.SUCCESS
        assert source == expected(relayd) == plain_address(resp, RESPONSE_ORIGIN)
        assert resp.xor_address(Attr.XOR_MAPPED_ADDRESS) == sock.getsockname()
    finally:
        sock.close()


def test_response_port_goes_to_the_requesters_ip_only(relayd):
    asker, listener = stunclient.udp_socket(), stunclient.udp_socket()
    try:
        port = listener.getsockname()[1]
        asker.sendto(binding([(RESPONSE_PORT, struct.pack("!HH", port, 0))]).encode(), relayd.address)
        listener.settimeout(2)
        data, source = listener.recvfrom(2048)
        resp = StunMessage.decode(data)
        assert resp.cls == Class.SUCCESS and source == relayd.address
        # XOR-MAPPED-ADDRESS is still where the request came from.
        assert resp.xor_address(Attr.XOR_MAPPED_ADDRESS) == asker.getsockname()
        # PADDING with RESPONSE-PORT: 400 (RFC 5780 §7.5), back to the asker.
        both = binding([(RESPONSE_PORT, struct.pack("!HH", port, 0)), (PADDING, bytes(64))])
        resp, _, _, _ = exchange(asker, both, relayd.address)
        assert resp.error_code()[0] == 400
    finally:
        asker.close()
        listener.close()


def test_padding_makes_the_response_as_large_as_the_request_and_no_larger(relayd):
    sock = stunclient.udp_socket()
    try:
        for size in (100, 1400):
            resp, _, data, wire = exchange(sock, binding([(PADDING, bytes(size))]), relayd.address)
            assert resp.cls == Class.SUCCESS and resp.has(PADDING)
            assert len(wire) - 4 < len(data) <= len(wire)
        # A small request's answer still carries PADDING (RFC 5780 §6.1), empty: it adds nothing.
        resp, _, data, wire = exchange(sock, binding([(PADDING, bytes(4))]), relayd.address)
        assert resp.cls == Class.SUCCESS and resp.get(PADDING) == b""
    finally:
        sock.close()


def answers_to_a_burst(server: RelayServer, msg: StunMessage, count: int = 40) -> int:
    """How many of `count` copies of `msg`, sent at once from one socket, are answered."""
    sock = stunclient.udp_socket()
    try:
        for _ in range(count):
            sock.sendto(msg.encode(), server.address)
        sock.settimeout(1)
        answered = 0
        try:
            while True:
                sock.recvfrom(2048)
                answered += 1
        except socket.timeout:
            return answered
    finally:
        sock.close()


def test_change_request_is_rate_limited_per_source_ip(limited):
    # unauth-rate-limit=5: a burst of 10, then 5 a second.
    answered = answers_to_a_burst(limited, binding([(CHANGE_REQUEST, struct.pack("!I", 0x6))]))
    assert 5 <= answered <= 20, answered


def test_plain_binding_is_rate_limited_per_source_ip_with_rfc5780(limited):
    """With rfc5780 a plain Binding answer is about 3.5 times its request: over UDP it is
    rate-limited per source IP like the discovery answers (docs/nat-discovery.md)."""
    answered = answers_to_a_burst(limited, binding([]))
    assert 5 <= answered <= 20, answered


def test_over_tcp_change_request_is_400(tmp_path):
    from streamclient import StreamTurnClient
    server = discovery_server("relayd", tmp_path / "tcp")
    server.streams = True
    server.tls_port = free_port(avoid=server.relay_ports)
    with running(server):
        client = StreamTurnClient(server.address)
        try:
            resp = client.transact(binding([(CHANGE_REQUEST, struct.pack("!I", 0x6))]))
            assert resp.error_code()[0] == 400
            resp = client.transact(binding())
            assert resp.cls == Class.SUCCESS
        finally:
            client.close()


def test_classic_request_ignores_response_address(relayd):
    """An RFC 3489 request naming RESPONSE-ADDRESS (0x0002) of a third party is answered to the
    requester itself (a reflector otherwise)."""
    sock, third = stunclient.udp_socket(), stunclient.udp_socket()
    try:
        third_port = third.getsockname()[1]
        response_address = struct.pack("!BBH4s", 0, 1, third_port, socket.inet_aton(LOOPBACK))
        body = struct.pack("!HH", 0x0002, len(response_address)) + response_address
        tid = os.urandom(16)
        sock.sendto(struct.pack("!HH", 0x0001, len(body)) + tid + body, relayd.address)
        sock.settimeout(2)
        data, _ = sock.recvfrom(2048)
        assert data[:2] == b"\x01\x01" and data[4:20] == tid
        third.settimeout(0.5)
        with pytest.raises(socket.timeout):
            third.recvfrom(2048)
    finally:
        sock.close()
        third.close()


def test_without_rfc5780_change_request_is_420_and_no_discovery_attributes(tmp_path):
    server = discovery_server("relayd", tmp_path / "off", rfc5780=False)
    with running(server):
        sock = stunclient.udp_socket()
        try:
            resp, _, _, _ = exchange(sock, binding([(CHANGE_REQUEST, struct.pack("!I", 0x4))]), server.address)
            assert resp.error_code()[0] == 420
            assert resp.get(UNKNOWN_ATTRIBUTES) == struct.pack("!H", CHANGE_REQUEST)
            # Empty flags (what some clients always send) are a plain Binding.
            resp, _, _, _ = exchange(sock, binding([(CHANGE_REQUEST, struct.pack("!I", 0))]), server.address)
            assert resp.cls == Class.SUCCESS and not resp.has(OTHER_ADDRESS) and not resp.has(RESPONSE_ORIGIN)
            # A classic request is not answered without rfc3489-compatibility.
            sock.sendto(struct.pack("!HH", 0x0001, 0) + os.urandom(16), server.address)
            sock.settimeout(0.5)
            with pytest.raises(socket.timeout):
                sock.recvfrom(2048)
        finally:
            sock.close()
