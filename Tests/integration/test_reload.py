"""SIGHUP reload without dropping calls: under continuous relayed traffic the REST
secret and the TLS certificate rotate, nothing is lost on the existing allocation, new
credentials work, old ones are refused for new allocations, an invalid file is rejected and
logged, and restart-only keys are reported."""

from __future__ import annotations

import hashlib
import secrets
import signal
import ssl

import pytest

from conftest import free_port, make_test_cert, running
from lifecycle import (
    FileServer,
    PacedStream,
    allocate_with_channel,
    conf,
    error_code_of_allocate,
    eventually,
    relayd_only,
    wait_for_log,
)
from streamclient import client_tls_context, connect

pytestmark = relayd_only


def served_fingerprint(server: FileServer) -> str:
    sock = connect(server.tls_address, tls=True, context=client_tls_context())
    try:
        return hashlib.sha256(sock.getpeercert(binary_form=True)).hexdigest()
    finally:
        sock.close()


def file_fingerprint(path) -> str:
    pem = path.read_text()
    first = pem[: pem.index("-----END CERTIFICATE-----") + len("-----END CERTIFICATE-----")]
    return hashlib.sha256(ssl.PEM_cert_to_DER_cert(first)).hexdigest()


def test_secret_and_certificate_rotate_under_traffic(tmp_path):
    old_secret, new_secret = secrets.token_hex(16), secrets.token_hex(16)
    first_cert, _ = make_test_cert(tmp_path / "cert1")
    second_cert, _ = make_test_cert(tmp_path / "cert2")
    tls = lambda d: {"cert": str(tmp_path / d / "cert.pem"), "pkey": str(tmp_path / d / "pkey.pem")}  # noqa: E731
    server = FileServer(tmp_path / "srv", conf(old_secret, **tls("cert1")))
    server.streams = True
    server.tls_port = free_port(avoid=server.relay_ports)
    server.extra_args = [f"--tls-listening-port={server.tls_port}"]
    server.command_base = server.command

    def command():
        # Listeners from FileServer, but with TLS on (FileServer turns it off by default).
        return [a for a in server.command_base() if a != "--no-tls"]

    server.command = command
    with running(server):
        assert served_fingerprint(server) == file_fingerprint(first_cert)
        client, peer = allocate_with_channel(server, old_secret)
        stream = PacedStream(client, peer, rate=200)
        try:
            eventually(lambda: len(stream.received) > 50)
            server.rewrite(conf(new_secret, **tls("cert2")))
            server.proc.send_signal(signal.SIGHUP)
            wait_for_log(server, r'configuration reloaded')
            eventually(lambda: len(stream.received) > stream.sent // 2 + 100, timeout=3)
            # Refreshing the live allocation still works with the key it was made with.
            client.refresh(600)
        finally:
            sent, received = stream.stop()
        assert sent > 200
        assert len(received) == sent, f"lost {sent - len(received)} of {sent} packets across the reload"

        assert served_fingerprint(server) == file_fingerprint(second_cert)
        assert error_code_of_allocate(server, new_secret) is None
        assert error_code_of_allocate(server, old_secret) == 401
        client.refresh(0)
        client.close()
        peer.close()


def test_invalid_file_is_rejected_and_running_config_stays(tmp_path):
    secret = secrets.token_hex(16)
    server = FileServer(tmp_path / "srv", conf(secret))
    with running(server):
        text = conf(secret) + "max-port=not-a-port\n"
        bad_line = text.splitlines().index("max-port=not-a-port") + 1
        server.rewrite(text)
        server.proc.send_signal(signal.SIGHUP)
        log = wait_for_log(server, r"configuration reload rejected")
        line = next(l for l in log.splitlines() if "configuration reload rejected" in l)
        assert f"relayd.conf:{bad_line}" in line and "max-port" in line, line
        assert server.is_running()
        assert error_code_of_allocate(server, secret) is None


def test_restart_only_keys_are_reported_and_live_keys_apply(tmp_path):
    secret = secrets.token_hex(16)
    server = FileServer(tmp_path / "srv", conf(secret, user_quota=1))
    with running(server):
        first, peer = allocate_with_channel(server, secret, user="quota")
        assert error_code_of_allocate(server, secret, user="quota") == 486
        # Raise the quota and change a listener key in one reload.
        server.rewrite(conf(secret, user_quota=2, relay_threads=7))
        server.proc.send_signal(signal.SIGHUP)
        log = wait_for_log(server, r"configuration reloaded")
        assert "relay-threads changed in the file: restart needed" in log
        assert error_code_of_allocate(server, secret, user="quota") is None
        first.refresh(0)
        first.close()
        peer.close()


def test_log_level_applies_on_reload(tmp_path):
    """`log-level=notice` in the file on SIGHUP: allocations made after the reload write no
    `allocation created` line (one made before did); the next reload's notice line still does."""
    secret = secrets.token_hex(16)
    server = FileServer(tmp_path / "srv", conf(secret))
    with running(server):
        before, before_peer = allocate_with_channel(server, secret, user="before")
        wait_for_log(server, r"allocation created")
        server.rewrite(conf(secret, log_level="notice"))
        server.proc.send_signal(signal.SIGHUP)
        wait_for_log(server, r"configuration reloaded")
        after, after_peer = allocate_with_channel(server, secret, user="after")
        after.refresh(0)
        before.refresh(0)
        server.proc.send_signal(signal.SIGHUP)
        log = wait_for_log(server, r"configuration reloaded", count=2)
        between = log.split("configuration reloaded")[1]
        assert "allocation created" not in between and "allocation deleted" not in between, between
        assert "user=after" not in log and "tls_reload_skipped" not in between
        for c in (before, before_peer, after, after_peer):
            c.close()


def test_a_renewed_certificate_is_served_without_a_sighup(tmp_path):
    """As a Kubernetes Secret volume renews it: the files are symbolic links into a directory
    that a new one replaces (docs/tls.md, "Renewed certificates")."""
    first_cert, _ = make_test_cert(tmp_path / "cert1")
    second_cert, _ = make_test_cert(tmp_path / "cert2")
    volume = tmp_path / "volume"
    volume.mkdir()
    (volume / "..data").symlink_to(tmp_path / "cert1")
    for name in ("cert.pem", "pkey.pem"):
        (volume / name).symlink_to(volume / "..data" / name)
    server = FileServer(tmp_path / "srv", conf(secrets.token_hex(16), cert=str(volume / "cert.pem"),
                                                pkey=str(volume / "pkey.pem")))
    server.streams = True
    server.tls_port = free_port(avoid=server.relay_ports)
    server.extra_args = [f"--tls-listening-port={server.tls_port}", "--cert-check-interval=1"]
    base = server.command

    def command():
        return [a for a in base() if a != "--no-tls"]

    server.command = command
    with running(server):
        assert served_fingerprint(server) == file_fingerprint(first_cert)
        swap = volume / "..data.new"
        swap.symlink_to(tmp_path / "cert2")
        swap.replace(volume / "..data")
        assert eventually(lambda: served_fingerprint(server) == file_fingerprint(second_cert), timeout=5)
        wait_for_log(server, "certificate_files_changed")
        # Nothing changes: no reload.
        reloads = server.log_text().count("configuration reloaded")
        assert reloads == 1
        eventually(lambda: False, timeout=2.5)
        assert server.log_text().count("configuration reloaded") == reloads
