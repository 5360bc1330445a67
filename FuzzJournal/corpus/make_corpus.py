#!/usr/bin/env python3
"""Writes the seed corpus of journal-fuzz (FuzzJournal/corpus/journal/) in the input form that
Sources/CoreFuzzing/JournalFuzzInput.swift decodes: a first byte (bit 0: framed; bits 1-7: the
reader's clock, BASE_NOW + 37 s each), then a raw journal or `type, 16-bit length, payload`
triples.

Independent of RelayCore on purpose: the records are laid out here from docs/state-journal.md
with struct and zlib, so the seeds also cross-check the Swift codec against the page
(JournalFuzzRegressionTests reads them back). Deterministic: re-running it reproduces the
committed files.

    python3 FuzzJournal/corpus/make_corpus.py
"""

from __future__ import annotations

import ipaddress
import struct
import zlib
from pathlib import Path

OUT = Path(__file__).resolve().parent / "journal"

MAGIC = bytes([0x89, 0x52, 0x4C, 0x4A, 0x0D, 0x0A, 0x1A, 0x0A])
BOOT_ID = struct.pack("!QQ", 0x6A6F_7572_6E61_6C2D, 0x6675_7A7A_2D62_6F6F)  # JournalFuzzInput.bootID
BASE_NOW = 1_000_000  # JournalFuzzInput.baseNow
WRITTEN = BASE_NOW - 10

ALLOCATION, ALLOCATION_ENDED, KEYS, RESERVATION, RESERVATION_ENDED = 1, 2, 3, 4, 5
UDP, TCP = 0, 1
MD5, SHA256 = 1, 2


def header(boot: bytes = BOOT_ID, version: int = 1) -> bytes:
    body = MAGIC + struct.pack("!H", version) + boot
    return body + struct.pack("!I", zlib.crc32(body))


def frame(kind: int, payload: bytes) -> bytes:
    body = struct.pack("!BI", kind, len(payload)) + payload
    return body + struct.pack("!I", zlib.crc32(body))


def ip(text: str) -> bytes:
    address = ipaddress.ip_address(text)
    return bytes([1 if address.version == 4 else 2]) + address.packed


def transport_address(text: str) -> bytes:
    host, port = text.rsplit(":", 1)
    return ip(host.strip("[]")) + struct.pack("!H", int(port))


def text(value: str | bytes, width: int = 2) -> bytes:
    data = value.encode() if isinstance(value, str) else value
    return (struct.pack("!H", len(data)) if width == 2 else bytes([len(data)])) + data


def allocation(session: int, *, transport: int = UDP, client: str = "192.0.2.1:40001",
               server: str = "10.0.0.5:3478", main: tuple[str, int] = ("10.0.0.5:50001", WRITTEN + 600),
               additional: tuple[str, int] | None = None, dont_fragment: bool = False,
               mobile: bool = False, algorithm: int = MD5, key: bytes = bytes(range(16)),
               integrity_sha256: bool = False, username: str = "1700003600:alice", user: str = "alice",
               transaction: tuple[int, int] = (1, 2), response: bytes = b"", bps: int = 0, moves: int = 0,
               permissions: tuple[tuple[str, int], ...] = (),
               channels: tuple[tuple[int, str, int], ...] = (), written: int = WRITTEN) -> bytes:
    flags = ((additional is not None) * 0x01 | dont_fragment * 0x02 | mobile * 0x04
             | integrity_sha256 * 0x08)
    out = struct.pack("!QQBB", session, written, transport, flags)
    out += transport_address(client) + transport_address(server)
    out += transport_address(main[0]) + struct.pack("!Q", main[1])
    if additional is not None:
        out += transport_address(additional[0]) + struct.pack("!Q", additional[1])
    out += struct.pack("!H", algorithm) + text(key, 1) + text(username) + text(user)
    out += struct.pack("!IQ", *transaction) + text(response)
    out += struct.pack("!QI", bps, moves)
    out += struct.pack("!H", len(permissions))
    for peer, expiry in permissions:
        out += ip(peer) + struct.pack("!Q", expiry)
    out += struct.pack("!H", len(channels))
    for number, peer, expiry in channels:
        out += struct.pack("!H", number) + transport_address(peer) + struct.pack("!Q", expiry)
    return out


def keys(*named: tuple[str, bytes]) -> bytes:
    return bytes([len(named)]) + b"".join(text(name, 1) + text(secret) for name, secret in named)


def reservation(token: int, address: str, expiry: int, written: int = WRITTEN) -> bytes:
    return struct.pack("!QQ", token, written) + transport_address(address) + struct.pack("!Q", expiry)


def ended(identifier: int) -> bytes:
    return struct.pack("!Q", identifier)


def raw(clock: int, journal: bytes) -> bytes:
    return bytes([clock << 1]) + journal


def framed(clock: int, records: list[tuple[int, bytes]]) -> bytes:
    return bytes([clock << 1 | 1]) + b"".join(struct.pack("!BH", kind, len(p)) + p for kind, p in records)


# JournalFixture's dual(), plain() and keys (Tests/RelayCoreTests), byte for byte.
DUAL = allocation(
    0x1111, main=("10.0.0.5:50001", WRITTEN + 600), additional=("[2001:db8::5]:50002", WRITTEN + 600),
    algorithm=SHA256, key=bytes(range(32)), integrity_sha256=True, transaction=(0xDEADBEEF, 0x0102030405060708),
    response=bytes([0x42] * 120), dont_fragment=True, mobile=True, moves=1, bps=125_000,
    permissions=(("1.2.3.4", WRITTEN + 300), ("2001:db8::99", WRITTEN + 250)),
    channels=((0x4000, "1.2.3.4:5000", WRITTEN + 600), (0x4FFF, "[2001:db8::99]:6000", WRITTEN + 500)))
PLAIN = allocation(0x2222, client="[2001:db8:1::7]:40002", server="[2001:db8::5]:3478",
                   main=("[2001:db8::5]:50003", WRITTEN + 3600), username="bob", user="bob", key=bytes([7] * 16))
KEY_SET = keys(("nonce", bytes(range(32))), ("mobility-ticket", bytes([0xA5] * 48)),
               ("dtls-cookie", b"\x01\x02\x03"))


def seeds() -> dict[str, bytes]:
    journal = header() + frame(KEYS, KEY_SET) + frame(ALLOCATION, DUAL) + frame(ALLOCATION, PLAIN)
    journal += frame(RESERVATION, reservation(99, "10.0.0.5:50005", WRITTEN + 30))
    journal += frame(ALLOCATION_ENDED, ended(0x2222)) + frame(RESERVATION_ENDED, ended(99))
    return {
        # Every record kind, read 10 s after writing: keys and the dual allocation remain.
        "seed-raw-rich": raw(0, journal),
        # The same, its last frame torn by a crash.
        "seed-raw-torn": raw(0, journal[:-5]),
        # Read an hour and a bit later (clock byte 100: 3,700 s): everything has run out.
        "seed-raw-expired": raw(100, journal),
        # Header refusals: another version, another boot.
        "seed-raw-version-2": raw(0, header(version=2) + frame(ALLOCATION, PLAIN)),
        "seed-raw-other-boot": raw(0, header(boot=bytes(16)) + frame(ALLOCATION, PLAIN)),
        # Payloads framed by the harness: the record decoders' own paths.
        "seed-framed-records": framed(0, [
            (KEYS, KEY_SET), (ALLOCATION, DUAL), (ALLOCATION, PLAIN),
            (RESERVATION, reservation(7, "10.0.0.5:50007", WRITTEN + 20)), (ALLOCATION_ENDED, ended(0x2222)),
        ]),
        # Refused records: a TCP 5-tuple, a channel number out of range, a key of the wrong length,
        # an unknown type, a lifetime past RFC 8656's hour, a record from after the reader's now.
        "seed-framed-refusals": framed(0, [
            (ALLOCATION, allocation(1, transport=TCP)),
            (ALLOCATION, allocation(2, channels=((0x3FFF, "1.2.3.4:5000", WRITTEN + 60),))),
            (ALLOCATION, allocation(3, key=bytes(20))),
            (0x7F, b"future"),
            (ALLOCATION, allocation(4, main=("10.0.0.5:50004", WRITTEN + 3601))),
            (ALLOCATION, allocation(5, written=BASE_NOW + 1)),
        ]),
    }


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for name, data in seeds().items():
        (OUT / name).write_bytes(data)
        print(f"{name}: {len(data)} bytes")


if __name__ == "__main__":
    main()
