"""RFC 6062 relaying's cost (docs/benchmark.md, "TCP relaying"), on loopback, driven by
scripts/bench-tcp-relay.sh.

A client allocates with REQUESTED-TRANSPORT TCP over a plain TCP control connection, Connects to
a local peer and binds a data connection (Tests/integration/tcprelay.py); then each of STREAMS
pipes carries MEGABYTES both ways at once (the client writes to the peer while the peer writes
to the client, 1 MiB writes and reads). Measured per configuration, over the transfer only:
throughput, the server process's CPU per relayed MiB (utime + stime, /proc/PID/stat), and the
whole system's busy CPU per relayed MiB (/proc/stat): when the kernel relays, its work runs in
softirq and kernel workers, outside the server's own time, so the whole system is the fair
figure (it includes this driver's own reads and writes, the same for every configuration).

Configurations: relayd on its defaults (pipes in user space); relayd with kernel-offload=on
(pipes spliced in the sockmap); coturn (Debian's); HAProxy in TCP mode with `option splice-auto`
between the client and the peer, no TURN at all: the floor a kernel splice can aim at. Each runs
REPS times, alternating; the table prints medians and the ratio to coturn, the share of relayd's
bytes the kernel moved (relayd_tcp_spliced_bytes_total), and the runs that stalled (a side got
nothing for 120 s: coturn's pipes sometimes stop when both directions are saturated). Every
process is stopped by PID."""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "Tests" / "integration"))

from conftest import RelayServer, free_port, running  # noqa: E402
from tcprelay import TCPRelayClient, connection_id  # noqa: E402

CHUNK = 1 << 20
CONFIGS = ["relayd", "relayd-splice", "coturn", "haproxy"]


def cpu_ticks(pid: int) -> int:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def system_busy() -> int:
    fields = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    return sum(fields) - fields[3] - fields[4]  # less idle and iowait


def pump(sock: socket.socket, total: int, errors: list[str], rate: float) -> None:
    """Writes `total` bytes, at most `rate` MiB/s if given (0: as fast as the socket takes)."""
    chunk = os.urandom(CHUNK)
    sent = 0
    started = time.monotonic()
    try:
        while sent < total:
            sock.sendall(chunk[: min(CHUNK, total - sent)])
            sent += min(CHUNK, total - sent)
            if rate:
                ahead = sent / (rate * (1 << 20)) - (time.monotonic() - started)
                if ahead > 0:
                    time.sleep(ahead)
    except OSError as error:
        errors.append(f"send: {error}")


def drain(sock: socket.socket, total: int, errors: list[str]) -> None:
    buffer = bytearray(CHUNK)
    got = 0
    try:
        while got < total:
            count = sock.recv_into(buffer)
            if count == 0:
                errors.append(f"EOF after {got} of {total}")
                return
            got += count
    except OSError as error:
        errors.append(f"recv: {error}")


def transfer(pairs: list[tuple[socket.socket, socket.socket]], per_direction: int, pid: int | None,
             rate: float) -> dict:
    errors: list[str] = []
    threads = []
    for client, peer in pairs:
        client.settimeout(120)
        peer.settimeout(120)
        for sender, receiver in ((client, peer), (peer, client)):
            threads.append(threading.Thread(target=pump, args=(sender, per_direction, errors, rate)))
            threads.append(threading.Thread(target=drain, args=(receiver, per_direction, errors)))
    hz = os.sysconf("SC_CLK_TCK")
    process_before = cpu_ticks(pid) if pid else 0
    system_before = system_busy()
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    elapsed = time.monotonic() - started
    if errors:
        return {"failed": "; ".join(errors[:2])}
    mib = 2 * per_direction * len(pairs) / (1 << 20)
    return {
        "mib_per_s": mib / elapsed,
        "process_ms_per_mib": (cpu_ticks(pid) - process_before) * 1000 / hz / mib if pid else None,
        "system_ms_per_mib": (system_busy() - system_before) * 1000 / hz / mib,
    }


def turn_pairs(server: RelayServer, listeners: list[socket.socket]) -> tuple[TCPRelayClient, list]:
    """One pipe per listener (RFC 6062 §5.2: one connection per peer address)."""
    client = TCPRelayClient(server.address, timeout=10)
    client.allocate(*server.credentials(user="bench"))
    client.create_permission(listeners[0].getsockname())
    pairs = []
    for listener in listeners:
        cid = connection_id(TCPRelayClient.check(client.connect_peer(listener.getsockname()), "Connect"))
        peer, _ = listener.accept()
        data, bound, rest = client.open_data_connection(cid)
        TCPRelayClient.check(bound, "ConnectionBind")
        assert rest == b""
        pairs.append((data, peer))
    return client, pairs


def run_turn(kind: str, workdir: Path, streams: int, per_direction: int, splice: bool, rate: float) -> dict:
    extra = ["--log-level=notice", "--relay-threads=2"] if kind == "relayd" else []
    if splice:
        extra += ["--kernel-offload=on", "--kernel-offload-interface=lo"]
    server = RelayServer(kind, workdir, streams=True, extra_args=extra, suite_limits=False)
    listeners = [socket.create_server(("127.0.0.1", 0)) for _ in range(streams)]
    for listener in listeners:
        listener.settimeout(10)
    with running(server) as s:
        client, pairs = turn_pairs(s, listeners)
        try:
            time.sleep(0.5)  # relayd splices a pipe once its ConnectionBind answer is written
            result = transfer(pairs, per_direction, s.proc.pid, rate)
            if kind == "relayd" and "failed" not in result:
                # What share of the bytes the kernel moved (docs/tcp-relay.md, "Counting").
                time.sleep(1.3)
                page = s.http("GET", "/metrics").body.decode()
                total = spliced = 0.0
                for line in page.splitlines():
                    if line.startswith("relayd_tcp_relayed_bytes_total{"):
                        total += float(line.split()[-1])
                    elif line.startswith("relayd_tcp_spliced_bytes_total{"):
                        spliced += float(line.split()[-1])
                result["spliced_share"] = spliced / total if total else 0.0
            return result
        finally:
            for a, b in pairs:
                a.close()
                b.close()
            client.close()
            for listener in listeners:
                listener.close()


def run_haproxy(workdir: Path, streams: int, per_direction: int, rate: float) -> dict:
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(10)
    port = free_port()
    config = workdir / "haproxy.cfg"
    config.write_text(
        "global\n    maxconn 1000\n"
        "defaults\n    mode tcp\n    timeout connect 5s\n    timeout client 60s\n    timeout server 60s\n"
        f"frontend relay\n    bind 127.0.0.1:{port}\n    option splice-auto\n    default_backend peer\n"
        f"backend peer\n    server peer 127.0.0.1:{listener.getsockname()[1]}\n")
    proc = subprocess.Popen(["haproxy", "-f", str(config), "-db"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pairs = []
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                listener.accept()[0].close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise SystemExit("haproxy did not start")
                time.sleep(0.1)
        for _ in range(streams):
            client = socket.create_connection(("127.0.0.1", port), timeout=10)
            peer, _ = listener.accept()
            pairs.append((client, peer))
        return transfer(pairs, per_direction, proc.pid, rate)
    finally:
        for a, b in pairs:
            a.close()
            b.close()
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        listener.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--streams", type=int, default=4)
    parser.add_argument("--megabytes", type=int, default=256, help="MiB each pipe carries each way")
    parser.add_argument("--rate", type=float, default=0,
                        help="MiB/s each sender writes at most (0: as fast as it can; the receivers then set the pace)")
    parser.add_argument("--configs", default=",".join(CONFIGS), help="which of " + ", ".join(CONFIGS))
    args = parser.parse_args()
    configs = [c for c in args.configs.split(",") if c in CONFIGS]
    per_direction = args.megabytes << 20
    results: dict[str, list[dict]] = {c: [] for c in CONFIGS}
    with tempfile.TemporaryDirectory(prefix="relayd-bench-tcp.") as scratch:
        for rep in range(args.reps):
            order = configs if rep % 2 == 0 else list(reversed(configs))
            for config in order:
                workdir = Path(scratch) / f"{config}-{rep}"
                workdir.mkdir()
                if config == "haproxy":
                    result = run_haproxy(workdir, args.streams, per_direction, args.rate)
                else:
                    result = run_turn("coturn" if config == "coturn" else "relayd", workdir, args.streams,
                                      per_direction, splice=config == "relayd-splice", rate=args.rate)
                print(f"bench-tcp-relay: rep {rep} {config}: {result}", file=sys.stderr, flush=True)
                results[config].append(result)

    def median(config: str, key: str) -> float:
        values = [r[key] for r in results[config] if "failed" not in r and r.get(key) is not None]
        return statistics.median(values) if values else float("nan")

    pace = f"each sender at {args.rate:g} MiB/s" if args.rate else "senders as fast as the receivers read"
    print(f"\nRFC 6062 relaying, {args.streams} pipes x {args.megabytes} MiB each way, both ways at once, {pace}; "
          f"medians of the runs that finished, of {args.reps}")
    print(f"{'':16} {'MiB/s':>8} {'process ms/MiB':>15} {'vs coturn':>10} {'system ms/MiB':>14} {'vs coturn':>10} "
          f"{'kernel share':>13} {'stalled':>8}")
    coturn_process = median("coturn", "process_ms_per_mib")
    coturn_system = median("coturn", "system_ms_per_mib")
    for config in configs:
        process = median(config, "process_ms_per_mib")
        system = median(config, "system_ms_per_mib")
        share = median(config, "spliced_share")
        stalled = sum(1 for r in results[config] if "failed" in r)
        print(f"{config:16} {median(config, 'mib_per_s'):8.0f} {process:15.2f} {process / coturn_process:10.2f} "
              f"{system:14.2f} {system / coturn_system:10.2f} {share:13.2f} {stalled:8}")


if __name__ == "__main__":
    main()
