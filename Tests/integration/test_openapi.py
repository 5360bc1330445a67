"""docs/openapi.yaml against a live relayd: schemathesis (PyPI) generates requests for every
operation from the spec, with the API token and without it, and checks that no answer is a 5xx
and that every status code, content type, header and body conforms to the spec."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from conftest import REPO_ROOT, RelayServer, running, server_kind

pytestmark = pytest.mark.skipif(server_kind() != "relayd", reason="relayd's own HTTP API")

ADMIN_TOKEN = "openapi-admin-token-0123456789"
SPEC = REPO_ROOT / "docs" / "openapi.yaml"
CHECKS = "not_a_server_error,status_code_conformance,content_type_conformance,response_headers_conformance," \
         "response_schema_conformance"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    relay = RelayServer("relayd", tmp_path_factory.mktemp("relayd-openapi"),
                        extra_args=["--api-rate-limit=0", f"--api-key=ops:{ADMIN_TOKEN}:admin"])
    with running(relay):
        yield relay


def schemathesis(server: RelayServer, *extra: str) -> str:
    tool = shutil.which("st") or shutil.which("schemathesis")
    if tool is None:
        pytest.fail("schemathesis not found (PyPI; run scripts/install-test-deps.sh)")
    result = subprocess.run(
        [tool, "run", str(SPEC), "--base-url", server.api_url, "--checks", CHECKS,
         "--hypothesis-max-examples", "80", "--hypothesis-seed", "7",
         # A live upgrade replaces the server under test: test_live_upgrade.py covers it.
         "--exclude-operation-id", "upgrade", *extra],
        capture_output=True, text=True, timeout=300)
    out = result.stdout + result.stderr
    assert result.returncode == 0, out[-5000:]
    return out


def test_the_api_conforms_to_its_spec_with_a_token(server):
    out = schemathesis(server, "-H", f"Authorization: Bearer {server.api_token}")
    assert "Collected API operations: 17" in out
    assert "not_a_server_error" in out and "FAILED" not in out


def test_the_admin_api_conforms_to_its_spec_with_an_admin_token(server):
    out = schemathesis(server, "-H", f"Authorization: Bearer {ADMIN_TOKEN}")
    assert "Collected API operations: 17" in out
    assert "FAILED" not in out
    assert server.is_running()


def test_the_api_conforms_to_its_spec_without_a_token(server):
    out = schemathesis(server)
    assert "FAILED" not in out
    assert server.is_running()
