"""Endpoint → member mapping from the clusterMembers string, and inferring it from traffic."""

from __future__ import annotations

import pytest

from formats import cluster_codecs as cc
from formats.errors import DecodeError
from recorder.capture.members import MemberMap, TrafficSurvey, infer_members, local_members, parse_members

THREE = (
    "0,10.0.0.1:9002,10.0.0.1:9003,10.0.0.1:9004,10.0.0.1:9005,10.0.0.1:9001|"
    "1,10.0.0.2:9002,10.0.0.2:9003,10.0.0.2:9004,10.0.0.2:9005,10.0.0.2:9001|"
    "2,10.0.0.3:9002,10.0.0.3:9003,10.0.0.3:9004,10.0.0.3:9005,10.0.0.3:9001"
)


def test_each_endpoint_of_the_members_string_names_its_member_and_role():
    members = MemberMap.parse(THREE)
    assert members.member_ids == (0, 1, 2)
    assert members.lookup("10.0.0.2", 9003) == (1, "consensus")
    assert members.lookup("10.0.0.3", 9004) == (2, "log")
    assert members.lookup("10.0.0.1", 9005) == (0, "catchup")
    assert members.lookup("10.0.0.1", 9002) == (0, "ingress")
    assert members.lookup("10.0.0.9", 9003) is None


def test_a_member_alone_on_its_address_is_found_by_address():
    members = MemberMap.parse(THREE)
    assert members.member_at_ip("10.0.0.3") == 2
    loopback = MemberMap.parse(THREE.replace("10.0.0.2", "10.0.0.1"))
    assert loopback.member_at_ip("10.0.0.1") is None  # two members share it


def test_localhost_stands_for_both_loopback_addresses_and_names_can_be_mapped():
    members = MemberMap.parse(
        "0,localhost:1,localhost:2,localhost:3,localhost:4,localhost:5|1,node1:1,node1:2,node1:3,node1:4,node1:5",
        hosts={"node1": "192.168.1.7"},
    )
    assert members.lookup("127.0.0.1", 2) == (0, "consensus")
    assert members.lookup("::1", 3) == (0, "log")
    assert members.lookup("192.168.1.7", 2) == (1, "consensus")


def test_an_unresolved_host_name_is_matched_by_its_port_alone():
    members = MemberMap.parse("0,a:1,a:2,a:3,a:4,a:5|1,b:11,b:12,b:13,b:14,b:15")
    assert members.lookup("172.16.0.4", 12) == (1, "consensus")


def test_optional_archive_response_and_egress_response_endpoints_are_accepted():
    members = parse_members("0,h:1,h:2,h:3,h:4,h:5,h:6,h:7")
    assert sorted(members[0].endpoints) == sorted(
        ["ingress", "consensus", "log", "catchup", "archive", "archiveResponse", "egressResponse"]
    )


@pytest.mark.parametrize(
    "text, expected",
    [
        ("0,h:1,h:2,h:3,h:4", "6 to 8 comma-separated parts"),
        ("x,h:1,h:2,h:3,h:4,h:5", "id must be an integer"),
        ("0,h:1,h:2,h:3,h:4,h:5|0,h:1,h:2,h:3,h:4,h:5", "listed twice"),
        ("0,h:1,h:2,h:3,h:4,h:99999", "port must be 0..65535"),
        ("0,h:1,nocolon,h:3,h:4,h:5", "expected host:port"),
        ("", "no members"),
    ],
)
def test_a_malformed_members_string_is_refused_with_what_was_expected(text, expected):
    with pytest.raises(DecodeError) as error:
        MemberMap.parse(text, source="--members")
    assert expected in str(error.value)
    assert str(error.value).startswith("--members")


def _canvass(follower: int) -> cc.CanvassPosition:
    return cc.CanvassPosition(log_leadership_term_id=-1, log_position=0, leadership_term_id=-1,
                              follower_member_id=follower, protocol_version=65536)


def test_consensus_endpoints_are_inferred_from_who_never_sends_to_them():
    survey = TrafficSurvey()
    endpoints = {0: ("127.0.0.1", 20003), 1: ("127.0.0.1", 20103), 2: ("127.0.0.1", 20203)}
    for receiver, endpoint in endpoints.items():
        for sender in endpoints:
            if sender != receiver:
                survey.on_consensus("127.0.0.1", endpoint, "CanvassPosition", _canvass(sender))
    survey.log_destinations |= {("127.0.0.1", 20004), ("127.0.0.1", 20204)}
    inferred, warnings = infer_members(survey)
    assert inferred.inferred
    assert inferred.lookup("127.0.0.1", 20103) == (1, "consensus")
    assert inferred.lookup("127.0.0.1", 20204) == (2, "log")  # nearest consensus port, said to be a guess
    assert "inferred from the traffic" in warnings[0]
    assert any("guessed" in w for w in warnings)
    # The rebuilt string parses back to the same map, unknown endpoints as port 0.
    again = MemberMap.parse(inferred.text)
    assert again.lookup("127.0.0.1", 20003) == (0, "consensus")


def test_a_vote_names_its_receiver_even_with_two_members():
    survey = TrafficSurvey()
    vote = cc.Vote(candidate_term_id=0, log_leadership_term_id=-1, log_position=0, candidate_member_id=1,
                   follower_member_id=0, vote=cc.BooleanType.TRUE)
    survey.on_consensus("10.0.0.1", ("10.0.0.2", 9003), "Vote", vote)
    inferred, _ = infer_members(survey)
    assert inferred.lookup("10.0.0.2", 9003) == (1, "consensus")


def test_inference_without_any_consensus_message_says_it_cannot():
    inferred, warnings = infer_members(TrafficSurvey())
    assert inferred is None
    assert "cannot infer" in warnings[0]


def test_a_host_capture_is_local_to_the_members_on_that_host_only():
    members = MemberMap.parse(THREE)
    # Captured on 10.0.0.1: that address is in all 10 datagrams, the others in some.
    counts = {"10.0.0.1": 10, "10.0.0.2": 6, "10.0.0.3": 4}
    assert local_members(members, counts, 10) == frozenset({0})
    # A mirror port sees everything: no address is in every datagram.
    assert local_members(members, {"10.0.0.1": 7, "10.0.0.2": 7, "10.0.0.3": 6}, 10) == frozenset()
