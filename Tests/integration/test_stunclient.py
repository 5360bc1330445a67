"""Self-checks of stunclient.py against published vectors (no server needed).

If a test against the server fails, these say the client side is right:
RFC 5769 sample messages (MESSAGE-INTEGRITY, FINGERPRINT, XOR-MAPPED-ADDRESS)
and the TURN REST credential vectors promised in docs/compatibility.md.
"""

from stunclient import (
    Attr,
    Class,
    Method,
    StunMessage,
    decode_channel_data,
    encode_channel_data,
    encode_xor_address,
    long_term_key,
    message_type,
    rest_credentials,
    split_message_type,
)

RFC5769_PASSWORD = b"VOkJxbRl1RmTxUk/WvJxBt"

# RFC 5769 §2.1: sample request (USERNAME "evtj:h6vY", short-term password above).
SAMPLE_REQUEST = bytes.fromhex(
    "000100582112a442b7e7a701bc34d686fa87dfae"
    "802200105354554e207465737420636c69656e74"
    "002400046e0001ff"
    "80290008932ff9b151263b36"
    "000600096576746a3a68367659202020"
    + "000800149aeaa70cbfd8cb56781ef2b5b2d3f249c1b571a2"
    "80280004e57a3bcf"
)

# RFC 5769 §2.2: sample IPv4 response, XOR-MAPPED-ADDRESS 192.0.2.1:32853.
SAMPLE_IPV4_RESPONSE = bytes.fromhex(
    "0101003c2112a442b7e7a701bc34d686fa87dfae"
    "8022000b7465737420766563746f7220"
    "002000080001a147e112a643"
    "000800142b91f599fd9e90c38c7489f92af9ba53f06be7d7"
    "80280004c07d4c96"
)

# RFC 5769 §2.3: sample IPv6 response, 2001:db8:1234:5678:11:2233:4455:6677 port 32853.
SAMPLE_IPV6_RESPONSE = bytes.fromhex(
    "010100482112a442b7e7a701bc34d686fa87dfae"
    "8022000b7465737420766563746f7220"
    "002000140002a1470113a9faa5d3f179bc25f4b5bed2b9d9"
    "00080014a382954e4be67bf11784c97c8292c275bfe3ed41"
    "80280004c8fb0b4c"
)


def test_rfc5769_sample_request_integrity_and_fingerprint():
    msg = StunMessage.decode(SAMPLE_REQUEST)
    assert (msg.method, msg.cls) == (Method.BINDING, Class.REQUEST)
    assert msg.text(Attr.USERNAME) == "evtj:h6vY"
    assert msg.verify_integrity(RFC5769_PASSWORD)
    assert not msg.verify_integrity(b"wrong password")
    assert msg.verify_fingerprint()


def test_rfc5769_sample_ipv4_response():
    msg = StunMessage.decode(SAMPLE_IPV4_RESPONSE)
    assert (msg.method, msg.cls) == (Method.BINDING, Class.SUCCESS)
    assert msg.xor_address(Attr.XOR_MAPPED_ADDRESS) == ("192.0.2.1", 32853)
    assert msg.verify_integrity(RFC5769_PASSWORD)
    assert msg.verify_fingerprint()


def test_rfc5769_sample_ipv6_response():
    msg = StunMessage.decode(SAMPLE_IPV6_RESPONSE)
    address = ("2001:db8:1234:5678:11:2233:4455:6677", 32853)
    assert msg.xor_address(Attr.XOR_MAPPED_ADDRESS) == address
    assert encode_xor_address(address, msg.transaction_id) == msg.get(Attr.XOR_MAPPED_ADDRESS)
    assert msg.verify_integrity(RFC5769_PASSWORD)
    assert msg.verify_fingerprint()


def test_encode_then_decode_verifies_integrity_and_fingerprint():
    key = long_term_key("1:alice", "example.org", "pw")
    req = StunMessage(Method.ALLOCATE, Class.REQUEST)
    req.add(Attr.REQUESTED_TRANSPORT, b"\x11\x00\x00\x00").add(Attr.USERNAME, b"1:alice")
    msg = StunMessage.decode(req.encode(integrity_key=key))
    assert msg.verify_integrity(key)
    assert msg.verify_fingerprint()
    assert msg.transaction_id == req.transaction_id


def test_message_type_interleaves_class_bits():
    # RFC 8489 §5: Binding request 0x0001, success 0x0101, error 0x0111;
    # RFC 8656: Allocate error 0x0113, Data indication 0x0017.
    assert message_type(Method.BINDING, Class.REQUEST) == 0x0001
    assert message_type(Method.BINDING, Class.SUCCESS) == 0x0101
    assert message_type(Method.BINDING, Class.ERROR) == 0x0111
    assert message_type(Method.ALLOCATE, Class.ERROR) == 0x0113
    assert message_type(Method.DATA, Class.INDICATION) == 0x0017
    assert split_message_type(0x0113) == (Method.ALLOCATE, Class.ERROR)


def test_channel_data_round_trip():
    assert encode_channel_data(0x4000, b"abc") == b"\x40\x00\x00\x03abc"
    assert encode_channel_data(0x4000, b"abc", pad=True) == b"\x40\x00\x00\x03abc\x00"
    assert decode_channel_data(b"\x40\x01\x00\x03abc\x00") == (0x4001, b"abc")


def test_rest_credentials_match_the_compat_vectors():
    # docs/compatibility.md, secret "north"; the second one is expired (the server says 401).
    assert rest_credentials("north", "alice", expiry=4102444800) == (
        "4102444800:alice", "58Tl4e2VjINId23vxEnD/7NNBaQ=")
    assert rest_credentials("north", "alice", expiry=1700000000) == (
        "1700000000:alice", "Cd/49soE35ICqcJF/bCTn8Z4OyE=")
