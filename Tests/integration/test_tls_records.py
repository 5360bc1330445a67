"""TLS 1.3 records after the handshake, kept by relayd instead of OpenSSL (docs/tls.md, "After
the handshake"; RFC 8446 §5): what real TLS clients see of it.

OpenSSL's `s_client` drives KeyUpdate (RFC 8446 §4.6.3) with each of the three suites; Python's
ssl module (OpenSSL as a client) carries STUN and relayed data across record boundaries, over a
socket that delivers records a few bytes at a time, and sends what a broken or hostile client
would: a forged record, an oversized one, close_notify. TLS 1.2 sessions and `tls-openssl-records`
stay with OpenSSL, which the counter `relayd_tls_own_records_total` tells apart.
"""

from __future__ import annotations

import os
import shutil
import socket
import ssl
import struct
import subprocess
import threading
import time

import pytest

import stunclient
from conftest import RelayServer, running, server_kind
from streamclient import FrameReader, StreamTurnClient, client_tls_context
from stunclient import Class, Method, StunMessage, recv_from, udp_socket

pytestmark = pytest.mark.skipif(server_kind() != "relayd", reason="relayd's own TLS record layer")

WAIT = 5.0
CHANNEL = 0x4003
OWN = "relayd_tls_own_records_total"
SUITES = ["TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"]


@pytest.fixture(scope="module")
def relay(tmp_path_factory):
    server = RelayServer("relayd", tmp_path_factory.mktemp("tls-records"), streams=True)
    with running(server) as s:
        yield s


def counts(server: RelayServer) -> tuple[float, float]:
    """TLS handshakes completed, and sessions whose records relayd took over (one scrape)."""
    text = server.http("GET", "/metrics", headers={"Authorization": f"Bearer {server.api_token}"}).body.decode()
    values = {}
    for line in text.splitlines():
        for name in ('relayd_tls_handshakes_total{result="ok"}', OWN):
            if line.startswith(name + " "):
                values[name] = float(line.rsplit(" ", 1)[1])
    return values.get('relayd_tls_handshakes_total{result="ok"}', 0.0), values.get(OWN, 0.0)


def counts_after(server: RelayServer, before: tuple[float, float], handshakes: int) -> tuple[float, float]:
    """The counts once the metrics show `handshakes` more handshakes than `before` (the loops'
    figures reach /metrics within about a second): how many more, both."""
    deadline = time.monotonic() + WAIT
    while True:
        now = counts(server)
        if now[0] >= before[0] + handshakes or time.monotonic() > deadline:
            return now[0] - before[0], now[1] - before[1]
        time.sleep(0.1)


def tls_client(server: RelayServer, **context) -> StreamTurnClient:
    client = StreamTurnClient(server.tls_address, tls=True, context=client_tls_context(**context))
    client.allocate(*server.credentials())
    return client


def channel_frame(client: StreamTurnClient, timeout: float = WAIT) -> bytes:
    frame = client.reader.read_frame(timeout)
    assert frame is not None, "no ChannelData from the server"
    return frame


def test_tls13_sessions_carry_messages_larger_than_a_record_both_ways(relay):
    before = counts(relay)
    peer = udp_socket()
    with peer, tls_client(relay) as client:
        assert client.sock.version() == "TLSv1.3"
        assert counts_after(relay, before, 1) == (1, 1)
        peer_address = peer.getsockname()[:2]
        client.create_permission(peer_address)
        client.channel_bind(CHANNEL, peer_address)
        # Up to 40,000 bytes: three records of at most 2^14 bytes each way (RFC 8446 §5.1).
        for length in (1, 1203, 16383, 16384, 16385, 40000):
            payload = os.urandom(length)
            client.send_channel_data(CHANNEL, payload)
            assert recv_from(peer, WAIT) == (payload, client.relayed), f"length {length} to the peer"
            peer.sendto(payload[::-1], client.relayed)
            frame = channel_frame(client)
            assert struct.unpack("!HH", frame[:4]) == (CHANNEL, length)
            assert frame[4:4 + length] == payload[::-1], f"length {length} from the peer"


def test_tls12_sessions_stay_with_openssl(relay):
    before = counts(relay)
    peer = udp_socket()
    with peer, tls_client(relay, maximum=ssl.TLSVersion.TLSv1_2) as client:
        assert client.sock.version() == "TLSv1.2"
        peer_address = peer.getsockname()[:2]
        client.create_permission(peer_address)
        client.send_indication(peer_address, b"over TLS 1.2")
        assert recv_from(peer, WAIT) == (b"over TLS 1.2", client.relayed)
        assert counts_after(relay, before, 1) == (1, 0)


class SClient:
    """`openssl s_client -msg` on the relay's TLS port, its output collected as it comes."""

    def __init__(self, server: RelayServer, *args: str):
        openssl = shutil.which("openssl")
        if openssl is None:
            pytest.fail("openssl not found (Debian package openssl; run scripts/install-test-deps.sh)")
        self.proc = subprocess.Popen(
            [openssl, "s_client", "-connect", f"{server.host}:{server.tls_port}", "-msg", *args],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.output = b""
        self.lock = threading.Lock()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        while chunk := self.proc.stdout.read1(65536):
            with self.lock:
                self.output += chunk

    def wait_for(self, marker: bytes, after: int = 0, timeout: float = WAIT) -> int:
        """Waits until `marker` is in the output past offset `after`; returns where it ends."""
        deadline = time.monotonic() + timeout
        while True:
            with self.lock:
                at = self.output.find(marker, after)
                if at >= 0:
                    return at + len(marker)
            if time.monotonic() > deadline:
                pytest.fail(f"s_client never printed {marker!r}: {self.output[-800:]!r}")
            time.sleep(0.02)

    def send(self, data: bytes) -> None:
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def update_keys_then_bind(self, after: int) -> int:
        """Sends a KeyUpdate asking the server to update too (`K`), waits for both KeyUpdates
        past output offset `after`, then a Binding request and its answer; returns the offset
        after the client's KeyUpdate."""
        self.send(b"K\n")
        updated = self.wait_for(b">>> TLS 1.3, Handshake [length 0005], KeyUpdate", after)
        self.wait_for(b"<<< TLS 1.3, Handshake [length 0005], KeyUpdate", after)
        request = stunclient.binding_request()
        self.send(request.encode())
        self.wait_for(request.transaction_id, updated)
        return updated

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.reader.join(timeout=WAIT)


def key_update_then_binding(server: RelayServer, suite: str, command: str) -> bytes:
    """An s_client session with `suite` that sends a KeyUpdate (`K`: asking the server to update
    its key too; `k`: not asking) once its handshake is done, then, once the KeyUpdate is out, a
    Binding request, and waits for the answer; the output up to then."""
    client = SClient(server, "-tls1_3", "-ciphersuites", suite)
    try:
        done = client.wait_for(b"Verify return code")  # printed once the handshake is done
        client.send(f"{command}\n".encode())
        updated = client.wait_for(b">>> TLS 1.3, Handshake [length 0005], KeyUpdate", done)
        request = stunclient.binding_request()
        client.send(request.encode())
        client.wait_for(request.transaction_id, updated)
        with client.lock:
            return client.output
    finally:
        client.close()


@pytest.mark.parametrize("suite", SUITES)
@pytest.mark.parametrize("command", ["K", "k"])
def test_key_update_from_the_client_keeps_the_session(relay, suite, command):
    before = counts(relay)
    output = key_update_then_binding(relay, suite, command)
    assert f"Cipher is {suite}".encode() in output
    # Asked to (K), relayd updates its own key and says so with a KeyUpdate; not asked, it does not.
    answered = b"<<< TLS 1.3, Handshake [length 0005], KeyUpdate" in output
    assert answered == (command == "K"), output[-800:]
    assert counts_after(relay, before, 1) == (1, 1)


def test_a_hello_retry_request_leaves_the_records_to_relayd(tmp_path):
    """`ec-curve-name=secp384r1` and a client whose key share is X25519: the server asks again
    (HelloRetryRequest, RFC 8446 §4.1.4), the client's second ClientHello shares secp384r1, and
    relayd still takes the session's records over: a KeyUpdate and a Binding after it work."""
    server = RelayServer("relayd", tmp_path / "relayd", streams=True, extra_args=["--ec-curve-name=secp384r1"])
    with running(server) as s:
        before = counts(s)
        client = SClient(s, "-tls1_3", "-groups", "X25519:secp384r1")
        try:
            done = client.wait_for(b"Verify return code")
            with client.lock:
                handshake = client.output[:done]
            assert handshake.count(b"], ClientHello") == 2, handshake[-800:]
            assert b"Server Temp Key: ECDH, secp384r1" in handshake, handshake[-800:]
            client.update_keys_then_bind(done)
        finally:
            client.close()
        assert counts_after(s, before, 1) == (1, 1)
        # A client that offers no group the server accepts gets no session.
        refused = SClient(s, "-tls1_3", "-groups", "X25519")
        try:
            refused.wait_for(b"handshake failure")
        finally:
            refused.close()


class MemoryTLS:
    """A TLS 1.3 client over Python's memory BIOs on a plain socket: the test decides how the
    ciphertext reaches the server, byte by byte or forged."""

    def __init__(self, server: RelayServer, hold_finished: bool = False):
        """Shakes hands; with `hold_finished` the client's Finished is kept in `held`, to go
        in one segment with what follows."""
        self.sock = socket.create_connection(server.tls_address, timeout=WAIT)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.incoming = ssl.MemoryBIO()
        self.outgoing = ssl.MemoryBIO()
        self.tls = client_tls_context(minimum=ssl.TLSVersion.TLSv1_3).wrap_bio(self.incoming, self.outgoing)
        while True:
            try:
                self.tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                self.sock.sendall(self.outgoing.read())
                self.feed(WAIT)
        self.held = self.outgoing.read()  # the client's Finished
        if not hold_finished:
            self.sock.sendall(self.held)

    def feed(self, timeout: float) -> bool:
        """Reads what the socket has into the TLS object; False at EOF."""
        self.sock.settimeout(timeout)
        data = self.sock.recv(65536)
        if not data:
            self.incoming.write_eof()
            return False
        self.incoming.write(data)
        return True

    def seal(self, plaintext: bytes) -> bytes:
        self.tls.write(plaintext)
        return self.outgoing.read()

    def read_frame(self, timeout: float = WAIT) -> bytes:
        buffer = b""
        deadline = time.monotonic() + timeout
        while True:
            try:
                buffer += self.tls.read(65536)
            except ssl.SSLWantReadError:
                if not self.feed(max(0.01, deadline - time.monotonic())):
                    raise
                continue
            if len(buffer) >= 4 and len(buffer) >= 20 + struct.unpack("!H", buffer[2:4])[0]:
                return buffer

    def closing_error(self) -> str:
        """What the client makes of the server's last records: the alert OpenSSL reports."""
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            try:
                self.tls.read(65536)
            except ssl.SSLWantReadError:
                try:
                    if not self.feed(max(0.01, deadline - time.monotonic())):
                        return "eof"
                except ConnectionResetError:
                    return "reset"
            except ssl.SSLError as error:
                return str(error)
        return "no alert"

    def close(self) -> None:
        self.sock.close()


def test_a_request_in_the_segment_of_the_clients_finished_is_answered(relay):
    """OpenSSL reads no further than the Finished, and relayd opens what follows it."""
    before = counts(relay)
    client = MemoryTLS(relay, hold_finished=True)
    try:
        request = stunclient.binding_request()
        client.sock.sendall(client.held + client.seal(request.encode()))
        response = StunMessage.decode(client.read_frame())
        assert response.transaction_id == request.transaction_id
        assert (response.method, response.cls) == (Method.BINDING, Class.SUCCESS)
    finally:
        client.close()
    assert counts_after(relay, before, 1) == (1, 1)


def test_a_resumed_session_is_kept_by_relayd_too(relay):
    """A resumed handshake (TLS 1.3 PSK from the server's ticket) writes its own number of
    tickets before relayd takes over; the records that follow still open on both sides."""
    context = client_tls_context(minimum=ssl.TLSVersion.TLSv1_3)
    before = counts(relay)
    session = None
    for attempt in range(2):
        with socket.create_connection(relay.tls_address, timeout=WAIT) as raw, \
                context.wrap_socket(raw, session=session) as sock:
            assert sock.session_reused == (attempt == 1)
            for _ in range(3):
                request = stunclient.binding_request()
                sock.sendall(request.encode())
                frame = FrameReader(sock).read_frame(WAIT)
                assert frame is not None and StunMessage.decode(frame).transaction_id == request.transaction_id
            session = sock.session  # the tickets came before the first answer
    assert counts_after(relay, before, 2) == (2, 2)


def test_records_that_arrive_a_few_bytes_at_a_time_are_put_together(relay):
    client = MemoryTLS(relay)
    try:
        for _ in range(3):
            request = stunclient.binding_request()
            ciphertext = client.seal(request.encode()) + client.seal(request.encode())
            # A header cut in two, then the rest in pieces of 7 bytes.
            for start, end in [(0, 3), *((i, i + 7) for i in range(3, len(ciphertext), 7))]:
                client.sock.sendall(ciphertext[start:end])
                time.sleep(0.002)
            for _ in range(2):
                frame = client.read_frame()
                response = StunMessage.decode(frame[:20 + struct.unpack("!H", frame[2:4])[0]])
                assert response.transaction_id == request.transaction_id
                assert (response.method, response.cls) == (Method.BINDING, Class.SUCCESS)
                rest = frame[20 + struct.unpack("!H", frame[2:4])[0]:]
                if rest:  # both answers in one read
                    assert StunMessage.decode(rest).transaction_id == request.transaction_id
                    break
    finally:
        client.close()


@pytest.mark.parametrize("forged, alert", [
    (b"\x17\x03\x03\x00\x20" + bytes(32), "ALERT_BAD_RECORD_MAC"),
    (b"\x17\x03\x03\x41\x01" + bytes(64), "ALERT_RECORD_OVERFLOW"),
    (b"\x16\x03\x03\x00\x05" + bytes(5), "ALERT_UNEXPECTED_MESSAGE"),
])
def test_a_record_that_cannot_be_opened_gets_its_alert_and_the_connection_closes(relay, forged, alert):
    client = MemoryTLS(relay)
    try:
        request = stunclient.binding_request()
        client.sock.sendall(client.seal(request.encode()))
        assert StunMessage.decode(client.read_frame()).transaction_id == request.transaction_id
        client.sock.sendall(forged)
        assert alert in client.closing_error().upper().replace(" ", "_")
    finally:
        client.close()
    # The node goes on serving.
    with tls_client(relay) as other:
        assert other.relayed is not None


def test_close_notify_is_answered_with_close_notify(relay):
    client = MemoryTLS(relay)
    try:
        request = stunclient.binding_request()
        client.sock.sendall(client.seal(request.encode()))
        assert StunMessage.decode(client.read_frame()).transaction_id == request.transaction_id
        try:
            client.tls.unwrap()
        except ssl.SSLWantReadError:
            pass
        client.sock.sendall(client.outgoing.read())
        deadline = time.monotonic() + WAIT
        while True:
            try:
                client.tls.unwrap()
                break  # the server's close_notify came
            except ssl.SSLWantReadError:
                assert time.monotonic() < deadline, "no close_notify from the server"
                assert client.feed(WAIT), "the server closed without close_notify"
    finally:
        client.close()


def test_tls_openssl_records_keeps_openssl_for_every_session(tmp_path):
    server = RelayServer("relayd", tmp_path, streams=True, extra_args=["--tls-openssl-records"])
    peer = udp_socket()
    with running(server), peer, tls_client(server) as client:
        assert client.sock.version() == "TLSv1.3"
        peer_address = peer.getsockname()[:2]
        client.create_permission(peer_address)
        client.send_indication(peer_address, b"records by OpenSSL")
        assert recv_from(peer, WAIT) == (b"records by OpenSSL", client.relayed)
        assert counts_after(server, (0, 0), 1) == (1, 0)
