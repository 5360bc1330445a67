"""Network namespaces for the NAT test: a public segment with relayd, and two private
networks, each behind its own NAT that maps address- and port-dependently and drops
unsolicited inbound traffic.

    c1 (10.0.1.2) -- NAT 1 -- 203.0.113.6/30 ------\\
                                                    pub: 203.0.113.1 (relayd), routes
    c2 (10.0.2.2) -- NAT 2 -- 203.0.113.10/30 -----/     between the two NATs

- `pub` forwards between its two links, so the NATs' outside addresses reach each
  other: a direct path exists at the IP level, and only the NATs block it.
- Each NAT namespace masquerades what leaves its outside link with
  `masquerade random` (a random source port per connection: the mapping depends on
  the destination address and port, a "symmetric" NAT) and filters with conntrack:
  only replies to connections opened from inside come in (address- and
  port-dependent filtering); everything else inbound, to the NAT itself or towards
  the private network, is dropped.
- The public segment uses TEST-NET-3 (203.0.113.0/24), which relayd's default peer
  policy denies as a documentation range; relayd is started without
  allowed-peer-ip and without allow-loopback-peers, so a working relay-to-relay call
  shows that relayd's own relayed addresses stay reachable (PeerPolicy).

Names are unique per run (`rd<pid>-<random>-...`). Every namespace is deleted (which
also destroys its veth ends), every process started here is killed by PID, even when
a test fails or pytest is interrupted (`cleanup()` runs in `finally` and at exit).
Namespaces of an earlier run whose pytest was killed outright (SIGKILL: no cleanup
could run) are recognised by that pattern and a PID that no longer exists, and are
deleted before a new topology is built.
Needs root, `ip` (iproute2) and `nft` (nftables).
"""

from __future__ import annotations

import atexit
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from conftest import STOP_TIMEOUT, die_with_parent

COMMAND_TIMEOUT = 10.0

RELAY_IP = "203.0.113.1"  # on pub's loopback device, relayd's listening and relay address
PUB_LINK1 = ("203.0.113.5", "203.0.113.6")  # pub side, NAT 1 outside
PUB_LINK2 = ("203.0.113.9", "203.0.113.10")  # pub side, NAT 2 outside
PRIVATE1 = ("10.0.1.1", "10.0.1.2")  # NAT 1 inside, client 1
PRIVATE2 = ("10.0.2.1", "10.0.2.2")  # NAT 2 inside, client 2

_LIVE: list["Topology"] = []
_NAME = re.compile(r"^rd(\d+)-[0-9a-f]{4}-(pub|nat1|nat2|c1|c2)$")


def missing_prerequisites() -> list[str]:
    """What this harness needs and the machine lacks, named for a failure message."""
    missing = []
    if os.geteuid() != 0:
        missing.append("root (network namespaces, veth pairs and nftables need CAP_NET_ADMIN)")
    if shutil.which("ip") is None:
        missing.append("ip (Debian package iproute2)")
    if shutil.which("nft") is None:
        missing.append("nft (Debian package nftables)")
    return missing


def nat_ruleset(table: str, inside: str, outside: str) -> str:
    return f"""
table ip {table} {{
  chain postrouting {{
    type nat hook postrouting priority 100; policy accept;
    oifname "{outside}" masquerade random
  }}
  chain forward {{
    type filter hook forward priority 0; policy drop;
    ct state established,related accept
    iifname "{inside}" oifname "{outside}" accept
  }}
  chain input {{
    type filter hook input priority 0; policy drop;
    ct state established,related accept
    iifname "lo" accept
    iifname "{inside}" accept
  }}
}}
"""


class CommandFailed(RuntimeError):
    pass


def run(cmd: list[str], input_text: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    try:
        done = subprocess.run(cmd, input=input_text, capture_output=True, text=True, timeout=COMMAND_TIMEOUT)
    except subprocess.TimeoutExpired as exc:
        raise CommandFailed(f"{' '.join(cmd)}: timed out after {COMMAND_TIMEOUT} s") from exc
    if check and done.returncode != 0:
        raise CommandFailed(f"{' '.join(cmd)}: exit {done.returncode}: {done.stderr.strip()}")
    return done


@dataclass
class Topology:
    """The namespaces and links above; `build()` makes them, `cleanup()` removes them."""

    tag: str = field(default_factory=lambda: f"rd{os.getpid()}-{secrets.token_hex(2)}")
    namespaces: list[str] = field(default_factory=list)
    processes: list[subprocess.Popen] = field(default_factory=list)
    log: list[str] = field(default_factory=list)

    def __post_init__(self):
        t = self.tag
        self.pub, self.nat1, self.nat2 = f"{t}-pub", f"{t}-nat1", f"{t}-nat2"
        self.c1, self.c2 = f"{t}-c1", f"{t}-c2"
        # Interface names (at most 15 characters), unique per run as well.
        short = f"{os.getpid() % 1000}{t[-4:]}"
        self.if_pub1, self.if_out1 = f"p1{short}", f"o1{short}"
        self.if_pub2, self.if_out2 = f"p2{short}", f"o2{short}"
        self.if_in1, self.if_c1 = f"i1{short}", f"e1{short}"
        self.if_in2, self.if_c2 = f"i2{short}", f"e2{short}"
        self.relay_ip = RELAY_IP
        self.nat1_outside = PUB_LINK1[1]
        self.nat2_outside = PUB_LINK2[1]
        self.client1_ip = PRIVATE1[1]
        self.client2_ip = PRIVATE2[1]

    # --- commands -------------------------------------------------------------

    def sh(self, ns: str | None, *args: str, input_text: str | None = None) -> subprocess.CompletedProcess:
        cmd = (["ip", "netns", "exec", ns] if ns else []) + list(args)
        self.log.append(" ".join(cmd))
        return run(cmd, input_text=input_text)

    def ip(self, ns: str, *args: str) -> None:
        self.log.append(f"ip -n {ns} {' '.join(args)}")
        run(["ip", "-n", ns, *args])

    def exec_prefix(self, ns: str) -> list[str]:
        return ["ip", "netns", "exec", ns]

    def start(self, ns: str, cmd: list[str], log_path: Path) -> subprocess.Popen:
        """A process inside `ns` (ip netns exec execs it, so the PID is the process's own)."""
        with open(log_path, "wb") as out:
            proc = subprocess.Popen(self.exec_prefix(ns) + cmd, stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, preexec_fn=die_with_parent)
        self.processes.append(proc)
        return proc

    # --- build ----------------------------------------------------------------------

    def build(self) -> "Topology":
        remove_stale_namespaces()
        _LIVE.append(self)
        for ns in (self.pub, self.nat1, self.nat2, self.c1, self.c2):
            run(["ip", "netns", "add", ns])
            self.namespaces.append(ns)
            self.ip(ns, "link", "set", "lo", "up")
        # Each veth pair is created with its ends directly in their namespaces: no end
        # ever exists in the host's namespace, and deleting a namespace destroys its ends.
        self._veth(self.pub, self.if_pub1, self.nat1, self.if_out1)
        self._veth(self.pub, self.if_pub2, self.nat2, self.if_out2)
        self._veth(self.nat1, self.if_in1, self.c1, self.if_c1)
        self._veth(self.nat2, self.if_in2, self.c2, self.if_c2)

        self.ip(self.pub, "addr", "add", f"{RELAY_IP}/32", "dev", "lo")
        self.ip(self.pub, "addr", "add", f"{PUB_LINK1[0]}/30", "dev", self.if_pub1)
        self.ip(self.pub, "addr", "add", f"{PUB_LINK2[0]}/30", "dev", self.if_pub2)
        for nat, out, inside, link, private in (
            (self.nat1, self.if_out1, self.if_in1, PUB_LINK1, PRIVATE1),
            (self.nat2, self.if_out2, self.if_in2, PUB_LINK2, PRIVATE2),
        ):
            self.ip(nat, "addr", "add", f"{link[1]}/30", "dev", out)
            self.ip(nat, "addr", "add", f"{private[0]}/24", "dev", inside)
            self.ip(nat, "route", "add", "default", "via", link[0])
        for client, dev, private in ((self.c1, self.if_c1, PRIVATE1), (self.c2, self.if_c2, PRIVATE2)):
            self.ip(client, "addr", "add", f"{private[1]}/24", "dev", dev)
            self.ip(client, "route", "add", "default", "via", private[0])
        for ns in (self.pub, self.nat1, self.nat2):
            self.sh(ns, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1")
        self.sh(self.nat1, "nft", "-f", "-", input_text=nat_ruleset("relaydnat", self.if_in1, self.if_out1))
        self.sh(self.nat2, "nft", "-f", "-", input_text=nat_ruleset("relaydnat", self.if_in2, self.if_out2))
        return self

    def _veth(self, ns_a: str, if_a: str, ns_b: str, if_b: str) -> None:
        self.log.append(f"veth {ns_a}/{if_a} <-> {ns_b}/{if_b}")
        run(["ip", "link", "add", if_a, "netns", ns_a, "type", "veth", "peer", "name", if_b, "netns", ns_b])
        self.ip(ns_a, "link", "set", if_a, "up")
        self.ip(ns_b, "link", "set", if_b, "up")

    def nat_ruleset_listing(self, ns: str) -> str:
        return run(["ip", "netns", "exec", ns, "nft", "list", "ruleset"], check=False).stdout

    # --- cleanup --------------------------------------------------------------------

    def stop_processes(self) -> None:
        for proc in reversed(self.processes):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=STOP_TIMEOUT)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=STOP_TIMEOUT)
        self.processes.clear()

    def _pids_in(self, ns: str) -> list[int]:
        done = run(["ip", "netns", "pids", ns], check=False)
        return [int(p) for p in done.stdout.split() if p.isdigit()]

    def cleanup(self) -> list[str]:
        """Kills what runs in the namespaces, deletes them (and so their veths); returns
        what could not be removed."""
        problems = []
        self.stop_processes()
        for ns in self.namespaces:
            # Anything else still inside (a peer that forked, say), by PID.
            for pid in self._pids_in(ns):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + STOP_TIMEOUT
        while time.monotonic() < deadline and any(self._pids_in(ns) for ns in self.namespaces):
            time.sleep(0.05)
        for ns in list(self.namespaces):
            done = run(["ip", "netns", "del", ns], check=False)
            if done.returncode != 0 and ns in run(["ip", "netns", "list"], check=False).stdout.split():
                problems.append(f"could not delete namespace {ns}: {done.stderr.strip()}")
            else:
                self.namespaces.remove(ns)
        # No veth end was ever in the host's namespace; check anyway.
        for name in (self.if_pub1, self.if_out1, self.if_pub2, self.if_out2,
                     self.if_in1, self.if_c1, self.if_in2, self.if_c2):
            if run(["ip", "link", "show", name], check=False).returncode == 0:
                run(["ip", "link", "del", name], check=False)
                problems.append(f"veth {name} was left in the host namespace (deleted)")
        if self in _LIVE:
            _LIVE.remove(self)
        return problems

    def __enter__(self) -> "Topology":
        try:
            return self.build()
        except BaseException:
            self.cleanup()
            raise

    def __exit__(self, *exc) -> None:
        self.cleanup()


@atexit.register
def _cleanup_all() -> None:
    for topology in list(_LIVE):
        try:
            topology.cleanup()
        except Exception as exc:  # noqa: BLE001 - best effort at interpreter exit
            print(f"netns cleanup of {topology.tag} failed: {exc}", file=sys.stderr)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_namespaces() -> list[str]:
    """Deletes namespaces this harness made in a run whose process is gone."""
    removed = []
    for name in run(["ip", "netns", "list"], check=False).stdout.split():
        m = _NAME.match(name)
        if m and not _pid_alive(int(m.group(1))):
            for pid in [int(p) for p in run(["ip", "netns", "pids", name], check=False).stdout.split()
                        if p.isdigit()]:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            if run(["ip", "netns", "del", name], check=False).returncode == 0:
                removed.append(name)
    return removed


def leftovers(tag: str) -> list[str]:
    """Namespaces of run `tag` that still exist (for the test's own check)."""
    listed = run(["ip", "netns", "list"], check=False).stdout.split()
    return [name for name in listed if name.startswith(tag)]
