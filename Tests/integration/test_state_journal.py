"""UDP allocations survive a crash (docs/state-journal.md).

relayd runs with `state-dir` and two loops; clients allocate, each with a channel to its own UDP
peer, and relay one round trip. relayd is killed with SIGKILL (no drain, no clean end) and
started again with the same command line. Every allocation comes back on the loop its client's
datagrams reach: the peer gets the client's ChannelData from the same relayed address, the
peer's datagram reaches the client on its channel, and a Refresh succeeds under the nonce the
client had before the crash (the nonce key is kept). A clean stop leaves nothing to restore.
"""

from __future__ import annotations

import os
import re
import signal
import stat
import subprocess
import time
from pathlib import Path

import pytest

from conftest import RelayServer, server_kind
from lifecycle import allocate_with_channel, eventually, kill_and_restart, round_trip, wait_for_log
from stunclient import TurnClient, recv_from

pytestmark = pytest.mark.skipif(server_kind() != "relayd", reason="relayd's state journal")

CLIENTS = 200


def metric(server: RelayServer, sample: str) -> float | None:
    """The value of one sample line of /metrics (name with its labels), or None."""
    resp = server.http("GET", "/metrics")
    assert resp.status == 200, resp
    m = re.search(rf"^{re.escape(sample)} (\S+)$", resp.body.decode(), re.MULTILINE)
    return float(m.group(1)) if m else None


def test_udp_allocations_survive_sigkill(tmp_path):
    state = tmp_path / "state"
    server = RelayServer("relayd", tmp_path / "relayd", extra_args=[f"--state-dir={state}", "--relay-threads=2"])
    server.start()
    pairs = []
    try:
        for i in range(CLIENTS):
            client, peer = allocate_with_channel(server, server.secret, user=f"crash{i}", channel=0x4000 + i)
            round_trip(client, peer, 0x4000 + i, b"before %d" % i)
            pairs.append((client, peer))
        journals = sorted(p.name for p in state.iterdir() if p.suffix == ".journal")
        assert journals == ["loop-0.journal", "loop-1.journal"]
        assert stat.S_IMODE(state.stat().st_mode) == 0o700
        for name in journals:
            assert stat.S_IMODE((state / name).stat().st_mode) == 0o600, "a journal holds keys: 0600"

        # Started again at once (systemd adds RestartSec), probed every 10 ms by the first
        # client's ChannelData: the gap its media sees, from SIGKILL to the first datagram
        # relayed again.
        killed = kill_and_restart(server)
        client0, peer0 = pairs[0]
        while recv_from(peer0, 0.0) is None:
            assert time.monotonic() - killed < 10, "nothing relayed within 10 s of the restart"
            client0.send_channel_data(0x4000, b"probe")
            time.sleep(0.01)
        print(f"state journal: SIGKILL to the first datagram relayed again: {(time.monotonic() - killed) * 1000:.0f} ms")
        while recv_from(peer0, 0.05) is not None:
            pass
        wait_for_log(server, "state_journal_read")
        # Both loops restore their share: the selector spreads loopback clients over both.
        restored = server.log_text().count("allocation_restored")
        assert restored == CLIENTS, server.log_tail()
        assert eventually(
            lambda: metric(server, 'relayd_state_restored_allocations_total{outcome="restored"}') == CLIENTS)
        assert metric(server, 'relayd_state_restored_allocations_total{outcome="not_restored"}') == 0
        assert metric(server, "relayd_state_journals_refused_total") == 0

        for i, (client, peer) in enumerate(pairs):
            round_trip(client, peer, 0x4000 + i, b"after %d" % i)
            nonce = client.nonce
            client.refresh(600)
            assert client.nonce == nonce, "the nonce issued before the crash was refused (438)"
    finally:
        for client, peer in pairs:
            peer.close()
            client.close()
        problems = server.stop()
    assert not problems, problems
    # A clean stop ends every allocation: no journal is left to restore from (the usage journal,
    # docs/usage.md, stays).
    assert sorted(p.name for p in state.iterdir()) == ["usage.jsonl"]


def test_a_damaged_journal_is_refused_and_relayd_starts_clean(tmp_path):
    state = tmp_path / "state"
    os.makedirs(state, mode=0o700)
    (state / "loop-0.journal").write_bytes(b"\x89RLJ\r\n\x1a\n" + b"\x00\x07" + os.urandom(40))
    (state / "loop-7.journal").write_bytes(b"not a journal at all")
    server = RelayServer("relayd", tmp_path / "relayd", extra_args=[f"--state-dir={state}", "--relay-threads=1"])
    server.start()
    try:
        wait_for_log(server, "state_journal_refused", count=2)
        assert eventually(lambda: metric(server, "relayd_state_journals_refused_total") == 2)
        client, peer = allocate_with_channel(server, server.secret, user="fresh")
        round_trip(client, peer, 0x4000, b"fresh start")
        client.close()
        peer.close()
        assert sorted(p.name for p in state.iterdir() if p.suffix == ".journal") == ["loop-0.journal"]
    finally:
        problems = server.stop()
    assert not problems, problems


def test_tls_sessions_resume_after_a_crash(tmp_path):
    """The journal keeps the TLS session-ticket keys, and a SIGHUP's new ones: a session whose
    ticket the killed relayd issued resumes with the restarted one."""
    from test_live_upgrade import client_context, resume

    state = tmp_path / "state"
    server = RelayServer(
        "relayd", tmp_path / "relayd", streams=True, extra_args=[f"--state-dir={state}", "--relay-threads=2"])
    server.start()
    try:
        context = client_context()
        before_reload, _ = resume(server, context)
        server.proc.send_signal(signal.SIGHUP)
        wait_for_log(server, "tls_reloaded")
        time.sleep(0.5)  # the loops write their journals afresh with the new keys
        session, reused = resume(server, context)
        assert not reused, "the SIGHUP drew no new ticket keys"
        kill_and_restart(server)
        server.wait_ready(10)
        assert resume(server, context, session)[1], "the restarted relayd did not resume a session of the killed one"
        assert not resume(server, context, before_reload)[1], "a ticket under the keys before the SIGHUP resumed"
    finally:
        problems = server.stop()
    assert not problems, problems


def test_an_even_port_reservation_survives_a_crash(tmp_path):
    """EVEN-PORT's R bit holds the next port for a RESERVATION-TOKEN (RFC 8656 §7.2): the journal
    keeps the reservation, and after SIGKILL and a restart the token still gets that port."""
    from test_adv_allocation import RESERVATION_TOKEN, code, even_port
    from test_adversarial import allocate

    state = tmp_path / "state"
    server = RelayServer("relayd", tmp_path / "relayd", extra_args=[f"--state-dir={state}", "--relay-threads=2"])
    server.start()
    clients = []
    try:
        first = TurnClient(server.address)
        clients.append(first)
        response = allocate(server, first, user="even", extra=[even_port(True)])
        assert code(response) is None
        token = response.get(RESERVATION_TOKEN)
        assert token is not None and len(token) == 8
        time.sleep(0.3)  # the loop writes its journal at the end of the iteration
        kill_and_restart(server)
        server.wait_ready(10)
        second = TurnClient(server.address)
        clients.append(second)
        taken = allocate(server, second, user="pair", extra=[(RESERVATION_TOKEN, token)])
        assert code(taken) is None, taken.error_code()
        assert second.relayed[1] == first.relayed[1] + 1
        first.refresh(600)
    finally:
        for client in clients:
            client.close()
        problems = server.stop()
    assert not problems, problems


def test_the_journal_is_written_before_the_allocate_success_leaves(tmp_path):
    """Write-ahead (docs/state-journal.md, "In a state-dir"): a client that got its Allocate's
    success finds the allocation after a SIGKILL at any moment, so the allocation's record is
    handed to the kernel (write(2) on the loop's journal) before the success response is sent.
    strace, attached to every thread, shows the order of the two system calls."""
    state = tmp_path / "state"
    server = RelayServer("relayd", tmp_path / "relayd", extra_args=[f"--state-dir={state}", "--relay-threads=1"])
    server.start()
    trace = tmp_path / "strace.out"
    tracer = None
    try:
        pid = server.proc.pid
        journal_fds = {
            int(fd.name) for fd in Path(f"/proc/{pid}/fd").iterdir()
            if os.readlink(fd).endswith(".journal")
        }
        assert journal_fds, "no journal open"
        tracer = subprocess.Popen(
            ["strace", "-f", "-p", str(pid), "-qq", "-xx", "-s", "8",
             "-e", "trace=write,sendmmsg,sendmsg,sendto", "-e", "signal=none", "-o", str(trace)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        # strace prints nothing once attached; give it the moment it needs to attach every thread.
        time.sleep(1.0)
        assert tracer.poll() is None, tracer.stderr.read().decode()
        client, _ = allocate_with_channel(server, server.secret, user="ahead", channel=0x4000)
        time.sleep(0.3)
        tracer.send_signal(signal.SIGINT)
        tracer.wait(timeout=10)
        tracer = None
        lines = trace.read_text().splitlines()
        # The Allocate's success: a STUN message of type 0x0103 (RFC 8656 §7.3, §17).
        success = [i for i, line in enumerate(lines) if re.search(r'iov_base="\\x01\\x03', line)]
        writes = [i for i, line in enumerate(lines)
                  if (m := re.search(r"\bwrite\((\d+),", line)) and int(m.group(1)) in journal_fds]
        assert success, "\n".join(lines[-20:])
        assert writes, "nothing written to the journal:\n" + "\n".join(lines[-20:])
        assert writes[0] < success[0], (
            "the success response left before the journal record:\n" + "\n".join(lines[:success[0] + 3]))
        client.close()
    finally:
        if tracer is not None:
            tracer.kill()
            tracer.wait()
        server.stop()
