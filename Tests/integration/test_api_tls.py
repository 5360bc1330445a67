"""HTTPS for the HTTP API (docs/tls.md): `api-cert`/`api-pkey` (or `api-tls`
with the TURN `cert`/`pkey`), TLS 1.2 or later only, the certificate read again on SIGHUP, and
`check-config` warning about an API reachable beyond loopback in clear."""

from __future__ import annotations

import http.client
import shutil
import signal
import ssl
import subprocess
import time

import pytest

from conftest import RelayServer, make_test_cert, running, server_kind

pytestmark = pytest.mark.skipif(server_kind() != "relayd", reason="relayd's own HTTP API")


def https(server: RelayServer, path: str, cafile, headers=None) -> tuple[int, bytes]:
    context = ssl.create_default_context(cafile=str(cafile))
    conn = http.client.HTTPSConnection("localhost", server.api_port, context=context, timeout=5)
    try:
        conn.request("GET", path, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def served_certificate(server: RelayServer) -> str:
    return ssl.get_server_certificate(("127.0.0.1", server.api_port))


def s_client(server: RelayServer, version: str) -> subprocess.CompletedProcess:
    return subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{server.api_port}", version],
                          input=b"", capture_output=True, timeout=15)


def test_api_cert_serves_https_tls12_or_later_and_reloads_on_sighup(tmp_path):
    cert, key = make_test_cert(tmp_path / "api", "localhost")
    live_cert, live_key = tmp_path / "live-cert.pem", tmp_path / "live-key.pem"
    shutil.copy(cert, live_cert)
    shutil.copy(key, live_key)
    server = RelayServer("relayd", tmp_path / "srv", extra_args=[f"--api-cert={live_cert}", f"--api-pkey={live_key}"])
    with running(server):
        status, body = https(server, "/healthz", cert)
        assert (status, body) == (200, b"ok\n")
        status, body = https(server, "/api/v1/credentials?user=alice", cert,
                             {"Authorization": f"Bearer {server.api_token}"})
        assert status == 200 and b'"username"' in body
        # Plain HTTP on the HTTPS port gets no HTTP answer.
        with pytest.raises((http.client.HTTPException, ConnectionError, OSError)):
            server.http("GET", "/healthz", timeout=3)
        assert s_client(server, "-tls1_1").returncode != 0
        handshake = s_client(server, "-tls1_2")
        assert handshake.returncode == 0 and b"TLSv1.2" in handshake.stdout
        assert "https://" in server.log_text()

        # A renewed certificate: new connections get it after SIGHUP; a broken file is refused
        # and the running certificate stays.
        before = served_certificate(server)
        new_cert, new_key = make_test_cert(tmp_path / "renewed", "localhost")
        shutil.copy(new_cert, live_cert)
        shutil.copy(new_key, live_key)
        server.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 5
        while served_certificate(server) == before and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ssl.PEM_cert_to_DER_cert(served_certificate(server)) == ssl.PEM_cert_to_DER_cert(new_cert.read_text())
        assert https(server, "/healthz", new_cert)[0] == 200
        live_cert.write_text("not a certificate\n")
        server.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 5
        while "the previous certificate stays" not in server.log_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "the previous certificate stays" in server.log_text()
        assert https(server, "/healthz", new_cert)[0] == 200


def test_api_tls_reuses_the_turn_certificate(tmp_path):
    server = RelayServer("relayd", tmp_path / "srv", streams=True, extra_args=["--api-tls"])
    with running(server):
        assert https(server, "/readyz", server.cert_path)[0] == 200


def test_check_config_warns_about_a_plain_api_beyond_loopback(tmp_path):
    binary = RelayServer.default_binary("relayd")
    base = [binary, "check-config", "--no-auth", "--listening-ip=127.0.0.1"]
    plain = subprocess.run(base + ["--api-listening-ip=0.0.0.0"], capture_output=True, text=True, timeout=30)
    assert "without TLS" in plain.stdout + plain.stderr
    cert, key = make_test_cert(tmp_path / "c", "localhost")
    secured = subprocess.run(base + ["--api-listening-ip=0.0.0.0", f"--api-cert={cert}", f"--api-pkey={key}"],
                             capture_output=True, text=True, timeout=30)
    assert "without TLS" not in secured.stdout + secured.stderr
    local = subprocess.run(base, capture_output=True, text=True, timeout=30)
    assert "without TLS" not in local.stdout + local.stderr


def test_admin_cli_over_https_verifies_the_certificate(tmp_path):
    """`relayd sessions` over HTTPS: with --cacert, pinned to the api-cert of `-c`, and refused
    when the self-signed certificate is not trusted."""
    cert, key = make_test_cert(tmp_path / "api", "localhost")
    token = "https-admin-token-0123456789abcdef"
    server = RelayServer("relayd", tmp_path / "srv", extra_args=[
        f"--api-cert={cert}", f"--api-pkey={key}", f"--api-key=ops:{token}:admin"])
    with running(server):
        api = f"https://localhost:{server.api_port}"
        trusted = subprocess.run([server.binary, "sessions", "--api", api, f"--token={token}", "--cacert", str(cert)],
                                 capture_output=True, text=True, timeout=30)
        assert trusted.returncode == 0, trusted.stderr
        assert trusted.stdout.split()[:2] == ["SESSION", "USER"]
        untrusted = subprocess.run([server.binary, "sessions", "--api", api, f"--token={token}"],
                                   capture_output=True, text=True, timeout=30)
        assert untrusted.returncode == 1 and "TLS handshake" in untrusted.stderr
        conf = tmp_path / "admin.conf"
        conf.write_text(f"use-auth-secret\nstatic-auth-secret={server.secret}\n"
                        f"api-listening-ip=127.0.0.1\napi-listening-port={server.api_port}\n"
                        f"api-cert={cert}\napi-pkey={key}\napi-key=ops:{token}:admin\n")
        pinned = subprocess.run([server.binary, "sessions", "-c", str(conf)], capture_output=True, text=True,
                                timeout=30)
        assert pinned.returncode == 0, pinned.stderr
