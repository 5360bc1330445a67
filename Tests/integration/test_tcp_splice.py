"""RFC 6062 pipes spliced in the kernel (docs/tcp-relay.md, "In the kernel").

With `kernel-offload=on`, a plain-TCP pipe without `max-bps` puts its two sockets in the
sockmap of relayd's `relayd_tcp_splice` program once ConnectionBind is answered, and the
kernel moves most bytes between them. These tests check what a pipe must keep: every byte in
order both ways (including bytes sent with the ConnectionBind), a slow reader stalling its
sender instead of filling memory, resets and a killed relayd closing both sides, exact counts in
/metrics and in the session summary, and pipes that must stay in user space (TLS, `max-bps`)
staying there. coturn's turnutils_uclient -T relays through spliced pipes too.

relayd only, as root (the program is loaded into the kernel); serial, because `kernel-offload=on`
also attaches the UDP fast path to `lo` (Tests/integration/README.md).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest

from conftest import REPO_ROOT, RelayServer, free_port, running, server_kind
from tcprelay import TCPRelayClient, connection_id, recv_exactly, wait_eof
from test_http_metrics import scrape, value
from test_tcp_relay import (  # noqa: F401 (echo: a fixture)
    SLOW_PAYLOAD, STALL_LIMIT, UCLIENT_TIMEOUT, WAIT, connected_pipe, control, echo, echo_through, metric,
    rss_kib, send_rest_and_check, stall, start)
from test_uclient import _tool, parse_report

pytestmark = [
    pytest.mark.serial,
    pytest.mark.skipif(server_kind() != "relayd", reason="relayd's own sockmap program"),
    pytest.mark.skipif(os.geteuid() != 0, reason="loading a BPF program needs root"),
]

OFFLOAD = ["--kernel-offload=on", "--kernel-offload-interface=lo"]


def spliced(s) -> tuple[float, float, float]:
    """Pipes spliced, and the bytes the kernel redirected to the peer and to the client."""
    page = scrape(s)
    return (value(page, "relayd_tcp_spliced_pipes_total"),
            value(page, "relayd_tcp_spliced_bytes_total", direction="to_peer"),
            value(page, "relayd_tcp_spliced_bytes_total", direction="to_client"))


def wait_spliced(s, pipes: int) -> None:
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        if spliced(s)[0] >= pipes:
            return
        time.sleep(0.1)
    raise AssertionError(f"{pipes} pipe(s) not spliced within {WAIT} s: {spliced(s)}")


def counted(s) -> tuple[float, float]:
    """The relayed bytes, once the spliced pipes' counts were read (every second)."""
    time.sleep(1.3)
    page = scrape(s)
    return (value(page, "relayd_tcp_relayed_bytes_total", direction="to_peer"),
            value(page, "relayd_tcp_relayed_bytes_total", direction="to_client"))


def test_a_spliced_pipe_is_byte_exact_both_ways_and_counted(tmp_path, echo):
    """50 MB through an echo server, written and read at once from two threads: every byte
    back in order, most of them moved by the kernel, and /metrics counts each exactly once."""
    with running(start(tmp_path, *OFFLOAD)) as s, control(s, "tcp") as client:
        data, _ = connected_pipe(client, echo)
        with data:
            wait_spliced(s, 1)
            payload = os.urandom(50 << 20)
            received: list[bytes] = []
            reader = threading.Thread(target=lambda: received.append(recv_exactly(data, len(payload), timeout=60)))
            reader.start()
            data.sendall(payload)
            reader.join(timeout=60)
            assert received and received[0] == payload
            assert counted(s) == (len(payload), len(payload))
            pipes, to_peer, to_client = spliced(s)
            assert pipes == 1
            assert 0 < to_peer <= len(payload) and 0 < to_client <= len(payload), (to_peer, to_client)


def test_bytes_sent_with_the_connection_bind_arrive_first(tmp_path):
    """The client's first bytes, in the ConnectionBind's own write, and the peer's, sent before
    the splice: both arrive whole and ahead of what follows, which the kernel moves."""
    listener = socket.create_server(("127.0.0.1", 0))
    with listener, running(start(tmp_path, *OFFLOAD)) as s, control(s, "tcp") as client:
        listener.settimeout(WAIT)
        client.create_permission(listener.getsockname())
        cid = connection_id(TCPRelayClient.check(client.connect_peer(listener.getsockname()), "Connect"))
        peer, _ = listener.accept()
        with peer:
            early_from_peer = os.urandom(100_000)
            peer.sendall(early_from_peer)
            early = os.urandom(200_000)
            data, bound, rest = client.open_data_connection(cid, trailing=early)
            with data:
                TCPRelayClient.check(bound, "ConnectionBind")
                assert recv_exactly(peer, len(early), timeout=WAIT) == early
                assert rest + recv_exactly(data, len(early_from_peer) - len(rest), timeout=WAIT) == early_from_peer
                wait_spliced(s, 1)
                later = os.urandom(4 << 20)
                data.sendall(later)
                assert recv_exactly(peer, len(later), timeout=20) == later
                peer.sendall(later)
                assert recv_exactly(data, len(later), timeout=20) == later


def cpu_seconds(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def spliced_pipe(s, client: TCPRelayClient, listener: socket.socket,
                 rcvbuf: int | None = None) -> tuple[socket.socket, socket.socket]:
    """A Connect to `listener`, bound and spliced: the peer's socket and the data connection."""
    listener.settimeout(WAIT)
    client.create_permission(listener.getsockname())
    cid = connection_id(TCPRelayClient.check(client.connect_peer(listener.getsockname()), "Connect"))
    peer, _ = listener.accept()
    if rcvbuf:
        peer.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    data, bound, _ = client.open_data_connection(cid)
    TCPRelayClient.check(bound, "ConnectionBind")
    wait_spliced(s, 1)
    return peer, data



@pytest.mark.parametrize("slow", ["peer", "client"])
def test_a_slow_reader_stalls_its_sender_through_the_kernel(tmp_path, slow):
    """One side reads nothing for 3 s while the other writes SLOW_PAYLOAD: the writer stalls
    after the socket buffers (a plain redirect would take it all into kernel memory), relayd
    does not grow, and then every byte arrives in order."""
    listener = socket.create_server(("127.0.0.1", 0))
    with listener, running(start(tmp_path, *OFFLOAD)) as s, control(s, "tcp") as client:
        peer, data = spliced_pipe(s, client, listener)
        with peer, data:
            sender, receiver = (data, peer) if slow == "peer" else (peer, data)
            payload = os.urandom(SLOW_PAYLOAD)
            before = rss_kib(s.proc.pid)
            sent = stall(sender, payload, 3)
            grown = rss_kib(s.proc.pid) - before
            assert sent < STALL_LIMIT, f"{sent >> 20} MB taken from a sender whose reader reads nothing"
            assert grown < 4096, f"relayd grew by {grown} KiB while one side did not read"
            send_rest_and_check(sender, receiver, payload, sent)


def test_both_sides_slow_stall_both_senders(tmp_path):
    """Neither side reads: the peer fills the way to the client, then the client writes for
    4 s. The kernel would queue the client's bytes, uncharged, behind those it redirected to the
    client's socket: the program redirects only into room the target's send queue has, so the
    client's sender stalls too, and everything arrives in order once both read."""
    listener = socket.create_server(("127.0.0.1", 0))
    with listener, running(start(tmp_path, *OFFLOAD)) as s, control(s, "tcp") as client:
        peer, data = spliced_pipe(s, client, listener)
        with peer, data:
            from_peer = os.urandom(SLOW_PAYLOAD)
            from_client = os.urandom(SLOW_PAYLOAD)
            sent_by_peer = stall(peer, from_peer, 2)
            sent_by_client = stall(data, from_client, 4)
            assert sent_by_peer < STALL_LIMIT and sent_by_client < STALL_LIMIT, (sent_by_peer, sent_by_client)
            received: list[bytes] = []
            reader = threading.Thread(target=lambda: received.append(recv_exactly(data, sent_by_peer, timeout=60)))
            reader.start()
            assert recv_exactly(peer, sent_by_client, timeout=60) == from_client[:sent_by_client]
            reader.join(timeout=60)
            assert received and received[0] == from_peer[:sent_by_peer]


def test_the_end_of_a_stream_waits_without_spinning(tmp_path):
    """The client ends its stream while the peer, with a small receive buffer, reads nothing:
    relayd waits for the kernel's queue to drain without busy-looping on the readable end,
    then the peer gets every byte and the end."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32768)
    with listener, running(start(tmp_path, *OFFLOAD)) as s, control(s, "tcp") as client:
        peer, data = spliced_pipe(s, client, listener, rcvbuf=32768)
        with peer, data:
            payload = os.urandom(4_150_000)
            sent = stall(data, payload, 2)
            data.shutdown(socket.SHUT_WR)
            before = cpu_seconds(s.proc.pid)
            time.sleep(3)
            used = cpu_seconds(s.proc.pid) - before
            assert used < 0.5, f"relayd used {used:.2f} s of CPU in 3 s waiting on a stalled end"
            assert recv_exactly(peer, sent, timeout=30) == payload[:sent]
            assert wait_eof(peer, WAIT)


@pytest.mark.parametrize("side", ["peer", "client"])
def test_a_reset_closes_both_sides(tmp_path, side):
    """A side that resets mid-transfer: the other side is closed, and the pipe's slots and
    sockets are let go (a new pipe on the same allocation is spliced and relays)."""
    listener = socket.create_server(("127.0.0.1", 0))
    with listener, running(start(tmp_path, *OFFLOAD)) as s, control(s, "tcp") as client:
        listener.settimeout(WAIT)
        address = listener.getsockname()
        client.create_permission(address)
        for round_ in range(2):
            cid = connection_id(TCPRelayClient.check(client.connect_peer(address), "Connect"))
            peer, _ = listener.accept()
            data, bound, _ = client.open_data_connection(cid)
            TCPRelayClient.check(bound, "ConnectionBind")
            wait_spliced(s, round_ + 1)
            payload = os.urandom(1 << 20)
            data.sendall(payload)
            assert recv_exactly(peer, len(payload), timeout=WAIT) == payload
            resetting, other = (peer, data) if side == "peer" else (data, peer)
            resetting.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            resetting.close()
            assert wait_eof(other, WAIT), "the other side outlived a reset"
            other.close()


def test_a_killed_relayd_leaves_no_pipe_open(tmp_path):
    """SIGKILL during a transfer in both directions: both the client and the peer see their
    connection end (the kernel drops a closed socket from the sockmap), within seconds."""
    listener = socket.create_server(("127.0.0.1", 0))
    server = start(tmp_path, *OFFLOAD)
    with listener, running(server) as s, control(s, "tcp") as client:
        peer, data = spliced_pipe(s, client, listener)
        with peer, data:
            stop = threading.Event()

            def pump(sock):
                chunk = os.urandom(65536)
                sock.settimeout(0.2)
                while not stop.is_set():
                    try:
                        sock.send(chunk)
                    except (TimeoutError, socket.timeout):
                        continue
                    except OSError:
                        return

            pumps = [threading.Thread(target=pump, args=(x,)) for x in (peer, data)]
            for p in pumps:
                p.start()
            time.sleep(0.5)
            os.kill(s.proc.pid, signal.SIGKILL)
            s.proc.wait(timeout=WAIT)
            try:
                assert wait_eof(peer, WAIT), "the peer's connection outlived relayd"
                assert wait_eof(data, WAIT), "the client's data connection outlived relayd"
            finally:
                stop.set()
                for p in pumps:
                    p.join(timeout=WAIT)
            s.proc = None  # already reaped: nothing to stop


def test_the_session_summary_counts_spliced_bytes_exactly(tmp_path, echo):
    """The allocation ends (Refresh 0) right after the transfer, before any periodic count: the
    end stops the kernel's redirects and counts what they carried, so the summary is exact."""
    with running(start(tmp_path, "--log-format=json", *OFFLOAD)) as s, control(s, "tcp") as client:
        data, _ = connected_pipe(client, echo)
        with data:
            wait_spliced(s, 1)
            payload = os.urandom(8 << 20)
            assert echo_through(data, payload, timeout=30) == payload
            TCPRelayClient.check(client.refresh(0), "Refresh")
            assert wait_eof(data, WAIT)
        deadline = time.monotonic() + WAIT
        deleted: list[dict] = []
        while not deleted and time.monotonic() < deadline:
            lines = [line for line in s.log_text().splitlines() if line.startswith("{")]  # libbpf writes plain lines
            deleted = [r for r in map(json.loads, lines) if r.get("event") == "allocation_deleted"]
            time.sleep(0.1)
        assert len(deleted) == 1, s.log_tail()
        assert (deleted[0]["bytes_to_peer"], deleted[0]["bytes_to_client"]) == (str(len(payload)), str(len(payload)))
        assert metric(s, "relayd_tcp_spliced_bytes_total", direction="to_peer") > 0


@pytest.mark.parametrize("case", ["tls", "max-bps", "offload-off"])
def test_pipes_the_kernel_cannot_carry_stay_in_user_space(tmp_path, echo, case):
    """A TLS data connection (no kTLS here), an allocation under `max-bps` (the program cannot
    pause a side) and `kernel-offload=off` relay in user space: nothing spliced, all relayed."""
    extra = {"tls": OFFLOAD, "max-bps": [*OFFLOAD, "--max-bps=10000000"], "offload-off": []}[case]
    with running(start(tmp_path, *extra)) as s, control(s, "tls" if case == "tls" else "tcp") as client:
        data, _ = connected_pipe(client, echo)
        with data:
            payload = os.urandom(1 << 20)
            assert echo_through(data, payload, timeout=30) == payload
            time.sleep(0.5)
            assert metric(s, "relayd_tcp_spliced_pipes_total") == 0
            assert metric(s, "relayd_tcp_relayed_bytes_total", direction="to_client") == len(payload)


def test_uclient_relays_client_to_client_through_spliced_pipes(tmp_path, processes):
    """turnutils_uclient -T with the splice on: every pair's pipes are spliced, nothing lost."""
    with running(start(tmp_path, *OFFLOAD)) as s:
        cmd = [_tool("turnutils_uclient"), "-T", "-m", "4", "-n", "200", "-l", "1000", "-z", "5",
               "-W", s.secret, "-u", "uclient", "-p", str(s.port), "-L", "127.0.0.1", s.host]
        proc, log = processes.start("turnutils_uclient", cmd)
        proc.wait(timeout=UCLIENT_TIMEOUT)
        output = log.read_text(errors="replace")
        assert proc.returncode == 0, output[-3000:]
        report = parse_report(output)
        assert report.send_msgs == report.recv_msgs == 800, output[-2000:]
        assert report.lost == 0 and report.send_dropped == 0
        pipes = metric(s, "relayd_tcp_spliced_pipes_total")
        bound = metric(s, "relayd_tcp_peer_connections_total", outcome="bound")
        assert bound >= 8 and pipes == bound, (pipes, bound)


def drop_in_capabilities() -> list[str]:
    """The capabilities conf/relayd-kernel-offload.conf grants, as setpriv names them."""
    text = (REPO_ROOT / "conf" / "relayd-kernel-offload.conf").read_text()
    ambient = re.search(r"^AmbientCapabilities=(.*)$", text, re.M).group(1).split()
    bounding = re.search(r"^CapabilityBoundingSet=(.*)$", text, re.M).group(1).split()
    assert sorted(ambient) == sorted(bounding)
    return [name.removeprefix("CAP_").lower() for name in ambient]


def run_as_nobody(capabilities: list[str], seconds: float) -> tuple[int | None, str]:
    """relayd with kernel-offload=on as user nobody holding only `capabilities`, from a copy of
    the binary and the BPF objects nobody can read: its exit status (None if it still ran after
    `seconds`, then stopped) and its output."""
    scratch = Path(tempfile.mkdtemp(prefix="relayd-caps."))
    try:
        scratch.chmod(0o755)
        binary = Path(RelayServer.default_binary("relayd"))
        shutil.copy(binary, scratch / "relayd")
        for name in ("relayd_fastpath.bpf.o", "relayd_tcp_splice.bpf.o"):
            shutil.copy(REPO_ROOT / ".build" / "bpf" / name, scratch / name)
        port, api = free_port(), free_port()
        (scratch / "relayd.conf").write_text(
            f"listening-ip=127.0.0.1\nlistening-port={port}\nrelay-ip=127.0.0.1\nmin-port=49000\nmax-port=49100\n"
            f"use-auth-secret\nstatic-auth-secret={'ab' * 16}\nrealm=example.org\nno-tls\nno-dtls\n"
            f"api-listening-ip=127.0.0.1\napi-listening-port={api}\nkernel-offload=on\nkernel-offload-interface=lo\n"
            f"kernel-offload-object={scratch / 'relayd_fastpath.bpf.o'}\nlog-file=stdout\n")
        caps = ",".join(f"+{c}" for c in capabilities)
        command = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", f"--inh-caps=-all,{caps}",
                   f"--ambient-caps=-all,{caps}", f"--bounding-set=-all,{caps}", str(scratch / "relayd"),
                   "-c", str(scratch / "relayd.conf")]
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            output, _ = proc.communicate(timeout=seconds)
            return proc.returncode, output.decode(errors="replace")
        except subprocess.TimeoutExpired:
            proc.terminate()
            try:
                output, _ = proc.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                output, _ = proc.communicate()
            return None, output.decode(errors="replace")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def test_the_units_drop_in_grants_what_kernel_offload_needs():
    """As an unprivileged user with exactly the capabilities of the unit's kernel-offload
    drop-in, relayd attaches the UDP fast path and the TCP splice program; with the unit's own
    set (CAP_NET_BIND_SERVICE) alone, kernel-offload=on refuses to start and says why."""
    granted = drop_in_capabilities()
    status, output = run_as_nobody(granted, seconds=4)
    assert status is None, output[-2000:]
    assert "event=fastpath_attached" in output and "event=tcp_splice_attached" in output, output[-2000:]
    status, output = run_as_nobody(["net_bind_service"], seconds=10)
    assert status not in (None, 0), output[-2000:]
    assert "kernel-offload" in output and "start_failed" in output, output[-2000:]
