#!/usr/bin/env python3
"""Live upgrades between two relayd builds, both ways (docs/live-upgrade.md, "Versions").

    scripts/upgrade-compat.py OLD NEW

OLD and NEW are relayd binaries, say the release a node runs and the one to install. For each of
OLD -> NEW, NEW -> OLD and NEW -> NEW, a relayd started from a copy of the first serves a TLS
client and a plain TCP client, each with an allocation; the copy is then replaced by the second
binary (as a package upgrade replaces it) and sent SIGUSR2. Checked: the upgrade succeeds, both
allocations still answer a Refresh, and the old process exits once nothing it kept is left (a TLS
session the heir's protocol cannot take stays with it and drains there). Loopback only; every
process is stopped by PID; about 10 s a direction.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "Tests" / "integration"))

from conftest import free_port  # noqa: E402
from streamclient import StreamTurnClient  # noqa: E402
from stunclient import rest_credentials  # noqa: E402

SECRET = "upgrade-compat-secret"


def wait(predicate, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def accepts(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        return True
    except OSError:
        return False


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def direction(first: str, second: str, label: str, work: Path) -> list[str]:
    """One upgrade from `first` to `second`; the problems found."""
    d = work / label
    d.mkdir()
    subprocess.run([str(ROOT / "conf" / "make-test-cert.sh"), str(d)], check=True, capture_output=True)
    binary = d / "relayd"
    shutil.copy(first, binary)
    (d / "relayd.conf").write_text("")
    port, tls_port, api = free_port(), free_port(), free_port()
    log = d / "relayd.log"
    command = [
        str(binary), "-c", str(d / "relayd.conf"), "--listening-ip=127.0.0.1", f"--listening-port={port}",
        f"--tls-listening-port={tls_port}", f"--cert={d / 'cert.pem'}", f"--pkey={d / 'pkey.pem'}",
        "--relay-ip=127.0.0.1", "--use-auth-secret", f"--static-auth-secret={SECRET}", "--realm=compat",
        "--no-dtls", "--allow-loopback-peers", "--api-listening-ip=127.0.0.1", f"--api-listening-port={api}",
        f"--log-file={log}", "--drain-timeout=30",
    ]
    old = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    heirs: list[int] = []
    clients = []
    problems: list[str] = []
    try:
        if not wait(lambda: accepts(tls_port), 10):
            return [f"{label}: {first} did not start (see {log})"]
        tls = StreamTurnClient(("127.0.0.1", tls_port), tls=True)
        clients.append(tls)
        tls.allocate(*rest_credentials(SECRET, "tls-client"))
        tcp = StreamTurnClient(("127.0.0.1", port))
        clients.append(tcp)
        tcp.allocate(*rest_credentials(SECRET, "tcp-client"))
        # The next binary at the same path, a new file: the running process keeps its own.
        shutil.copy(second, d / "relayd.next")
        os.rename(d / "relayd.next", binary)
        old.send_signal(signal.SIGUSR2)
        if not wait(lambda: re.search(r"upgrade_(succeeded|failed)", log.read_text()) is not None, 30):
            return [f"{label}: no upgrade outcome logged (see {log})"]
        text = log.read_text()
        heirs = [int(pid) for pid in re.findall(r"pid (\d+) serves now", text)]
        if "upgrade_succeeded" not in text:
            return [f"{label}: the upgrade failed: {re.findall(r'.*upgrade_failed.*', text)[-1:]}"]
        for client, name in ((tls, "TLS"), (tcp, "TCP")):
            try:
                client.refresh(600)
            except Exception as error:  # noqa: BLE001 (any failure is the finding)
                problems.append(f"{label}: the {name} client's allocation did not answer a Refresh: {error!r}")
        for client in clients:
            client.close()
        clients = []
        if not wait(lambda: old.poll() is not None, 10):
            problems.append(f"{label}: the old process still runs after its clients left")
        # "and N TCP connections" (builds before the TLS count), or ", N TCP and M TLS connections".
        moved = sum(int(n) for n in re.findall(r"and (\d+) TCP connections from the live upgrade", text))
        moved += sum(int(a) + int(b) for a, b in re.findall(r", (\d+) TCP and (\d+) TLS connections from the live upgrade", text))
        stayed = "stays" if moved < 2 else "moved"
        print(f"{label}: upgrade succeeded; {moved} of 2 stream connections moved (the TLS session {stayed})")
        return problems
    finally:
        for client in clients:
            client.close()
        for pid in heirs:
            if alive(pid):
                os.kill(pid, signal.SIGTERM)
                if not wait(lambda: not alive(pid), 10):
                    os.kill(pid, signal.SIGKILL)
        if old.poll() is None:
            old.kill()
            old.wait()


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    old, new = (str(Path(p).resolve()) for p in sys.argv[1:])
    problems: list[str] = []
    with tempfile.TemporaryDirectory(prefix="upgrade-compat-") as work:
        for first, second, label in ((old, new, "old-to-new"), (new, old, "new-to-old"), (new, new, "new-to-new")):
            problems += direction(first, second, label, Path(work))
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
