"""coturn's SQLite user database (docs/userdb.md), written by coturn's own `turnadmin`.

relayd is pointed at a database that Debian's `turnadmin` created and filled: a long-term user
authenticates with the password turnadmin was given, and a REST credential minted under a secret
turnadmin stored works beside the configured one. Users and secrets added or deleted with
turnadmin while relayd runs take effect within 5 s, with no SIGHUP. A database that disappears or
is overwritten with garbage leaves relayd serving from the last good view, with one log line and
`relayd_userdb_up 0`, and it picks the database up again once it is back.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time

import pytest

from conftest import RelayServer, running, server_kind
from floods import metric
from lifecycle import eventually
from stunclient import Attr, TurnClient, TurnError, rest_credentials

pytestmark = [
    pytest.mark.skipif(server_kind() != "relayd", reason="relayd reading coturn's user database"),
    pytest.mark.skipif(shutil.which("turnadmin") is None, reason="coturn's turnadmin is not installed"),
]

REALM = "example.org"
# Changes must take effect within 5 s (docs/userdb.md).
LIVE = 5.0


def turnadmin(db, *args: str) -> None:
    """Runs Debian's turnadmin on the SQLite file `db` (it creates coturn's schema if needed)."""
    result = subprocess.run(["turnadmin", "-b", str(db), *args], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stdout + result.stderr


def allocation_error(server: RelayServer, username: str, password: str, sha256: bool = False) -> int | None:
    """Allocates and releases as `username`: None on success, else the error code."""
    from lifecycle import allocate_outcome

    def client() -> TurnClient:
        made = TurnClient(server.address)
        if sha256:
            made.password_algorithm = 2  # SHA-256 (RFC 8489 §18.5.1)
            made.integrity = "sha256"
        return made
    return allocate_outcome(client, username, password)


def allocates(server: RelayServer, username: str, password: str) -> bool:
    code = allocation_error(server, username, password)
    assert code in (None, 401), code
    return code is None


@pytest.fixture
def database(tmp_path):
    db = tmp_path / "turndb"
    turnadmin(db, "-a", "-u", "alice", "-r", REALM, "-p", "alice-password")
    turnadmin(db, "-s", "db-secret-one", "-r", REALM)
    # Another realm's rows are not this relay's.
    turnadmin(db, "-a", "-u", "mallory", "-r", "other.example", "-p", "mallory-password")
    return db


def test_turnadmin_users_and_secrets_authenticate_and_change_live(tmp_path, database):
    server = RelayServer("relayd", tmp_path / "relayd", extra_args=[f"--userdb={database}", f"--realm={REALM}"])
    with running(server) as s:
        assert "event=userdb_loaded" in s.log_text() or '"userdb_loaded"' in s.log_text(), s.log_tail()
        assert allocates(s, "alice", "alice-password")
        assert not allocates(s, "alice", "wrong-password")
        assert not allocates(s, "mallory", "mallory-password"), "a user of another realm authenticated"
        # A REST credential under the database's secret, and one under the configured secret.
        assert allocates(s, *rest_credentials("db-secret-one", "carol"))
        assert allocates(s, *s.credentials(user="dave"))
        assert metric(s, "relayd_userdb_up") == 1
        assert metric(s, "relayd_userdb_users") == 2

        # Changes made with turnadmin while relayd runs, no SIGHUP.
        turnadmin(database, "-a", "-u", "bob", "-r", REALM, "-p", "bob-password")
        turnadmin(database, "-s", "db-secret-two", "-r", REALM)
        turnadmin(database, "-d", "-u", "alice", "-r", REALM)
        turnadmin(database, "-X", "db-secret-one", "-r", REALM)
        started = time.monotonic()
        assert eventually(lambda: allocates(s, "bob", "bob-password"), timeout=LIVE), "bob never authenticated"
        assert eventually(lambda: allocates(s, *rest_credentials("db-secret-two", "erin")), timeout=LIVE)
        assert time.monotonic() - started <= LIVE + 1
        assert not allocates(s, "alice", "alice-password"), "a deleted user still authenticates"
        assert not allocates(s, *rest_credentials("db-secret-one", "carol")), "a deleted secret still works"


def test_a_database_that_goes_away_leaves_the_last_good_view(tmp_path, database):
    server = RelayServer("relayd", tmp_path / "relayd", extra_args=[f"--userdb={database}", f"--realm={REALM}"])
    with running(server) as s:
        assert allocates(s, "alice", "alice-password")
        saved = database.read_bytes()
        database.unlink()
        assert eventually(lambda: metric(s, "relayd_userdb_up") == 0, timeout=LIVE)
        assert allocates(s, "alice", "alice-password"), "the last good view was dropped"
        # Garbage in its place: still the last good view, never a crash.
        database.write_bytes(b"SQLite format 3\x00" + os.urandom(4096))
        time.sleep(2.5)
        assert s.is_running()
        assert allocates(s, "alice", "alice-password")
        failures = metric(s, "relayd_userdb_read_failures_total")
        assert failures >= 2
        # One log line for the run of failures, not one a second.
        assert s.log_text().count("userdb_failed") == 1, s.log_tail()
        # The database comes back: served again, its changes with it.
        database.write_bytes(saved)
        turnadmin(database, "-a", "-u", "frank", "-r", REALM, "-p", "frank-password")
        assert eventually(lambda: allocates(s, "frank", "frank-password"), timeout=LIVE)
        # frank may have been found by a lookup before the next whole read: that comes too.
        assert eventually(lambda: metric(s, "relayd_userdb_up") == 1, timeout=LIVE)


def test_md5_comes_first_in_password_algorithms(tmp_path, database):
    """turnadmin stores MD5 keys, from which no SHA-256 key can be derived: relayd offers MD5
    first (RFC 8489 §9.2.4), so a client that does both uses the key the database holds."""
    server = RelayServer("relayd", tmp_path / "relayd", extra_args=[f"--userdb={database}", f"--realm={REALM}"])
    with running(server) as s, TurnClient(s.address) as client:
        challenge = client.allocate_unauthenticated()
        algorithms = challenge.get(Attr.PASSWORD_ALGORITHMS)
        assert algorithms is not None
        # Each entry: algorithm (2 bytes), parameters length (2 bytes); MD5 is 0x0001.
        assert algorithms[:2] == b"\x00\x01", algorithms.hex()


def test_realm_options_and_peer_ranges_apply_live(tmp_path, database):
    """turn_realm_option (written by `turnadmin -g`) replaces the configured quota, and the
    realm's denied_peer_ip rows join the peer policy, within 5 s and with no SIGHUP."""
    import sqlite3

    server = RelayServer("relayd", tmp_path / "relayd", extra_args=[f"--userdb={database}", f"--realm={REALM}"])
    with running(server) as s:
        first = TurnClient(s.address)
        try:
            first.allocate("alice", "alice-password")
            first.create_permission(("127.0.0.77", 9))
            turnadmin(database, "-g", "-r", REALM, "--user-quota", "1")
            with sqlite3.connect(database) as db:
                db.execute("INSERT INTO denied_peer_ip VALUES (?, ?)", (REALM, "127.0.0.77"))
                db.execute("INSERT INTO denied_peer_ip VALUES (?, ?)", (REALM, "not-an-address"))

            assert eventually(lambda: allocation_error(s, "alice", "alice-password") == 486, timeout=LIVE), \
                "user-quota from the database never applied"

            def denied() -> bool:
                try:
                    first.create_permission(("127.0.0.77", 9))
                except TurnError as e:
                    return e.code == 403
                return False

            assert eventually(denied, timeout=LIVE), "denied_peer_ip from the database never applied"
            first.create_permission(("127.0.0.1", 9))
            assert "userdb_values_skipped" in s.log_text(), s.log_tail()
        finally:
            first.close()


@pytest.fixture
def postgres():
    import pg_support

    reason = pg_support.available()
    if reason:
        pytest.skip(reason)
    server = pg_support.PostgresServer()
    try:
        server.start()
        yield server
    finally:
        server.stop()


def turnadmin_pg(server, *args: str) -> None:
    result = subprocess.run(["turnadmin", "-e", server.conninfo, *args], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stdout + result.stderr


def test_postgresql_users_and_secrets_written_by_turnadmin(tmp_path, postgres):
    """The same through libpq: a PostgreSQL database that turnadmin filled, changes live, and
    the last good view kept while PostgreSQL is down."""
    turnadmin_pg(postgres, "-a", "-u", "alice", "-r", REALM, "-p", "alice-password")
    turnadmin_pg(postgres, "-s", "pg-secret-one", "-r", REALM)
    server = RelayServer(
        "relayd", tmp_path / "relayd", extra_args=[f"--psql-userdb={postgres.conninfo}", f"--realm={REALM}"])
    with running(server) as s:
        assert allocates(s, "alice", "alice-password")
        assert not allocates(s, "alice", "wrong-password")
        assert allocates(s, *rest_credentials("pg-secret-one", "carol"))
        assert metric(s, "relayd_userdb_up") == 1
        turnadmin_pg(postgres, "-a", "-u", "bob", "-r", REALM, "-p", "bob-password")
        turnadmin_pg(postgres, "-d", "-u", "alice", "-r", REALM)
        assert eventually(lambda: allocates(s, "bob", "bob-password"), timeout=LIVE), "bob never authenticated"
        assert eventually(lambda: not allocates(s, "alice", "alice-password"), timeout=LIVE)
        # PostgreSQL goes away: the last good view serves on.
        postgres.stop()
        assert eventually(lambda: metric(s, "relayd_userdb_up") == 0, timeout=LIVE + 5)
        assert allocates(s, "bob", "bob-password")
        # The failure is logged once (the main thread takes it within a second), not once a try.
        assert eventually(lambda: "userdb_failed" in s.log_text(), timeout=3), s.log_tail()
        time.sleep(2)
        assert s.log_text().count("userdb_failed") == 1, s.log_tail()


def relayd_users(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([RelayServer.default_binary("relayd"), "users", *args], input=stdin,
                          capture_output=True, text=True, timeout=30)


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_relayd_users_writes_what_turnadmin_and_relayd_read(tmp_path, request, kind):
    """`relayd users` writes coturn's schema: turnadmin lists the users it added, a running
    relayd takes them within 5 s with MD5 and, from relayd's own table, with SHA-256; a user
    turnadmin then deletes loses both keys."""
    if kind == "sqlite":
        where = ["-b", str(tmp_path / "turndb")]
        admin = lambda *a: turnadmin(tmp_path / "turndb", *a)  # noqa: E731
        served = f"--userdb={tmp_path / 'turndb'}"
    else:
        postgres = request.getfixturevalue("postgres")
        where = ["-e", postgres.conninfo]
        admin = lambda *a: turnadmin_pg(postgres, *a)  # noqa: E731
        served = f"--psql-userdb={postgres.conninfo}"
    where += ["-r", REALM]
    made = relayd_users("add", "dave", "-p", "dave-password", *where)
    assert made.returncode == 0, made.stderr
    server = RelayServer("relayd", tmp_path / "relayd", extra_args=[served, f"--realm={REALM}"])
    with running(server) as s:
        assert allocates(s, "dave", "dave-password")
        assert allocation_error(s, "dave", "dave-password", sha256=True) is None
        # Added while relayd runs: a user (its password on standard input), a secret, an option.
        assert relayd_users("add", "erin", *where, stdin="erin-password\n").returncode == 0
        assert relayd_users("add-secret", "cli-secret", *where).returncode == 0
        assert relayd_users("set-option", "user-quota", "5", *where).returncode == 0
        assert eventually(lambda: allocates(s, "erin", "erin-password"), timeout=LIVE)
        assert eventually(lambda: allocates(s, *rest_credentials("cli-secret", "frank")), timeout=LIVE)
        assert relayd_users("list", *where).stdout.split() == ["dave", "erin"]
        assert relayd_users("list-secrets", *where).stdout.split() == ["cli-secret"]
        assert relayd_users("options", *where).stdout.split() == ["user-quota=5"]
        refused = relayd_users("set-option", "bogus", "1", *where)
        assert refused.returncode == 1 and "realm options are" in refused.stderr
        # coturn's own tool reads what relayd wrote, and what it deletes is gone for both keys.
        admin("-d", "-u", "dave", "-r", REALM)

        assert eventually(lambda: allocation_error(s, "dave", "dave-password", sha256=True) == 401, timeout=LIVE), \
            "a user turnadmin deleted kept its SHA-256 key"
        assert not allocates(s, "dave", "dave-password")
        assert relayd_users("delete", "erin", *where).returncode == 0
        assert eventually(lambda: not allocates(s, "erin", "erin-password"), timeout=LIVE)


def test_redis_users_and_secrets_written_by_turnadmin(tmp_path):
    """coturn's Redis key layout, written by turnadmin (-N), read through hiredis: users,
    secrets, a realm option and a denied range apply, and changes take effect live."""
    from redis_support import RedisServer

    redis = RedisServer(tmp_path / "redis")
    redis.start()
    try:
        where = f"ip=127.0.0.1 port={redis.port} dbname=2"

        def admin(*args: str) -> None:
            result = subprocess.run(["turnadmin", "-N", where, *args], capture_output=True, text=True, timeout=30)
            assert result.returncode == 0, result.stdout + result.stderr

        admin("-a", "-u", "alice", "-r", REALM, "-p", "alice-password")
        admin("-s", "redis-secret-one", "-r", REALM)
        admin("-a", "-u", "mallory", "-r", "other.example", "-p", "mallory-password")
        server = RelayServer("relayd", tmp_path / "relayd", extra_args=[f"--redis-userdb={where}", f"--realm={REALM}"])
        with running(server) as s:
            assert allocates(s, "alice", "alice-password")
            assert not allocates(s, "mallory", "mallory-password")
            assert allocates(s, *rest_credentials("redis-secret-one", "carol"))
            assert metric(s, "relayd_userdb_users") == 2
            admin("-a", "-u", "bob", "-r", REALM, "-p", "bob-password")
            admin("-d", "-u", "alice", "-r", REALM)
            admin("-g", "-r", REALM, "--user-quota", "1")
            assert eventually(lambda: allocates(s, "bob", "bob-password"), timeout=LIVE), "bob never authenticated"
            assert eventually(lambda: not allocates(s, "alice", "alice-password"), timeout=LIVE)
            with TurnClient(s.address) as first:
                first.allocate("bob", "bob-password")

                assert eventually(lambda: allocation_error(s, "bob", "bob-password") == 486, timeout=LIVE), \
                    "user-quota from Redis never applied"
                first.refresh(0)
            # Redis goes away: the last good view serves on.
            redis.kill()
            assert eventually(lambda: metric(s, "relayd_userdb_up") == 0, timeout=LIVE + 5)
            assert allocates(s, "bob", "bob-password")
    finally:
        redis.kill()


def test_postgresql_uri_and_truncate(tmp_path, postgres):
    """psql-userdb as a postgresql:// URI; a TRUNCATE, which moves no row count in PostgreSQL's
    statistics, still takes effect live."""
    turnadmin_pg(postgres, "-a", "-u", "alice", "-r", REALM, "-p", "alice-password")
    uri = f"postgresql://postgres@127.0.0.1:{postgres.port}/turn"
    server = RelayServer("relayd", tmp_path / "relayd", extra_args=[f"--psql-userdb={uri}", f"--realm={REALM}"])
    with running(server) as s:
        assert allocates(s, "alice", "alice-password")
        postgres.sql("TRUNCATE turnusers_lt")
        assert eventually(lambda: not allocates(s, "alice", "alice-password"), timeout=LIVE), \
            "a truncated table's users still authenticate"


def test_a_tenant_gets_the_users_secrets_and_origins_of_its_realm(tmp_path, database):
    """A tenant whose realm is a realm of the database (docs/tenants.md): turnadmin's users of that
    realm authenticate where the tenant is named (its listener address, an ORIGIN the database
    maps to its realm), never on the default tenant's address; its realm options are its own."""
    from test_tenants import allocate_with_origin
    turnadmin(database, "-O", "-o", "https://other.example", "-r", "other.example")
    turnadmin(database, "-g", "-r", "other.example", "--user-quota", "1")
    tenant = tmp_path / "other.conf"
    tenant.write_text("realm=other.example\nlistening-ip=127.0.0.3\n")
    server = RelayServer("relayd", tmp_path / "relayd", extra_args=[
        f"--userdb={database}", f"--realm={REALM}", "--listening-ip=127.0.0.3", f"--tenant={tenant}"])
    with running(server) as s:
        tenant_address = ("127.0.0.3", s.port)
        # mallory is other.example's: not on the shared address, yes on the tenant's.
        assert not allocates(s, "mallory", "mallory-password")
        with TurnClient(tenant_address, bind_host="127.0.0.1") as client:
            client.allocate("mallory", "mallory-password")
            assert client.realm == "other.example"
            # The realm's user-quota of 1, from turn_realm_option, is the tenant's.
            with TurnClient(tenant_address, bind_host="127.0.0.1") as second:
                with pytest.raises(TurnError) as refused:
                    second.allocate("mallory", "mallory-password")
                assert refused.value.code == 486
            client.refresh(0)
        # alice is the main realm's: refused at the tenant's address.
        with TurnClient(tenant_address, bind_host="127.0.0.1") as client:
            with pytest.raises(TurnError) as refused:
                client.allocate("alice", "alice-password")
            assert refused.value.code == 401
        # turn_origin_to_realm: the ORIGIN names the tenant on the shared address too.
        assert allocate_with_origin(s, b"https://other.example", "mallory", "mallory-password") == "other.example"


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_a_user_added_a_moment_ago_is_looked_up_at_once(tmp_path, database, request, kind):
    """A user written to the database after the last read is not in relayd's view: its Allocate
    is held while the user is looked up off the loop, and succeeds at once (docs/userdb.md)."""
    import sqlite3
    from stunclient import long_term_key
    if kind == "sqlite":
        served = f"--userdb={database}"

        def add(name: str) -> None:
            with sqlite3.connect(database) as db:
                db.execute("INSERT INTO turnusers_lt (realm, name, hmackey) VALUES (?, ?, ?)",
                           (REALM, name, long_term_key(name, REALM, "fresh-password").hex()))
    else:
        postgres = request.getfixturevalue("postgres")
        served = f"--psql-userdb={postgres.conninfo}"
        turnadmin_pg(postgres, "-a", "-u", "alice", "-r", REALM, "-p", "alice-password")

        def add(name: str) -> None:
            turnadmin_pg(postgres, "-a", "-u", name, "-r", REALM, "-p", "fresh-password")
    server = RelayServer("relayd", tmp_path / "relayd", extra_args=[served, f"--realm={REALM}"])
    with running(server) as s:
        assert allocates(s, "alice", "alice-password")
        for i in range(3):
            name = f"newcomer{i}"
            add(name)
            # At once: no wait for the watcher's next read.
            assert allocation_error(s, name, "fresh-password") is None
            # Loops publish their counters every 250 ms.
            if eventually(lambda: metric(s, "relayd_userdb_lookups_total") >= 1, timeout=1.0):
                break
        # At least one of three went by its lookup (a read landing between the insert and the
        # Allocate, a few milliseconds, is rare).
        assert metric(s, "relayd_userdb_lookups_total") >= 1
        # A name the database does not have either: 401, and it is not asked for again at once.
        assert allocation_error(s, "nobody-at-all", "x") == 401


def test_relayd_users_writes_coturns_redis_layout(tmp_path):
    """`relayd users -N` writes coturn's Redis key layout: turnadmin lists what it wrote, and a
    running relayd takes its users, secrets and options live."""
    from redis_support import RedisServer

    redis = RedisServer(tmp_path / "redis")
    redis.start()
    try:
        where = f"ip=127.0.0.1 port={redis.port} dbname=3"
        cli = ["-N", where, "-r", REALM]
        made = relayd_users("add", "gwen", "-p", "gwen-password", *cli)
        assert made.returncode == 0, made.stderr
        listed = subprocess.run(["turnadmin", "-N", where, "-l", "-r", REALM], capture_output=True, text=True,
                                timeout=30)
        assert "gwen" in listed.stdout, listed.stdout + listed.stderr
        server = RelayServer("relayd", tmp_path / "relayd", extra_args=[f"--redis-userdb={where}", f"--realm={REALM}"])
        with running(server) as s:
            assert allocates(s, "gwen", "gwen-password")
            assert relayd_users("add-secret", "redis-cli-secret", *cli).returncode == 0
            assert relayd_users("set-option", "user-quota", "7", *cli).returncode == 0
            assert eventually(lambda: allocates(s, *rest_credentials("redis-cli-secret", "hal")), timeout=LIVE)
            assert relayd_users("list-secrets", *cli).stdout.split() == ["redis-cli-secret"]
            assert relayd_users("options", *cli).stdout.split() == ["user-quota=7"]
            assert relayd_users("delete", "gwen", *cli).returncode == 0
            assert relayd_users("list", *cli).stdout.split() == []
            assert eventually(lambda: not allocates(s, "gwen", "gwen-password"), timeout=LIVE)
    finally:
        redis.kill()
