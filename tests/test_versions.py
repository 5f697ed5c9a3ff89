"""Model versions (issue 7): releases as flag sets, one scenario per flag, user models, schema v15.

Every behaviour flag of `engine.model.flags` gets a scenario here in which the model with the flag on and
the model with it off (everything else as in 1.47.3) behave differently, in the way aeron-election.md
§8 says the change did.  Scenarios either drive one member by hand (`One`, messages at chosen
milliseconds, nomination delay fixed) or run a small cluster through cluster replay (`cluster`).
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from cli.app import run
from engine import ModelFlags, Node
from engine.cluster_replay import cluster_replay
from engine.harness.events import input_of, member_start_of
from engine.model.flags import FLAG_BY_NAME, FLAGS
from engine.versions import (
    BASELINE,
    VERSIONS,
    Model,
    confidence,
    flag_changes,
    flags_for_version,
    model_for,
    model_from_object,
    parse_version,
    user_models,
    versions_document,
)
from formats import cluster_codecs as codecs
from formats.cluster_codecs import (
    AppendPosition,
    BooleanType,
    CanvassPosition,
    CommitPosition,
    NewLeadershipTerm,
    RequestVote,
    Vote,
)
from formats.cluster_codecs_ext import NewLeadershipTerm as NewLeadershipTermV15
from formats.cluster_codecs_ext import decode_cluster as decode_v12
from formats.cluster_codecs_ext import decode_message, message_of, with_commit_position
from formats.events import Event, message_event
from formats.sbe import INT64_NULL, encode

ROOT = Path(__file__).resolve().parents[1]
MS = 1_000_000
PROTOCOL = 1 << 16
BASE = ModelFlags()


def members(n: int) -> str:
    return "|".join(f"{i},h{i}:2,h{i}:3,h{i}:4,h{i}:5,h{i}:1" for i in range(n))


def flipped(name: str) -> ModelFlags:
    """The 1.47.3 flags with one flag the other way round."""
    return dataclasses.replace(BASE, **{name: not getattr(BASE, name)})


def both_sides(name: str) -> tuple[ModelFlags, ModelFlags]:
    """(flag off, flag on), everything else as in 1.47.3."""
    return dataclasses.replace(BASE, **{name: False}), dataclasses.replace(BASE, **{name: True})


class FixedDraw:
    def __init__(self, value: float) -> None:
        self.value = value
        self.draws: list[float] = []

    def next_double(self) -> float:
        self.draws.append(self.value)
        return self.value


class One:
    """Member ``me`` of an ``n``-member cluster started at t=0, driven by hand (times in ms)."""

    def __init__(self, flags: ModelFlags, me: int = 0, n: int = 3, draw: float = 0.0, **fields: Any) -> None:
        start = Event(ts=0, node=me, dir="local", peer=None, channel="local", type="MemberStart",
                      fields={"clusterMembers": members(n), **fields})
        self.me = me
        self.node = Node(me, member_start_of(start), random=FixedDraw(draw), flags=flags)
        self.records = [o.to_json() for o in self.node.take_outputs()]

    def deliver(self, at_ms: float, sender: int, message: Any) -> list[dict[str, Any]]:
        event = message_event(message, ts=int(at_ms * MS), node=self.me, dir="in", peer=sender, channel="consensus")
        return self.step(event)

    def local(self, at_ms: float, kind: str, **fields: Any) -> list[dict[str, Any]]:
        return self.step(Event(ts=int(at_ms * MS), node=self.me, dir="local", peer=None, channel="local", type=kind,
                               fields=fields))

    def step(self, event: Event) -> list[dict[str, Any]]:
        self.node.step(input_of(event), event.ts)
        return self.take()

    def advance(self, to_ms: float) -> list[dict[str, Any]]:
        self.node.advance(int(to_ms * MS))
        return self.take()

    def take(self) -> list[dict[str, Any]]:
        fresh = [o.to_json() for o in self.node.take_outputs()]
        self.records += fresh
        return fresh

    @property
    def state(self) -> dict[str, Any]:
        return self.node.view().to_json()


def states(records: list[dict[str, Any]], node: int | None = None) -> list[tuple[str, str]]:
    return [(r["from"], r["to"]) for r in records if r["kind"] == "state" and (node is None or r["node"] == node)]


def sends(records: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [r for r in records if r["kind"] == "send" and r["type"] == kind]


def canvass(sender: int, log_term: int = -1, position: int = 0, term: int = -1) -> CanvassPosition:
    return CanvassPosition(log_leadership_term_id=log_term, log_position=position, leadership_term_id=term,
                           follower_member_id=sender, protocol_version=PROTOCOL)


def new_leadership_term(leader: int, term: int, position: int, log_term: int = -1, session: int = 1001,
                        next_base: int = -1, **extra: Any) -> NewLeadershipTerm:
    fields = dict(log_leadership_term_id=log_term, next_leadership_term_id=term if next_base != -1 else -1,
                  next_term_base_log_position=next_base, next_log_position=-1, leadership_term_id=term,
                  term_base_log_position=position, log_position=position, leader_recording_id=0, timestamp=0,
                  leader_member_id=leader, log_session_id=session, app_version=1, is_startup=BooleanType.FALSE)
    fields.update(extra)
    return NewLeadershipTerm(**fields)


def following(flags: ModelFlags) -> One:
    """Member 0 following leader 1 in term 0 after a clean start (recording its log, election CLOSED)."""
    one = One(flags)
    one.deliver(5, 1, new_leadership_term(1, 0, 0))
    assert one.state["electionState"] == "CLOSED" and one.state["leaderMemberId"] == 1
    return one


def elected(flags: ModelFlags, *, n: int = 3, **fields: Any) -> One:
    """Member 0 canvassed by 1 and 2 with equal logs, nominated at once, voted for by both."""
    one = One(flags, n=n, **fields)
    for peer in range(1, n):
        one.deliver(1, peer, canvass(peer))
    one.advance(2)
    for peer in range(1, n):
        one.deliver(3, peer, Vote(candidate_term_id=0, log_leadership_term_id=-1, log_position=0, candidate_member_id=0,
                                  follower_member_id=peer, vote=BooleanType.TRUE))
    return one


# -- cluster runs through cluster replay -----------------------------------------------------------------------


def start_event(node: int, ts: int = 0, n: int = 3, **fields: Any) -> Event:
    return Event(ts=ts, node=node, dir="local", peer=None, channel="local", type="MemberStart",
                 fields={"clusterMembers": members(n), "seed": 100 + node, **fields})


def local_event(node: int, ts: int, kind: str, **fields: Any) -> Event:
    return Event(ts=ts, node=node, dir="local", peer=None, channel="local", type=kind, fields=fields)


def cluster(flags: ModelFlags, events: list[Event]) -> list[dict[str, Any]]:
    return list(cluster_replay(events, model=Model(name="test", flags=flags)))


def startup(n: int = 3, **fields: Any) -> list[Event]:
    return [start_event(i, n=n, **fields) for i in range(n)]


def first_leader(records: list[dict[str, Any]]) -> int:
    role = {}
    for r in records:
        if r["kind"] == "role":
            role[r["node"]] = r["to"]
        if r["kind"] == "state" and r["to"] == "CLOSED" and role.get(r["node"]) == "LEADER":
            return r["node"]
    raise AssertionError("no leader")


def graceful_close(flags: ModelFlags, *, end_ms: int = 16_000) -> tuple[int, list[dict[str, Any]]]:
    """A 3-member cluster whose leader stops cleanly at 3 s; returns (old leader, records)."""
    events = startup()
    leader = first_leader(cluster(BASE, events + [local_event(i, 2_000 * MS, "End") for i in range(3)]))
    events = events + [local_event(leader, 3_000 * MS, "MemberStop")] + [local_event(i, end_ms * MS, "End") for i in range(3)]
    return leader, cluster(flags, events)


def new_leader_at(records: list[dict[str, Any]], after_ns: int) -> int:
    role = {}
    for r in records:
        if r["kind"] == "role":
            role[r["node"]] = r["to"]
        if r["kind"] == "state" and r["to"] == "CLOSED" and role.get(r["node"]) == "LEADER" and r["ts"] > after_ns:
            return r["ts"]
    raise AssertionError("no new leader")


# == releases and flags ==============================================================================================


def test_the_baseline_release_has_exactly_the_default_flags():
    assert BASELINE == "1.47.3"
    assert flags_for_version("1.47.3") == ModelFlags()
    assert model_for("1.47.3").flags == ModelFlags()


def test_every_flag_switches_on_at_its_first_release_and_stays_on():
    for info in FLAGS:
        assert info.since in VERSIONS, info.name
        seen = [getattr(flags_for_version(v), info.name) for v in VERSIONS]
        first = seen.index(True)
        # A backport to an older line's patch release comes first in release order.
        assert VERSIONS[first] == min((info.since, *info.backports), key=VERSIONS.index), info.name
        assert not any(seen[:first]), info.name
        since = VERSIONS.index(info.since)
        assert all(seen[since:]), info.name
        # Between a backport and the release that made the change, only the backport's own line has it
        # (1.41.5 got two 1.43.0 changes that 1.42.x never did).
        for version, has in zip(VERSIONS[first:since], seen[first:since], strict=True):
            lines = {parse_version(b)[:2] for b in info.backports}
            assert has == (parse_version(version)[:2] in lines), (info.name, version)


def test_the_real_1_41_7_capture_put_two_1_43_changes_in_1_41_5_and_not_in_1_42():
    for name in ("leader_role_from_log_replication", "worse_log_vote_keeps_state"):
        assert getattr(flags_for_version("1.41.7"), name) and getattr(flags_for_version("1.41.5"), name)
        assert not getattr(flags_for_version("1.41.4"), name) and not getattr(flags_for_version("1.42.1"), name)
        assert getattr(flags_for_version("1.43.0"), name)


def test_each_version_says_what_it_is_judged_by():
    assert confidence("1.47.3")["level"] == "checked" and confidence("1.50.4")["level"] == "checked"
    assert confidence("1.50.4")["captures"][0]["capture"].endswith("v1.50.4_a_clean_start")
    assert confidence("1.41.7")["level"] == "checked"
    assert confidence("1.41.7")["captures"][0]["capture"].endswith("v1.41.7_a_clean_start")
    assert confidence("1.44.0") == {"version": "1.44.0", "level": "notes", "captures": []}
    levels = {r["version"]: r["confidence"]["level"] for r in versions_document()["versions"]}
    assert levels["1.50.4"] == "checked" and levels["1.45.0"] == "notes"


def test_backported_changes_are_in_the_patch_releases_of_older_lines_only():
    assert flags_for_version("1.46.6").nominate_sends_canvass
    assert not flags_for_version("1.46.5").nominate_sends_canvass
    assert not flags_for_version("1.45.9").nominate_sends_canvass
    assert flags_for_version("1.50.1").single_node_term_bump_in_init
    assert not flags_for_version("1.50.0").single_node_term_bump_in_init


def test_releases_outside_the_modelled_range_or_not_release_numbers_are_refused():
    for bad in ("1.39.2", "1.52.0", "2.0.0", "latest", "1.47.x"):
        with pytest.raises(ValueError):
            flags_for_version(bad)
    with pytest.raises(ValueError, match="unknown model 'nonsense'"):
        model_for("nonsense")


def test_the_catalogue_documents_every_flag_in_field_order():
    names = [f.name for f in dataclasses.fields(ModelFlags)]
    assert names == [info.name for info in FLAGS]
    for info in FLAGS:
        assert info.before and info.after and info.commits and info.summary


def test_flag_changes_between_two_releases_name_the_flags_and_what_they_do():
    changes = flag_changes(flags_for_version("1.41.0"), flags_for_version("1.42.0"))
    assert [c["flag"] for c in changes] == ["graceful_leader_close_detection"]
    assert changes[0]["from"] is False and changes[0]["to"] is True and changes[0]["since"] == "1.42.0"
    assert flag_changes(flags_for_version("1.45.0"), flags_for_version("1.46.0")) == []


# == one scenario per flag ===========================================================================================


def test_unanimous_or_timeout_ballot_a_no_vote_wins_at_once_before_1_41_and_loses_since():
    def ballot(flags: ModelFlags) -> list[tuple[str, str]]:
        one = One(flags)
        one.deliver(1, 1, canvass(1))
        one.deliver(1, 2, canvass(2))
        one.advance(2)
        yes = Vote(candidate_term_id=0, log_leadership_term_id=-1, log_position=0, candidate_member_id=0,
                   follower_member_id=1, vote=BooleanType.TRUE)
        no = dataclasses.replace(yes, follower_member_id=2, vote=BooleanType.FALSE)
        one.deliver(3, 1, yes)
        one.deliver(3, 2, no)
        one.advance(1_500)
        return states(one.records)

    off, on = both_sides("unanimous_or_timeout_ballot")
    assert ("CANDIDATE_BALLOT", "LEADER_LOG_REPLICATION") in ballot(off)  # 1.40: full count, NO allowed
    assert ("CANDIDATE_BALLOT", "CANVASS") in ballot(on)  # 1.41: a NO vote loses at the timeout
    assert ("CANDIDATE_BALLOT", "LEADER_LOG_REPLICATION") not in ballot(on)


def test_canvass_deadline_from_leader_update_waits_ten_seconds_after_the_leader_not_one():
    # With the close not detected as graceful (1.41's situation), only the deadline can end CANVASS.
    off, on = (dataclasses.replace(f, graceful_leader_close_detection=False)
               for f in both_sides("canvass_deadline_from_leader_update"))
    _, slow = graceful_close(on)
    _, quick = graceful_close(off)
    stop = 3_000 * MS
    assert new_leader_at(quick, stop) - stop < 3_000 * MS  # 1 s after CANVASS, a nomination, a 1 s ballot
    assert new_leader_at(slow, stop) - stop > 9_000 * MS  # 10 s after the last leader message


def test_graceful_closed_leader_is_skipped_by_unanimity_so_the_election_is_quick():
    off, on = both_sides("graceful_closed_leader")
    stop = 3_000 * MS
    _, skipped = graceful_close(on)
    _, counted = graceful_close(off)
    assert new_leader_at(skipped, stop) - stop < 1_000 * MS
    assert new_leader_at(counted, stop) - stop > 9_000 * MS


def test_node_state_file_holds_the_candidate_term_since_1_41_and_the_mark_file_before():
    off, on = both_sides("node_state_file")
    records_on = cluster(on, startup() + [local_event(i, 1_000 * MS, "End") for i in range(3)])
    records_off = cluster(off, startup() + [local_event(i, 1_000 * MS, "End") for i in range(3)])
    assert {r["kind"] for r in records_on} >= {"nodeState"} and "markFile" not in {r["kind"] for r in records_on}
    writes_on = [(r["node"], r["candidateTermId"]) for r in records_on if r["kind"] == "nodeState"]
    writes_off = [(r["node"], r["candidateTermId"]) for r in records_off if r["kind"] == "markFile"]
    assert writes_on == writes_off and writes_on
    assert "nodeState" not in {r["kind"] for r in records_off}


def test_leader_update_ignores_stale_terms_so_old_commit_positions_do_not_hold_off_the_canvass():
    def nomination_after_timeout(flags: ModelFlags) -> int:
        one = following(flags)
        for at in range(1_000, 9_001, 1_000):  # a stale leader of term -1 keeps talking
            one.deliver(at, 2, CommitPosition(leadership_term_id=-1, log_position=0, leader_member_id=2))
        one.advance(10_100)  # leader heartbeat timeout: a new election, CANVASS
        one.deliver(10_200, 1, canvass(1, log_term=0))
        one.deliver(10_200, 2, canvass(2, log_term=0, position=4_096))  # a better log: no unanimity
        one.advance(30_000)
        return next(r["ts"] for r in one.records if r["kind"] == "state" and r["to"] == "NOMINATE" and r["ts"] > 10 * 10**9)

    off, on = both_sides("leader_update_ignores_stale_terms")
    assert nomination_after_timeout(on) < 11_000 * MS  # the deadline (10 s after the real leader) has passed
    assert nomination_after_timeout(off) >= 19_000 * MS  # the stale messages moved it to 9 s + 10 s


def test_graceful_leader_close_detection_starts_a_quick_election_on_end_of_stream():
    off, on = both_sides("graceful_leader_close_detection")
    stop = 3_000 * MS
    _, detected = graceful_close(on)
    _, missed = graceful_close(off)
    reasons_on = {r["reason"] for r in detected if r["kind"] == "election" and r["ts"] > stop}
    reasons_off = {r["reason"] for r in missed if r["kind"] == "election" and r["ts"] > stop}
    assert reasons_on == {"log disconnected from leader: eos=true"}
    assert reasons_off == {"log recording ended unexpectedly"}
    assert new_leader_at(detected, stop) - stop < 1_000 * MS
    assert new_leader_at(missed, stop) - stop > 9_000 * MS


def test_worse_log_vote_keeps_state_since_1_43_and_went_back_to_init_before():
    def answer(flags: ModelFlags) -> list[dict[str, Any]]:
        one = One(flags, recordingLog=[{"recordingId": 0, "leadershipTermId": 0, "termBaseLogPosition": 0,
                                        "logPosition": -1, "timestamp": 0, "serviceId": -1, "type": "TERM"}],
                  appendPosition=4_096)
        return one.deliver(5, 1, RequestVote(log_leadership_term_id=-1, log_position=0, candidate_term_id=5,
                                             candidate_member_id=1, protocol_version=PROTOCOL))

    off, on = both_sides("worse_log_vote_keeps_state")
    kept, restarted = answer(on), answer(off)
    assert [s["fields"]["vote"] for s in sends(kept, "Vote")] == ["FALSE"]
    assert [s["fields"]["vote"] for s in sends(restarted, "Vote")] == ["FALSE"]
    assert states(kept) == []
    assert states(restarted) == [("CANVASS", "INIT"), ("INIT", "CANVASS")]  # a new round of the election


def test_leader_role_from_log_replication_since_1_43_and_from_leader_init_before():
    def role_change_state(flags: ModelFlags) -> str | None:
        one = elected(flags)
        last_state = None
        for r in one.records:
            if r["kind"] == "state":
                last_state = r["to"]
            if r["kind"] == "role" and r["to"] == "LEADER":
                return last_state
        return None

    off, on = both_sides("leader_role_from_log_replication")
    assert role_change_state(on) == "CANDIDATE_BALLOT"  # changed on entering LEADER_LOG_REPLICATION
    assert role_change_state(off) == "LEADER_REPLAY"  # changed on entering LEADER_INIT


def test_the_state_change_is_logged_after_the_log_publication_was_added_since_1_45():
    # j_short_timeouts_leader_kill: member 1's ROLE_CHANGE CANDIDATE -> LEADER at 19:27:45.044, its
    # CANDIDATE_BALLOT -> LEADER_LOG_REPLICATION at .874, after the driver had added the log publication.
    def stamps(flags: ModelFlags) -> tuple[int, int]:
        one = elected(flags, logPublicationWaitsNs=[500 * MS])
        role = next(r["ts"] for r in one.records if r["kind"] == "role" and r["to"] == "LEADER")
        state = next(r["ts"] for r in one.records if r["kind"] == "state" and r["to"] == "LEADER_LOG_REPLICATION")
        return role, state

    off, on = both_sides("state_logged_after_entry")
    assert stamps(on) == (3 * MS, 503 * MS)
    assert stamps(off) == (3 * MS, 3 * MS)


def test_new_election_event_records_each_election_since_1_44():
    off, on = both_sides("new_election_event")
    events = startup() + [local_event(i, 1_000 * MS, "End") for i in range(3)]
    assert [r["reason"] for r in cluster(on, events) if r["kind"] == "election"] == ["node started"] * 3
    assert [r for r in cluster(off, events) if r["kind"] == "election"] == []


def test_nominate_sends_canvass_during_the_nomination_delay_since_1_47():
    def canvasses_in_nominate(flags: ModelFlags) -> int:
        one = One(flags, draw=0.9)  # a 450 ms nomination delay
        one.deliver(1, 1, canvass(1))
        one.deliver(1, 2, canvass(2))
        one.take()
        return len(sends(one.advance(400), "CanvassPosition"))

    off, on = both_sides("nominate_sends_canvass")
    assert canvasses_in_nominate(on) >= 6  # every 100 ms to both peers
    assert canvasses_in_nominate(off) == 0


def test_election_app_version_is_carried_by_the_elections_new_leadership_term_since_1_47():
    off, on = both_sides("election_app_version")
    assert {s["fields"]["appVersion"] for s in sends(elected(on).records, "NewLeadershipTerm")} == {1}
    assert {s["fields"]["appVersion"] for s in sends(elected(off).records, "NewLeadershipTerm")} == {0}


def test_recording_stopped_eos_reason_names_the_end_of_stream_since_1_47():
    def reason(flags: ModelFlags) -> str:
        one = following(flags)
        recording = one.state["logRecordingId"]
        fresh = one.local(100, "RecordingSignal", correlationId=1, recordingId=recording, position=0, signal="STOP")
        return next(r["reason"] for r in fresh if r["kind"] == "election")

    off, on = both_sides("recording_stopped_eos_reason")
    assert reason(on) == "log recording stopped: eos=false"
    assert reason(off) == "log recording stopped"


def test_replay_reasons_say_whether_the_follower_replayed_since_1_49():
    off, on = both_sides("replay_reasons")
    leave_on = [r for r in following(on).records if r["kind"] == "state" and r["from"] == "FOLLOWER_REPLAY"]
    leave_off = [r for r in following(off).records if r["kind"] == "state" and r["from"] == "FOLLOWER_REPLAY"]
    assert [r["reason"] for r in leave_on] == ["skip log replay"]
    assert [r["reason"] for r in leave_off] == [""]


def test_follower_replay_bounded_by_commit_stops_at_the_leaders_commit_position_since_1_50():
    def replayed_to(flags: ModelFlags) -> int:
        log = [{"recordingId": 0, "leadershipTermId": 0, "termBaseLogPosition": 0, "logPosition": -1, "timestamp": 0,
                "serviceId": -1, "type": "TERM"}]
        one = One(flags, recordingLog=log, appendPosition=4_096)
        message = with_commit_position(new_leadership_term(1, 0, 0, log_term=0, log_position=8_192), 1_024)
        one.deliver(5, 1, message)
        return next(r["logPosition"] for r in one.records if r["kind"] == "state" and r["from"] == "FOLLOWER_REPLAY")

    off, on = both_sides("follower_replay_bounded_by_commit")
    assert replayed_to(off) == 4_096  # the whole local log, past the cluster's commit (1.47.3)
    assert replayed_to(on) == 1_024  # only what the leader says is committed


def test_follower_replay_bounded_by_commit_makes_the_leader_send_schema_15_new_leadership_terms():
    off, on = both_sides("follower_replay_bounded_by_commit")
    assert all("commitPosition" in s["fields"] for s in sends(elected(on).records, "NewLeadershipTerm"))
    assert all("commitPosition" not in s["fields"] for s in sends(elected(off).records, "NewLeadershipTerm"))


def test_commit_position_election_term_uses_the_new_term_in_the_leader_log_replication_since_1_50():
    off, on = both_sides("commit_position_election_term")
    first_on = sends(elected(on).records, "CommitPosition")[0]["fields"]["leadershipTermId"]
    first_off = sends(elected(off).records, "CommitPosition")[0]["fields"]["leadershipTermId"]
    assert (first_off, first_on) == (-1, 0)


def test_append_position_reset_on_truncation_moves_the_elections_append_position_at_once_since_1_50():
    def truncated(flags: ModelFlags) -> dict[str, Any]:
        log = [{"recordingId": 0, "leadershipTermId": 0, "termBaseLogPosition": 0, "logPosition": -1, "timestamp": 0,
                "serviceId": -1, "type": "TERM"}]
        one = One(flags, recordingLog=log, appendPosition=4_096)
        one.deliver(5, 1, new_leadership_term(1, 1, 1_024, log_term=0, next_base=1_024))
        return next(r for r in one.records if r["kind"] == "state" and r["to"] == "INIT")

    off, on = both_sides("append_position_reset_on_truncation")
    assert truncated(off)["appendPosition"] == 4_096
    assert truncated(on)["appendPosition"] == 1_024
    assert "oldPosition=4096" in truncated(on)["reason"] and "oldPosition=1024" in truncated(off)["reason"]


def test_election_commit_bounded_by_append_never_announces_more_than_the_leader_has_since_1_50():
    def first_commit(flags: ModelFlags) -> int:
        log = [{"recordingId": 0, "leadershipTermId": 0, "termBaseLogPosition": 0, "logPosition": -1, "timestamp": 0,
                "serviceId": -1, "type": "TERM"}]
        one = One(flags, recordingLog=log, appendPosition=1_024)
        for peer in (1, 2):  # longer logs of an older term: member 0's log is still better
            one.deliver(1, peer, canvass(peer, log_term=-1, position=8_192))
        one.advance(2)
        for peer in (1, 2):
            one.deliver(3, peer, Vote(candidate_term_id=1, log_leadership_term_id=-1, log_position=8_192,
                                      candidate_member_id=0, follower_member_id=peer, vote=BooleanType.TRUE))
        return sends(one.records, "CommitPosition")[0]["fields"]["logPosition"]

    off, on = both_sides("election_commit_bounded_by_append")
    assert first_commit(off) == 8_192  # the raw quorum position
    assert first_commit(on) == 1_024


def test_active_member_quorum_lets_leader_ready_finish_without_a_crashed_voter_since_1_50():
    def closed_at(flags: ModelFlags) -> int:
        one = elected(flags)
        one.deliver(4, 1, AppendPosition(leadership_term_id=0, log_position=0, follower_member_id=1, flags=0))
        one.advance(12_000)  # member 2 voted, then died: it never reports its position
        return next(r["ts"] for r in one.records if r["kind"] == "state" and r["to"] == "CLOSED")

    off, on = both_sides("active_member_quorum")
    assert closed_at(on) < 10 * MS
    assert closed_at(off) >= 10_000 * MS  # hasVotersAtPosition waits for the dead voter; the 10 s fallback


def test_consistent_follower_positions_stamp_a_canvass_as_member_activity_since_1_50():
    off, on = both_sides("consistent_follower_positions")
    stamped = One(on)
    stamped.deliver(7, 1, canvass(1))
    unstamped = One(off)
    unstamped.deliver(7, 1, canvass(1))
    assert stamped.state["members"][1]["timeOfLastAppendPositionNs"] == 7 * MS
    assert unstamped.state["members"][1]["timeOfLastAppendPositionNs"] == -1


def test_single_node_term_bump_in_init_moves_a_single_node_to_a_new_term_on_re_election_since_1_51():
    def term_after_error(flags: ModelFlags) -> int:
        one = One(flags, n=1)
        assert one.state["leadershipTermId"] == 0
        agent = one.node.agent
        agent.set_time(5 * MS, 5 * MS)
        agent.enter_election(False, "test election")  # a new Election: its constructor bumps, in every version
        agent.election.handle_error(5 * MS, ValueError("injected"))  # back to INIT in the same Election
        one.advance(6)
        return one.state["leadershipTermId"]

    off, on = both_sides("single_node_term_bump_in_init")
    before = term_after_error(off)
    assert term_after_error(on) == before + 1  # 1.47.3 reuses the term on the INIT re-entry (#1932)


def test_every_flag_has_a_scenario_test_in_this_file():
    text = Path(__file__).read_text(encoding="utf-8")
    missing = [info.name for info in FLAGS if f"both_sides(\"{info.name}\")" not in text]
    assert missing == []


# == NewLeadershipTerm schema v15 ======================================================================================


def _nlt_v15() -> NewLeadershipTermV15:
    return with_commit_position(new_leadership_term(2, 3, 960, log_term=2), 512)


def test_a_schema_15_new_leadership_term_round_trips_with_its_commit_position():
    message = _nlt_v15()
    data = encode(message)
    assert len(data) == 8 + 96
    assert data[:8] == bytes.fromhex("6000" "3500" "6f00" "0f00")  # blockLength 96, template 53, schema 111, v15
    decoded = decode_message(data).message
    assert decoded == message and decoded.commit_position == 512


def test_a_schema_12_reader_skips_the_commit_position_and_reads_every_other_field():
    old = decode_v12(encode(_nlt_v15())).message
    assert type(old) is codecs.NewLeadershipTerm
    assert old.log_position == 960 and old.leader_member_id == 2 and old.is_startup is BooleanType.FALSE


def test_a_schema_12_new_leadership_term_stays_the_generated_class_with_no_commit_position():
    data = encode(new_leadership_term(2, 3, 960))
    assert type(decode_message(data).message) is codecs.NewLeadershipTerm
    padded = data[:6] + (15).to_bytes(2, "little") + data[8:]  # v15 header, v12 block: the field is absent
    assert decode_message(padded).message.commit_position == INT64_NULL


def test_an_event_carrying_commit_position_in_its_fields_becomes_the_schema_15_message():
    message = _nlt_v15()
    event = Event(ts=0, node=0, dir="in", peer=2, channel="consensus", type="NewLeadershipTerm",
                  fields=message.to_fields())
    assert message_of(event) == message
    plain = Event(ts=0, node=0, dir="in", peer=2, channel="consensus", type="NewLeadershipTerm",
                  fields=new_leadership_term(2, 3, 960).to_fields())
    assert type(message_of(plain)) is codecs.NewLeadershipTerm


# == user models =====================================================================================================


def _fake_distribution(root: Path, name: str, entry_points: dict[str, str], module: str) -> None:
    package = root / f"{name.replace('-', '_')}_plugin.py"
    package.write_text(module, encoding="utf-8")
    dist = root / f"{name.replace('-', '_')}-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n", encoding="utf-8")
    lines = "\n".join(f"{k} = {v}" for k, v in entry_points.items())
    (dist / "entry_points.txt").write_text(f"[recount.models]\n{lines}\n", encoding="utf-8")


@pytest.fixture
def plugin_path(tmp_path, monkeypatch):
    """A directory on sys.path holding fake installed distributions; user models reloaded around the test."""
    monkeypatch.syspath_prepend(str(tmp_path))
    user_models(refresh=True)
    yield tmp_path
    sys.modules.pop("team_fix_plugin", None)
    sys.modules.pop("broken_plugin", None)
    monkeypatch.undo()
    user_models(refresh=True)


MODULE = textwrap.dedent(
    """
    from engine.model.flags import ModelFlags
    from engine.model.node import Node

    made = []

    class CountingNode(Node):
        def __init__(self, *args, **kwargs):
            made.append(args[0])
            super().__init__(*args, **kwargs)

    quick_canvass = {"base": "1.47.3", "flags": {"canvass_deadline_from_leader_update": False},
                     "description": "candidate fix: 1 s canvass deadline"}
    own_nodes = CountingNode

    def old_ballot():
        return ModelFlags(unanimous_or_timeout_ballot=False)
    """
)


def test_user_models_from_the_entry_point_group_can_be_replayed_like_releases(plugin_path):
    _fake_distribution(plugin_path, "team-fix", {
        "quick-canvass": "team_fix_plugin:quick_canvass",
        "own-nodes": "team_fix_plugin:own_nodes",
        "old-ballot": "team_fix_plugin:old_ballot",
    }, MODULE)
    models = user_models(refresh=True)
    assert sorted(models) == ["old-ballot", "own-nodes", "quick-canvass"]
    assert models["quick-canvass"].flags == dataclasses.replace(BASE, canvass_deadline_from_leader_update=False)
    assert models["quick-canvass"].origin == "entry point quick-canvass (team-fix)"
    assert models["old-ballot"].flags.unanimous_or_timeout_ballot is False
    events = startup() + [local_event(i, 1_000 * MS, "End") for i in range(3)]
    records = list(cluster_replay(events, model="own-nodes"))
    assert records[-1]["model"] == "own-nodes"
    plugin = sys.modules["team_fix_plugin"]
    assert plugin.made == [0, 1, 2]  # the model's own Node class ran the members


def test_recount_versions_lists_user_models_and_a_broken_one_is_one_line_exit_2(plugin_path, capsys):
    _fake_distribution(plugin_path, "team-fix", {"quick-canvass": "team_fix_plugin:quick_canvass"}, MODULE)
    user_models(refresh=True)
    assert run(["versions", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert [m["name"] for m in document["userModels"]] == ["quick-canvass"]
    _fake_distribution(plugin_path, "broken", {"nope": "broken_plugin:missing"}, "x = 1\n")
    with pytest.raises(ValueError):
        user_models(refresh=True)  # read again: the new distribution's entry point cannot load
    assert run(["versions"]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("recount: entry point nope (broken) = broken_plugin:missing: cannot load it")
    assert "\n" not in error


def test_a_user_model_of_an_unknown_shape_or_flag_is_refused_with_its_name():
    with pytest.raises(ValueError, match="unknown flag 'made_up'"):
        model_from_object("x", {"flags": {"made_up": True}})
    with pytest.raises(ValueError, match="model 'x'"):
        model_from_object("x", 42)
    assert model_from_object("x", ModelFlags(new_election_event=False)).flags.new_election_event is False


# == recount versions ================================================================================================


def test_recount_versions_json_lists_every_release_with_its_flags_and_what_changed(capsys):
    assert run(["versions", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert [v["version"] for v in document["versions"]] == list(VERSIONS)
    by_version = {v["version"]: v for v in document["versions"]}
    assert by_version["1.44.0"]["changes"] == ["new_election_event"]
    # 1.42.0 gains one change and, after 1.41.7's backports, lacks two that 1.43.0 brings back.
    assert by_version["1.42.0"]["changes"] == [
        "graceful_leader_close_detection", "worse_log_vote_keeps_state", "leader_role_from_log_replication"]
    assert not by_version["1.42.0"]["flags"]["worse_log_vote_keeps_state"]
    assert by_version["1.50.4"]["confidence"]["level"] == "checked"
    assert by_version["1.47.3"]["baseline"] is True
    assert {f["flag"] for f in document["flags"]} == set(FLAG_BY_NAME)
    assert all(item["why"] for item in document["leftOut"])


def test_recount_versions_runs_as_a_subprocess_and_prints_a_table():
    done = subprocess.run([sys.executable, "-m", "cli", "versions"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "1.50.0" in done.stdout and "follower_replay_bounded_by_commit" in done.stdout
