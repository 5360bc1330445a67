"""`relayd check-config -c FILE [--self-test]`: validates the file, prints the effective
configuration with secrets masked, then warnings about likely mistakes (exit 0); an invalid file is
an error naming file, line and key (exit non-zero). --self-test sends a STUN Binding from the relay
address to the configured listener of an already running server.
"""

from __future__ import annotations

import resource
import subprocess
from pathlib import Path

import pytest

from conftest import RelayServer, free_port, running, server_kind

pytestmark = pytest.mark.skipif(server_kind() != "relayd", reason="relayd's own subcommand")

SECRET = "checkConfigSecret-0123456789"


def check_config(config: Path, *extra: str) -> subprocess.CompletedProcess:
    binary = RelayServer.default_binary("relayd")
    return subprocess.run([binary, "check-config", "-c", str(config), *extra],
                          capture_output=True, text=True, timeout=30)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "relayd.conf"
    path.write_text(text)
    return path


def warnings(result: subprocess.CompletedProcess) -> list[str]:
    return [line.removeprefix("warning: ") for line in result.stdout.splitlines() if line.startswith("warning: ")]


def test_a_sound_file_prints_the_masked_configuration_and_no_warning(tmp_path):
    config = write(tmp_path, f"""
listening-ip=127.0.0.1
relay-ip=127.0.0.1
use-auth-secret
static-auth-secret={SECRET}
user=alice:alicePassw0rd
api-key=ops:apiT0ken-secret
no-tls
# 16,384 relay ports + 3,000 clients fit the 20,000 descriptors a test machine allows.
max-connections=3000
""")
    result = check_config(config)
    assert result.returncode == 0, result.stderr
    assert warnings(result) == []
    lines = result.stdout.splitlines()
    assert "static-auth-secret=***" in lines
    assert "user=alice:***" in lines
    assert "api-key=ops:***" in lines
    assert "relay-ip=127.0.0.1" in lines
    for secret in (SECRET, "alicePassw0rd", "apiT0ken-secret"):
        assert secret not in result.stdout + result.stderr


def test_likely_mistakes_are_warned_about_after_the_configuration_and_exit_0(tmp_path):
    config = write(tmp_path, f"""
listening-ip=0.0.0.0
# the public address where the private one belongs
relay-ip=203.0.113.7
min-port=50000
max-port=50009
total-quota=100
allow-loopback-peers
use-auth-secret
static-auth-secret={SECRET}
""")
    result = check_config(config)
    assert result.returncode == 0, result.stderr
    found = warnings(result)
    assert any("relay address 203.0.113.7 is not an address of this host" in w for w in found), found
    assert any("relay port range 50000-50009 (10 ports) is smaller than total-quota 100" in w for w in found), found
    assert any("allow-loopback-peers is on while listening on 0.0.0.0" in w for w in found), found
    assert any("TLS listener (port 5349) is enabled but no cert is set" in w for w in found), found
    # Warnings come after the effective configuration.
    lines = result.stdout.splitlines()
    assert lines.index("max-port=50009") < min(i for i, l in enumerate(lines) if l.startswith("warning: "))
    assert SECRET not in result.stdout


def test_a_private_relay_address_without_external_ip_is_warned_about(tmp_path):
    config = write(tmp_path, f"""
relay-ip=10.11.12.13
use-auth-secret
static-auth-secret={SECRET}
no-tls
""")
    result = check_config(config)
    assert result.returncode == 0, result.stderr
    assert any("relay address 10.11.12.13 is private (RFC 1918) and no external-ip maps it" in w
               for w in warnings(result)), result.stdout


def test_an_invalid_value_is_an_error_naming_file_line_and_key(tmp_path):
    config = write(tmp_path, f"""use-auth-secret
static-auth-secret={SECRET}
max-port=notaport
""")
    result = check_config(config)
    assert result.returncode != 0
    assert f"{config}:3" in result.stderr, result.stderr
    assert "max-port" in result.stderr
    assert SECRET not in result.stdout + result.stderr


def test_contradicting_keys_are_an_error_naming_the_key(tmp_path):
    config = write(tmp_path, f"""use-auth-secret
static-auth-secret={SECRET}
min-port=60000
max-port=50000
""")
    result = check_config(config)
    assert result.returncode != 0
    assert f"{config}:4" in result.stderr and "max-port" in result.stderr, result.stderr


def test_a_missing_file_is_an_error(tmp_path):
    result = check_config(tmp_path / "absent.conf")
    assert result.returncode != 0
    assert "absent.conf" in result.stderr


def test_self_test_reaches_the_running_server(tmp_path):
    server = RelayServer("relayd", tmp_path / "server")
    with running(server):
        arguments = server.command()[1:]  # -c FILE and the server's own options
        result = subprocess.run([server.binary, "check-config", *arguments, "--self-test"],
                                capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    lines = [l for l in result.stdout.splitlines() if l.startswith("self-test ")]
    assert lines == [l for l in lines if l.startswith(f"self-test from 127.0.0.1 to 127.0.0.1:{server.port}: ")]
    assert len(lines) == 1 and "XOR-MAPPED-ADDRESS 127.0.0.1:" in lines[0], result.stdout


def test_self_test_without_a_running_server_reports_no_answer(tmp_path):
    port = free_port()
    config = write(tmp_path, f"""
listening-ip=127.0.0.1
listening-port={port}
relay-ip=127.0.0.1
use-auth-secret
static-auth-secret={SECRET}
no-tls
""")
    result = check_config(config, "--self-test")
    assert result.returncode == 0, result.stderr
    assert f"self-test from 127.0.0.1 to 127.0.0.1:{port}: no answer after 3 attempts" in result.stdout


SHIPPED_CONF = Path(__file__).resolve().parents[2] / "conf" / "relayd.conf"


def test_the_shipped_placeholder_secret_is_warned_about_on_loopback(tmp_path):
    """conf/relayd.conf as shipped listens on loopback with a public placeholder secret: it
    loads, and check-config says so, naming the line."""
    result = check_config(SHIPPED_CONF)
    assert result.returncode == 0, result.stderr
    line = next(i for i, l in enumerate(SHIPPED_CONF.read_text().splitlines(), 1) if l.startswith("static-auth-secret="))
    found = [w for w in warnings(result) if "placeholder" in w]
    assert found and found[0].startswith(f"{SHIPPED_CONF}:{line}: key 'static-auth-secret'"), warnings(result)


def test_the_shipped_placeholder_secret_is_refused_beyond_loopback(tmp_path):
    """The same file told to listen on every address: an error naming file, line and key, and
    relayd does not start."""
    for command in (["check-config", "-c", str(SHIPPED_CONF), "--listening-ip=0.0.0.0"],
                    ["-c", str(SHIPPED_CONF), "--listening-ip=0.0.0.0"]):
        result = subprocess.run([RelayServer.default_binary("relayd"), *command],
                                capture_output=True, text=True, timeout=30)
        assert result.returncode != 0, result.stdout
        assert f"{SHIPPED_CONF}:" in result.stderr and "key 'static-auth-secret': is the placeholder" in result.stderr, \
            result.stderr


def test_the_descriptor_limit_is_checked_against_ports_and_connections(tmp_path):
    """check-config adds up what the configuration can hold open (relay sockets, TCP/TLS
    clients, listeners) and compares it with the hard RLIMIT_NOFILE that `relayd serve` raises
    its soft limit to (docs/configuration.md)."""
    config = write(tmp_path, f"""
listening-ip=127.0.0.1
relay-ip=127.0.0.1
use-auth-secret
static-auth-secret={SECRET}
min-port=40000
max-port=44999
max-connections=1000
""")

    def limited(hard: int):
        def apply():
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        binary = RelayServer.default_binary("relayd")
        return subprocess.run([binary, "check-config", "-c", str(config)], capture_output=True, text=True,
                              timeout=30, preexec_fn=apply)

    roomy = limited(8000)
    line = next(l for l in roomy.stdout.splitlines() if l.startswith("descriptors:"))
    assert "5000 relay sockets (5000 ports x 1 relay addresses)" in line and "+ 1000 TCP/TLS clients" in line
    assert "the limit here is 8000" in line and line.endswith(": fits"), line
    assert not any("descriptors but the limit" in w for w in warnings(roomy))
    tight = limited(4096)
    assert any("descriptors but the limit here is 4096" in w for w in warnings(tight)), tight.stdout
    assert tight.returncode == 0
