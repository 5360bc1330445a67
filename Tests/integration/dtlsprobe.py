"""A minimal DTLS 1.2 client side for the integration tests (RFC 6347): enough of a ClientHello
to get a HelloVerifyRequest (§4.2.1) and, with its cookie, the server's first flight, and a
reader of the records that come back. Nothing is encrypted: the tests only look at the
handshake's first messages, its retransmission and its timeout.
"""

from __future__ import annotations

import os
import select
import socket
import struct
import time

HANDSHAKE = 22
DTLS_1_2 = 0xFEFD
CLIENT_HELLO = 1
SERVER_HELLO = 2
HELLO_VERIFY_REQUEST = 3

# ECDHE with ECDSA or RSA and AES-GCM; P-256 and X25519; the signature algorithms for them.
CIPHER_SUITES = [0xC02B, 0xC02C, 0xC02F, 0xC030]
EXTENSIONS = (
    struct.pack("!HHH", 10, 6, 4) + struct.pack("!HH", 0x0017, 0x001D)            # supported_groups
    + struct.pack("!HHB", 11, 2, 1) + b"\x00"                                       # ec_point_formats
    + struct.pack("!HHH", 13, 8, 6) + struct.pack("!HHH", 0x0403, 0x0804, 0x0401)  # signature_algorithms
)


def client_hello(random: bytes, cookie: bytes = b"", sequence: int = 0, message_seq: int = 0) -> bytes:
    """One record holding one ClientHello (RFC 6347 §4.2.1, §4.3.2)."""
    suites = b"".join(struct.pack("!H", s) for s in CIPHER_SUITES)
    body = (struct.pack("!H", DTLS_1_2) + random + b"\x00" + bytes([len(cookie)]) + cookie
            + struct.pack("!H", len(suites)) + suites + b"\x01\x00"
            + struct.pack("!H", len(EXTENSIONS)) + EXTENSIONS)
    length = len(body).to_bytes(3, "big")
    handshake = bytes([CLIENT_HELLO]) + length + struct.pack("!H", message_seq) + b"\x00\x00\x00" + length + body
    return (bytes([HANDSHAKE]) + struct.pack("!HH", DTLS_1_2, 0) + sequence.to_bytes(6, "big")
            + struct.pack("!H", len(handshake)) + handshake)


def handshake_messages(datagram: bytes) -> list[tuple[int, int]]:
    """(msg_type, message_seq) of each plaintext handshake fragment in the datagram's records."""
    found = []
    offset = 0
    while offset + 13 <= len(datagram):
        content_type = datagram[offset]
        epoch = struct.unpack("!H", datagram[offset + 3:offset + 5])[0]
        length = struct.unpack("!H", datagram[offset + 11:offset + 13])[0]
        fragment = datagram[offset + 13:offset + 13 + length]
        if content_type == HANDSHAKE and epoch == 0 and len(fragment) >= 12:
            found.append((fragment[0], struct.unpack("!H", fragment[4:6])[0]))
        offset += 13 + length
    return found


def client_hello_cookie(datagram: bytes) -> bytes | None:
    """The cookie of the ClientHello in the datagram's first record (empty: none; RFC 6347
    §4.2.1), or None when that record is not a ClientHello of epoch 0."""
    if len(datagram) < 13 + 12 + 35 or datagram[0] != HANDSHAKE or datagram[3:5] != b"\x00\x00" \
            or datagram[13] != CLIENT_HELLO:
        return None
    at = 13 + 12 + 2 + 32  # record and handshake headers, client_version, random
    at += 1 + datagram[at]  # session_id
    return datagram[at + 1:at + 1 + datagram[at]] if at < len(datagram) else None


def hello_verify_cookie(datagram: bytes) -> bytes | None:
    """The cookie of a HelloVerifyRequest (RFC 6347 §4.2.1), or None."""
    if len(datagram) < 13 + 12 + 3 or datagram[0] != HANDSHAKE or datagram[13] != HELLO_VERIFY_REQUEST:
        return None
    body = datagram[13 + 12:]
    return body[3:3 + body[2]]


class DTLSProbe:
    """One UDP socket talking to a DTLS listener, from `local_port` (0: any)."""

    def __init__(self, server: tuple[str, int], local_port: int = 0):
        self.server = server
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((server[0], local_port))
        self.sock.connect(server)
        self.random = os.urandom(32)

    def close(self) -> None:
        """Closes the socket (use with contextlib.closing)."""
        self.sock.close()

    def receive(self, timeout: float) -> bytes | None:
        ready, _, _ = select.select([self.sock], [], [], timeout)
        return self.sock.recv(65536) if ready else None

    def first_hello(self) -> tuple[bytes, bytes | None]:
        """The ClientHello without a cookie and the cookie of the answer (None: no answer)."""
        hello = client_hello(self.random)
        self.sock.send(hello)
        answer = self.receive(2.0)
        return hello, hello_verify_cookie(answer) if answer else None

    def start_handshake(self) -> list[bytes]:
        """The cookie exchange, then the ClientHello with the cookie: the datagrams of the
        server's first flight that come within 2 s (none: refused)."""
        _, cookie = self.first_hello()
        assert cookie, "no HelloVerifyRequest"
        self.sock.send(client_hello(self.random, cookie, sequence=1, message_seq=1))
        flight = []
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            datagram = self.receive(max(0.0, deadline - time.monotonic()))
            if datagram is None:
                break
            flight.append(datagram)
            if any(t == 14 for t, _ in handshake_messages(datagram)):  # ServerHelloDone
                break
        return flight
