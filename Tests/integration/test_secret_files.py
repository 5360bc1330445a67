"""Secrets read from files (docs/configuration.md, "Secrets in files"): relayd runs with its REST
secret, its API keys and its Redis password in files (as a Kubernetes Secret volume gives them),
none of them on the command line; a rotated secret file and API key file take effect on SIGHUP,
and the process's command line never holds a secret."""

from __future__ import annotations

import os
import secrets
import signal

import pytest

from cluster_support import allocation_answer, eventually
from conftest import RelayServer, server_kind
from redis_support import RedisServer
from stunclient import TurnClient

pytestmark = pytest.mark.skipif(server_kind() != "relayd", reason="relayd's own keys")


class FileSecretsServer(RelayServer):
    """relayd whose REST secret and API keys come from files in `secrets_dir`."""

    def __init__(self, workdir, secrets_dir, extra=None):
        super().__init__("relayd", workdir, extra_args=list(extra or []))
        self.secrets_dir = secrets_dir

    def command(self) -> list[str]:
        args = [a for a in super().command()
                if not a.startswith("--static-auth-secret=") and not a.startswith("--api-key=")]
        return args + [f"--static-auth-secret-file={self.secrets_dir / 'turn-secret'}",
                       f"--api-key-file={self.secrets_dir / 'api-keys'}"]


def write_secret(path, text: str) -> None:
    """As a Secret volume updates: a new file renamed over the old one, readable by its owner only."""
    temporary = path.with_suffix(".new")
    temporary.write_text(text)
    os.chmod(temporary, 0o600)
    os.replace(temporary, path)




def credentials_status(server: RelayServer, token: str) -> int:
    return server.http("GET", "/api/v1/credentials?user=alice", headers={"Authorization": f"Bearer {token}"}).status


def test_secrets_and_api_keys_come_from_files_and_rotate_on_sighup(tmp_path):
    secrets_dir = tmp_path / "secrets"
    secrets_dir.mkdir(mode=0o700)
    old_secret, new_secret = secrets.token_hex(16), secrets.token_hex(16)
    old_token, new_token = secrets.token_hex(24), secrets.token_hex(24)
    write_secret(secrets_dir / "turn-secret", f"{old_secret}\n")
    write_secret(secrets_dir / "api-keys", f"backend:{old_token}\n")
    server = FileSecretsServer(tmp_path / "relayd", secrets_dir)
    server.start()
    try:
        command_line = (f"/proc/{server.proc.pid}/cmdline")
        with open(command_line, "rb") as f:
            args = f.read().decode()
        for secret in (old_secret, old_token):
            assert secret not in args, "a secret is on the command line"
        assert allocation_answer(server, old_secret) == 200
        assert credentials_status(server, old_token) == 200
        assert credentials_status(server, new_token) == 401

        # Rotation: the new secret first, the old one kept for the calls that hold it.
        write_secret(secrets_dir / "turn-secret", f"{new_secret}\n{old_secret}\n")
        write_secret(secrets_dir / "api-keys", f"backend:{new_token}\n")
        server.proc.send_signal(signal.SIGHUP)
        assert eventually(lambda: credentials_status(server, new_token) == 200, timeout=3)
        assert credentials_status(server, old_token) == 401
        assert allocation_answer(server, new_secret) == 200
        assert allocation_answer(server, old_secret) == 200
        # The credential service now signs with the file's first secret.
        minted = server.http("GET", "/api/v1/credentials?user=bob",
                             headers={"Authorization": f"Bearer {new_token}"}).json()
        client = TurnClient(server.address)
        client.allocate(minted["username"], minted["password"])
        client.refresh(0)
        client.close()

        # The old secret dropped; an unreadable file on SIGHUP keeps the running configuration.
        write_secret(secrets_dir / "turn-secret", f"{new_secret}\n")
        server.proc.send_signal(signal.SIGHUP)
        assert eventually(lambda: allocation_answer(server, old_secret) == 401, timeout=3)
        os.unlink(secrets_dir / "turn-secret")
        server.proc.send_signal(signal.SIGHUP)
        assert eventually(lambda: "turn-secret" in server.log_text() and "No such file" in server.log_text(), timeout=3)
        assert allocation_answer(server, new_secret) == 200
    finally:
        problems = server.stop()
    assert not problems, problems


def test_the_cluster_redis_password_comes_from_a_file(tmp_path):
    redis = RedisServer(tmp_path / "redis", password=secrets.token_hex(12))
    redis.start()
    password_file = tmp_path / "redis-password"
    write_secret(password_file, redis.password + "\n")
    server = RelayServer("relayd", tmp_path / "relayd", extra_args=[
        f"--cluster-redis=redis://127.0.0.1:{redis.port}/0", f"--cluster-redis-password-file={password_file}",
        "--node-name=from-file"])
    try:
        server.start()
        assert eventually(lambda: redis.command("EXISTS", "relayd:node:from-file") == 1, timeout=5)
        assert redis.password not in server.log_text()
    finally:
        problems = server.stop()
        redis.stop()
    assert not problems, problems
