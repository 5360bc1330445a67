"""The server against coturn's own test client, turnutils_uclient.

uclient allocates, creates permissions, binds channels and sends -n messages of
-l bytes per client, paced every -z ms, then prints totals. The load is modest
(4 clients x 200 messages x 120 bytes, one message per client every 20 ms) so
that on loopback the loss is genuinely zero and the byte counts exact.

The realm is not a uclient option: uclient takes it from the server's 401.
"""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import time
from dataclasses import asdict, dataclass

import pytest

from conftest import _can_bind, free_port

CLIENTS = 4
MESSAGES = 200
LENGTH = 120
INTERVAL_MS = 20
UCLIENT_TIMEOUT = 120  # seconds; a normal run takes about 10
PEER_READY_TIMEOUT = 5.0


@dataclass
class UclientReport:
    send_msgs: int
    recv_msgs: int
    send_bytes: int
    recv_bytes: int
    lost: int
    send_dropped: int


REPORT_PATTERNS = {
    "msgs": re.compile(r"start_mclient: tot_send_msgs=(\d+), tot_recv_msgs=(\d+)\s*$", re.M),
    "bytes": re.compile(r"start_mclient: tot_send_bytes ~ (\d+), tot_recv_bytes ~ (\d+)\s*$", re.M),
    "lost": re.compile(r"Total lost packets (\d+) \([^)]*\), total send dropped (\d+)", re.M),
}


def parse_report(output: str) -> UclientReport:
    """The final totals uclient prints (the last match of each line)."""
    found = {}
    for name, pattern in REPORT_PATTERNS.items():
        matches = pattern.findall(output)
        if not matches:
            raise AssertionError(f"uclient printed no '{name}' totals:\n{output[-3000:]}")
        found[name] = tuple(int(x) for x in matches[-1])
    return UclientReport(
        send_msgs=found["msgs"][0], recv_msgs=found["msgs"][1],
        send_bytes=found["bytes"][0], recv_bytes=found["bytes"][1],
        lost=found["lost"][0], send_dropped=found["lost"][1],
    )


def test_parse_report_reads_the_final_totals():
    sample = (
        "7: : start_mclient: msz=4, tot_send_msgs=676, tot_recv_msgs=675, tot_send_bytes ~ 81120, tot_recv_bytes ~ 81000\n"
        "8: : start_mclient: tot_send_msgs=800, tot_recv_msgs=799\n"
        "8: : start_mclient: tot_send_bytes ~ 96000, tot_recv_bytes ~ 95880\n"
        "8: : Total lost packets 1 (0.125000%), total send dropped 0 (0.000000%)\n"
    )
    assert parse_report(sample) == UclientReport(800, 799, 96000, 95880, 1, 0)


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} not found (Debian package coturn; run scripts/install-test-deps.sh)")
    return path


def start_peer(processes) -> int:
    """turnutils_peer (a UDP echo server) on a free loopback port whose next port is free too:
    turnutils_uclient asks permission for the peer's port + 1 as well (its RTCP port, even with
    -c), and on a server's own listening port that is refused with 403 (docs/peer-policy.md)."""
    port = free_port()
    for _ in range(100):
        if _can_bind(port + 1):
            break
        port = free_port()
    proc, log = processes.start("turnutils_peer", [_tool("turnutils_peer"), "-L", "127.0.0.1", "-p", str(port)])
    # Ready when it echoes a datagram (bounded).
    deadline = time.monotonic() + PEER_READY_TIMEOUT
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        s.settimeout(0.2)
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"turnutils_peer exited with {proc.returncode}: {log.read_text(errors='replace')}")
            s.sendto(b"ping", ("127.0.0.1", port))
            try:
                if s.recvfrom(64)[0] == b"ping":
                    return port
            except socket.timeout:
                continue
    pytest.fail(f"turnutils_peer on port {port} did not echo within {PEER_READY_TIMEOUT} s")


def run_uclient(relay, processes, flags: list[str], peer_port: int | None) -> tuple[UclientReport, str]:
    cmd = [_tool("turnutils_uclient"), *flags,
           "-m", str(CLIENTS), "-n", str(MESSAGES), "-l", str(LENGTH), "-z", str(INTERVAL_MS),
           "-W", relay.secret, "-u", "uclient",
           "-p", str(relay.port), "-L", "127.0.0.1"]
    if peer_port is not None:
        cmd += ["-e", "127.0.0.1", "-r", str(peer_port)]
    cmd.append(relay.host)
    proc, log = processes.start("turnutils_uclient", cmd)
    try:
        proc.wait(timeout=UCLIENT_TIMEOUT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"turnutils_uclient did not finish within {UCLIENT_TIMEOUT} s:\n"
                    f"{log.read_text(errors='replace')[-3000:]}")
    output = log.read_text(errors="replace")
    assert proc.returncode == 0, f"turnutils_uclient exited with {proc.returncode}:\n{output[-3000:]}"
    return parse_report(output), output


SCENARIOS = {
    # (a) clients relay to each other's relayed addresses (ChannelData).
    "client-to-client": (["-c", "-y"], False),
    # (b) each client relays to turnutils_peer, which echoes back (ChannelData).
    "to-peer-channels": (["-c"], True),
    # (c) as (b) with Send/Data indications instead of channels.
    "to-peer-send-indications": (["-c", "-s"], True),
    # (d) as (b) with RTP/RTCP allocation pairs (EVEN-PORT + RESERVATION-TOKEN).
    "to-peer-rtcp-pairs": ([], True),
}


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_uclient_relays_without_loss(relay, processes, scenario, record_property):
    flags, with_peer = SCENARIOS[scenario]
    peer_port = start_peer(processes) if with_peer else None
    report, output = run_uclient(relay, processes, flags, peer_port)
    # A plain dict: pytest-xdist sends a worker's reports to the controller, and it serializes
    # only builtin types.
    record_property("uclient_report", asdict(report))
    print(f"uclient {scenario}: {report}")

    expected_msgs = CLIENTS * MESSAGES
    assert report.send_msgs == expected_msgs, output[-3000:]
    assert report.recv_msgs == report.send_msgs
    assert report.send_bytes == expected_msgs * LENGTH
    assert report.recv_bytes == report.send_bytes
    assert report.lost == 0
    assert report.send_dropped == 0
