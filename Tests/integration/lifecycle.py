"""Shared pieces of the lifecycle tests (reload, drain, systemd notify): a relayd whose
authentication, TLS and limits come from a config file the test rewrites, a paced
ChannelData stream with sequence numbers, and small polling helpers. relayd only: these
are relayd's own operations features."""

from __future__ import annotations

import re
import signal
import socket
import struct
import subprocess
import threading
import time
from pathlib import Path

import pytest

from conftest import RelayServer, die_with_parent, make_test_cert, server_kind
from stunclient import TurnClient, recv_from, rest_credentials, udp_socket

WAIT = 5.0

relayd_only = pytest.mark.skipif(
    server_kind() != "relayd", reason="relayd's own reload/drain/sd_notify operations (coturn has none of these)")


class FileServer(RelayServer):
    """relayd with listeners and the API on the command line, everything else in `conf_path`,
    which the test may rewrite before a SIGHUP."""

    def __init__(self, workdir: Path, conf_text: str, extra_args: list[str] | None = None):
        super().__init__("relayd", workdir, extra_args=extra_args)
        self.conf_path = self.workdir / "relayd.conf"
        self.conf_text = conf_text

    def command(self) -> list[str]:
        self.conf_path.write_text(self.conf_text)
        return [
            self.binary, "-c", str(self.conf_path),
            f"--listening-ip={self.host}", f"--listening-port={self.port}", f"--relay-ip={self.host}",
            f"--min-port={self.min_port}", f"--max-port={self.max_port}", "--allow-loopback-peers",
            "--no-tcp", "--no-tls",
            f"--api-listening-ip={self.host}", f"--api-listening-port={self.api_port}",
            f"--api-key={self.api_key_name}:{self.api_token}",
        ] + self.extra_args

    def rewrite(self, text: str) -> None:
        self.conf_text = text
        self.conf_path.write_text(text)


def conf(secret: str, realm: str = "example.org", **extra) -> str:
    """A config file with REST auth under `secret` plus `key=value` lines from `extra`."""
    lines = ["use-auth-secret", f"static-auth-secret={secret}", f"realm={realm}",
             "unauth-rate-limit=100000", "auth-failure-rate-limit=100000"]
    for key, value in extra.items():
        key = key.replace("_", "-")
        lines.append(key if value is True else f"{key}={value}")
    return "\n".join(lines) + "\n"


def wait_for_log(server: RelayServer, pattern: str, count: int = 1, timeout: float = WAIT) -> str:
    deadline = time.monotonic() + timeout
    while True:
        text = server.log_text()
        if len(re.findall(pattern, text)) >= count:
            return text
        if time.monotonic() >= deadline:
            pytest.fail(f"log never showed {pattern!r} ({count}x):\n{server.log_tail()}")
        time.sleep(0.05)


def eventually(predicate, timeout: float = WAIT, interval: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)


def allocate_with_channel(server: RelayServer, secret: str, user: str = "alice", channel: int = 0x4000):
    """A client allocated with REST credentials under `secret`, a channel bound to a fresh peer
    socket; returns (client, peer socket)."""
    client = TurnClient(server.address)
    username, password = rest_credentials(secret, user)
    client.allocate(username, password)
    peer = udp_socket()
    client.channel_bind(channel, peer.getsockname())
    return client, peer


def round_trip(client, peer, channel: int, payload: bytes) -> None:
    """ChannelData to the peer from the client's relayed address, and the peer's datagram back on
    the channel (RFC 8656 §12)."""
    client.send_channel_data(channel, payload)
    got = recv_from(peer, 3.0)
    assert got is not None, "the peer got nothing through the channel"
    assert got[0] == payload
    assert got[1] == tuple(client.relayed), f"the peer heard from {got[1]}, not the relayed address {client.relayed}"
    peer.sendto(payload[::-1], client.relayed)
    deadline = time.monotonic() + 3.0
    while time.monotonic() < deadline:
        received = client.receive(max(0.0, deadline - time.monotonic()))
        if received is not None and received.kind == "channel":
            assert received.channel == channel and received.payload == payload[::-1]
            return
    pytest.fail("the client got nothing back through its channel")


def allocate_outcome(make_client, username: str, password: str) -> int | None:
    """Allocates on a client `make_client` makes and releases: None on success, else the error code."""
    from stunclient import TurnError

    with make_client() as client:
        try:
            client.allocate(username, password)
        except TurnError as e:
            return e.code
        client.refresh(0)
        return None


def error_code_of_allocate(server: RelayServer, secret: str, user: str = "late") -> int | None:
    """Allocate with fresh credentials: None on success, else the error code."""
    return allocate_outcome(lambda: TurnClient(server.address), *rest_credentials(secret, user))


def challenged_allocate(server: RelayServer, secret: str, user: str):
    """A 401 challenge, then the authenticated Allocate; returns (client, response) whatever it
    says (a draining server's 300, say), the client holding the realm, nonce and key."""
    from stunclient import Attr, Method, long_term_key

    client = TurnClient(server.address)
    username, password = rest_credentials(secret, user)
    challenge = client.allocate_unauthenticated()
    client.realm = challenge.text(Attr.REALM)
    client.nonce = challenge.get(Attr.NONCE)
    client.username = username
    client.key = long_term_key(username, client.realm, password)
    resp = client.authenticated_request(Method.ALLOCATE, [(Attr.REQUESTED_TRANSPORT, struct.pack("!B3x", 17))])
    return client, resp


class PacedStream:
    """Sends numbered ChannelData from `client` on `channel` at `rate` per second on a thread,
    while another thread counts what arrives at `peer`. `stop()` returns (sent, received set)."""

    def __init__(self, client: TurnClient, peer: socket.socket, channel: int = 0x4000, rate: int = 200):
        self.client, self.peer, self.channel, self.rate = client, peer, channel, rate
        self.sent = 0
        self.received: set[int] = set()
        self.running = True
        self.threads = [threading.Thread(target=self._send, daemon=True),
                        threading.Thread(target=self._receive, daemon=True)]
        for t in self.threads:
            t.start()

    def _send(self) -> None:
        start = time.monotonic()
        while self.running:
            self.client.send_channel_data(self.channel, struct.pack("!I", self.sent) + b"x" * 96)
            self.sent += 1
            delay = start + self.sent / self.rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)

    def _receive(self) -> None:
        while self.running or len(self.received) < self.sent:
            got = recv_from(self.peer, 0.5)
            if got is None:
                if not self.running:
                    return
                continue
            if len(got[0]) >= 4:
                self.received.add(struct.unpack("!I", got[0][:4])[0])

    def stop(self, grace: float = 1.0) -> tuple[int, set[int]]:
        self.running = False
        self.threads[0].join(timeout=WAIT)
        eventually(lambda: len(self.received) >= self.sent, timeout=grace)
        self.threads[1].join(timeout=WAIT)
        return self.sent, self.received


def kill_and_restart(server: RelayServer) -> float:
    """SIGKILL, as a crash (no drain, nothing cleaned up), then the same command started again at
    once, as systemd's Restart= would (without its RestartSec), its output appended to the log.
    Returns the monotonic time of the kill."""
    server.proc.send_signal(signal.SIGKILL)
    killed = time.monotonic()
    server.proc.wait(timeout=10)
    with open(server.log_path, "ab") as log:
        server.proc = subprocess.Popen(
            server.command(), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            cwd=server.workdir, preexec_fn=die_with_parent)
    return killed


__all__ = ["FileServer", "kill_and_restart", "PacedStream", "conf", "make_test_cert", "relayd_only", "wait_for_log", "eventually",
           "allocate_with_channel", "challenged_allocate", "error_code_of_allocate"]
