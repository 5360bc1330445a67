"""The cluster's costs (docs/cluster.md), on loopback, driven by scripts/bench-cluster.sh:

1. Credential API requests per second (wrk, Debian's package): one relayd alone; one node of a
   three-node cluster; all three nodes of the cluster at once (three wrk processes, summed).
2. Allocate latency with `user-quota` on: relayd alone (the quota decided locally) against a
   cluster node (every Allocate takes the Redis round trip), with coturn in the same run as the
   reference. One authenticated Allocate per fresh client socket, one at a time, timed from the
   send to the success response; the nonce (tied to the client IP) is learnt once.

Each measurement is repeated; the medians and ratios print as one table. Every process is
stopped by PID on exit."""

from __future__ import annotations

import argparse
import secrets
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "Tests" / "integration"))

import stunclient  # noqa: E402
from cluster_support import ClusterNode  # noqa: E402
from conftest import RelayServer  # noqa: E402
from redis_support import RedisServer  # noqa: E402

API_ARGS = ["--api-rate-limit=0", "--log-level=notice", "--user-quota=1000000"]
WIDTH = 3000


def wrk(url: str, token: str, seconds: int) -> subprocess.Popen:
    return subprocess.Popen(
        ["wrk", "-t1", "-c8", f"-d{seconds}s", "-H", f"Authorization: Bearer {token}", url],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def requests_per_second(proc: subprocess.Popen) -> float:
    out = proc.communicate(timeout=120)[0].decode()
    for line in out.splitlines():
        if line.startswith("Requests/sec:"):
            non2xx = [ln for ln in out.splitlines() if "Non-2xx" in ln]
            if non2xx:
                raise RuntimeError(f"wrk saw errors: {non2xx}")
            return float(line.split()[1])
    raise RuntimeError(f"wrk printed no rate:\n{out}")


def api_rate(nodes: list[RelayServer], seconds: int) -> float:
    procs = [wrk(f"http://127.0.0.1:{n.api_port}/api/v1/credentials?user=alice", n.api_token, seconds)
             for n in nodes]
    return sum(requests_per_second(p) for p in procs)


def allocate_latencies(server: RelayServer, count: int) -> list[float]:
    """Seconds per authenticated Allocate (send to success), each from a fresh client socket
    after its own 401 (coturn ties a nonce to the 5-tuple), which is not timed."""
    username, password = stunclient.rest_credentials(server.secret, "bench")
    samples = []
    held = []
    for _ in range(count):
        client = stunclient.TurnClient(server.address)
        challenge = client.allocate_unauthenticated()
        realm, nonce = challenge.text(stunclient.Attr.REALM), challenge.get(stunclient.Attr.NONCE)
        if realm is None or nonce is None:
            raise RuntimeError(f"{server.kind}: no 401 challenge but {challenge.error_code()}")
        key = stunclient.long_term_key(username, realm, password)
        client.realm, client.nonce, client.username, client.key = realm, nonce, username, key
        request = stunclient.StunMessage(stunclient.Method.ALLOCATE, stunclient.Class.REQUEST)
        request.add(stunclient.Attr.REQUESTED_TRANSPORT, struct.pack("!B3x", 17))
        request.add(stunclient.Attr.LIFETIME, struct.pack("!I", 60))
        request.add(stunclient.Attr.USERNAME, username.encode())
        request.add(stunclient.Attr.REALM, realm.encode())
        request.add(stunclient.Attr.NONCE, nonce)
        wire = request.encode(integrity_key=key)
        start = time.perf_counter()
        client.sock.sendto(wire, server.address)
        while True:
            data, _ = client.sock.recvfrom(2048)
            if data[8:20] == request.transaction_id:
                break
        samples.append(time.perf_counter() - start)
        response = stunclient.StunMessage.decode(data)
        if response.cls != stunclient.Class.SUCCESS:
            raise RuntimeError(f"Allocate failed: {response.error_code()}")
        client.refresh(0)
        # Kept open to the end: a new socket must not get a port a deleted allocation had
        # (coturn remembers the 5-tuple a while and answers 437).
        held.append(client)
    for client in held:
        client.close()
    return samples


def percentile(samples: list[float], p: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--allocations", type=int, default=800)
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="relayd-bench-cluster-"))
    secret = secrets.token_hex(16)
    redis = RedisServer(work / "redis")
    redis.start()
    # Wide relay ranges: coturn keeps a deleted allocation's port a while before reusing it.
    alone = RelayServer("relayd", work / "alone", extra_args=API_ARGS, relay_range_width=WIDTH)
    alone.secret = secret
    nodes = [ClusterNode(work / f"n{i}", f"n{i}", redis, secret, extra=API_ARGS) for i in (1, 2, 3)]
    coturn = RelayServer("coturn", work / "coturn", extra_args=["--user-quota=1000000"], relay_range_width=WIDTH)
    coturn.secret = secret
    started = []
    results: dict[str, list[float]] = {k: [] for k in (
        "api_alone", "api_cluster_one", "api_cluster_three",
        "alloc_alone_p50", "alloc_alone_p99", "alloc_cluster_p50", "alloc_cluster_p99",
        "alloc_coturn_p50", "alloc_coturn_p99")}
    try:
        for server in [alone, *nodes, coturn]:
            server.start()
            started.append(server)
        deadline = time.monotonic() + 10
        while any(n.metric("relayd_cluster_nodes") != 3 for n in nodes):
            if time.monotonic() > deadline:
                raise RuntimeError("the cluster did not form")
            time.sleep(0.1)
        for rep in range(args.reps):
            results["api_alone"].append(api_rate([alone], args.seconds))
            results["api_cluster_one"].append(api_rate([nodes[0]], args.seconds))
            results["api_cluster_three"].append(api_rate(nodes, args.seconds))
            order = [("alone", alone), ("cluster", nodes[1]), ("coturn", coturn)]
            if rep % 2:
                order.reverse()
            for name, server in order:
                samples = allocate_latencies(server, args.allocations)
                results[f"alloc_{name}_p50"].append(percentile(samples, 50) * 1e6)
                results[f"alloc_{name}_p99"].append(percentile(samples, 99) * 1e6)
            print(f"rep {rep + 1}: " + ", ".join(f"{k} {v[-1]:.0f}" for k, v in results.items()), flush=True)
        granted = nodes[1].metric("relayd_cluster_admissions_total", '{outcome="granted"}')
        local = nodes[1].metric("relayd_cluster_admissions_total", '{outcome="local"}')
    finally:
        for server in reversed(started):
            server.stop()
        redis.stop()

    med = {k: statistics.median(v) for k, v in results.items()}
    print()
    print(f"cluster bench: medians of {args.reps} repetitions ({args.seconds} s wrk runs, "
          f"{args.allocations} Allocates per server per repetition)")
    print("| measure | value | ratio |")
    print("|---|---|---|")
    print(f"| credential API, relayd alone (req/s) | {med['api_alone']:.0f} | 1.00 |")
    print(f"| credential API, one cluster node (req/s) | {med['api_cluster_one']:.0f} | "
          f"{med['api_cluster_one'] / med['api_alone']:.2f} of alone |")
    print(f"| credential API, three cluster nodes at once (req/s, summed) | {med['api_cluster_three']:.0f} | "
          f"{med['api_cluster_three'] / med['api_alone']:.2f} of alone |")
    for which in ("p50", "p99"):
        a, c, t = med[f"alloc_alone_{which}"], med[f"alloc_cluster_{which}"], med[f"alloc_coturn_{which}"]
        print(f"| Allocate {which}, relayd alone / cluster / coturn (µs) | {a:.0f} / {c:.0f} / {t:.0f} | "
              f"cluster adds {c - a:.0f} µs; cluster/coturn {c / t:.2f} |")
    print(f"| cluster node's quota checks: granted by Redis / decided locally | {granted:.0f} / {local:.0f} | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
