"""One side of the NAT test's call, run inside a client namespace with `ip netns exec`.

    nat_peer.py probe HOST PORT TIMEOUT
        Sends STUN Binding requests to HOST:PORT until one is answered (exit 0, prints
        the XOR-MAPPED-ADDRESS) or TIMEOUT seconds pass (exit 1). Used to wait for relayd
        and to see what address a NAT maps a client to.

    nat_peer.py peer --role offerer|answerer --dir DIR --config JSON [...]
        An aiortc RTCPeerConnection with the ICE servers and policy in JSON. Signaling
        is through files in DIR (the namespaces share the filesystem): the offerer
        writes offer.json, the answerer answer.json (each written to a temporary name
        and renamed, so the reader never sees half a file). Candidates are not
        trickled: aiortc gathers them all in setLocalDescription. The peer then waits,
        bounded, for ICE to complete or fail; if it completes, each side sends
        --messages data channel messages (text and binary, some larger than one
        packet) and checks the other side's arrive complete, in order and intact.
        The outcome goes to result-<role>.json; the peer closes once the other side's
        result exists too (bounded), so neither closes while the other still reads.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import socket
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

FILE_POLL = 0.05


def probe(host: str, port: int, timeout: float) -> int:
    import stunclient

    deadline = time.monotonic() + timeout
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        while time.monotonic() < deadline:
            req = stunclient.binding_request()
            try:
                s.sendto(req.encode(), (host, port))
            except OSError:
                time.sleep(0.1)
                continue
            got = stunclient.recv_from(s, 0.2)
            if got is None:
                continue
            try:
                resp = stunclient.StunMessage.decode(got[0])
            except stunclient.StunDecodeError:
                continue
            if resp.transaction_id == req.transaction_id and resp.cls == stunclient.Class.SUCCESS:
                mapped = resp.xor_address(stunclient.Attr.XOR_MAPPED_ADDRESS)
                print(json.dumps({"mapped": mapped}))
                return 0
    print(json.dumps({"error": f"no Binding response from {host}:{port} within {timeout} s"}))
    return 1


# --- the call ---------------------------------------------------------------------------


def message(role: str, i: int) -> str | bytes:
    """The i-th message `role` sends: text and binary in turn, up to ~3 KB."""
    size = (i * 397) % 3000 + 1
    seed = hashlib.sha256(f"{role}:{i}".encode()).digest()
    payload = (seed * (size // len(seed) + 1))[:size]
    if i % 2 == 0:
        return f"{role} #{i} " + payload.hex()[: size]
    return payload


def write_json(path: Path, value) -> None:
    tmp = path.with_suffix(path.suffix + f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(value))
    os.replace(tmp, path)


async def read_json(path: Path, timeout: float):
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path.name} did not appear within {timeout} s")
        await asyncio.sleep(FILE_POLL)
    return json.loads(path.read_text())


def candidates_of(sdp: str) -> list[dict]:
    found = []
    for line in sdp.splitlines():
        if line.startswith("a=candidate:"):
            parts = line.split()
            found.append({"ip": parts[4], "port": int(parts[5]), "type": parts[7]})
    return found


def selected_pair(pc) -> dict | None:
    """The nominated pair; aiortc has no public getter, so this reads aioice's
    Connection behind the data channel's transport chain (SCTP -> DTLS -> ICE)."""
    try:
        connection = pc.sctp.transport.transport._connection
        pair = connection._nominated.get(1)
    except AttributeError:
        return None
    if pair is None:
        return None
    local, remote = pair.local_candidate, pair.remote_candidate
    return {"local": {"type": local.type, "ip": local.host, "port": local.port},
            "remote": {"type": remote.type, "ip": remote.host, "port": remote.port}}


async def call(args) -> dict:
    import aioice.stun
    from aiortc import (RTCConfiguration, RTCIceServer, RTCIceTransportPolicy, RTCPeerConnection,
                        RTCSessionDescription)

    if args.check_transmissions:
        # Fewer STUN retransmissions per check (aioice's default of 6 gives up after
        # 31.5 s): the no-relay case then fails ICE sooner. Only the case that
        # expects failure sets this.
        aioice.stun.RETRY_MAX = args.check_transmissions

    config = json.loads(args.config)
    policy = RTCIceTransportPolicy.RELAY if config["policy"] == "relay" else RTCIceTransportPolicy.ALL
    pc = RTCPeerConnection(RTCConfiguration(
        iceServers=[RTCIceServer(**server) for server in config["iceServers"]], iceTransportPolicy=policy))
    directory = Path(args.dir)
    role, other = args.role, ("answerer" if args.role == "offerer" else "offerer")
    result: dict = {"role": role, "states": [], "connected": False}
    started = time.monotonic()
    done = asyncio.Event()
    received: list = []
    all_received = asyncio.Event()
    channel_ready: asyncio.Future = asyncio.get_running_loop().create_future()

    @pc.on("iceconnectionstatechange")
    def on_ice_state():
        state = pc.iceConnectionState
        result["states"].append([round(time.monotonic() - started, 2), state])
        if state in ("completed", "failed"):
            done.set()

    def on_message(msg):
        received.append(msg)
        if len(received) >= args.messages:
            all_received.set()

    if role == "offerer":
        channel = pc.createDataChannel("nat-test")
        channel.on("message", on_message)
        channel.on("open", lambda: channel_ready.done() or channel_ready.set_result(channel))
    else:
        @pc.on("datachannel")
        def on_datachannel(remote_channel):
            remote_channel.on("message", on_message)
            if not channel_ready.done():
                channel_ready.set_result(remote_channel)

    try:
        if role == "offerer":
            await asyncio.wait_for(pc.setLocalDescription(await pc.createOffer()), args.timeout)
            write_json(directory / "offer.json", {"sdp": pc.localDescription.sdp, "type": "offer"})
            answer = await read_json(directory / "answer.json", args.timeout)
            await pc.setRemoteDescription(RTCSessionDescription(**answer))
        else:
            offer = await read_json(directory / "offer.json", args.timeout)
            await pc.setRemoteDescription(RTCSessionDescription(**offer))
            await asyncio.wait_for(pc.setLocalDescription(await pc.createAnswer()), args.timeout)
            write_json(directory / "answer.json", {"sdp": pc.localDescription.sdp, "type": "answer"})
        result["local_candidates"] = candidates_of(pc.localDescription.sdp)
        result["remote_candidates"] = candidates_of(pc.remoteDescription.sdp)

        try:
            await asyncio.wait_for(done.wait(), args.timeout)
        except asyncio.TimeoutError:
            result["ice_timeout"] = True
        result["ice_state"] = pc.iceConnectionState
        result["ice_seconds"] = round(time.monotonic() - started, 2)
        if pc.iceConnectionState == "completed":
            result["connected"] = True
            ch = await asyncio.wait_for(channel_ready, args.timeout)
            result["selected_pair"] = selected_pair(pc)
            for i in range(args.messages):
                ch.send(message(role, i))
            try:
                await asyncio.wait_for(all_received.wait(), args.timeout)
            except asyncio.TimeoutError:
                pass
            expected = [message(other, i) for i in range(args.messages)]
            result["received"] = len(received)
            result["intact"] = received == expected
            if not result["intact"]:
                result["first_mismatch"] = next(
                    (i for i, (a, b) in enumerate(zip(received, expected)) if a != b), min(len(received), len(expected)))
    except Exception as exc:  # noqa: BLE001 - reported to the test in the result file
        result["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        write_json(directory / f"result-{role}.json", result)
        try:
            await read_json(directory / f"result-{other}.json", args.timeout)
        except TimeoutError:
            pass
        try:
            await asyncio.wait_for(pc.close(), 10)
        except asyncio.TimeoutError:
            pass
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("probe")
    p.add_argument("host")
    p.add_argument("port", type=int)
    p.add_argument("timeout", type=float)
    c = sub.add_parser("peer")
    c.add_argument("--role", choices=["offerer", "answerer"], required=True)
    c.add_argument("--dir", required=True)
    c.add_argument("--config", required=True, help='{"iceServers": [...], "policy": "relay"|"all"}')
    c.add_argument("--messages", type=int, default=50)
    c.add_argument("--timeout", type=float, default=30.0, help="bound on each wait")
    c.add_argument("--check-transmissions", type=int, default=0)
    args = parser.parse_args()
    if args.command == "probe":
        return probe(args.host, args.port, args.timeout)
    result = asyncio.run(call(args))
    return 0 if "error" not in result else 1


if __name__ == "__main__":
    sys.exit(main())
