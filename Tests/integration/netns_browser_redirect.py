"""Run inside a network namespace by test_cluster_browser.py: a two-node relayd cluster on a
veth interface's address (Chromium refuses redirects to loopback), n1 draining, and a headless
Chromium call whose only TURN URL is n1's. Chromium must follow n1's 300 to n2 and relay the
call there. Prints one JSON object: the page's report and both nodes' counters.

    ip netns exec NS python3 netns_browser_redirect.py WORKDIR ADDRESS
"""

from __future__ import annotations

import json
import secrets
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from browser_support import AppServer, Browser  # noqa: E402
from cluster_support import ClusterNode, eventually  # noqa: E402
from redis_support import RedisServer  # noqa: E402
from stunclient import rest_credentials  # noqa: E402

CALL_TIMEOUT_MS = 20000
SCRIPT_TIMEOUT = 60


class RedirectedApp(AppServer):
    """The app's backend hands out n1's URL alone, so the call depends on the redirect."""

    def __init__(self, node: ClusterNode):
        super().__init__(node)
        self.node = node

    def fetch_ice_servers(self, user: str) -> tuple[int, bytes]:
        username, password = rest_credentials(self.node.secret, user)
        body = {"iceServers": [{"urls": [f"turn:{self.node.host}:{self.node.port}?transport=udp"],
                                "username": username, "credential": password}]}
        return 200, json.dumps(body).encode()


def counters(node: ClusterNode) -> dict:
    return {
        "allocations_created": node.metric("relayd_allocations_created_total"),
        "redirects": node.metric("relayd_error_responses_total", '{code="300"}'),
        "relayed_packets": node.metric("relayd_relayed_packets_total", '{direction="client_to_peer"}'),
        "min_port": node.min_port, "max_port": node.max_port, "port": node.port,
    }


def main() -> int:
    workdir, address = Path(sys.argv[1]), sys.argv[2]
    secret = secrets.token_hex(16)
    redis = RedisServer(workdir / "redis")
    redis.start()
    nodes: list[ClusterNode] = []
    browser = None
    result: dict = {"ok": False}
    try:
        for name in ("n1", "n2"):
            node = ClusterNode(workdir / name, name, redis, secret,
                               extra=["--allowed-peer-ip=198.18.0.0-198.19.255.255"])
            node.host = address  # listening, relay and API address: the veth interface's
            node.start()
            nodes.append(node)
        n1, n2 = nodes
        if not eventually(lambda: n2.metric("relayd_cluster_nodes") == 2, timeout=6):
            raise RuntimeError("the cluster did not form")
        n1.proc.send_signal(signal.SIGUSR1)
        if not eventually(lambda: n1.http("GET", "/readyz").status == 503, timeout=5):
            raise RuntimeError("n1 did not start draining")
        time.sleep(1.2)  # n1's heartbeat shows it draining; n2 is its alternate already
        with RedirectedApp(n1) as app:
            browser = Browser(workdir / "chromium")
            browser.start()
            browser.driver.set_script_timeout(SCRIPT_TIMEOUT)
            browser.driver.get(app.url + "/index.html")
            page = browser.driver.execute_async_script(
                "window.runCallForTest(arguments[0], arguments[arguments.length - 1]);",
                {"transport": "udp", "user": "redirected", "timeoutMs": CALL_TIMEOUT_MS, "mediaMs": 2000,
                 "messages": 10})
            result = {"ok": bool(page and page.get("ok")), "page": page, "chromium": browser.browser_version()}
        time.sleep(1.2)  # one metrics publication interval
        result["n1"], result["n2"] = counters(n1), counters(n2)
    except Exception as exc:  # noqa: BLE001 - reported to the test as JSON
        result["error"] = repr(exc)
    finally:
        if browser is not None:
            browser.stop()
        problems = []
        for node in nodes:
            problems += node.stop()
        redis.stop()
        result["problems"] = problems
        result["logs"] = {n.name: n.log_tail(15) for n in nodes}
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
