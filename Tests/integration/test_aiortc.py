"""Two aiortc peers in one process, connected only through the server's relay.

Relay-only, honestly: both RTCPeerConnections use
RTCConfiguration(iceTransportPolicy=RELAY) (aiortc >= 1.16), so aioice gathers
no host or server-reflexive candidates at all (no socket on any interface but
the one towards the TURN server on 127.0.0.1) and pairs only relayed
candidates. The test then checks that each SDP carries candidates, all of
them `typ relay` on the server's relay range, and that the candidate pair
ICE selected on each side joins two relayed addresses. A data channel then
carries several messages each way, compared byte for byte.
"""

from __future__ import annotations

import asyncio
import re

import pytest

# A missing or too old aiortc fails the test with a message (never a skip).
try:
    from aiortc import RTCConfiguration, RTCIceServer, RTCIceTransportPolicy, RTCPeerConnection
    AIORTC_PROBLEM = None
except ImportError as exc:
    AIORTC_PROBLEM = f"aiortc >= 1.16 with RTCIceTransportPolicy is needed ({exc}); run scripts/install-test-deps.sh"

CONNECT_TIMEOUT = 30.0
MESSAGE_TIMEOUT = 10.0
CLOSE_TIMEOUT = 10.0
CANDIDATE = re.compile(r"^a=candidate:\S+ (\d+) (\S+) (\d+) (\S+) (\d+) typ (\S+)", re.M)

MESSAGES = [
    "hello through the relay",
    "x" * 1000,
    "unicode: \u00e9\u4e2d\U0001f600",
    "",
]
BINARY = [bytes(range(256)), b"\x00" * 1200]


def relay_candidates(sdp: str) -> list[tuple[str, int, str]]:
    return [(m[4], int(m[5]), m[6]) for m in CANDIDATE.finditer(sdp)]


def assert_relay_only(sdp: str, relay) -> None:
    candidates = relay_candidates(sdp)
    assert candidates, f"no candidates in SDP:\n{sdp}"
    for host, port, typ in candidates:
        assert typ == "relay", f"non-relay candidate {host}:{port} typ {typ}"
        assert host == relay.host
        assert relay.min_port <= port <= relay.max_port


def selected_pair(pc):
    """The candidate pair ICE nominated. aiortc has no public getter for it, so
    this reads aioice's Connection behind the data channel's transport chain
    (SCTP -> DTLS -> ICE)."""
    connection = pc.sctp.transport.transport._connection  # RTCIceTransport -> aioice
    pair = connection._nominated.get(1)
    assert pair is not None, "no nominated candidate pair"
    return pair.local_candidate, pair.remote_candidate


async def _round_trip(relay) -> None:
    def config(user: str) -> RTCConfiguration:
        username, password = relay.credentials(user)
        return RTCConfiguration(
            iceServers=[RTCIceServer(urls=[relay.turn_url], username=username, credential=password)],
            iceTransportPolicy=RTCIceTransportPolicy.RELAY,
        )

    offerer = RTCPeerConnection(config("offerer"))
    answerer = RTCPeerConnection(config("answerer"))
    try:
        received_by_answerer: asyncio.Queue = asyncio.Queue()
        received_by_offerer: asyncio.Queue = asyncio.Queue()
        opened = asyncio.get_running_loop().create_future()
        answerer_channel = asyncio.get_running_loop().create_future()

        channel = offerer.createDataChannel("relay-test")
        channel.on("open", lambda: opened.done() or opened.set_result(True))
        channel.on("message", received_by_offerer.put_nowait)

        @answerer.on("datachannel")
        def on_datachannel(remote_channel):
            remote_channel.on("message", received_by_answerer.put_nowait)
            if not answerer_channel.done():
                answerer_channel.set_result(remote_channel)

        # Non-trickle: setLocalDescription gathers all candidates first.
        await asyncio.wait_for(offerer.setLocalDescription(await offerer.createOffer()), CONNECT_TIMEOUT)
        assert_relay_only(offerer.localDescription.sdp, relay)
        await asyncio.wait_for(answerer.setRemoteDescription(offerer.localDescription), CONNECT_TIMEOUT)
        await asyncio.wait_for(answerer.setLocalDescription(await answerer.createAnswer()), CONNECT_TIMEOUT)
        assert_relay_only(answerer.localDescription.sdp, relay)
        await asyncio.wait_for(offerer.setRemoteDescription(answerer.localDescription), CONNECT_TIMEOUT)

        await asyncio.wait_for(opened, CONNECT_TIMEOUT)
        remote = await asyncio.wait_for(answerer_channel, CONNECT_TIMEOUT)

        for pc in (offerer, answerer):
            local, remote_candidate = selected_pair(pc)
            assert (local.type, remote_candidate.type) == ("relay", "relay")
            assert relay.min_port <= local.port <= relay.max_port
            assert relay.min_port <= remote_candidate.port <= relay.max_port

        for message in MESSAGES + BINARY:
            channel.send(message)
        for message in MESSAGES + BINARY:
            got = await asyncio.wait_for(received_by_answerer.get(), MESSAGE_TIMEOUT)
            assert got == message
            remote.send(b"echo:" + got if isinstance(got, bytes) else "echo:" + got)
        for message in MESSAGES + BINARY:
            got = await asyncio.wait_for(received_by_offerer.get(), MESSAGE_TIMEOUT)
            assert got == (b"echo:" + message if isinstance(message, bytes) else "echo:" + message)
    finally:
        for pc in (offerer, answerer):
            try:
                await asyncio.wait_for(pc.close(), CLOSE_TIMEOUT)
            except asyncio.TimeoutError:
                pass


def test_aiortc_data_channel_round_trip_through_the_relay_only(relay):
    if AIORTC_PROBLEM:
        pytest.fail(AIORTC_PROBLEM)
    asyncio.run(asyncio.wait_for(_round_trip(relay), CONNECT_TIMEOUT + 4 * MESSAGE_TIMEOUT))
