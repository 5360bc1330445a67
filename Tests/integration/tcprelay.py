"""An RFC 6062 (TURN TCP allocations) client for the integration tests.

`TCPRelayClient` is a StreamTurnClient whose Allocate asks for REQUESTED-TRANSPORT TCP; it
sends Connect, waits for ConnectionAttempt, and opens data connections with ConnectionBind.
A data connection is a plain socket after its success response: raw bytes both ways.
Every wait is bounded.
"""

from __future__ import annotations

import socket
import struct
import time

import stunclient
from streamclient import FrameReader, StreamTurnClient, connect
from stunclient import Attr, Class, Method, StunMessage, TurnError


def connection_id(message: StunMessage) -> int:
    value = message.get(Attr.CONNECTION_ID)
    if value is None or len(value) != 4:
        raise TurnError("no CONNECTION-ID", response=message)
    return struct.unpack("!I", value)[0]


class TCPRelayClient(StreamTurnClient):
    """A TURN client on a TCP or TLS control connection with a TCP allocation."""

    transport = stunclient.TCP_TRANSPORT

    def connect_peer(self, peer: tuple[str, int]) -> StunMessage:
        """Connect (RFC 6062 §4.3): the response as it came (success with CONNECTION-ID, or an error)."""
        return self.authenticated_request(
            Method.CONNECT, lambda tid: [(Attr.XOR_PEER_ADDRESS, stunclient.encode_xor_address(peer, tid))])

    def wait_connection_attempt(self, timeout: float) -> tuple[int, tuple[str, int]] | None:
        """The next ConnectionAttempt indication (RFC 6062 §4.4): its id and peer address."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            frame = self.recv_raw(max(0.0, deadline - time.monotonic()))
            if frame is None:
                return None
            if stunclient.is_channel_data(frame):
                continue
            message = StunMessage.decode(frame)
            if message.method == Method.CONNECTION_ATTEMPT and message.cls == Class.INDICATION:
                return connection_id(message), message.xor_address(Attr.XOR_PEER_ADDRESS)
        return None

    def bind_request(self, cid: int, key: bytes | None = None) -> StunMessage:
        """A ConnectionBind for `cid` with this client's credentials (or `key`)."""
        request = StunMessage(Method.CONNECTION_BIND, Class.REQUEST)
        request.add(Attr.CONNECTION_ID, struct.pack("!I", cid))
        request.add(Attr.USERNAME, self.username.encode())
        request.add(Attr.REALM, self.realm.encode())
        request.add(Attr.NONCE, self.nonce)
        return request

    def open_data_connection(self, cid: int, rcvbuf: int | None = None,
                             trailing: bytes = b"") -> tuple[socket.socket, StunMessage, bytes]:
        """A new connection to the server with ConnectionBind for `cid` (RFC 6062 §4.3), and
        `trailing` sent in the same write. Returns the socket, the response and any bytes that
        came after the response (the peer's first data)."""
        sock = connect(self.server, tls=self.tls, timeout=self.timeout, rcvbuf=rcvbuf)
        request = self.bind_request(cid)
        sock.sendall(request.encode(integrity_key=self.key) + trailing)
        reader = FrameReader(sock)
        frame = reader.read_frame(self.timeout)
        if frame is None:
            sock.close()
            raise TurnError("no answer to ConnectionBind")
        return sock, StunMessage.decode(frame), reader.buffer


def recv_exactly(sock: socket.socket, count: int, timeout: float) -> bytes:
    """`count` bytes from `sock`, or what came before EOF or `timeout`."""
    deadline = time.monotonic() + timeout
    chunks = []
    got = 0
    while got < count and time.monotonic() < deadline:
        sock.settimeout(max(0.05, deadline - time.monotonic()))
        try:
            data = sock.recv(min(65536, count - got))
        except (socket.timeout, TimeoutError):
            continue
        if not data:
            break
        chunks.append(data)
        got += len(data)
    return b"".join(chunks)


def wait_eof(sock: socket.socket, timeout: float) -> bool:
    """True if the other side closes `sock` within `timeout` (data is discarded)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        sock.settimeout(max(0.05, deadline - time.monotonic()))
        try:
            if not sock.recv(65536):
                return True
        except (socket.timeout, TimeoutError):
            continue
        except (ConnectionResetError, BrokenPipeError, OSError):
            return True
    return False
