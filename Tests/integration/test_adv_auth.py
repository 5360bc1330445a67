"""Adversarial suite, part 2: the long-term credential mechanism under attack (RFC 8489
§9.2.4, coturn's TURN REST usernames `<expiry>:<user>`).

Missing, forged, expired and foreign nonces; wrong keys; expired and malformed REST
usernames; USERNAME/REALM/NONCE missing next to MESSAGE-INTEGRITY; attributes after
MESSAGE-INTEGRITY (ignored, RFC 8489 §14.5); oversize text attributes; and usernames
carrying CR/LF and printf format specifiers, which must not reach the log raw.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import struct
import time

import pytest

from conftest import RelayServer, running, server_kind
from stunclient import (
    Attr,
    Class,
    Method,
    StunMessage,
    TurnClient,
    encode_attribute,
    long_term_key,
)
from test_adversarial import IS_COTURN, allocate, coturn_differs, requested_transport

UDP = requested_transport(17)


def rest_password(secret: str, username: str) -> str:
    """coturn use-auth-secret: base64(HMAC-SHA1(secret, username))."""
    return base64.b64encode(hmac.new(secret.encode(), username.encode(), hashlib.sha1).digest()).decode()


def challenge(client: TurnClient) -> tuple[str, bytes]:
    """REALM and NONCE from the 401 to an unauthenticated Allocate (RFC 8656 §7.2)."""
    resp = client.allocate_unauthenticated()
    assert resp.cls == Class.ERROR and resp.error_code()[0] == 401
    return resp.text(Attr.REALM), resp.get(Attr.NONCE)


def allocate_request(attrs) -> StunMessage:
    req = StunMessage(Method.ALLOCATE, Class.REQUEST)
    req.add(Attr.REQUESTED_TRANSPORT, UDP)
    for t, v in attrs:
        req.add(t, v)
    return req


def signed_allocate(server: RelayServer, client: TurnClient, username: str, password: str | None = None,
                    realm: str | None = None, nonce: bytes | None = None) -> StunMessage:
    """One Allocate signed for `username` (its REST password unless given), with the REALM and
    NONCE of a fresh challenge unless given."""
    got_realm, got_nonce = challenge(client)
    realm = got_realm if realm is None else realm
    nonce = got_nonce if nonce is None else nonce
    password = rest_password(server.secret, username) if password is None else password
    req = allocate_request([(Attr.USERNAME, username.encode()), (Attr.REALM, realm.encode()), (Attr.NONCE, nonce)])
    return client.transact(req, key=long_term_key(username, got_realm, password))


def code(resp: StunMessage) -> int | None:
    err = resp.error_code()
    return None if resp.cls == Class.SUCCESS else (err[0] if err else -1)


def release(client: TurnClient) -> None:
    client.refresh(0)


# --- missing attributes next to MESSAGE-INTEGRITY ---------------------------------------------


@pytest.mark.parametrize("missing", ["USERNAME", "REALM", "NONCE"])
def test_integrity_without_username_realm_or_nonce_is_400(relay, missing):
    """RFC 8489 §9.2.4: MESSAGE-INTEGRITY present but USERNAME, REALM or NONCE missing -> 400."""
    username, password = relay.credentials("mia")
    with TurnClient(relay.address) as client:
        realm, nonce = challenge(client)
        attrs = {"USERNAME": (Attr.USERNAME, username.encode()), "REALM": (Attr.REALM, realm.encode()),
                 "NONCE": (Attr.NONCE, nonce)}
        del attrs[missing]
        resp = client.transact(allocate_request(attrs.values()), key=long_term_key(username, realm, password))
        assert code(resp) == 400


# --- nonces --------------------------------------------------------------------------------------


def _flip_last(nonce: bytes) -> bytes:
    return nonce[:-1] + (b"0" if nonce[-1:] != b"0" else b"1")


FORGED_NONCES = {
    "random": lambda real: b"deadbeefdeadbeefdeadbeef",
    "one-character-changed": _flip_last,
    "empty": lambda real: b"",
    "truncated": lambda real: real[: len(real) // 2],
    "doubled": lambda real: real + real,
}


@pytest.mark.parametrize("forge", list(FORGED_NONCES.values()), ids=list(FORGED_NONCES))
def test_forged_nonce_is_438_with_a_fresh_nonce(relay, forge):
    """RFC 8489 §9.2.4: a NONCE the server did not issue (or no longer accepts) -> 438 Stale
    Nonce with a new NONCE; a retry with that nonce succeeds."""
    username, password = relay.credentials("nora")
    with TurnClient(relay.address) as client:
        realm, nonce = challenge(client)
        resp = signed_allocate(relay, client, username, nonce=forge(nonce))
        assert code(resp) == 438
        fresh = resp.get(Attr.NONCE)
        assert fresh and fresh != forge(nonce)
        resp = signed_allocate(relay, client, username, nonce=fresh)
        assert code(resp) is None
        client.username, client.realm, client.nonce = username, realm, fresh
        client.key = long_term_key(username, realm, password)
        release(client)


def test_nonce_issued_to_another_client_address_is_438(relay):
    """relayd's nonces are HMACs over a timestamp and the client IP (docs/credentials.md): one
    issued to 127.0.0.1 is stale when used from 127.0.0.2."""
    username, _ = relay.credentials("oscar")
    with TurnClient(relay.address) as first, TurnClient(relay.address, bind_host="127.0.0.2") as second:
        _, nonce = challenge(first)
        assert code(signed_allocate(relay, second, username, nonce=nonce)) == 438


@pytest.fixture(scope="module")
def short_nonce_server(tmp_path_factory):
    server = RelayServer(server_kind(), tmp_path_factory.mktemp("stale-nonce"), extra_args=["--stale-nonce=2"])
    with running(server):
        yield server


def test_expired_nonce_is_438_then_the_new_one_works(short_nonce_server):
    """A nonce older than stale-nonce seconds -> 438 with a new NONCE (RFC 8489 §9.2.4)."""
    server = short_nonce_server
    username, _ = server.credentials("pat")
    with TurnClient(server.address) as client:
        _, nonce = challenge(client)
        time.sleep(3.2)
        resp = signed_allocate(server, client, username, nonce=nonce)
        assert code(resp) == 438
        assert code(signed_allocate(server, client, username, nonce=resp.get(Attr.NONCE))) is None


# --- keys and REST usernames -----------------------------------------------------------------


def test_wrong_key_is_401_and_allocates_nothing(relay):
    """RFC 8489 §9.2.4: MESSAGE-INTEGRITY that does not verify -> 401 with REALM and NONCE; no
    allocation is made (the right key then succeeds on the same 5-tuple, not 437)."""
    username, password = relay.credentials("quinn")
    with TurnClient(relay.address) as client:
        resp = signed_allocate(relay, client, username, password="not-the-password")
        assert code(resp) == 401
        assert resp.get(Attr.NONCE) and resp.text(Attr.REALM) == relay.realm
        assert not resp.has(Attr.MESSAGE_INTEGRITY)
        assert allocate(relay, client, username=username, password=password).cls == Class.SUCCESS
        release(client)


def test_key_of_another_realm_is_401(relay):
    username, password = relay.credentials("rita")
    with TurnClient(relay.address) as client:
        realm, nonce = challenge(client)
        req = allocate_request([(Attr.USERNAME, username.encode()), (Attr.REALM, realm.encode()),
                                (Attr.NONCE, nonce)])
        assert code(client.transact(req, key=long_term_key(username, "other.realm", password))) == 401


def test_expired_rest_username_is_401(relay):
    """TURN REST: a username whose expiry has passed is refused even with the right HMAC."""
    with TurnClient(relay.address) as client:
        assert code(signed_allocate(relay, client, f"{int(time.time()) - 5}:sam")) == 401


MALFORMED_REST = {
    "not-a-number": "abc:tess",
    "empty-expiry": ":tess",
    "negative": "-100:tess",
    "overflowing": "99999999999999999999999:tess",
    "exponent": "1e12:tess",
    "hex": "0x7fffffff:tess",
}


@pytest.mark.parametrize("username", list(MALFORMED_REST.values()), ids=list(MALFORMED_REST))
def test_malformed_rest_username_is_401(relay, username):
    """A REST username whose expiry is not a plain unsigned decimal in range is refused, even
    when the password is the HMAC of exactly that string."""
    with TurnClient(relay.address) as client:
        assert code(signed_allocate(relay, client, username)) == 401


@coturn_differs("coturn answers an empty USERNAME with 401")
def test_empty_username_is_400(relay):
    """An empty USERNAME is no OpaqueString (RFC 8489 §14.3): a malformed request."""
    with TurnClient(relay.address) as client:
        assert code(signed_allocate(relay, client, "")) == 400


# --- attributes after MESSAGE-INTEGRITY ---------------------------------------------------------


def append_after_integrity(wire: bytes, *attrs: tuple[int, bytes]) -> bytes:
    """`wire` (ending in MESSAGE-INTEGRITY) with attributes appended and the header length
    grown to cover them; the HMAC still covers only what precedes it (RFC 8489 §14.5)."""
    tail = b"".join(encode_attribute(t, v) for t, v in attrs)
    length = struct.unpack("!H", wire[2:4])[0] + len(tail)
    return wire[:2] + struct.pack("!H", length) + wire[4:] + tail


@coturn_differs("coturn answers an unknown comprehension-required attribute after MESSAGE-INTEGRITY with 420")
def test_attributes_after_message_integrity_are_ignored(relay):
    """RFC 8489 §14.5: attributes after MESSAGE-INTEGRITY (other than FINGERPRINT) are ignored:
    an unknown comprehension-required one does not cause 420, and a LIFETIME 0 after it does
    not delete the allocation that the LIFETIME before it refreshes."""
    with TurnClient(relay.address) as client:
        username, password = relay.credentials("uma")
        realm, nonce = challenge(client)
        key = long_term_key(username, realm, password)
        req = allocate_request([(Attr.USERNAME, username.encode()), (Attr.REALM, realm.encode()),
                                (Attr.NONCE, nonce)])
        wire = append_after_integrity(req.encode(integrity_key=key, fingerprint=False),
                                      (0x7F31, b"unknown, comprehension-required"), (Attr.REQUESTED_TRANSPORT,
                                                                                     requested_transport(6)))
        client.send_raw(wire)
        resp = StunMessage.decode(client.recv_raw(3.0))
        assert resp.transaction_id == req.transaction_id and code(resp) is None, resp.error_code()

        refresh = StunMessage(Method.REFRESH, Class.REQUEST)
        for t, v in [(Attr.LIFETIME, struct.pack("!I", 600)), (Attr.USERNAME, username.encode()),
                     (Attr.REALM, realm.encode()), (Attr.NONCE, nonce)]:
            refresh.add(t, v)
        client.send_raw(append_after_integrity(refresh.encode(integrity_key=key, fingerprint=False),
                                               (Attr.LIFETIME, struct.pack("!I", 0))))
        resp = StunMessage.decode(client.recv_raw(3.0))
        assert code(resp) is None and resp.lifetime() == 600
        client.username, client.realm, client.nonce, client.key = username, realm, nonce, key
        assert client.refresh(900).lifetime() == 900  # still there
        release(client)


# --- oversize text attributes --------------------------------------------------------------------


OVERSIZE_NOT_400 = pytest.mark.xfail(
    IS_COTURN, strict=True, reason="coturn differs: 401 for a long USERNAME, 437 for a long REALM")

OVERSIZE = {
    "USERNAME-2000": ("username", "9" * 10 + ":" + "u" * 1989),
    "USERNAME-764": ("username", "9" * 10 + ":" + "u" * 753),
    # RFC 8489 §14.3: fewer than 509 bytes, whatever the codec parses (763 for RFC 5389 peers).
    "USERNAME-600": ("username", "9" * 10 + ":" + "u" * 589),
    "USERNAME-509": ("username", "9" * 10 + ":" + "u" * 498),
    "REALM-1000": ("realm", "r" * 1000),
}


def oversize_request(server: RelayServer, client: TurnClient, which: str, value: str) -> StunMessage:
    """An Allocate whose `which` (username, realm or nonce) is `value`, signed with the key of
    the username it carries, so that only the size is wrong."""
    realm, nonce = challenge(client)
    username, _ = server.credentials("vic")
    fields = {"username": username, "realm": realm, "nonce": nonce.decode()}
    fields[which] = value
    password = rest_password(server.secret, fields["username"])
    req = allocate_request([(Attr.USERNAME, fields["username"].encode()), (Attr.REALM, fields["realm"].encode()),
                            (Attr.NONCE, fields["nonce"].encode())])
    return client.transact(req, key=long_term_key(fields["username"], realm, password))


@OVERSIZE_NOT_400
@pytest.mark.parametrize("which,value", list(OVERSIZE.values()), ids=list(OVERSIZE))
def test_oversize_username_or_realm_is_400(relay, which, value):
    """RFC 8489 §14.3, §14.9: a USERNAME of 509 bytes or more, or a REALM over 763 bytes, is a
    malformed request -> 400 although the password is right for it, and the server keeps
    answering."""
    with TurnClient(relay.address) as client:
        resp = oversize_request(relay, client, which, value)
        assert code(resp) == 400
        assert client.binding().cls == Class.SUCCESS


@coturn_differs("coturn refuses USERNAMEs shorter than RFC 8489's bound")
def test_longest_username_allocates(relay):
    """508 bytes, the longest USERNAME RFC 8489 §14.3 allows, with its password: allocated."""
    with TurnClient(relay.address) as client:
        resp = oversize_request(relay, client, "username", "9" * 10 + ":" + "u" * 497)
        assert code(resp) is None, resp.error_code()


def test_oversize_nonce_is_438(relay):
    """RFC 8489 §9.2.4, §14.10: a 1000-byte NONCE is not one the server issued -> 438 with a
    fresh NONCE of normal size."""
    with TurnClient(relay.address) as client:
        resp = oversize_request(relay, client, "nonce", "n" * 1000)
        assert code(resp) == 438
        assert 0 < len(resp.get(Attr.NONCE)) < 128


# --- log injection ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def verbose_server(tmp_path_factory):
    server = RelayServer(server_kind(), tmp_path_factory.mktemp("log-injection"), extra_args=["--verbose"])
    with running(server):
        yield server


INJECTIONS = {
    "crlf": "eve\r\nINJECTED fake log line user=root",
    "lf": "eve\nINJECTED fake log line",
    "cr": "eve\rINJECTED overwrite",
    "format": "eve%s%n%x%p%08x%1$s",
    "nul-and-escape": "eve\x00\x1b[31mINJECTED",
}


def has_control_character(text: str) -> bool:
    return any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in text)


@coturn_differs("coturn allocates for usernames with control characters and logs them unescaped")
@pytest.mark.parametrize("user", list(INJECTIONS.values()), ids=list(INJECTIONS))
def test_crlf_and_format_specifiers_in_username_do_not_reach_the_log_raw(verbose_server, user):
    """Nothing secret or raw from a client is logged. A REST username holding CR/LF, NUL or
    escape sequences is no OpaqueString (RFC 8489 §14.3, RFC 8265 §4.2): 400 although the
    password is right for it. One holding printf specifiers is a valid name: it gets a real
    allocation (so it is logged) and a refused one. Either way the log has no forged line and
    no expansion."""
    server = verbose_server
    before = len(server.log_text())
    with TurnClient(server.address) as client:
        username = f"{int(time.time()) + 3600}:{user}"
        resp = signed_allocate(server, client, username)
        if has_control_character(user):
            assert code(resp) == 400
            assert client.binding().cls == Class.SUCCESS
        else:
            assert code(resp) is None, resp.error_code()
            client.username = username
            client.realm, client.nonce = server.realm, None
            client.key = long_term_key(username, server.realm, rest_password(server.secret, username))
            client.nonce = challenge(client)[1]
            release(client)
            assert code(signed_allocate(server, client, username, password="wrong")) == 401
    time.sleep(0.3)  # log lines are written by the loop thread
    raw = server.log_path.read_bytes()[before:]
    text = raw.decode("utf-8", "replace")
    assert b"\r" not in raw and b"\x1b" not in raw and b"\x00" not in raw
    for line in text.split("\n"):
        assert not line.startswith("INJECTED"), f"forged log line: {line!r}"
    if "%" in user:
        assert "(null)" not in text and "(nil)" not in text
        assert not re.search(r"eve[0-9a-f]{8}", text), "format specifier expanded"
