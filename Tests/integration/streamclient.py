"""TURN over TCP and TLS for the integration tests (RFC 8489 §6.2.2, RFC 8656 §12.5).

`StreamTurnClient` is stunclient's TurnClient on a TCP or TLS connection: the
same TURN methods, with stream framing (STUN messages back to back, ChannelData
padded to a multiple of 4) and no retransmissions (a reliable transport).
`read_frame` and friends frame a byte stream the same way for raw-socket tests.
Every wait is bounded.
"""

from __future__ import annotations

import select
import socket
import ssl
import struct
import time

import stunclient
from stunclient import HEADER_SIZE, StunMessage, TurnClient, TurnError


class StreamClosed(ConnectionError):
    """The server closed the connection (EOF or reset)."""


def frame_length(buffer: bytes) -> int | None:
    """Bytes the first frame in `buffer` occupies, or None if its header is incomplete."""
    if len(buffer) < 4:
        return None
    length = struct.unpack("!H", buffer[2:4])[0]
    if stunclient.is_channel_data(buffer):
        return 4 + length + (-length % 4)
    return HEADER_SIZE + length


def client_tls_context(alpn: list[str] | None = None, minimum: ssl.TLSVersion | None = None,
                       maximum: ssl.TLSVersion | None = None) -> ssl.SSLContext:
    """A client context that accepts the test's self-signed certificate."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    if minimum is not None:
        ctx.minimum_version = minimum
    if maximum is not None:
        ctx.maximum_version = maximum
    if alpn:
        ctx.set_alpn_protocols(alpn)
    return ctx


def connect(address: tuple[str, int], tls: bool = False, timeout: float = 5.0,
            context: ssl.SSLContext | None = None, server_hostname: str | None = None,
            rcvbuf: int | None = None, source: str | None = None) -> socket.socket:
    """A TCP connection to `address` (from `source` if given), TLS-wrapped (handshake done) if `tls`."""
    sock = socket.socket(socket.AF_INET6 if ":" in address[0] else socket.AF_INET, socket.SOCK_STREAM)
    if source is not None:
        sock.bind((source, 0))
    if rcvbuf is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.settimeout(timeout)
    try:
        sock.connect(address)
        if tls:
            sock = (context or client_tls_context()).wrap_socket(sock, server_hostname=server_hostname)
    except BaseException:
        sock.close()
        raise
    return sock


class FrameReader:
    """Reads whole frames from a TCP or TLS socket, keeping what is left over."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.buffer = b""

    def _fill(self, deadline: float) -> bool:
        """Appends what the socket has; False on timeout. Raises StreamClosed on EOF/reset."""
        pending = isinstance(self.sock, ssl.SSLSocket) and self.sock.pending() > 0
        if not pending:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            # poll, not select: a test may hold more than 1,024 descriptors.
            poller = select.poll()
            poller.register(self.sock, select.POLLIN)
            if not poller.poll(remaining * 1000):
                return False
        try:
            self.sock.settimeout(max(0.05, deadline - time.monotonic()))
            data = self.sock.recv(65536)
        except (ssl.SSLWantReadError, socket.timeout, TimeoutError):
            return True
        except (ConnectionResetError, BrokenPipeError, ssl.SSLError) as e:
            raise StreamClosed(str(e)) from e
        if not data:
            raise StreamClosed("EOF")
        self.buffer += data
        return True

    def read_frame(self, timeout: float) -> bytes | None:
        """The next STUN message or padded ChannelData frame, or None after `timeout`."""
        deadline = time.monotonic() + timeout
        while True:
            length = frame_length(self.buffer)
            if length is not None and len(self.buffer) >= length:
                frame, self.buffer = self.buffer[:length], self.buffer[length:]
                return frame
            if not self._fill(deadline) and time.monotonic() >= deadline:
                return None

    def wait_closed(self, timeout: float) -> bool:
        """True if the server closes the connection within `timeout` (data is discarded)."""
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                self._fill(deadline)
                self.buffer = b""
        except StreamClosed:
            return True
        return False


class StreamTurnClient(TurnClient):
    """stunclient.TurnClient over one TCP or TLS connection."""

    def __init__(self, server: tuple[str, int], tls: bool = False, timeout: float = 5.0,
                 context: ssl.SSLContext | None = None, server_hostname: str | None = None,
                 rcvbuf: int | None = None, source: str | None = None):
        self.server = server
        self.tls = tls
        self.sock = connect(server, tls=tls, timeout=timeout, context=context, server_hostname=server_hostname,
                            rcvbuf=rcvbuf, source=source)
        self.reader = FrameReader(self.sock)
        self.timeout = timeout
        self.inbox = []
        self.finished = set()
        self.username = None
        self.realm = None
        self.nonce = None
        self.key = None
        self.relayed = None
        self.mapped = None

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv_raw(self, timeout: float) -> bytes | None:
        if self.inbox:
            return self.inbox.pop(0)
        return self.reader.read_frame(timeout)

    def transact(self, request: StunMessage, key: bytes | None = None) -> StunMessage:
        """Sends once (no retransmission over a reliable transport, RFC 8489 §6.2.2) and
        waits for the response with the same transaction ID; other frames are queued."""
        self.send_raw(request.encode(integrity_key=key, integrity=self.integrity))
        deadline = time.monotonic() + self.timeout
        while True:
            frame = self.reader.read_frame(max(0.0, deadline - time.monotonic()))
            if frame is None:
                raise TurnError(f"no response to method {request.method:#x} within {self.timeout} s")
            if not stunclient.is_channel_data(frame) and frame[8:20] == request.transaction_id:
                response = StunMessage.decode(frame)
                if response.method != request.method:
                    raise TurnError("response does not match the request")
                return response
            self.inbox.append(frame)

    def send_channel_data(self, channel: int, payload: bytes) -> None:
        """ChannelData over a stream is padded to a multiple of 4 (RFC 8656 §12.5)."""
        self.send_raw(stunclient.encode_channel_data(channel, payload, pad=True))
