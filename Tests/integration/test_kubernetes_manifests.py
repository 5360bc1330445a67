"""deploy/kubernetes/ (docs/cluster.md), checked offline: every manifest validates strictly
against the Kubernetes schemas bundled with kubernetes-validate (PyPI), for the oldest and the
newest version the docs name; the pieces agree with each other (selectors, ports, secret keys,
the Redis address, the grace period against drain-timeout); and the ConfigMap's relayd.conf,
with the DaemonSet's arguments, passes `relayd check-config`."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from conftest import REPO_ROOT, RelayServer

DEPLOY = REPO_ROOT / "deploy" / "kubernetes"
VERSIONS = ["1.29.0", "1.37.0"]  # as docs/cluster.md says


def documents() -> dict[str, dict]:
    """Every object, by kind/name."""
    found = {}
    for path in sorted(DEPLOY.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                found[f"{doc['kind']}/{doc['metadata']['name']}"] = doc
    return found


@pytest.mark.parametrize("version", VERSIONS)
def test_every_manifest_validates_strictly(version):
    tool = shutil.which("kubernetes-validate")
    if tool is None:
        pytest.fail("kubernetes-validate not found (PyPI; run scripts/install-test-deps.sh)")
    files = sorted(str(p) for p in DEPLOY.glob("*.yaml"))
    assert len(files) >= 7, files
    result = subprocess.run([tool, "--strict", "-k", version, *files], capture_output=True, timeout=120)
    out = (result.stdout + result.stderr).decode()
    assert result.returncode == 0, out
    assert "ERROR" not in out, out


def test_the_validator_rejects_a_broken_manifest(tmp_path):
    """The check above can fail: an unknown field and a wrong type are refused."""
    broken = (DEPLOY / "relayd.yaml").read_text().replace("hostNetwork: true", "hostNetwork: \"yes\"")
    broken = broken.replace("terminationGracePeriodSeconds:", "terminationGracePeriod:")
    path = tmp_path / "broken.yaml"
    path.write_text(broken)
    result = subprocess.run(["kubernetes-validate", "--strict", str(path)], capture_output=True, timeout=120)
    assert result.returncode != 0


def relayd_conf(docs: dict) -> str:
    return docs["ConfigMap/relayd-config"]["data"]["relayd.conf"]


def conf_value(conf: str, key: str) -> str:
    match = re.search(rf"^{re.escape(key)}=(.*)$", conf, re.M)
    assert match, f"{key} missing from relayd.conf"
    return match.group(1).strip()


def test_the_pieces_agree():
    docs = documents()
    daemonset = docs["DaemonSet/relayd"]
    pod = daemonset["spec"]["template"]
    spec = pod["spec"]
    container = spec["containers"][0]
    conf = relayd_conf(docs)

    assert spec["hostNetwork"] is True and spec["dnsPolicy"] == "ClusterFirstWithHostNet"
    # The grace period outlasts the drain and the preStop pause.
    pre_stop = " ".join(container["lifecycle"]["preStop"]["exec"]["command"])
    assert "kill -USR1 1" in pre_stop
    pause = int(re.search(r"sleep (\d+)", pre_stop).group(1))
    assert spec["terminationGracePeriodSeconds"] >= int(conf_value(conf, "drain-timeout")) + pause

    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports["api"] == int(conf_value(conf, "api-listening-port"))
    assert ports["turn-udp"] == ports["turn-tcp"] == int(conf_value(conf, "listening-port"))
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "api"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "api"}

    labels = pod["metadata"]["labels"]
    for selector in (docs["Service/relayd-api"]["spec"]["selector"],
                     docs["PodDisruptionBudget/relayd"]["spec"]["selector"]["matchLabels"],
                     daemonset["spec"]["selector"]["matchLabels"]):
        assert selector.items() <= labels.items()
    assert docs["Service/relayd-api"]["spec"]["ports"][0]["targetPort"] == "api"

    secret_keys = set(docs["Secret/relayd-secrets"]["stringData"])
    used = {e["valueFrom"]["secretKeyRef"]["key"] for c in spec["containers"] for e in c["env"]
            if "secretKeyRef" in e.get("valueFrom", {})}
    redis_pod = docs["Deployment/relayd-redis"]["spec"]["template"]["spec"]
    used |= {e["valueFrom"]["secretKeyRef"]["key"] for e in redis_pod["containers"][0]["env"]}
    assert used <= secret_keys, used - secret_keys

    # The Redis URL names the Redis Service, in the namespace, on its port.
    url = next(a for a in container["args"] if a.startswith("--cluster-redis="))
    redis_service = docs["Service/relayd-redis"]
    host = f"{redis_service['metadata']['name']}.{redis_service['metadata']['namespace']}.svc.cluster.local"
    assert f"@{host}:{redis_service['spec']['ports'][0]['port']}/" in url
    for doc in docs.values():
        if doc["kind"] != "Namespace":
            assert doc["metadata"]["namespace"] == docs["Namespace/relayd"]["metadata"]["name"]


def test_the_configmap_and_arguments_pass_check_config(tmp_path):
    """The configuration the DaemonSet runs, with the Secret's values and the downward API's
    variables filled in as the kubelet does ($(VAR) in args)."""
    docs = documents()
    container = docs["DaemonSet/relayd"]["spec"]["template"]["spec"]["containers"][0]
    secret = docs["Secret/relayd-secrets"]["stringData"]
    env = {"NODE_NAME": "node-a", "HOST_IP": "127.0.0.1"}
    for e in container["env"]:
        ref = e.get("valueFrom", {}).get("secretKeyRef")
        if ref:
            env[e["name"]] = secret[ref["key"]]
    conf = tmp_path / "relayd.conf"
    conf.write_text(relayd_conf(docs))
    args = [re.sub(r"\$\((\w+)\)", lambda m: env[m.group(1)], a) for a in container["args"]]
    args = [str(conf) if a == "/etc/relayd/relayd.conf" else a for a in args]
    binary = RelayServer.default_binary("relayd")
    result = subprocess.run([binary, "check-config", *args], capture_output=True, timeout=30)
    out = (result.stdout + result.stderr).decode()
    assert result.returncode == 0, out
    assert "cluster-redis" in out and "node-name" in out
    # Secrets stay masked in what check-config prints.
    for value in secret.values():
        assert value not in out
    assert Path(conf).exists()


def strategic_merge(base, patch):
    """The part of Kubernetes' strategic merge patch the offload patch uses: maps merge, lists
    of named objects (containers) merge by name, other lists replace."""
    if isinstance(base, dict) and isinstance(patch, dict):
        merged = dict(base)
        for key, value in patch.items():
            merged[key] = strategic_merge(base[key], value) if key in base else value
        return merged
    if isinstance(base, list) and isinstance(patch, list) and all(isinstance(x, dict) and "name" in x for x in patch):
        merged = list(base)
        for item in patch:
            index = next(i for i, x in enumerate(merged) if x.get("name") == item["name"])
            merged[index] = strategic_merge(merged[index], item)
        return merged
    return patch


def test_the_kernel_offload_patch_adds_only_its_capabilities(tmp_path):
    """deploy/kubernetes/kernel-offload/relayd-patch.yaml, merged into the DaemonSet, validates
    strictly and adds exactly the capabilities the systemd drop-in grants (the ones measured to
    suffice, docs/kernel-fast-path.md), to a container that still drops all."""
    daemonset = documents()["DaemonSet/relayd"]
    patch = yaml.safe_load((DEPLOY / "kernel-offload" / "relayd-patch.yaml").read_text())
    assert (patch["kind"], patch["metadata"]) == (daemonset["kind"], {
        "name": daemonset["metadata"]["name"], "namespace": daemonset["metadata"]["namespace"]})
    merged = strategic_merge(daemonset, patch)
    container = merged["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == daemonset["spec"]["template"]["spec"]["containers"][0]["image"]
    capabilities = container["securityContext"]["capabilities"]
    drop_in = (REPO_ROOT / "conf" / "relayd-kernel-offload.conf").read_text()
    granted = re.search(r"^AmbientCapabilities=(.*)$", drop_in, re.M).group(1).split()
    assert capabilities["drop"] == ["ALL"]
    assert sorted(capabilities["add"]) == sorted(c.removeprefix("CAP_") for c in granted if c != "CAP_NET_BIND_SERVICE")
    path = tmp_path / "relayd-offload.yaml"
    path.write_text(yaml.safe_dump(merged))
    tool = shutil.which("kubernetes-validate")
    if tool is None:
        pytest.fail("kubernetes-validate not found (PyPI; run scripts/install-test-deps.sh)")
    result = subprocess.run([tool, "--strict", "-k", VERSIONS[-1], str(path)], capture_output=True, timeout=120)
    assert result.returncode == 0, (result.stdout + result.stderr).decode()
