"""Fixtures for the real-peer integration tests.

The server under test is chosen by the environment:

- RELAY_SERVER=relayd (default): the binary at RELAYD_BIN (default
  .build/debug/relayd, relative to the repository root).
- RELAY_SERVER=coturn: coturn's `turnserver`, the reference.

Everything listens on 127.0.0.1 only, on ports chosen at run time (never
3478). Every process is killed by PID in teardown; every wait is bounded.
"""

from __future__ import annotations

import contextlib
import os
import http.client
import json
import random
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import stunclient  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[2]
LOOPBACK = "127.0.0.1"
REALM = "example.org"
RESERVED_PORTS = {3478, 3479, 5349, 5350, 5766, 8080, 9641}
RELAY_RANGE_WIDTH = 200
READY_TIMEOUT = 10.0
HTTP_TIMEOUT = 5.0
STOP_TIMEOUT = 5.0

# Lines a crashed or sanitized process leaves in its log.
CRASH_MARKERS = [
    re.compile(p)
    for p in (
        r"ERROR: AddressSanitizer",
        r"ERROR: LeakSanitizer",
        r"WARNING: ThreadSanitizer",
        r"ERROR: ThreadSanitizer",
        r"runtime error: ",  # UndefinedBehaviorSanitizer
        r"SUMMARY: \w+Sanitizer",
        r"Fatal error: ",  # Swift runtime trap (precondition, force unwrap, overflow)
        r"Current stack trace:",
        r"💣 Program crashed",
        r"Segmentation fault",
        r"Illegal instruction",
    )
]


# --- child processes -------------------------------------------------------------

try:
    _prctl = __import__("ctypes").CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):  # not Linux
    _prctl = None
PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """preexec_fn: the kernel kills the child if pytest itself dies (e.g. killed
    by the run's timeout), so no server or peer outlives the run. Teardown
    still stops every process by PID first."""
    if _prctl is not None:
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def pytest_configure(config):
    # A SIGTERM to pytest (scripts/integration-tests.sh's timeout) becomes a
    # KeyboardInterrupt, so fixture teardown (kill by PID) still runs.
    def interrupt(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, interrupt)


# --- ports ---------------------------------------------------------------------


def _can_bind(port: int, host: str = LOOPBACK, tcp: bool = True) -> bool:
    kinds = [socket.SOCK_DGRAM] + ([socket.SOCK_STREAM] if tcp else [])
    socks = []
    try:
        for kind in kinds:
            s = socket.socket(socket.AF_INET, kind)
            socks.append(s)
            s.bind((host, port))
        return True
    except OSError:
        return False
    finally:
        for s in socks:
            s.close()


def ephemeral_ports() -> range:
    """The ports the kernel picks from for a socket bound to port 0 (clients, peers, tools)."""
    try:
        low, high = (int(v) for v in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
        return range(low, high + 1)
    except (OSError, ValueError):
        return range(32768, 61000)


def _port_space() -> tuple[int, int] | None:
    """The ports below the kernel's ephemeral ones, from 10000: no socket bound to port 0 anywhere
    on the machine ever takes one, so a port handed to a server here stays its own. None when
    the ephemeral range leaves too few below it."""
    low, high = 10000, ephemeral_ports().start
    return (low, high) if high - low >= 8000 else None


def _worker_slice(low: int, high: int, width: int = 1) -> tuple[int, int]:
    """Under pytest-xdist, this worker's own part of [low, high) (scripts/integration-tests.sh),
    so servers on different workers never share a port; the whole of it when a `width` wide
    range would not fit in a part (the shared-NAT tests, which run serial)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    if worker.startswith("gw") and worker[2:].isdigit() and count > 1:
        index, size = int(worker[2:]), (high - low) // count
        if size > 2 * width:
            return low + index * size, low + (index + 1) * size
    return low, high


def relay_port_space(width: int = 0) -> tuple[int, int]:
    """Where relay ranges are drawn from: the lower three quarters of `_port_space()`, this
    worker's slice of them."""
    space = _port_space()
    if space is None:  # an unusual ephemeral range: the old space, shared with it
        return 40000, 59000
    low, high = space
    return _worker_slice(low, low + (high - low) * 3 // 4, width)


def service_port_space() -> tuple[int, int] | None:
    """Where listening and API ports are drawn from: the upper quarter of `_port_space()`
    (about 27000 up by default, clear of the ports browsers refuse), this worker's slice of it."""
    space = _port_space()
    if space is None:
        return None
    low, high = space
    return _worker_slice(low + (high - low) * 3 // 4, high)


def pid_alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie does not): for processes that are not this test's children,
    such as a live upgrade's heir."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1][0] != "Z"
    except FileNotFoundError:
        return False


def free_port(host: str = LOOPBACK, avoid: range | None = None, attempts: int = 200) -> int:
    """A port free for both UDP and TCP on `host`, outside `avoid` and never 3478: from
    `service_port_space()`, else one the kernel picks."""
    space = service_port_space()
    rng = random.SystemRandom()
    for _ in range(attempts):
        if space is not None:
            port = rng.randrange(*space)
        else:
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            try:
                s.bind((host, 0))
                port = s.getsockname()[1]
            finally:
                s.close()
        if port in RESERVED_PORTS or (avoid is not None and port in avoid):
            continue
        if _can_bind(port, host):
            return port
    raise RuntimeError("no free port found")


def free_port_range(width: int = RELAY_RANGE_WIDTH, attempts: int = 50) -> range:
    """A run of `width` ports, all free for UDP on loopback, at a random base in
    `relay_port_space()`."""
    low, high = relay_port_space(width)
    rng = random.SystemRandom()
    for _ in range(attempts):
        base = rng.randrange(low, high - width)
        ports = range(base, base + width)
        if all(_can_bind(p, tcp=False) for p in ports):
            return ports
    raise RuntimeError(f"no free range of {width} ports in {low}-{high}")


# --- server -----------------------------------------------------------------------


class HTTPResult:
    """Status, headers (lower-case names) and body of one HTTP response."""

    def __init__(self, status: int, headers: dict[str, str], body: bytes):
        self.status = status
        self.headers = headers
        self.body = body

    def json(self):
        return json.loads(self.body)

    def __repr__(self) -> str:
        return f"HTTPResult({self.status}, {self.body[:200]!r})"


class RelayServer:
    """One STUN/TURN server process (relayd or coturn) on loopback."""

    def __init__(self, kind: str, workdir: Path, binary: str | None = None,
                 extra_args: list[str] | None = None, rest_auth: bool = True, streams: bool = False,
                 relay_range_width: int = RELAY_RANGE_WIDTH, suite_limits: bool = True):
        if kind not in ("relayd", "coturn"):
            raise ValueError(f"RELAY_SERVER must be 'relayd' or 'coturn', not {kind!r}")
        self.kind = kind
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.binary = binary or self.default_binary(kind)
        self.host = LOOPBACK
        self.relay_ports = free_port_range(relay_range_width)
        # suite_limits=False keeps relayd's default per-source limits (the suite otherwise lifts
        # them: every test client shares 127.0.0.1).
        self.suite_limits = suite_limits
        self.port = free_port(avoid=self.relay_ports)
        self.min_port = self.relay_ports.start
        self.max_port = self.relay_ports.stop - 1
        self.secret = secrets.token_hex(16)
        self.realm = REALM
        self.log_path = self.workdir / f"{kind}.log"
        self.proc: subprocess.Popen | None = None
        self.problems: list[str] = []
        # relayd's HTTP service (credentials, /metrics, /healthz, /readyz) on its own free
        # port, with one bearer token; never the default 8080, so servers run side by side.
        self.api_port = free_port(avoid=self.relay_ports)
        while self.api_port == self.port:
            self.api_port = free_port(avoid=self.relay_ports)
        self.api_key_name = "itest"
        # Hex: a token_urlsafe may start with "-", which a command line takes for an option.
        self.api_token = secrets.token_hex(24)
        # Options appended after the common ones (the command line's last value wins);
        # rest_auth=False replaces use-auth-secret with a static lt-cred-mech user.
        self.extra_args = list(extra_args or [])
        self.rest_auth = rest_auth
        # streams=True serves TURN over TCP (on `port`) and TLS (on `tls_port`, with a
        # self-signed certificate made by conf/make-test-cert.sh in <workdir>/tls).
        self.streams = streams
        self.tls_port: int | None = None
        self.cert_path = self.workdir / "tls" / "cert.pem"
        self.pkey_path = self.workdir / "tls" / "pkey.pem"
        if streams:
            taken = {self.port, self.api_port}
            self.tls_port = free_port(avoid=self.relay_ports)
            while self.tls_port in taken:
                self.tls_port = free_port(avoid=self.relay_ports)

    @staticmethod
    def default_binary(kind: str) -> str:
        if kind == "coturn":
            return shutil.which("turnserver") or "turnserver"
        path = Path(os.environ.get("RELAYD_BIN", ".build/debug/relayd"))
        if not path.is_absolute():
            path = REPO_ROOT / path
        return str(path)

    @property
    def address(self) -> tuple[str, int]:
        return (self.host, self.port)

    @property
    def turn_url(self) -> str:
        return f"turn:{self.host}:{self.port}?transport=udp"

    def credentials(self, user: str = "alice", ttl: int = 3600) -> tuple[str, str]:
        return stunclient.rest_credentials(self.secret, user, ttl=ttl)

    @property
    def api_url(self) -> str:
        return f"http://{self.host}:{self.api_port}"

    def http(self, method: str, path: str, headers: dict[str, str] | None = None,
             body: bytes | None = None, port: int | None = None,
             timeout: float = HTTP_TIMEOUT) -> "HTTPResult":
        """One request to relayd's HTTP service (the API port unless `port` is given)."""
        conn = http.client.HTTPConnection(self.host, port or self.api_port, timeout=timeout)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            resp = conn.getresponse()
            return HTTPResult(resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read())
        finally:
            conn.close()

    def command(self) -> list[str]:
        common = [
            f"--listening-ip={self.host}",
            f"--listening-port={self.port}",
            f"--relay-ip={self.host}",
            f"--min-port={self.min_port}",
            f"--max-port={self.max_port}",
            *(["--use-auth-secret", f"--static-auth-secret={self.secret}"] if self.rest_auth
              else ["--lt-cred-mech", f"--user=static:{self.secret}"]),
            f"--realm={self.realm}",
            "--allow-loopback-peers",
            *(self.stream_args() if self.streams else ["--no-tcp", "--no-tls"]),
        ]
        if self.kind == "relayd":
            conf = self.workdir / "relayd.conf"
            conf.write_text(
                "# relayd integration test: every setting comes from the command line\n"
            )
            api = [
                f"--api-listening-ip={self.host}",
                f"--api-listening-port={self.api_port}",
                f"--api-key={self.api_key_name}:{self.api_token}",
                # SIGTERM exits at once instead of draining (the drain tests set their own timeout).
                "--drain-timeout=0",
            ]
            if self.suite_limits:
                # Every test client shares 127.0.0.1: per-source limits high enough not to
                # throttle the suite (the flood and shared-NAT tests keep or set their own).
                api += ["--unauth-rate-limit=100000", "--auth-failure-rate-limit=100000"]
            return [self.binary, "-c", str(conf)] + common + api + self.extra_args
        # coturn: no config file, no CLI/DTLS/RFC 5780 alternate port, log to
        # stdout (captured), pid file and SQLite user DB inside the tmp dir.
        return [self.binary, "-n"] + common + [
            "--no-dtls",
            "--no-cli",
            "--no-rfc5780",
            "--log-file=stdout",
            "--simple-log",
            f"--pidfile={self.workdir / 'turnserver.pid'}",
            f"--userdb={self.workdir / 'turndb'}",
        ] + self.extra_args

    def stream_args(self) -> list[str]:
        return [
            f"--tls-listening-port={self.tls_port}",
            f"--cert={self.cert_path}",
            f"--pkey={self.pkey_path}",
        ]

    @property
    def tls_address(self) -> tuple[str, int]:
        return (self.host, self.tls_port)

    def start(self, ready_timeout: float = READY_TIMEOUT) -> None:
        if self.streams and not self.cert_path.exists():
            make_test_cert(self.cert_path.parent)
        binary = Path(self.binary)
        if not (binary.is_file() and os.access(binary, os.X_OK)):
            hint = "build it (swift build) or set RELAYD_BIN" if self.kind == "relayd" else \
                "run scripts/install-test-deps.sh"
            raise RuntimeError(f"{self.kind} binary not found or not executable: {self.binary} ({hint})")
        cmd = self.command()
        (self.workdir / "command.txt").write_text(" ".join(cmd) + "\n")
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                cwd=self.workdir, preexec_fn=die_with_parent,
            )
        try:
            self.wait_ready(ready_timeout)
        except BaseException:
            self.stop()
            raise

    def wait_ready(self, timeout: float) -> None:
        """Poll with Binding requests until one is answered (bounded)."""
        deadline = time.monotonic() + timeout
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.bind((LOOPBACK, 0))
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise RuntimeError(
                        f"{self.kind} exited with {self.proc.returncode} before answering:\n{self.log_tail()}"
                    )
                req = stunclient.binding_request()
                s.sendto(req.encode(), self.address)
                got = stunclient.recv_from(s, 0.2)
                if got is None:
                    continue
                try:
                    resp = stunclient.StunMessage.decode(got[0])
                except stunclient.StunDecodeError:
                    continue
                if resp.transaction_id == req.transaction_id and resp.cls == stunclient.Class.SUCCESS:
                    return
        raise RuntimeError(f"{self.kind} did not answer a Binding request within {timeout} s:\n{self.log_tail()}")

    def is_running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> list[str]:
        """Kill by PID (SIGTERM, then SIGKILL) and return what went wrong, if anything."""
        problems: list[str] = []
        proc = self.proc
        if proc is None:
            return problems
        if proc.poll() is not None:
            problems.append(f"{self.kind} (pid {proc.pid}) had already exited with {_describe(proc.returncode)}")
        else:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=STOP_TIMEOUT)
                problems.append(f"{self.kind} (pid {proc.pid}) did not exit within {STOP_TIMEOUT} s of SIGTERM")
            else:
                if proc.returncode not in (0, -signal.SIGTERM, 128 + signal.SIGTERM):
                    problems.append(f"{self.kind} (pid {proc.pid}) ended with {_describe(proc.returncode)} on SIGTERM")
        problems += [f"{self.kind} log shows: {line}" for line in self.crash_lines()]
        self.proc = None
        self.problems += problems
        return problems

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    def crash_lines(self) -> list[str]:
        found = []
        for line in self.log_text().splitlines():
            if any(m.search(line) for m in CRASH_MARKERS):
                found.append(line.strip())
        return found[:10]


def make_test_cert(directory: Path, common_name: str = "localhost") -> tuple[Path, Path]:
    """A self-signed certificate and key (cert.pem, pkey.pem) in `directory`, made by
    conf/make-test-cert.sh."""
    script = REPO_ROOT / "conf" / "make-test-cert.sh"
    subprocess.run([str(script), str(directory), common_name], check=True, capture_output=True, timeout=30)
    return Path(directory) / "cert.pem", Path(directory) / "pkey.pem"


def _describe(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"signal {-returncode}"
    return f"exit code {returncode}"


def server_kind() -> str:
    return os.environ.get("RELAY_SERVER", "relayd")


@contextlib.contextmanager
def running(server: RelayServer):
    """Starts `server`, yields it, stops it; fails the test (or module) if it had died or
    its log shows a crash."""
    server.start()
    try:
        yield server
    finally:
        problems = server.stop()
        if problems:
            pytest.fail(
                "server problems:\n  " + "\n  ".join(problems)
                + f"\nlog: {server.log_path}\n{server.log_tail()}",
                pytrace=False,
            )


@pytest.fixture(scope="module")
def relay_server(tmp_path_factory):
    """A server for the whole test module; teardown fails if it crashed."""
    server = RelayServer(server_kind(), tmp_path_factory.mktemp(f"{server_kind()}-server"))
    server.start()
    try:
        yield server
    finally:
        problems = server.stop()
        if problems:
            pytest.fail(
                "server problems:\n  " + "\n  ".join(problems)
                + f"\nlog: {server.log_path}\n{server.log_tail()}",
                pytrace=False,
            )


@pytest.fixture
def relay(relay_server):
    """The module's server; after each test, checks it is still running."""
    yield relay_server
    if not relay_server.is_running():
        pytest.fail(
            f"{relay_server.kind} died during this test ({_describe(relay_server.proc.returncode)})"
            f"\nlog: {relay_server.log_path}\n{relay_server.log_tail()}",
            pytrace=False,
        )


class Processes:
    """Helper processes (turnutils_*) started by a test, killed by PID at teardown."""

    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.procs: list[tuple[subprocess.Popen, Path]] = []

    def start(self, name: str, cmd: list[str]) -> tuple[subprocess.Popen, Path]:
        log = self.workdir / f"{name}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                    preexec_fn=die_with_parent)
        self.procs.append((proc, log))
        return proc, log

    def stop_all(self) -> None:
        for proc, _ in reversed(self.procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=STOP_TIMEOUT)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=STOP_TIMEOUT)


@pytest.fixture
def processes(tmp_path):
    procs = Processes(tmp_path)
    try:
        yield procs
    finally:
        procs.stop_all()


def pytest_report_header(config):
    kind = server_kind()
    binary = RelayServer.default_binary(kind) if kind in ("relayd", "coturn") else "?"
    return f"relay server under test: {kind} ({binary})"
