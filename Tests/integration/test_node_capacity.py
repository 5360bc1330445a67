"""Node capacity, the suite's version (docs/benchmark.md, "Node capacity"): one relayd holds 5,000
idle UDP allocations spread over three relay addresses, in a network namespace of its own
(where 127.0.0.2 and 127.0.0.3 can be added to its loopback), made and refreshed by relay-bench.
Every allocation holds one relay socket and nothing more: the process's descriptors and memory
grow by what docs/benchmark.md measures, and all of it goes when the allocations end. The
15,000-allocation figures come from the same steps run by hand (the docs give the command)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from conftest import RelayServer, server_kind
from test_relay_bench import bench_binary

pytestmark = [
    pytest.mark.skipif(server_kind() != "relayd", reason="relayd's own capacity"),
    pytest.mark.skipif(os.geteuid() != 0, reason="a network namespace needs root"),
]

ALLOCATIONS = 5000
RELAY_IPS = ("127.0.0.1", "127.0.0.2", "127.0.0.3")
SECRET = "node-capacity-secret-0123456789"


def run(*cmd: str) -> subprocess.CompletedProcess:
    return subprocess.run(list(cmd), capture_output=True, text=True, timeout=30, check=True)


def status(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"{field} not in /proc/{pid}/status")


def descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


@pytest.fixture
def namespace():
    name = f"relayd-cap-{os.getpid()}"
    run("ip", "netns", "add", name)
    try:
        run("ip", "-n", name, "link", "set", "lo", "up")
        for ip in RELAY_IPS[1:]:
            run("ip", "-n", name, "addr", "add", f"{ip}/8", "dev", "lo")
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=30)


def test_five_thousand_idle_allocations_on_three_relay_addresses(namespace, tmp_path):
    conf = tmp_path / "relayd.conf"
    conf.write_text("")
    log = tmp_path / "relayd.log"
    args = [RelayServer.default_binary("relayd"), "-c", str(conf), "--listening-ip=127.0.0.1",
            "--listening-port=3478", *[f"--relay-ip={ip}" for ip in RELAY_IPS], "--min-port=40000",
            "--max-port=41999", "--use-auth-secret", f"--static-auth-secret={SECRET}", "--no-tcp", "--no-tls",
            "--api-listening-ip=127.0.0.1", "--api-listening-port=8080", "--relay-threads=2", "--log-level=warning"]
    with open(log, "wb") as out:
        relayd = subprocess.Popen(["ip", "netns", "exec", namespace, *args], stdout=out, stderr=subprocess.STDOUT)
    bench = None
    try:
        deadline = time.monotonic() + 10
        while "3478" not in run("ip", "netns", "exec", namespace, "ss", "-uln").stdout:
            assert relayd.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        time.sleep(0.5)
        rss0, fds0 = status(relayd.pid, "VmRSS"), descriptors(relayd.pid)
        ready = tmp_path / "ready"
        bench = subprocess.Popen(
            ["ip", "netns", "exec", namespace, bench_binary(), "--server", "127.0.0.1:3478", "--secret", SECRET,
             "--idle-allocations", str(ALLOCATIONS), "--hold", "6", "--ready-file", str(ready)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 90
        while not ready.exists():
            assert bench.poll() is None and time.monotonic() < deadline, bench.stderr.read() if bench.stderr else ""
            time.sleep(0.2)
        time.sleep(1.5)
        rss1, fds1 = status(relayd.pid, "VmRSS"), descriptors(relayd.pid)
        sockets = run("ip", "netns", "exec", namespace, "ss", "-uanH").stdout
        by_address = {ip: len(re.findall(rf"\s{re.escape(ip)}:4[01]\d{{3}}\s", sockets)) for ip in RELAY_IPS}
        out, err = bench.communicate(timeout=60)
        result = json.loads(next(line for line in out.splitlines() if line.startswith("{")))
        per_allocation = (rss1 - rss0) / ALLOCATIONS
        print(f"node capacity: {ALLOCATIONS} held, {per_allocation:.2f} KiB of the process each (debug build), "
              f"descriptors {fds0} -> {fds1}, relay sockets by address {by_address}")
        assert result["held"] == ALLOCATIONS and result["release_ok"] == ALLOCATIONS, result
        # One relay socket an allocation, and nothing else.
        assert ALLOCATIONS <= fds1 - fds0 <= ALLOCATIONS + 16
        # Spread over every relay address.
        assert sum(by_address.values()) >= ALLOCATIONS and min(by_address.values()) >= ALLOCATIONS // 5, by_address
        # docs/benchmark.md measures 0.95 KiB (release build, 15,000) and this test 0.97 KiB
        # (debug); before relay sockets were read from the first permission, the Allocate answer
        # written again and the 5-tuple index made smaller, it was 1.7 KiB, over this bound.
        assert per_allocation < 1.25, per_allocation
        # Released: the descriptors are back.
        deadline = time.monotonic() + 5
        while descriptors(relayd.pid) > fds0 + 8 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert descriptors(relayd.pid) <= fds0 + 8
    finally:
        for proc in (bench, relayd):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
