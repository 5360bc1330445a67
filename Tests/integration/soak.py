"""A soak with chaos (docs/operations.md, "Soak test"): three relayd nodes on Redis with Sentinel,
clients that keep allocating, refreshing, relaying and leaving over UDP, TCP and TLS, and the
faults a fleet meets, one after another: kill -9 of a node then its restart, a Redis master
failover, SIGHUP with a rotated secret, a live upgrade of a node, a drain. Its invariants:

- no allocation is lost, except those the design ends: TCP and TLS ones on a node killed;
- a user holding as many allocations as it can never exceeds `user-quota` x nodes (the bound
  while Redis is away, docs/cluster.md), nor `user-quota` with Redis up and settled;
- usage is exact for every finished session its node was not killed during: what the usage API
  counts equals what the peer and the client received;
- descriptors and memory are flat: after the last cycle, each process holds no more than after
  the first it saw, within a margin.

Run by Tests/integration/test_soak.py (3 minutes in CI) and scripts/soak.sh --minutes N, which
prints the figures. Everything is on loopback and stopped by PID."""

from __future__ import annotations

import json
import os
import random
import secrets
import signal
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from cluster_support import ClusterNode, eventually
from conftest import pid_alive
from sentinel_support import MASTER_NAME, SentinelGroup
from streamclient import StreamTurnClient
from stunclient import TurnClient, TurnError, rest_credentials

QUOTA = 3
TOKEN = "soak-admin-token-0123456789abcdef"
FAULTS = ("kill", "failover", "rotate", "upgrade", "drain")


class SoakNode:
    """A node whose process may change: after a live upgrade its pid file names the heir."""

    def __init__(self, workdir: Path, name: str, url: str, secret_file: Path, secret: str):
        self.pidfile = workdir / "relayd.pid"
        self.node = ClusterNode(workdir, name, None, secret, streams=True, redis_args=[f"--cluster-redis={url}"],
                                extra=[f"--user-quota={QUOTA}", f"--state-dir={workdir / 'state'}",
                                       f"--pidfile={self.pidfile}", f"--api-key=ops:{TOKEN}:admin",
                                       # Longer than any call (6 s): a drain ends when its calls do,
                                       # and never cuts one.
                                       "--drain-timeout=20", "--relay-threads=2", "--api-rate-limit=0"])
        base = self.node.command
        # The REST secret comes from a file, rotated on SIGHUP (docs/configuration.md).
        self.node.command = lambda: [a for a in base() if not a.startswith("--static-auth-secret=")] + [
            f"--static-auth-secret-file={secret_file}"]
        self.name = name
        self.available = True
        self.killed_at: list[float] = []

    @property
    def address(self):
        return self.node.address

    def pid(self) -> int | None:
        try:
            return int(self.pidfile.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None

    def start(self) -> None:
        self.node.proc = None
        self.node.start()
        assert eventually(lambda: self.pid() is not None and pid_alive(self.pid()), timeout=10)

    def signal(self, sig: int) -> None:
        pid = self.pid()
        if pid is not None and pid_alive(pid):
            os.kill(pid, sig)

    def stats(self) -> tuple[int, int, int] | None:
        """(pid, descriptors, RSS in KiB) of the serving process."""
        pid = self.pid()
        if pid is None:
            return None
        try:
            fds = len(os.listdir(f"/proc/{pid}/fd"))
            rss = next(int(l.split()[1]) for l in open(f"/proc/{pid}/status") if l.startswith("VmRSS:"))
        except (FileNotFoundError, StopIteration, ProcessLookupError):
            return None
        return pid, fds, rss

    def stop_all(self) -> None:
        for pid in {self.pid(), self.node.proc.pid if self.node.proc else None} - {None}:
            if pid_alive(pid):
                os.kill(pid, signal.SIGKILL)
        if self.node.proc is not None:
            self.node.proc.wait(timeout=10)
            self.node.proc = None

    def usage(self, user: str) -> dict:
        result = self.node.http("GET", f"/api/v1/usage?user={user}", headers={"Authorization": f"Bearer {TOKEN}"})
        assert result.status == 200, (result.status, result.body)
        return json.loads(result.body)["total"]


@dataclass
class Session:
    user: str
    node: str
    transport: str
    started: float
    ended: float = 0
    to_peer: int = 0  # payload bytes the peer received
    to_client: int = 0  # payload bytes the client received
    outcome: str = "open"  # finished, ended_by_kill, lost: <why>
    allocated: bool = False  # the Allocate succeeded: any later error answer is a loss


REFUSALS_KEPT = 100  # `refused_allocates` counts them all; the list keeps a long run's report small


@dataclass
class Report:
    sessions: list[Session] = field(default_factory=list)
    faults: list[tuple[float, str, str]] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    refused: int = 0
    # The first REFUSALS_KEPT refused Allocates: error code and reason, node, faults around it.
    refusals: list[str] = field(default_factory=list)
    quota_max_held: int = 0
    quota_over: int = 0
    samples: dict = field(default_factory=dict)


class Soak:
    def __init__(self, workdir: Path, calls: int = 8):
        self.workdir = workdir
        self.group = SentinelGroup(workdir)
        self.secret = secrets.token_hex(16)
        self.secret_file = workdir / "turn-secret"
        self.secret_file.write_text(self.secret + "\n")
        self.nodes: list[SoakNode] = []
        self.calls = calls
        self.report = Report()
        self.lock = threading.Lock()
        self.running = True
        self.serial = 0

    # Set-up and tear-down.

    def start(self) -> None:
        self.group.start()
        for name in ("s1", "s2", "s3"):
            node = SoakNode(self.workdir / name, name, self.group.url, self.secret_file, self.secret)
            node.start()
            self.nodes.append(node)

    def stop(self) -> None:
        self.running = False
        for node in self.nodes:
            node.stop_all()
        self.group.stop()

    # Clients.

    def pick(self) -> SoakNode | None:
        available = [n for n in self.nodes if n.available]
        return random.choice(available) if available else None

    def new_user(self) -> str:
        with self.lock:
            self.serial += 1
            return f"soak{self.serial}"

    def call(self) -> None:
        """One client slot: calls one after another until the soak ends."""
        while self.running:
            node = self.pick()
            if node is None:
                time.sleep(0.2)
                continue
            transport = random.choices(["udp", "tcp", "tls"], weights=[6, 2, 2])[0]
            session = Session(self.new_user(), node.name, transport, time.monotonic())
            try:
                self.run_session(node, session)
            except (TurnError, OSError) as e:
                if session.outcome == "open":
                    refused = not session.allocated and isinstance(e, TurnError) and e.code in (300, 401, 486, 508)
                    session.outcome = f"refused {e}" if refused else f"lost: {type(e).__name__} {e}"
            session.ended = time.monotonic()
            if session.outcome.startswith("refused"):
                with self.lock:
                    self.report.refused += 1
                    if len(self.report.refusals) < REFUSALS_KEPT:
                        self.report.refusals.append(
                            f"{session.transport} on {node.name}: {session.outcome}; {self.faults_during(session)}")
                time.sleep(0.2)
                continue
            if session.outcome.startswith("lost") and self.killed_during(node, session):
                session.outcome = "ended_by_kill" if transport != "udp" else session.outcome
            with self.lock:
                self.report.sessions.append(session)

    def killed_during(self, node: SoakNode, session: Session) -> bool:
        return any(session.started - 1 <= t <= session.ended + 1 for t in node.killed_at)

    def run_session(self, node: SoakNode, session: Session) -> None:
        username, password = rest_credentials(self.secret, session.user)
        if session.transport == "udp":
            client = TurnClient(node.address, attempts=8)
        else:
            client = StreamTurnClient(node.node.tls_address if session.transport == "tls" else node.address,
                                      tls=session.transport == "tls")
        peer = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        peer.bind(("127.0.0.1", 0))
        peer.setblocking(False)
        try:
            client.allocate(username, password)
            session.allocated = True
            client.channel_bind(0x4000, peer.getsockname())
            length = random.uniform(2, 6)
            deadline = time.monotonic() + length
            refreshed = False
            payload = os.urandom(80)
            while time.monotonic() < deadline and self.running:
                client.send_channel_data(0x4000, payload)
                time.sleep(0.05)
                session.to_peer += self.drain_peer(peer, client)
                session.to_client += self.drain_client(client, 0.001)
                if not refreshed and time.monotonic() > deadline - length / 2:
                    self.retrying(lambda: client.refresh(600), session)
                    refreshed = True
            time.sleep(0.2)
            session.to_peer += self.drain_peer(peer, client)
            session.to_client += self.drain_client(client, 0.2)
            self.retrying(lambda: client.refresh(0), session)
            session.outcome = "finished"
        finally:
            client.close()
            peer.close()

    @staticmethod
    def drain_client(client, first_wait: float) -> int:
        """Payload bytes of the ChannelData that reached the client."""
        total = 0
        got = client.receive(first_wait)
        while got is not None:
            if got.kind == "channel":
                total += len(got.payload)
            got = client.receive(0.001)
        return total

    def drain_peer(self, peer: socket.socket, client) -> int:
        """What reached the peer, echoed back to the relayed address."""
        total = 0
        while True:
            try:
                data, source = peer.recvfrom(2048)
            except BlockingIOError:
                return total
            total += len(data)
            peer.sendto(data, source)

    def retrying(self, action, session: Session) -> None:
        """A UDP request while its node restarts is retried (the allocation comes back from
        state-dir); any error answer is final."""
        deadline = time.monotonic() + 15
        while True:
            try:
                action()
                return
            except TurnError:
                raise
            except OSError:
                if session.transport != "udp" or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def heavy_user(self) -> None:
        """A user who always wants more: the quota must hold it."""
        held: list[TurnClient] = []
        user = "heavy"
        while self.running:
            node = self.pick()
            if node is not None and len(held) < QUOTA * len(self.nodes) + 2:
                client = TurnClient(node.address, attempts=3)
                try:
                    client.allocate(*rest_credentials(self.secret, user))
                    held.append(client)
                except (TurnError, OSError):
                    client.close()
            with self.lock:
                self.report.quota_max_held = max(self.report.quota_max_held, len(held))
                if len(held) > QUOTA:
                    self.report.quota_over += 1
            if len(held) > QUOTA * len(self.nodes):
                self.violation(f"user-quota {QUOTA}: {len(held)} allocations held on {len(self.nodes)} nodes")
            time.sleep(0.3)
            if held and random.random() < 0.2:
                client = held.pop(random.randrange(len(held)))
                try:
                    client.refresh(0)
                except (TurnError, OSError):
                    pass
                client.close()
        for client in held:
            client.close()

    def violation(self, text: str) -> None:
        with self.lock:
            self.report.violations.append(text)

    # Faults.

    def fault(self, kind: str, node: SoakNode) -> None:
        self.report.faults.append((time.monotonic(), kind, node.name))
        if kind == "kill":
            node.available = False
            node.killed_at.append(time.monotonic())
            node.signal(signal.SIGKILL)
            if node.node.proc is not None:
                node.node.proc.poll()
            time.sleep(0.5)
            node.start()
            node.killed_at.append(time.monotonic())
            node.available = True
        elif kind == "failover":
            before = self.group.current()
            assert self.group.sentinels[0].command("SENTINEL", "FAILOVER", MASTER_NAME) == "OK"
            if not eventually(lambda: self.group.current() not in (before, None), timeout=20):
                self.violation("the sentinels did not fail over within 20 s")
        elif kind == "rotate":
            old, self.secret = self.secret, secrets.token_hex(16)
            self.secret_file.write_text(f"{self.secret}\n{old}\n")
            for n in self.nodes:
                n.signal(signal.SIGHUP)
            time.sleep(0.5)
        elif kind == "upgrade":
            before = node.pid()
            node.signal(signal.SIGUSR2)
            if not eventually(lambda: node.pid() not in (before, None) and pid_alive(node.pid()), timeout=30):
                self.violation(f"{node.name}: the live upgrade did not hand over within 30 s")
        elif kind == "drain":
            node.available = False
            node.signal(signal.SIGUSR1)
            time.sleep(2)
            pid = node.pid()
            node.signal(signal.SIGTERM)
            if not eventually(lambda: pid is None or not pid_alive(pid), timeout=25):
                self.violation(f"{node.name}: the drain did not end within 25 s")
            node.start()
            node.available = True

    def sample(self) -> None:
        for node in self.nodes:
            stats = node.stats()
            if stats is not None:
                self.report.samples.setdefault(node.name, []).append(stats)

    # The run.

    def run(self, minutes: float, period: float = 12) -> Report:
        threads = [threading.Thread(target=self.call, daemon=True) for _ in range(self.calls)]
        threads.append(threading.Thread(target=self.heavy_user, daemon=True))
        for t in threads:
            t.start()
        end = time.monotonic() + minutes * 60
        time.sleep(min(period, 5))
        self.sample()
        i = 0
        while time.monotonic() + period < end:
            kind = FAULTS[i % len(FAULTS)]
            self.fault(kind, self.nodes[i % len(self.nodes)])
            time.sleep(period / 2)
            self.sample()
            time.sleep(period / 2)
            i += 1
        self.running = False
        for t in threads:
            t.join(timeout=30)
        time.sleep(3)
        self.sample()
        self.check()
        return self.report

    def check(self) -> None:
        r = self.report
        for s in r.sessions:
            if s.outcome.startswith("lost"):
                r.violations.append(f"{s.transport} session of {s.user} on {s.node} lost: {s.outcome}; "
                                    f"{self.faults_during(s)}")
        if r.quota_max_held > QUOTA * len(self.nodes):
            r.violations.append(f"quota: {r.quota_max_held} held")
        # Usage: every finished session whose node was not killed during it.
        nodes = {n.name: n for n in self.nodes}
        for s in r.sessions:
            if s.outcome != "finished" or self.killed_during(nodes[s.node], s):
                continue
            totals = [n.usage(s.user) for n in self.nodes]
            to_peer = sum(int(t.get("bytes_to_peer", 0)) for t in totals)
            to_client = sum(int(t.get("bytes_to_client", 0)) for t in totals)
            if (to_peer, to_client) != (s.to_peer, s.to_client):
                r.violations.append(
                    f"usage of {s.user} ({s.transport} on {s.node}): counted {to_peer}/{to_client} bytes, "
                    f"relayed {s.to_peer}/{s.to_client}")
        # Descriptors and memory: each process's last sample against its first.
        for name, samples in r.samples.items():
            by_pid: dict[int, list[tuple[int, int, int]]] = {}
            for sample in samples:
                by_pid.setdefault(sample[0], []).append(sample)
            for pid, series in by_pid.items():
                if len(series) < 2:
                    continue
                (_, fd0, rss0), (_, fd1, rss1) = series[0], series[-1]
                if fd1 > fd0 + 64:
                    r.violations.append(f"{name} pid {pid}: descriptors {fd0} -> {fd1}")
                if rss1 > rss0 + 48 * 1024:
                    r.violations.append(f"{name} pid {pid}: RSS {rss0} -> {rss1} KiB")

    def faults_during(self, session: Session) -> str:
        """The faults that struck while `session` ran (from a second before it to a second after),
        each with its time from the session's start, so a loss can be laid at one."""
        struck = [f"{kind} {node} at {t - session.started:+.2f} s" for t, kind, node in self.report.faults
                  if session.started - 1 <= t <= session.ended + 1]
        return "faults meanwhile: " + (", ".join(struck) if struck else "none")

    def summary(self) -> dict:
        r = self.report
        outcomes: dict[str, int] = {}
        for s in r.sessions:
            key = s.outcome if not s.outcome.startswith("lost") else "lost"
            outcomes[f"{s.transport} {key}"] = outcomes.get(f"{s.transport} {key}", 0) + 1
        return {
            "sessions": len(r.sessions), "outcomes": outcomes, "refused_allocates": r.refused,
            "refusals": r.refusals,
            "faults": [f"{kind} {node}" for _, kind, node in r.faults],
            "quota_max_held": r.quota_max_held, "quota_samples_over_quota": r.quota_over,
            "relayed_bytes": sum(s.to_peer + s.to_client for s in r.sessions),
            "processes": {name: [f"pid {p}: {fd} fds, {rss} KiB" for p, fd, rss in samples[-1:]]
                          for name, samples in r.samples.items()},
            "violations": r.violations,
        }


if __name__ == "__main__":
    import argparse
    import tempfile

    parser = argparse.ArgumentParser(description="relayd soak with chaos")
    parser.add_argument("--minutes", type=float, default=3)
    parser.add_argument("--calls", type=int, default=8)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="relayd-soak-") as work:
        soak = Soak(Path(work), calls=args.calls)
        try:
            soak.start()
            soak.run(args.minutes)
        finally:
            soak.stop()
        print(json.dumps(soak.summary(), indent=2))
        raise SystemExit(1 if soak.report.violations else 0)
