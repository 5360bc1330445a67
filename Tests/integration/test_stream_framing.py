"""STUN over TCP and TLS: stream framing (RFC 8489 §6.2.2, RFC 8656 §12.5).

A TCP stream has no message boundaries: the server must find them itself, in
partial reads, in several messages arriving in one read and in a message split
over many reads, and must close a connection whose bytes cannot start a STUN
message or ChannelData frame (and count it).
"""

from __future__ import annotations

import re
import socket
import struct
import time

import pytest

import stunclient
from conftest import RelayServer, running, server_kind
from streamclient import FrameReader, connect
from stunclient import MAGIC_COOKIE, Attr, Class, Method, StunMessage

ANSWER_TIMEOUT = 5.0
CLOSE_TIMEOUT = 5.0


@pytest.fixture(scope="module")
def stream_relay(tmp_path_factory):
    extra = ["--verbose"] if server_kind() == "relayd" else []
    server = RelayServer(server_kind(), tmp_path_factory.mktemp(f"{server_kind()}-framing"), streams=True,
                         extra_args=extra)
    with running(server) as s:
        yield s


def check_binding_answer(frame: bytes | None, request: StunMessage, sock: socket.socket) -> None:
    """A Binding success for `request`, whose XOR-MAPPED-ADDRESS is this connection's own address."""
    assert frame is not None, "no answer to the Binding request"
    response = StunMessage.decode(frame)
    assert response.transaction_id == request.transaction_id
    assert (response.method, response.cls) == (Method.BINDING, Class.SUCCESS)
    assert response.xor_address(Attr.XOR_MAPPED_ADDRESS) == sock.getsockname()[:2]


def bad_frame_closes(server: RelayServer) -> int:
    """How many connections relayd has closed for a bad frame (its debug log)."""
    return len(re.findall(r"event=connection_closed .*reason=bad_frame", server.log_text()))


@pytest.mark.parametrize("transport", ["tcp", "tls"])
def test_binding_dripped_one_byte_at_a_time_is_answered(stream_relay, transport):
    address = stream_relay.tls_address if transport == "tls" else stream_relay.address
    request = stunclient.binding_request()
    with connect(address, tls=transport == "tls") as sock:
        for byte in request.encode():
            sock.sendall(bytes([byte]))
            time.sleep(0.005)
        check_binding_answer(FrameReader(sock).read_frame(ANSWER_TIMEOUT), request, sock)


@pytest.mark.parametrize("split", [1, 3, 4, 7, 8, 19, 20, 21, 27])
def test_binding_split_in_two_reads_is_answered(stream_relay, split):
    request = stunclient.binding_request()
    wire = request.encode()
    with connect(stream_relay.address) as sock:
        sock.sendall(wire[:split])
        time.sleep(0.05)
        sock.sendall(wire[split:])
        check_binding_answer(FrameReader(sock).read_frame(ANSWER_TIMEOUT), request, sock)


@pytest.mark.parametrize("transport", ["tcp", "tls"])
def test_many_messages_in_one_write_are_all_answered(stream_relay, transport):
    address = stream_relay.tls_address if transport == "tls" else stream_relay.address
    requests = [stunclient.binding_request() for _ in range(100)]
    with connect(address, tls=transport == "tls") as sock:
        sock.sendall(b"".join(r.encode() for r in requests))
        reader = FrameReader(sock)
        answered = []
        for _ in requests:
            frame = reader.read_frame(ANSWER_TIMEOUT)
            assert frame is not None, f"only {len(answered)} of {len(requests)} answered"
            answered.append(StunMessage.decode(frame).transaction_id)
    assert sorted(answered) == sorted(r.transaction_id for r in requests)


def test_messages_and_a_partial_one_in_one_write(stream_relay):
    """Two whole messages plus the head of a third in one write, the tail later."""
    requests = [stunclient.binding_request() for _ in range(3)]
    wire = b"".join(r.encode() for r in requests)
    cut = len(wire) - 13
    with connect(stream_relay.address) as sock:
        sock.sendall(wire[:cut])
        reader = FrameReader(sock)
        first_two = [reader.read_frame(ANSWER_TIMEOUT) for _ in range(2)]
        assert all(f is not None for f in first_two)
        assert reader.read_frame(0.3) is None, "answered a message before all of it arrived"
        sock.sendall(wire[cut:])
        third = reader.read_frame(ANSWER_TIMEOUT)
        check_binding_answer(third, requests[2], sock)


BAD_FRAMES = {
    # RFC 8489 §5: the length of a STUN message is a multiple of 4.
    "length-not-multiple-of-4": struct.pack("!HHI", 0x0001, 3, MAGIC_COOKIE) + b"\x01" * 12 + b"abc",
    "wrong-magic-cookie": struct.pack("!HHI", 0x0001, 0, 0x01020304) + b"\x01" * 12,
    # Neither STUN (first byte 0-3) nor ChannelData (64-79), RFC 7983: a TLS record and RTP.
    "tls-record": b"\x16\x03\x01\x00\x2a" + b"\x01" * 42,
    "rtp-packet": b"\x80\x60\x00\x01" + b"\x00" * 28,
}


@pytest.mark.parametrize("case", list(BAD_FRAMES))
@pytest.mark.parametrize("transport", ["tcp", "tls"])
def test_bad_frame_closes_the_connection_and_is_counted(stream_relay, transport, case):
    if server_kind() == "coturn":
        pytest.xfail("coturn 4.6 leaves a connection open on bytes it cannot frame")
    address = stream_relay.tls_address if transport == "tls" else stream_relay.address
    before = bad_frame_closes(stream_relay)
    request = stunclient.binding_request()
    with connect(address, tls=transport == "tls") as sock:
        sock.sendall(request.encode())
        reader = FrameReader(sock)
        check_binding_answer(reader.read_frame(ANSWER_TIMEOUT), request, sock)
        sock.sendall(BAD_FRAMES[case])
        assert reader.wait_closed(CLOSE_TIMEOUT), "connection still open after a bad frame"
    if stream_relay.kind == "relayd":
        deadline = time.monotonic() + CLOSE_TIMEOUT
        while bad_frame_closes(stream_relay) <= before and time.monotonic() < deadline:
            time.sleep(0.05)
        assert bad_frame_closes(stream_relay) == before + 1


def test_other_connections_are_unaffected_by_a_bad_frame(stream_relay):
    with connect(stream_relay.address) as good, connect(stream_relay.address) as bad:
        bad.sendall(BAD_FRAMES["rtp-packet"])
        if stream_relay.kind == "relayd":
            assert FrameReader(bad).wait_closed(CLOSE_TIMEOUT)
        request = stunclient.binding_request()
        good.sendall(request.encode())
        check_binding_answer(FrameReader(good).read_frame(ANSWER_TIMEOUT), request, good)


def test_answers_are_written_before_a_half_closed_connection_ends(stream_relay):
    """A client that sends its requests and shuts down its sending side still gets answers."""
    requests = [stunclient.binding_request() for _ in range(5)]
    with connect(stream_relay.address) as sock:
        sock.sendall(b"".join(r.encode() for r in requests))
        sock.shutdown(socket.SHUT_WR)
        reader = FrameReader(sock)
        frames = [reader.read_frame(ANSWER_TIMEOUT) for _ in requests]
        assert all(f is not None for f in frames)
        assert reader.wait_closed(CLOSE_TIMEOUT)
