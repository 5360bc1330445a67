"""Tenants (docs/tenants.md): five apps on one UDP address and one TLS port.

Each tenant is a file `tenant=` names, with its own REST secret and API keys. Credentials minted
through a tenant's key allocate on the shared UDP address and the shared TLS port, and count as
that tenant's. A credential of one tenant never verifies where another tenant is named (its
listener address, its TLS server name), and a tenant's admin key sees and ends only its own
sessions. The TLS server name picks the tenant's certificate; two tenants' allocations cannot
relay to each other; a tenant's reservation holds capacity back from the others; /metrics has
a tenant label bounded by the configured tenants.
"""

from __future__ import annotations

import json
import re
import secrets
import ssl
import struct
import subprocess
from pathlib import Path

import pytest

from conftest import RelayServer, make_test_cert, running, server_kind
from lifecycle import allocate_outcome, eventually
from streamclient import StreamTurnClient, client_tls_context
from stunclient import Attr, Class, Method, StunMessage, TurnClient, TurnError, long_term_key, rest_credentials

# ORIGIN (0x802F), as coturn reads it.
ORIGIN = 0x802F

pytestmark = pytest.mark.skipif(server_kind() != "relayd", reason="relayd's tenants")

NAMES = ["voice", "chat", "kit", "sos", "ident"]
# The voice tenant's own listener address; 127.0.0.0/8 is all loopback on Linux.
VOICE_IP = "127.0.0.2"
IDENT_SNI = "ident.example"
OPERATOR_TOKEN = secrets.token_hex(20)


class Tenant:
    def __init__(self, name: str, directory: Path):
        self.name = name
        self.secret = secrets.token_hex(16)
        self.token = secrets.token_hex(20)
        self.admin_token = secrets.token_hex(20)
        self.file = directory / f"{name}.conf"

    def write(self, extra: str = "") -> None:
        self.file.write_text(
            f"# tenant {self.name}\n"
            f"static-auth-secret={self.secret}\n"
            f"api-key={self.name}-app:{self.token}\n"
            f"api-key={self.name}-ops:{self.admin_token}:admin\n" + extra)

    def credentials(self, server: RelayServer, user: str) -> tuple[str, str]:
        """Mints a credential through the credential API with this tenant's key."""
        resp = server.http("GET", f"/api/v1/credentials?user={user}",
                           headers={"Authorization": f"Bearer {self.token}"})
        assert resp.status == 200, resp
        body = resp.json()
        return body["username"], body["password"]

    def admin(self, server: RelayServer, method: str, path: str):
        return server.http(method, path, headers={"Authorization": f"Bearer {self.admin_token}"})


@pytest.fixture
def fleet(tmp_path):
    tenants = {name: Tenant(name, tmp_path) for name in NAMES}
    make_test_cert(tmp_path / "ident-tls", IDENT_SNI)
    tenants["voice"].write(f"realm=voice.example\nlistening-ip={VOICE_IP}\n")
    tenants["chat"].write("origin=https://chat.example\nuser-quota=2\n")
    tenants["kit"].write()
    tenants["sos"].write("reserve-allocations=3\n")
    tenants["ident"].write(
        f"tls-server-name={IDENT_SNI}\ncert={tmp_path / 'ident-tls' / 'cert.pem'}\n"
        f"pkey={tmp_path / 'ident-tls' / 'pkey.pem'}\n")
    server = RelayServer(
        "relayd", tmp_path / "relayd", streams=True,
        extra_args=[f"--listening-ip={VOICE_IP}", "--total-quota=12", f"--api-key=ops:{OPERATOR_TOKEN}:admin",
                    *[f"--tenant={t.file}" for t in tenants.values()]])
    with running(server) as s:
        yield s, tenants


def allocate_udp(server_address, username: str, password: str) -> TurnClient:
    client = TurnClient(server_address, bind_host="127.0.0.1")
    try:
        client.allocate(username, password)
    except BaseException:
        client.close()
        raise
    return client


def allocation_error(client_factory, username: str, password: str) -> int | None:
    return allocate_outcome(client_factory, username, password)


def sessions(server: RelayServer, tenant: Tenant) -> list[dict]:
    resp = tenant.admin(server, "GET", "/api/v1/allocations")
    assert resp.status == 200, resp
    return resp.json()["allocations"]


def test_five_tenants_share_one_udp_address_and_one_tls_port(fleet):
    server, tenants = fleet
    held = []
    try:
        for name, tenant in tenants.items():
            username, password = tenant.credentials(server, "alice")
            held.append(allocate_udp(server.address, username, password))
            tls = StreamTurnClient(server.tls_address, tls=True)
            held.append(tls)
            tls.allocate(username, password)
            # Every tenant's 401 on the shared address names the default realm.
            assert tls.realm == server.realm
        # Each tenant's admin key sees its own two sessions, its users without the prefix.
        for name, tenant in tenants.items():
            mine = sessions(server, tenant)
            assert [a["user"] for a in mine] == ["alice", "alice"], (name, mine)
            assert {a["tenant"] for a in mine} == {name}
        # The operator's key sees all ten, each user behind its tenant's name.
        everything = server.http("GET", "/api/v1/allocations?limit=100",
                                 headers={"Authorization": f"Bearer {OPERATOR_TOKEN}"})
        assert everything.status == 200, everything
        users = sorted(a["user"] for a in everything.json()["allocations"])
        assert users == sorted(f"{name}/alice" for name in NAMES for _ in range(2)), users
        metrics = server.http("GET", "/metrics").body.decode()
        for name in NAMES:
            assert f'relayd_tenant_allocations{{tenant="{name}"}} 2' in metrics, metrics
        assert 'relayd_tenant_allocations{tenant="default"} 0' in metrics
        labels = set(re.findall(r'relayd_tenant_allocations\{tenant="([^"]+)"\}', metrics))
        assert labels == set(NAMES) | {"default"}
        # Each tenant's usage: its two allocations, ended without relaying, and nobody else's.
        for client in held:
            client.refresh(0)

        def counted(tenant: Tenant):
            resp = tenant.admin(server, "GET", "/api/v1/usage")
            assert resp.status == 200, resp
            return resp.json()["total"]
        for tenant in tenants.values():
            assert eventually(lambda: counted(tenant)["allocations"] == 2, timeout=5), counted(tenant)
            assert counted(tenant)["unused_allocations"] == 2
            assert counted(tenant)["bytes_to_peer"] == 0
    finally:
        for client in held:
            client.close()


def test_a_credential_of_one_tenant_never_works_where_another_is_named(fleet):
    server, tenants = fleet
    voice_udp = lambda: TurnClient((VOICE_IP, server.port), bind_host="127.0.0.1")  # noqa: E731
    ident_tls = lambda: StreamTurnClient(server.tls_address, tls=True, server_hostname=IDENT_SNI)  # noqa: E731
    for name, tenant in tenants.items():
        credential = tenant.credentials(server, "bob")
        expected_voice = None if name == "voice" else 401
        expected_ident = None if name == "ident" else 401
        assert allocation_error(voice_udp, *credential) == expected_voice, name
        assert allocation_error(ident_tls, *credential) == expected_ident, name
    # The default tenant's own secret is no key to a tenant's address either.
    assert allocation_error(voice_udp, *server.credentials("carol")) == 401
    # A username moved between tenants: the right expiry, another tenant's password.
    username, _ = tenants["kit"].credentials(server, "dave")
    _, password = rest_credentials(tenants["chat"].secret, "dave", expiry=int(username.split(":")[0]))
    assert allocation_error(lambda: TurnClient(server.address, bind_host="127.0.0.1"), username, password) is None
    # ...is chat's credential now (the secret decides), never kit's. The first
    # character is swapped for one it is not, so the password always differs.
    wrong = ("y" if password[0] == "x" else "x") + password[1:]
    assert wrong != password
    assert allocation_error(lambda: TurnClient(server.address, bind_host="127.0.0.1"),
                            username, wrong) == 401


def test_the_tls_server_name_picks_the_tenant_certificate(fleet, tmp_path):
    server, _ = fleet

    def served(server_hostname: str | None) -> bytes:
        ctx = client_tls_context(alpn=["stun.turn"])
        with ctx.wrap_socket(__import__("socket").create_connection(server.tls_address, timeout=5),
                             server_hostname=server_hostname) as sock:
            return sock.getpeercert(binary_form=True)

    def der(path: Path) -> bytes:
        return ssl.PEM_cert_to_DER_cert(path.read_text())

    assert served(IDENT_SNI) == der(tmp_path / "ident-tls" / "cert.pem")
    assert served("IDENT.example") == der(tmp_path / "ident-tls" / "cert.pem")
    assert served("other.example") == der(server.cert_path)
    assert served(None) == der(server.cert_path)
    # openssl s_client, the independent client, sees the same.
    out = subprocess.run(
        ["openssl", "s_client", "-connect", f"127.0.0.1:{server.tls_port}", "-servername", IDENT_SNI,
         "-brief"], input=b"", capture_output=True, timeout=20)
    assert b"CN = ident.example" in out.stdout + out.stderr, out


def test_a_tenant_admin_key_sees_and_ends_only_its_own_sessions(fleet):
    server, tenants = fleet
    voice_user = tenants["voice"].credentials(server, "erin")
    kit_user = tenants["kit"].credentials(server, "erin")
    voice = allocate_udp(server.address, *voice_user)
    kit = allocate_udp(server.address, *kit_user)
    try:
        kit_sessions = sessions(server, tenants["kit"])
        assert len(kit_sessions) == 1
        voice_session = sessions(server, tenants["voice"])[0]["session"]
        # kit's admin cannot read, end or name voice's session or user.
        assert tenants["kit"].admin(server, "GET", f"/api/v1/allocations/{voice_session}").status == 404
        assert tenants["kit"].admin(server, "DELETE", f"/api/v1/allocations/{voice_session}").status == 404
        gone = tenants["kit"].admin(server, "DELETE", "/api/v1/allocations?user=voice%2Ferin")
        assert gone.status == 200 and gone.json()["terminated"] == 0, gone
        assert len(sessions(server, tenants["voice"])) == 1
        # ...nor upgrade the node or open the status page.
        assert tenants["kit"].admin(server, "POST", "/api/v1/upgrade").status == 403
        # Its own user by its plain name: ended.
        ended = tenants["kit"].admin(server, "DELETE", "/api/v1/allocations?user=erin")
        assert ended.json()["terminated"] == 1, ended
        assert sessions(server, tenants["kit"]) == []
        assert len(sessions(server, tenants["voice"])) == 1
        # A block by a tenant's admin applies to its user only.
        blocked = server.http("POST", "/api/v1/users/erin/block?seconds=60",
                              headers={"Authorization": f"Bearer {tenants['kit'].admin_token}"})
        assert blocked.status == 200, blocked
        assert allocation_error(lambda: TurnClient(server.address, bind_host="127.0.0.1"),
                                *tenants["kit"].credentials(server, "erin")) == 403
        assert allocation_error(lambda: TurnClient(server.address, bind_host="127.0.0.1"),
                                *tenants["chat"].credentials(server, "erin")) is None
        listed = tenants["voice"].admin(server, "GET", "/api/v1/blocks").json()
        assert listed["blocks"] == [], listed
    finally:
        voice.close()
        kit.close()


def test_two_tenants_allocations_cannot_relay_to_each_other(fleet):
    server, tenants = fleet
    a = allocate_udp(server.address, *tenants["voice"].credentials(server, "frank"))
    a2 = allocate_udp(server.address, *tenants["voice"].credentials(server, "gina"))
    b = allocate_udp(server.address, *tenants["chat"].credentials(server, "hank"))
    try:
        with pytest.raises(TurnError) as refused:
            a.create_permission(b.relayed)
        assert refused.value.code == 403
        with pytest.raises(TurnError) as refused:
            b.create_permission(a.relayed)
        assert refused.value.code == 403
        # Within one tenant, relay to relay works.
        a.create_permission(a2.relayed)
        a2.create_permission(a.relayed)
        a.send_indication(a2.relayed, b"same tenant")
        got = a2.receive(2.0)
        assert got is not None and got.payload == b"same tenant", got
        # chat's relayed address sends to voice's: voice holds a permission for the relay IP,
        # the tenant check drops it.
        b.send_indication(a.relayed, b"other tenant")
        assert a.receive(1.0) is None
    finally:
        for c in (a, a2, b):
            c.close()


def test_reserved_capacity_admits_the_emergency_tenant_on_a_full_node(fleet):
    server, tenants = fleet
    held = []
    try:
        # total-quota 12, sos reserves 3: the others get 9.
        for i in range(9):
            name = NAMES[i % 3]
            held.append(allocate_udp(server.address, *tenants[name].credentials(server, f"u{i}")))
        code = allocation_error(lambda: TurnClient(server.address, bind_host="127.0.0.1"),
                                *tenants["kit"].credentials(server, "late"))
        assert code == 508
        for i in range(3):
            held.append(allocate_udp(server.address, *tenants["sos"].credentials(server, f"caller{i}")))
        assert allocation_error(lambda: TurnClient(server.address, bind_host="127.0.0.1"),
                                *tenants["sos"].credentials(server, "one-more")) == 508
    finally:
        for client in held:
            client.close()


def test_a_tenant_user_quota_counts_that_tenant_only(fleet):
    server, tenants = fleet
    first = allocate_udp(server.address, *tenants["chat"].credentials(server, "ivy"))
    second = allocate_udp(server.address, *tenants["chat"].credentials(server, "ivy"))
    try:
        assert allocation_error(lambda: TurnClient(server.address, bind_host="127.0.0.1"),
                                *tenants["chat"].credentials(server, "ivy")) == 486
        assert allocation_error(lambda: TurnClient(server.address, bind_host="127.0.0.1"),
                                *tenants["kit"].credentials(server, "ivy")) is None
    finally:
        first.close()
        second.close()


def allocate_with_origin(server: RelayServer, origin: bytes, username: str, password: str) -> str:
    """Allocates with ORIGIN in every request, as browsers sent it; returns the 401's realm."""
    with TurnClient(server.address, bind_host="127.0.0.1") as client:
        first = StunMessage(Method.ALLOCATE, Class.REQUEST)
        first.add(Attr.REQUESTED_TRANSPORT, struct.pack("!B3x", 17))
        first.add(ORIGIN, origin)
        challenge = client.transact(first)
        assert challenge.error_code()[0] == 401
        client.realm = challenge.text(Attr.REALM)
        client.nonce = challenge.get(Attr.NONCE)
        client.username = username
        client.key = long_term_key(username, client.realm, password)
        client.check(client.authenticated_request(
            Method.ALLOCATE, [(Attr.REQUESTED_TRANSPORT, struct.pack("!B3x", 17)), (ORIGIN, origin)]), "Allocate")
        client.refresh(0)
        return client.realm


def test_origin_names_the_tenant_realm(fleet):
    server, tenants = fleet
    assert allocate_with_origin(server, b"https://chat.example", *tenants["chat"].credentials(server, "jack")) == "chat"
    # Under chat's ORIGIN, only chat's secret is tried.
    with pytest.raises(TurnError) as refused:
        allocate_with_origin(server, b"https://chat.example", *tenants["kit"].credentials(server, "jack"))
    assert refused.value.code == 401
    # An ORIGIN no tenant claims is the shared address.
    realm = allocate_with_origin(server, b"https://other.example", *tenants["kit"].credentials(server, "jack"))
    assert realm == server.realm


@pytest.mark.parametrize("text, key", [
    ("listening-port=4000\n", "listening-port"),
    ("static-auth-secret=x\nno-tls\n", "no-tls"),
])
def test_a_tenant_file_with_a_key_it_may_not_hold_is_refused_naming_file_line_and_key(tmp_path, text, key):
    tenant = tmp_path / "bad.conf"
    tenant.write_text("# a tenant\n" + text)
    main = tmp_path / "relayd.conf"
    main.write_text(f"realm=example.org\nuse-auth-secret\nstatic-auth-secret=main\ntenant={tenant}\n")
    result = subprocess.run([RelayServer.default_binary("relayd"), "check-config", "-c", str(main)],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode != 0
    line = 2 if key == "listening-port" else 3
    assert f"{tenant}:{line}: key '{key}'" in result.stderr, result.stderr


def test_two_tenants_with_one_secret_are_refused(tmp_path):
    (tmp_path / "a.conf").write_text("static-auth-secret=same\n")
    (tmp_path / "b.conf").write_text("static-auth-secret=same\n")
    main = tmp_path / "relayd.conf"
    main.write_text("realm=example.org\ntenant=a.conf\ntenant=b.conf\n")
    result = subprocess.run([RelayServer.default_binary("relayd"), "check-config", "-c", str(main)],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode != 0
    assert "tenant 'b' shares a static-auth-secret with tenant 'a'" in result.stderr, result.stderr


def test_a_binding_over_tls_with_a_tenant_server_name_is_answered(fleet):
    server, _ = fleet
    with StreamTurnClient(server.tls_address, tls=True, server_hostname=IDENT_SNI) as client:
        answer = client.binding()
        assert answer.xor_address(Attr.XOR_MAPPED_ADDRESS) is not None


def test_a_reload_adds_and_reorders_tenants_and_live_allocations_keep_theirs(tmp_path):
    from lifecycle import FileServer, wait_for_log
    a, b, c = (Tenant(name, tmp_path) for name in ("alpha", "beta", "gamma"))
    for t in (a, b, c):
        t.write()
    base = f"realm=example.org\nuse-auth-secret\nstatic-auth-secret=main-secret\napi-key=ops:{OPERATOR_TOKEN}:admin\n"
    server = FileServer(tmp_path / "srv", base + f"tenant={a.file}\ntenant={b.file}\n", extra_args=["--drain-timeout=0"])
    with running(server) as s:
        # gamma is not configured yet: its credential verifies nowhere.
        assert allocation_error(lambda: TurnClient(s.address, bind_host="127.0.0.1"),
                                *rest_credentials(c.secret, "zoe")) == 401
        held = allocate_udp(s.address, *b.credentials(s, "yan"))
        try:
            server.rewrite(base + f"tenant={c.file}\ntenant={b.file}\ntenant={a.file}\n")
            s.proc.send_signal(__import__("signal").SIGHUP)
            wait_for_log(s, r"configuration reloaded")
            assert allocation_error(lambda: TurnClient(s.address, bind_host="127.0.0.1"),
                                    *c.credentials(s, "zoe")) is None
            # beta's allocation is still beta's, and its refreshes still verify.
            assert [x["user"] for x in sessions(s, b)] == ["yan"]
            held.refresh(600)
            # Dropping alpha: its credentials verify no more.
            server.rewrite(base + f"tenant={c.file}\ntenant={b.file}\n")
            s.proc.send_signal(__import__("signal").SIGHUP)
            wait_for_log(s, r"configuration reloaded", count=2)
            assert allocation_error(lambda: TurnClient(s.address, bind_host="127.0.0.1"),
                                    *rest_credentials(a.secret, "ann")) == 401
            assert [x["user"] for x in sessions(s, b)] == ["yan"]
        finally:
            held.close()
