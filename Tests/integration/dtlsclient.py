"""TURN over DTLS 1.2 for the integration tests (RFC 8656 §3.1, RFC 6347): stunclient's
TurnClient on a DTLS session, one STUN message or ChannelData per record, unpadded as over UDP.

OpenSSL through pyOpenSSL (a dependency of aiortc, which the suite installs) over memory BIOs, on
a UDP socket of the test's own: the test picks the local port (a client that restarts from the
same port, RFC 6347 §4.2.8), and can put raw datagrams on the session's 5-tuple beside the
session (`sock`). Retransmission of the handshake (RFC 6347 §4.2.4) follows OpenSSL's timer;
TURN requests are retransmitted as over UDP (RFC 8489 §6.2.1). Every wait is bounded.
"""

from __future__ import annotations

import select
import socket
import time
from collections import deque

from OpenSSL import SSL

import stunclient
from stunclient import HEADER_SIZE, StunMessage, TurnClient, TurnError


class DTLSHandshakeError(TurnError):
    """The DTLS handshake failed or did not complete in time."""


class DTLSTurnClient(TurnClient):
    """A TURN client on one DTLS 1.2 session from a UDP socket bound to `local_port` (0: any)."""

    def __init__(self, server: tuple[str, int], local_port: int = 0, rto: float = 0.5, attempts: int = 4):
        super().__init__(server, bind_host=None, rto=rto, attempts=attempts)
        self.sock.close()
        self.sock = socket.socket(socket.AF_INET6 if ":" in server[0] else socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((server[0], local_port))
        self.sock.connect(server)
        self.sock.setblocking(False)
        context = SSL.Context(SSL.DTLS_CLIENT_METHOD)
        context.set_verify(SSL.VERIFY_NONE, lambda *_: True)
        self.ssl = SSL.Connection(context, None)
        self.ssl.set_connect_state()
        self.records: deque[bytes] = deque()
        # The datagrams of the handshake as sent, for tests that send one again.
        self.sent: list[bytes] = []
        self.handshaking = False

    def close(self) -> None:
        """Closes the socket without a close_notify (a client that crashed or restarted)."""
        self.sock.close()

    # -- DTLS

    def _flush(self) -> None:
        """Sends what OpenSSL wrote: each flight as one datagram (records back to back)."""
        while True:
            try:
                data = self.ssl.bio_read(65536)
            except SSL.WantReadError:
                return
            if not data:
                return
            if self.handshaking:
                self.sent.append(data)
            self.sock.send(data)

    def _receive_datagram(self, timeout: float) -> bytes | None:
        ready, _, _ = select.select([self.sock], [], [], max(0.0, timeout))
        if not ready:
            return None
        try:
            return self.sock.recv(65536)
        except (BlockingIOError, ConnectionRefusedError):
            return None

    def handshake(self, timeout: float = 10.0) -> None:
        """The whole handshake, the cookie exchange first (RFC 6347 §4.2.1), within `timeout`."""
        deadline = time.monotonic() + timeout
        self.handshaking = True
        try:
            self._handshake(deadline, timeout)
        finally:
            self.handshaking = False

    def _handshake(self, deadline: float, timeout: float) -> None:
        while True:
            try:
                self.ssl.do_handshake()
                self._flush()
                return
            except SSL.WantReadError:
                self._flush()
            except SSL.Error as e:
                raise DTLSHandshakeError(f"DTLS handshake failed: {e}") from e
            now = time.monotonic()
            if now >= deadline:
                raise DTLSHandshakeError(f"DTLS handshake not complete after {timeout} s")
            wait = self.ssl.DTLSv1_get_timeout()
            wait = min(deadline - now, wait if wait is not None else 0.5)
            datagram = self._receive_datagram(wait)
            if datagram is None:
                self.ssl.DTLSv1_handle_timeout()
                self._flush()
            else:
                self.ssl.bio_write(datagram)

    # -- TurnClient's raw I/O over the session

    def send_raw(self, data: bytes) -> None:
        self.ssl.write(data)
        self._flush()

    def recv_raw(self, timeout: float) -> bytes | None:
        """One record's plaintext from the server (queued ones first), or None after timeout."""
        if self.inbox:
            return self.inbox.popleft()
        deadline = time.monotonic() + timeout
        while True:
            if self.records:
                return self.records.popleft()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            datagram = self._receive_datagram(remaining)
            if datagram is None:
                continue
            self.ssl.bio_write(datagram)
            while True:
                try:
                    self.records.append(self.ssl.recv(65536))
                except SSL.WantReadError:
                    break
                except SSL.ZeroReturnError as e:
                    raise TurnError("the server closed the DTLS session (close_notify)") from e
            self._flush()

    def transact(self, request: StunMessage, key: bytes | None = None) -> StunMessage:
        """Sends a request, retransmitting as over UDP (RFC 8489 §6.2.1, bounded), and returns the
        response with the same transaction ID; other records are queued."""
        wire = request.encode(integrity_key=key, integrity=self.integrity)
        rto = self.rto
        for _ in range(self.attempts):
            self.send_raw(wire)
            deadline = time.monotonic() + rto
            while (remaining := deadline - time.monotonic()) > 0:
                data = self.recv_raw(remaining)
                if data is None:
                    break
                if len(data) >= HEADER_SIZE and not stunclient.is_channel_data(data) \
                        and data[8:20] == request.transaction_id:
                    response = StunMessage.decode(data)
                    if response.method != request.method:
                        raise TurnError("response does not match the request")
                    self.finished.add(request.transaction_id)
                    return response
                if not self._is_stale_response(data):
                    self.inbox.append(data)
            rto *= 2
        raise TurnError(f"no response to method {request.method:#x} after {self.attempts} attempts")

    def use_credentials_of(self, other: TurnClient) -> None:
        """Takes the long-term credentials (username, realm, nonce, key) `other` allocated with."""
        self.username, self.realm, self.nonce, self.key = other.username, other.realm, other.nonce, other.key
        self.password_algorithms = other.password_algorithms
