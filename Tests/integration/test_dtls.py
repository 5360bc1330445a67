"""TURN over DTLS (RFC 8656 §3.1, RFC 6347): `turns:` over UDP on the TLS port.

coturn's turnutils_uclient -S over UDP relays through DTLS allocations to turnutils_peer
(against whichever server the suite tests; coturn is the reference), and `openssl s_client
-dtls1_2` completes a handshake. The rest is relayd's: DTLS 1.0 refused, the cookie exchange
answered without state and never larger than the ClientHello, the handshake retransmitted and
timed out, the per-IP limit on sessions in progress, a garbage flood that leaves the server
answering, SIGHUP reloading the certificate, and `no-dtls`. dtlsprobe.py speaks the
handshake's first messages by hand.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
from contextlib import closing

import pytest

import stunclient
from conftest import RelayServer, make_test_cert, running, server_kind
from dtlsprobe import SERVER_HELLO, DTLSProbe, handshake_messages
from test_http_metrics import scrape, value
from test_tcp_relay import rss_kib
from test_tls import cert_fingerprint, wait_for_log
from test_uclient import _tool, parse_report, start_peer

UCLIENT_TIMEOUT = 120
S_CLIENT_TIMEOUT = 15
relayd_only = pytest.mark.skipif(server_kind() != "relayd", reason="relayd's DTLS limits, metrics and options")


def start(tmp_path, *extra) -> RelayServer:
    if server_kind() == "relayd":
        return RelayServer("relayd", tmp_path, streams=True, extra_args=["--relay-threads=2", "--verbose", *extra])
    # coturn: the common arguments turn DTLS off; the last value wins.
    server = RelayServer("coturn", tmp_path, streams=True, extra_args=list(extra))
    server.command = _without_no_dtls(server.command)
    return server


def _without_no_dtls(command):
    return lambda: [arg for arg in command() if arg != "--no-dtls"]


def s_client_dtls(server: RelayServer, *args: str) -> tuple[int, str]:
    openssl = shutil.which("openssl")
    assert openssl, "openssl not found (Debian package openssl; run scripts/install-test-deps.sh)"
    proc = subprocess.run(
        [openssl, "s_client", "-connect", f"{server.host}:{server.tls_port}", *args],
        input=b"", capture_output=True, timeout=S_CLIENT_TIMEOUT)
    return proc.returncode, (proc.stdout + proc.stderr).decode(errors="replace")


def handshake_completed(out: str) -> bool:
    """Whether s_client's output shows a negotiated cipher over DTLS 1.2 (it prints a session
    summary with "Protocol : DTLSv1.2" even when the handshake failed)."""
    return bool(re.search(r"Cipher is (?!\(NONE\))", out)) and bool(re.search(r"Protocol\s*: DTLSv1\.2", out))


def dtls_handshakes(server: RelayServer, result: str) -> float:
    time.sleep(0.4)  # loops publish every 250 ms
    return value(scrape(server), "relayd_dtls_handshakes_total", result=result)


def test_uclient_relays_over_dtls(tmp_path, processes):
    """turnutils_uclient -S over UDP: 4 clients x 100 messages of 120 bytes to turnutils_peer
    over channels, each allocation made and used over its own DTLS session."""
    server = start(tmp_path)
    with running(server) as s:
        peer_port = start_peer(processes)
        cmd = [_tool("turnutils_uclient"), "-S", "-m", "4", "-n", "100", "-l", "120", "-z", "10",
               "-W", s.secret, "-u", "uclient", "-p", str(s.tls_port), "-L", "127.0.0.1",
               "-e", "127.0.0.1", "-r", str(peer_port), s.host]
        proc, log = processes.start("turnutils_uclient", cmd)
        proc.wait(timeout=UCLIENT_TIMEOUT)
        output = log.read_text(errors="replace")
        assert proc.returncode == 0, output[-3000:]
        report = parse_report(output)
        assert report.send_msgs == report.recv_msgs == 400, output[-2000:]
        assert report.send_bytes == report.recv_bytes == 400 * 120
        assert report.lost == 0 and report.send_dropped == 0
        if s.kind == "relayd":
            assert dtls_handshakes(s, "ok") >= 4
            assert re.search(r"event=allocation_created five_tuple=dtls ", s.log_text())


def test_openssl_s_client_completes_a_dtls_1_2_handshake(tmp_path):
    with running(start(tmp_path)) as s:
        rc, out = s_client_dtls(s, "-dtls1_2", "-msg")
        assert rc == 0 and handshake_completed(out), out[-2000:]
        # The trace's handshake records (content type 22): the first ClientHello is answered with
        # a shorter HelloVerifyRequest, and the ClientHello sent again is longer by the cookie
        # (RFC 6347 §4.2.1). This openssl prints DTLS records without naming their messages.
        records = [(way, int(length, 16)) for way, length in
                   re.findall(r"^(>>>|<<<) .*content_type=22\) \[length ([0-9a-f]+)\]", out, re.M)]
        assert [way for way, _ in records[:3]] == [">>>", "<<<", ">>>"], records
        (_, hello), (_, verify), (_, again) = records[:3]
        assert verify < hello < again, records


@relayd_only
def test_dtls_1_0_is_refused(tmp_path):
    with running(start(tmp_path)) as s:
        rc, out = s_client_dtls(s, "-dtls1", "-cipher", "DEFAULT@SECLEVEL=0")
        assert rc != 0 and not re.search(r"Cipher is (?!\(NONE\))", out), out[-2000:]
        rc, out = s_client_dtls(s, "-dtls1_2")
        assert rc == 0 and handshake_completed(out)


@relayd_only
def test_the_cookie_exchange_keeps_no_state_and_never_amplifies(tmp_path):
    """A ClientHello without a cookie gets a HelloVerifyRequest no larger than itself, and no
    session: 2,000 of them from 2,000 ports leave the handshake counters at zero and the
    server's memory flat."""
    with running(start(tmp_path)) as s:
        with closing(DTLSProbe(s.tls_address)) as probe:
            hello, cookie = probe.first_hello()
            assert cookie is not None and 16 <= len(cookie) <= 255
        before = rss_kib(s.proc.pid)
        for _ in range(2000):
            with closing(DTLSProbe(s.tls_address)) as probe:
                probe.sock.send(hello)
        time.sleep(0.5)
        assert rss_kib(s.proc.pid) - before < 4096
        assert dtls_handshakes(s, "ok") == 0 and dtls_handshakes(s, "failed") == 0
        with closing(DTLSProbe(s.tls_address)) as probe:
            sent, _ = probe.first_hello()
            probe.sock.send(sent)
            answer = probe.receive(2.0)
            assert answer is not None and len(answer) <= len(sent)


@relayd_only
def test_a_stalled_handshake_is_retransmitted_then_timed_out(tmp_path):
    """After the cookie, the server's first flight; the client goes silent: the flight comes
    again (RFC 6347 §4.2.4), and after tls-handshake-timeout the session is gone."""
    with running(start(tmp_path, "--tls-handshake-timeout=4")) as s, closing(DTLSProbe(s.tls_address)) as probe:
        flight = probe.start_handshake()
        messages = [m for datagram in flight for m in handshake_messages(datagram)]
        assert (SERVER_HELLO, 1) in messages, messages
        again = probe.receive(3.5)
        assert again is not None and (SERVER_HELLO, 1) in handshake_messages(again), "no retransmission"
        deadline = time.monotonic() + 8
        while dtls_handshakes(s, "failed") < 1 and time.monotonic() < deadline:
            pass
        assert dtls_handshakes(s, "failed") == 1
        assert dtls_handshakes(s, "ok") == 0


@relayd_only
def test_sessions_in_progress_are_limited_per_ip(tmp_path):
    """max-pending-connections-per-ip counts DTLS sessions without an allocation: the third
    client from the same IP that comes back with its cookie gets no ServerHello."""
    with running(start(tmp_path, "--max-pending-connections-per-ip=2")) as s:
        probes = [DTLSProbe(s.tls_address) for _ in range(3)]
        try:
            flights = [probe.start_handshake() for probe in probes]
            assert flights[0] and flights[1]
            assert flights[2] == [], "a third session in progress from one IP got a ServerHello"
        finally:
            for probe in probes:
                probe.close()


@relayd_only
def test_a_session_whose_allocation_ended_is_pending_again(tmp_path):
    """A DTLS session whose allocation was deleted (Refresh 0) counts as pending again against
    max-pending-connections-per-ip=2: beside one session in progress, a third gets no ServerHello."""
    from dtlsclient import DTLSTurnClient

    with running(start(tmp_path, "--max-pending-connections-per-ip=2")) as s:
        first = DTLSTurnClient(s.tls_address)
        probes: list[DTLSProbe] = []
        try:
            first.handshake()
            first.allocate(*s.credentials())
            # The allocated session is not pending: one session in progress takes one slot.
            probes.append(DTLSProbe(s.tls_address))
            assert probes[0].start_handshake(), "a session beside an allocated one got no ServerHello"
            assert first.refresh(0).cls == stunclient.Class.SUCCESS
            time.sleep(1.5)  # the transport's once-a-second sweep notices the allocation is gone
            probes.append(DTLSProbe(s.tls_address))
            assert probes[1].start_handshake() == [], "the ended allocation's session was not pending again"
        finally:
            first.close()
            for probe in probes:
                probe.close()


@relayd_only
def test_a_garbage_flood_leaves_the_server_answering(tmp_path):
    """30,000 datagrams of random bytes, truncated records and records of every content type to
    the DTLS port: the server keeps answering STUN on UDP and DTLS handshakes, with flat memory."""
    with running(start(tmp_path)) as s:
        before = rss_kib(s.proc.pid)
        flood = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        with flood:
            flood.bind((s.host, 0))
            for i in range(30_000):
                kind = i % 3
                if kind == 0:
                    payload = os.urandom(1 + i % 1400)
                elif kind == 1:
                    payload = bytes([20 + i % 5, 0xFE, 0xFD]) + os.urandom(i % 40)
                else:
                    payload = bytes([22, 0xFE, 0xFD, 0, 0]) + os.urandom(6) + (200).to_bytes(2, "big") + b"\x01"
                try:
                    flood.sendto(payload, s.tls_address)
                except BlockingIOError:
                    pass
        with stunclient.TurnClient(s.address) as client:
            assert client.binding().cls == stunclient.Class.SUCCESS
        rc, out = s_client_dtls(s, "-dtls1_2")
        assert rc == 0 and handshake_completed(out), out[-2000:]
        assert s.proc.poll() is None
        assert rss_kib(s.proc.pid) - before < 8192


@relayd_only
def test_sighup_reloads_the_dtls_certificate(tmp_path):
    with running(start(tmp_path)) as s:
        rc, out = s_client_dtls(s, "-dtls1_2")
        assert rc == 0 and handshake_completed(out) and "CN = localhost" in out
        new_cert, new_key = make_test_cert(tmp_path / "new", "relay-reloaded.test")
        os.replace(new_key, s.pkey_path)
        os.replace(new_cert, s.cert_path)
        s.proc.send_signal(signal.SIGHUP)
        wait_for_log(s, r"event=dtls_reloaded")
        logged = re.findall(r"event=dtls_reloaded sha256=([0-9A-F:]+)", s.log_text())[-1]
        assert logged.replace(":", "").lower() == cert_fingerprint(s.cert_path)
        rc, out = s_client_dtls(s, "-dtls1_2")
        assert rc == 0 and handshake_completed(out) and "CN = relay-reloaded.test" in out, out[-2000:]


@relayd_only
def test_no_dtls_leaves_the_udp_port_alone(tmp_path):
    with running(start(tmp_path, "--no-dtls")) as s:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.bind((s.host, s.tls_port))  # nothing of relayd's holds it
        rc, out = s_client_dtls(s, "-dtls1_2", "-timeout")
        assert rc != 0 and not handshake_completed(out)


def peer_socket(server: RelayServer) -> socket.socket:
    """A UDP peer on loopback at a port outside the server's relay range: one inside it is one
    of relayd's own relay addresses, which the peer policy refuses where no allocation holds it
    (docs/peer-policy.md)."""
    for _ in range(100):
        peer = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        peer.bind((server.host, 0))
        if peer.getsockname()[1] not in server.relay_ports:
            return peer
        peer.close()
    raise RuntimeError("no ephemeral port outside the relay range")


def _relayed_to_peer(client, peer: socket.socket, payload: bytes) -> tuple[str, int]:
    """Sends `payload` to `peer` through the allocation (a Send indication); the source the peer
    saw it come from (the relayed address)."""
    client.send_indication(peer.getsockname(), payload)
    got = stunclient.recv_from(peer, 3.0)
    assert got is not None, "the peer got nothing through the allocation"
    data, source = got
    assert data == payload
    return source


def _metric(server: RelayServer, name: str, **labels) -> float:
    time.sleep(0.4)  # loops publish every 250 ms
    return value(scrape(server), name, **labels)


@relayd_only
@pytest.mark.parametrize("peer_sends_while_down", [False, True], ids=["quiet", "peer-sending"])
def test_a_client_that_restarts_from_the_same_port_gets_a_new_session_and_keeps_its_allocation(
        tmp_path, peer_sends_while_down):
    """RFC 6347 §4.2.8: a DTLS client allocates, then restarts from the same address and port
    without a close_notify (its new ClientHello, epoch 0, reaches the socket connected to it,
    not the listener). The new handshake completes after the cookie exchange on that socket, and
    the allocation of the 5-tuple carries on: an Allocate gets 437 (RFC 8656 §7.2), a Refresh with
    the allocation's credentials succeeds, and data still leaves from the same relayed address
    to the peer the first session permitted. With `peer_sends_while_down`, the peer's data
    relayed to the client while it is down (ICMP port unreachable on the session's socket) does
    not end the session either."""
    from dtlsclient import DTLSTurnClient

    with running(start(tmp_path)) as s, closing(peer_socket(s)) as peer:
        first = DTLSTurnClient(s.tls_address)
        local = first.local_address
        try:
            first.handshake()
            first.allocate(*s.credentials())
            first.create_permission(peer.getsockname())
            relayed = _relayed_to_peer(first, peer, b"before the restart")
            assert relayed == first.relayed
        finally:
            first.close()
        # While the client is down the peer goes on sending: the relay's datagrams to the
        # client's port draw ICMP port unreachable, which the session's socket reports.
        for _ in range(5 if peer_sends_while_down else 0):
            peer.sendto(b"while the client is down", relayed)
            time.sleep(0.05)
        with closing(DTLSTurnClient(s.tls_address, local_port=local[1])) as again:
            assert again.local_address == local
            again.handshake()
            again.use_credentials_of(first)
            # RFC 8656 §7.2: an Allocate on the 5-tuple of a live allocation is a mismatch.
            resp = again.authenticated_request(
                stunclient.Method.ALLOCATE,
                [(stunclient.Attr.REQUESTED_TRANSPORT, bytes([stunclient.UDP_TRANSPORT, 0, 0, 0]))])
            assert resp.cls == stunclient.Class.ERROR and resp.error_code()[0] == 437, resp.error_code()
            again.refresh(600)
            assert _relayed_to_peer(again, peer, b"after the restart") == relayed
            assert again.binding().cls == stunclient.Class.SUCCESS
        assert _metric(s, "relayd_dtls_restarts_total", result="ok") == 1
        assert _metric(s, "relayd_dtls_handshakes_total", result="ok") == 2
        assert len(re.findall(r"event=allocation_created five_tuple=dtls ", s.log_text())) == 1
        assert "event=allocation_deleted" not in s.log_text()


@relayd_only
def test_a_restart_whose_handshake_does_not_complete_deletes_the_allocation(tmp_path):
    """The cookie-checked ClientHello of a restart replaces the session; a client that then goes
    silent does not finish the new handshake, so after tls-handshake-timeout the session and
    the allocation it carried are gone: a new session on the same 5-tuple gets 437 for a Refresh
    (RFC 8656 §7.3), and its Allocate makes a new allocation."""
    from dtlsclient import DTLSTurnClient

    with running(start(tmp_path, "--tls-handshake-timeout=3")) as s:
        first = DTLSTurnClient(s.tls_address)
        port = first.local_address[1]
        try:
            first.handshake()
            first.allocate(*s.credentials())
        finally:
            first.close()
        # A restart that stops after the server's first flight.
        with closing(DTLSProbe(s.tls_address, local_port=port)) as probe:
            flight = probe.start_handshake()
            assert (SERVER_HELLO, 1) in [m for d in flight for m in handshake_messages(d)], flight
        deadline = time.monotonic() + 10
        while _metric(s, "relayd_dtls_restarts_total", result="failed") < 1 and time.monotonic() < deadline:
            pass
        assert _metric(s, "relayd_dtls_restarts_total", result="failed") == 1
        wait_for_log(s, r"event=allocation_deleted")
        with closing(DTLSTurnClient(s.tls_address, local_port=port)) as again:
            again.handshake()
            again.use_credentials_of(first)
            resp = again.authenticated_request(
                stunclient.Method.REFRESH, [(stunclient.Attr.LIFETIME, (600).to_bytes(4, "big"))])
            assert resp.cls == stunclient.Class.ERROR and resp.error_code()[0] == 437, resp.error_code()
            again.allocate(*s.credentials())


@relayd_only
def test_a_hello_without_a_valid_cookie_or_garbage_leaves_the_live_session_alone(tmp_path):
    """On an established session's 5-tuple: an empty datagram and bytes that are not DTLS records
    are dropped and counted; so is a late copy of the session's own ClientHello with its cookie
    (a duplicate, not a restart: same random). A ClientHello without a cookie, and one with a bad
    cookie, get a HelloVerifyRequest from the session's socket (RFC 6347 §4.2.1: a bad cookie is
    treated as none) and start nothing. The session goes on: its allocation answers a Refresh
    and a Binding, with no new handshake and no restart."""
    from dtlsclient import DTLSTurnClient
    from dtlsprobe import client_hello, client_hello_cookie, hello_verify_cookie

    with running(start(tmp_path)) as s, closing(DTLSTurnClient(s.tls_address)) as client:
        client.handshake()
        client.allocate(*s.credentials())
        for garbage in (b"", b"\x00" * 40, b"not a DTLS record at all", bytes([22, 0xFE, 0xFD, 0, 0])):
            client.sock.send(garbage)
        client.refresh(600)
        with_cookie = [d for d in client.sent if client_hello_cookie(d)]
        assert len(with_cookie) == 1, client.sent
        client.sock.send(with_cookie[0])
        assert client._receive_datagram(0.5) is None, "an answer to a late copy of the session's ClientHello"
        client.refresh(600)
        random = os.urandom(32)
        client.sock.send(client_hello(random))
        answer = client._receive_datagram(2.0)
        assert answer is not None, "no HelloVerifyRequest from the session's socket"
        cookie = hello_verify_cookie(answer)
        assert cookie is not None and 16 <= len(cookie) <= 255, answer
        forged = bytes(b ^ 0x5A for b in cookie)
        client.sock.send(client_hello(random, forged, sequence=1, message_seq=1))
        answer = client._receive_datagram(2.0)
        assert answer is not None and hello_verify_cookie(answer) is not None, answer
        assert client._receive_datagram(0.5) is None, "more than a HelloVerifyRequest for a bad cookie"
        client.refresh(600)
        assert client.binding().cls == stunclient.Class.SUCCESS
        assert _metric(s, "relayd_dtls_session_hello_verify_requests_total") == 2
        assert _metric(s, "relayd_dtls_session_dropped_total") == 5
        assert _metric(s, "relayd_dtls_restarts_total", result="ok") == 0
        assert _metric(s, "relayd_dtls_handshakes_total", result="ok") == 1
        assert _metric(s, "relayd_dtls_handshakes_total", result="failed") == 0
        assert "event=allocation_deleted" not in s.log_text()
