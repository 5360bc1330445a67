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

import contextlib
import ctypes
import json
import os
import re
import shutil
import signal
import socket
import struct
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
    UCLIENT_TIMEOUT, WAIT, EchoHandler, EchoServer, connected_pipe, control, echo, echo_through, metric, rss_kib,
    send_rest_and_check, stall, start)
from test_uclient import _tool, parse_report
from udpcapture import checksum

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


def echoed_exactly(data: socket.socket, size: int) -> None:
    """`size` random bytes written to `data` while a second thread reads them back: all of them,
    in order."""
    payload = os.urandom(size)
    received: list[bytes] = []
    data.settimeout(60)
    reader = threading.Thread(target=lambda: received.append(recv_exactly(data, len(payload), timeout=60)))
    reader.start()
    data.sendall(payload)
    reader.join(timeout=60)
    assert received, "the reader did not finish"
    assert len(received[0]) == len(payload), f"{len(received[0])} of {len(payload)} bytes came back"
    if received[0] != payload:
        at = next(i for i in range(len(payload)) if received[0][i] != payload[i])
        raise AssertionError(f"the bytes differ from offset {at} on")


CLONE_NEWNET = 0x40000000
# Every TCP packet leaving a socket in the lossy namespace is lost with this probability (percent).
LOSS_PERCENT = int(os.environ.get("RELAYD_SPLICE_LOSS_PERCENT", "5"))
# Its loopback device's MTU: smaller than the default 64 KiB, so a TCP segment the kernel
# retransmits can span several that arrived before.
MTU = int(os.environ.get("RELAYD_SPLICE_MTU", "1500"))


def enter_namespace(descriptor: int) -> None:
    """Moves this thread (and what it starts from now on) into the network namespace open at
    `descriptor`."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(descriptor, CLONE_NEWNET) != 0:
        raise OSError(ctypes.get_errno(), "setns")


@contextlib.contextmanager
def own_namespace(loss_percent: int = 0, timestamps: bool = True):
    """A network namespace of this test's own, with this thread inside for the block: relayd,
    the peers and the client all run in it. Its loopback device has an MTU of MTU, loses
    `loss_percent` % of the TCP packets sent on it (nftables), and its TCP uses timestamps or
    not."""
    name = "relayd-splice-test"  # one at a time: the module's tests are serial
    remove_namespace(name)  # left by a run killed outright
    subprocess.run(["ip", "netns", "add", name], check=True, timeout=10)
    try:
        subprocess.run(["ip", "-n", name, "link", "set", "lo", "up", "mtu", str(MTU)], check=True, timeout=10)
        if loss_percent:
            rules = ("table inet lossy {\n chain out {\n  type filter hook output priority 0;\n"
                     f"  meta l4proto tcp numgen random mod 100 < {loss_percent} drop\n }}\n}}\n")
            subprocess.run(["ip", "netns", "exec", name, "nft", "-f", "-"], input=rules, text=True, check=True,
                           timeout=10)
        if not timestamps:
            subprocess.run(["ip", "netns", "exec", name, "sysctl", "-qw", "net.ipv4.tcp_timestamps=0"], check=True,
                           timeout=10)
        home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        own = os.open(f"/run/netns/{name}", os.O_RDONLY)
        try:
            enter_namespace(own)
            try:
                yield
            finally:
                enter_namespace(home)
        finally:
            os.close(own)
            os.close(home)
    finally:
        remove_namespace(name)


def remove_namespace(name: str) -> None:
    """Kills what still runs in namespace `name` (by PID), then deletes it."""
    listed = subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True, timeout=10)
    for pid in listed.stdout.split():
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), signal.SIGKILL)
    subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=10)


LOSSY_PIPES = 4


@pytest.mark.skipif(shutil.which("nft") is None or shutil.which("ip") is None, reason="needs nftables and iproute2")
def test_spliced_pipes_stay_exact_on_a_lossy_link(tmp_path):
    """Pipes through an echo server on a loopback device that loses LOSS_PERCENT % of TCP
    packets carry 24 MB each way: TCP retransmits, some retransmitted segments overlap bytes the
    spliced socket already has (docs/tcp-relay.md, "Retransmitted bytes"), and every byte still
    arrives once and in order, counted once. Without the program's trim, 3 runs of 3 failed."""
    with own_namespace(loss_percent=LOSS_PERCENT):
        server = EchoServer(("127.0.0.1", free_port()), EchoHandler)
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
        thread.start()
        try:
            with running(start(tmp_path, *OFFLOAD)) as s:
                size = 24 << 20
                for pipe in range(1, LOSSY_PIPES + 1):
                    with control(s, "tcp") as client:
                        data, _ = connected_pipe(client, server.server_address)
                        with data:
                            wait_spliced(s, pipe)
                            echoed_exactly(data, size)
                assert counted(s) == (LOSSY_PIPES * size, LOSSY_PIPES * size)
                page = scrape(s)
                assert value(page, "relayd_stream_connections_closed_total", reason="error") == 0
                print(f"{value(page, 'relayd_tcp_spliced_retransmitted_bytes_total'):.0f} retransmitted bytes "
                      "taken out")
        finally:
            server.shutdown()
            server.server_close()
            thread.join(timeout=5)


TCP_REPAIR, TCP_REPAIR_QUEUE, TCP_QUEUE_SEQ = 19, 20, 21
TCP_RECV_QUEUE, TCP_SEND_QUEUE, TCP_REPAIR_OFF_NO_WP = 1, 2, -1


def sequence_numbers(sock: socket.socket) -> tuple[int, int]:
    """The next sequence number `sock` sends and the next it expects, read in TCP repair mode
    (root), left without a window probe."""
    sock.setsockopt(socket.IPPROTO_TCP, TCP_REPAIR, 1)
    try:
        numbers = []
        for queue in (TCP_SEND_QUEUE, TCP_RECV_QUEUE):
            sock.setsockopt(socket.IPPROTO_TCP, TCP_REPAIR_QUEUE, queue)
            numbers.append(struct.unpack("I", sock.getsockopt(socket.IPPROTO_TCP, TCP_QUEUE_SEQ, 4))[0])
    finally:
        sock.setsockopt(socket.IPPROTO_TCP, TCP_REPAIR, TCP_REPAIR_OFF_NO_WP)
    return numbers[0], numbers[1]


def tcp_segment(source: tuple[str, int], destination: tuple[str, int], seq: int, ack: int, payload: bytes) -> bytes:
    """A TCP segment with ACK and PSH set and no options, its checksum over the IPv4 pseudo-header."""
    header = struct.pack("!HHIIBBHHH", source[1], destination[1], seq, ack, 5 << 4, 0x18, 65535, 0, 0)
    pseudo = (socket.inet_aton(source[0]) + socket.inet_aton(destination[0])
              + struct.pack("!BBH", 0, socket.IPPROTO_TCP, len(header) + len(payload)))
    total = checksum(pseudo + header + payload)
    return header[:16] + struct.pack("!H", total) + header[18:] + payload


OLD_BYTES = 1000
NEW_BYTES = 3000


def test_a_segment_overlapping_received_bytes_is_relayed_from_its_first_new_byte(tmp_path):
    """A segment sent again with OLD_BYTES the spliced socket already has in front of NEW_BYTES
    new ones (forged on a raw socket from the client's own sequence numbers, as a TCP sender's
    retransmission would be): the peer gets the new bytes once, the program counts exactly the
    old ones, and the client's own later copy of the new bytes, old by then, is dropped by TCP.
    Timestamps are off in the test's namespace, so the forged segment needs none."""
    listener = None
    with own_namespace(timestamps=False):
        listener = socket.create_server(("127.0.0.1", 0))
        with listener, running(start(tmp_path, *OFFLOAD)) as s, control(s, "tcp") as client:
            peer, data = spliced_pipe(s, client, listener)
            with peer, data:
                first = os.urandom(64 << 10)
                data.sendall(first)
                assert recv_exactly(peer, len(first), timeout=WAIT) == first
                time.sleep(0.2)  # the peer's acknowledgements are in
                sent, expected = sequence_numbers(data)
                new = os.urandom(NEW_BYTES)
                forged = tcp_segment(data.getsockname(), data.getpeername(), (sent - OLD_BYTES) % (1 << 32), expected,
                                     first[-OLD_BYTES:] + new)
                with socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_TCP) as raw:
                    raw.sendto(forged, ("127.0.0.1", 0))
                assert recv_exactly(peer, len(new), timeout=WAIT) == new
                deadline = time.monotonic() + WAIT
                while value(scrape(s), "relayd_tcp_spliced_retransmitted_bytes_total") < OLD_BYTES:
                    assert time.monotonic() < deadline, "the old bytes were not counted"
                    time.sleep(0.2)
                # The client's TCP now sends the same new bytes itself: the relay's socket has them.
                data.sendall(new)
                last = os.urandom(256 << 10)
                data.sendall(last)
                assert recv_exactly(peer, len(last), timeout=20) == last
                assert value(scrape(s), "relayd_tcp_spliced_retransmitted_bytes_total") == OLD_BYTES


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


STALL_PAYLOAD = 64 << 20


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
    """One side reads nothing for 3 s while the other writes 64 MB: the writer stalls after the
    socket buffers (a plain redirect would take it all into kernel memory), relayd does not
    grow, and then every byte arrives in order."""
    listener = socket.create_server(("127.0.0.1", 0))
    with listener, running(start(tmp_path, *OFFLOAD)) as s, control(s, "tcp") as client:
        peer, data = spliced_pipe(s, client, listener)
        with peer, data:
            sender, receiver = (data, peer) if slow == "peer" else (peer, data)
            payload = os.urandom(STALL_PAYLOAD)
            before = rss_kib(s.proc.pid)
            sent = stall(sender, payload, 3)
            grown = rss_kib(s.proc.pid) - before
            assert sent < 32 << 20, f"{sent >> 20} MB taken from a sender whose reader reads nothing"
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
            from_peer = os.urandom(STALL_PAYLOAD)
            from_client = os.urandom(STALL_PAYLOAD)
            sent_by_peer = stall(peer, from_peer, 2)
            sent_by_client = stall(data, from_client, 4)
            assert sent_by_peer < 32 << 20 and sent_by_client < 32 << 20, (sent_by_peer, sent_by_client)
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
