"""The kernel fast path (docs/kernel-fast-path.md): relayd with `kernel-offload` on loopback
attaches its BPF program to `lo`, installs each channel uclient binds, and the kernel relays the
ChannelData to turnutils_peer and the peer's echoes back. Nothing is lost, every packet is
counted in relayd's metrics, and the kernel relayed every one of them, not relayd.
relayd only (coturn has no such path); needs root (the program is loaded into the kernel)."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time

import pytest

from conftest import RelayServer, free_port, running, server_kind
from test_uclient import CLIENTS, LENGTH, MESSAGES, run_uclient, start_peer

pytestmark = [
    # Attaches relayd's program to the host's `lo`, which every other test's traffic crosses and
    # which another relayd with the fast path on `lo` would share (Tests/integration/README.md).
    pytest.mark.serial,
    pytest.mark.skipif(server_kind() != "relayd", reason="relayd's own kernel fast path"),
    pytest.mark.skipif(os.geteuid() != 0, reason="loading a BPF program needs root"),
]

SAMPLE = re.compile(r'^(relayd_[a-z_]+)(?:\{direction="([a-z_]+)"\})? (\d+)$', re.M)


def counters(server: RelayServer) -> dict[tuple[str, str | None], int]:
    resp = server.http("GET", "/metrics")
    assert resp.status == 200, resp
    return {(name, direction or None): int(value) for name, direction, value in SAMPLE.findall(resp.body.decode())}


def test_channels_are_relayed_in_the_kernel_without_loss(tmp_path, processes):
    server = RelayServer("relayd", tmp_path, extra_args=["--kernel-offload=on", "--kernel-offload-interface=lo"])
    with running(server):
        assert "kernel fast path attached" in server.log_text()
        peer = start_peer(processes)
        report, output = run_uclient(server, processes, ["-c"], peer)
        expected = CLIENTS * MESSAGES
        assert report.send_msgs == expected, output[-3000:]
        assert report.recv_msgs == expected
        assert report.recv_bytes == expected * LENGTH
        assert report.lost == 0
        # The loops collect the kernel's counters once a second and publish every 250 ms.
        time.sleep(2.5)
        c = counters(server)
    kernel_to_peer = c[("relayd_offloaded_packets_total", "client_to_peer")]
    kernel_to_client = c[("relayd_offloaded_packets_total", "peer_to_client")]
    to_peer = c[("relayd_relayed_packets_total", "client_to_peer")]
    to_client = c[("relayd_relayed_packets_total", "peer_to_client")]
    print(f"relayed to peer {to_peer} (kernel {kernel_to_peer}), to client {to_client} (kernel {kernel_to_client})")
    # Every message went out and came back once, wherever it was relayed.
    assert to_peer == expected and to_client == expected
    # The kernel relayed all of them: a channel's route is in before its ChannelBind is answered.
    assert kernel_to_peer == expected
    assert kernel_to_client == expected
    assert c[("relayd_offloaded_bytes_total", "client_to_peer")] == kernel_to_peer * LENGTH


def test_without_the_setting_nothing_is_relayed_in_the_kernel(relay, processes):
    peer = start_peer(processes)
    report, _ = run_uclient(relay, processes, ["-c"], peer)
    assert report.lost == 0
    c = counters(relay)
    assert c[("relayd_offloaded_packets_total", "client_to_peer")] == 0
    assert c[("relayd_offloaded_channels", None)] == 0


def test_auto_falls_back_to_user_space_and_says_why(tmp_path, processes):
    server = RelayServer("relayd", tmp_path, extra_args=[
        "--kernel-offload=auto", f"--kernel-offload-object={tmp_path / 'missing.bpf.o'}"])
    with running(server):
        assert "offload_unavailable" in server.log_text() or "kernel offload not available" in server.log_text()
        peer = start_peer(processes)
        report, _ = run_uclient(server, processes, ["-c"], peer)
        assert report.lost == 0
        c = counters(server)
        assert c[("relayd_offload_enabled", None)] == 0
        assert c[("relayd_offloaded_packets_total", "client_to_peer")] == 0


def test_on_refuses_to_start_without_the_program(tmp_path):
    conf = tmp_path / "relayd.conf"
    conf.write_text("no-auth\n")
    missing = tmp_path / "missing.bpf.o"
    result = subprocess.run([RelayServer.default_binary("relayd"), "-c", str(conf), "--listening-ip=127.0.0.1",
                             f"--listening-port={free_port()}", "--no-tcp", "--no-tls",
                             f"--api-listening-port={free_port()}", "--api-listening-ip=127.0.0.1",
                             "--kernel-offload=on", f"--kernel-offload-object={missing}"],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode != 0
    assert "kernel-offload" in result.stderr + result.stdout and str(missing) in result.stderr + result.stdout


def test_check_config_says_whether_offload_would_work(tmp_path):
    conf = tmp_path / "relayd.conf"
    conf.write_text("no-auth\nkernel-offload=on\n")
    binary = RelayServer.default_binary("relayd")
    works = subprocess.run([binary, "check-config", "-c", str(conf)], capture_output=True, text=True, timeout=30)
    assert works.returncode == 0, works.stderr
    assert "kernel-offload: would work here" in works.stdout
    broken = subprocess.run([binary, "check-config", "-c", str(conf), f"--kernel-offload-object={tmp_path / 'x.o'}"],
                            capture_output=True, text=True, timeout=30)
    assert "kernel-offload: would not work here: no BPF object at" in broken.stdout


def test_an_offloaded_channel_stops_relaying_within_a_second_of_its_permission(tmp_path):
    """The entry carries the permission's expiry and the program checks it itself: one second
    after a 3 s permission lapsed (not refreshed), ChannelData reaches the peer no more, from the
    kernel or from relayd. Refresh 0 then removes the routes."""
    from stunclient import TurnClient

    server = RelayServer("relayd", tmp_path, extra_args=[
        "--kernel-offload=on", "--kernel-offload-interface=lo", "--permission-lifetime=3"])
    with running(server), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as peer:
        peer.bind(("127.0.0.1", 0))
        peer.settimeout(1.0)
        with TurnClient(server.address) as client:
            client.allocate(*server.credentials("expiry"))
            client.channel_bind(0x4001, peer.getsockname())
            bound = time.monotonic()
            client.send_channel_data(0x4001, b"before the lifetime")
            assert peer.recvfrom(2048)[0] == b"before the lifetime"
            # relayd's clock counts whole seconds: the permission ends 2 to 3 s after the bind.
            time.sleep(max(0.0, bound + 4.0 - time.monotonic()))
            client.send_channel_data(0x4001, b"after the lifetime")
            peer.settimeout(0.5)
            with pytest.raises(socket.timeout):
                peer.recvfrom(2048)
            time.sleep(1.5)
            c = counters(server)
            assert c[("relayd_offloaded_packets_total", "client_to_peer")] == 1
            assert c[("relayd_offloaded_channels", None)] == 0
            client.refresh(0)


def test_a_killed_relayd_leaves_nothing_relaying(tmp_path):
    """The program hangs on a tcx link owned by relayd's process: SIGKILL (no shutdown code
    runs) takes it off the interface, so a channel the kernel relayed a moment ago relays
    nothing more. A program left attached would keep relaying it until the route's expiry."""
    from stunclient import TurnClient

    server = RelayServer("relayd", tmp_path, extra_args=["--kernel-offload=on", "--kernel-offload-interface=lo"])
    server.start()
    try:
        assert "attach=tcx" in server.log_text(), server.log_tail()
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as peer, TurnClient(server.address) as client:
            peer.bind(("127.0.0.1", 0))
            peer.settimeout(1.0)
            client.allocate(*server.credentials("killed"))
            client.channel_bind(0x4001, peer.getsockname())
            client.send_channel_data(0x4001, b"while relayd runs")
            assert peer.recvfrom(2048)[0] == b"while relayd runs"
            server.proc.kill()
            server.proc.wait(timeout=10)
            client.send_channel_data(0x4001, b"after SIGKILL")
            peer.settimeout(0.5)
            with pytest.raises(socket.timeout):
                peer.recvfrom(2048)
    finally:
        if server.proc is not None and server.proc.poll() is None:
            server.stop()


def test_offloaded_channels_keep_relaying_through_a_live_upgrade(tmp_path):
    """The heir loads its program over the running relayd's maps and swaps it into its tcx link
    (docs/live-upgrade.md, "Kernel fast path"): a channel the kernel relays loses nothing through
    the upgrade, and the kernel still relays it once the old process has exited."""
    from floods import metric
    from lifecycle import allocate_with_channel, round_trip, wait_for_log
    from stunclient import recv_from
    from test_live_upgrade import Sender, heir_pid, stop_both

    server = RelayServer(
        "relayd", tmp_path, extra_args=["--kernel-offload=on", "--kernel-offload-interface=lo", "--relay-threads=2"])
    server.start()
    heir = None
    client = peer = None
    try:
        client, peer = allocate_with_channel(server, server.secret, user="offloaded")
        round_trip(client, peer, 0x4000, b"warm up")
        peer.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        sender = Sender(client, 0x4000)
        sender.start()
        time.sleep(0.5)
        server.proc.send_signal(signal.SIGUSR2)
        heir = heir_pid(server)
        wait_for_log(server, "upgrade_took_over")
        assert "fastpath_taken_over" in server.log_text(), server.log_tail()
        time.sleep(0.5)
        lost = sender.lost(peer)
        print(f"kernel fast path through a live upgrade: {sender.sent} sent, {lost} lost")
        assert lost == 0, f"{lost} of {sender.sent} offloaded datagrams were lost in the upgrade"
        assert server.proc.wait(timeout=10) == 0, server.log_tail()

        # The old process and its descriptors are gone: the heir's program relays on.
        time.sleep(2.5)
        before = metric(server, "relayd_offloaded_packets_total", direction="client_to_peer")
        for i in range(50):
            client.send_channel_data(0x4000, b"after %d" % i)
        got = [recv_from(peer, 2.0) for _ in range(50)]
        assert all(g is not None for g in got), "the channel stopped relaying after the old process exited"
        time.sleep(2.5)
        after = metric(server, "relayd_offloaded_packets_total", direction="client_to_peer")
        assert after - before >= 50, (before, after)
    finally:
        if client is not None:
            client.close()
            peer.close()
        problems = stop_both(server, heir)
    assert not problems, problems


def test_usage_counts_what_the_kernel_relayed(tmp_path):
    """Usage accounting (docs/usage.md) with the fast path on: the kernel's share is in it."""
    from test_usage import OPERATOR, by_user, exchange_udp, udp_echo_peer, usage
    from stunclient import TurnClient
    server = RelayServer("relayd", tmp_path, extra_args=[
        "--kernel-offload=on", "--kernel-offload-interface=lo", f"--api-key=ops:{OPERATOR}:admin"])
    peer, stop = udp_echo_peer()
    try:
        with running(server) as s:
            with TurnClient(s.address, bind_host="127.0.0.1") as client:
                client.allocate(*s.credentials("kim"))
                assert exchange_udp(client, peer.getsockname(), 60, 200) == 60
                time.sleep(1.5)
                c = counters(s)
                assert c[("relayd_offloaded_packets_total", "client_to_peer")] >= 59, c
                client.refresh(0)
            want = {"packets_to_peer": 60, "bytes_to_peer": 12_000, "packets_to_client": 60,
                    "bytes_to_client": 12_000, "allocations": 1, "unused_allocations": 0}
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                got = by_user(usage(s)).get(("default", "kim"), {})
                if all(got.get(k) == v for k, v in want.items()):
                    break
                time.sleep(0.1)
            assert all(got.get(k) == v for k, v in want.items()), got
    finally:
        stop.set()
        peer.close()
