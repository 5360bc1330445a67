"""The load generator (`relay-bench`), run briefly against the server under test.

scripts/bench.sh is not part of the test suite (speed is measured there, side by side with
coturn, never by timed tests), so without these tests nothing would notice a load generator
that no longer completes the auth dance, miscounts what it receives or breaks one of its
modes. Each mode runs for about a second at a low rate, and every count it reports is checked
against what must hold on loopback: every setup transaction succeeds, nothing is corrupted
or doubled, the relayed-packet count matches what was received, and the server's CPU time is
sampled. Run with RELAY_SERVER=coturn, the same tests check the bench against the reference.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from conftest import REPO_ROOT, RelayServer, running, server_kind

PAIRS = 4
RATE = 1000
DURATION = 1.0
RUN_TIMEOUT = 60

# A load generator whose CPU figures are checked: alone (Tests/integration/README.md).
pytestmark = pytest.mark.serial


def bench_binary() -> str:
    """relay-bench from the same build as relayd (RELAY_BENCH_BIN overrides)."""
    explicit = os.environ.get("RELAY_BENCH_BIN")
    if explicit:
        path = Path(explicit)
    else:
        relayd = Path(os.environ.get("RELAYD_BIN", ".build/debug/relayd"))
        path = relayd.parent / "relay-bench"
    if not path.is_absolute():
        path = REPO_ROOT / path
    if not path.exists():
        pytest.fail(f"missing prerequisite: relay-bench at {path} (built by 'swift build', "
                    "or set RELAY_BENCH_BIN)", pytrace=False)
    return str(path)


def run_bench(server: RelayServer, *args: str, port: int | None = None) -> dict:
    """Runs relay-bench against `server` and returns its JSON line (failing on a non-zero exit)."""
    cmd = [bench_binary(), "--server", f"{server.host}:{port or server.port}", "--secret", server.secret,
           "--realm", server.realm, *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT)
    assert proc.returncode == 0, f"{' '.join(cmd)}\nexit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert len(lines) == 1, proc.stdout
    return json.loads(lines[0])


def check_traffic(result: dict, server: RelayServer) -> None:
    """What a short paced run at a low rate on loopback must report."""
    clients = 2 * PAIRS
    assert result["setup_ok"] == clients and result["setup_failed"] == 0, result["setup_failures"]
    assert result["active_clients"] == clients
    # The sender keeps to its rate: the window holds about RATE x DURATION messages.
    assert 0.8 * RATE * DURATION <= result["sent"] <= 1.2 * RATE * DURATION, result
    assert result["send_refused"] == 0
    assert result["corrupted"] == 0 and result["duplicates"] == 0
    assert result["received"] + result["lost"] == result["sent"]
    assert result["loss_pct"] <= 0.5, result  # loopback at 1,000 msg/s: a loss means a broken path
    # Each message crosses the relay twice (client to client, or out to the echo peer and back).
    assert result["relayed_packets"] == 2 * result["received"]
    assert 0 < result["lat_p50_us"] <= result["lat_p99_us"] <= result["lat_max_us"]
    if result["server_cpu_s"] is not None:
        assert result["server_cpu_s"] >= 0
    assert result["release_ok"] == clients and result["release_failed"] == 0


@pytest.mark.parametrize("pattern,framing", [
    ("client-to-client", []),
    ("client-to-client", ["--send-indications"]),
    ("external-peer", []),
    ("external-peer", ["--send-indications"]),
])
def test_udp_traffic_is_counted_whole(relay, pattern, framing):
    result = run_bench(relay, "--pattern", pattern, *framing, "--pairs", str(PAIRS), "--rate", str(RATE),
                       "--duration", str(DURATION), "--warmup", "0.3", "--server-pid", str(relay.proc.pid))
    assert result["transport"] == "udp" and result["pattern"] == pattern
    assert result["framing"] == ("send-indication" if framing else "channel-data")
    check_traffic(result, relay)
    # Sampled from /proc/PID/stat of the server, which did relay the packets.
    assert result["server_cpu_s"] is not None and result["server_cpu_s_per_mpkt"] is not None
    if pattern == "external-peer":
        # The echo peer's own cost over the window (the bench table's floor row): it echoed
        # every message that came back, and its thread's CPU clock was read.
        assert result["echoed"] >= result["received"]
        assert result["echo_cpu_s"] is not None and result["echo_cpu_s"] > 0
        assert result["echo_cpu_s_per_mpkt"] is not None and result["echo_cpu_s_per_mpkt"] > 0


@pytest.mark.parametrize("transport", ["tcp", "tls"])
def test_stream_traffic_is_counted_whole(tmp_path, transport):
    server = RelayServer(server_kind(), tmp_path, streams=True)
    with running(server) as s:
        result = run_bench(s, "--transport", transport, "--pairs", str(PAIRS), "--rate", str(RATE),
                           "--duration", str(DURATION), "--warmup", "0.3", "--server-pid", str(s.proc.pid),
                           port=s.tls_port if transport == "tls" else s.port)
    assert result["transport"] == transport
    check_traffic(result, server)


# The fixture's relay range has 200 ports: the allocation modes stay well inside it.
def test_setup_rate_mode_allocates_and_releases_every_client(relay):
    result = run_bench(relay, "--setup-only", "--allocations", "100", "--window", "32")
    assert result["mode"] == "setup"
    assert result["setup_ok"] == 100 and result["setup_failed"] == 0, result["setup_failures"]
    assert result["setup_rate"] > 0
    assert result["release_ok"] == 100 and result["release_failed"] == 0


def test_idle_mode_holds_its_allocations_until_it_releases_them(relay, tmp_path):
    ready = tmp_path / "ready"
    proc = subprocess.Popen(
        [bench_binary(), "--server", f"{relay.host}:{relay.port}", "--secret", relay.secret,
         "--idle-allocations", "100", "--hold", "3", "--ready-file", str(ready)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        while not ready.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
        assert ready.exists(), "relay-bench never wrote its ready file"
        if relay.kind == "relayd":
            # The loops publish their gauges every 250 ms.
            deadline = time.monotonic() + 2
            held = allocations_gauge(relay)
            while held < 100 and time.monotonic() < deadline:
                time.sleep(0.1)
                held = allocations_gauge(relay)
            assert held >= 100, f"relayd reports {held} allocations while the bench holds 100"
        out, err = proc.communicate(timeout=RUN_TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    result = json.loads(next(line for line in out.splitlines() if line.startswith("{")))
    assert result["mode"] == "idle"
    assert result["setup_ok"] == 100 and result["refresh_ok"] == 100 and result["held"] == 100
    assert result["release_ok"] == 100 and result["release_failed"] == 0


def allocations_gauge(server: RelayServer) -> float:
    """The sum of relayd's live-allocation gauges (one series per transport and family)."""
    resp = server.http("GET", "/metrics")
    assert resp.status == 200, resp
    total = 0.0
    seen = False
    for line in resp.body.decode().splitlines():
        if line.startswith("relayd_allocations_active{"):
            total += float(line.split()[-1])
            seen = True
    assert seen, "no relayd_allocations_active in /metrics"
    return total
