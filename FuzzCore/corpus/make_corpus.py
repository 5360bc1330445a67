#!/usr/bin/env python3
"""Writes the seed corpus of core-fuzz (FuzzCore/corpus/core/) in the operation format that
Sources/CoreFuzzing/FuzzSession.swift decodes: a flags byte, then opcodes with their operands.

    python3 FuzzCore/corpus/make_corpus.py           # rewrites the seed-* files
"""

from __future__ import annotations

import struct
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent  # FuzzCore/
sys.path.insert(0, str(HERE.parent / "Tests" / "integration"))

from stunclient import Attr, Class, Method, StunMessage, binding_request, encode_xor_address  # noqa: E402

PEERS = [("1.2.3.4", 5000), ("5.6.7.8", 6000), ("10.0.0.5", 50001), ("10.1.2.3", 53)]


def chunk(data: bytes) -> bytes:
    return struct.pack("!H", len(data)) + data


def raw(tuple_index: int, data: bytes) -> bytes:
    return bytes([0, tuple_index]) + chunk(data)


def signed(tuple_index: int, method: int, peer: int = 0, channel: int = 0, lifetime: int = 0,
           extra: bytes = b"") -> bytes:
    return bytes([2, tuple_index, method, peer, channel]) + struct.pack("!H", lifetime) + chunk(extra)


def from_peer(socket: int, peer: int, payload: bytes) -> bytes:
    return bytes([3, socket, peer]) + chunk(payload)


def advance(k: int) -> bytes:
    return bytes([4, k])


SWEEP = bytes([5])


def admission(verdict: int) -> bytes:
    """Answers the oldest Allocate waiting for the cluster's quota check (cluster mode, flag bit
    4): 0 granted, 1 refused 486, 2 refused 508, 3 decided locally."""
    return bytes([13, verdict])


def closed(tuple_index: int) -> bytes:
    return bytes([6, tuple_index])


def channel_data(tuple_index: int, channel: int, payload: bytes) -> bytes:
    return bytes([7, tuple_index, channel]) + chunk(payload)


def send_indication(peer, payload: bytes) -> bytes:
    msg = StunMessage(Method.SEND, Class.INDICATION, transaction_id=bytes(range(12)))
    msg.add(Attr.XOR_PEER_ADDRESS, encode_xor_address(peer, msg.transaction_id))
    msg.add(Attr.DATA, payload)
    return msg.encode(fingerprint=False)


def binding() -> bytes:
    req = binding_request()
    req.transaction_id = bytes(12)
    return req.encode()


SEEDS = {
    # Authenticated allocations for clients 0 (UDP) and 2 (TCP), then the data path both ways,
    # permission expiry (300 s) and allocation expiry (600 s).
    "seed-data-path": bytes([1])
    + channel_data(0, 0, b"hello peer")
    + channel_data(2, 1, b"relay to relay")
    + raw(0, send_indication(PEERS[1], b"via send"))
    + from_peer(0, 0, b"from peer 0")
    + from_peer(1, 1, b"from peer 1")
    + from_peer(0, 3, b"from a denied peer")
    + advance(199) + advance(150) + SWEEP
    + from_peer(0, 0, b"after permission expiry")
    + advance(205) + SWEEP,
    # IPv6 allocation on the TLS client next to the IPv4 ones.
    "seed-ipv6": bytes([3])
    + channel_data(3, 0, b"v6 channel")
    + from_peer(2, 5, b"v6 peer")
    + signed(3, 1, lifetime=0) + signed(3, 0x81),
    # Unauthenticated and malformed traffic: Binding, ChannelData without allocation,
    # a truncated header, an oversize ChannelData length, not-STUN bytes.
    "seed-unauthenticated": bytes([0])
    + raw(1, binding())
    + raw(1, binding()[:12])
    + raw(0, struct.pack("!HH", 0x4000, 35510) + b"abc")
    + raw(2, bytes([0x17, 0xFE, 0xFD]) + bytes(20))
    + from_peer(0, 0, b"nobody home"),
    # Allocation churn: challenge, allocate, refresh, EVEN-PORT with a reservation, delete,
    # a TCP connection closing, quota of ports (8 per address, one always refused).
    "seed-allocation-churn": bytes([0])
    + signed(0, 0) + signed(0, 0) + signed(0, 1, lifetime=1200)
    + signed(1, 0) + signed(1, 0x60) + signed(1, 0x81)
    + signed(2, 0) + signed(2, 0x40) + closed(2)
    + b"".join(signed(i % 4, 0x00) for i in range(12))
    + advance(230) + SWEEP,
    # Permissions and channels: several peers, a forbidden one, a channel rebound.
    "seed-permissions": bytes([1])
    + signed(0, 2, peer=3) + signed(0, 0x82, peer=0, channel=1)
    + signed(0, 3, peer=1, channel=0) + signed(0, 3, peer=1, channel=5)
    + signed(0, 2, peer=4) + signed(0, 2, peer=6)
    + signed(0, 4, extra=bytes([0x80, 0xAA, 0xBB, 0xCC]))
    + channel_data(0, 1, b"x"),
    # Cluster mode (docs/cluster.md): Allocates wait for the quota check and come back granted,
    # refused or decided locally; a retransmission while waiting; a TCP client that closes
    # while its Allocate waits; a quota reached on this node alone (user-quota 2).
    "seed-cluster": bytes([4])
    + signed(0, 0) + signed(0, 0) + admission(0)
    + signed(1, 0) + signed(1, 0) + admission(1)
    + signed(1, 0) + admission(2)
    + signed(2, 0) + signed(2, 0) + closed(2) + admission(0)
    + signed(3, 0) + signed(3, 0) + admission(3)
    + signed(1, 0) + admission(0)
    + channel_data(0, 0, b"granted") + signed(0, 1, lifetime=0),
}


def main() -> None:
    out = HERE / "corpus" / "core"
    out.mkdir(parents=True, exist_ok=True)
    for name, data in SEEDS.items():
        (out / name).write_bytes(data)
    print(f"wrote {len(SEEDS)} seeds to {out}")


if __name__ == "__main__":
    main()
