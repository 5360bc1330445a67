"""systemd notification: relayd, started with NOTIFY_SOCKET pointing at a datagram
socket the test owns, reports READY=1, then RELOADING=1 and READY=1 around a SIGHUP, then
STOPPING=1 on SIGTERM, in that order; with WATCHDOG_USEC it pings WATCHDOG=1."""

from __future__ import annotations

import secrets
import signal
import socket
import time

from lifecycle import FileServer, conf, relayd_only, wait_for_log

pytestmark = relayd_only


def collect(sock: socket.socket, until: str, timeout: float = 5.0) -> list[str]:
    """Datagrams (decoded) until one contains `until` (bounded)."""
    got: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            got.append(sock.recv(4096).decode())
        except socket.timeout:
            break
        if until in got[-1]:
            return got
    raise AssertionError(f"never saw {until!r}; got {got!r}")


def test_ready_reloading_stopping_in_order(tmp_path, monkeypatch):
    path = tmp_path / "notify.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(path))
    monkeypatch.setenv("NOTIFY_SOCKET", str(path))
    monkeypatch.setenv("WATCHDOG_USEC", "400000")
    monkeypatch.delenv("WATCHDOG_PID", raising=False)
    server = FileServer(tmp_path / "srv", conf(secrets.token_hex(16)))
    server.start()
    try:
        messages = collect(sock, "READY=1")
        messages += collect(sock, "WATCHDOG=1", timeout=3)
        server.proc.send_signal(signal.SIGHUP)
        wait_for_log(server, "configuration reloaded")
        messages += collect(sock, "READY=1")
        server.proc.send_signal(signal.SIGTERM)
        messages += collect(sock, "STOPPING=1")
        assert server.proc.wait(timeout=10) == 0
        server.proc = None
    finally:
        server.stop()
        sock.close()
    states = [line for m in messages for line in m.splitlines() if line.split("=")[0] in
              ("READY", "RELOADING", "STOPPING")]
    assert states[0] == "READY=1", messages
    reloading = states.index("RELOADING=1")
    assert "READY=1" in states[reloading + 1:], messages
    assert states[-1] == "STOPPING=1", messages
    reload_message = next(m for m in messages if "RELOADING=1" in m)
    assert "MONOTONIC_USEC=" in reload_message
    assert any(m.startswith("WATCHDOG=1") for m in messages)
