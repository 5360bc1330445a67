"""The server against the pure-Python STUN/TURN client in stunclient.py.

Each test reads like the RFC rule it checks (RFC 8489 STUN, RFC 8656 TURN).
"Dropped" means: no answer within QUIET seconds, and the server still answers
a Binding request right after.
"""

from __future__ import annotations

import random
import struct
import time

import pytest

from conftest import server_kind
from stunclient import (
    Attr,
    Class,
    Method,
    StunMessage,
    TurnClient,
    TurnError,
    binding_request,
    encode_xor_address,
    recv_from,
    rest_credentials,
    udp_socket,
)

QUIET = 0.5  # how long "no answer" is waited for
WAIT = 3.0  # upper bound for an answer that must come
CHANNEL = 0x4000
RELEASE_TIMEOUT = 5.0  # bound for an allocation to be gone after Refresh 0


def eventually(predicate, timeout: float) -> bool:
    """Poll `predicate` until it holds or `timeout` passes (bounded)."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)


def relays(client: TurnClient, peer, channel: int = 0x4000) -> bool:
    """Does a ChannelData probe on `channel` reach `peer` (within QUIET)?"""
    client.send_channel_data(channel, b"probe")
    got = recv_from(peer, QUIET)
    while got is not None and got[0] != b"probe":
        got = recv_from(peer, QUIET)
    return got is not None


def error_of(exc: pytest.ExceptionInfo) -> int | None:
    return exc.value.code


def assert_still_answers(client: TurnClient) -> None:
    resp = client.binding()
    assert resp.cls == Class.SUCCESS
    assert resp.xor_address(Attr.XOR_MAPPED_ADDRESS) == client.local_address


# --- Binding (RFC 8489 §6, §14.2) ---------------------------------------------------


def test_binding_response_carries_the_clients_address_as_xor_mapped_address(relay):
    with TurnClient(relay.address) as client:
        resp = client.binding()
        assert resp.method == Method.BINDING
        assert resp.cls == Class.SUCCESS
        assert resp.xor_address(Attr.XOR_MAPPED_ADDRESS) == client.local_address
        if resp.has(Attr.FINGERPRINT):
            assert resp.verify_fingerprint()


# --- Allocate and relaying (RFC 8656 §7-§12) -----------------------------------------


def test_allocation_relays_both_ways_then_refresh_zero_releases_it(relay):
    username, password = relay.credentials("alice")
    peer = udp_socket()
    peer_addr = peer.getsockname()
    try:
        with TurnClient(relay.address) as client:
            # §7.2 / RFC 8489 §9.2.4: the first Allocate without credentials gets
            # 401 with REALM and NONCE.
            challenge = client.allocate_unauthenticated()
            assert challenge.cls == Class.ERROR
            assert challenge.error_code()[0] == 401
            assert challenge.text(Attr.REALM) == relay.realm
            assert challenge.get(Attr.NONCE)

            # §7.3: the success response carries the relayed and mapped addresses
            # and a lifetime, and is integrity-protected with the same key.
            resp = client.allocate(username, password)
            assert resp.verify_integrity(client.key)
            relayed = client.relayed
            assert relayed[0] == relay.host
            assert relay.min_port <= relayed[1] <= relay.max_port
            assert client.mapped == client.local_address
            assert resp.lifetime() and resp.lifetime() > 0

            # §9: without a permission, data from the peer is dropped.
            peer.sendto(b"no permission yet", relayed)
            assert client.receive(QUIET) is None

            client.create_permission(peer_addr)

            # §11: Send indication -> UDP datagram from the relayed address.
            client.send_indication(peer_addr, b"via a Send indication, unpadded")
            assert recv_from(peer, WAIT) == (b"via a Send indication, unpadded", relayed)

            # §11: peer -> relayed address -> Data indication naming the peer.
            peer.sendto(b"back as a Data indication", relayed)
            got = client.receive(WAIT)
            assert got is not None and got.kind == "data"
            assert got.peer == peer_addr
            assert got.payload == b"back as a Data indication"

            # §12: with a channel bound, both directions use ChannelData.
            client.channel_bind(CHANNEL, peer_addr)
            out = bytes(range(37))  # not a multiple of 4: sent unpadded over UDP
            client.send_channel_data(CHANNEL, out)
            assert recv_from(peer, WAIT) == (out, relayed)

            back = b"\x00\xffchannel data from the peer\x01"
            peer.sendto(back, relayed)
            got = client.receive(WAIT)
            assert got is not None and got.kind == "channel"
            assert (got.channel, got.payload) == (CHANNEL, back)

            # §8.2: Refresh with LIFETIME 0 deletes the allocation; the success
            # response says LIFETIME 0.
            resp = client.refresh(0)
            assert resp.verify_integrity(client.key)
            assert resp.lifetime() == 0

            # Once it is gone, ChannelData is no longer relayed and a Refresh gets
            # 437. coturn deletes on its next timer tick (about 1 s later), so
            # this waits for it, bounded by RELEASE_TIMEOUT.
            assert eventually(lambda: not relays(client, peer), RELEASE_TIMEOUT), \
                f"ChannelData still relayed {RELEASE_TIMEOUT} s after Refresh LIFETIME 0"
            with pytest.raises(TurnError) as exc:
                client.refresh(600)
            assert error_of(exc) == 437  # Allocation Mismatch: nothing left to refresh
    finally:
        peer.close()


def test_second_allocate_on_the_same_five_tuple_is_437(relay):
    username, password = relay.credentials("alice")
    with TurnClient(relay.address) as client:
        client.allocate(username, password)
        try:
            # §7.2 step 2: a new Allocate (new transaction id) on a 5-tuple that
            # already has an allocation gets 437 Allocation Mismatch.
            with pytest.raises(TurnError) as exc:
                client.check(client.authenticated_request(Method.ALLOCATE, [
                    (Attr.REQUESTED_TRANSPORT, struct.pack("!B3x", 17))]), "Allocate")
            assert error_of(exc) == 437
        finally:
            client.refresh(0)


def test_wrong_password_gets_401(relay):
    username, _ = relay.credentials("mallory")
    with TurnClient(relay.address) as client:
        with pytest.raises(TurnError) as exc:
            client.allocate(username, "not-the-password")
        assert error_of(exc) == 401
        assert_still_answers(client)


def test_password_from_another_secret_gets_401(relay):
    username, password = rest_credentials("some-other-secret", "mallory", ttl=3600)
    with TurnClient(relay.address) as client:
        with pytest.raises(TurnError) as exc:
            client.allocate(username, password)
        assert error_of(exc) == 401


def test_expired_rest_username_gets_401(relay):
    # The password is right for the username; only the timestamp is past.
    username, password = rest_credentials(relay.secret, "alice", expiry=int(time.time()) - 3600)
    with TurnClient(relay.address) as client:
        with pytest.raises(TurnError) as exc:
            client.allocate(username, password)
        assert error_of(exc) == 401


# --- hostile input: dropped, never answered, server keeps working --------------------


def _binding_bytes() -> bytes:
    req = binding_request()
    req.add(Attr.SOFTWARE, b"relayd-integration")
    return req.encode()


def _bad_fingerprint() -> bytes:
    data = bytearray(_binding_bytes())
    data[-1] ^= 0xFF  # last byte of the FINGERPRINT value
    return bytes(data)


def _length_beyond_datagram() -> bytes:
    data = bytearray(_binding_bytes())
    struct.pack_into("!H", data, 2, len(data) - 20 + 100)  # claims 100 bytes more than sent
    return bytes(data)


def _header_only_claiming_body() -> bytes:
    header = _binding_bytes()[:20]
    return header[:2] + struct.pack("!H", 8) + header[4:]


def _attribute_beyond_message() -> bytes:
    req = binding_request()
    body = struct.pack("!HH", Attr.SOFTWARE, 200) + b"short"  # claims 200, has 5
    body += b"\x00" * (-len(body) % 4)
    return struct.pack("!HHI", 0x0001, len(body), 0x2112A442) + req.transaction_id + body


def _garbage(seed: int) -> bytes:
    rng = random.Random(seed)
    data = bytearray(rng.randbytes(64))
    data[0] = 0x80 | (data[0] & 0x3F)  # first two bits 10: neither STUN nor ChannelData
    return bytes(data)


def _garbage_with_cookie() -> bytes:
    # Looks like a STUN header (type 0x0001, cookie), then random attribute bytes.
    rng = random.Random(8656)
    body = rng.randbytes(48)
    return struct.pack("!HHI", 0x0001, len(body), 0x2112A442) + rng.randbytes(12) + body


def _binding_success_sent_to_server() -> bytes:
    # A response is never answered (RFC 8489 §6.3: only requests get responses).
    resp = StunMessage(Method.BINDING, Class.SUCCESS)
    resp.add(Attr.XOR_MAPPED_ADDRESS, encode_xor_address(("127.0.0.1", 9), resp.transaction_id))
    return resp.encode()


HOSTILE = {
    "empty": b"",
    "truncated-header": _binding_bytes()[:10],
    "header-only-length-beyond-datagram": _header_only_claiming_body(),
    "length-beyond-datagram": _length_beyond_datagram(),
    "garbage-1": _garbage(1),
    "garbage-2": _garbage(2),
    "bad-fingerprint": _bad_fingerprint(),
    "binding-success-response": _binding_success_sent_to_server(),
    "channel-data-length-35510-carrying-3-bytes": struct.pack("!HH", CHANNEL, 35510) + b"abc",
    "channel-data-shorter-than-header": b"\x40\x00\x00",
}


@pytest.mark.parametrize("datagram", list(HOSTILE.values()), ids=list(HOSTILE))
def test_malformed_datagram_is_dropped_and_server_still_answers(relay, datagram):
    with TurnClient(relay.address) as client:
        client.send_raw(datagram)
        assert client.recv_raw(QUIET) is None
        assert_still_answers(client)


# A valid header followed by attributes whose lengths run past the message: a
# malformed request (RFC 8489 §14: each attribute is TLV within the message).
# Dropping it or answering 400 Bad Request are both right; a success is not.
MALFORMED_ATTRIBUTES = {
    "attribute-beyond-message": _attribute_beyond_message(),
    "garbage-after-valid-header": _garbage_with_cookie(),
}


@pytest.mark.xfail(
    server_kind() == "coturn",
    reason="coturn 4.6.1 answers a Binding request whose attributes run past the message with a success",
    strict=True,
)
@pytest.mark.parametrize("datagram", list(MALFORMED_ATTRIBUTES.values()), ids=list(MALFORMED_ATTRIBUTES))
def test_request_with_attributes_past_the_message_gets_no_success(relay, datagram):
    with TurnClient(relay.address) as client:
        client.send_raw(datagram)
        answer = client.recv_raw(QUIET)
        if answer is not None:
            resp = StunMessage.decode(answer)
            assert resp.cls == Class.ERROR and resp.error_code()[0] == 400, \
                f"answered {resp.cls:#b} {resp.error_code()}"
        assert_still_answers(client)


def test_oversized_channel_data_on_a_bound_channel_is_not_relayed(relay):
    """ChannelData whose length (35510) exceeds the 3 bytes it carries must not be
    relayed (RFC 8656 §12.6), even on a bound channel; valid ChannelData still is."""
    username, password = relay.credentials("alice")
    peer = udp_socket()
    peer_addr = peer.getsockname()
    try:
        with TurnClient(relay.address) as client:
            client.allocate(username, password)
            client.channel_bind(CHANNEL, peer_addr)

            client.send_raw(struct.pack("!HH", CHANNEL, 35510) + b"abc")
            assert recv_from(peer, QUIET) is None
            assert client.recv_raw(QUIET) is None

            # ChannelData on a channel that is not bound is dropped too (§12.6).
            client.send_channel_data(CHANNEL + 1, b"unbound channel")
            assert recv_from(peer, QUIET) is None

            client.send_channel_data(CHANNEL, b"still relayed")
            assert recv_from(peer, WAIT) == (b"still relayed", client.relayed)
            assert_still_answers(client)
            client.refresh(0)
    finally:
        peer.close()
