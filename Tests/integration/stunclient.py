"""A small STUN/TURN client for the integration tests.

Written from RFC 8489 (STUN) and RFC 8656 (TURN); only what the tests need:
Binding, Allocate with the long-term credential mechanism, CreatePermission,
ChannelBind, Send/Data indications, ChannelData and Refresh, over UDP.
Every wait is bounded.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import os
import select
import socket
import struct
import time
import zlib
from collections import deque
from dataclasses import dataclass, field

MAGIC_COOKIE = 0x2112A442
HEADER_SIZE = 20
# RFC 8489 §14.7: FINGERPRINT = CRC-32 of the message XOR 0x5354554e.
FINGERPRINT_XOR = 0x5354554E


class Method:
    BINDING = 0x001
    ALLOCATE = 0x003
    REFRESH = 0x004
    SEND = 0x006
    DATA = 0x007
    CREATE_PERMISSION = 0x008
    CHANNEL_BIND = 0x009
    CONNECT = 0x00A             # RFC 6062 §6.1
    CONNECTION_BIND = 0x00B
    CONNECTION_ATTEMPT = 0x00C


class Class:
    REQUEST = 0b00
    INDICATION = 0b01
    SUCCESS = 0b10
    ERROR = 0b11


class Attr:
    MAPPED_ADDRESS = 0x0001
    USERNAME = 0x0006
    MESSAGE_INTEGRITY = 0x0008
    ERROR_CODE = 0x0009
    UNKNOWN_ATTRIBUTES = 0x000A
    CHANNEL_NUMBER = 0x000C
    LIFETIME = 0x000D
    XOR_PEER_ADDRESS = 0x0012
    DATA = 0x0013
    REALM = 0x0014
    NONCE = 0x0015
    XOR_RELAYED_ADDRESS = 0x0016
    REQUESTED_ADDRESS_FAMILY = 0x0017
    EVEN_PORT = 0x0018
    REQUESTED_TRANSPORT = 0x0019
    DONT_FRAGMENT = 0x001A
    MESSAGE_INTEGRITY_SHA256 = 0x001C
    PASSWORD_ALGORITHM = 0x001D
    USERHASH = 0x001E
    PASSWORD_ALGORITHMS = 0x8002
    ICMP = 0x8004
    XOR_MAPPED_ADDRESS = 0x0020
    CONNECTION_ID = 0x002A      # RFC 6062 §6.2.1
    SOFTWARE = 0x8022
    ALTERNATE_SERVER = 0x8023
    FINGERPRINT = 0x8028


UDP_TRANSPORT = 17  # RFC 8656 §18.8: protocol number of UDP
TCP_TRANSPORT = 6   # RFC 6062 §6.2: protocol number of TCP


class StunDecodeError(ValueError):
    """The bytes are not a well-formed STUN message."""


class TurnError(Exception):
    """A request got an error response (or none at all)."""

    def __init__(self, message: str, code: int | None = None, response: "StunMessage | None" = None):
        super().__init__(message)
        self.code = code
        self.response = response


# --- message type (RFC 8489 §5) --------------------------------------------


def message_type(method: int, cls: int) -> int:
    """Interleave the 12 method bits with the 2 class bits: M11..M7 C1 M6..M4 C0 M3..M0."""
    return (
        ((method & 0x0F80) << 2)
        | ((method & 0x0070) << 1)
        | (method & 0x000F)
        | ((cls & 0b10) << 7)
        | ((cls & 0b01) << 4)
    )


def split_message_type(value: int) -> tuple[int, int]:
    method = (value & 0x000F) | ((value & 0x00E0) >> 1) | ((value & 0x3E00) >> 2)
    cls = ((value & 0x0100) >> 7) | ((value & 0x0010) >> 4)
    return method, cls


def new_transaction_id() -> bytes:
    return os.urandom(12)


# --- addresses (RFC 8489 §14.1, §14.2) ---------------------------------------


def _address_tuple(addr) -> tuple[str, int]:
    return (str(addr[0]), int(addr[1]))


def encode_xor_address(addr, transaction_id: bytes) -> bytes:
    host, port = _address_tuple(addr)
    ip = ipaddress.ip_address(host)
    xport = port ^ (MAGIC_COOKIE >> 16)
    if ip.version == 4:
        xaddr = int(ip) ^ MAGIC_COOKIE
        return struct.pack("!BBHI", 0, 0x01, xport, xaddr)
    key = struct.pack("!I", MAGIC_COOKIE) + transaction_id
    xaddr = bytes(a ^ b for a, b in zip(ip.packed, key))
    return struct.pack("!BBH", 0, 0x02, xport) + xaddr


def decode_xor_address(value: bytes, transaction_id: bytes) -> tuple[str, int]:
    if len(value) < 8:
        raise StunDecodeError("XOR address too short")
    _, family, xport = struct.unpack("!BBH", value[:4])
    port = xport ^ (MAGIC_COOKIE >> 16)
    if family == 0x01:
        if len(value) != 8:
            raise StunDecodeError("IPv4 XOR address has wrong length")
        (xaddr,) = struct.unpack("!I", value[4:8])
        return (str(ipaddress.IPv4Address(xaddr ^ MAGIC_COOKIE)), port)
    if family == 0x02:
        if len(value) != 20:
            raise StunDecodeError("IPv6 XOR address has wrong length")
        key = struct.pack("!I", MAGIC_COOKIE) + transaction_id
        raw = bytes(a ^ b for a, b in zip(value[4:20], key))
        return (str(ipaddress.IPv6Address(raw)), port)
    raise StunDecodeError(f"unknown address family {family}")


def decode_plain_address(value: bytes) -> tuple[str, int]:
    _, family, port = struct.unpack("!BBH", value[:4])
    if family == 0x01:
        return (str(ipaddress.IPv4Address(value[4:8])), port)
    return (str(ipaddress.IPv6Address(value[4:20])), port)


# --- messages -----------------------------------------------------------------


def _pad4(n: int) -> int:
    return (4 - n % 4) % 4


def encode_attribute(attr_type: int, value: bytes) -> bytes:
    return struct.pack("!HH", attr_type, len(value)) + value + b"\x00" * _pad4(len(value))


@dataclass
class StunMessage:
    method: int
    cls: int
    transaction_id: bytes = field(default_factory=new_transaction_id)
    attributes: list[tuple[int, bytes]] = field(default_factory=list)
    # Set by decode(): the datagram and where each attribute's header starts.
    raw: bytes = b""
    offsets: list[int] = field(default_factory=list)

    def add(self, attr_type: int, value: bytes) -> "StunMessage":
        self.attributes.append((attr_type, value))
        return self

    def get(self, attr_type: int) -> bytes | None:
        for t, v in self.attributes:
            if t == attr_type:
                return v
        return None

    def has(self, attr_type: int) -> bool:
        return self.get(attr_type) is not None

    # -- encode

    def encode(self, integrity_key: bytes | None = None, fingerprint: bool = True,
               integrity: str = "sha1") -> bytes:
        """Serialize; MESSAGE-INTEGRITY (§14.5) and/or MESSAGE-INTEGRITY-SHA256 (§14.6) per
        `integrity` ("sha1", "sha256", "both"), then FINGERPRINT (§14.7), are appended last."""
        body = b"".join(encode_attribute(t, v) for t, v in self.attributes)
        mtype = message_type(self.method, self.cls)

        def header(length: int) -> bytes:
            return struct.pack("!HHI", mtype, length, MAGIC_COOKIE) + self.transaction_id

        if integrity_key is not None and integrity in ("sha1", "both"):
            # The length covers the MESSAGE-INTEGRITY attribute (24 bytes), the
            # HMAC covers everything before it.
            mac = hmac.new(integrity_key, header(len(body) + 24) + body, hashlib.sha1).digest()
            body += encode_attribute(Attr.MESSAGE_INTEGRITY, mac)
        if integrity_key is not None and integrity in ("sha256", "both"):
            mac = hmac.new(integrity_key, header(len(body) + 36) + body, hashlib.sha256).digest()
            body += encode_attribute(Attr.MESSAGE_INTEGRITY_SHA256, mac)
        if fingerprint:
            crc = zlib.crc32(header(len(body) + 8) + body) ^ FINGERPRINT_XOR
            body += encode_attribute(Attr.FINGERPRINT, struct.pack("!I", crc & 0xFFFFFFFF))
        return header(len(body)) + body

    # -- decode

    @classmethod
    def decode(cls, data: bytes) -> "StunMessage":
        if len(data) < HEADER_SIZE:
            raise StunDecodeError("shorter than a STUN header")
        mtype, length, cookie = struct.unpack("!HHI", data[:8])
        if mtype & 0xC000:
            raise StunDecodeError("first two bits are not zero")
        if cookie != MAGIC_COOKIE:
            raise StunDecodeError("wrong magic cookie")
        if length % 4 or HEADER_SIZE + length != len(data):
            raise StunDecodeError("length field does not match the datagram")
        method, klass = split_message_type(mtype)
        msg = cls(method=method, cls=klass, transaction_id=data[8:20], raw=bytes(data))
        pos = HEADER_SIZE
        while pos < len(data):
            if pos + 4 > len(data):
                raise StunDecodeError("truncated attribute header")
            attr_type, attr_len = struct.unpack("!HH", data[pos : pos + 4])
            end = pos + 4 + attr_len
            if end > len(data):
                raise StunDecodeError("attribute runs past the message")
            msg.attributes.append((attr_type, bytes(data[pos + 4 : end])))
            msg.offsets.append(pos)
            pos = end + _pad4(attr_len)
        if pos != len(data):
            raise StunDecodeError("padding runs past the message")
        return msg

    def _offset_of(self, attr_type: int) -> int | None:
        for (t, _), off in zip(self.attributes, self.offsets):
            if t == attr_type:
                return off
        return None

    def verify_integrity(self, key: bytes) -> bool:
        off = self._offset_of(Attr.MESSAGE_INTEGRITY)
        if off is None:
            return False
        header = self.raw[:2] + struct.pack("!H", off - HEADER_SIZE + 24) + self.raw[4:HEADER_SIZE]
        mac = hmac.new(key, header + self.raw[HEADER_SIZE:off], hashlib.sha1).digest()
        return hmac.compare_digest(mac, self.raw[off + 4 : off + 24])

    def verify_integrity_sha256(self, key: bytes) -> bool:
        off = self._offset_of(Attr.MESSAGE_INTEGRITY_SHA256)
        if off is None:
            return False
        header = self.raw[:2] + struct.pack("!H", off - HEADER_SIZE + 36) + self.raw[4:HEADER_SIZE]
        mac = hmac.new(key, header + self.raw[HEADER_SIZE:off], hashlib.sha256).digest()
        return hmac.compare_digest(mac, self.raw[off + 4 : off + 36])

    def verify_fingerprint(self) -> bool:
        off = self._offset_of(Attr.FINGERPRINT)
        if off is None or off + 8 != len(self.raw):
            return False
        header = self.raw[:2] + struct.pack("!H", off - HEADER_SIZE + 8) + self.raw[4:HEADER_SIZE]
        crc = (zlib.crc32(header + self.raw[HEADER_SIZE:off]) ^ FINGERPRINT_XOR) & 0xFFFFFFFF
        return struct.pack("!I", crc) == self.raw[off + 4 : off + 8]

    # -- typed accessors

    def error_code(self) -> tuple[int, str] | None:
        """ERROR-CODE (§14.8): class in the low 3 bits of byte 2, number in byte 3."""
        value = self.get(Attr.ERROR_CODE)
        if value is None or len(value) < 4:
            return None
        code = (value[2] & 0x07) * 100 + value[3]
        return code, value[4:].decode("utf-8", "replace")

    def xor_address(self, attr_type: int) -> tuple[str, int] | None:
        value = self.get(attr_type)
        return None if value is None else decode_xor_address(value, self.transaction_id)

    def lifetime(self) -> int | None:
        value = self.get(Attr.LIFETIME)
        return None if value is None else struct.unpack("!I", value)[0]

    def text(self, attr_type: int) -> str | None:
        value = self.get(attr_type)
        return None if value is None else value.decode("utf-8")


def binding_request() -> StunMessage:
    return StunMessage(Method.BINDING, Class.REQUEST)


def error_code_value(code: int, reason: str = "") -> bytes:
    return struct.pack("!HBB", 0, code // 100, code % 100) + reason.encode()


# --- ChannelData (RFC 8656 §12.4) ------------------------------------------------


def is_channel_data(data: bytes) -> bool:
    """The first two bits 0b01 mark ChannelData (channel numbers 0x4000-0x4FFF)."""
    return len(data) >= 1 and (data[0] & 0xC0) == 0x40


def encode_channel_data(channel: int, payload: bytes, pad: bool = False) -> bytes:
    out = struct.pack("!HH", channel, len(payload)) + payload
    if pad:
        out += b"\x00" * _pad4(len(payload))
    return out


def decode_channel_data(data: bytes) -> tuple[int, bytes]:
    if len(data) < 4:
        raise StunDecodeError("ChannelData shorter than its header")
    channel, length = struct.unpack("!HH", data[:4])
    if not 0x4000 <= channel <= 0x4FFF:
        raise StunDecodeError(f"channel number {channel:#x} out of range")
    if 4 + length > len(data):
        raise StunDecodeError("ChannelData length runs past the datagram")
    return channel, bytes(data[4 : 4 + length])


# --- credentials ------------------------------------------------------------------


def rest_credentials(secret: str, user: str = "", expiry: int | None = None,
                     ttl: int = 86400, separator: str = ":") -> tuple[str, str]:
    """TURN REST API (coturn use-auth-secret): username "<expiry>:<user>",
    password base64(HMAC-SHA1(secret, username))."""
    if expiry is None:
        expiry = int(time.time()) + ttl
    username = f"{expiry}{separator}{user}" if user else str(expiry)
    digest = hmac.new(secret.encode(), username.encode(), hashlib.sha1).digest()
    return username, base64.b64encode(digest).decode()


def long_term_key(username: str, realm: str, password: str) -> bytes:
    """RFC 8489 §9.2.2: key = MD5(username ":" realm ":" password)."""
    return hashlib.md5(f"{username}:{realm}:{password}".encode()).digest()


# --- client --------------------------------------------------------------------------


@dataclass
class Received:
    """Something the server sent that was not a response to a pending request."""

    kind: str  # "channel", "data" (Data indication), "stun" (other), "raw" (undecodable)
    payload: bytes
    channel: int | None = None
    peer: tuple[str, int] | None = None
    message: StunMessage | None = None


class TurnClient:
    """A TURN client on one UDP socket. Every wait is bounded by a timeout."""

    # RFC 8489 §9.2.5: PASSWORD-ALGORITHMS as the server listed it (echoed), the chosen
    # PASSWORD-ALGORITHM (None: an RFC 5389 client), USERHASH instead of USERNAME, and which
    # integrity attribute(s) to sign with ("sha1", "sha256", "both"). Class defaults, so
    # subclasses with their own __init__ (the stream client) have them too.
    password_algorithms: bytes | None = None
    password_algorithm: int | None = None
    userhash = False
    integrity = "sha1"

    def __init__(self, server: tuple[str, int], bind_host: str | None = None,
                 rto: float = 0.5, attempts: int = 4, bind_port: int = 0):
        self.server = server
        family = socket.AF_INET6 if ":" in server[0] else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_DGRAM)
        self.sock.bind((bind_host or server[0], bind_port))
        self.rto = rto
        self.attempts = attempts
        self.inbox: deque[bytes] = deque()
        # Transactions already answered: a late duplicate response (to a
        # retransmission) is dropped instead of being taken for data.
        self.finished: set[bytes] = set()
        self.username: str | None = None
        self.realm: str | None = None
        self.nonce: bytes | None = None
        self.key: bytes | None = None
        self.relayed: tuple[str, int] | None = None
        self.mapped: tuple[str, int] | None = None

    @property
    def local_address(self) -> tuple[str, int]:
        return self.sock.getsockname()[:2]

    def close(self) -> None:
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- raw I/O

    def send_raw(self, data: bytes) -> None:
        self.sock.sendto(data, self.server)

    def recv_raw(self, timeout: float) -> bytes | None:
        """One datagram from the server (queued ones first), or None after timeout."""
        if self.inbox:
            return self.inbox.popleft()
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            ready, _, _ = select.select([self.sock], [], [], remaining)
            if not ready:
                return None
            data, addr = self.sock.recvfrom(65535)
            if _address_tuple(addr) == _address_tuple(self.server) and not self._is_stale_response(data):
                return data

    def _is_stale_response(self, data: bytes) -> bool:
        return len(data) >= HEADER_SIZE and not is_channel_data(data) and data[8:20] in self.finished

    # -- transactions

    def transact(self, request: StunMessage, key: bytes | None = None) -> StunMessage:
        """Send a request, retransmitting (RFC 8489 §6.2.1, bounded), and return the
        response with the same transaction id. Other datagrams are queued."""
        wire = request.encode(integrity_key=key, integrity=self.integrity)
        rto = self.rto
        for _ in range(self.attempts):
            self.send_raw(wire)
            deadline = time.monotonic() + rto
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                ready, _, _ = select.select([self.sock], [], [], remaining)
                if not ready:
                    break
                data, addr = self.sock.recvfrom(65535)
                if _address_tuple(addr) != _address_tuple(self.server):
                    continue
                if len(data) >= HEADER_SIZE and data[8:20] == request.transaction_id and not is_channel_data(data):
                    response = StunMessage.decode(data)
                    if response.method != request.method or response.cls not in (Class.SUCCESS, Class.ERROR):
                        raise TurnError("response does not match the request")
                    self.finished.add(request.transaction_id)
                    return response
                if not self._is_stale_response(data):
                    self.inbox.append(data)
            rto *= 2
        raise TurnError(f"no response to method {request.method:#x} after {self.attempts} attempts")

    def binding(self) -> StunMessage:
        return self.transact(binding_request())

    def authenticated_request(self, method: int, attrs) -> StunMessage:
        """A request with the long-term credentials (RFC 8489 §9.2.3); a 438 (stale
        nonce) is retried once with the new nonce. `attrs` is a list of
        (type, value) or a function of the transaction id returning one (XOR
        addresses of IPv6 peers depend on the transaction id)."""
        if self.key is None:
            raise TurnError("no credentials yet: allocate first")
        resp = None
        for _ in range(2):
            req = StunMessage(method, Class.REQUEST)
            for t, v in (attrs(req.transaction_id) if callable(attrs) else attrs):
                req.add(t, v)
            if self.userhash:
                req.add(Attr.USERHASH, hashlib.sha256(f"{self.username}:{self.realm}".encode()).digest())
            else:
                req.add(Attr.USERNAME, self.username.encode())
            req.add(Attr.REALM, self.realm.encode())
            req.add(Attr.NONCE, self.nonce)
            if self.password_algorithm is not None:
                req.add(Attr.PASSWORD_ALGORITHMS, self.password_algorithms or b"")
                req.add(Attr.PASSWORD_ALGORITHM, struct.pack("!HH", self.password_algorithm, 0))
            resp = self.transact(req, key=self.key)
            err = resp.error_code()
            if resp.cls == Class.ERROR and err and err[0] == 438 and resp.has(Attr.NONCE):
                self.nonce = resp.get(Attr.NONCE)
                self.password_algorithms = resp.get(Attr.PASSWORD_ALGORITHMS) or self.password_algorithms
                continue
            return resp
        return resp

    @staticmethod
    def check(resp: StunMessage, what: str) -> StunMessage:
        if resp.cls != Class.SUCCESS:
            err = resp.error_code()
            raise TurnError(f"{what} failed: {err}", code=err[0] if err else None, response=resp)
        return resp

    # -- TURN (RFC 8656)

    # REQUESTED-TRANSPORT of this client's Allocates: UDP, or TCP for RFC 6062.
    transport = UDP_TRANSPORT

    def allocate_unauthenticated(self, lifetime: int | None = None) -> StunMessage:
        """The first Allocate of §7.2, without credentials; the server answers 401."""
        req = StunMessage(Method.ALLOCATE, Class.REQUEST)
        req.add(Attr.REQUESTED_TRANSPORT, struct.pack("!B3x", self.transport))
        if lifetime is not None:
            req.add(Attr.LIFETIME, struct.pack("!I", lifetime))
        return self.transact(req)

    def allocate(self, username: str, password: str, lifetime: int | None = None, extra=()) -> StunMessage:
        """Allocate: 401 with REALM/NONCE, then the same request with credentials (§7.2) and the
        (type, value) attributes in `extra` (REQUESTED-ADDRESS-FAMILY, DONT-FRAGMENT, ...)."""
        challenge = self.allocate_unauthenticated(lifetime)
        err = challenge.error_code()
        if challenge.cls != Class.ERROR or not err or err[0] != 401:
            raise TurnError(f"expected a 401 challenge, got {challenge.cls} {err}", response=challenge)
        self.realm = challenge.text(Attr.REALM)
        self.nonce = challenge.get(Attr.NONCE)
        if self.realm is None or self.nonce is None:
            raise TurnError("401 without REALM or NONCE", response=challenge)
        self.username = username
        self.password_algorithms = challenge.get(Attr.PASSWORD_ALGORITHMS)
        if self.password_algorithm == 2:  # SHA-256 (RFC 8489 §18.5.1)
            self.key = hashlib.sha256(f"{username}:{self.realm}:{password}".encode()).digest()
        else:
            self.key = long_term_key(username, self.realm, password)
        attrs = [(Attr.REQUESTED_TRANSPORT, struct.pack("!B3x", self.transport))]
        if lifetime is not None:
            attrs.append((Attr.LIFETIME, struct.pack("!I", lifetime)))
        attrs.extend(extra)
        resp = self.check(self.authenticated_request(Method.ALLOCATE, attrs), "Allocate")
        self.relayed = resp.xor_address(Attr.XOR_RELAYED_ADDRESS)
        self.mapped = resp.xor_address(Attr.XOR_MAPPED_ADDRESS)
        return resp

    def create_permission(self, *peers) -> StunMessage:
        """CreatePermission (§10) for the IP addresses of `peers`."""
        resp = self.authenticated_request(
            Method.CREATE_PERMISSION,
            lambda tid: [(Attr.XOR_PEER_ADDRESS, encode_xor_address(p, tid)) for p in peers],
        )
        return self.check(resp, "CreatePermission")

    def channel_bind(self, channel: int, peer) -> StunMessage:
        """ChannelBind (§12): CHANNEL-NUMBER (number + RFFU) and XOR-PEER-ADDRESS."""
        resp = self.authenticated_request(
            Method.CHANNEL_BIND,
            lambda tid: [
                (Attr.CHANNEL_NUMBER, struct.pack("!HH", channel, 0)),
                (Attr.XOR_PEER_ADDRESS, encode_xor_address(peer, tid)),
            ],
        )
        return self.check(resp, "ChannelBind")

    def refresh(self, lifetime: int) -> StunMessage:
        resp = self.authenticated_request(Method.REFRESH, [(Attr.LIFETIME, struct.pack("!I", lifetime))])
        return self.check(resp, "Refresh")

    def send_indication(self, peer, payload: bytes) -> None:
        ind = StunMessage(Method.SEND, Class.INDICATION)
        ind.add(Attr.XOR_PEER_ADDRESS, encode_xor_address(peer, ind.transaction_id))
        ind.add(Attr.DATA, payload)
        self.send_raw(ind.encode())

    def send_channel_data(self, channel: int, payload: bytes) -> None:
        self.send_raw(encode_channel_data(channel, payload))

    def receive(self, timeout: float) -> Received | None:
        """The next ChannelData, Data indication or unsolicited message, or None."""
        data = self.recv_raw(timeout)
        if data is None:
            return None
        if is_channel_data(data):
            channel, payload = decode_channel_data(data)
            return Received("channel", payload, channel=channel)
        try:
            msg = StunMessage.decode(data)
        except StunDecodeError:
            return Received("raw", data)
        if msg.method == Method.DATA and msg.cls == Class.INDICATION:
            return Received("data", msg.get(Attr.DATA) or b"", peer=msg.xor_address(Attr.XOR_PEER_ADDRESS), message=msg)
        return Received("stun", data, message=msg)


def udp_socket(host: str = "127.0.0.1") -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = socket.socket(family, socket.SOCK_DGRAM)
    s.bind((host, 0))
    return s


def recv_from(sock: socket.socket, timeout: float) -> tuple[bytes, tuple[str, int]] | None:
    """One datagram from any source, or None after timeout."""
    ready, _, _ = select.select([sock], [], [], timeout)
    if not ready:
        return None
    data, addr = sock.recvfrom(65535)
    return data, _address_tuple(addr)
