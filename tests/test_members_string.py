"""Aeron's cluster members string has one reader, `formats.cluster_members`: what the engine, the capture
importers, the recording proxy and the simulator read from a string is the same, and so are their errors."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.model.members import parse_cluster_members as engine_members
from formats.cluster_members import (
    MemberEntry,
    format_cluster_members,
    format_endpoint,
    member_count,
    parse_cluster_members,
    split_endpoint,
)
from formats.describe import describe_local
from formats.errors import DecodeError
from recorder.capture.members import MemberMap
from recorder.evidence import coverage
from recorder.record import members as proxy_members
from recorder.simulate.scenario import default_cluster_members

THREE = (
    "0,10.0.0.1:20002,10.0.0.1:20003,10.0.0.1:20004,10.0.0.1:20005,10.0.0.1:20001|"
    "1,10.0.0.2:20002,10.0.0.2:20003,10.0.0.2:20004,10.0.0.2:20005,10.0.0.2:20001,10.0.0.2:20006|"
    "2,[::1]:20002,[::1]:20003,[::1]:20004,[::1]:20005,[::1]:20001,[::1]:20006,[::1]:20007"
)


def test_every_reader_sees_the_same_members_and_endpoints():
    entries = parse_cluster_members(THREE)
    assert [e.id for e in entries] == [0, 1, 2]
    assert entries[1].archive_response_endpoint == "10.0.0.2:20006" and entries[1].egress_response_endpoint is None
    # The engine's mutable members are built from the same entries.
    engine = engine_members(THREE)
    assert [(m.id, m.consensus_endpoint, m.archive_response_endpoint, m.egress_response_endpoint) for m in engine] == [
        (e.id, e.consensus_endpoint, e.archive_response_endpoint, e.egress_response_endpoint) for e in entries
    ]
    # The proxy works on the entries themselves.
    assert proxy_members.parse_members(THREE) == entries
    # The capture importers map each endpoint to its addresses, by role.
    member_map = MemberMap.parse(THREE)
    assert member_map.lookup("10.0.0.2", 20003) == (1, "consensus")
    assert member_map.lookup("::1", 20007) == (2, "egressResponse")
    assert member_map.lookup("10.0.0.1", 20006) is None
    # The description of a MemberStart counts what the parser reads.
    assert "members=3" in describe_local(0, "MemberStart", {"clusterMembers": THREE})


def test_java_split_drops_trailing_empty_parts_only():
    assert [e.id for e in parse_cluster_members("0,a,b,c,d,e|1,a,b,c,d,e|")] == [0, 1]
    (entry,) = parse_cluster_members("3,a,b,c,d,e,,")
    assert entry.archive_response_endpoint is None and entry.to_string() == "3,a,b,c,d,e"
    with pytest.raises(DecodeError, match="invalid member value:  within"):
        parse_cluster_members("0,a,b,c,d,e||1,a,b,c,d,e")  # an empty entry in the middle is Aeron's error too
    assert parse_cluster_members("") == () and member_count("") == 0
    assert member_count("nonsense") is None and member_count(None) is None


@pytest.mark.parametrize(
    ("text", "words"),
    [
        # Aeron's own words first, then what was expected: the engine, the proxy and the importers say the same.
        ("0,a:1,b:2,c:3,d:4", ["invalid member value: 0,a:1,b:2,c:3,d:4 within", "6 to 8 comma-separated parts, got 5"]),
        ("0,a,b,c,d,e,f,g,h", ["invalid member value", "got 9"]),
        ("x,a:1,b:2,c:3,d:4,e:5", ['For input string: "x"', "a member id must be an integer"]),
        ("9999999999,a,b,c,d,e", ["member id out of int range"]),
    ],
)
def test_a_string_aeron_refuses_is_one_decode_error_for_every_reader(text, words):
    errors = []
    for parse in (
        parse_cluster_members,
        engine_members,
        proxy_members.parse_members,
        lambda t: MemberMap.parse(t, source="--members"),
    ):
        with pytest.raises(DecodeError) as caught:
            parse(text)
        errors.append(str(caught.value))
    for message in errors:
        assert all(word in message for word in words) and "\n" not in message
    assert errors[2].startswith("clusterMembers: ") and errors[3].startswith("--members: ")


def test_strict_refuses_what_aeron_accepts_but_a_user_cannot_mean():
    twice = "0,a:1,b:2,c:3,d:4,e:5|0,a:1,b:7,c:8,d:4,e:5"
    assert len(parse_cluster_members(twice)) == 2  # Aeron itself does not look
    with pytest.raises(DecodeError, match=r"member id 0 appears twice \(entries 0 and 1\); a member listed twice"):
        parse_cluster_members(twice, strict=True)
    for empty in ("", "|", "|||"):
        with pytest.raises(DecodeError, match="expected at least one member, got no members"):
            parse_cluster_members(empty, strict=True)
    assert len(engine_members(twice)) == 2
    with pytest.raises(DecodeError, match="appears twice"):
        engine_members(twice, strict=True)


@pytest.mark.parametrize(
    ("endpoint", "expected"),
    [
        ("h:1", ("h", 1)),
        (" h:1 ", ("h", 1)),
        ("[::1]:20003", ("::1", 20003)),
        ("10.0.0.1:0", ("10.0.0.1", 0)),  # port 0: not known, in a string rebuilt from traffic
    ],
)
def test_an_endpoint_is_a_host_and_a_port(endpoint, expected):
    assert split_endpoint(endpoint) == expected


@pytest.mark.parametrize(
    ("endpoint", "lowest", "message"),
    [
        ("nocolon", 0, "'nocolon': expected host:port"),
        ("h:", 0, "expected host:port"),
        (":9", 0, "expected host:port"),
        ("h:9a", 0, "expected host:port"),
        ("h:٣", 0, "expected host:port"),  # a digit, but not an ASCII one
        ("::1:9", 0, r"an IPv6 address must be written \[address\]:port"),
        ("[::1:9", 0, r"\[address\]:port"),
        ("h:65536", 0, r"port must be 0\.\.65535"),
        ("h:0", 1, r"port must be 1\.\.65535"),  # what the proxy asks: it cannot forward to port 0
    ],
)
def test_a_bad_endpoint_says_what_was_expected(endpoint, lowest, message):
    with pytest.raises(DecodeError, match=message):
        split_endpoint(endpoint, lowest_port=lowest, what="member 0 consensus", source="--members")


def test_the_importers_and_the_proxy_read_endpoints_alike_but_for_port_zero():
    with pytest.raises(DecodeError, match="member 0 consensus 'nohost': expected host:port"):
        MemberMap.parse("0,h:1,nohost,h:3,h:4,h:5")
    with pytest.raises(DecodeError, match="expected host:port"):
        proxy_members.split_endpoint("nohost")
    assert MemberMap.parse("0,h:1,h:0,h:3,h:4,h:5").endpoint(0, "consensus").port == 0
    with pytest.raises(DecodeError, match="1..65535"):
        proxy_members.split_endpoint("h:0")


def test_the_simulator_writes_strings_the_parser_reads_back():
    text = default_cluster_members(["10.42.0.1", "10.42.0.2", "10.42.0.3"])
    entries = parse_cluster_members(text, strict=True)
    assert [split_endpoint(e.consensus_endpoint) for e in entries] == [(f"10.42.0.{i}", 20003) for i in (1, 2, 3)]
    assert format_cluster_members(entries) == text


def test_coverage_reads_unknown_endpoints_with_the_same_parser():
    inferred = "0,10.0.0.1:1,10.0.0.1:0,10.0.0.1:3,10.0.0.1:4,10.0.0.1:5|1,10.0.0.2:1,10.0.0.2:2,10.0.0.2:0,h:4,h:5"
    found = coverage([], inferred)
    assert found.members == (0, 1) and found.unknown_endpoints == {0: ("consensus",), 1: ("log",)}
    assert coverage([], "not a members string").members == ()


_HOST = st.sampled_from(["localhost", "10.0.0.7", "node-a", "::1"])
_ENDPOINT = st.builds(format_endpoint, _HOST, st.integers(0, 65535))


@given(
    st.lists(
        st.tuples(st.integers(-(1 << 31), (1 << 31) - 1), st.lists(_ENDPOINT, min_size=5, max_size=7)),
        min_size=1,
        max_size=5,
    )
)
def test_a_written_members_string_reads_back_to_the_same_entries(members):
    entries = tuple(MemberEntry(member_id, *endpoints) for member_id, endpoints in members)
    text = format_cluster_members(entries)
    assert parse_cluster_members(text) == entries
    for entry in entries:
        for endpoint in entry.endpoints().values():
            host, port = split_endpoint(endpoint)
            assert format_endpoint(host, port) == endpoint
