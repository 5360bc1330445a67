"""deploy/prometheus/alerts.yml and deploy/grafana/relayd.json (docs/metrics.md):

- the rules pass `promtool check rules` and their unit tests (`promtool test rules`);
- every dashboard query is valid PromQL (promtool checks them as recording rules);
- every metric name the dashboard and the rules use is served by a live relayd, run here with
  TLS and in a cluster (a real redis-server) so every family exists; a made-up name is caught.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest
import yaml

from cluster_support import ClusterNode, eventually
from conftest import REPO_ROOT, server_kind
from redis_support import RedisServer

pytestmark = pytest.mark.skipif(server_kind() != "relayd", reason="relayd's own metrics")

PROMETHEUS = REPO_ROOT / "deploy" / "prometheus"
DASHBOARD = REPO_ROOT / "deploy" / "grafana" / "relayd.json"
NAME = re.compile(r"\b((?:relayd|process)_[a-z_]+)\b")


def promtool() -> str:
    tool = shutil.which("promtool")
    if tool is None:
        pytest.fail("promtool not found (Debian package prometheus; run scripts/install-test-deps.sh)")
    return tool


def run(*args: str, cwd=None) -> str:
    result = subprocess.run([promtool(), *args], capture_output=True, text=True, timeout=60, cwd=cwd)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def dashboard_exprs() -> list[str]:
    board = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in board["panels"] for t in p["targets"]]
    assert len(exprs) >= 20
    return exprs


def rule_exprs() -> list[str]:
    rules = yaml.safe_load((PROMETHEUS / "alerts.yml").read_text())
    return [r["expr"] for g in rules["groups"] for r in g["rules"]]


def test_alert_rules_check_and_pass_their_unit_tests():
    assert "SUCCESS" in run("check", "rules", "alerts.yml", cwd=PROMETHEUS)
    assert "SUCCESS" in run("test", "rules", "alerts_test.yml", cwd=PROMETHEUS)


def test_every_dashboard_query_is_valid_promql(tmp_path):
    # Grafana's own variables, as Grafana substitutes them.
    rules = [{"record": f"relayd_dashboard:panel_{i}",
              "expr": e.replace("$__rate_interval", "1m").replace("$instance", ".*").replace("$tenant", ".*")}
             for i, e in enumerate(dashboard_exprs())]
    path = tmp_path / "dashboard-rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    assert "SUCCESS" in run("check", "rules", str(path))


def test_every_metric_the_dashboard_and_rules_use_is_served(tmp_path):
    redis = RedisServer(tmp_path / "redis")
    redis.start()
    # One tenant, so the tenant-labelled families are served (docs/tenants.md).
    tenant = tmp_path / "app.conf"
    tenant.write_text("static-auth-secret=app-secret\n")
    node = ClusterNode(tmp_path / "node", "dash", redis, "s3cret", streams=True, extra=[f"--tenant={tenant}"])
    try:
        node.start()
        assert eventually(lambda: node.metric("relayd_cluster_redis_up") == 1)
        text = node.http("GET", "/metrics").body.decode()
    finally:
        problems = node.stop()
        redis.stop()
    assert not problems, problems
    served = set(re.findall(r"^# TYPE (\S+) ", text, re.M))
    histograms = {n for n in re.findall(r"^# TYPE (\S+) histogram", text, re.M)}
    served |= {h + s for h in histograms for s in ("_bucket", "_sum", "_count")}
    used = {n for e in dashboard_exprs() + rule_exprs() for n in NAME.findall(e)}
    assert len(used) >= 20, used
    missing = sorted(used - served)
    assert not missing, f"used but not served: {missing}"
    # The check itself can fail.
    assert "relayd_made_up_total" not in served
