"""Live upgrades between handover protocol versions (docs/live-upgrade.md, "Versions"). A running
relayd hands over to an heir of any version from 1 to its own, sending only what that version
reads; what an older heir cannot take stays and drains in the old process. The suite builds one
version, so the heir here is this build made to speak an older version: the binary's path is
replaced, before the upgrade, by a script that names that version in the heir's environment
(`RELAYD_HANDOVER_VERSION`, which an heir reads as the running relayd's version) and runs the
same binary. The running relayd then pauses, sends and keeps what that version calls for, and
the heir reads it; both sides of the older protocol are exercised by this build. Upgrades
between two real builds: scripts/upgrade-compat.py.
"""

from __future__ import annotations

import json
import os
import re
import shutil

import pytest

from conftest import RelayServer, pid_alive, server_kind
from lifecycle import allocate_with_channel, eventually, round_trip, wait_for_log
from streamclient import StreamTurnClient
from stunclient import udp_socket
from tcprelay import TCPRelayClient, connection_id, recv_exactly
from test_live_upgrade import ADMIN, stop_both, upgrade_through_api
from test_live_upgrade_tcp_relay import echo_server

pytestmark = pytest.mark.skipif(server_kind() != "relayd", reason="relayd's live upgrade")

# What each version's heir takes, beyond the listeners and the UDP allocations: version 2 adds
# plain TCP connections, 3 RFC 6062 allocations, 4 TLS 1.3 sessions.
MOVES_TCP = {1: False, 2: True, 3: True}
MOVES_RFC6062 = {1: False, 2: False, 3: True}


def binary_in(directory) -> str:
    """This build's relayd at a path of the test's own, which the test may replace."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "relayd"
    real = os.path.realpath(RelayServer.default_binary("relayd"))
    try:
        os.link(real, path)
    except OSError:
        shutil.copy2(real, path)
    return str(path)


def speak_version(path: str, version: int) -> None:
    """Replaces the binary at `path` by a script that runs it as an heir of handover `version`."""
    real = path + ".real"
    os.rename(path, real)
    script = path + ".new"
    with open(script, "w") as f:
        f.write(f'#!/bin/sh\nRELAYD_HANDOVER_VERSION={version} exec "{real}" "$@"\n')
    os.chmod(script, 0o755)
    os.rename(script, path)


@pytest.mark.parametrize("version", [1, 2, 3])
def test_upgrade_to_an_heir_of_an_older_version(tmp_path, version):
    """UDP, TCP and TLS clients, each with an allocation and a channel to a peer, and a TCP
    allocation (RFC 6062) with a pipe to an echo server, through an upgrade to an heir of
    `version`: the UDP allocation always moves, the TCP client from version 2 on, the TCP
    allocation with its control and data connections from version 3 on; the TLS session stays
    (version 4 moves it). Every call and the pipe go on, the old process serves what stayed
    until it leaves, then exits."""
    binary = binary_in(tmp_path / "bin")
    server = RelayServer(
        "relayd", tmp_path / "relayd", binary=binary, streams=True,
        extra_args=["--relay-threads=2", "--drain-timeout=60", *ADMIN])
    server.start()
    heir = None
    calls = []
    echo, _ = echo_server()
    pipes = None
    try:
        udp, udp_peer = allocate_with_channel(server, server.secret, user="udp", channel=0x4000)
        calls.append((udp, udp_peer, 0x4000))
        for i, (address, tls) in enumerate([(server.address, False), (server.tls_address, True)]):
            client = StreamTurnClient(address, tls=tls)
            client.allocate(*server.credentials(user=f"stream{i}"))
            peer = udp_socket()
            client.channel_bind(0x4001 + i, peer.getsockname())
            calls.append((client, peer, 0x4001 + i))
        for client, peer, channel in calls:
            round_trip(client, peer, channel, b"before")
        relayed = [tuple(client.relayed) for client, _, _ in calls]
        control = TCPRelayClient(server.address, timeout=20)
        pipes = [control]
        control.allocate(*server.credentials(user="pipes"))
        control.create_permission(("127.0.0.1", 9))
        cid = connection_id(TCPRelayClient.check(control.connect_peer(echo.server_address), "Connect"))
        data, response, rest = control.open_data_connection(cid)
        TCPRelayClient.check(response, "ConnectionBind")
        assert rest == b""
        pipes.append(data)
        data.sendall(b"before")
        assert recv_exactly(data, 6, timeout=5) == b"before"

        speak_version(binary, version)
        resp = upgrade_through_api(server)
        assert resp.status == 200, resp.body
        answer = json.loads(resp.body)
        heir = answer["pid"]
        text = wait_for_log(server, r"speaks handover version")
        assert re.search(rf"pid {heir} speaks handover version {version}, this relayd \d+", text), server.log_tail()
        moved_tcp, moved_pipe = MOVES_TCP[version], MOVES_RFC6062[version]
        assert answer["allocations"] == 1 + int(moved_tcp) + int(moved_pipe), answer
        # Each loop that restored anything says so, before the heir told the old process it serves.
        text = wait_for_log(server, r"connections from the live upgrade")
        counts = re.findall(r", (\d+) TCP and (\d+) TLS connections from the live upgrade", text)
        # The TCP client, and the RFC 6062 control connection with its data connection.
        assert sum(int(tcp) for tcp, _ in counts) == int(moved_tcp) + 2 * int(moved_pipe), server.log_tail()
        assert sum(int(tls) for _, tls in counts) == 0, server.log_tail()

        for i, (client, peer, channel) in enumerate(calls):
            assert tuple(client.relayed) == relayed[i]
            round_trip(client, peer, channel, b"after")
            client.refresh(600)
        data.sendall(b"after the upgrade")
        assert recv_exactly(data, 17, timeout=5) == b"after the upgrade"
        control.refresh(600)
        # The TLS session (and before version 2 the TCP client) stays: the old process serves it.
        assert server.proc.poll() is None, "the old process exited with a client still on it"
        for client, peer, _ in calls[1:]:
            client.close()
            peer.close()
        calls = calls[:1]
        if not moved_pipe:
            for sock in pipes:
                sock.close()
        assert server.proc.wait(timeout=15) == 0, server.log_tail()
        assert pid_alive(heir)
        udp, udp_peer, channel = calls[0]
        round_trip(udp, udp_peer, channel, b"after the old process left")
        if moved_pipe:
            data.sendall(b"in the heir")
            assert recv_exactly(data, 11, timeout=5) == b"in the heir"
    finally:
        for client, peer, _ in calls:
            peer.close()
            client.close()
        for sock in pipes or []:
            sock.close()
        echo.shutdown()
        echo.server_close()
        problems = stop_both(server, heir)
    assert not problems, problems
