"""ClusterMember and the quorum helpers, against the cases of Aeron's ClusterMemberTest (aeron-election.md §4),
java.util.Random against known Java outputs, and Config/ModelFlags."""

from __future__ import annotations

import pytest

from engine.model import members as cm
from engine.model.config import Config, parse_duration_ns
from engine.model.flags import ModelFlags
from engine.model.javarandom import JavaRandom
from engine.model.members import ClusterMember, parse_cluster_members
from engine.versions import flags_for_version


def member(id: int, term: int = -1, pos: int = -1) -> ClusterMember:
    m = ClusterMember(id)
    m.leadership_term_id = term
    m.log_position = pos
    return m


def voter(id: int, term: int, vote: bool | None) -> ClusterMember:
    m = ClusterMember(id)
    m.candidate_term_id = term
    m.vote = vote
    return m


# -- java.util.Random ------------------------------------------------------------------------------


def test_java_random_next_double_matches_java_for_known_seeds():
    assert JavaRandom(42).next_double() == 0.7275636800328681
    assert JavaRandom(0).next_double() == 0.730967787376657


def test_java_random_int_long_and_bounded_int_match_java():
    r = JavaRandom(42)
    assert [r.next_int() for _ in range(3)] == [-1170105035, 234785527, -1360544799]
    assert JavaRandom(42).next_long() == -5025562857975149833
    assert JavaRandom(42).next_int(10) == 0
    assert JavaRandom(42).next_boolean() is True


def test_java_random_takes_negative_and_oversized_seeds_as_a_java_long():
    assert JavaRandom(-1).next_double() == JavaRandom(-1 + (1 << 64)).next_double()


def test_nomination_delay_is_the_draw_times_half_the_election_timeout():
    delay = int(JavaRandom(42).next_double() * (Config().election_timeout_ns >> 1))
    assert delay == 363_781_840


# -- parse -------------------------------------------------------------------------------------------


def test_members_string_parses_ids_and_endpoints_in_order():
    members = parse_cluster_members("0,a:1,a:2,a:3,a:4,a:5|1,b:1,b:2,b:3,b:4,b:5,b:6,b:7|")
    assert [m.id for m in members] == [0, 1]
    assert members[0].catchup_endpoint == "a:4" and members[0].archive_endpoint == "a:5"
    assert members[0].archive_response_endpoint is None
    assert members[1].archive_response_endpoint == "b:6" and members[1].egress_response_endpoint == "b:7"


def test_members_string_with_too_few_or_too_many_parts_is_refused_with_aerons_words():
    with pytest.raises(ValueError, match="invalid member value: 0,a,b,c,d within"):
        parse_cluster_members("0,a,b,c,d")
    with pytest.raises(ValueError, match="invalid member value"):
        parse_cluster_members("0,a,b,c,d,e,f,g,h")


def test_members_string_with_a_non_integer_id_is_refused():
    with pytest.raises(ValueError, match='"x"'):
        parse_cluster_members("x,a,b,c,d,e")


def test_trailing_empty_member_parts_are_dropped_as_java_split_does():
    (m,) = parse_cluster_members("3,a,b,c,d,e,,")
    assert m.id == 3 and m.archive_response_endpoint is None


# -- ClusterMemberTest -------------------------------------------------------------------------------


def test_quorum_threshold_is_a_strict_majority():
    assert [cm.quorum_threshold(n) for n in range(1, 8)] == [1, 2, 2, 3, 3, 4, 4]


@pytest.mark.parametrize(
    ("lhs", "rhs", "expected"),
    [
        ((5, 1000), (3, 999999), 1),
        ((-100, 99999), (4, 0), -1),
        ((42, 371239192371239), (42, 1001), 1),
        ((3, -777), (3, 273291846723894), -1),
        ((1, 1024), (1, 1024), 0),
    ],
)
def test_compare_log_orders_by_term_then_position(lhs, rhs, expected):
    assert cm.compare_log(*lhs, *rhs) == expected


def test_unanimous_candidate_needs_every_member_to_have_reported():
    members = [member(0, 2, 100), member(1, 8, -1), member(2, 10, 800)]
    assert not cm.is_unanimous_candidate(members, member(9, 10, 800))


def test_unanimous_candidate_is_false_when_a_member_has_a_better_log():
    members = [member(0, 2, 100), member(1, 11, 1000), member(2, 10, 800)]
    assert not cm.is_unanimous_candidate(members, member(9, 10, 800))


def test_unanimous_candidate_cannot_hold_in_two_members_with_the_graceful_leader_skipped():
    members = [member(0, 2, 100), member(1, 2, 100)]
    assert not cm.is_unanimous_candidate(members, members[0], graceful_closed_leader_id=1)


def test_unanimous_candidate_holds_when_no_member_has_a_better_log():
    members = [member(0, 2, 100), member(1, 8, 6), member(2, 10, 800)]
    assert cm.is_unanimous_candidate(members, member(9, 10, 800))


def test_quorum_candidate_counts_members_with_a_log_no_better_than_the_candidates():
    candidate = member(9, 10, 800)
    two_of_five = [member(0, 2, 100), member(1, 18, 6), member(2, 10, 800), member(3, 19, 800), member(4, 10, 1000)]
    four_of_five = [member(0, 2, 100), member(1, 18, 6), member(2, 10, 800), member(3, 9, 800), member(4, 10, 700)]
    assert not cm.is_quorum_candidate(two_of_five, candidate)
    assert cm.is_quorum_candidate(four_of_five, candidate)


def test_quorum_leader_ignores_no_votes_of_other_terms_and_null_votes():
    members = [voter(0, -5, True), voter(1, -10, False), voter(2, -5, None), voter(3, -5, True), voter(4, -5, True)]
    assert cm.is_quorum_leader(members, -5)


def test_quorum_leader_is_false_on_any_no_vote_for_the_term():
    assert not cm.is_quorum_leader([voter(0, 8, True), voter(1, 8, False), voter(2, 8, True)], 8)


def test_quorum_leader_does_not_count_votes_for_another_term():
    assert not cm.is_quorum_leader([voter(0, 8, True), voter(1, 8, None), voter(2, 7, True)], 8)


def test_unanimous_leader_cases_from_cluster_member_test():
    assert not cm.is_unanimous_leader([voter(0, 3, True), voter(1, 3, True), voter(2, 3, False)], 3)
    assert not cm.is_unanimous_leader([voter(0, 3, True), voter(1, 3, True)], 3, graceful_closed_leader_id=1)
    assert not cm.is_unanimous_leader([voter(0, 3, True), voter(1, 3, None), voter(2, 3, True)], 3)
    assert not cm.is_unanimous_leader([voter(0, 3, True), voter(1, 2, True), voter(2, 3, True)], 3)
    assert cm.is_unanimous_leader([voter(0, 3, True), voter(1, 3, True), voter(2, 3, True)], 3)


@pytest.mark.parametrize(
    ("positions", "expected"),
    [((0, 0, 0), 0), ((123, 0, 0), 0), ((123, 123, 0), 123), ((0, 123, 200), 123), ((-1, -1, 50), 0), ((7, -1, 9), 7)],
)
def test_quorum_position_is_the_qth_highest_floored_at_zero(positions, expected):
    members = [member(i, 0, p) for i, p in enumerate(positions)]
    assert cm.quorum_position(members, [0, 0]) == expected


def test_become_candidate_votes_for_itself_and_clears_everyone_else():
    members = [voter(0, 4, True), voter(1, 4, False), voter(2, 4, True)]
    members[1].is_ballot_sent = True
    cm.become_candidate(members, 5, 2)
    assert [(m.vote, m.candidate_term_id, m.is_ballot_sent) for m in members] == [
        (None, -1, False),
        (None, -1, False),
        (True, 5, True),
    ]


def test_active_quorum_counts_the_leader_and_recent_append_positions():
    members = [ClusterMember(0), ClusterMember(1), ClusterMember(2)]
    members[0].is_leader = True
    members[1].time_of_last_append_position_ns = 1_000
    assert cm.has_active_quorum(members, 1_000 + 10_000, 10_000)  # inclusive: now <= time + timeout
    assert not cm.has_active_quorum(members, 1_000 + 10_001, 10_000)


def test_voters_at_position_is_vacuously_true_without_voters_and_checks_term_and_position():
    members = [member(0, 3, 100), member(1, 3, 50)]
    assert cm.has_voters_at_position(members, 100, 3)
    members[1].vote = True
    assert not cm.has_voters_at_position(members, 100, 3)
    members[1].log_position = 100
    assert cm.has_voters_at_position(members, 100, 3)
    members[1].leadership_term_id = 2
    assert not cm.has_voters_at_position(members, 100, 3)


def test_quorum_at_position_needs_the_term_and_the_position():
    members = [member(0, 3, 100), member(1, 3, 99), member(2, 2, 200)]
    assert not cm.has_quorum_at_position(members, 100, 3)
    members[1].log_position = 100
    assert cm.has_quorum_at_position(members, 100, 3)


def test_reset_keeps_the_append_time_and_catchup_ids():
    m = voter(0, 4, True)
    m.time_of_last_append_position_ns = 77
    m.catchup_replay_session_id = 5
    m.reset()
    assert (m.vote, m.candidate_term_id, m.log_position, m.time_of_last_append_position_ns, m.catchup_replay_session_id) == (
        None,
        -1,
        -1,
        77,
        5,
    )


def test_the_1_40_ballot_helpers_let_no_votes_through():
    members = [voter(0, 3, True), voter(1, 3, True), voter(2, 3, False)]
    assert cm.has_won_vote_on_full_count(members, 3)
    assert cm.has_majority_vote(members, 3)
    assert not cm.is_quorum_leader(members, 3)


# -- Config and flags --------------------------------------------------------------------------------


def test_config_defaults_are_aeron_1_47_3s():
    config = Config()
    assert config.election_timeout_ns == 1_000_000_000
    assert config.election_status_interval_ns == 100_000_000
    assert config.startup_canvass_timeout_ns == 60_000_000_000
    assert config.leader_heartbeat_timeout_ns == 10_000_000_000
    assert config.leader_heartbeat_interval_ns == 200_000_000
    assert config.appointed_leader_id == -1


def test_config_from_properties_takes_ns_and_duration_strings():
    config = Config.from_properties({"aeron.cluster.election.timeout": "2s", "aeron.cluster.leader.heartbeat.interval": 50_000_000})
    assert config.election_timeout_ns == 2_000_000_000
    assert config.leader_heartbeat_interval_ns == 50_000_000
    assert parse_duration_ns("500us") == 500_000 and parse_duration_ns("7") == 7


def test_config_refuses_an_unknown_property_by_name():
    with pytest.raises(ValueError, match="aeron.cluster.nonsense"):
        Config.from_properties({"aeron.cluster.nonsense": 1})


def test_config_refuses_a_startup_canvass_timeout_below_twice_the_heartbeat_timeout():
    with pytest.raises(ValueError, match="must be a multiple of leaderHeartbeatTimeoutNs"):
        Config.from_properties({"aeron.cluster.startup.canvass.timeout": "15s"})


def test_model_flags_for_old_versions_switch_off_the_newer_changes():
    assert flags_for_version("1.47.3") == ModelFlags()
    old = flags_for_version("1.40.0")
    assert not old.unanimous_or_timeout_ballot and not old.nominate_sends_canvass
    assert flags_for_version("1.46.6").nominate_sends_canvass
    assert flags_for_version("1.50.4") != ModelFlags()  # the newer line's changes switched on
