"""Helpers for the flood tests (test_flood.py, test_shared_nat.py): a bounded non-blocking
flood from one UDP socket, and one sample of relayd's /metrics."""

from __future__ import annotations

import socket
import time
from typing import Callable

from conftest import RelayServer


def flood(sock: socket.socket, address: tuple[str, int], next_request: Callable[[], bytes], seconds: float,
          per_round: int = 50, pause: float = 0.001, settle: float = 0.5) -> tuple[int, int]:
    """Sends `next_request()` from `sock` (made non-blocking) as fast as it takes them for
    `seconds`, counting the answers, then collects late answers for `settle` seconds.
    Returns (sent, answered)."""
    sock.setblocking(False)
    sent = answered = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for _ in range(per_round):
            try:
                sock.sendto(next_request(), address)
                sent += 1
            except BlockingIOError:
                break
        while True:
            try:
                sock.recv(2048)
                answered += 1
            except BlockingIOError:
                break
        time.sleep(pause)
    end = time.monotonic() + settle
    while time.monotonic() < end:
        try:
            sock.recv(2048)
            answered += 1
        except BlockingIOError:
            time.sleep(0.01)
    return sent, answered


def metric(server: RelayServer, name: str, **labels) -> float:
    """One sample of relayd's /metrics (0 when absent)."""
    text = server.http("GET", "/metrics", headers={"Authorization": f"Bearer {server.api_token}"}).body.decode()
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    for line in text.splitlines():
        if line.startswith(name + ("{" + want + "}" if want else " ")):
            return float(line.rsplit(" ", 1)[1])
    return 0.0
