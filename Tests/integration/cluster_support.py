"""relayd nodes sharing one real redis-server (docs/cluster.md), on loopback: each node with its
own ports, the same static-auth-secret, and a short registry TTL so a killed node vanishes fast."""

from __future__ import annotations

import json
import re
import secrets
import subprocess
import time
from pathlib import Path

from conftest import RelayServer
from redis_support import RedisServer
from stunclient import TurnClient, TurnError, rest_credentials

TTL = 2  # cluster-node-ttl for the tests: a dead node is gone from the registry within it
WAIT = 6.0


class ClusterNode(RelayServer):
    def __init__(self, workdir: Path, name: str, redis: RedisServer | None, secret: str,
                 labels: str | None = None, extra: list[str] | None = None, redis_args: list[str] | None = None,
                 streams: bool = False):
        args = [f"--node-name={name}", f"--cluster-node-ttl={TTL}", "--log-format=json"]
        args += redis_args if redis_args is not None else [f"--cluster-redis={redis.url}"]
        if labels:
            args.append(f"--node-labels={labels}")
        super().__init__("relayd", workdir, extra_args=args + list(extra or []), streams=streams)
        self.secret = secret
        self.name = name

    def metric(self, name: str, labels: str = "") -> float | None:
        text = self.http("GET", "/metrics").body.decode()
        match = re.search(rf"^{re.escape(name)}{re.escape(labels)} (\S+)$", text, re.M)
        return float(match.group(1)) if match else None

    def credentials_api(self, query: str) -> dict:
        resp = self.http("GET", f"/api/v1/credentials?{query}",
                         headers={"Authorization": f"Bearer {self.api_token}"})
        assert resp.status == 200, resp
        return resp.json()

    def log_text_events(self) -> list[dict]:
        """Every JSON log line, in order."""
        found = []
        for line in self.log_text().splitlines():
            if line.startswith("{"):
                try:
                    found.append(json.loads(line))
                except json.JSONDecodeError:
                    continue
        return found

    def log_events(self, event: str) -> list[dict]:
        found = []
        for line in self.log_text().splitlines():
            if line.startswith("{"):
                try:
                    entry = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if entry.get("event") == event:
                    found.append(entry)
        return found

    def kill(self) -> None:
        """SIGKILL, as a crashed machine: nothing is cleaned up in Redis."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=5)
        self.proc = None


def start_nodes(tmp_path: Path, redis: RedisServer, count: int = 3, labels: dict[str, str] | None = None,
                extra: list[str] | None = None, secret: str | None = None) -> list[ClusterNode]:
    secret = secret or secrets.token_hex(16)
    nodes = []
    try:
        for i in range(1, count + 1):
            name = f"n{i}"
            node = ClusterNode(tmp_path / name, name, redis, secret, labels=(labels or {}).get(name), extra=extra)
            node.start()
            nodes.append(node)
    except BaseException:
        for node in nodes:
            node.stop()
        raise
    return nodes


def relayd_binary() -> str:
    return RelayServer.default_binary("relayd")


def cluster_status(redis: RedisServer, as_json: bool = True):
    """`relayd cluster status` against `redis`: the parsed JSON, or the table text."""
    cmd = [relayd_binary(), "cluster", "status", "--redis", redis.url] + (["--json"] if as_json else [])
    result = subprocess.run(cmd, capture_output=True, timeout=15)
    assert result.returncode == 0, result.stderr.decode()
    out = result.stdout.decode()
    return json.loads(out) if as_json else out


def node_names(redis: RedisServer) -> set[str]:
    return {n["name"] for n in cluster_status(redis)["nodes"]}


def eventually(predicate, timeout: float = WAIT, interval: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if predicate():
                return True
        except (OSError, AssertionError):
            pass
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)


def allocate_or_code(node: RelayServer, user: str, secret: str | None = None) -> TurnClient | int:
    """A client allocated on `node` for `user` (REST credentials under `secret`, by default the
    node's), or the error code it got."""
    client = TurnClient(node.address)
    try:
        client.allocate(*rest_credentials(secret or node.secret, user))
    except TurnError as e:
        client.close()
        return e.code
    return client


def allocation_answer(node: RelayServer, secret: str, user: str = "alice") -> int:
    """200 when `user` allocates on `node` (released at once), else the error code."""
    client = allocate_or_code(node, user, secret)
    if isinstance(client, int):
        return client
    client.refresh(0)
    client.close()
    return 200
