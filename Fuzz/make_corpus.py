#!/usr/bin/env python3
"""Writes the decoder fuzzer's seed corpus (Fuzz/corpus/decoder/) from scratch.

Independent of StunCodec on purpose: the RFC 5769 vectors are copied byte for byte, and the
TURN messages are encoded here with hashlib/hmac/zlib, so the seeds also cross-check the codec.
Deterministic: fixed transaction IDs, so re-running it reproduces the committed files.
"""
import hashlib
import hmac
import pathlib
import struct
import zlib

OUT = pathlib.Path(__file__).resolve().parent / "corpus" / "decoder"
COOKIE = 0x2112A442

RFC5769 = {
    # §2.1 Sample request (short-term password VOkJxbRl1RmTxUk/WvJxBt).
    "rfc5769-2.1-request": """
        00 01 00 58 21 12 a4 42 b7 e7 a7 01 bc 34 d6 86 fa 87 df ae
        80 22 00 10 53 54 55 4e 20 74 65 73 74 20 63 6c 69 65 6e 74
        00 24 00 04 6e 00 01 ff 80 29 00 08 93 2f f9 b1 51 26 3b 36
        00 06 00 09 65 76 74 6a 3a 68 36 76 59 20 20 20
        00 08 00 14 9a ea a7 0c bf d8 cb 56 78 1e f2 b5 b2 d3 f2 49 c1 b5 71 a2
        80 28 00 04 e5 7a 3b cf""",
    # §2.2 Sample IPv4 response.
    "rfc5769-2.2-ipv4-response": """
        01 01 00 3c 21 12 a4 42 b7 e7 a7 01 bc 34 d6 86 fa 87 df ae
        80 22 00 0b 74 65 73 74 20 76 65 63 74 6f 72 20
        00 20 00 08 00 01 a1 47 e1 12 a6 43
        00 08 00 14 2b 91 f5 99 fd 9e 90 c3 8c 74 89 f9 2a f9 ba 53 f0 6b e7 d7
        80 28 00 04 c0 7d 4c 96""",
    # §2.3 Sample IPv6 response.
    "rfc5769-2.3-ipv6-response": """
        01 01 00 48 21 12 a4 42 b7 e7 a7 01 bc 34 d6 86 fa 87 df ae
        80 22 00 0b 74 65 73 74 20 76 65 63 74 6f 72 20
        00 20 00 14 00 02 a1 47 01 13 a9 fa a5 d3 f1 79 bc 25 f4 b5 be d2 b9 d9
        00 08 00 14 a3 82 95 4e 4b e6 7b f1 17 84 c9 7c 82 92 c2 75 bf e3 ed 41
        80 28 00 04 c8 fb 0b 4c""",
    # §2.4 Sample request with long-term authentication (no FINGERPRINT).
    "rfc5769-2.4-long-term-request": """
        00 01 00 60 21 12 a4 42 78 ad 34 33 c6 ad 72 c0 29 da 41 2e
        00 06 00 12 e3 83 9e e3 83 88 e3 83 aa e3 83 83 e3 82 af e3 82 b9 00 00
        00 15 00 1c 66 2f 2f 34 39 39 6b 39 35 34 64 36 4f 4c 33 34 6f 4c 39 46 53 54 76 79 36 34 73 41
        00 14 00 0b 65 78 61 6d 70 6c 65 2e 6f 72 67 00
        00 08 00 14 f6 70 24 65 6d d6 4a 3e 02 b8 e0 71 2e 85 c9 a2 8c a8 96 66""",
}

# Attribute types (RFC 8489 §18.3, RFC 8656 §18).
USERNAME, MESSAGE_INTEGRITY, ERROR_CODE, REALM, NONCE = 0x0006, 0x0008, 0x0009, 0x0014, 0x0015
MESSAGE_INTEGRITY_SHA256, XOR_MAPPED_ADDRESS, SOFTWARE, FINGERPRINT = 0x001C, 0x0020, 0x8022, 0x8028
CHANNEL_NUMBER, LIFETIME, XOR_PEER_ADDRESS, DATA = 0x000C, 0x000D, 0x0012, 0x0013
XOR_RELAYED_ADDRESS, REQUESTED_TRANSPORT, DONT_FRAGMENT = 0x0016, 0x0019, 0x001A

# Methods and classes (RFC 8489 §5, RFC 8656 §17).
BINDING, ALLOCATE, REFRESH, SEND, CREATE_PERMISSION, CHANNEL_BIND = 0x001, 0x003, 0x004, 0x006, 0x008, 0x009
REQUEST, INDICATION, SUCCESS, ERROR = 0b00, 0b01, 0b10, 0b11

USER, REALM_TEXT, PASSWORD = b"alice", b"relayd.test", b"secret"
LONG_TERM_KEY = hashlib.md5(USER + b":" + REALM_TEXT + b":" + PASSWORD).digest()
NONCE_TEXT = b"obMatJos2AAABadl7W7PeDU4hKE72jda"


def message_type(method, cls):
    return (method & 0x000F) | ((method & 0x0070) << 1) | ((method & 0x0F80) << 2) | ((cls & 1) << 4) | ((cls & 2) << 7)


def attribute(kind, value):
    return struct.pack("!HH", kind, len(value)) + value + b"\x00" * (-len(value) % 4)


def xor_address(ip, port, txid):
    """XOR-MAPPED-ADDRESS / XOR-PEER-ADDRESS / XOR-RELAYED-ADDRESS value (RFC 8489 §14.2)."""
    packed = bytes(int(x) for x in ip.split(".")) if "." in ip else ipv6(ip)
    mask = struct.pack("!I", COOKIE) + txid
    family = 0x01 if len(packed) == 4 else 0x02
    return struct.pack("!BBH", 0, family, port ^ (COOKIE >> 16)) + bytes(a ^ b for a, b in zip(packed, mask))


def ipv6(text):
    head, _, tail = text.partition("::")
    groups = [g for g in head.split(":") if g], [g for g in tail.split(":") if g]
    full = groups[0] + ["0"] * (8 - len(groups[0]) - len(groups[1])) + groups[1]
    return b"".join(struct.pack("!H", int(g, 16)) for g in full)


def message(method, cls, txid, attributes, key=None, sha256=False, fingerprint=True):
    """Encodes a STUN message. With a key, MESSAGE-INTEGRITY (HMAC-SHA1) or MESSAGE-INTEGRITY-SHA256
    follows the attributes, then FINGERPRINT (RFC 8489 §14.5, §14.6, §14.7)."""
    body = b"".join(attribute(k, v) for k, v in attributes)
    kind = message_type(method, cls)
    if key is not None:
        kind_mi, digest = (MESSAGE_INTEGRITY_SHA256, hashlib.sha256) if sha256 else (MESSAGE_INTEGRITY, hashlib.sha1)
        size = digest().digest_size
        header = struct.pack("!HHI", kind, len(body) + 4 + size, COOKIE) + txid
        body += attribute(kind_mi, hmac.new(key, header + body, digest).digest())
    if fingerprint:
        header = struct.pack("!HHI", kind, len(body) + 8, COOKIE) + txid
        crc = zlib.crc32(header + body) ^ 0x5354554E
        body += attribute(FINGERPRINT, struct.pack("!I", crc))
    return struct.pack("!HHI", kind, len(body), COOKIE) + txid + body


def channel_data(channel, data, padded):
    """ChannelData (RFC 8656 §12.4); padded to 4 bytes as on TCP/TLS (§12.5)."""
    return struct.pack("!HH", channel, len(data)) + data + (b"\x00" * (-len(data) % 4) if padded else b"")


def error_code(code, reason):
    return struct.pack("!HBB", 0, code // 100, code % 100) + reason


def seeds():
    for name, text in RFC5769.items():
        yield name, bytes.fromhex("".join(text.split()))

    t = [bytes([i]) * 12 for i in range(1, 16)]
    auth = [(USERNAME, USER), (REALM, REALM_TEXT), (NONCE, NONCE_TEXT)]
    peer4 = (XOR_PEER_ADDRESS, xor_address("198.51.100.7", 49152, t[3]))
    peer6 = (XOR_PEER_ADDRESS, xor_address("2001:db8::7", 49153, t[3]))

    yield "turn-allocate-request-unauthenticated", message(
        ALLOCATE, REQUEST, t[0], [(REQUESTED_TRANSPORT, bytes([17, 0, 0, 0])), (DONT_FRAGMENT, b"")])
    yield "turn-allocate-error-401", message(
        ALLOCATE, ERROR, t[0],
        [(ERROR_CODE, error_code(401, b"Unauthorized")), (REALM, REALM_TEXT), (NONCE, NONCE_TEXT),
         (SOFTWARE, b"relayd")])
    yield "turn-allocate-request", message(
        ALLOCATE, REQUEST, t[1],
        [(REQUESTED_TRANSPORT, bytes([17, 0, 0, 0])), (LIFETIME, struct.pack("!I", 600))] + auth, key=LONG_TERM_KEY)
    yield "turn-allocate-success", message(
        ALLOCATE, SUCCESS, t[1],
        [(XOR_RELAYED_ADDRESS, xor_address("203.0.113.9", 50000, t[1])),
         (XOR_MAPPED_ADDRESS, xor_address("192.0.2.33", 61000, t[1])), (LIFETIME, struct.pack("!I", 600))],
        key=LONG_TERM_KEY)
    yield "turn-create-permission-request", message(
        CREATE_PERMISSION, REQUEST, t[3], [peer4, peer6] + auth, key=LONG_TERM_KEY)
    yield "turn-channel-bind-request", message(
        CHANNEL_BIND, REQUEST, t[4],
        [(CHANNEL_NUMBER, struct.pack("!HH", 0x4001, 0)), peer4] + auth, key=LONG_TERM_KEY)
    yield "turn-refresh-delete", message(
        REFRESH, REQUEST, t[5], [(LIFETIME, struct.pack("!I", 0))] + auth, key=LONG_TERM_KEY)
    yield "turn-error-438-stale-nonce", message(
        REFRESH, ERROR, t[5], [(ERROR_CODE, error_code(438, b"Stale Nonce")), (REALM, REALM_TEXT),
                               (NONCE, NONCE_TEXT)])
    yield "turn-send-indication", message(
        SEND, INDICATION, t[6], [peer4, (DATA, b"hello, peer")], fingerprint=False)
    yield "stun-binding-success-sha256", message(
        BINDING, SUCCESS, t[7], [(XOR_MAPPED_ADDRESS, xor_address("192.0.2.1", 32853, t[7]))],
        key=b"VOkJxbRl1RmTxUk/WvJxBt", sha256=True)
    yield "channeldata-udp", channel_data(0x4001, bytes(range(37)), padded=False)
    yield "channeldata-stream", channel_data(0x4001, bytes(range(37)), padded=True)
    # A TCP/TLS stream: a STUN request, a padded ChannelData frame, another STUN message.
    stream = (message(BINDING, REQUEST, t[8], [(SOFTWARE, b"relayd")])
              + channel_data(0x4FFF, b"\x80" * 5, padded=True)
              + message(SEND, INDICATION, t[6], [peer4, (DATA, b"x")]))
    yield "stream-stun-channeldata-stun", stream


if __name__ == "__main__":
    OUT.mkdir(parents=True, exist_ok=True)
    for name, data in seeds():
        (OUT / name).write_bytes(data)
        print(f"{len(data):5d}  {name}")
