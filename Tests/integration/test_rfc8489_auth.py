"""RFC 8489's security features against a running relayd (docs/auth.md): the nonce cookie and
PASSWORD-ALGORITHMS in the challenge, a whole TURN session (Allocate, CreatePermission,
ChannelBind, data both ways, Refresh) authenticated with a SHA-256 key and
MESSAGE-INTEGRITY-SHA256, USERHASH for a static user, the bid-down checks, and an RFC 5389
client answered as before. The client is stunclient.py; relayd only (coturn has none of this)."""

from __future__ import annotations

import hashlib
import re
import struct
import time

import pytest

from conftest import RelayServer, running, server_kind
from stunclient import Attr, Class, Method, StunMessage, TurnClient, TurnError, recv_from, rest_credentials, udp_socket

pytestmark = pytest.mark.skipif(server_kind() != "relayd", reason="RFC 8489 security features are relayd's")

STATIC_USER, STATIC_PASSWORD = "anna", "anna-long-password"
SHA256 = 2


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    relayd = RelayServer("relayd", tmp_path_factory.mktemp("rfc8489"),
                         extra_args=[f"--user={STATIC_USER}:{STATIC_PASSWORD}", "--allow-loopback-peers"])
    with running(relayd):
        yield relayd


def sha256_client(server, **settings) -> TurnClient:
    client = TurnClient((server.host, server.port))
    client.password_algorithm = SHA256
    client.integrity = "sha256"
    for name, value in settings.items():
        setattr(client, name, value)
    return client


def test_the_challenge_announces_password_algorithms(server):
    with TurnClient((server.host, server.port)) as client:
        challenge = client.allocate_unauthenticated()
    assert challenge.error_code()[0] == 401
    assert challenge.get(Attr.NONCE).startswith(b"obMatJos2gAAA")
    # SHA-256 then MD5, no parameters (RFC 8489 §14.11).
    assert challenge.get(Attr.PASSWORD_ALGORITHMS) == struct.pack("!HHHH", 2, 0, 1, 0)


def test_a_session_authenticated_with_sha256_relays_both_ways(server):
    username, password = rest_credentials(server.secret, "sha256-user")
    peer = udp_socket(server.host)
    with peer, sha256_client(server) as client:
        allocated = client.allocate(username, password)
        key = hashlib.sha256(f"{username}:{server.realm}:{password}".encode()).digest()
        assert allocated.has(Attr.MESSAGE_INTEGRITY_SHA256) and not allocated.has(Attr.MESSAGE_INTEGRITY)
        assert allocated.verify_integrity_sha256(key)
        peer_address = peer.getsockname()[:2]
        assert client.create_permission(peer_address).verify_integrity_sha256(key)
        assert client.channel_bind(0x4001, peer_address).verify_integrity_sha256(key)
        client.send_channel_data(0x4001, b"to the peer")
        data, source = recv_from(peer, 3.0)
        assert data == b"to the peer" and source == client.relayed
        peer.sendto(b"to the client", client.relayed)
        received = client.receive(3.0)
        assert received is not None and received.kind == "channel" and received.payload == b"to the client"
        assert client.refresh(0).verify_integrity_sha256(key)


def algorithm_count(server: RelayServer, password: str, integrity: str) -> int:
    body = server.http("GET", "/metrics").body.decode()
    found = re.search(
        rf'^relayd_allocations_by_algorithm_total\{{password_algorithm="{password}",integrity="{integrity}"\}} (\d+)$',
        body, re.M)
    assert found, "relayd_allocations_by_algorithm_total missing"
    return int(found.group(1))


@pytest.mark.parametrize("modern", [True, False], ids=["sha256", "rfc5389"])
def test_metrics_and_log_lines_say_how_each_allocation_authenticated(server, modern):
    labels = ("sha256", "sha256") if modern else ("md5", "sha1")
    time.sleep(0.5)  # loops publish their counters every 250 ms: count the earlier tests' too
    before = algorithm_count(server, *labels)
    username, password = rest_credentials(server.secret, f"algorithms-{labels[0]}")
    client = sha256_client(server) if modern else TurnClient((server.host, server.port))
    with client:
        client.allocate(username, password)
        client.refresh(0)
    time.sleep(0.5)
    assert algorithm_count(server, *labels) - before == 1
    lines = [line for line in server.log_text().splitlines() if f"user=algorithms-{labels[0]}" in line]
    assert any("allocation_created" in line for line in lines)
    for line in lines:
        assert f"password_algorithm={labels[0]}" in line and f"integrity={labels[1]}" in line, line


def test_userhash_finds_a_static_user(server):
    with sha256_client(server, userhash=True) as client:
        allocated = client.allocate(STATIC_USER, STATIC_PASSWORD)
        assert allocated.cls == Class.SUCCESS
        client.refresh(0)


def test_a_rest_user_cannot_be_found_by_userhash(server):
    username, password = rest_credentials(server.secret, "hidden")
    with sha256_client(server, userhash=True) as client, pytest.raises(TurnError) as refused:
        client.allocate(username, password)
    assert refused.value.code == 401


@pytest.mark.parametrize("listed", [None, struct.pack("!HH", 1, 0), struct.pack("!HHHH", 1, 0, 2, 0)],
                         ids=["stripped", "md5-only", "reordered"])
def test_a_changed_password_algorithms_list_gets_400(server, listed):
    username, password = rest_credentials(server.secret, "bid-down")
    with sha256_client(server) as client:
        challenge = client.allocate_unauthenticated()
        key = hashlib.sha256(f"{username}:{server.realm}:{password}".encode()).digest()
        request = StunMessage(Method.ALLOCATE, Class.REQUEST)
        request.add(Attr.REQUESTED_TRANSPORT, struct.pack("!B3x", 17))
        request.add(Attr.USERNAME, username.encode())
        request.add(Attr.REALM, challenge.get(Attr.REALM))
        request.add(Attr.NONCE, challenge.get(Attr.NONCE))
        if listed is not None:
            request.add(Attr.PASSWORD_ALGORITHMS, listed)
        request.add(Attr.PASSWORD_ALGORITHM, struct.pack("!HH", SHA256, 0))
        answer = client.transact(request, key=key)
    assert answer.error_code()[0] == 400


def test_an_rfc5389_client_is_answered_with_message_integrity(server):
    username, password = rest_credentials(server.secret, "legacy")
    with TurnClient((server.host, server.port)) as client:
        allocated = client.allocate(username, password)
        assert allocated.has(Attr.MESSAGE_INTEGRITY) and not allocated.has(Attr.MESSAGE_INTEGRITY_SHA256)
        assert allocated.verify_integrity(client.key)
        client.refresh(0)


def test_both_integrity_attributes_are_checked(server):
    username, password = rest_credentials(server.secret, "mixed")
    with TurnClient((server.host, server.port)) as client:
        client.integrity = "both"
        allocated = client.allocate(username, password)
        assert allocated.has(Attr.MESSAGE_INTEGRITY_SHA256)
        assert allocated.verify_integrity_sha256(client.key)
        client.refresh(0)
