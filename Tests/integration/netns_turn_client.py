"""A TURN client for the namespace tests, run inside a client namespace: allocates (REST
credentials, the relayed address's family chosen with REQUESTED-ADDRESS-FAMILY, RFC 8656
§18.6), binds channel 0x4001 to PEER, sends COUNT ChannelData messages of varied sizes in
batches and collects what the peer (an echo) sends back. Prints one JSON object: sent, echoed,
and whether every echo came back intact and in order.

    python3 netns_turn_client.py SERVER_HOST PORT SECRET PEER_HOST PEER_PORT COUNT FAMILY BIND_HOST"""

from __future__ import annotations

import json
import sys
import time

from stunclient import Attr, TurnClient, TurnError, rest_credentials


def main() -> None:
    host, port, secret, peer_host, peer_port, count, family, bind_host = sys.argv[1:9]
    count = int(count)
    with TurnClient((host, int(port)), bind_host=bind_host) as client:
        username, password = rest_credentials(secret, "netns")
        family_attr = [(Attr.REQUESTED_ADDRESS_FAMILY, b"\x02\x00\x00\x00")] if family == "6" else []
        try:
            client.allocate(username, password, extra=family_attr)
        except TurnError as refused:
            print(json.dumps({"error": f"allocate: {refused}"}))
            return
        client.channel_bind(0x4001, (peer_host, int(peer_port)))
        messages = [bytes((i + k) & 0xFF for k in range(1 + (i * 37) % 1200)) for i in range(count)]
        echoed = []
        for start in range(0, count, 20):
            batch = messages[start:start + 20]
            for message in batch:
                client.send_channel_data(0x4001, message)
            deadline = time.monotonic() + 5
            while len(echoed) < start + len(batch) and time.monotonic() < deadline:
                got = client.receive(1.0)
                if got is not None and got.kind == "channel":
                    echoed.append(got.payload)
        print(json.dumps({"sent": count, "echoed": len(echoed), "intact": echoed == messages}))


if __name__ == "__main__":
    main()
