"""Retransmitted segments through RFC 6062 pipes spliced in the kernel (docs/tcp-relay.md,
"Retransmitted bytes"). A TCP sender may send again a segment that overlaps bytes the receiver
already has; the kernel queues it whole, and the sockmap's reader hands all of it to relayd's
program, which takes the old bytes out. One test forges such a segment deterministically, the
other runs spliced pipes over a loopback device that loses packets. Each runs in a network
namespace of its own.

relayd only, as root (the program is loaded into the kernel; the namespace, nftables and TCP
repair mode need root too); serial, because the namespace has one fixed name (so a run killed
outright leaves nothing behind that the next does not remove) and the lossy test moves 200 MB
through the kernel on a 2-core machine.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import socket
import struct
import subprocess
import threading
import time

import pytest

from conftest import free_port, running, server_kind
from tcprelay import recv_exactly
from test_http_metrics import scrape, value
from test_tcp_relay import WAIT, EchoHandler, EchoServer, connected_pipe, control, start
from test_tcp_splice import OFFLOAD, counted, spliced_pipe, wait_spliced
from udpcapture import checksum

pytestmark = [
    pytest.mark.serial,
    pytest.mark.skipif(server_kind() != "relayd", reason="relayd's own sockmap program"),
    pytest.mark.skipif(os.geteuid() != 0, reason="loading a BPF program needs root"),
    pytest.mark.skipif(shutil.which("nft") is None or shutil.which("ip") is None, reason="needs nftables and iproute2"),
]


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
        if loss_percent:
            # A new connection's first retransmission timeout comes from the round-trip time TCP
            # cached for its destination (127.0.0.1 here), which the bulk pipes on the lossy link
            # inflate (to 0.3 s, with 0.5 s variance, after two pipes on an idle machine: a first
            # resend 0.9 s after the loss, and longer on a busy one). Without the cache, a control
            # connection's resends start at 0.2 s, as on a link that carried nothing before.
            subprocess.run(["ip", "netns", "exec", name, "sysctl", "-qw", "net.ipv4.tcp_no_metrics_save=1"],
                           check=True, timeout=10)
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
# How long a control transaction on the lossy link (an Allocate, or a data connection's
# ConnectionBind) may wait for an answer TCP may have to resend: after 0.2 s, then 0.4 s,
# 0.8 s, ..., and a lost SYN after 1 s.
LOSSY_TIMEOUT = 15.0


def test_spliced_pipes_stay_exact_on_a_lossy_link(tmp_path):
    """Pipes through an echo server on a loopback device that loses LOSS_PERCENT % of TCP
    packets carry 24 MB each way: TCP retransmits, some retransmitted segments overlap bytes the
    spliced socket already has (docs/tcp-relay.md, "Retransmitted bytes"), and every byte still
    arrives once and in order, counted once. Without the program's trim, 3 runs of 3 failed;
    with a trim of at most 69,615 bytes, about one run in 90 closed a pipe on a segment the
    kernel handed over again, grown (same section), and the pipe closed with reason `error`."""
    with own_namespace(loss_percent=LOSS_PERCENT):
        server = EchoServer(("127.0.0.1", free_port()), EchoHandler)
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
        thread.start()
        try:
            with running(start(tmp_path, *OFFLOAD)) as s:
                size = 24 << 20
                for pipe in range(1, LOSSY_PIPES + 1):
                    with control(s, "tcp", timeout=LOSSY_TIMEOUT) as client:
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
