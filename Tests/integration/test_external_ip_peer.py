"""A peer on the relay's own private address behind `external-ip` (an SFU, a media server or
a test peer on the same VM, opened with `allowed-peer-ip`; loopback here): its answers keep the
address it really has, so the permissions and channels the client made for that address match
(docs/external-ip.md). turnutils_uclient relays to turnutils_peer on 127.0.0.1 through a relay
whose relay address 127.0.0.1 is advertised as 203.0.113.7, with channels and with Send/Data
indications, with and without a configuration reload during the run. coturn is the reference:
it loses nothing here either."""

from __future__ import annotations

import signal
import threading

import pytest

from conftest import RelayServer, running, server_kind
from stunclient import TurnClient
from test_uclient import run_uclient, start_peer

PUBLIC = "203.0.113.7"


@pytest.fixture(scope="module")
def natted(tmp_path_factory):
    server = RelayServer(server_kind(), tmp_path_factory.mktemp("external-ip-peer"),
                         extra_args=[f"--external-ip={PUBLIC}/127.0.0.1"])
    with running(server):
        yield server


def test_the_relay_advertises_the_public_form(natted):
    """The setting is in force: XOR-RELAYED-ADDRESS is the public address (the loss test below
    would pass trivially if external-ip were ignored)."""
    with TurnClient(natted.address) as client:
        client.allocate(*natted.credentials("form"))
        assert client.relayed[0] == PUBLIC, client.relayed
        client.refresh(0)


def reload_while_running(server: RelayServer, after: float) -> threading.Timer:
    """SIGHUP to relayd `after` seconds from now, in the middle of the uclient run."""
    timer = threading.Timer(after, lambda: server.proc.send_signal(signal.SIGHUP))
    timer.start()
    return timer


@pytest.mark.parametrize("reload", [False, True], ids=["steady", "reload-during-run"])
@pytest.mark.parametrize("flags", [["-c"], ["-c", "-s"]], ids=["channels", "send-indications"])
def test_co_located_peer_loses_nothing(natted, processes, flags, reload):
    if reload and natted.kind != "relayd":
        pytest.skip("reload is relayd's SIGHUP")
    peer_port = start_peer(processes)
    reloads_before = natted.log_text().count("configuration reloaded")
    timer = reload_while_running(natted, 1.5) if reload else None
    try:
        report, output = run_uclient(natted, processes, flags, peer_port)
    finally:
        if timer:
            timer.join()
    if reload:
        assert natted.log_text().count("configuration reloaded") == reloads_before + 1, natted.log_tail()
    assert report.send_msgs > 0, output[-3000:]
    assert report.lost == 0, output[-3000:]
    assert report.recv_msgs == report.send_msgs
    assert report.recv_bytes == report.send_bytes
