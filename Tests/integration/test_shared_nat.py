"""Per-source limits that cost attackers and not users behind one shared NAT
(docs/rate-limits.md). An office, a campus or a carrier-grade NAT puts thousands of users
behind one address, and they start calls together: with the default configuration, 4,000 UDP
allocations with valid REST credentials from one address all succeed in a few seconds, and
2,000 TLS connections from one address opened at once all allocate, and a handshake flood
from one address leaves a second address served. A flood of Allocates with a wrong
password from one address is throttled (its 401s stop, counted), while users with valid
credentials, behind the same address or another one, are still served.

The servers run with relayd's own defaults (no test overrides of the per-source limits).
coturn serves the same load with its defaults; it does not throttle the wrong-password flood.
Loopback only, bounded in time."""

from __future__ import annotations

import selectors
import socket
import struct
import threading
import time

import pytest

from conftest import RelayServer, running, server_kind
from floods import flood, metric
from stunclient import Attr, Class, Method, StunMessage, TurnClient, long_term_key, rest_credentials
from streamclient import StreamTurnClient, client_tls_context

UDP_ALLOCATIONS = 4000
TLS_ALLOCATIONS = 2000
IN_FLIGHT = 1000  # clients mid-handshake at once, as a NAT's users starting together
RTO = 0.5
ATTEMPTS = 7  # RFC 8489 §6.2.1's Rc
LOAD_TIMEOUT = 120.0
OTHER_SOURCE = "127.0.0.2"

# 4,000 allocations in a relay range of 6,000 ports and 1,000 TLS handshakes at once, each in a
# few seconds: alone (Tests/integration/README.md).
pytestmark = pytest.mark.serial


def requested_udp() -> tuple[int, bytes]:
    return (Attr.REQUESTED_TRANSPORT, struct.pack("!B3x", 17))


class PendingAllocation:
    """One client behind the NAT: its own socket (own 5-tuple), the 401 dance, retransmissions."""

    def __init__(self, server: RelayServer, index: int, source: str):
        self.server = server
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((source, 0))
        self.sock.setblocking(False)
        self.username, self.password = rest_credentials(server.secret, f"nat{index}")
        self.result: str | None = None  # "ok" or the failure
        self.challenged = False
        self.start(StunMessage(Method.ALLOCATE, Class.REQUEST).add(*requested_udp()), key=None)

    def start(self, request: StunMessage, key: bytes | None) -> None:
        self.request = request
        self.wire = request.encode(integrity_key=key)
        self.attempts = 0
        self.send()

    def send(self) -> None:
        self.attempts += 1
        self.next_send = time.monotonic() + RTO * 2 ** (self.attempts - 1)
        self.sock.sendto(self.wire, self.server.address)

    def on_datagram(self, data: bytes) -> None:
        if len(data) < 20 or data[8:20] != self.request.transaction_id:
            return
        response = StunMessage.decode(data)
        err = response.error_code()
        if not self.challenged and response.cls == Class.ERROR and err and err[0] == 401:
            self.challenged = True
            realm, nonce = response.text(Attr.REALM), response.get(Attr.NONCE)
            signed = StunMessage(Method.ALLOCATE, Class.REQUEST).add(*requested_udp())
            signed.add(Attr.USERNAME, self.username.encode()).add(Attr.REALM, realm.encode()).add(Attr.NONCE, nonce)
            self.start(signed, key=long_term_key(self.username, realm, self.password))
        elif response.cls == Class.SUCCESS:
            self.result = "ok"
        else:
            self.result = f"error {err}"

    def on_timer(self, now: float) -> None:
        if now < self.next_send:
            return
        if self.attempts >= ATTEMPTS:
            self.result = f"no answer ({'signed' if self.challenged else 'challenge'})"
        else:
            self.send()


def allocate_many(server: RelayServer, count: int, source: str = "127.0.0.1") -> tuple[dict[str, int], float]:
    """`count` UDP allocations from `source`, up to IN_FLIGHT at once; returns the outcomes and
    the seconds it took. The sockets stay open (and the allocations live) until the end."""
    selector = selectors.DefaultSelector()
    clients: list[PendingAllocation] = []
    outcomes: dict[str, int] = {}
    active: set[PendingAllocation] = set()
    started = time.monotonic()
    deadline = started + LOAD_TIMEOUT
    try:
        while (len(clients) < count or active) and time.monotonic() < deadline:
            while len(clients) < count and len(active) < IN_FLIGHT:
                client = PendingAllocation(server, len(clients), source)
                clients.append(client)
                active.add(client)
                selector.register(client.sock, selectors.EVENT_READ, client)
            for key, _ in selector.select(timeout=0.05):
                client = key.data
                while client.result is None:
                    try:
                        client.on_datagram(client.sock.recv(2048))
                    except BlockingIOError:
                        break
            now = time.monotonic()
            for client in list(active):
                if client.result is None:
                    client.on_timer(now)
                if client.result is not None:
                    outcomes[client.result] = outcomes.get(client.result, 0) + 1
                    active.discard(client)
                    selector.unregister(client.sock)
        elapsed = time.monotonic() - started
        outcomes["unfinished"] = count - sum(outcomes.values())
        return outcomes, elapsed
    finally:
        selector.close()
        for client in clients:
            client.sock.close()


@pytest.fixture
def defaults_udp(tmp_path):
    # The test's own 4,000 client sockets take ephemeral ports, some inside the relay range: room for both.
    server = RelayServer(server_kind(), tmp_path / "srv", relay_range_width=UDP_ALLOCATIONS * 3 // 2,
                         suite_limits=False)
    with running(server):
        yield server


def test_4000_allocations_from_one_address_all_succeed(defaults_udp):
    outcomes, elapsed = allocate_many(defaults_udp, UDP_ALLOCATIONS)
    print(f"{defaults_udp.kind}: {UDP_ALLOCATIONS} allocations from one address in {elapsed:.2f} s "
          f"({UDP_ALLOCATIONS / elapsed:.0f}/s): {outcomes}")
    assert outcomes.get("ok") == UDP_ALLOCATIONS, outcomes


@pytest.fixture
def defaults_tls(tmp_path):
    server = RelayServer(server_kind(), tmp_path / "srv", relay_range_width=TLS_ALLOCATIONS + 500,
                         suite_limits=False, streams=True)
    with running(server):
        yield server


def open_all(count: int, open_one, workers: int = 64) -> list:
    """`count` connections opened together (a pool of threads), before any of them is used."""
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(lambda i: open_one(i), range(count)))


def test_2000_tls_connections_opened_at_once_from_one_address_all_allocate(defaults_tls):
    """A whole office reaches `turns:` from one address at 9:00: 2,000 TLS connections are opened
    together, handshakes done, before any of them allocates (all pending at once, no pacing),
    then each allocates; all 2,000 allocations are held at once (docs/rate-limits.md)."""
    context = client_tls_context()
    started = time.monotonic()
    clients: list[StreamTurnClient] = []
    try:
        clients = open_all(TLS_ALLOCATIONS, lambda i: StreamTurnClient(
            defaults_tls.tls_address, tls=True, context=context, timeout=20.0))
        for i, client in enumerate(clients):
            client.allocate(*defaults_tls.credentials(f"office{i}"))
            assert client.relayed is not None
        elapsed = time.monotonic() - started
        print(f"{defaults_tls.kind}: {TLS_ALLOCATIONS} TLS connections from one address opened at once, "
              f"all allocated after {elapsed:.2f} s")
        # Every connection still holds its allocation: a Refresh on each succeeds.
        for client in clients:
            assert client.refresh(600).cls == Class.SUCCESS
    finally:
        for client in clients:
            client.close()


HANDSHAKE_FLOOD = 5000


@pytest.mark.skipif(server_kind() != "relayd", reason="relayd's max-pending-connections and its per-source share")
def test_a_handshake_flood_from_one_address_leaves_another_address_served(defaults_tls):
    """5,000 TCP connections from one address to the TLS port that never send a ClientHello:
    the flooding address is held to its share (half of max-pending-connections, 5,000), and
    clients from a second address complete TLS and allocate at their first try while the flood
    holds its connections."""
    server = defaults_tls
    flood_socks: list[socket.socket] = []
    legit: list[StreamTurnClient] = []
    try:
        for _ in range(HANDSHAKE_FLOOD):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.settimeout(5.0)
            flood_socks.append(sock)
            try:
                sock.connect(server.tls_address)
            except OSError:
                pass  # the kernel's backlog was full for a moment: this one never got in
        refused = metric(server, "relayd_stream_connections_refused_total", reason="pending_share")
        deadline = time.monotonic() + 5.0
        while refused < HANDSHAKE_FLOOD // 2 - 100 and time.monotonic() < deadline:
            time.sleep(0.2)
            refused = metric(server, "relayd_stream_connections_refused_total", reason="pending_share")
        assert refused >= HANDSHAKE_FLOOD // 2 - 100, refused
        context = client_tls_context()
        for i in range(20):
            client = StreamTurnClient(server.tls_address, tls=True, context=context, timeout=5.0,
                                      source=OTHER_SOURCE)
            legit.append(client)
            client.allocate(*server.credentials(f"colleague{i}"))
            assert client.relayed is not None
        # The flood still held its share meanwhile (tls-handshake-timeout is 10 s).
        assert metric(server, "relayd_stream_connections_open") >= HANDSHAKE_FLOOD // 2
    finally:
        for client in legit:
            client.close()
        for sock in flood_socks:
            sock.close()


FLOOD_SECONDS = 3.0
LEGIT_PER_SOURCE = 200


@pytest.mark.skipif(server_kind() != "relayd", reason="relayd's auth-failure-rate-limit (coturn does not throttle)")
def test_wrong_password_flood_is_throttled_while_valid_users_are_served(defaults_udp):
    server = defaults_udp
    limit = 5  # auth-failure-rate-limit's default: 5/s, bursts of 10
    username, _ = rest_credentials(server.secret, "mallory")
    flooder = TurnClient(server.address)
    challenge = flooder.allocate_unauthenticated()
    realm, nonce = challenge.text(Attr.REALM), challenge.get(Attr.NONCE)
    wrong_key = long_term_key(username, realm, "not-the-password")
    dropped_before = metric(server, "relayd_dropped_packets_total", reason="auth_failure_limit")
    legit: dict[str, list] = {"127.0.0.1": [], OTHER_SOURCE: []}

    def serve_legit(source: str):
        # Sequential allocations, each answered at the first try (no retransmission allowed).
        for i in range(LEGIT_PER_SOURCE):
            try:
                with TurnClient(server.address, bind_host=source, rto=2.0, attempts=1) as client:
                    client.allocate(*server.credentials(f"legit-{source}-{i}"))
                    client.refresh(0)
                    legit[source].append("ok")
            except Exception as e:  # reported below
                legit[source].append(repr(e))

    def wrong_password() -> bytes:
        req = StunMessage(Method.ALLOCATE, Class.REQUEST).add(*requested_udp())
        req.add(Attr.USERNAME, username.encode()).add(Attr.REALM, realm.encode()).add(Attr.NONCE, nonce)
        return req.encode(integrity_key=wrong_key)

    threads = [threading.Thread(target=serve_legit, args=(s,)) for s in legit]
    for t in threads:
        t.start()
    try:
        sent, answers = flood(flooder.sock, server.address, wrong_password, FLOOD_SECONDS, per_round=20, pause=0.002)
    finally:
        for t in threads:
            t.join(timeout=LOAD_TIMEOUT)
        flooder.close()
    dropped = metric(server, "relayd_dropped_packets_total", reason="auth_failure_limit") - dropped_before
    print(f"flood: {sent} wrong-password Allocates in {FLOOD_SECONDS} s, {answers} answered, {dropped:.0f} dropped; "
          f"legit: {[(s, r.count('ok')) for s, r in legit.items()]}")
    assert sent >= 20 * limit * FLOOD_SECONDS, f"the flood was too slow to test anything ({sent} sent)"
    allowed = 2 * limit + limit * (FLOOD_SECONDS + 1.5)
    assert answers <= allowed, f"{answers} 401s to {sent} wrong passwords (limit ~{allowed})"
    assert answers >= 2 * limit, f"only {answers} answers: the burst should be answered"
    assert dropped >= sent - answers - 5, (dropped, sent, answers)
    for source, results in legit.items():
        assert results == ["ok"] * LEGIT_PER_SOURCE, (source, [r for r in results if r != "ok"][:3])
