"""A real redis-server for the cluster tests (docs/cluster.md): started on a free loopback port
with no persistence, stopped by PID (SIGKILL to simulate a crash), restartable on the same port.
Commands go through a minimal RESP exchange over a socket (the tests only need GET-like
reads), so no Python Redis client is needed."""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from conftest import LOOPBACK, die_with_parent, free_port

READY_TIMEOUT = 5.0


class RedisServer:
    """`extra` goes on redis-server's command line (a replica's `--replicaof`, TLS settings)."""

    def __init__(self, workdir: Path, password: str | None = None, extra: list[str] | None = None):
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.password = password
        self.extra = list(extra or [])
        self.proc: subprocess.Popen | None = None
        self.log_path = self.workdir / "redis.log"
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.fail("redis-server not found (Debian package redis-server; run scripts/install-test-deps.sh)")
        self.binary = binary

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}{LOOPBACK}:{self.port}/0"

    def start(self) -> None:
        cmd = [self.binary, "--port", str(self.port), "--bind", LOOPBACK, "--save", "", "--appendonly", "no",
               "--daemonize", "no", "--protected-mode", "yes", "--dir", str(self.workdir)]
        if self.password:
            cmd += ["--requirepass", self.password, "--masterauth", self.password]
        cmd += self.extra
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                         preexec_fn=die_with_parent)
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"redis-server exited with {self.proc.returncode}: {self.log_path.read_text()}")
            try:
                if self.command("PING") in ("PONG", ):
                    return
            except OSError:
                pass
            time.sleep(0.05)
        pytest.fail(f"redis-server did not answer PING within {READY_TIMEOUT} s")

    def kill(self) -> None:
        """SIGKILL: Redis vanishes as in a crash (its data goes with it: no persistence)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=5)
        self.proc = None

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
        """One command (after AUTH when a password is set); the reply decoded from RESP2."""
        with socket.create_connection((LOOPBACK, self.port), timeout=2) as s:
            reader = s.makefile("rb")
            if self.password:
                s.sendall(_encode(["AUTH", self.password]))
                _read(reader)
            s.sendall(_encode(list(args)))
            return _read(reader)


def _encode(args: list[str]) -> bytes:
    out = [f"*{len(args)}\r\n".encode()]
    for a in args:
        data = a.encode()
        out.append(f"${len(data)}\r\n".encode() + data + b"\r\n")
    return b"".join(out)


def _read(reader):
    line = reader.readline()
    if not line:
        raise OSError("connection closed")
    kind, rest = line[:1], line[1:-2]
    if kind == b"+":
        return rest.decode()
    if kind == b"-":
        return RuntimeError(rest.decode())
    if kind == b":":
        return int(rest)
    if kind == b"$":
        n = int(rest)
        if n < 0:
            return None
        data = reader.read(n + 2)
        return data[:-2].decode(errors="replace")
    if kind == b"*":
        n = int(rest)
        return None if n < 0 else [_read(reader) for _ in range(n)]
    raise OSError(f"unexpected RESP line {line!r}")
