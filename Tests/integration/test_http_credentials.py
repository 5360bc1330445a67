"""relayd's credential service over real HTTP, and the credentials it mints used for real.

GET/POST /api/v1/credentials with `Authorization: Bearer <token>` returns coturn
TURN REST credentials (docs/compatibility.md) that relayd itself and a coturn sharing the
secret accept until they expire. Every refusal has its exact status and a JSON
error; tokens and passwords never reach the server's log.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.parse

import pytest

from conftest import RelayServer, server_kind
from stunclient import TurnClient, TurnError, rest_credentials

pytestmark = pytest.mark.skipif(server_kind() != "relayd", reason="relayd's own HTTP service")

PATH = "/api/v1/credentials"
BURST_KEY = ("burst", "burst-token-only-for-the-429-test")
# Everything the server handed out or was shown that must not reach its log.
SECRETS_SEEN: list[str] = []


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    """A relayd with the HTTP API, a second key for the rate-limit test, and --verbose
    (so debug lines are checked for secrets too)."""
    server = RelayServer("relayd", tmp_path_factory.mktemp("relayd-http"),
                         extra_args=[f"--api-key={BURST_KEY[0]}:{BURST_KEY[1]}", "--verbose"])
    server.start()
    SECRETS_SEEN.extend([server.api_token, BURST_KEY[1], server.secret])
    try:
        yield server
    finally:
        problems = server.stop()
        if problems:
            pytest.fail("server problems:\n  " + "\n  ".join(problems), pytrace=False)


def auth(server: RelayServer) -> dict[str, str]:
    return {"Authorization": f"Bearer {server.api_token}"}


def get(server: RelayServer, **params) -> "object":
    query = urllib.parse.urlencode(params)
    return server.http("GET", f"{PATH}?{query}" if query else PATH, headers=auth(server))


def issued(resp) -> dict:
    assert resp.status == 200, resp
    assert resp.headers["content-type"] == "application/json"
    assert resp.headers["cache-control"] == "no-store"
    body = resp.json()
    for key in ("password", "credential"):
        if key in body:
            SECRETS_SEEN.append(body[key])
    for server in body.get("iceServers", []):
        if "credential" in server:
            SECRETS_SEEN.append(server["credential"])
    return body


def assert_error(resp, status: int, code: str) -> None:
    assert resp.status == status, resp
    assert resp.headers["content-type"] == "application/json"
    body = resp.json()
    assert body["error"] == code
    assert isinstance(body["message"], str) and body["message"]


# --- round trip -------------------------------------------------------------------


def test_credentials_fetched_over_http_allocate_on_relayd(api):
    body = issued(get(api, user="alice", ttl=600))
    assert list(body) == ["username", "password", "ttl", "uris"]
    assert body["ttl"] == 600
    expiry, user = body["username"].split(":")
    assert user == "alice"
    assert abs(int(expiry) - (time.time() + 600)) < 5
    # coturn's REST password: the test recomputes it from the shared secret.
    assert rest_credentials(api.secret, "alice", expiry=int(expiry)) == (body["username"], body["password"])
    assert body["uris"] == [f"turn:{api.host}:{api.port}?transport=udp"]  # --no-tcp --no-tls

    with TurnClient(api.address) as client:
        resp = client.allocate(body["username"], body["password"])
        assert client.relayed is not None and api.min_port <= client.relayed[1] <= api.max_port
        assert resp.verify_integrity(client.key)
        client.refresh(0)


def test_post_json_and_ice_servers_shape_allocate_too(api):
    resp = api.http("POST", PATH, headers={**auth(api), "Content-Type": "application/json"},
                    body=json.dumps({"user": "bob", "ttl": 300, "format": "ice-servers"}).encode())
    body = issued(resp)
    stun, turn = body["iceServers"]
    assert stun == {"urls": [f"stun:{api.host}:{api.port}"]}
    assert turn["urls"] == [f"turn:{api.host}:{api.port}?transport=udp"]
    assert list(turn) == ["urls", "username", "credential"]
    assert turn["username"].endswith(":bob")
    with TurnClient(api.address) as client:
        client.allocate(turn["username"], turn["credential"])
        client.refresh(0)


def test_webrtckit_shape_uses_url_strings(api):
    body = issued(get(api, user="carol", format="webrtckit"))
    stun, turn = body["iceServers"]
    assert stun == {"urlStrings": [f"stun:{api.host}:{api.port}"]}
    assert list(turn) == ["urlStrings", "username", "credential"]
    # No ttl given: credential-ttl (86400 by default).
    assert abs(int(turn["username"].split(":")[0]) - (time.time() + 86400)) < 5


def test_ttl_above_credential_max_ttl_is_capped(api):
    body = issued(get(api, user="dave", ttl=10**12))
    assert body["ttl"] == 604800  # credential-max-ttl default


def test_credentials_minted_with_a_short_ttl_are_refused_once_expired(api):
    body = issued(get(api, user="erin", ttl=1))
    expiry = int(body["username"].split(":")[0])
    time.sleep(max(0.0, expiry - time.time()) + 1.2)
    with TurnClient(api.address) as client:
        with pytest.raises(TurnError) as exc:
            client.allocate(body["username"], body["password"])
        assert exc.value.code == 401


def test_a_crafted_already_expired_username_is_refused(api):
    username, password = rest_credentials(api.secret, "mallory", expiry=int(time.time()) - 60)
    with TurnClient(api.address) as client:
        with pytest.raises(TurnError) as exc:
            client.allocate(username, password)
        assert exc.value.code == 401


@pytest.mark.skipif(shutil.which("turnserver") is None, reason="coturn (turnserver) not installed")
def test_coturn_with_the_same_secret_accepts_relayds_credentials(api, tmp_path):
    coturn = RelayServer("coturn", tmp_path / "coturn")
    coturn.secret = api.secret
    coturn.start()
    try:
        body = issued(get(api, user="frank", ttl=600))
        with TurnClient(coturn.address) as client:
            client.allocate(body["username"], body["password"])
            assert client.relayed is not None
            client.refresh(0)
    finally:
        problems = coturn.stop()
    assert not problems, problems


def test_command_line_mints_the_same_credentials(api, tmp_path):
    """`relayd credentials` prints the service's JSON; its credentials allocate on the server."""
    secret_file = tmp_path / "secret.txt"
    secret_file.write_text(f"\n  {api.secret}  \n")
    conf = tmp_path / "relayd.conf"
    conf.write_text(f"listening-ip={api.host}\nlistening-port={api.port}\nno-tcp\nno-tls\n")
    out = subprocess.run(
        [api.binary, "credentials", "--secret-file", str(secret_file), "--user", "grace", "--ttl", "600",
         "--format", "webrtckit", "-c", str(conf)],
        capture_output=True, timeout=30, check=True)
    body = json.loads(out.stdout)
    stun, turn = body["iceServers"]
    assert stun == {"urlStrings": [f"stun:{api.host}:{api.port}"]}
    assert turn["urlStrings"] == [f"turn:{api.host}:{api.port}?transport=udp"]
    assert turn["username"].endswith(":grace")
    SECRETS_SEEN.append(turn["credential"])
    with TurnClient(api.address) as client:
        client.allocate(turn["username"], turn["credential"])
        client.refresh(0)

    bad = subprocess.run([api.binary, "credentials", "--secret-file", str(secret_file), "--user", "a:b"],
                         capture_output=True, timeout=30)
    assert bad.returncode != 0
    assert b"separator" in bad.stderr


# --- refusals, each with its exact status ---------------------------------------------


@pytest.mark.parametrize("headers", [
    {},
    {"Authorization": "Bearer not-the-token"},
    {"Authorization": "Basic dXNlcjpwYXNz"},
    {"Authorization": "Bearer"},
], ids=["missing", "wrong", "basic", "empty"])
def test_missing_or_wrong_token_is_401(api, headers):
    resp = api.http("GET", f"{PATH}?user=alice", headers=headers)
    assert_error(resp, 401, "unauthorized")
    assert resp.headers["www-authenticate"].startswith("Bearer")


def test_prefix_of_the_token_is_401(api):
    resp = api.http("GET", f"{PATH}?user=alice", headers={"Authorization": f"Bearer {api.api_token[:-1]}"})
    assert_error(resp, 401, "unauthorized")


@pytest.mark.parametrize("query", [
    "",
    "user=",
    "user=" + "x" * 65,
    "user=a%3Ab",
    "user=a%0Ab",
    "user=a&ttl=0",
    "user=a&ttl=-1",
    "user=a&ttl=abc",
    "user=a&ttl=1.5",
    "user=a&format=xml",
    "user=%ZZ",
], ids=["no-user", "empty-user", "long-user", "separator", "control-char", "ttl-0", "ttl-negative",
        "ttl-text", "ttl-fraction", "format", "bad-escape"])
def test_bad_parameters_are_400(api, query):
    resp = api.http("GET", f"{PATH}?{query}", headers=auth(api))
    assert_error(resp, 400, "invalid_request")


@pytest.mark.parametrize("body", [b"user=alice", b"[]", b'{"user": 5}', b'{"user":"a","ttl":true}', b""],
                         ids=["form", "array", "number-user", "bool-ttl", "empty"])
def test_bad_json_bodies_are_400(api, body):
    resp = api.http("POST", PATH, headers={**auth(api), "Content-Type": "application/json"}, body=body)
    assert_error(resp, 400, "invalid_request")


@pytest.mark.parametrize("path", ["/", "/api/v1/credential", "/api/v1/credentials/x", "/api/v2/credentials"])
def test_unknown_path_is_404(api, path):
    assert_error(api.http("GET", path, headers=auth(api)), 404, "not_found")


@pytest.mark.parametrize("method,path,allow", [
    ("PUT", PATH, "GET, POST"),
    ("DELETE", PATH, "GET, POST"),
    ("PATCH", PATH, "GET, POST"),
    ("POST", "/metrics", "GET, HEAD"),
    ("DELETE", "/healthz", "GET, HEAD"),
])
def test_wrong_method_is_405(api, method, path, allow):
    resp = api.http(method, path, headers=auth(api), body=b"{}" if method != "DELETE" else None)
    assert_error(resp, 405, "method_not_allowed")
    assert resp.headers["allow"] == allow


def test_oversized_body_is_413(api):
    body = json.dumps({"user": "alice", "pad": "p" * 64 * 1024}).encode()
    resp = api.http("POST", PATH, headers={**auth(api), "Content-Type": "application/json"}, body=body)
    assert resp.status == 413, resp


def test_oversized_headers_are_431(api):
    resp = api.http("GET", f"{PATH}?user=alice", headers={**auth(api), "X-Padding": "p" * 16 * 1024})
    assert_error(resp, 431, "request_header_fields_too_large")


def test_requests_past_the_burst_are_429(api):
    """Token bucket per key: 40 at once, then 20 per second. Requests go back to back on
    loopback, far faster than the refill, so a 429 comes well before 200 requests."""
    import http.client
    conn = http.client.HTTPConnection(api.host, api.api_port, timeout=5)
    statuses = []
    limited = None
    try:
        for _ in range(200):
            conn.request("GET", f"{PATH}?user=burst", headers={"Authorization": f"Bearer {BURST_KEY[1]}"})
            resp = conn.getresponse()
            body = resp.read()
            statuses.append(resp.status)
            if resp.status == 429:
                limited = (resp, body)
                break
    finally:
        conn.close()
    assert limited is not None, f"no 429 in {len(statuses)} requests"
    assert statuses[:40] == [200] * 40
    assert set(statuses[:-1]) == {200}
    resp, body = limited
    assert resp.getheader("Retry-After") == "1"
    assert json.loads(body)["error"] == "rate_limited"
    # Another key is not affected.
    issued(get(api, user="after-burst"))


def test_service_without_use_auth_secret_is_503(tmp_path):
    server = RelayServer("relayd", tmp_path / "no-rest", rest_auth=False)
    server.start()
    try:
        resp = server.http("GET", f"{PATH}?user=alice", headers={"Authorization": f"Bearer {server.api_token}"})
        assert_error(resp, 503, "credentials_unavailable")
        # Authentication still comes first.
        assert_error(server.http("GET", f"{PATH}?user=alice"), 401, "unauthorized")
        log = server.log_text()
    finally:
        problems = server.stop()
    assert not problems, problems
    assert server.api_token not in log


# --- health ---------------------------------------------------------------------------------


def test_healthz_and_readyz_answer_200_while_running(api):
    healthz = api.http("GET", "/healthz")
    assert (healthz.status, healthz.body) == (200, b"ok\n")
    readyz = api.http("GET", "/readyz")
    assert (readyz.status, readyz.body) == (200, b"ready\n")


# --- last: the log ------------------------------------------------------------------------------


def test_no_token_secret_or_password_appears_in_the_server_log(api):
    log = api.log_text()
    assert "credentials issued" in log  # the log was written, and is being checked
    assert len(SECRETS_SEEN) > 5
    for secret in SECRETS_SEEN:
        assert secret not in log, "a secret value reached the server log"
