"""A real PostgreSQL server for the user-database tests (docs/userdb.md): a cluster of its own
made with Debian's initdb in a private directory, the `postgres` binary run as the `postgres`
user on a free loopback port (PostgreSQL refuses to run as root), coturn's schema.sql loaded
into a `turn` database, stopped by PID. Needs root to switch users, as CI runs."""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from conftest import LOOPBACK, die_with_parent, free_port

BIN = Path("/usr/lib/postgresql/15/bin")
SCHEMA = Path("/usr/share/coturn/schema.sql")
READY_TIMEOUT = 20.0


def available() -> str | None:
    """Why PostgreSQL cannot run here, or None."""
    if os.geteuid() != 0:
        return "PostgreSQL runs as its own user: needs root"
    if not (BIN / "postgres").exists() or not shutil.which("psql"):
        return "PostgreSQL 15 is not installed (Debian package postgresql)"
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        return "no postgres user"
    if not SCHEMA.exists():
        return "coturn's schema.sql is not installed (Debian package coturn)"
    return None


class PostgresServer:
    def __init__(self):
        self.user = pwd.getpwnam("postgres")
        # Not under pytest's tmp_path: that is private to root, and the server runs as postgres.
        self.dir = Path(tempfile.mkdtemp(prefix="relayd-pg-"))
        os.chmod(self.dir, 0o755)
        self.data = self.dir / "data"
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        self.log_path = self.dir / "postgres.log"

    @property
    def conninfo(self) -> str:
        return f"host={LOOPBACK} port={self.port} dbname=turn user=postgres"

    def _as_postgres(self):
        os.setgid(self.user.pw_gid)
        os.setuid(self.user.pw_uid)
        die_with_parent()

    def start(self) -> None:
        os.chown(self.dir, self.user.pw_uid, self.user.pw_gid)
        subprocess.run([str(BIN / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync"],
                       check=True, capture_output=True, preexec_fn=self._as_postgres, timeout=120)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [str(BIN / "postgres"), "-D", str(self.data), "-p", str(self.port), "-k", str(self.dir),
                 "-c", f"listen_addresses={LOOPBACK}", "-c", "fsync=off", "-c", "synchronous_commit=off"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, preexec_fn=self._as_postgres)
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"postgres exited with {self.proc.returncode}: {self.log_path.read_text()}")
            if subprocess.run(["psql", "-h", LOOPBACK, "-p", str(self.port), "-U", "postgres", "-d", "postgres",
                               "-c", "SELECT 1"], capture_output=True).returncode == 0:
                break
            time.sleep(0.2)
        else:
            pytest.fail(f"postgres did not answer within {READY_TIMEOUT} s: {self.log_path.read_text()}")
        self.sql("CREATE DATABASE turn", database="postgres")
        self.psql("-f", str(SCHEMA))

    def psql(self, *args: str, database: str = "turn") -> str:
        result = subprocess.run(["psql", "-h", LOOPBACK, "-p", str(self.port), "-U", "postgres", "-d", database,
                                 "-v", "ON_ERROR_STOP=1", "-q", "-A", "-t", *args],
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stdout + result.stderr
        return result.stdout

    def sql(self, statement: str, database: str = "turn") -> str:
        return self.psql("-c", statement, database=database)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # fast shutdown
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        shutil.rmtree(self.dir, ignore_errors=True)
