"""A real browser's WebRTC stack through relayd: headless Chromium, relay only.

Headless Chromium (Debian's chromium + chromium-driver, driven by selenium) loads
Tests/integration/browser/index.html from a small app server on 127.0.0.1 (see
browser_support.AppServer). The page asks that server for `/ice-servers`; the
server, like a real app backend, holds relayd's API token and calls relayd's
credential service (POST /api/v1/credentials, format "ice-servers"), so the token
never reaches the browser. The page keeps the one TURN URL for the transport under
test and runs a call between two RTCPeerConnections with iceTransportPolicy
"relay": a data channel echo of 20 messages (some larger than one packet) and
3 s of a canvas captureStream video track and a WebAudio oscillator track each way.

Once per transport, turn:...?transport=udp, turn:...?transport=tcp and
turns:localhost:...?transport=tcp (relayd's self-signed test certificate,
whose key Chromium is told to trust with --ignore-certificate-errors-spki-list;
Chromium does verify a TURN server's certificate: without the flag the turns:
candidates fail with icecandidateerror 701), the test asserts from getStats():
the selected candidate pair is relay/relay on both peers, the local candidate's
relayProtocol is the transport tested, bytes went both ways over the pair, and
inbound-rtp audio and video have packetsReceived > 0 on both sides. relayd's
/metrics must show the call's allocations (relayd_allocations_created_total)
and relayed bytes in both directions (relayd_relayed_bytes_total). As root, relayd runs with
the kernel fast path, and over UDP most of the call's bytes must be relayed by the kernel
(relayd_offloaded_bytes_total; both peers are relayd's clients, relay to relay).

The URIs the page gets are relayd's own: the server is started with
`advertised-uri` values, as an operator whose certificate names a host would do
(turns: must name `localhost`, which the test certificate is made for).

Everything runs on loopback. Chromium needs two flags beyond the usual headless
ones: the SPKI pin above and --allow-loopback-in-peer-connection (its WebRTC
network list skips loopback interfaces: on a machine whose only interface is
`lo`, e.g. a CI container without a network, it would gather no candidate). Every Chromium process
is killed by PID at teardown (browser_support.Browser).
"""

from __future__ import annotations

import json
import os
import re
import time
import urllib.request

import pytest

from browser_support import AppServer, Browser, missing_browser_tools, spki_hash
from conftest import RelayServer, server_kind

pytestmark = pytest.mark.skipif(server_kind() != "relayd", reason="uses relayd's credential service and /metrics")

CALL_TIMEOUT_MS = 20000  # each bounded wait inside the page
SCRIPT_TIMEOUT = 60  # the whole call, as selenium waits for it
MEDIA_MS = 3000
MESSAGES = 20
TRANSPORTS = {
    # transport under test -> relayProtocol that getStats() must report
    "udp": "udp",
    "tcp": "tcp",
    "tls": "tls",
}


def metrics(server: RelayServer) -> dict[tuple[str, tuple], float]:
    """relayd's /metrics (no token needed), as {(name, labels): value}."""
    with urllib.request.urlopen(server.api_url + "/metrics", timeout=5) as resp:
        text = resp.read().decode()
    samples = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)", line)
        if not m:
            continue
        labels = tuple(sorted(re.findall(r'(\w+)="([^"]*)"', m.group(2) or "")))
        samples[(m.group(1), labels)] = float(m.group(3))
    return samples


def metric(samples, name: str, **labels) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


MISSING = missing_browser_tools()


@pytest.fixture(scope="module")
def relayd(tmp_path_factory):
    if MISSING:
        yield None  # the test itself fails, naming what is missing
        return
    server = RelayServer("relayd", tmp_path_factory.mktemp("relayd-browser"), streams=True)
    if os.geteuid() == 0:
        # As root the UDP call's channels are relayed by the kernel fast path
        # (docs/kernel-fast-path.md): both peers are relayd's clients, relay to relay.
        server.extra_args += ["--kernel-offload=on", "--kernel-offload-interface=lo"]
    # What the credential service hands out: the certificate's name for turns:.
    server.extra_args += [
        f"--advertised-uri=stun:{server.host}:{server.port}",
        f"--advertised-uri=turn:{server.host}:{server.port}?transport=udp",
        f"--advertised-uri=turn:{server.host}:{server.port}?transport=tcp",
        f"--advertised-uri=turns:localhost:{server.tls_port}?transport=tcp",
    ]
    server.start()
    try:
        yield server
    finally:
        problems = server.stop()
        if problems:
            pytest.fail("server problems:\n  " + "\n  ".join(problems)
                        + f"\nlog: {server.log_path}\n{server.log_tail()}", pytrace=False)


@pytest.fixture(scope="module")
def app(relayd):
    if relayd is None:
        yield None
        return
    with AppServer(relayd) as server:
        yield server


@pytest.fixture(scope="module")
def browser(tmp_path_factory, relayd):
    if relayd is None:
        yield None
        return
    # Trust relayd's self-signed test key, and only it, for turns:.
    pin = f"--ignore-certificate-errors-spki-list={spki_hash(relayd.cert_path)}"
    chrome = Browser(tmp_path_factory.mktemp("chromium"), extra_flags=[pin])
    try:
        chrome.start()
        chrome.driver.set_script_timeout(SCRIPT_TIMEOUT)
        yield chrome
    finally:
        chrome.stop()
        left = chrome.leftover_pids()
        if left:
            pytest.fail(f"Chromium processes still alive after teardown: {left}", pytrace=False)


def run_call(browser: Browser, app: AppServer, transport: str) -> dict:
    driver = browser.driver
    driver.get(app.url + "/index.html")
    result = driver.execute_async_script(
        "window.runCallForTest(arguments[0], arguments[arguments.length - 1]);",
        {"transport": transport, "user": f"browser-{transport}", "timeoutMs": CALL_TIMEOUT_MS,
         "mediaMs": MEDIA_MS, "messages": MESSAGES},
    )
    if not result or not result.get("ok"):
        detail = json.dumps(result, indent=1)[:6000]
        pytest.fail(f"the call over {transport} failed in the page:\n{detail}"
                    f"\nchromedriver log: {browser.driver_log}", pytrace=False)
    return result["report"]


@pytest.mark.parametrize("transport", list(TRANSPORTS))
def test_chromium_call_through_relayd_only(relayd, app, browser, transport):
    if MISSING:
        pytest.fail("browser test prerequisites missing: " + ", ".join(MISSING)
                    + " (run scripts/install-test-deps.sh)", pytrace=False)
    assert relayd.is_running(), f"relayd died earlier:\n{relayd.log_tail()}"
    before = metrics(relayd)
    report = run_call(browser, app, transport)
    after = metrics(relayd)
    context = f"(Chromium: {browser.browser_version()}; report: {json.dumps(report)[:3000]})"

    # The page used exactly the one URL for this transport, as relayd's service gave it.
    (urls,) = report["iceServers"]
    assert len(urls) == 1, context
    expected_scheme = "turns:localhost:" if transport == "tls" else "turn:"
    assert urls[0].startswith(expected_scheme), context

    # Only relayed candidates were gathered (iceTransportPolicy "relay").
    for side in ("a", "b"):
        cands = report["candidates"][side]
        assert cands, f"no candidates gathered by {side} {context}"
        assert all(" typ relay" in c for c in cands), f"{side}: {cands} {context}"

    assert report["echoedIntact"], context
    assert report["echoesReceived"] == report["messagesSent"] == MESSAGES, context

    for side in ("a", "b"):
        stats = report["stats"][side]
        pair, local, remote = stats["pair"], stats["local"], stats["remote"]
        assert pair is not None, f"{side}: no selected candidate pair {context}"
        assert pair["state"] == "succeeded", context
        assert (local["candidateType"], remote["candidateType"]) == ("relay", "relay"), context
        assert local["relayProtocol"] == TRANSPORTS[transport], context
        assert local["address"] == relayd.host, context
        assert relayd.min_port <= local["port"] <= relayd.max_port, context
        assert relayd.min_port <= remote["port"] <= relayd.max_port, context
        assert pair["bytesSent"] > 0 and pair["bytesReceived"] > 0, context
        for kind in ("audio", "video"):
            inbound = [s for s in stats["inbound"] if s["kind"] == kind]
            assert inbound and max(s["packetsReceived"] for s in inbound) > 0, f"{side} {kind} {context}"

    a = report["stats"]["a"]
    print(f"\n{browser.browser_version()}, {transport}: a {a['local']} <-> {a['remote']}, pair bytes sent/received "
          f"{a['pair']['bytesSent']}/{a['pair']['bytesReceived']}, inbound "
          f"{[(s['kind'], s['packetsReceived']) for s in a['inbound']]}")

    # relayd counted the call: one allocation per peer connection at least, bytes both ways.
    created = metric(after, "relayd_allocations_created_total") - metric(before, "relayd_allocations_created_total")
    assert created >= 2, f"allocations created during the call: {created}"
    if transport == "udp" and os.geteuid() == 0:
        time.sleep(1.5)  # the loops fold the kernel's counters into the metrics once a second
        after = metrics(relayd)
    if transport == "tls":
        # Chromium's TLS 1.3 sessions had their records kept by relayd after the handshake
        # (docs/tls.md, "After the handshake").
        own = metric(after, "relayd_tls_own_records_total") - metric(before, "relayd_tls_own_records_total")
        assert own >= 2, f"TLS sessions whose records relayd kept during the call: {own}"
    for direction in ("client_to_peer", "peer_to_client"):
        grown = (metric(after, "relayd_relayed_bytes_total", direction=direction)
                 - metric(before, "relayd_relayed_bytes_total", direction=direction))
        # At least what the data channel alone carried (20 messages, echoed).
        assert grown > 20_000, f"relayd_relayed_bytes_total{{direction={direction!r}}} grew by {grown}"
        print(f"relayd_relayed_bytes_total{{direction={direction!r}}} +{grown:.0f}, allocations +{created:.0f}")
        if transport == "udp" and os.geteuid() == 0:
            # The kernel relayed the call's media.
            offloaded = (metric(after, "relayd_offloaded_bytes_total", direction=direction)
                         - metric(before, "relayd_offloaded_bytes_total", direction=direction))
            print(f"relayd_offloaded_bytes_total{{direction={direction!r}}} +{offloaded:.0f} of +{grown:.0f}")
            assert offloaded > grown / 2, f"the kernel relayed {offloaded} of {grown} bytes {direction}"

