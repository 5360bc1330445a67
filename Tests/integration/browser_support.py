"""Headless Chromium under chromedriver for the browser test, with every process
accounted for by PID, plus the small "app server" the test page talks to.

- `Browser` starts Debian's chromedriver itself (so it has its PID and dies with
  pytest), connects selenium to it, and at teardown quits the session and then
  kills, by PID, chromedriver and every process it had started (Chromium's
  browser, zygote, renderer, GPU and utility processes).
- `AppServer` is a stand-in for a real application's backend on 127.0.0.1: it
  serves Tests/integration/browser/ and answers GET /ice-servers?user=... by
  asking relayd's credential service (POST /api/v1/credentials, format
  ice-servers) with the API token that only it knows, passing the JSON through.
"""

from __future__ import annotations

import http.server
import json
import os
import shutil
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from conftest import LOOPBACK, STOP_TIMEOUT, die_with_parent, free_port

PAGE_DIR = Path(__file__).resolve().parent / "browser"

# Flags: --no-sandbox because CI runs as root; the autoplay policy lets the page's
# AudioContext run without a user gesture. (Chromium verifies the certificate of a
# turns: server: the test adds --ignore-certificate-errors-spki-list with the hash of
# relayd's self-signed test key, see spki_hash(), which trusts that one key only.)
# --allow-loopback-in-peer-connection: Chromium's WebRTC network list leaves out
# loopback interfaces, so on a machine (or CI container) whose only interface is
# `lo` it has no network to open a socket towards the TURN server on and gathers no
# candidate at all (the call times out in "new"). With the flag the loopback
# interface counts; where another interface exists, Chromium uses either.
# WebRTC's default IP handling policy is kept (relay-only is the page's own
# iceTransportPolicy).
CHROMIUM_FLAGS = [
    "--allow-loopback-in-peer-connection",
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--autoplay-policy=no-user-gesture-required",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-extensions",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--metrics-recording-only",
    "--mute-audio",
    "--window-size=800,600",
]


def missing_browser_tools() -> list[str]:
    """What the browser test needs and this machine lacks, named for the failure message."""
    missing = []
    if chromium_binary() is None:
        missing.append("chromium (Debian package chromium)")
    if shutil.which("chromedriver") is None:
        missing.append("chromedriver (Debian package chromium-driver)")
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing.append("Python package selenium")
    return missing


def chromium_binary() -> str | None:
    """The real Chromium binary (Debian's /usr/bin/chromium is a wrapper script)."""
    for candidate in ("/usr/lib/chromium/chromium",):
        if os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("chromium") or shutil.which("chromium-browser")


def spki_hash(cert_path: Path) -> str:
    """base64(SHA-256(SubjectPublicKeyInfo)) of a PEM certificate: the form Chromium's
    --ignore-certificate-errors-spki-list takes. (cryptography comes with aiortc.)"""
    import base64
    import hashlib

    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    cert = x509.load_pem_x509_certificate(Path(cert_path).read_bytes())
    spki = cert.public_key().public_bytes(serialization.Encoding.DER,
                                          serialization.PublicFormat.SubjectPublicKeyInfo)
    return base64.b64encode(hashlib.sha256(spki).digest()).decode()


# --- processes -------------------------------------------------------------------
#
# A process is identified by (PID, start time in clock ticks since boot, field 22 of
# /proc/PID/stat), so a PID that was reused by an unrelated process after Chromium's
# exited is never signalled.


def _stat(pid: int) -> list[str] | None:
    """Fields 3.. of /proc/PID/stat (state, ppid, ...), or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode(errors="replace")
    except OSError:
        return None
    # pid (comm) state ppid ...; comm may contain spaces and parentheses.
    return stat[stat.rfind(")") + 2:].split()


def _identity(pid: int) -> tuple[int, str] | None:
    fields = _stat(pid)
    return (pid, fields[19]) if fields and len(fields) > 19 else None


def descendants(pid: int) -> set[tuple[int, str]]:
    """(PID, start time) of every live descendant of `pid`."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat(int(entry))
            if fields and len(fields) > 1:
                children.setdefault(int(fields[1]), []).append(int(entry))
    found, stack = set(), [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            ident = _identity(child)
            if ident:
                found.add(ident)
            stack.append(child)
    return found


def _alive(ident: tuple[int, str]) -> bool:
    fields = _stat(ident[0])
    return bool(fields) and len(fields) > 19 and fields[19] == ident[1] and fields[0] != "Z"


def kill_processes(idents: set[tuple[int, str]], timeout: float = STOP_TIMEOUT) -> None:
    """SIGTERM each process still alive (same PID and start time), wait (bounded), then
    SIGKILL what is left."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for ident in idents:
            if _alive(ident):
                try:
                    os.kill(ident[0], sig)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and any(_alive(i) for i in idents):
            time.sleep(0.05)
        if not any(_alive(i) for i in idents):
            return


class Browser:
    """chromedriver + headless Chromium, driven through selenium."""

    def __init__(self, workdir: Path, extra_flags: list[str] | None = None):
        self.workdir = Path(workdir)
        self.extra_flags = list(extra_flags or [])
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.driver_log = self.workdir / "chromedriver.log"
        self.chrome_log = self.workdir / "chromium.log"
        self.proc: subprocess.Popen | None = None
        self.driver = None
        self.known: set[tuple[int, str]] = set()

    def start(self, ready_timeout: float = 15.0) -> None:
        from selenium import webdriver

        port = free_port()
        with open(self.workdir / "chromedriver.out", "wb") as out:
            self.proc = subprocess.Popen(
                [shutil.which("chromedriver"), f"--port={port}", f"--log-path={self.driver_log}",
                 "--allowed-ips=127.0.0.1"],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, preexec_fn=die_with_parent,
            )
        url = f"http://{LOOPBACK}:{port}"
        deadline = time.monotonic() + ready_timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"chromedriver exited with {self.proc.returncode}; see {self.driver_log}")
            try:
                with urllib.request.urlopen(url + "/status", timeout=1) as resp:
                    if json.load(resp).get("value", {}).get("ready"):
                        break
            except (OSError, ValueError):
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"chromedriver not ready within {ready_timeout} s; see {self.driver_log}")
            time.sleep(0.1)

        options = webdriver.ChromeOptions()
        options.binary_location = chromium_binary()
        for flag in CHROMIUM_FLAGS + self.extra_flags:
            options.add_argument(flag)
        options.add_argument(f"--user-data-dir={self.workdir / 'profile'}")
        options.add_argument("--enable-logging=stderr")
        options.add_argument("--v=0")
        self.driver = webdriver.Remote(command_executor=url, options=options)
        self.driver.set_page_load_timeout(15)
        self.known |= descendants(self.proc.pid)

    def browser_version(self) -> str:
        caps = self.driver.capabilities if self.driver else {}
        return f"{caps.get('browserName', '?')} {caps.get('browserVersion', '?')}"

    def stop(self) -> None:
        if self.proc is None:
            return
        self.known |= descendants(self.proc.pid)
        if self.driver is not None:
            # Quitting closes Chromium cleanly; bounded by selenium's HTTP timeout,
            # and whatever survives is killed below anyway.
            done = threading.Event()

            def quit_driver():
                try:
                    self.driver.quit()
                except Exception:  # noqa: BLE001 - teardown goes on regardless
                    pass
                done.set()

            threading.Thread(target=quit_driver, daemon=True).start()
            done.wait(10)
            self.driver = None
        self.known |= descendants(self.proc.pid)
        kill_processes(self.known)
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=STOP_TIMEOUT)
        self.proc = None

    def leftover_pids(self) -> list[int]:
        return sorted(i[0] for i in self.known if _alive(i))


# --- the app server -----------------------------------------------------------------


class AppServer:
    """Serves the test page and proxies GET /ice-servers to relayd's credential service."""

    def __init__(self, relay, ttl: int = 600):
        self.relay = relay
        self.ttl = ttl
        self.requests: list[str] = []
        app = self

        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, directory=str(PAGE_DIR), **kwargs)

            def log_message(self, fmt, *args):  # keep pytest's output clean
                app.requests.append(fmt % args)

            def do_GET(self):  # noqa: N802 - http.server's naming
                parsed = urllib.parse.urlsplit(self.path)
                if parsed.path == "/ice-servers":
                    return self.ice_servers(urllib.parse.parse_qs(parsed.query))
                return super().do_GET()

            def ice_servers(self, query):
                user = (query.get("user") or ["browser"])[0]
                status, body = app.fetch_ice_servers(user)
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Cache-Control", "no-store")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = http.server.ThreadingHTTPServer((LOOPBACK, 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def fetch_ice_servers(self, user: str) -> tuple[int, bytes]:
        """What the app's backend does: ask relayd for credentials with its bearer token."""
        request = urllib.request.Request(
            self.relay.api_url + "/api/v1/credentials",
            data=json.dumps({"user": user, "ttl": self.ttl, "format": "ice-servers"}).encode(),
            headers={"Authorization": f"Bearer {self.relay.api_token}", "Content-Type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=5) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()
        except OSError as exc:
            return 502, json.dumps({"error": "relayd_unreachable", "message": str(exc)}).encode()

    def __enter__(self) -> "AppServer":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)

