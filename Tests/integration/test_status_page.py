"""The status page (docs/admin.md) in headless Chromium: the login form trades an admin token
for an HttpOnly cookie, and under a known load (UDP and TLS allocations, relayed bytes, failed
authentications, a failed TLS handshake) every number on the page matches /metrics. The page's
screenshot is kept in the test's directory."""

from __future__ import annotations

import re
import socket
import threading
import time

import pytest

import stunclient
from browser_support import Browser
from conftest import RelayServer, running, server_kind
from streamclient import StreamTurnClient
from stunclient import TurnClient, TurnError

pytestmark = pytest.mark.skipif(server_kind() != "relayd", reason="relayd's own status page")

ADMIN_TOKEN = "status-page-admin-token-0123456789"
SENT_TO_PEER = 50
PAYLOAD = 1000
SENT_TO_CLIENT = 20
REPLY = 500


def metrics(server: RelayServer) -> dict[str, float]:
    values = {}
    for line in server.http("GET", "/metrics").body.decode().splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            values[name] = float(value)
    return values


def total(values: dict[str, float], family: str, **labels: str) -> int:
    wanted = [f'{k}="{v}"' for k, v in labels.items()]
    return int(sum(v for name, v in values.items()
                   if re.match(rf"^{family}(\{{|$)", name) and all(w in name for w in wanted)))


def wait_for(server: RelayServer, check, timeout: float = 10) -> dict[str, float]:
    deadline = time.monotonic() + timeout
    values = metrics(server)
    while not check(values) and time.monotonic() < deadline:
        time.sleep(0.2)
        values = metrics(server)
    assert check(values), "the metrics did not settle"
    return values


@pytest.fixture
def server(tmp_path):
    relay = RelayServer("relayd", tmp_path / "srv", streams=True,
                        extra_args=["--relay-threads=2", f"--api-key=ops:{ADMIN_TOKEN}:admin"])
    with running(relay):
        yield relay


@pytest.fixture
def browser(tmp_path):
    chrome = Browser(tmp_path / "chromium")
    try:
        chrome.start()
        yield chrome
    finally:
        chrome.stop()
        left = chrome.leftover_pids()
        if left:
            pytest.fail(f"Chromium processes still alive after teardown: {left}", pytrace=False)


def text(driver, element_id: str) -> str:
    from selenium.webdriver.common.by import By
    return driver.find_element(By.ID, element_id).text


def value(driver, element_id: str) -> int:
    from selenium.webdriver.common.by import By
    return int(driver.find_element(By.ID, element_id).get_attribute("data-value"))


def log_in(driver, server: RelayServer, token: str, expect: str) -> None:
    """Submits the login form and waits (bounded) for the page that has element `expect`."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait
    driver.get(server.api_url + "/status")
    form = driver.find_element(By.ID, "token")
    form.send_keys(token)
    driver.find_element(By.ID, "login").click()

    def form_gone(_driver) -> bool:
        # Stale, or (Chromium, mid-navigation) an inspector error: the login page is gone.
        try:
            form.is_enabled()
            return False
        except Exception:
            return True

    WebDriverWait(driver, 10).until(form_gone)
    WebDriverWait(driver, 10).until(expected_conditions.presence_of_element_located((By.ID, expect)))


def test_status_page_numbers_match_metrics_under_known_load(server, browser, tmp_path):
    from selenium.webdriver.common.by import By
    driver = browser.driver
    peer = stunclient.udp_socket()
    clients: list[TurnClient] = []
    try:
        for user, count in (("alice", 3), ("bob", 2)):
            for _ in range(count):
                client = TurnClient(server.address)
                client.allocate(*server.credentials(user))
                clients.append(client)
        tls = StreamTurnClient(server.tls_address, tls=True)
        tls.allocate(*server.credentials("carol"))
        clients.append(tls)
        for _ in range(2):
            wrong = TurnClient(server.address)
            username, _ = server.credentials("mallory")
            with pytest.raises(TurnError):
                wrong.allocate(username, "not-the-password")
            wrong.close()
        with socket.create_connection(server.tls_address, timeout=5) as plain:
            plain.sendall(b"GET / HTTP/1.0\r\n\r\n")  # not a TLS ClientHello: a failed handshake
            plain.settimeout(5)
            try:
                plain.recv(100)
            except OSError:
                pass

        alice = clients[0]
        alice.create_permission(peer.getsockname())
        alice.channel_bind(0x4000, peer.getsockname())
        for i in range(SENT_TO_PEER):
            alice.send_channel_data(0x4000, bytes([i % 256]) * PAYLOAD)
            peer.recv(4096)
        for i in range(SENT_TO_CLIENT):
            peer.sendto(b"r" * REPLY, alice.relayed)
            assert alice.receive(5) is not None

        settled = wait_for(server, lambda v: total(v, "relayd_relayed_bytes_total", direction="peer_to_client")
                           == SENT_TO_CLIENT * REPLY and total(v, "relayd_allocations_active") == 6
                           and total(v, "relayd_tls_handshakes_total", result="failed") == 1
                           # The six allocations' usage records, which a 1 s timer counts.
                           and total(v, "relayd_usage_records_total", result="applied") == 6)

        # The login form, then the page; the cookie is HttpOnly and SameSite=Strict.
        log_in(driver, server, "wrong-token", "login-message")
        assert "matches no api-key" in text(driver, "login-message")
        log_in(driver, server, server.api_token, "login-message")
        assert "no admin scope" in text(driver, "login-message")
        log_in(driver, server, ADMIN_TOKEN, "state")
        assert text(driver, "state") == "serving"
        cookie = next(c for c in driver.get_cookies() if c["name"] == "relayd_status")
        assert cookie["httpOnly"] is True and cookie.get("sameSite") == "Strict"

        page_metrics = metrics(server)
        assert page_metrics == settled or all(
            page_metrics[k] == settled[k] for k in settled if not k.startswith("process_"))
        shot = tmp_path / "status-page.png"
        assert driver.save_screenshot(str(shot))
        data = shot.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
        # Every number on the page is the metric's.
        assert int(text(driver, "allocations-active")) == total(settled, "relayd_allocations_active") == 6
        assert int(text(driver, "allocations-udp")) == total(settled, "relayd_allocations_active", transport="udp") == 5
        assert int(text(driver, "allocations-tls")) == total(settled, "relayd_allocations_active", transport="tls") == 1
        assert int(text(driver, "allocations-ipv4")) == 6
        assert int(text(driver, "permissions")) == total(settled, "relayd_permissions_active") == 1
        assert int(text(driver, "channels")) == total(settled, "relayd_channels_active") == 1
        assert value(driver, "bytes-to-peer") == total(settled, "relayd_relayed_bytes_total", direction="client_to_peer") \
            == SENT_TO_PEER * PAYLOAD
        assert value(driver, "bytes-to-client") == SENT_TO_CLIENT * REPLY
        failures = sum(total(settled, "relayd_auth_results_total", result=r)
                       for r in ("stale_nonce", "bad_integrity", "expired", "unknown_user", "wrong_credentials",
                                 "malformed"))
        assert int(text(driver, "auth-failures")) == failures == 2
        assert int(text(driver, "auth-ok")) == total(settled, "relayd_auth_results_total", result="ok")
        assert int(text(driver, "drops-total")) == total(settled, "relayd_dropped_packets_total")
        assert int(text(driver, "tls-ok")) == total(settled, "relayd_tls_handshakes_total", result="ok") >= 1
        assert int(text(driver, "tls-failed")) == 1
        assert int(text(driver, "stream-connections")) == total(settled, "relayd_stream_connections_open") == 1
        assert int(text(driver, "loop-threads")) == 2
        top = driver.find_element(By.ID, "user-0")
        assert top.find_element(By.CLASS_NAME, "user").text == "alice"
        assert int(top.find_element(By.CLASS_NAME, "to-peer").get_attribute("data-value")) == SENT_TO_PEER * PAYLOAD
        assert int(top.find_element(By.CLASS_NAME, "allocations").text) == 3

        # Rates: bob streams 1000-byte payloads at about 100 packets a second.
        bob = clients[3]
        bob.create_permission(peer.getsockname())
        bob.channel_bind(0x4001, peer.getsockname())
        stop = threading.Event()

        def stream():
            while not stop.is_set():
                bob.send_channel_data(0x4001, b"b" * PAYLOAD)
                time.sleep(0.01)

        sender = threading.Thread(target=stream, daemon=True)
        sender.start()
        time.sleep(7)
        driver.get(server.api_url + "/status")
        stop.set()
        sender.join(timeout=5)
        rate = value(driver, "rate-to-peer")
        assert 300_000 <= rate <= 1_000_000, f"{rate} bit/s shown for about 800 kbit/s"

        # Logging out ends the session: the old cookie no longer opens the page.
        old_cookie = next(c for c in driver.get_cookies() if c["name"] == "relayd_status")["value"]
        assert server.http("GET", "/status", headers={"Cookie": f"relayd_status={old_cookie}"}).status == 200
        driver.find_element(By.CSS_SELECTOR, "form[action='/status/logout'] button").click()
        from selenium.webdriver.support import expected_conditions
        from selenium.webdriver.support.ui import WebDriverWait
        WebDriverWait(driver, 10).until(expected_conditions.presence_of_element_located((By.ID, "token")))
        assert text(driver, "login-message") == "Logged out."
        driver.get(server.api_url + "/status")
        assert driver.find_element(By.ID, "token")
        assert not any(c["name"] == "relayd_status" for c in driver.get_cookies())
        assert server.http("GET", "/status", headers={"Cookie": f"relayd_status={old_cookie}"}).status == 401
    finally:
        for c in clients:
            c.close()
        peer.close()
