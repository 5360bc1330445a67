"""relayd's structured logs (log-format=json): every line of the captured log is one
JSON object (checked with json.loads, `python3 -m json.tool --json-lines` and jq when present),
the operational events are there (started, self_test, allocation_created, allocation_deleted
with its per-allocation summary), and no secret, password or API token ever reaches the log.
"""

from __future__ import annotations

import json
import re
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.parse

import pytest

from conftest import RelayServer, server_kind
from stunclient import TurnClient, recv_from, udp_socket

pytestmark = pytest.mark.skipif(server_kind() != "relayd", reason="relayd's own log format")

STATIC_USER = "bob"
STATIC_PASSWORD = "St4ticPassw0rd-never-logged"
WAIT = 3.0
CHANNEL = 0x4001


def eventually(predicate, timeout: float = 5.0) -> bool:
    """Poll `predicate` until it holds or `timeout` passes (bounded)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)
    return True


def json_lines(text: str) -> list[dict]:
    """Every non-empty line parsed; fails on the first line that is not a JSON object."""
    records = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            pytest.fail(f"log line {number} is not JSON ({error}): {line!r}")
        assert isinstance(record, dict), f"log line {number} is not an object: {line!r}"
        records.append(record)
    return records


def events(records: list[dict], name: str) -> list[dict]:
    return [r for r in records if r.get("event") == name]


def relay_traffic(client: TurnClient, peer) -> None:
    """Permission, channel, and one datagram each way through the allocation."""
    peer_address = peer.getsockname()
    client.create_permission(peer_address)
    client.channel_bind(CHANNEL, peer_address)
    client.send_channel_data(CHANNEL, b"to-peer")
    got = recv_from(peer, WAIT)
    assert got is not None and got[0] == b"to-peer"
    peer.sendto(b"to-client", client.relayed)
    received = client.receive(WAIT)
    assert received is not None and received.payload == b"to-client"


@pytest.fixture(scope="module")
def json_server(tmp_path_factory):
    """relayd with JSON logs on stderr, REST auth plus one static user, and --self-test; stopped
    (and its log complete) before the tests read it."""
    server = RelayServer(
        "relayd", tmp_path_factory.mktemp("relayd-json"),
        extra_args=["--log-format=json", f"--user={STATIC_USER}:{STATIC_PASSWORD}", "--self-test"])
    server.start()
    secrets_seen = [server.secret, server.api_token, STATIC_PASSWORD]
    try:
        with udp_socket() as peer:
            rest_user, rest_password = server.credentials("alice")
            secrets_seen.append(rest_password)
            with TurnClient(server.address) as client:
                client.allocate(rest_user, rest_password)
                relay_traffic(client, peer)
                client.refresh(0)
            with TurnClient(server.address) as client:
                client.allocate(STATIC_USER, STATIC_PASSWORD)
                relay_traffic(client, peer)
                client.refresh(0)
            query = urllib.parse.urlencode({"user": "carol"})
            resp = server.http("GET", f"/api/v1/credentials?{query}",
                               headers={"Authorization": f"Bearer {server.api_token}"})
            assert resp.status == 200, resp
            issued = resp.json()
            secrets_seen.append(issued["password"])
            with TurnClient(server.address) as client:
                client.allocate(issued["username"], issued["password"])
                client.refresh(0)
            # An API call with a wrong token: refused, and the token it carried is not logged either.
            wrong = "wrong-token-" + server.api_token[::-1]
            secrets_seen.append(wrong)
            refused = server.http("GET", f"/api/v1/credentials?{query}", headers={"Authorization": f"Bearer {wrong}"})
            assert refused.status == 401
        assert eventually(lambda: server.log_text().count('"allocation_deleted"') >= 3), server.log_tail()
    finally:
        problems = server.stop()
    if problems:
        pytest.fail("server problems:\n  " + "\n  ".join(problems) + f"\n{server.log_tail()}", pytrace=False)
    yield server, secrets_seen


def test_every_log_line_is_a_json_object_with_timestamp_level_and_message(json_server):
    server, _ = json_server
    records = json_lines(server.log_text())
    assert len(records) >= 8
    for record in records:
        assert set(record) >= {"ts", "level", "msg"}, record
        assert all(isinstance(value, str) for value in record.values()), record
        assert record["level"] in ("trace", "debug", "info", "notice", "warning", "error", "critical")
        # RFC 3339, UTC, milliseconds: 2026-01-02T03:04:05.678Z
        assert len(record["ts"]) == 24 and record["ts"][10] == "T" and record["ts"].endswith("Z"), record


def test_json_tool_reads_the_log_as_json_lines(json_server):
    server, _ = json_server
    result = subprocess.run([sys.executable, "-m", "json.tool", "--json-lines", str(server.log_path)],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr


@pytest.mark.skipif(shutil.which("jq") is None, reason="jq not installed")
def test_jq_reads_the_log(json_server):
    server, _ = json_server
    result = subprocess.run(["jq", "-c", ".event // empty", str(server.log_path)],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    assert '"started"' in result.stdout.splitlines()


def test_startup_and_self_test_events(json_server):
    server, _ = json_server
    records = json_lines(server.log_text())
    started = events(records, "started")
    assert len(started) == 1
    assert started[0]["udp_listeners"] == f"{server.host}:{server.port}"
    self_tests = events(records, "self_test")
    assert len(self_tests) == 1, self_tests
    assert self_tests[0]["relay"] == server.host
    assert self_tests[0]["mapped"].startswith(f"{server.host}:"), self_tests[0]
    assert "XOR-MAPPED-ADDRESS" in self_tests[0]["msg"]


def test_allocations_are_logged_with_user_and_a_summary_on_deletion(json_server):
    server, _ = json_server
    records = json_lines(server.log_text())
    created = events(records, "allocation_created")
    deleted = events(records, "allocation_deleted")
    assert [r["user"] for r in created] == ["alice", STATIC_USER, "carol"]
    assert [r["user"] for r in deleted] == ["alice", STATIC_USER, "carol"]
    for record in created + deleted:
        assert record["five_tuple"] and record["relayed"].startswith(f"{server.host}:"), record
    for record in deleted:
        for field in ("duration_s", "packets_to_peer", "bytes_to_peer", "packets_to_client", "bytes_to_client",
                      "permissions", "channels", "reason"):
            assert field in record, (field, record)
    # The first two relayed one datagram each way on one channel.
    for record in deleted[:2]:
        assert (record["packets_to_peer"], record["bytes_to_peer"]) == ("1", str(len(b"to-peer")))
        assert (record["packets_to_client"], record["bytes_to_client"]) == ("1", str(len(b"to-client")))
        assert (record["permissions"], record["channels"]) == ("1", "1")
    assert deleted[2]["packets_to_peer"] == "0"


def test_no_secret_password_or_token_reaches_the_log(json_server):
    server, secrets_seen = json_server
    text = server.log_text()
    assert len(secrets_seen) == 6
    for secret in secrets_seen:
        assert secret not in text
        # Nor in JSON-escaped form (a "/" or "+" of base64 written differently).
        assert json.dumps(secret)[1:-1] not in text


def test_sighup_reopens_the_log_file_for_logrotate(tmp_path):
    """log-file: after the file is moved away and SIGHUP sent, relayd writes to a new file at the path."""
    log_file = tmp_path / "relayd.log"
    server = RelayServer("relayd", tmp_path / "server", extra_args=["--log-format=json", f"--log-file={log_file}"])
    server.start()
    try:
        assert eventually(lambda: log_file.exists() and '"started"' in log_file.read_text())
        # The main loop that handles SIGHUP also serves HTTP: an answer means the handler is in place.
        assert server.http("GET", "/healthz").status == 200
        rotated = tmp_path / "relayd.log.1"
        os.rename(log_file, rotated)
        server.proc.send_signal(signal.SIGHUP)
        assert eventually(lambda: log_file.exists()), "no new log file after SIGHUP"
        with TurnClient(server.address) as client:
            client.allocate(*server.credentials("dave"))
            client.refresh(0)
        assert eventually(lambda: '"allocation_deleted"' in log_file.read_text()), log_file.read_text()
        assert '"allocation_created"' not in rotated.read_text()
        json_lines(log_file.read_text())
        json_lines(rotated.read_text())
    finally:
        problems = server.stop()
    if problems:
        pytest.fail("server problems:\n  " + "\n  ".join(problems), pytrace=False)


TEXT_LINE = re.compile(
    r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4} (trace|debug|info|notice|warning|error|critical) relayd:"
    r"((?: [a-z_.]+=[^ ]*(?: [^ =\[]+)*)*) \[Relay\] (.+)$")


def logged_call(tmp_path, user: str, extra_args: list[str], wait_for: str | None = None) -> list[str]:
    """Runs relayd with a text `log-file` and `extra_args`; one allocation relays a packet each
    way and is refreshed to 0; once `wait_for` is in the file (if given), relayd is stopped.
    Returns the file's lines."""
    log_file = tmp_path / "relayd.log"
    server = RelayServer("relayd", tmp_path / "server", extra_args=[f"--log-file={log_file}", *extra_args])
    server.start()
    try:
        with udp_socket() as peer:
            with TurnClient(server.address) as client:
                client.allocate(*server.credentials(user))
                relay_traffic(client, peer)
                client.refresh(0)
        if wait_for is not None:
            assert eventually(lambda: wait_for in log_file.read_text()), log_file.read_text()
    finally:
        problems = server.stop()
    if problems:
        pytest.fail("server problems:\n  " + "\n  ".join(problems), pytrace=False)
    return log_file.read_text().splitlines()


def test_text_log_lines_keep_swift_log_stream_format(tmp_path):
    """The default text format (relayd's own handler): `<local time> <level> relayd: k=v ... [Relay]
    <message>`, one line per event, metadata keys in sorted order, written to log-file."""
    lines = logged_call(tmp_path, "erin", [], wait_for="allocation deleted")
    assert lines
    for line in lines:
        assert TEXT_LINE.match(line), line
    deleted = [line for line in lines if line.endswith("[Relay] allocation deleted")]
    assert len(deleted) == 1, lines
    keys = re.findall(r" ([a-z_]+)=", deleted[0].split(" [Relay] ")[0])
    assert keys == sorted(keys) and "bytes_to_client" in keys and "session" in keys, keys
    assert "packets_to_client=1 " in deleted[0] and "packets_to_peer=1 " in deleted[0], deleted[0]


def test_log_level_notice_leaves_out_allocation_lines(tmp_path):
    """`log-level=notice`: allocations and their traffic write nothing; notice lines (the drain
    at SIGTERM) still reach the buffered log file, whole, by the time relayd has exited."""
    lines = logged_call(tmp_path, "frank", ["--log-level=notice"])
    assert any("event=drain_started" in line for line in lines), lines
    assert any("event=drain_done" in line for line in lines), lines
    for line in lines:
        assert TEXT_LINE.match(line), line
        assert line.split(" ")[1] in ("notice", "warning", "error", "critical"), line
    assert not any(re.search(r"event=(allocation|permission|channel)_", line) for line in lines), lines


FORGING_USERS = {
    "json-breakout": 'x","level":"critical","msg":"forged',
    "backslash-quote": 'a\\"b\\\\c',
    "non-ascii": "ünïcödé 日本",
}


@pytest.mark.parametrize("user", list(FORGING_USERS.values()), ids=list(FORGING_USERS))
def test_usernames_with_quotes_and_non_ascii_stay_inside_their_field(tmp_path, user):
    """A valid USERNAME (OpaqueString allows quotes, backslashes and non-ASCII letters) is
    escaped into its `user` field: every line stays one JSON object, nothing is forged, and the
    field is the escaped text (non-ASCII and backslash as \\u{...})."""
    server = RelayServer("relayd", tmp_path / "srv", extra_args=["--log-format=json"])
    server.start()
    try:
        with TurnClient(server.address) as client:
            client.allocate(*server.credentials(user))
            client.refresh(0)
        assert eventually(lambda: '"allocation_deleted"' in server.log_text()), server.log_tail()
    finally:
        problems = server.stop()
    assert not problems, problems
    records = json_lines(server.log_text())
    assert not [r for r in records if r.get("msg") == "forged" or r.get("level") == "critical"]
    created = events(records, "allocation_created")
    assert len(created) == 1
    field = created[0]["user"]
    assert all(0x20 <= ord(c) < 0x7F for c in field), field
    if user.isascii() and "\\" not in user:
        assert field == user
    else:
        assert "\\u{" in field
