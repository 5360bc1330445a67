"""Captures the IPv4 UDP datagrams an interface receives for one destination port, or from one
source port when PORT is negative (an AF_PACKET
socket, run inside the namespace that owns the interface) and checks each one's IPv4 header
checksum and UDP checksum against a recomputation (RFC 791, RFC 768). Prints one JSON object
when it stops: how many datagrams it saw, how many had a bad checksum, the payload bytes.

    python3 udpcapture.py IFNAME PORT SECONDS [channeldata]

With `channeldata` only datagrams whose payload is ChannelData (first two bits 01, RFC 7983)
count: STUN answers a process sent through its socket may carry the partial checksum of
checksum offload on veth, which the receiving kernel accepts and a capture sees unfinished.

Used by the kernel fast path tests: delivery alone proves nothing about checksums (a datagram
rewritten without fixing its checksum may still be delivered on veth and loopback)."""

from __future__ import annotations

import json
import socket
import struct
import sys
import time

ETH_P_ALL = 0x0003


def checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def main() -> None:
    ifname, port, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    field = 0 if port < 0 else 2  # UDP source port, or destination port
    port = abs(port)
    only_channel_data = len(sys.argv) > 4 and sys.argv[4] == "channeldata"
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    sock.bind((ifname, 0))
    sock.settimeout(0.2)
    seen = bad_ip = bad_udp = payload_bytes = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            frame, meta = sock.recvfrom(65535)
        except socket.timeout:
            continue
        if meta[2] == socket.PACKET_OUTGOING or len(frame) < 42 or frame[12:14] != b"\x08\x00":
            continue
        ip = frame[14:34]
        if ip[0] != 0x45 or ip[9] != 17:
            continue
        total = struct.unpack("!H", ip[2:4])[0]
        udp = frame[34:14 + total]
        if struct.unpack("!H", udp[field:field + 2])[0] != port:
            continue
        if only_channel_data and (len(udp) < 9 or udp[8] & 0xC0 != 0x40):
            continue
        seen += 1
        if checksum(ip) != 0:
            bad_ip += 1
        pseudo = ip[12:20] + struct.pack("!BBH", 0, 17, len(udp))
        if struct.unpack("!H", udp[6:8])[0] == 0 or checksum(pseudo + udp) != 0:
            bad_udp += 1
        payload_bytes += len(udp) - 8
    print(json.dumps({"seen": seen, "bad_ip_checksum": bad_ip, "bad_udp_checksum": bad_udp,
                      "payload_bytes": payload_bytes}), flush=True)


if __name__ == "__main__":
    main()
