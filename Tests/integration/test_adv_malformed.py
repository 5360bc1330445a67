"""Adversarial suite, part 4: malformed input (RFC 8489 §5, §14, §14.7; RFC 8656
§12.4; RFC 7983 demultiplexing by first byte).

Truncated headers, lengths beyond the datagram, attribute overruns, odd lengths, a wrong
magic cookie, a wrong FINGERPRINT, ChannelData declaring 35,510 bytes while carrying 3, and
random bytes: each is dropped without an answer, counted on /metrics under its reason
(relayd_dropped_packets_total{reason=...}) exactly once per datagram, and the server keeps
answering. relayd's reasons: STUN that does not parse and ChannelData whose length runs past
the datagram -> "malformed"; a first byte that is neither STUN (0-3) nor ChannelData (64-127)
-> "not_stun".
"""

from __future__ import annotations

import random
import struct
import zlib

import pytest

from conftest import RelayServer, running, server_kind
from stunclient import (
    FINGERPRINT_XOR,
    MAGIC_COOKIE,
    Attr,
    Class,
    Method,
    StunMessage,
    TurnClient,
    encode_attribute,
    message_type,
    recv_from,
    udp_socket,
)
from test_adversarial import (
    IS_COTURN,
    coturn_differs,
    allocate,
    assert_dropped_silently,
    baseline_metric,
    relayd_only,
    settle_metric,
)

CHANNEL = 0x4000
BINDING = message_type(Method.BINDING, Class.REQUEST)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = RelayServer(server_kind(), tmp_path_factory.mktemp("malformed"), extra_args=["--relay-threads=1"])
    with running(s):
        yield s


def header(length: int, mtype: int = BINDING, cookie: int = MAGIC_COOKIE, tid: bytes = b"T" * 12) -> bytes:
    return struct.pack("!HHI", mtype, length, cookie) + tid


def binding_with(attrs: bytes, declared: int | None = None, cookie: int = MAGIC_COOKIE) -> bytes:
    return header(len(attrs) if declared is None else declared, cookie=cookie) + attrs


def bad_fingerprint() -> bytes:
    body = encode_attribute(Attr.SOFTWARE, b"fuzz")
    crc = (zlib.crc32(header(len(body) + 8) + body) ^ FINGERPRINT_XOR ^ 0x1) & 0xFFFFFFFF
    return header(len(body) + 8) + body + encode_attribute(Attr.FINGERPRINT, struct.pack("!I", crc))


def attribute_after_fingerprint() -> bytes:
    msg = StunMessage(Method.BINDING, Class.REQUEST, transaction_id=b"F" * 12).encode(fingerprint=True)
    tail = encode_attribute(Attr.SOFTWARE, b"late")
    return msg[:2] + struct.pack("!H", len(msg) - 20 + len(tail)) + msg[4:] + tail


# Datagrams that relayd must drop as "malformed", with why.
MALFORMED = {
    "empty-datagram": b"",
    "empty-after-type": b"\x00\x01",
    "truncated-header-19": header(0)[:19],
    "header-only-1-byte": b"\x00",
    "length-beyond-datagram": binding_with(encode_attribute(Attr.SOFTWARE, b"abcd"), declared=64),
    "length-shorter-than-attributes": binding_with(encode_attribute(Attr.SOFTWARE, b"abcdefgh"), declared=4),
    "attribute-overruns-message": binding_with(struct.pack("!HH", Attr.SOFTWARE, 200) + b"abcd"),
    "attribute-header-cut": binding_with(b"\x80\x22"),
    "odd-message-length": header(3) + b"abc",
    "odd-length-2": header(2) + b"\x80\x22",
    "bad-magic-cookie": binding_with(b"", cookie=0x2112A443),
    "zero-cookie-rfc3489": binding_with(b"", cookie=0),
    "bad-fingerprint": bad_fingerprint(),
    "attribute-after-fingerprint": attribute_after_fingerprint(),
    "channel-data-header-cut": b"\x40\x00\x00",
    "channel-data-35510-carrying-3": struct.pack("!HH", CHANNEL, 35510) + b"abc",
    "channel-data-length-plus-one": struct.pack("!HH", CHANNEL, 9) + b"12345678",
    # 'G' is 0x47: demultiplexed as ChannelData (first byte 64-127), whose length runs past.
    "ascii-get": b"GET / HTTP/1.1\r\n\r\n",
    "address-attribute-overrun": binding_with(struct.pack("!HH", Attr.XOR_MAPPED_ADDRESS, 8) + b"\x00\x01\x12"),
}
NOT_STUN = {
    "tls-client-hello": bytes([0x16, 0x03, 0x01, 0x00, 0x05]) + b"hello",
    "dtls-record": bytes([0x17, 0xFE, 0xFD]) + bytes(20),
    "rtp-header": bytes([0x80, 0x60]) + bytes(10),
    "all-ff": b"\xff" * 64,
}


# Drops this module expects, by reason: the last test compares them with /metrics.
EXPECTED_DROPS = {"malformed": 0, "not_stun": 0}


def send_dropped(client: TurnClient, datagrams: list[bytes], reason: str) -> None:
    """Sends each datagram and proves no answer came (the Binding sent after them is the first
    thing answered, and nothing follows it)."""
    for d in datagrams:
        client.send_raw(d)
    EXPECTED_DROPS[reason] += len(datagrams)
    assert_dropped_silently(client)


def send_and_count(server, client: TurnClient, datagrams: list[bytes], reason: str) -> None:
    """send_dropped, and relayd counted exactly len(datagrams) more drops under `reason`."""
    before = None if IS_COTURN else baseline_metric(server, "relayd_dropped_packets_total", reason=reason)
    send_dropped(client, datagrams, reason)
    if before is not None:
        after = settle_metric(server, "relayd_dropped_packets_total", before + len(datagrams), reason=reason)
        assert after - before == len(datagrams)


COTURN_ANSWERS = {
    "attribute-overruns-message": "coturn 4.6.1 answers a Binding whose attribute runs past the message",
    "bad-magic-cookie": "coturn answers RFC 3489 Binding requests (no magic cookie check)",
    "zero-cookie-rfc3489": "coturn answers RFC 3489 Binding requests (no magic cookie check)",
}


@pytest.mark.parametrize("datagram", [
    pytest.param(d, id=name, marks=[coturn_differs(COTURN_ANSWERS[name])] if name in COTURN_ANSWERS else [])
    for name, d in MALFORMED.items()])
def test_malformed_datagram_is_dropped(server, datagram):
    with TurnClient(server.address) as client:
        send_dropped(client, [datagram], "malformed")


@pytest.mark.parametrize("datagram", list(NOT_STUN.values()), ids=list(NOT_STUN))
def test_datagram_that_is_neither_stun_nor_channel_data_is_dropped(server, datagram):
    with TurnClient(server.address) as client:
        send_dropped(client, [datagram], "not_stun")


def test_oversize_channel_data_on_a_bound_channel_sent_many_times(server):
    """RFC 8656 §12.4: ChannelData whose length field (35,510) exceeds what it carries (3) is
    dropped, never relayed, never read past: 200 of them, then valid ChannelData still flows."""
    peer = udp_socket()
    try:
        with TurnClient(server.address) as client:
            assert allocate(server, client, user="cd").cls == Class.SUCCESS
            client.channel_bind(CHANNEL, peer.getsockname())
            send_and_count(server, client, [struct.pack("!HH", CHANNEL, 35510) + b"abc"] * 200, "malformed")
            assert recv_from(peer, 0.2) is None
            client.send_channel_data(CHANNEL, b"still relayed")
            assert recv_from(peer, 3.0) == (b"still relayed", client.relayed)
            client.refresh(0)
    finally:
        peer.close()


def random_datagrams(seed: int, count: int) -> dict[str, list[bytes]]:
    """Random datagrams grouped by the drop reason their first byte decides (RFC 7983):
    0-3 STUN, 64-127 ChannelData, else not STUN. A random STUN header never carries the magic
    cookie and a random ChannelData length almost never fits, so each group's reason is
    deterministic (datagrams that would by chance be valid are left out)."""
    rng = random.Random(seed)
    groups: dict[str, list[bytes]] = {"malformed": [], "not_stun": []}
    for _ in range(count):
        data = bytes(rng.getrandbits(8) for _ in range(rng.randrange(1, 300)))
        first = data[0]
        if first <= 3:
            if len(data) >= 8 and data[4:8] == struct.pack("!I", MAGIC_COOKIE):
                continue
            groups["malformed"].append(data)
        elif 64 <= first <= 127:
            if len(data) >= 4 and 4 + struct.unpack("!H", data[2:4])[0] <= len(data):
                continue  # a well-formed ChannelData for no channel: dropped as no_allocation
            groups["malformed"].append(data)
        else:
            groups["not_stun"].append(data)
    # Make the STUN group as big as the others: first bytes 0-3 are rare in uniform bytes.
    for _ in range(count // 4):
        data = bytes([rng.randrange(4)]) + bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 120)))
        if len(data) < 8 or data[4:8] != struct.pack("!I", MAGIC_COOKIE):
            groups["malformed"].append(data)
    return groups


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_bytes_are_dropped_and_counted_by_reason(server, seed):
    with TurnClient(server.address) as client:
        for reason, datagrams in random_datagrams(seed, 300).items():
            send_and_count(server, client, datagrams, reason)


def test_server_still_relays_after_the_garbage(server):
    """The module's abuse left the server healthy: a full allocate-and-relay round trip works."""
    peer = udp_socket()
    try:
        with TurnClient(server.address) as client:
            assert allocate(server, client, user="after").cls == Class.SUCCESS
            client.create_permission(peer.getsockname())
            client.send_indication(peer.getsockname(), b"alive")
            assert recv_from(peer, 3.0) == (b"alive", client.relayed)
            client.refresh(0)
    finally:
        peer.close()


@relayd_only
def test_every_drop_was_counted_under_its_reason(server):
    """Each datagram this module sent to be dropped was counted once, under its reason."""
    for reason, expected in EXPECTED_DROPS.items():
        assert settle_metric(server, "relayd_dropped_packets_total", expected, reason=reason) == expected, reason
