"""The Debian package (scripts/package-deb.sh, docs/operations.md): lintian finds no error; on
this machine, `dpkg -i` installs a relayd that runs, its unit passes `systemd-analyze verify`
and points at the installed files, the `relayd` user exists and reads the configuration, and
`dpkg -r` then `dpkg -P` leave nothing behind but what Debian Policy allows (the conffiles
after a remove; the system user after a purge). Runs as root, as CI does."""

from __future__ import annotations

import grp
import os
import pwd
import re
import resource
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

import stunclient
from conftest import REPO_ROOT, free_port, free_port_range
from lifecycle import eventually

pytestmark = [
    # Installs and purges a system package, and compares /etc, /usr and /var before and after:
    # nothing else may run meanwhile (Tests/integration/README.md).
    pytest.mark.serial,
    pytest.mark.skipif(os.geteuid() != 0, reason="installs a package: needs root"),
    pytest.mark.skipif(shutil.which("dpkg-deb") is None, reason="not a Debian system"),
]

BUILD_TIMEOUT = 1800
# The admin token of the installed relayd the test upgrades live (docs/live-upgrade.md).
UPGRADE_TOKEN = "package-upgrade-token-0123456789abcdef"
# What a purge may leave or change outside the package's own files.
ALLOWED_AFTER_PURGE = re.compile(
    r"^/etc/(passwd|group|shadow|gshadow|subuid|subgid)-?$|^/var/lib/dpkg/|^/var/log/(dpkg\.log|apt/|journal/)|"
    r"^/var/cache/|^/var/lib/apt/")
SNAPSHOT_ROOTS = ["/etc", "/usr", "/lib", "/var/lib", "/var/log", "/opt/relayd", "/srv"]


def run(*cmd: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout)
    if check:
        assert result.returncode == 0, f"{' '.join(cmd)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
    return result


def snapshot() -> dict[str, tuple[int, int, int]]:
    """Every path under SNAPSHOT_ROOTS with its mode, owner and group (symbolic links as links)."""
    paths: dict[str, tuple[int, int, int]] = {}
    for root in SNAPSHOT_ROOTS:
        for directory, dirs, files in os.walk(root):
            if directory.startswith(("/var/lib/dpkg", "/var/cache", "/var/lib/apt", "/usr/share/doc-base",
                                     "/var/log/journal")):
                continue
            for name in dirs + files:
                path = os.path.join(directory, name)
                try:
                    st = os.lstat(path)
                except FileNotFoundError:
                    continue
                paths[path] = (st.st_mode, st.st_uid, st.st_gid)
    return paths


@pytest.fixture(scope="module")
def deb(tmp_path_factory) -> Path:
    if subprocess.run(["dpkg", "-s", "relayd"], capture_output=True).returncode == 0:
        pytest.fail("a relayd package is installed already; remove it before this test", pytrace=False)
    out = tmp_path_factory.mktemp("deb")
    result = subprocess.run([str(REPO_ROOT / "scripts" / "package-deb.sh")], capture_output=True, text=True,
                            timeout=BUILD_TIMEOUT, env={**os.environ, "OUT_DIR": str(out)}, cwd=REPO_ROOT)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    path = Path(result.stdout.strip().splitlines()[-1])
    assert path.name == f"relayd_{version()}_amd64.deb" and path.is_file()
    return path


def version() -> str:
    text = (REPO_ROOT / "Sources" / "RelayCore" / "Core" / "Version.swift").read_text()
    return re.search(r'string = "relayd ([^"]+)"', text).group(1)


def test_lintian_finds_no_error_nor_warning(deb):
    result = run("lintian", "--fail-on", "error", "--display-level", ">=warning", str(deb), timeout=600,
                 check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert not re.search(r"^[EW]: ", result.stdout, re.MULTILINE), result.stdout


def test_contents_and_control(deb):
    contents = run("dpkg-deb", "--contents", str(deb)).stdout
    for path in ("./usr/bin/relayd", "./usr/lib/relayd/relayd_fastpath.bpf.o",
                 "./usr/lib/relayd/relayd_tcp_splice.bpf.o", "./usr/share/relayd/kernel-offload.conf",
                 "./etc/relayd/relayd.conf",
                 "./etc/logrotate.d/relayd", "./lib/systemd/system/relayd.service",
                 "./usr/share/man/man8/relayd.8.gz", "./usr/share/man/man8/relayd-sessions.8.gz",
                 "./usr/share/doc/relayd/copyright", "./usr/share/doc/relayd/changelog.gz"):
        assert re.search(rf"\s{re.escape(path)}$", contents, re.MULTILINE), f"{path} not in the package"
    control = run("dpkg-deb", "--field", str(deb)).stdout
    assert f"Version: {version()}" in control
    depends = re.search(r"^Depends: (.*)$", control, re.MULTILINE).group(1)
    for library in ("libevent", "libssl3", "libbpf", "libhiredis", "libsqlite3", "libpq5", "libc6", "adduser"):
        assert library in depends, depends
    # The Swift runtime is linked in: the binary needs no library from the toolchain.
    conffiles = run("dpkg-deb", "--info", str(deb), "conffiles").stdout.split()
    assert conffiles == ["/etc/relayd/relayd.conf", "/etc/logrotate.d/relayd"]


def test_install_run_remove_purge(deb, tmp_path):
    before = snapshot()
    installed = True  # from here on, whatever dpkg left is purged at the end
    try:
        run("dpkg", "-i", str(deb), timeout=300)
        binary = Path("/usr/bin/relayd")
        assert run(str(binary), "--version").stdout.strip() == f"relayd {version()}"
        needed = run("ldd", str(binary)).stdout
        assert "swift" not in needed.lower(), needed

        # The unit verifies and points at what the package installed.
        unit = Path("/lib/systemd/system/relayd.service")
        run("systemd-analyze", "verify", str(unit))
        # So does it with the drop-in kernel-offload's privileges need (docs/kernel-fast-path.md).
        drop_ins = Path("/etc/systemd/system/relayd.service.d")
        drop_ins.mkdir(parents=True)
        try:
            shutil.copy("/usr/share/relayd/kernel-offload.conf", drop_ins / "kernel-offload.conf")
            verified = run("systemd-analyze", "verify", str(unit))
            assert "kernel-offload.conf" not in verified.stdout + verified.stderr, verified.stdout + verified.stderr
        finally:
            shutil.rmtree(drop_ins)
        exec_start = re.search(r"^ExecStart=(\S+) -c (\S+)$", unit.read_text(), re.MULTILINE)
        assert exec_start and exec_start.groups() == ("/usr/bin/relayd", "/etc/relayd/relayd.conf")
        assert Path(exec_start.group(1)).is_file() and Path(exec_start.group(2)).is_file()

        # The service user, and a configuration only it (and root) can read.
        user = pwd.getpwnam("relayd")
        assert user.pw_shell in ("/usr/sbin/nologin", "/bin/false") and user.pw_uid < 1000
        conf = os.stat("/etc/relayd/relayd.conf")
        assert conf.st_mode & 0o777 == 0o640 and grp.getgrgid(conf.st_gid).gr_name == "relayd"
        log_dir = os.stat("/var/log/relayd")
        assert pwd.getpwuid(log_dir.st_uid).pw_name == "relayd"
        # The state journal's directory: the relayd user's alone, and the configuration uses it.
        state_dir = os.stat("/var/lib/relayd")
        assert pwd.getpwuid(state_dir.st_uid).pw_name == "relayd" and state_dir.st_mode & 0o777 == 0o700
        assert re.search(r"^state-dir=/var/lib/relayd$", Path("/etc/relayd/relayd.conf").read_text(), re.MULTILINE)
        assert re.search(r"^StateDirectory=relayd$", unit.read_text(), re.MULTILINE)
        run("su", "-s", "/bin/sh", "relayd", "-c", "test -r /etc/relayd/relayd.conf")

        # Man pages render, and each has the one-word name whatis(1) indexes it under.
        pages = sorted(Path("/usr/share/man/man8").glob("relayd*.8.gz"))
        assert len(pages) >= 10
        for page in pages:
            run("man", "-l", "-Tutf8", str(page))
            name = page.name.removesuffix(".8.gz")
            assert run("lexgrog", str(page)).stdout.startswith(f'{page}: "{name} - '), name
        # Bold and underline come as overstrikes ("x\bx"): strip them to read the text.
        sessions = re.sub(r".\x08", "", run("man", "-l", "-Tascii", "/usr/share/man/man8/relayd-sessions.8.gz").stdout)
        assert re.search(r"relayd\S* sessions", sessions) and "--user" in sessions
        run(str(binary), "check-config", "-c", "/etc/relayd/relayd.conf")

        # The installed binary serves: a STUN Binding on loopback, as the relayd user.
        port = free_port()
        relays = free_port_range(20)
        api = free_port(avoid=relays)
        proc = subprocess.Popen(
            ["setpriv", "--reuid=relayd", "--regid=relayd", "--clear-groups", str(binary),
             "-c", "/etc/relayd/relayd.conf", "--listening-ip=127.0.0.1", f"--listening-port={port}",
             "--relay-ip=127.0.0.1", f"--min-port={relays.start}", f"--max-port={relays.stop - 1}",
             "--no-tls", "--no-tcp", f"--api-listening-port={api}", "--static-auth-secret=package-test-secret",
             "--drain-timeout=0", f"--api-key=package:{UPGRADE_TOKEN}:admin"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        heir = None
        try:
            client = stunclient.TurnClient(("127.0.0.1", port), attempts=8)
            response = client.binding()
            assert response.xor_address(stunclient.Attr.XOR_MAPPED_ADDRESS)[0] == "127.0.0.1"
            # A live upgrade of the installed binary, as the relayd user, through its CLI.
            upgraded = run(str(binary), "upgrade", f"--api=http://127.0.0.1:{api}", f"--token={UPGRADE_TOKEN}",
                           timeout=150)
            found = re.search(r"upgraded: pid (\d+) serves now", upgraded.stdout)
            assert found, upgraded.stdout
            heir = int(found.group(1))
            assert proc.wait(timeout=10) == 0
            assert pwd.getpwuid(os.stat(f"/proc/{heir}").st_uid).pw_name == "relayd"
            response = client.binding()
            assert response.xor_address(stunclient.Attr.XOR_MAPPED_ADDRESS)[0] == "127.0.0.1"
            client.close()
        finally:
            for pid in [proc.pid] + ([heir] if heir else []):
                try:
                    os.kill(pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
            if heir and not eventually(lambda: not Path(f"/proc/{heir}").exists(), timeout=10):
                os.kill(heir, signal.SIGKILL)

        # Enabled as docs/operations.md says: the link must go with the purge.
        run("systemctl", "enable", "relayd.service")
        assert Path("/etc/systemd/system/multi-user.target.wants/relayd.service").is_symlink()

        # Remove: the binary goes, the conffiles stay.
        run("dpkg", "-r", "relayd", timeout=300)
        assert not binary.exists() and not unit.exists()
        assert Path("/etc/relayd/relayd.conf").exists()
        assert "deinstall ok config-files" in run("dpkg", "-s", "relayd", check=False).stdout
        # Purge: nothing of the package is left.
        run("dpkg", "-P", "relayd", timeout=300)
        installed = False
        assert run("dpkg", "-s", "relayd", check=False).returncode != 0
        after = snapshot()
        added = sorted(p for p in after.keys() - before.keys() if not ALLOWED_AFTER_PURGE.search(p))
        removed = sorted(p for p in before.keys() - after.keys() if not ALLOWED_AFTER_PURGE.search(p))
        changed = sorted(p for p in before.keys() & after.keys()
                         if before[p] != after[p] and not ALLOWED_AFTER_PURGE.search(p))
        assert added == [] and removed == [] and changed == [], \
            f"left behind: {added[:20]}; gone: {removed[:20]}; mode or owner changed: {changed[:20]}"
        pwd.getpwnam("relayd")  # the system user may stay (Debian Policy §9.2.2)
    finally:
        if installed:
            subprocess.run(["dpkg", "-P", "relayd"], capture_output=True, timeout=300)


def test_the_image_built_from_the_package_answers_stun(deb, tmp_path):
    """scripts/build-image.sh (docs/operations.md, "Container image"): an OCI image FROM scratch
    with the package's files and the libraries relayd links, no shell; podman runs it on the
    host's network as its non-root user, and it answers a STUN Binding."""
    for tool in ("buildah", "podman", "runc"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} not found (Debian package {tool}; run scripts/install-test-deps.sh)")
    tag = f"localhost/relayd-test:{os.getpid()}"
    archive = tmp_path / "relayd-image.tar"
    built = run(str(REPO_ROOT / "scripts" / "build-image.sh"), "--deb", str(deb), "--tag", tag,
                "--archive", str(archive), timeout=600)
    assert built.stdout.strip().splitlines()[-1] == tag
    name = f"relayd-image-test-{os.getpid()}"
    try:
        assert archive.stat().st_size > 1_000_000
        files = run("podman", "image", "inspect", tag, "--format", "{{.Config.User}} {{json .Config.Entrypoint}}")
        assert files.stdout.strip() == '65532:65532 ["/usr/bin/relayd"]', files.stdout
        mount = run("podman", "image", "mount", tag).stdout.strip()
        try:
            root = Path(mount)
            assert (root / "usr" / "bin" / "relayd").is_file()
            assert not (root / "bin" / "sh").exists() and not (root / "usr" / "bin" / "sh").exists()
            assert (root / "usr" / "lib" / "relayd" / "relayd_fastpath.bpf.o").is_file()
            # The packaged configuration's state-dir belongs to the image's user.
            assert (root / "var" / "lib" / "relayd").stat().st_uid == 65532
        finally:
            run("podman", "image", "unmount", tag, check=False)
        port = free_port()
        relay = free_port_range(width=10)
        # runc: this machine mounts cgroup v2 beside v1 with a controller (hybrid), which crun
        # refuses. Without CAP_SYS_RESOURCE here, the container's limits may only go down.
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        run("podman", "--runtime", "runc", "run", "-d", "--rm", "--name", name, "--network", "host",
            "--ulimit", f"nofile={hard}:{hard}", "--ulimit", "nproc=4096:4096", tag,
            "--listening-ip=127.0.0.1", f"--listening-port={port}", "--relay-ip=127.0.0.1",
            f"--min-port={relay.start}", f"--max-port={relay.stop - 1}", "--no-tls", "--no-dtls",
            "--use-auth-secret", "--static-auth-secret=image-test-secret-0123456789",
            "--api-listening-ip=127.0.0.1", f"--api-listening-port={free_port()}", timeout=120)
        client = stunclient.TurnClient(("127.0.0.1", port), attempts=20)
        try:
            response = client.binding()
            assert response.xor_address(stunclient.Attr.XOR_MAPPED_ADDRESS)[0] == "127.0.0.1"
        finally:
            client.close()
        user = run("podman", "top", name, "user").stdout.split()
        assert user[-1] in ("relayd", "65532"), user
    finally:
        run("podman", "rm", "-f", "-t", "2", name, check=False, timeout=60)
        run("podman", "rmi", "-f", tag, check=False, timeout=60)
