"""One port for TURN over TCP, TLS, UDP and DTLS, the HTTP API on it too, and HAProxy in front with PROXY protocol v2
(docs/tls.md, "One port for everything" and "Behind a load balancer").

`listening-port` equal to `tls-listening-port` makes one TCP listener whose connections' first
byte says TLS (22) or STUN (0-3); anything else is closed and counted, and so is a client that
sends nothing within `tls-handshake-timeout`. The UDP listener of that port takes DTLS too,
sorted by the first byte (RFC 7983 §7). coturn's turnutils_uclient relays over all four
transports on that one port; curl and Chromium reach the HTTPS API there. HAProxy (Debian's) in front, with `send-proxy-v2`, gives relayd the
client's real address: the client binds 127.0.0.2 or 127.0.0.3, HAProxy connects from 127.0.0.1,
and XOR-MAPPED-ADDRESS and the per-source connection caps see the client's address.
"""

from __future__ import annotations

import http.client
import json
import shutil
import socket
import ssl
import struct
import subprocess
import time
import urllib.request

import pytest

from conftest import RelayServer, free_port, running, server_kind
from floods import metric
from lifecycle import eventually
import stunclient
from streamclient import FrameReader, StreamTurnClient, client_tls_context
from stunclient import Attr, StunMessage
from test_tcp_tls import CLIENTS, MESSAGES, require_report, run_uclient
from test_uclient import parse_report, start_peer

pytestmark = pytest.mark.skipif(server_kind() != "relayd", reason="relayd's shared port and PROXY protocol")

HAPROXY_READY = 10.0
PROXY_SIGNATURE = b"\r\n\r\n\x00\r\nQUIT\n"


def shared_server(tmp_path, extra: list[str] | None = None) -> RelayServer:
    server = RelayServer("relayd", tmp_path / "relayd", streams=True, extra_args=extra or [])
    server.tls_port = server.port
    return server


def proxy_v2(source: tuple[str, int], destination: tuple[str, int]) -> bytes:
    """A PROXY protocol v2 header (PROXY command, TCP over IPv4)."""
    block = socket.inet_aton(source[0]) + socket.inet_aton(destination[0]) + struct.pack(
        "!HH", source[1], destination[1])
    return PROXY_SIGNATURE + bytes([0x21, 0x11]) + struct.pack("!H", len(block)) + block


def closed_by_server(sock: socket.socket, timeout: float = 5.0) -> bool:
    sock.settimeout(timeout)
    try:
        while sock.recv(4096):
            pass
        return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False


def test_uclient_relays_over_tcp_tls_and_udp_on_one_port(tmp_path, processes):
    with running(shared_server(tmp_path)) as s:
        peer = start_peer(processes)
        for transport in ("tcp", "tls"):
            report = require_report(*run_uclient(s, processes, transport, ["-c"], peer, name=f"uclient-{transport}"))
            assert report.lost == 0, (transport, report)
            assert report.recv_msgs >= CLIENTS * MESSAGES, (transport, report)
        # UDP and DTLS: the same port number, one UDP listener that sorts datagrams by their
        # first byte (RFC 7983 §7).
        for flags in ([], ["-S"]):
            cmd = [shutil.which("turnutils_uclient") or "turnutils_uclient", *flags, "-c", "-m", str(CLIENTS),
                   "-n", str(MESSAGES), "-l", "120", "-z", "20", "-W", s.secret, "-u", "uclient", "-p", str(s.port),
                   "-e", "127.0.0.1", "-r", str(peer), s.host]
            udp = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
            report = require_report(parse_report(udp.stdout + udp.stderr), udp.stdout + udp.stderr)
            assert report.lost == 0, (flags, report)
            assert report.recv_msgs >= CLIENTS * MESSAGES, (flags, report)
        assert metric(s, "relayd_stream_connections_accepted_total", transport="tcp") >= CLIENTS
        assert metric(s, "relayd_stream_connections_accepted_total", transport="tls") >= CLIENTS
        assert metric(s, "relayd_dtls_handshakes_total", result="ok") >= CLIENTS


def test_alpn_and_python_clients_on_the_shared_port(tmp_path):
    with running(shared_server(tmp_path)) as s:
        with StreamTurnClient(s.address, tls=True, context=client_tls_context(alpn=["stun.turn"])) as client:
            client.allocate(*s.credentials("tls-user"))
            assert client.sock.selected_alpn_protocol() == "stun.turn"
            assert client.mapped[0] == "127.0.0.1"
        with StreamTurnClient(s.address) as client:
            client.allocate(*s.credentials("tcp-user"))
            assert client.relayed is not None
        # openssl s_client, a third implementation of the TLS side.
        out = subprocess.run(
            ["openssl", "s_client", "-connect", f"{s.host}:{s.port}", "-alpn", "stun.turn"],
            input="", capture_output=True, text=True, timeout=20)
        assert "ALPN protocol: stun.turn" in out.stdout, out.stdout[-2000:]


def test_unknown_first_bytes_and_silence_are_closed_and_counted(tmp_path):
    with running(shared_server(tmp_path, ["--tls-handshake-timeout=1"])) as s:
        garbage = socket.create_connection(s.address, timeout=5)
        garbage.sendall(b"\xff\xfe garbage")
        assert closed_by_server(garbage)
        garbage.close()
        silent = socket.create_connection(s.address, timeout=5)
        started = time.monotonic()
        assert closed_by_server(silent, timeout=5), "a client that sends nothing was never closed"
        assert time.monotonic() - started < 4
        silent.close()
        assert eventually(lambda: metric(s, "relayd_stream_connections_closed_total", reason="unknown_protocol") >= 1)
        assert eventually(lambda: metric(s, "relayd_stream_connections_closed_total", reason="opening_timeout") >= 1)
        # A PROXY header from a source proxy-protocol-from does not list: closed, never trusted.
        forged = socket.create_connection(s.address, timeout=5)
        forged.sendall(proxy_v2(("203.0.113.9", 4000), (s.host, s.port)))
        assert closed_by_server(forged)
        forged.close()
        assert eventually(lambda: metric(s, "relayd_stream_connections_closed_total", reason="bad_proxy_header") >= 1)
        # Datagrams in DTLS's first-byte range that are no ClientHello: dropped and counted;
        # a STUN Binding on the same UDP port is still answered.
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
            udp.bind(("127.0.0.1", 0))
            for junk in (b"\x16\xfe\xfd" + bytes(40), b"\x14" + bytes(20), b"\x3f", b"\x17\xfe\xfd" + bytes(3000)):
                udp.sendto(junk, s.address)
            assert eventually(lambda: metric(s, "relayd_dtls_shared_port_dropped_total") >= 4)
            udp.settimeout(5)
            udp.sendto(stunclient.binding_request().encode(), s.address)
            answer = StunMessage.decode(udp.recvfrom(2048)[0])
            assert answer.xor_address(Attr.XOR_MAPPED_ADDRESS) == udp.getsockname()
        assert s.is_running()


class HAProxy:
    """Debian's HAProxy in TCP mode in front of `backend`, sending PROXY protocol v2."""

    def __init__(self, processes, workdir, backend: tuple[str, int]):
        self.port = free_port()
        config = workdir / "haproxy.cfg"
        config.write_text(
            "global\n    maxconn 200\n"
            "defaults\n    mode tcp\n    timeout connect 5s\n    timeout client 60s\n    timeout server 60s\n"
            f"frontend turn\n    bind 127.0.0.1:{self.port}\n    default_backend relayd\n"
            f"backend relayd\n    server r1 {backend[0]}:{backend[1]} send-proxy-v2\n")
        haproxy = shutil.which("haproxy") or "/usr/sbin/haproxy"
        self.proc, self.log = processes.start("haproxy", [haproxy, "-db", "-f", str(config)])
        deadline = time.monotonic() + HAPROXY_READY
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"haproxy exited: {self.log.read_text(errors='replace')}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                time.sleep(0.1)
        pytest.fail("haproxy did not listen")

    @property
    def address(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)


@pytest.fixture
def behind_haproxy(tmp_path, processes):
    if shutil.which("haproxy") is None and not shutil.which("/usr/sbin/haproxy"):
        pytest.fail("haproxy is not installed: run scripts/install-test-deps.sh")
    server = shared_server(tmp_path, ["--proxy-protocol-from=127.0.0.1/32", "--max-connections-per-ip=1"])
    with running(server) as s:
        yield s, HAProxy(processes, tmp_path, s.address)


@pytest.mark.parametrize("tls", [False, True], ids=["tcp", "tls"])
def test_haproxy_gives_relayd_the_clients_address(behind_haproxy, tls):
    s, haproxy = behind_haproxy
    context = client_tls_context() if tls else None
    with StreamTurnClient(haproxy.address, tls=tls, context=context, source="127.0.0.2") as client:
        client.allocate(*s.credentials("behind"))
        local = client.sock.getsockname()
        assert client.mapped == ("127.0.0.2", local[1]), client.mapped
    assert f"{'tls' if tls else 'tcp'} 127.0.0.2:{local[1]}->" in s.log_text()


def test_connection_caps_count_the_clients_behind_the_balancer(behind_haproxy):
    """max-connections-per-ip=1: one connection from each client address behind HAProxy is
    served (at accept, all come from HAProxy's 127.0.0.1); a second from one of them is refused."""
    s, haproxy = behind_haproxy
    first = StreamTurnClient(haproxy.address, source="127.0.0.2")
    second = StreamTurnClient(haproxy.address, source="127.0.0.3")
    try:
        first.allocate(*s.credentials("first"))
        second.allocate(*s.credentials("second"))
        before = metric(s, "relayd_stream_connections_refused_total", reason="per_ip_limit")
        extra = socket.create_connection(haproxy.address, timeout=5, source_address=("127.0.0.2", 0))
        extra.sendall(b"\x00\x01\x00\x00\x21\x12\xa4\x42" + b"\x01" * 12)  # a Binding request
        assert closed_by_server(extra), "a second connection from 127.0.0.2 was served"
        extra.close()
        assert eventually(lambda: metric(s, "relayd_stream_connections_refused_total", reason="per_ip_limit") > before)
        # The two allocations live on.
        assert first.refresh(600).lifetime() == 600
        assert second.refresh(600).lifetime() == 600
    finally:
        first.close()
        second.close()


def test_a_malformed_header_from_the_balancers_range_is_closed(behind_haproxy):
    s, _ = behind_haproxy
    bad = socket.create_connection(s.address, timeout=5)
    bad.sendall(PROXY_SIGNATURE + bytes([0x31, 0x11]) + struct.pack("!H", 12) + b"\x00" * 12)  # version 3
    assert closed_by_server(bad)
    bad.close()
    assert eventually(lambda: metric(s, "relayd_stream_connections_closed_total", reason="bad_proxy_header") >= 1)
    # A header split across writes is read whole; the Binding answer maps the address it named.
    good = socket.create_connection(s.address, timeout=5)
    header = proxy_v2(("127.0.0.9", 5555), (s.host, s.port))
    good.sendall(header[:7])
    time.sleep(0.2)
    request = stunclient.binding_request()
    good.sendall(header[7:] + request.encode())
    frame = FrameReader(good).read_frame(5.0)
    good.close()
    assert frame is not None, "no Binding answer after a split PROXY header"
    assert StunMessage.decode(frame).xor_address(Attr.XOR_MAPPED_ADDRESS) == ("127.0.0.9", 5555)


def curl_credentials(server: RelayServer, scheme: str = "https", extra: list[str] | None = None):
    """`curl` asks the credential service on the shared port, as an app backend would."""
    url = f"{scheme}://localhost:{server.port}/api/v1/credentials"
    cmd = ["curl", "-sS", "--max-time", "10", "--resolve", f"localhost:{server.port}:127.0.0.1",
           "--cacert", str(server.cert_path), "-X", "POST", "-H", f"Authorization: Bearer {server.api_token}",
           "-H", "Content-Type: application/json", "-d", '{"user": "curl-user"}', "-w", "\n%{http_code}",
           *(extra or []), url]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
    body, _, status = out.stdout.rpartition("\n")
    return status, body, out.stderr


def test_the_https_api_shares_the_turn_port(tmp_path, processes):
    server = shared_server(tmp_path, ["--api-tls"])
    server.api_port = server.port
    with running(server) as s:
        # curl offers h2 and http/1.1 by ALPN; relayd picks http/1.1 (curl's default, and --no-alpn).
        for extra in ([], ["--no-alpn"], ["--http1.1", "--tlsv1.2", "--tls-max", "1.2"]):
            status, body, err = curl_credentials(s, extra=extra)
            assert status == "200", (extra, status, body, err)
            assert json.loads(body)["username"].endswith(":curl-user")
        # The API speaks HTTPS only: a request in the clear on the port is closed.
        with pytest.raises((ConnectionError, OSError, http.client.HTTPException)):
            conn = http.client.HTTPConnection(s.host, s.port, timeout=3)
            conn.request("GET", "/healthz")
            conn.getresponse()
        # TURN goes on on the same port, over TLS and TCP.
        peer = start_peer(processes)
        for transport in ("tls", "tcp"):
            report = require_report(*run_uclient(s, processes, transport, ["-c"], peer, name=f"uclient-{transport}"))
            assert report.lost == 0, (transport, report)
        assert metric_https(s, "relayd_stream_api_connections_total") >= 3


def metric_https(server: RelayServer, name: str) -> float:
    context = ssl.create_default_context(cafile=str(server.cert_path))
    conn = http.client.HTTPSConnection("localhost", server.port, context=context, timeout=5)
    try:
        conn.request("GET", "/metrics", headers={"Authorization": f"Bearer {server.api_token}"})
        text = conn.getresponse().read().decode()
    finally:
        conn.close()
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_a_plain_http_api_is_served_in_the_clear_and_over_tls(tmp_path):
    """Without api-tls the API speaks plain HTTP: on a shared port it is reached in the clear,
    and over TLS with TURN's certificate (ALPN http/1.1)."""
    server = shared_server(tmp_path)
    server.api_port = server.port
    with running(server) as s:
        assert s.http("GET", "/healthz").status == 200
        status, body, err = curl_credentials(s)
        assert status == "200", (status, body, err)
        status, body, err = curl_credentials(s, scheme="http")
        assert status == "200", (status, body, err)


def assert_limited_per_client(port: int, context: ssl.SSLContext | None = None) -> None:
    """With api-rate-limit=1, requests without a key through the balancer on `port` are limited
    per client address: 127.0.0.2 meets 429, 127.0.0.3 does not."""
    def status_from(source: str) -> int:
        conn = (http.client.HTTPSConnection("localhost", port, timeout=5, context=context, source_address=(source, 0))
                if context else http.client.HTTPConnection("127.0.0.1", port, timeout=5, source_address=(source, 0)))
        try:
            conn.request("GET", "/api/v1/credentials?user=x")  # no key: limited per client address
            return conn.getresponse().status
        finally:
            conn.close()

    statuses = [status_from("127.0.0.2") for _ in range(6)]
    assert 429 in statuses, statuses
    assert status_from("127.0.0.3") != 429


def test_the_api_sees_the_client_behind_haproxy(tmp_path, processes):
    """The API on the shared port behind HAProxy: its per-client rate limit counts the client
    the PROXY header named (api-rate-limit=1: 127.0.0.2 is limited, 127.0.0.3 is not)."""
    server = shared_server(tmp_path, ["--proxy-protocol-from=127.0.0.1/32", "--api-rate-limit=1"])
    server.api_port = server.port
    with running(server) as s:
        haproxy = HAProxy(processes, tmp_path, s.address)

        assert_limited_per_client(haproxy.port)


def test_a_chromium_turns_call_and_https_credentials_share_one_port(tmp_path):
    from browser_support import AppServer, Browser, missing_browser_tools, spki_hash
    from test_browser import run_call

    missing = missing_browser_tools()
    if missing:
        pytest.fail("browser test prerequisites missing: " + ", ".join(missing))
    server = shared_server(tmp_path, ["--api-tls"])
    server.api_port = server.port
    server.extra_args += [f"--advertised-uri=turns:localhost:{server.port}?transport=tcp"]
    with running(server) as s:
        status, body, err = curl_credentials(s)
        assert status == "200", (status, body, err)
        assert f"turns:localhost:{s.port}?transport=tcp" in json.loads(body)["uris"]

        class HTTPSApp(AppServer):
            def fetch_ice_servers(self, user: str):
                context = ssl.create_default_context(cafile=str(s.cert_path))
                request = urllib.request.Request(
                    f"https://localhost:{s.port}/api/v1/credentials",
                    data=json.dumps({"user": user, "ttl": 600, "format": "ice-servers"}).encode(),
                    headers={"Authorization": f"Bearer {s.api_token}", "Content-Type": "application/json"},
                    method="POST")
                with urllib.request.urlopen(request, timeout=5, context=context) as resp:
                    return resp.status, resp.read()

        chrome = Browser(tmp_path / "chromium", extra_flags=[f"--ignore-certificate-errors-spki-list={spki_hash(s.cert_path)}"])
        try:
            chrome.start()
            chrome.driver.set_script_timeout(60)
            with HTTPSApp(s) as app:
                report = run_call(chrome, app, "tls")
        finally:
            chrome.stop()
        (urls,) = report["iceServers"]
        assert urls == [f"turns:localhost:{s.port}?transport=tcp"], report["iceServers"]
        for side in ("a", "b"):
            local = report["stats"][side]["local"]
            assert (local["candidateType"], local["relayProtocol"]) == ("relay", "tls"), local
            assert report["stats"][side]["pair"]["bytesReceived"] > 0
        assert report["echoedIntact"]
        assert metric_https(s, "relayd_stream_api_connections_total") >= 2


def test_check_config_says_what_a_shared_api_port_does_not_use(tmp_path):
    from conftest import make_test_cert
    from test_check_config import check_config, warnings, write

    cert, key = make_test_cert(tmp_path / "tls")
    config = write(tmp_path, "\n".join([
        "listening-ip=192.0.2.10", "relay-ip=192.0.2.10", "use-auth-secret", "static-auth-secret=a-long-secret-1234",
        "realm=example.org", "listening-port=443", "tls-listening-port=443", "api-listening-port=443",
        "api-listening-ip=0.0.0.0", f"cert={cert}", f"pkey={key}", f"api-cert={cert}", f"api-pkey={key}",
        "proxy-protocol-from=10.0.0.0/24", "proxy-protocol-from=2001:db8::/64", ""]))
    result = check_config(config)
    assert result.returncode == 0, result.stderr
    said = "\n".join(warnings(result))
    assert "api-cert is not used" in said and "api-listening-ip is not used" in said, said
    assert "proxy-protocol-from" in result.stdout
    bad = write(tmp_path, config.read_text() + "proxy-protocol-from=10.0.0.0/33\n")
    result = check_config(bad)
    assert result.returncode != 0 and "proxy-protocol-from" in result.stderr and "relayd.conf:16: key" in result.stderr, result.stderr


def test_the_api_on_its_own_port_reads_proxy_headers(tmp_path, processes):
    """With proxy-protocol-from, the API on a port of its own is served by the loops too: HAProxy
    in front of it (send-proxy-v2) gives it the client's address (api-rate-limit=1 per client),
    over HTTPS with the API's certificate; a header from elsewhere is refused."""
    server = RelayServer("relayd", tmp_path / "relayd", streams=True,
                         extra_args=["--proxy-protocol-from=127.0.0.1/32", "--api-rate-limit=1", "--api-tls"])
    with running(server) as s:
        haproxy = HAProxy(processes, tmp_path, (s.host, s.api_port))
        context = ssl.create_default_context(cafile=str(s.cert_path))

        assert_limited_per_client(haproxy.port, context)
        # Straight to the API from a listed source, without a header: served as itself.
        direct = http.client.HTTPSConnection("localhost", s.api_port, timeout=5, context=context)
        direct.request("GET", "/healthz")
        assert direct.getresponse().status == 200
        direct.close()
        # A header from a source that is not listed: closed.
        forged = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        forged.settimeout(5)
        forged.bind(("127.0.0.2", 0))
        forged.connect((s.host, s.api_port))
        forged.sendall(proxy_v2(("203.0.113.9", 4000), (s.host, s.api_port)))
        assert closed_by_server(forged)
        forged.close()


def test_the_shared_api_survives_sighup(tmp_path):
    import signal

    server = shared_server(tmp_path, ["--api-tls"])
    server.api_port = server.port
    with running(server) as s:
        status, body, err = curl_credentials(s)
        assert status == "200", (status, body, err)
        s.proc.send_signal(signal.SIGHUP)
        assert eventually(lambda: "tls_reloaded" in s.log_text(), timeout=5), s.log_tail()
        for _ in range(3):
            status, body, err = curl_credentials(s)
            assert status == "200", ("after SIGHUP", status, body, err)


def test_a_half_closed_api_request_gets_its_answer(tmp_path):
    """A client that sends its request and shuts its sending side (as `nc -N` does) still gets
    the whole answer through the loop's pipe; a local process that connects to the API's own
    socket by itself is refused."""
    server = shared_server(tmp_path)
    server.api_port = server.port
    with running(server) as s:
        raw = socket.create_connection(s.address, timeout=5)
        raw.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        raw.shutdown(socket.SHUT_WR)
        answer = b""
        while True:
            chunk = raw.recv(4096)
            if not chunk:
                break
            answer += chunk
        raw.close()
        assert answer.startswith(b"HTTP/1.1 200") and answer.endswith(b"ok\n"), answer[:300]
        # The API's own socket: an abstract address listed in /proc/net/unix.
        names = [line.split()[-1] for line in open("/proc/net/unix") if "@relayd-api-" in line]
        mine = [n for n in names if f"@relayd-api-{s.proc.pid}-" in n]
        assert mine, names
        local = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        local.settimeout(5)
        local.connect("\0" + mine[0][1:])
        local.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        reply = local.recv(4096)
        local.close()
        assert reply.startswith(b"HTTP/1.1 403"), reply[:200]
