"""Captures the IPv4 and IPv6 UDP datagrams an interface receives for one destination port, or
from one source port when PORT is negative (an AF_PACKET socket, run inside the namespace that
owns the interface), and checks each one's checksums against a recomputation: the IPv4 header
checksum (RFC 791) and the UDP checksum (RFC 768; mandatory over IPv6, RFC 8200 §8.1). Prints
one JSON object when it stops: how many datagrams it saw, how many had a bad checksum, the
payload bytes.

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
    # Room for bursts while this loop checksums in Python (SO_RCVBUFFORCE: the tests run as root).
    sock.setsockopt(socket.SOL_SOCKET, 33, 8 << 20)
    sock.bind((ifname, 0))
    sock.settimeout(0.2)
    seen = bad_ip = bad_udp = payload_bytes = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            frame, meta = sock.recvfrom(65535)
        except socket.timeout:
            continue
        if meta[2] == socket.PACKET_OUTGOING or len(frame) < 42:
            continue
        if frame[12:14] == b"\x08\x00":
            ip = frame[14:34]
            if ip[0] != 0x45 or ip[9] != 17:
                continue
            total = struct.unpack("!H", ip[2:4])[0]
            udp = frame[34:14 + total]
            pseudo = ip[12:20] + struct.pack("!BBH", 0, 17, len(udp))
            ip_ok = checksum(ip) == 0
        elif frame[12:14] == b"\x86\xdd" and len(frame) >= 62:
            ip = frame[14:54]  # IPv6: no header checksum; the UDP checksum is mandatory (RFC 8200 §8.1)
            if ip[6] != 17:
                continue
            udp = frame[54:54 + struct.unpack("!H", ip[4:6])[0]]
            pseudo = ip[8:40] + struct.pack("!I3xB", len(udp), 17)
            ip_ok = True
        else:
            continue
        if len(udp) < 8 or struct.unpack("!H", udp[field:field + 2])[0] != port:
            continue
        if only_channel_data and (len(udp) < 9 or udp[8] & 0xC0 != 0x40):
            continue
        seen += 1
        if not ip_ok:
            bad_ip += 1
        if struct.unpack("!H", udp[6:8])[0] == 0 or checksum(pseudo + udp) != 0:
            bad_udp += 1
        payload_bytes += len(udp) - 8
    print(json.dumps({"seen": seen, "bad_ip_checksum": bad_ip, "bad_udp_checksum": bad_udp,
                      "payload_bytes": payload_bytes}), flush=True)


if __name__ == "__main__":
    main()
