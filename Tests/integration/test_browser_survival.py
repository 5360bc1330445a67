"""A Chromium call over TURN/UDP lives through a relayd crash and through a live upgrade
(docs/state-journal.md, docs/live-upgrade.md).

Headless Chromium runs the relay-only call of test_browser.py (two RTCPeerConnections, video,
audio and a data channel, credentials from relayd's credential service through the test's app
server), but keeps it open. Then, with the call live:
- relayd is killed with SIGKILL and started again at once with the same command line and
  `state-dir`: the allocations come back from the journal;
- or relayd gets SIGUSR2: the new process takes the allocations over.
After each, both peer connections must still be `connected` (not `disconnected` or `failed`),
media must keep arriving on both sides, and a data channel message must come back: the call
went on without an ICE restart. The kernel fast path stays off here (it needs root, and a live
upgrade takes it over only on kernels with tcx links); test_kernel_fast_path.py covers that.
"""

from __future__ import annotations

import signal
import time

import pytest

from browser_support import AppServer, Browser, missing_browser_tools, spki_hash
from conftest import RelayServer, server_kind
from lifecycle import kill_and_restart, wait_for_log
from test_live_upgrade import heir_pid, logged_heir, stop_pid

pytestmark = pytest.mark.skipif(server_kind() != "relayd", reason="relayd's state journal and live upgrade")

MISSING = missing_browser_tools()
CALL_TIMEOUT_MS = 20000


def start_relayd(tmp_path) -> RelayServer:
    server = RelayServer(
        "relayd", tmp_path / "relayd", streams=True,
        extra_args=[f"--state-dir={tmp_path / 'state'}", "--relay-threads=2", "--drain-timeout=30"])
    server.extra_args += [
        f"--advertised-uri=turn:{server.host}:{server.port}?transport=udp",
        f"--advertised-uri=turns:localhost:{server.tls_port}?transport=tcp",
    ]
    server.start()
    return server


def sample(browser: Browser) -> dict:
    result = browser.driver.execute_async_script(
        "window.sampleLiveCallForTest(arguments[0], arguments[arguments.length - 1]);", {"timeoutMs": 5000})
    assert result and result.get("ok"), result
    return result["sample"]


def call_goes_on(browser: Browser, what: str) -> None:
    """Media keeps flowing both ways for 4 s, both connections stay connected, and a data
    channel message comes back."""
    first = sample(browser)
    time.sleep(4)
    later = sample(browser)
    print(f"\n{what}: {first} -> {later}")
    for side in ("a", "b"):
        assert later["states"][side] == "connected", f"{what}: {side} is {later['states'][side]}"
        assert later["packetsReceived"][side] > first["packetsReceived"][side] + 50, \
            f"{what}: media stopped reaching {side}: {first} -> {later}"
    assert later["echoed"], f"{what}: the data channel message did not come back"


@pytest.fixture
def chromium(tmp_path):
    if MISSING:
        pytest.fail("browser test prerequisites missing: " + ", ".join(MISSING)
                    + " (run scripts/install-test-deps.sh)", pytrace=False)
    servers = []
    yield servers
    for item in servers:
        item()


def open_call(relayd: RelayServer, tmp_path, cleanups: list) -> Browser:
    app = AppServer(relayd)
    app.__enter__()
    cleanups.append(lambda: app.__exit__(None, None, None))
    pin = f"--ignore-certificate-errors-spki-list={spki_hash(relayd.cert_path)}"
    chrome = Browser(tmp_path / "chromium", extra_flags=[pin])
    cleanups.insert(0, chrome.stop)
    chrome.start()
    chrome.driver.set_script_timeout(60)
    chrome.driver.get(app.url + "/index.html")
    result = chrome.driver.execute_async_script(
        "window.runCallForTest(arguments[0], arguments[arguments.length - 1]);",
        {"transport": "udp", "user": "survivor", "timeoutMs": CALL_TIMEOUT_MS, "mediaMs": 1000, "messages": 5,
         "keepOpen": True})
    assert result and result.get("ok"), str(result)[:4000]
    return chrome


def test_a_chromium_call_lives_through_sigkill(tmp_path, chromium):
    relayd = start_relayd(tmp_path)
    chromium.append(lambda: relayd.stop())
    chrome = open_call(relayd, tmp_path, chromium)
    call_goes_on(chrome, "before the crash")
    kill_and_restart(relayd)
    wait_for_log(relayd, "state_restored")
    assert relayd.log_text().count("allocation_restored") >= 2, relayd.log_tail()
    call_goes_on(chrome, "after SIGKILL and restart")
    chrome.driver.execute_async_script("window.endLiveCallForTest(arguments[arguments.length - 1]);")


def test_a_chromium_call_lives_through_a_live_upgrade(tmp_path, chromium):
    relayd = start_relayd(tmp_path)
    chromium.append(lambda: relayd.stop() if relayd.proc and relayd.proc.poll() is None else None)
    chrome = open_call(relayd, tmp_path, chromium)
    call_goes_on(chrome, "before the upgrade")
    # Whatever happens next, the heir (not this test's child) is stopped by its pid.
    chromium.append(lambda: (heir := logged_heir(relayd)) and stop_pid(heir))
    relayd.proc.send_signal(signal.SIGUSR2)
    heir_pid(relayd)
    wait_for_log(relayd, "upgrade_took_over")
    call_goes_on(chrome, "after the live upgrade")
    assert relayd.proc.wait(timeout=40) == 0, relayd.log_tail()
    call_goes_on(chrome, "after the old process exited")
    chrome.driver.execute_async_script("window.endLiveCallForTest(arguments[arguments.length - 1]);")
