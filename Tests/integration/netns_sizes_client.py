"""A TURN client for the namespace tests, run inside a client namespace: allocates (REST
credentials; with DF=1 the Allocate carries DONT-FRAGMENT, RFC 8656 §7.2), binds channel
0x4001 to PEER and sends one ChannelData message of each size in SIZES, a few times each (with
DF=send, Send indications that carry DONT-FRAGMENT instead, RFC 8656 §11.2), then
listens for a second for Data indications with an ICMP attribute (RFC 8656 §11.5). Prints one
JSON object: the sizes sent, and each ICMP as [type, code, error data, peer host, peer port].

    python3 netns_sizes_client.py SERVER_HOST PORT SECRET PEER_HOST PEER_PORT DF BIND_HOST SIZE..."""

from __future__ import annotations

import json
import struct
import sys
import time

from stunclient import Attr, Class, Method, StunMessage, TurnClient, encode_xor_address, rest_credentials


def main() -> None:
    host, port, secret, peer_host, peer_port, df, bind_host = sys.argv[1:8]
    sizes = [int(s) for s in sys.argv[8:]]
    with TurnClient((host, int(port)), bind_host=bind_host) as client:
        username, password = rest_credentials(secret, "sizes")
        client.allocate(username, password, extra=[(Attr.DONT_FRAGMENT, b"")] if df == "1" else [])
        peer = (peer_host, int(peer_port))
        client.channel_bind(0x4001, peer)
        for _ in range(3):
            for size in sizes:
                payload = bytes([size & 0xFF]) * size
                if df == "send":
                    indication = StunMessage(Method.SEND, Class.INDICATION)
                    indication.add(Attr.XOR_PEER_ADDRESS, encode_xor_address(peer, indication.transaction_id))
                    indication.add(Attr.DATA, payload)
                    indication.add(Attr.DONT_FRAGMENT, b"")
                    client.send_raw(indication.encode())
                else:
                    client.send_channel_data(0x4001, payload)
                time.sleep(0.02)
        icmp, deadline = [], time.monotonic() + 1.0
        while (left := deadline - time.monotonic()) > 0:
            got = client.receive(left)
            value = got.message.get(Attr.ICMP) if got is not None and got.message is not None else None
            if value is not None:
                icmp.append([value[2], value[3], struct.unpack("!I", value[4:8])[0], *got.peer])
    print(json.dumps({"sent": sizes, "icmp": icmp}))


if __name__ == "__main__":
    main()
