"""external-ip behind 1:1 NAT: with `external-ip=203.0.113.7/127.0.0.1` the
Allocate response advertises 203.0.113.7 with the port of the real socket bound on 127.0.0.1,
the credential service hands out URIs with the public address, and two clients of the relay
reach each other through the public forms without any packet going to 203.0.113.7 (the
relay-to-relay short-circuit, or the bound form across loop threads)."""

from __future__ import annotations

import errno
import json
import socket

import pytest

from conftest import RelayServer, running, server_kind
from stunclient import TurnClient

PUBLIC = "203.0.113.7"

pytestmark = pytest.mark.skipif(server_kind() != "relayd", reason="relayd's external-ip handling (coturn differs)")


@pytest.fixture(scope="module")
def natted(tmp_path_factory):
    server = RelayServer("relayd", tmp_path_factory.mktemp("external-ip"),
                         extra_args=[f"--external-ip={PUBLIC}/127.0.0.1"])
    with running(server):
        yield server


def port_is_bound(port: int) -> bool:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.bind(("127.0.0.1", port))
        return False
    except OSError as e:
        return e.errno == errno.EADDRINUSE
    finally:
        s.close()


def test_allocate_advertises_the_public_address_and_the_real_port(natted):
    with TurnClient(natted.address) as client:
        username, password = natted.credentials("nat")
        client.allocate(username, password)
        ip, port = client.relayed
        assert ip == PUBLIC
        assert port in natted.relay_ports
        assert port_is_bound(port), "no relay socket bound on 127.0.0.1 at the advertised port"
        client.refresh(0)


def test_credential_service_uris_use_the_public_address(natted):
    resp = natted.http("GET", "/api/v1/credentials?user=nat&format=ice-servers",
                       headers={"Authorization": f"Bearer {natted.api_token}"})
    assert resp.status == 200, resp
    urls = [u for server in json.loads(resp.body)["iceServers"] for u in server["urls"]]
    assert urls and all(f":{PUBLIC}:" in u or u.split(":")[1] == PUBLIC for u in urls), urls


@pytest.mark.parametrize("rounds", [20])
def test_two_clients_reach_each_other_through_the_public_forms(natted, rounds):
    with TurnClient(natted.address) as a, TurnClient(natted.address) as b:
        a.allocate(*natted.credentials("a"))
        b.allocate(*natted.credentials("b"))
        assert a.relayed[0] == PUBLIC and b.relayed[0] == PUBLIC
        a.create_permission(b.relayed)
        b.channel_bind(0x4001, a.relayed)
        for i in range(rounds):
            a.send_indication(b.relayed, b"to-b %d" % i)
            got = b.receive(2.0)
            assert got is not None and got.kind == "channel" and got.payload == b"to-b %d" % i, got
            b.send_channel_data(0x4001, b"to-a %d" % i)
            got = a.receive(2.0)
            assert got is not None and got.kind == "data", got
            assert got.peer == b.relayed and got.payload == b"to-a %d" % i
        a.refresh(0)
        b.refresh(0)
