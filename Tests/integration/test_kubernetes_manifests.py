"""deploy/kubernetes/ (docs/cluster.md), checked offline: every manifest validates strictly
against the Kubernetes schemas bundled with kubernetes-validate (PyPI), for the oldest and the
newest version the docs name; the pieces agree with each other (selectors, ports, secret keys
and the files they become, the TLS Secret cert-manager fills, the Redis address, the grace
period against drain-timeout, the NetworkPolicy); the pod runs as non-root with every
capability dropped and no secret on its command line; the memory limit covers the measured
cost of a full node; and the ConfigMap's relayd.conf, with the DaemonSet's arguments and the
Secrets as the kubelet mounts them, passes `relayd check-config`."""

from __future__ import annotations

import re
import shutil
import subprocess

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
    assert len(files) >= 8, files
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
    # The kubelet's SIGTERM drains: the grace period outlasts the drain.
    assert spec["terminationGracePeriodSeconds"] >= int(conf_value(conf, "drain-timeout")) + 10
    assert "lifecycle" not in container, "the image has no shell for a preStop command"

    ports = {p["name"]: (p["containerPort"], p["protocol"]) for p in container["ports"]}
    assert ports["api"] == (int(conf_value(conf, "api-listening-port")), "TCP")
    listening, tls = int(conf_value(conf, "listening-port")), int(conf_value(conf, "tls-listening-port"))
    assert (ports["turn-udp"], ports["turn-tcp"]) == ((listening, "UDP"), (listening, "TCP"))
    assert (ports["turns"], ports["turns-dtls"]) == ((tls, "TCP"), (tls, "UDP"))
    # The API is HTTPS only, on the node's own address.
    assert re.search(r"^api-tls$", conf, re.M) and "no-tls" not in conf
    assert "--api-listening-ip=$(HOST_IP)" in container["args"]
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "api", "scheme": "HTTPS"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "api", "scheme": "HTTPS"}

    labels = pod["metadata"]["labels"]
    for selector in (docs["Service/relayd-api"]["spec"]["selector"],
                     docs["PodDisruptionBudget/relayd"]["spec"]["selector"]["matchLabels"],
                     daemonset["spec"]["selector"]["matchLabels"]):
        assert selector.items() <= labels.items()
    assert docs["Service/relayd-api"]["spec"]["ports"][0]["targetPort"] == "api"

    # Secrets reach relayd as files of the relayd-secrets volume, named by *-file keys.
    secret_keys = set(docs["Secret/relayd-secrets"]["stringData"])
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["secrets"]["secret"]["secretName"] == "relayd-secrets"
    files = {a.split("=", 1)[1] for a in container["args"] if re.match(r"--[a-z-]+-file=", a)}
    assert files == {f"{mounts['secrets']}/{k}" for k in secret_keys}, files
    assert not any("secretKeyRef" in e.get("valueFrom", {}) for e in container["env"])
    assert not any("$(" in a and "_IP" not in a and "NODE_NAME" not in a for a in container["args"])
    redis_pod = docs["Deployment/relayd-redis"]["spec"]["template"]["spec"]
    assert {e["valueFrom"]["secretKeyRef"]["key"] for e in redis_pod["containers"][0]["env"]} <= secret_keys

    # TLS from the Secret cert-manager fills, mounted where relayd.conf looks.
    certificate = yaml.safe_load((DEPLOY / "cert-manager" / "certificate.yaml").read_text())
    assert certificate["kind"] == "Certificate" and certificate["metadata"]["namespace"] == "relayd"
    assert volumes["tls"]["secret"]["secretName"] == certificate["spec"]["secretName"]
    assert conf_value(conf, "cert") == f"{mounts['tls']}/tls.crt"
    assert conf_value(conf, "pkey") == f"{mounts['tls']}/tls.key"
    for volume in ("tls", "secrets"):
        # Readable by the pod's group (fsGroup), by no one else.
        assert volumes[volume]["secret"]["defaultMode"] == 0o440

    # Not root, nothing granted, no way to gain privileges.
    pod_security = spec["securityContext"]
    assert pod_security["runAsNonRoot"] is True and pod_security["runAsUser"] != 0
    assert pod_security["fsGroup"] == pod_security["runAsGroup"]
    assert pod_security["seccompProfile"] == {"type": "RuntimeDefault"}
    security = container["securityContext"]
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert security["allowPrivilegeEscalation"] is False and security["readOnlyRootFilesystem"] is True

    # The memory limit holds a full node at the measured costs (docs/benchmark.md): the
    # max-connections worth of idle TLS allocations (21.5 KiB each) plus the process's own 40 MiB, twice over.
    def mebibytes(text: str) -> float:
        units = {"Mi": 1, "Gi": 1024}
        return float(text[:-2]) * units[text[-2:]]
    limits, requests = container["resources"]["limits"], container["resources"]["requests"]
    assert mebibytes(limits["memory"]) >= 2 * (10_000 * 21.5 / 1024 + 40)
    assert mebibytes(requests["memory"]) >= 10_000 * 21.5 / 1024 + 40
    assert mebibytes(requests["memory"]) <= mebibytes(limits["memory"])

    # Only relayd reaches Redis: the policy selects the Redis pods, on the Redis port.
    policy = docs["NetworkPolicy/relayd-redis"]["spec"]
    redis_deployment = docs["Deployment/relayd-redis"]
    assert policy["podSelector"]["matchLabels"].items() <= redis_deployment["spec"]["template"]["metadata"]["labels"].items()
    assert policy["ingress"][0]["ports"] == [{"protocol": "TCP", "port": docs["Service/relayd-redis"]["spec"]["ports"][0]["port"]}]
    sources = policy["ingress"][0]["from"]
    assert {"podSelector": {"matchLabels": daemonset["spec"]["selector"]["matchLabels"]}} in sources

    # The Redis URL names the Redis Service, in the namespace, on its port, without a password.
    url = next(a for a in container["args"] if a.startswith("--cluster-redis="))
    redis_service = docs["Service/relayd-redis"]
    host = f"{redis_service['metadata']['name']}.{redis_service['metadata']['namespace']}.svc.cluster.local"
    assert url == f"--cluster-redis=redis://{host}:{redis_service['spec']['ports'][0]['port']}/0"
    for doc in docs.values():
        if doc["kind"] != "Namespace":
            assert doc["metadata"]["namespace"] == docs["Namespace/relayd"]["metadata"]["name"]


def test_the_configmap_and_arguments_pass_check_config(tmp_path):
    """The configuration the DaemonSet runs: the ConfigMap and the Secrets mounted as files, as the
    kubelet mounts them (here under tmp_path), a certificate in the TLS Secret's place, and the
    downward API's variables filled in ($(VAR) in args). Every key the manifests pass must be one
    check-config accepts."""
    docs = documents()
    spec = docs["DaemonSet/relayd"]["spec"]["template"]["spec"]
    container = spec["containers"][0]
    secret = docs["Secret/relayd-secrets"]["stringData"]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    places = {path: tmp_path / name for name, path in mounts.items()}
    for place in places.values():
        place.mkdir()
    (places[mounts["config"]] / "relayd.conf").write_text(relayd_conf(docs))
    for key, value in secret.items():
        (places[mounts["secrets"]] / key).write_text(value)
    certs = tmp_path / "certs"
    subprocess.run([str(REPO_ROOT / "conf" / "make-test-cert.sh"), str(certs)], check=True, capture_output=True)
    (places[mounts["tls"]] / "tls.crt").write_text((certs / "cert.pem").read_text())
    (places[mounts["tls"]] / "tls.key").write_text((certs / "pkey.pem").read_text())
    (places[mounts["config"]] / "relayd.conf").write_text(
        relayd_conf(docs).replace(mounts["tls"], str(places[mounts["tls"]])))

    def mounted(text: str) -> str:
        for path, place in places.items():
            text = text.replace(path + "/", str(place) + "/")
        return text
    env = {"NODE_NAME": "node-a", "HOST_IP": "127.0.0.1"}
    args = [mounted(re.sub(r"\$\((\w+)\)", lambda m: env[m.group(1)], a)) for a in container["args"]]
    binary = RelayServer.default_binary("relayd")
    result = subprocess.run([binary, "check-config", *args], capture_output=True, timeout=30)
    out = (result.stdout + result.stderr).decode()
    assert result.returncode == 0, out
    assert "cluster-redis" in out and "node-name" in out and "static-auth-secret-file" in out
    assert "api-tls" in out
    # Secrets stay masked in what check-config prints.
    for value in secret.values():
        assert value not in out


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
    # Kubernetes grants a non-root process no capabilities: the patch runs relayd as root.
    assert merged["spec"]["template"]["spec"]["securityContext"]["runAsUser"] == 0
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
