"""The soak with chaos, 3 minutes (docs/operations.md, "Soak test"; Tests/integration/soak.py):
three nodes on Redis with Sentinel, UDP, TCP and TLS clients calling all along, and every fault
kind at least twice (kill -9 and restart, Redis failover, SIGHUP with a rotated secret, live
upgrade, drain), with the soak's invariants checked at the end."""

from __future__ import annotations

import json

import pytest

from conftest import server_kind
from soak import FAULTS, Soak

pytestmark = pytest.mark.skipif(server_kind() != "relayd", reason="relayd's own cluster")

MINUTES = 3


def test_three_minutes_of_chaos_keep_every_invariant(tmp_path):
    soak = Soak(tmp_path)
    try:
        soak.start()
        report = soak.run(MINUTES)
    finally:
        soak.stop()
    summary = soak.summary()
    print(json.dumps(summary, indent=2))
    assert report.violations == [], report.violations
    kinds = [kind for _, kind, _ in report.faults]
    assert all(kinds.count(kind) >= 2 for kind in FAULTS), kinds
    for transport in ("udp", "tcp", "tls"):
        assert summary["outcomes"].get(f"{transport} finished", 0) >= 10, summary["outcomes"]
    assert len(report.sessions) >= 200
