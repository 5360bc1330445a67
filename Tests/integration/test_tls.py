"""TURN over TLS (RFC 8656 §3.1, RFC 7443): protocol versions, ALPN, SNI, and the
certificate: loading, reloading on SIGHUP without dropping connections, refusing
to start on a certificate that does not load.

Checked with `openssl s_client` and Python's ssl module against the server's
self-signed test certificate (conf/make-test-cert.sh).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import signal
import ssl
import subprocess
import time
from pathlib import Path

import pytest

import stunclient
from conftest import RelayServer, make_test_cert, running, server_kind
from streamclient import FrameReader, StreamTurnClient, client_tls_context, connect
from stunclient import Attr, Class, Method, StunMessage, recv_from, udp_socket

S_CLIENT_TIMEOUT = 15
WAIT = 5.0
CHANNEL = 0x4002

relayd_only = pytest.mark.skipif(server_kind() != "relayd", reason="relayd's own behaviour")

VERSIONS = {
    "tls1_2": (ssl.TLSVersion.TLSv1_2, "TLSv1.2"),
    "tls1_3": (ssl.TLSVersion.TLSv1_3, "TLSv1.3"),
}


@pytest.fixture(scope="module")
def tls_relay(tmp_path_factory):
    extra = ["--verbose"] if server_kind() == "relayd" else []
    server = RelayServer(server_kind(), tmp_path_factory.mktemp(f"{server_kind()}-tls"), streams=True,
                         extra_args=extra)
    with running(server) as s:
        yield s


def openssl_binary() -> str:
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.fail("openssl not found (Debian package openssl; run scripts/install-test-deps.sh)")
    return openssl


def s_client(server: RelayServer, *args: str) -> tuple[int, str]:
    openssl = openssl_binary()
    proc = subprocess.run(
        [openssl, "s_client", "-connect", f"{server.host}:{server.tls_port}", *args],
        input=b"", capture_output=True, timeout=S_CLIENT_TIMEOUT)
    return proc.returncode, (proc.stdout + proc.stderr).decode(errors="replace")


def binding_over(sock) -> StunMessage:
    request = stunclient.binding_request()
    sock.sendall(request.encode())
    frame = FrameReader(sock).read_frame(WAIT)
    assert frame is not None, "no answer to a Binding request over TLS"
    response = StunMessage.decode(frame)
    assert response.transaction_id == request.transaction_id
    assert (response.method, response.cls) == (Method.BINDING, Class.SUCCESS)
    assert response.xor_address(Attr.XOR_MAPPED_ADDRESS) == sock.getsockname()[:2]
    return response


def cert_fingerprint(path: Path) -> str:
    """SHA-256 of the first certificate in a PEM file."""
    pem = path.read_text()
    first = pem[: pem.index("-----END CERTIFICATE-----") + len("-----END CERTIFICATE-----")]
    return hashlib.sha256(ssl.PEM_cert_to_DER_cert(first)).hexdigest()


def peer_fingerprint(sock: ssl.SSLSocket) -> str:
    return hashlib.sha256(sock.getpeercert(binary_form=True)).hexdigest()


def wait_for_log(server: RelayServer, pattern: str, count: int = 1, timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while len(re.findall(pattern, server.log_text())) < count:
        if time.monotonic() >= deadline:
            pytest.fail(f"log never showed {pattern!r} ({count}x):\n{server.log_tail()}")
        time.sleep(0.05)


# --- versions ---------------------------------------------------------------------


@pytest.mark.parametrize("version", ["tls1", "tls1_1"])
def test_tls_1_0_and_1_1_are_refused(tls_relay, version):
    # SECLEVEL=0 lets the client offer them at all; the refusal must come from the server.
    rc, out = s_client(tls_relay, f"-{version}", "-cipher", "DEFAULT@SECLEVEL=0")
    assert rc != 0, out
    # coturn 4.6 refuses with an internal_error alert; the right one is protocol_version (RFC 8446 §6.2).
    assert ("alert protocol version" if tls_relay.kind == "relayd" else "alert") in out, out


@pytest.mark.parametrize("version", list(VERSIONS))
def test_tls_1_2_and_1_3_complete_and_carry_stun(tls_relay, version):
    if tls_relay.kind == "coturn" and version == "tls1_3":
        pytest.xfail("coturn 4.6.1 answers a TLS 1.3-only ClientHello with handshake_failure")
    rc, out = s_client(tls_relay, f"-{version}")
    assert rc == 0, out
    assert f"Protocol  : {VERSIONS[version][1]}" in out or f"New, {VERSIONS[version][1]}" in out, out
    tls_version, name = VERSIONS[version]
    context = client_tls_context(minimum=tls_version, maximum=tls_version)
    with connect(tls_relay.tls_address, tls=True, context=context) as sock:
        assert sock.version() == name
        binding_over(sock)


@relayd_only
def test_no_tlsv1_2_raises_the_floor_to_1_3(tmp_path):
    server = RelayServer("relayd", tmp_path / "relayd", streams=True, extra_args=["--no-tlsv1_2"])
    with running(server):
        rc, out = s_client(server, "-tls1_2")
        assert rc != 0 and "alert protocol version" in out, out
        rc, out = s_client(server, "-tls1_3")
        assert rc == 0, out
        with connect(server.tls_address, tls=True) as sock:
            assert sock.version() == "TLSv1.3"
            binding_over(sock)


@relayd_only
def test_one_session_ticket_a_handshake_and_it_resumes(tls_relay, tmp_path):
    """One NewSessionTicket after a TLS 1.3 handshake (RFC 8446 §4.6.1), not OpenSSL's default
    two, and the session resumes from it. The resumed handshake hands out one again (OpenSSL never
    sends more after a resumption): the next reconnect resumes too."""
    openssl = openssl_binary()
    session, renewed = tmp_path / "session.pem", tmp_path / "renewed.pem"

    def handshake(written: Path, *args: str) -> str:
        # stdin stays open, so s_client keeps reading what the server sends after the handshake.
        proc = subprocess.Popen(
            [openssl, "s_client", "-connect", f"{tls_relay.host}:{tls_relay.tls_port}", "-tls1_3", "-msg",
             "-sess_out", str(written), *args],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + WAIT
            # Both of OpenSSL's default tickets leave in one flight; half a second after the
            # first arrives, a second would have been printed too.
            while time.monotonic() < deadline and not (written.exists() and written.stat().st_size > 0):
                time.sleep(0.05)
            time.sleep(0.5)
        finally:
            # End of input: s_client closes the session and exits, its output flushed.
            try:
                out, _ = proc.communicate(timeout=S_CLIENT_TIMEOUT)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, _ = proc.communicate()
        return out.decode(errors="replace")

    first = handshake(session)
    assert first.count(", NewSessionTicket") == 1, first
    assert "New, TLSv1.3" in first, first
    resumed = handshake(renewed, "-sess_in", str(session))
    assert "Reused, TLSv1.3" in resumed, resumed
    assert resumed.count(", NewSessionTicket") == 1, resumed


# --- ALPN and SNI -----------------------------------------------------------------


def test_alpn_stun_turn_is_selected_when_offered(tls_relay):
    rc, out = s_client(tls_relay, "-alpn", "stun.turn")
    assert rc == 0 and "ALPN protocol: stun.turn" in out, out
    with connect(tls_relay.tls_address, tls=True, context=client_tls_context(alpn=["h2", "stun.turn"])) as sock:
        assert sock.selected_alpn_protocol() == "stun.turn"
        binding_over(sock)


def test_a_client_without_our_alpn_protocol_still_connects(tls_relay):
    if tls_relay.kind == "coturn":
        pytest.xfail("coturn 4.6.1 selects http/1.1 for a TURN connection")
    with connect(tls_relay.tls_address, tls=True, context=client_tls_context(alpn=["h2", "http/1.1"])) as sock:
        assert sock.selected_alpn_protocol() is None
        binding_over(sock)


@relayd_only
def test_sni_is_logged_at_debug_level(tls_relay):
    with connect(tls_relay.tls_address, tls=True, server_hostname="turn.example.test") as sock:
        binding_over(sock)
    wait_for_log(tls_relay, r"event=tls_handshake .*sni=turn\.example\.test")


# --- the certificate --------------------------------------------------------------


def channel_round_trip(client: StreamTurnClient, peer, payload: bytes) -> None:
    client.send_channel_data(CHANNEL, payload)
    assert recv_from(peer, WAIT) == (payload, client.relayed)
    peer.sendto(payload[::-1], client.relayed)
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        got = client.receive(deadline - time.monotonic())
        if got is not None and got.kind == "channel":
            assert (got.channel, got.payload) == (CHANNEL, payload[::-1])
            return
    pytest.fail("no ChannelData back over the TLS allocation")


@relayd_only
def test_sighup_reloads_the_certificate_without_dropping_connections(tmp_path):
    server = RelayServer("relayd", tmp_path / "relayd", streams=True, extra_args=["--verbose"])
    with running(server), udp_socket() as peer:
        old = cert_fingerprint(server.cert_path)
        client = StreamTurnClient(server.tls_address, tls=True)
        with client:
            client.allocate(*server.credentials())
            client.channel_bind(CHANNEL, peer.getsockname()[:2])
            assert peer_fingerprint(client.sock) == old
            channel_round_trip(client, peer, b"before reload")

            new_cert, new_key = make_test_cert(tmp_path / "new", "relay-reloaded.test")
            new = cert_fingerprint(new_cert)
            assert new != old
            os.replace(new_key, server.pkey_path)
            os.replace(new_cert, server.cert_path)
            server.proc.send_signal(signal.SIGHUP)
            wait_for_log(server, r"event=tls_reloaded")
            logged = re.findall(r"event=tls_reloaded sha256=([0-9A-F:]+)", server.log_text())[-1]
            assert logged.replace(":", "").lower() == new

            with connect(server.tls_address, tls=True) as fresh:
                assert peer_fingerprint(fresh) == new
                binding_over(fresh)
            # The allocation made over the old certificate's connection keeps relaying.
            for i in range(5):
                channel_round_trip(client, peer, f"after reload {i}".encode())
            assert client.refresh(600).lifetime() == 600


@relayd_only
def test_a_reload_that_fails_keeps_the_previous_certificate(tmp_path):
    server = RelayServer("relayd", tmp_path / "relayd", streams=True)
    with running(server):
        current = cert_fingerprint(server.cert_path)
        server.cert_path.write_text("-----BEGIN CERTIFICATE-----\nnot a certificate\n-----END CERTIFICATE-----\n")
        server.proc.send_signal(signal.SIGHUP)
        wait_for_log(server, r"event=tls_reload_failed")
        with connect(server.tls_address, tls=True) as sock:
            assert peer_fingerprint(sock) == current
            binding_over(sock)


def encrypt_key(key: Path, password: str) -> None:
    """Replaces the PEM key at `key` with the same key encrypted with `password` (AES-256)."""
    encrypted = key.with_suffix(".enc")
    subprocess.run(["openssl", "pkey", "-in", str(key), "-out", str(encrypted), "-aes256", "-passout",
                    f"pass:{password}"], check=True, capture_output=True, timeout=30)
    os.replace(encrypted, key)


@relayd_only
def test_an_encrypted_key_loads_with_pkey_pwd(tmp_path):
    server = RelayServer("relayd", tmp_path / "relayd", streams=True, extra_args=["--pkey-pwd=s3cret-key"])
    make_test_cert(server.cert_path.parent)
    encrypt_key(server.pkey_path, "s3cret-key")
    with running(server):
        with connect(server.tls_address, tls=True) as sock:
            binding_over(sock)
    assert "s3cret-key" not in server.log_text()


BROKEN = ["garbage-certificate", "key-of-another-certificate", "wrong-key-password"]


@relayd_only
@pytest.mark.parametrize("case", BROKEN)
def test_a_certificate_that_does_not_load_stops_the_start(tmp_path, case):
    extra = ["--pkey-pwd=wrong"] if case == "wrong-key-password" else []
    server = RelayServer("relayd", tmp_path / "relayd", streams=True, extra_args=extra)
    make_test_cert(server.cert_path.parent)
    if case == "garbage-certificate":
        server.cert_path.write_text("not a certificate\n")
    elif case == "key-of-another-certificate":
        _, other_key = make_test_cert(tmp_path / "other")
        os.replace(other_key, server.pkey_path)
    else:
        encrypt_key(server.pkey_path, "right")
    with pytest.raises(RuntimeError, match="exited with 1"):
        server.start()
    assert "cannot load TLS certificate" in server.log_text()
    assert server.stop() == []
