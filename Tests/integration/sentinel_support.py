"""Redis with Sentinel for the cluster tests (docs/cluster.md, "Redis that survives its
failover"): a master and a replica (Debian's redis-server) watched by three sentinels (Debian's
redis-sentinel), all on loopback ports of their own, with passwords on both Redis and the
sentinels. Failover is tuned to seconds (`down-after-milliseconds`). Everything is stopped by
PID."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from conftest import LOOPBACK, die_with_parent, free_port
from redis_support import RedisServer, _encode, _read

MASTER_NAME = "relayd-redis"
DOWN_AFTER_MS = 1500


class Sentinel:
    def __init__(self, workdir: Path, master: RedisServer, password: str, quorum: int = 2):
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.password = password
        self.proc: subprocess.Popen | None = None
        self.log_path = self.workdir / "sentinel.log"
        binary = shutil.which("redis-sentinel")
        if binary is None:
            pytest.fail("redis-sentinel not found (Debian package redis-sentinel; run scripts/install-test-deps.sh)")
        self.binary = binary
        # Sentinel rewrites its configuration file as it learns: each one needs its own.
        self.config = self.workdir / "sentinel.conf"
        self.config.write_text("\n".join([
            f"port {self.port}", f"bind {LOOPBACK}", "daemonize no", f"dir {self.workdir}",
            f"requirepass {password}", f"sentinel sentinel-pass {password}",
            f"sentinel monitor {MASTER_NAME} {LOOPBACK} {master.port} {quorum}",
            f"sentinel auth-pass {MASTER_NAME} {master.password}",
            f"sentinel down-after-milliseconds {MASTER_NAME} {DOWN_AFTER_MS}",
            f"sentinel failover-timeout {MASTER_NAME} 10000",
            f"sentinel parallel-syncs {MASTER_NAME} 1", "",
        ]))

    def start(self) -> None:
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen([self.binary, str(self.config)], stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, preexec_fn=die_with_parent)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"redis-sentinel exited with {self.proc.returncode}: {self.log_path.read_text()}")
            try:
                if self.command("PING") == "PONG":
                    return
            except OSError:
                pass
            time.sleep(0.05)
        pytest.fail("redis-sentinel did not answer PING within 5 s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self.proc = None

    def command(self, *args: str):
        with socket.create_connection((LOOPBACK, self.port), timeout=2) as s:
            reader = s.makefile("rb")
            s.sendall(_encode(["AUTH", self.password]))
            _read(reader)
            s.sendall(_encode(list(args)))
            return _read(reader)

    def master_port(self) -> int | None:
        reply = self.command("SENTINEL", "get-master-addr-by-name", MASTER_NAME)
        return int(reply[1]) if isinstance(reply, list) and len(reply) == 2 else None


class SentinelGroup:
    """A master, one replica, and three sentinels with a quorum of two."""

    def __init__(self, workdir: Path, password: str = "redis-pw", sentinel_password: str = "sentinel-pw"):
        self.master = RedisServer(workdir / "redis-a", password=password)
        self.replica = RedisServer(workdir / "redis-b", password=password,
                                   extra=["--replicaof", LOOPBACK, str(self.master.port)])
        self.sentinels = [Sentinel(workdir / f"sentinel-{i}", self.master, sentinel_password) for i in range(3)]
        self.password, self.sentinel_password = password, sentinel_password

    @property
    def url(self) -> str:
        hosts = ",".join(f"{LOOPBACK}:{s.port}" for s in self.sentinels)
        return (f"redis+sentinel://:{self.password}@{hosts}/{MASTER_NAME}/0"
                f"?sentinel-password={self.sentinel_password}")

    def start(self) -> None:
        self.master.start()
        self.replica.start()
        for sentinel in self.sentinels:
            sentinel.start()
        # Ready once every sentinel knows the replica and the other two sentinels (found
        # through the master's hello channel), so a failover can be agreed on.
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if all(self._knows_everyone(s) for s in self.sentinels) and self.replica_in_sync(self.master, self.replica):
                return
            time.sleep(0.1)
        pytest.fail("the sentinels did not discover the replica and each other within 15 s")

    @staticmethod
    def _knows_everyone(sentinel: Sentinel) -> bool:
        master = sentinel.command("SENTINEL", "master", MASTER_NAME)
        fields = dict(zip(master[::2], master[1::2])) if isinstance(master, list) else {}
        return fields.get("num-slaves") == "1" and fields.get("num-other-sentinels") == "2"

    @staticmethod
    def replica_in_sync(master: RedisServer, replica: RedisServer) -> bool:
        info = replica.command("INFO", "replication")
        return isinstance(info, str) and "master_link_status:up" in info

    def current(self) -> RedisServer | None:
        """The server the sentinels name master now."""
        for sentinel in self.sentinels:
            try:
                port = sentinel.master_port()
            except OSError:
                continue
            for server in (self.master, self.replica):
                if server.port == port:
                    return server
        return None

    def stop(self) -> None:
        for sentinel in self.sentinels:
            sentinel.stop()
        self.replica.stop()
        self.master.stop()
