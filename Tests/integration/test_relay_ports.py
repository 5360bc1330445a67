"""Relay ports are the node's, not a loop's (RFC 8656 §7.2: the server picks the relayed
transport address; docs/architecture.md, "What is shared between loops").

Every UDP client is served by the loop the listeners' SO_REUSEPORT selector picks from a hash
of its address and port. These tests choose client ports that all hash to one loop of two, so a
range split into per-loop slices would refuse them (508) with half the ports still free.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time

import pytest

from conftest import LOOPBACK, RelayServer, ephemeral_ports, running, server_kind
from stunclient import Class, TurnClient
from test_adversarial import allocate, relayd_only, settle_metric

RANGE = 40
LOOPS = 2


def selected_loop(ip: str, port: int, loops: int = LOOPS) -> int:
    """The loop relayd's listener selector (`relayd_attach_listener_selector`) gives a datagram
    from ip:port: the last word of the source address xor the port times 0x9E3779B1, folded."""
    address = int.from_bytes(socket.inet_aton(ip), "big")
    a = ((port * 0x9E3779B1) & 0xFFFFFFFF) ^ address
    a = (a >> 16) ^ a
    return a % loops


def ports_of_one_loop(count: int, avoid: range, loop: int = 0) -> list[int]:
    """`count` free UDP ports on loopback whose datagrams the selector sends to `loop`."""
    chosen: list[int] = []
    # From the kernel's ephemeral ports: no relay range of the suite is drawn there (conftest).
    for port in ephemeral_ports():
        if port in avoid or selected_loop(LOOPBACK, port) != loop:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            try:
                s.bind((LOOPBACK, port))
            except OSError:
                continue
        chosen.append(port)
        if len(chosen) == count:
            return chosen
    raise RuntimeError(f"found only {len(chosen)} free ports of loop {loop}")


def code(resp) -> int | None:
    err = resp.error_code()
    return None if resp.cls == Class.SUCCESS else (err[0] if err else -1)


@pytest.fixture
def two_loop_server(tmp_path):
    s = RelayServer(server_kind(), tmp_path, relay_range_width=RANGE,
                    extra_args=[f"--relay-threads={LOOPS}"] if server_kind() == "relayd" else [])
    with running(s):
        yield s


def test_every_port_of_the_range_is_handed_out_before_508(two_loop_server):
    """A range of N ports and N clients that all hash to one loop: all N allocate, the N+1st
    gets 508 (the same on coturn); on relayd a port freed by Refresh 0 goes to the next
    Allocate at once."""
    server = two_loop_server
    ports = ports_of_one_loop(RANGE + 1, avoid=server.relay_ports)
    clients = [TurnClient(server.address, bind_port=p) for p in ports]
    try:
        answers = [code(allocate(server, c, user=f"u{i}")) for i, c in enumerate(clients[:RANGE])]
        assert answers == [None] * RANGE, [(i, a) for i, a in enumerate(answers) if a is not None]
        relayed = {c.relayed[1] for c in clients[:RANGE]}
        assert relayed == set(server.relay_ports)
        assert code(allocate(server, clients[RANGE], user="last")) == 508
        if server.kind == "relayd":
            # The node's pool, once: not a sum of what every loop reads.
            assert settle_metric(server, "relayd_relay_ports_in_use", RANGE) == RANGE
            assert settle_metric(server, "relayd_relay_ports_free", 0) == 0
            # (coturn frees a deleted allocation's port only some time after Refresh 0.)
            freed = clients[0].relayed[1]
            assert clients[0].refresh(0).cls == Class.SUCCESS
            assert code(allocate(server, clients[RANGE], user="last")) is None
            assert clients[RANGE].relayed[1] == freed
    finally:
        for c in clients:
            c.close()


def open_descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


@relayd_only
def test_out_of_descriptors_is_508_at_once_and_logged_once(tmp_path):
    """With the descriptor limit reached, an Allocate is answered 508 straight away (one failed
    socket() call, not one per port of the range), the condition is logged once however many
    Allocates meet it, and relayd goes on: a freed descriptor serves the next Allocate."""
    server = RelayServer("relayd", tmp_path, relay_range_width=RANGE, extra_args=["--relay-threads=1"])
    with running(server):
        pid = server.proc.pid
        clients = [TurnClient(server.address) for _ in range(6)]
        try:
            # Room for exactly two more descriptors: two relay sockets.
            limit = open_descriptors(pid) + 2
            subprocess.run(["prlimit", f"--pid={pid}", f"--nofile={limit}:{limit}"], check=True)
            assert [code(allocate(server, c, user=f"d{i}")) for i, c in enumerate(clients[:2])] == [None, None]
            started = time.monotonic()
            assert [code(allocate(server, c, user=f"x{i}")) for i, c in enumerate(clients[2:5])] == [508] * 3
            assert time.monotonic() - started < 3.0
            logged = [line for line in server.log_text().splitlines() if "out of file descriptors" in line]
            assert len(logged) == 1, logged
            # A Binding is still answered, and a freed descriptor serves the next Allocate.
            assert clients[5].binding().cls == Class.SUCCESS
            assert clients[0].refresh(0).cls == Class.SUCCESS
            time.sleep(0.2)  # the deleted allocation's socket closes at the end of the loop's pass
            assert code(allocate(server, clients[5], user="again")) is None
        finally:
            for c in clients:
                c.close()
