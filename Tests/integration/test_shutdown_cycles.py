"""relayd started and stopped again and again with TLS and DTLS sessions relaying, to show that
shutdown does not crash (docs/operations.md, "Signals"): OpenSSL objects, libevent events and
bufferevents, and loop threads torn down while packets flow both ways.

Each cycle starts relayd with `--drain-timeout=1` and the HTTP API over HTTPS (`api-cert`: a
libevent OpenSSL bufferevent per connection), connects a TURN-over-TLS client and a
TURN-over-DTLS client (each an allocation with a channel to a UDP peer, one round trip checked
each way) and two HTTPS clients (one asking /healthz again and again, one idle after its
handshake), keeps data flowing in both directions from a pump thread, and stops relayd: even
cycles with SIGTERM then a second SIGTERM (stop at once), odd cycles with one SIGTERM and the
drain's end (drain-timeout). Every cycle must end with exit status 0, not a signal, and a log
free of crash markers (conftest.CRASH_MARKERS).

RELAYD_SHUTDOWN_CYCLES sets the number of cycles (default 12, about 20 s); the long run is
RELAYD_SHUTDOWN_CYCLES=200.
"""

from __future__ import annotations

import http.client
import os
import select
import shutil
import signal
import socket
import ssl
import subprocess
import threading
import time
from contextlib import ExitStack, closing

import pytest

from conftest import RelayServer, make_test_cert, server_kind
from dtlsclient import DTLSTurnClient
from streamclient import StreamTurnClient
from stunclient import recv_from
from test_dtls import peer_socket

pytestmark = pytest.mark.skipif(server_kind() != "relayd", reason="relayd's own shutdown")

CYCLES = int(os.environ.get("RELAYD_SHUTDOWN_CYCLES", "12"))
CHANNEL = 0x4000
EXIT_WAIT = 10.0
PAYLOAD = bytes(range(200))


def _round_trip(client, peer: socket.socket) -> None:
    """One ChannelData to the peer and one back through the channel (RFC 8656 §12)."""
    client.send_channel_data(CHANNEL, PAYLOAD)
    got = recv_from(peer, 3.0)
    assert got is not None and got[0] == PAYLOAD, "the peer got nothing through the channel"
    peer.sendto(PAYLOAD, client.relayed)
    deadline = time.monotonic() + 3.0
    while time.monotonic() < deadline:
        received = client.receive(max(0.0, deadline - time.monotonic()))
        if received is not None and received.kind == "channel":
            assert received.payload == PAYLOAD
            return
    pytest.fail("the client got nothing back through the channel")


def _https(server: RelayServer) -> http.client.HTTPSConnection:
    """A keep-alive HTTPS connection to the API, its TLS handshake done."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    connection = http.client.HTTPSConnection(server.host, server.api_port, timeout=2, context=context)
    connection.connect()
    return connection


def _healthy(connection: http.client.HTTPSConnection) -> bool:
    connection.request("GET", "/healthz")
    response = connection.getresponse()
    response.read()
    return response.status == 200


class Pump(threading.Thread):
    """ChannelData from both clients to the peer and datagrams from the peer to both relayed
    addresses, every 2 ms, reading and discarding what comes back, and a /healthz over HTTPS
    every 10 rounds, until stopped or the server is gone."""

    def __init__(self, tls: StreamTurnClient, dtls: DTLSTurnClient, peer: socket.socket,
                 api: http.client.HTTPSConnection):
        super().__init__(daemon=True)
        self.tls, self.dtls, self.peer, self.api = tls, dtls, peer, api
        tls.sock.settimeout(0.5)  # a partial record in the socket must not hold the pump for long
        self.halt = threading.Event()
        self.sent = 0

    def run(self) -> None:
        tls_alive = dtls_alive = api_alive = True
        while not self.halt.is_set() and (tls_alive or dtls_alive):
            if api_alive and self.sent % 10 == 0:
                try:
                    api_alive = _healthy(self.api)
                except (OSError, http.client.HTTPException):
                    api_alive = False
            if tls_alive:
                try:
                    self.tls.send_channel_data(CHANNEL, PAYLOAD)
                except (OSError, ssl.SSLError):
                    tls_alive = False
            if dtls_alive:
                try:
                    self.dtls.send_channel_data(CHANNEL, PAYLOAD)
                except Exception:  # noqa: BLE001 - the session or socket is gone: stop using it
                    dtls_alive = False
            for relayed in (self.tls.relayed, self.dtls.relayed):
                try:
                    self.peer.sendto(PAYLOAD, relayed)
                except OSError:
                    pass
            self.sent += 1
            self._discard()
            self.halt.wait(0.002)

    def _discard(self) -> None:
        socks = [s for s in (self.tls.sock, self.dtls.sock, self.peer) if s.fileno() >= 0]
        try:
            ready, _, _ = select.select(socks, [], [], 0)
        except (OSError, ValueError):
            return
        for sock in ready:
            try:
                sock.recv(65536)
            except (OSError, ssl.SSLError):
                pass


def _server(workdir, cert_dir) -> RelayServer:
    """A relayd for one cycle on free ports. Other tests running beside this one may hold most
    of the relay port space for a while (thousands of allocations): the search for a free relay
    range is tried again for up to 30 s before the cycle fails."""
    deadline = time.monotonic() + 30
    while True:
        try:
            return RelayServer(
                "relayd", workdir, streams=True,
                extra_args=["--relay-threads=2", "--drain-timeout=1", f"--api-cert={cert_dir / 'cert.pem'}",
                            f"--api-pkey={cert_dir / 'pkey.pem'}"])
        except RuntimeError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.5)


def _started(workdir, cert_dir) -> RelayServer:
    """A running relayd for one cycle. A port found free can be taken by another suite on the
    machine before relayd binds it: a start refused with "Address already in use" is tried
    again on other ports, twice at most; any other failure to start fails the cycle."""
    for attempt in range(3):
        server = _server(workdir, cert_dir)
        shutil.copytree(cert_dir, server.cert_path.parent, dirs_exist_ok=True)
        try:
            server.start()
            return server
        except RuntimeError:
            if attempt == 2 or "Address already in use" not in server.log_text():
                raise
    raise AssertionError("unreachable")


def _cycle(index: int, workdir, cert_dir) -> tuple[str, float] | None:
    """One start, traffic and stop; None when it went well, else what went wrong and when."""
    started = time.monotonic()
    server = _started(workdir / f"cycle-{index}", cert_dir)
    pump = None
    try:
        with ExitStack() as stack:
            peer = stack.enter_context(closing(peer_socket(server)))
            tls = stack.enter_context(closing(StreamTurnClient(server.tls_address, tls=True)))
            tls.allocate(*server.credentials("tls"))
            tls.channel_bind(CHANNEL, peer.getsockname())
            _round_trip(tls, peer)
            dtls = stack.enter_context(closing(DTLSTurnClient(server.tls_address)))
            dtls.handshake()
            dtls.allocate(*server.credentials("dtls"))
            dtls.channel_bind(CHANNEL, peer.getsockname())
            _round_trip(dtls, peer)
            api = stack.enter_context(closing(_https(server)))
            assert _healthy(api)
            stack.enter_context(closing(_https(server)))  # idle after its handshake
            pump = Pump(tls, dtls, peer, api)
            pump.start()
            time.sleep(0.1)
            proc = server.proc
            proc.send_signal(signal.SIGTERM)
            if index % 2 == 0:
                # The second stop signal, while the drain relays: exit at once.
                time.sleep(0.05 + (index % 5) * 0.03)
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
            try:
                code = proc.wait(timeout=EXIT_WAIT)
            except subprocess.TimeoutExpired:
                return f"cycle {index}: relayd did not exit within {EXIT_WAIT} s", time.monotonic() - started
            finally:
                pump.halt.set()
                pump.join(timeout=5)
            server.proc = None
            crashes = server.crash_lines()
            if code != 0 or crashes:
                how = f"signal {-code}" if code < 0 else f"exit status {code}"
                return (f"cycle {index} ({'second SIGTERM' if index % 2 == 0 else 'drain end'}): {how}, "
                        f"pump rounds {pump.sent}, log {server.log_path}: {crashes or server.log_tail(15)}",
                        time.monotonic() - started)
            # The cycle did what it says: HTTPS, a drain with both allocations, ended the way it meant.
            log = server.log_text()
            ending = "event=shutdown_forced" if index % 2 == 0 else "event=drain_done"
            if ("allocations=2 event=drain_started" not in log or ending not in log or pump.sent == 0
                    or "http_api=https://" not in log):
                return (f"cycle {index}: no drain of 2 allocations ended by {ending}, pump rounds {pump.sent}:\n"
                        f"{server.log_tail(15)}", time.monotonic() - started)
    finally:
        if pump is not None:
            pump.halt.set()
        server.stop()
    return None


def test_start_and_stop_with_tls_and_dtls_traffic_never_crashes(tmp_path):
    cert_dir = tmp_path / "tls"
    make_test_cert(cert_dir)
    failures = []
    started = time.monotonic()
    for index in range(CYCLES):
        failure = _cycle(index, tmp_path, cert_dir)
        if failure is None:
            shutil.rmtree(tmp_path / f"cycle-{index}", ignore_errors=True)
        else:
            failures.append(failure[0])
    elapsed = time.monotonic() - started
    print(f"{CYCLES} start/stop cycles in {elapsed:.1f} s, {len(failures)} failed")
    assert not failures, f"{len(failures)} of {CYCLES} cycles failed:\n" + "\n".join(failures)
