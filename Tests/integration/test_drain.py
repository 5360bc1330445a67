"""Drain and shutdown: SIGTERM refuses new allocations, keeps relaying for the
existing ones, flips /readyz and exits 0 when they end or at drain-timeout; a second SIGTERM
exits at once; SIGUSR1 drains without exiting; with alternate-server new Allocates get 300."""

from __future__ import annotations

import secrets
import signal
import subprocess

import pytest

from lifecycle import (
    FileServer,
    PacedStream,
    allocate_with_channel,
    challenged_allocate,
    conf,
    error_code_of_allocate,
    eventually,
    relayd_only,
    wait_for_log,
)
from stunclient import Attr, Class, decode_plain_address

pytestmark = relayd_only

EXIT_WAIT = 10.0


def ready(server: FileServer) -> int:
    return server.http("GET", "/readyz").status


def exit_code(server: FileServer, timeout: float = EXIT_WAIT) -> int:
    """Waits (bounded) for the process to exit by itself and returns its code."""
    try:
        code = server.proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"relayd did not exit within {timeout} s:\n{server.log_tail()}")
    assert not server.crash_lines(), server.crash_lines()
    server.proc = None  # exited: nothing for teardown to stop
    return code


@pytest.fixture
def draining_server(tmp_path):
    secret = secrets.token_hex(16)
    server = FileServer(tmp_path / "srv", conf(secret, drain_timeout=30))
    server.secret = secret
    server.start()
    try:
        yield server
    finally:
        server.stop()


def test_sigterm_drains_then_exits_when_the_last_allocation_ends(draining_server):
    server = draining_server
    client, peer = allocate_with_channel(server, server.secret)
    assert ready(server) == 200
    stream = PacedStream(client, peer, rate=100)
    try:
        eventually(lambda: len(stream.received) > 20)
        server.proc.send_signal(signal.SIGTERM)
        wait_for_log(server, r"draining")
        assert eventually(lambda: ready(server) == 503)
        assert error_code_of_allocate(server, server.secret) == 508
        before = len(stream.received)
        assert eventually(lambda: len(stream.received) > before + 50), "traffic stopped during the drain"
        assert server.is_running()
    finally:
        sent, received = stream.stop()
    assert len(received) == sent
    client.refresh(0)
    assert exit_code(server) == 0
    assert "drain complete: exiting" in server.log_text()
    client.close()
    peer.close()


def test_drain_timeout_ends_remaining_allocations_and_exits_0(tmp_path):
    secret = secrets.token_hex(16)
    server = FileServer(tmp_path / "srv", conf(secret, drain_timeout=1))
    server.start()
    try:
        client, peer = allocate_with_channel(server, secret)
        server.proc.send_signal(signal.SIGTERM)
        assert exit_code(server) == 0
        assert "drain timeout: ending remaining allocations" in server.log_text()
        client.close()
        peer.close()
    finally:
        server.stop()


@pytest.mark.parametrize("name", ["SIGTERM", "SIGINT"])
def test_a_second_stop_signal_exits_at_once(draining_server, name):
    """SIGTERM, or SIGINT (Ctrl-C in a terminal), starts a drain that may last an hour; the
    drain line says how to stop at once, and a second one does."""
    server = draining_server
    sig = getattr(signal, name)
    client, peer = allocate_with_channel(server, server.secret)
    server.proc.send_signal(sig)
    log = wait_for_log(server, r"draining")
    assert "a second Ctrl-C (SIGINT) or SIGTERM stops at once" in log
    server.proc.send_signal(sig)
    assert exit_code(server, timeout=5) == 0
    assert f"{name} again: exiting now" in server.log_text()
    client.close()
    peer.close()


def test_sigusr1_drains_without_exiting(draining_server):
    server = draining_server
    client, peer = allocate_with_channel(server, server.secret)
    server.proc.send_signal(signal.SIGUSR1)
    wait_for_log(server, r"draining")
    assert eventually(lambda: ready(server) == 503)
    assert error_code_of_allocate(server, server.secret) == 508
    client.refresh(0)
    wait_for_log(server, r"drain complete: no allocations left")
    assert server.is_running()
    assert ready(server) == 503
    assert client.binding().cls == Class.SUCCESS  # STUN still answered
    client.close()
    peer.close()


def test_drain_with_alternate_server_redirects_with_300(tmp_path):
    secret = secrets.token_hex(16)
    server = FileServer(tmp_path / "srv", conf(secret, alternate_server="192.0.2.10:3478"))
    server.start()
    try:
        server.proc.send_signal(signal.SIGUSR1)
        wait_for_log(server, r"draining")
        client, resp = challenged_allocate(server, secret, "redirected")
        with client:
            assert resp.cls == Class.ERROR
            assert resp.error_code()[0] == 300
            alternate = resp.get(Attr.ALTERNATE_SERVER)
            assert alternate is not None
            assert decode_plain_address(alternate) == ("192.0.2.10", 3478)
            assert resp.verify_integrity(client.key)
    finally:
        server.stop()

