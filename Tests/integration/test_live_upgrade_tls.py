"""TLS clients in a live upgrade (docs/live-upgrade.md, "TLS clients"): a TLS 1.3 session whose
records relayd keeps (docs/tls.md, "After the handshake") moves to the heir with its connection
and its allocation, as a plain TCP client's does. The clients notice nothing: no new handshake,
the same relayed address, the same nonce. A record the client had sent only in part when the
upgrade came is completed after it, and a KeyUpdate after the upgrade is answered by the heir
(RFC 8446 §4.6.3), so the secrets went over whole; a second upgrade hands them on again. A
session OpenSSL keeps (`tls-openssl-records`) stays with the old process, which drains it. A
session whose server name chose a tenant keeps that tenant in the heir.
"""

from __future__ import annotations

import json
import re
import secrets
import signal

import pytest

import stunclient
import test_tls_records as records
from conftest import RelayServer, make_test_cert, pid_alive, server_kind
from floods import metric
from lifecycle import allocate_with_channel, eventually, round_trip, wait_for_log
from streamclient import StreamTurnClient
from stunclient import Class, Method, StunMessage, TurnError, rest_credentials, udp_socket
from test_live_upgrade import ADMIN, stop_both, stop_pid, upgrade_through_api

pytestmark = pytest.mark.skipif(server_kind() != "relayd", reason="relayd's live upgrade")

CALLERS = 4
HANDSHAKES = 'relayd_tls_handshakes_total'
IDENT_SNI = "ident.example"


def both_ways(tls: StreamTurnClient, udp, tag: bytes) -> None:
    """A call between a TLS client (channel 0x4002) and a UDP client (channel 0x4003)."""
    tls.send_channel_data(0x4002, b"tls->udp " + tag)
    got = udp.receive(3.0)
    assert got is not None and got.payload == b"tls->udp " + tag, got
    udp.send_channel_data(0x4003, b"udp->tls " + tag)
    frame = tls.receive(3.0)
    assert frame is not None and frame.payload == b"udp->tls " + tag, frame


def server_receive_queue(client) -> int | None:
    """Bytes the kernel holds unread on relayd's side of the IPv4 loopback connection whose
    client end is `client` (/proc/net/tcp: the server's socket has the client as its remote
    address); None when not found."""
    host, port = client.getsockname()[:2]
    assert ":" not in host, "server_receive_queue reads /proc/net/tcp: IPv4 only"
    remote = "%08X:%04X" % (int.from_bytes(bytes(map(int, host.split("."))), "little"), port)
    with open("/proc/net/tcp") as table:
        for line in table.readlines()[1:]:
            fields = line.split()
            if fields[2] == remote:
                return int(fields[4].split(":")[1], 16)
    return None


def answered(frame: bytes, request: StunMessage) -> bool:
    response = StunMessage.decode(frame[:20 + int.from_bytes(frame[2:4], "big")])
    return response.transaction_id == request.transaction_id and \
        (response.method, response.cls) == (Method.BINDING, Class.SUCCESS)


def test_tls_sessions_move_to_the_heir(tmp_path):
    server = RelayServer(
        "relayd", tmp_path / "relayd", streams=True,
        extra_args=["--relay-threads=2", "--drain-timeout=60", *ADMIN])
    server.start()
    heir = first = None
    callers, clients = [], []
    cut = skey = None
    try:
        for i in range(CALLERS):
            client = StreamTurnClient(server.tls_address, tls=True)
            clients.append(client)
            client.allocate(*server.credentials(user=f"tls{i}"))
            peer = udp_socket()
            client.channel_bind(0x4000 + i, peer.getsockname())
            round_trip(client, peer, 0x4000 + i, b"before %d" % i)
            callers.append((client, peer))
        relayed = [tuple(client.relayed) for client, _ in callers]
        nonces = [client.nonce for client, _ in callers]
        # A call between a TLS client and a UDP client.
        tls = StreamTurnClient(server.tls_address, tls=True)
        clients.append(tls)
        tls.allocate(*server.credentials(user="tls-caller"))
        udp, _ = allocate_with_channel(server, server.secret, user="udp-caller", channel=0x4001)
        clients.append(udp)
        tls.channel_bind(0x4002, udp.relayed)
        udp.channel_bind(0x4003, tls.relayed)
        both_ways(tls, udp, b"before")
        # A session without an allocation, whose next record arrives in two parts, the upgrade
        # between them.
        cut = records.MemoryTLS(server)
        request = stunclient.binding_request()
        cut.sock.sendall(cut.seal(request.encode()))
        assert answered(cut.read_frame(), request)
        request = stunclient.binding_request()
        split = cut.seal(request.encode())
        cut.sock.sendall(split[:9])
        # Read by the old process (its socket's receive queue empty), not left in the kernel for
        # the heir: the cut record must travel in the handover message.
        assert eventually(lambda: server_receive_queue(cut.sock) == 0), "relayd did not read the part record"
        # openssl s_client with ChaCha20-Poly1305, for a KeyUpdate after the upgrade.
        skey = records.SClient(server, "-tls1_3", "-ciphersuites", "TLS_CHACHA20_POLY1305_SHA256")
        done = skey.wait_for(b"Verify return code")
        sanity = stunclient.binding_request()
        skey.send(sanity.encode())
        done = skey.wait_for(sanity.transaction_id, done)
        # The loops' figures reach /metrics within about a second.
        handshakes = CALLERS + 3
        assert eventually(lambda: metric(server, HANDSHAKES, result="ok") == handshakes)

        resp = upgrade_through_api(server)
        assert resp.status == 200, resp.body
        answer = json.loads(resp.body)
        assert answer["result"] == "succeeded" and answer["allocations"] == CALLERS + 2, answer
        heir = answer["pid"]
        # Every session moved: the old process has nothing to drain.
        assert server.proc.wait(timeout=10) == 0, server.log_tail()
        moved = sum(int(n) for n in re.findall(r", \d+ TCP and (\d+) TLS connections from the live upgrade", server.log_text()))
        assert moved == CALLERS + 3, server.log_tail()

        # The rest of the cut record, opened by the heir.
        cut.sock.sendall(split[9:])
        assert answered(cut.read_frame(), request)
        # A KeyUpdate asking for the heir's (K): the heir updates both directions' secrets.
        updated = skey.update_keys_then_bind(done)
        for i, (client, peer) in enumerate(callers):
            assert tuple(client.relayed) == relayed[i]
            round_trip(client, peer, 0x4000 + i, b"after %d" % i)
            client.refresh(600)
            assert client.nonce == nonces[i], "a 438 after the upgrade"
        both_ways(tls, udp, b"after")
        # No client shook hands again (the heir counts on from the old process's figures), and
        # the heir serves every connection.
        assert eventually(lambda: metric(server, HANDSHAKES, result="ok") == handshakes), \
            metric(server, HANDSHAKES, result="ok")
        assert eventually(lambda: metric(server, "relayd_stream_connections_open") == CALLERS + 3)

        # Upgraded again: the heir hands on what it was handed, the s_client session's secrets
        # one KeyUpdate further on than the old process had them.
        first = heir
        resp = upgrade_through_api(server)
        assert resp.status == 200, resp.body
        again = json.loads(resp.body)
        assert again["result"] == "succeeded" and again["allocations"] == CALLERS + 2, again
        heir = again["pid"]
        assert eventually(lambda: not pid_alive(first), timeout=10), "the first heir kept something"
        last = stunclient.binding_request()
        skey.send(last.encode())
        skey.wait_for(last.transaction_id, updated)
        for i, (client, peer) in enumerate(callers):
            round_trip(client, peer, 0x4000 + i, b"again %d" % i)
        both_ways(tls, udp, b"again")
        assert eventually(lambda: metric(server, HANDSHAKES, result="ok") == handshakes)
    finally:
        for client, peer in callers:
            peer.close()
        for client in clients:
            client.close()
        for c in (cut, skey):
            if c is not None:
                c.close()
        if first is not None:
            stop_pid(first)
        problems = stop_both(server, heir)
    assert not problems, problems


def test_sessions_openssl_keeps_stay_with_the_old_process(tmp_path):
    """With `tls-openssl-records` OpenSSL keeps every session, which cannot move: the TLS call
    stays with the old process, relays on to the heir's UDP client, and the old process exits
    once the TLS client leaves."""
    server = RelayServer(
        "relayd", tmp_path / "relayd", streams=True,
        extra_args=["--relay-threads=2", "--drain-timeout=60", "--tls-openssl-records", *ADMIN])
    server.start()
    heir = None
    tls = udp = None
    try:
        tls = StreamTurnClient(server.tls_address, tls=True)
        tls.allocate(*server.credentials(user="tls-caller"))
        udp, _ = allocate_with_channel(server, server.secret, user="udp-caller", channel=0x4001)
        tls.channel_bind(0x4002, udp.relayed)
        udp.channel_bind(0x4003, tls.relayed)
        both_ways(tls, udp, b"before")
        resp = upgrade_through_api(server)
        assert resp.status == 200, resp.body
        answer = json.loads(resp.body)
        assert answer["result"] == "succeeded" and answer["allocations"] == 1, answer
        heir = answer["pid"]
        # The TLS allocation stayed: the old process drains it, the heir serves the UDP one.
        assert server.proc.poll() is None
        both_ways(tls, udp, b"after")
        # A second upgrade of the old process is refused: it has handed over.
        server.proc.send_signal(signal.SIGUSR2)
        wait_for_log(server, "has handed over already")
        tls.close()
        tls = None
        assert server.proc.wait(timeout=10) == 0, server.log_tail()
        wait_for_log(server, "upgrade_predecessor_exited")
        udp.refresh(600)
    finally:
        for c in (tls, udp):
            if c is not None:
                c.close()
        problems = stop_both(server, heir)
    assert not problems, problems


def test_the_server_names_tenant_goes_with_the_session(tmp_path):
    """A session whose server name chose a tenant (docs/tenants.md) keeps it in the heir: the
    tenant's credential allocates on it, another tenant's does not, as before the upgrade."""
    make_test_cert(tmp_path / "ident-tls", IDENT_SNI)
    ident_secret, kit_secret = secrets.token_hex(16), secrets.token_hex(16)
    (tmp_path / "ident.conf").write_text(
        f"static-auth-secret={ident_secret}\ntls-server-name={IDENT_SNI}\n"
        f"cert={tmp_path / 'ident-tls' / 'cert.pem'}\npkey={tmp_path / 'ident-tls' / 'pkey.pem'}\n")
    (tmp_path / "kit.conf").write_text(f"static-auth-secret={kit_secret}\n")
    server = RelayServer(
        "relayd", tmp_path / "relayd", streams=True,
        extra_args=["--relay-threads=2", "--drain-timeout=60", *ADMIN,
                    f"--tenant={tmp_path / 'ident.conf'}", f"--tenant={tmp_path / 'kit.conf'}"])
    server.start()
    heir = None
    sessions = []
    try:
        # Three sessions named for the tenant, each having sent a Binding (so each moves).
        for _ in range(3):
            client = StreamTurnClient(server.tls_address, tls=True, server_hostname=IDENT_SNI)
            sessions.append(client)
            request = stunclient.binding_request()
            client.send_raw(request.encode())
            frame = client.recv_raw(3.0)
            assert frame is not None and answered(frame, request)
        resp = upgrade_through_api(server)
        assert resp.status == 200, resp.body
        heir = json.loads(resp.body)["pid"]
        assert server.proc.wait(timeout=10) == 0, server.log_tail()
        ident, other, third = sessions
        with pytest.raises(TurnError) as refused:
            other.allocate(*rest_credentials(kit_secret, "kit-user"))
        assert refused.value.code == 401
        ident.allocate(*rest_credentials(ident_secret, "ident-user"))
        third.allocate(*rest_credentials(ident_secret, "ident-user-2"))
        assert eventually(lambda: metric(server, "relayd_tenant_allocations", tenant="ident") == 2)
    finally:
        for client in sessions:
            client.close()
        problems = stop_both(server, heir)
    assert not problems, problems


def test_a_late_failed_upgrade_ends_the_tls_sessions_it_handed_over(tmp_path, monkeypatch):
    """An heir that gave up after its loops served may have sealed TLS records under the keys it
    was handed: the old process then ends those sessions (no record of its own could follow
    without reusing a nonce, RFC 8446 §5.3) and serves on everything else: the UDP call, the
    plain TCP client, and new TLS clients. RELAYD_TEST_UPGRADE_FAULT makes the heir give up
    after serving (docs/live-upgrade.md, "What to know")."""
    monkeypatch.setenv("RELAYD_TEST_UPGRADE_FAULT", "after-serving")
    server = RelayServer(
        "relayd", tmp_path / "relayd", streams=True,
        extra_args=["--relay-threads=2", *ADMIN])
    server.start()
    held = []
    try:
        tls = StreamTurnClient(server.tls_address, tls=True)
        held.append(tls)
        tls.allocate(*server.credentials(user="tls-caller"))
        tcp = StreamTurnClient(server.address)
        held.append(tcp)
        tcp.allocate(*server.credentials(user="tcp-caller"))
        tcp_peer = udp_socket()
        tcp.channel_bind(0x4005, tcp_peer.getsockname())
        udp, peer = allocate_with_channel(server, server.secret, user="udp-caller", channel=0x4001)
        held.append(udp)
        resp = upgrade_through_api(server)
        assert resp.status == 409, resp.body
        assert json.loads(resp.body)["error"] == "upgrade_failed"
        wait_for_log(server, "upgrade_test_fault")
        assert server.is_running()
        # The TLS session that went to the heir ends; nothing more arrives on it.
        assert tls.reader.wait_closed(5.0), "the TLS session handed to a failed heir went on"
        # Everything else serves on in the old process.
        round_trip(udp, peer, 0x4001, b"udp after")
        round_trip(tcp, tcp_peer, 0x4005, b"tcp after")
        fresh = StreamTurnClient(server.tls_address, tls=True)
        held.append(fresh)
        fresh.allocate(*server.credentials(user="tls-after"))
        # One allocation each: the ended TLS session's went with it.
        for transport in ("udp", "tcp", "tls"):
            assert eventually(
                lambda: metric(server, "relayd_allocations_active", transport=transport, family="ipv4") == 1), transport
        tcp_peer.close()
        peer.close()
    finally:
        for client in held:
            client.close()
        problems = server.stop()
    assert not problems, problems
