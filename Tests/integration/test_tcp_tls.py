"""TURN over TCP and TLS (RFC 8656 §3.1, RFC 8489 §6.2.2), with UDP relaying.

The client talks to the server over TCP or TLS; the relayed leg stays UDP
(REQUESTED-TRANSPORT 17). Checked with coturn's turnutils_uclient (`-t`, `-t -S`)
and with the Python client over a stream, including the ChannelData padding of
RFC 8656 §12.5 in both directions and the end of the allocation when its
connection closes.
"""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
import time

import pytest

import stunclient
from conftest import RelayServer, running, server_kind
from streamclient import StreamTurnClient
from stunclient import Attr, Class, Method, recv_from, udp_socket
from test_uclient import UclientReport, parse_report, start_peer

CLIENTS = 4
MESSAGES = 200
LENGTH = 120
INTERVAL_MS = 20
UCLIENT_TIMEOUT = 120
# Client-to-client: packets sent before the partner's channel and permission exist are lost
# (coturn loses a few too, mostly over TLS where the handshakes take longer).
C2C_LOSS_TOLERANCE = CLIENTS * MESSAGES // 20
WAIT = 3.0
QUIET = 0.5
CHANNEL = 0x4001


@pytest.fixture(scope="module")
def stream_relay(tmp_path_factory):
    extra = ["--verbose"] if server_kind() == "relayd" else []
    server = RelayServer(server_kind(), tmp_path_factory.mktemp(f"{server_kind()}-streams"), streams=True,
                         extra_args=extra)
    with running(server) as s:
        yield s


@pytest.fixture(scope="module")
def reference(tmp_path_factory, stream_relay):
    """coturn over TCP/TLS, to compare client-to-client loss with; None if it is the server under
    test already or is not installed."""
    if stream_relay.kind == "coturn" or shutil.which("turnserver") is None:
        yield None
        return
    with running(RelayServer("coturn", tmp_path_factory.mktemp("coturn-reference"), streams=True)) as s:
        yield s


def stream_port(server: RelayServer, transport: str) -> int:
    return server.tls_port if transport == "tls" else server.port


def run_uclient(server: RelayServer, processes, transport: str, flags: list[str],
                peer_port: int | None, name: str = "turnutils_uclient") -> tuple[UclientReport | None, str]:
    cmd = [shutil.which("turnutils_uclient") or "turnutils_uclient", "-t",
           *(["-S"] if transport == "tls" else []), *flags,
           "-m", str(CLIENTS), "-n", str(MESSAGES), "-l", str(LENGTH), "-z", str(INTERVAL_MS),
           "-W", server.secret, "-u", "uclient", "-p", str(stream_port(server, transport)), "-L", "127.0.0.1"]
    if peer_port is not None:
        cmd += ["-e", "127.0.0.1", "-r", str(peer_port)]
    cmd.append(server.host)
    proc, log = processes.start(name, cmd)
    try:
        proc.wait(timeout=UCLIENT_TIMEOUT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"turnutils_uclient did not finish within {UCLIENT_TIMEOUT} s:\n"
                    f"{log.read_text(errors='replace')[-3000:]}")
    output = log.read_text(errors="replace")
    if proc.returncode != 0:
        return None, output
    return parse_report(output), output


def require_report(report: UclientReport | None, output: str) -> UclientReport:
    if report is None:
        pytest.fail(f"turnutils_uclient failed:\n{output[-3000:]}")
    return report


SCENARIOS = {
    # Each client relays to turnutils_peer (a UDP echo) with Send/Data indications.
    "to-peer-send-indications": ["-c", "-s"],
    # The same with channels: padded ChannelData on the stream.
    "to-peer-channels": ["-c"],
}


@pytest.mark.parametrize("scenario", list(SCENARIOS))
@pytest.mark.parametrize("transport", ["tcp", "tls"])
def test_uclient_over_stream_relays_to_udp_peer_without_loss(stream_relay, processes, transport, scenario):
    peer_port = start_peer(processes)
    report, output = run_uclient(stream_relay, processes, transport, SCENARIOS[scenario], peer_port)
    report = require_report(report, output)
    print(f"uclient {transport} {scenario}: {report}")
    expected = CLIENTS * MESSAGES
    assert report.send_msgs == expected, output[-3000:]
    assert report.recv_msgs == report.send_msgs
    assert report.send_bytes == expected * LENGTH
    assert report.recv_bytes == report.send_bytes
    assert report.lost == 0
    assert report.send_dropped == 0


@pytest.mark.parametrize("transport", ["tcp", "tls"])
def test_uclient_client_to_client_over_stream_completes(stream_relay, reference, processes, transport):
    report, output = run_uclient(stream_relay, processes, transport, ["-c", "-y"], None)
    report = require_report(report, output)
    line = f"uclient {transport} client-to-client: {stream_relay.kind} {report}"
    if reference is not None:
        ref, ref_output = run_uclient(reference, processes, transport, ["-c", "-y"], None, name="uclient-coturn")
        line += f"; coturn {ref}"
    print(line)
    expected = CLIENTS * MESSAGES
    assert report.send_msgs + report.send_dropped == expected, output[-3000:]
    assert report.send_dropped == 0
    assert report.send_bytes == report.send_msgs * LENGTH
    assert report.recv_bytes == report.recv_msgs * LENGTH
    assert report.lost <= C2C_LOSS_TOLERANCE, output[-3000:]
    if reference is not None and ref is not None:
        assert report.lost <= max(C2C_LOSS_TOLERANCE, 2 * ref.lost)


# --- the Python client over a stream ----------------------------------------------


def allocated(server: RelayServer, transport: str, **kwargs) -> StreamTurnClient:
    address = server.tls_address if transport == "tls" else server.address
    client = StreamTurnClient(address, tls=transport == "tls", **kwargs)
    client.allocate(*server.credentials())
    return client


def receive_payload(client: StreamTurnClient, kind: str, timeout: float = WAIT) -> stunclient.Received:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = client.receive(deadline - time.monotonic())
        if got is not None and got.kind == kind:
            return got
    pytest.fail(f"no {kind} frame from the server within {timeout} s")


@pytest.mark.parametrize("transport", ["tcp", "tls"])
def test_allocation_over_stream_relays_both_ways_with_padded_channel_data(stream_relay, transport):
    peer = udp_socket()
    with peer, allocated(stream_relay, transport) as client:
        assert client.relayed is not None and client.relayed[0] == "127.0.0.1"
        assert client.mapped == client.sock.getsockname()[:2]
        peer_address = peer.getsockname()[:2]
        client.create_permission(peer_address)

        # Send indication -> peer; peer -> Data indication on the stream.
        client.send_indication(peer_address, b"over-send")
        got = recv_from(peer, WAIT)
        assert got == (b"over-send", client.relayed)
        peer.sendto(b"back-as-data", client.relayed)
        data = receive_payload(client, "data")
        assert (data.payload, data.peer) == (b"back-as-data", peer_address)

        # ChannelData with lengths that need 0-3 bytes of padding, both directions.
        client.channel_bind(CHANNEL, peer_address)
        for length in (1, 2, 3, 4, 5, 120, 1203):
            payload = bytes((i * 7 + length) & 0xFF for i in range(length))
            client.send_channel_data(CHANNEL, payload)
            got = recv_from(peer, WAIT)
            assert got == (payload, client.relayed), f"length {length}"
            peer.sendto(payload[::-1], client.relayed)
            frame = client.reader.read_frame(WAIT)
            assert frame is not None, f"no ChannelData back for length {length}"
            assert len(frame) % 4 == 0, "ChannelData over a stream must be padded to 4 (RFC 8656 §12.5)"
            assert struct.unpack("!HH", frame[:4]) == (CHANNEL, length)
            assert frame[4:4 + length] == payload[::-1]
            if stream_relay.kind == "relayd":  # the padding's value is free (RFC 8489 §14); relayd zeroes it
                assert frame[4 + length:] == b"\x00" * (len(frame) - 4 - length)

        refreshed = client.refresh(600)
        assert refreshed.lifetime() == 600


@pytest.mark.parametrize("transport", ["tcp", "tls"])
def test_a_burst_the_client_cannot_take_at_once_arrives_whole_and_in_order(stream_relay, transport):
    """A peer sends 3 MB while the client, with a 4 kB receive buffer, is not reading. The
    kernel takes about 2.8 MB for the stalled connection on loopback; the server's last writes
    are partial and the rest waits in its output (below the 1 MiB slow-reader bound) for
    libevent's write event. Once the client reads, every ChannelData frame arrives, in order
    and intact."""
    peer = udp_socket()
    count, size = 3000, 1000
    with peer, allocated(stream_relay, transport, rcvbuf=4096) as client:
        peer_address = peer.getsockname()[:2]
        client.create_permission(peer_address)
        client.channel_bind(CHANNEL, peer_address)
        payloads = [struct.pack("!I", seq) + bytes([seq & 0xFF]) * (size - 4) for seq in range(count)]
        for start in range(0, count, 20):  # paced, so the relay socket's own buffer never overflows
            for payload in payloads[start:start + 20]:
                peer.sendto(payload, client.relayed)
            time.sleep(0.003)
        time.sleep(0.5)
        for seq, payload in enumerate(payloads):
            frame = client.reader.read_frame(WAIT)
            assert frame is not None, f"frame {seq} of {count} never arrived"
            assert struct.unpack("!HH", frame[:4]) == (CHANNEL, size), f"frame {seq}"
            assert frame[4:4 + size] == payload, f"frame {seq} is not message {seq}"


@pytest.mark.parametrize("transport", ["tcp", "tls"])
def test_closing_the_connection_ends_the_allocation(stream_relay, transport):
    peer = udp_socket()
    with peer:
        client = allocated(stream_relay, transport)
        relayed = client.relayed
        peer_address = peer.getsockname()[:2]
        client.channel_bind(CHANNEL, peer_address)
        client.send_channel_data(CHANNEL, b"alive")
        assert recv_from(peer, WAIT) == (b"alive", relayed)
        client.close()
        if stream_relay.kind == "relayd":
            pattern = re.compile(
                rf"event=allocation_deleted .*five_tuple={transport} 127\.0\.0\.1:\d+->127\.0\.0\.1:\d+ .*"
                rf"reason=connection_closed relayed={re.escape(f'{relayed[0]}:{relayed[1]}')}")
            deadline = time.monotonic() + WAIT
            while not pattern.search(stream_relay.log_text()) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert pattern.search(stream_relay.log_text()), "allocation not deleted with its connection"
        # The relayed address is gone: what a peer sends there reaches nobody and nothing answers.
        peer.sendto(b"anyone?", relayed)
        assert recv_from(peer, QUIET) is None


@pytest.mark.parametrize("transport", ["tcp", "tls"])
def test_allocate_over_stream_answers_like_udp(stream_relay, transport):
    """401 first, then success; a second Allocate on the same connection is 437 (RFC 8656 §7.2)."""
    with allocated(stream_relay, transport) as client:
        again = client.authenticated_request(
            Method.ALLOCATE, [(Attr.REQUESTED_TRANSPORT, struct.pack("!B3x", stunclient.UDP_TRANSPORT))])
        assert again.cls == Class.ERROR and again.error_code()[0] == 437
