"""Fidelity: the real Aeron 1.47.3 clean 3-member start-up, member by member.

The consensus messages each member received, and when, are written out below by hand from the
capture's agent logs (``nodeN/agent-events.log``: CANVASS_POSITION, REQUEST_VOTE, NEW_LEADERSHIP_TERM,
COMMIT_POSITION, APPEND_POSITION lines, times in seconds as the log prints them).  Each member is
re-run from its own inbound messages alone (node replay) and must make exactly the
ELECTION_STATE_CHANGEs the real member logged, with the same values.

Two things the agent log does not show are supplied: the Vote messages the leader received (this
aeron-agent build does not log VOTE; they must have arrived between the REQUEST_VOTE lines at the
followers and the leader's ROLE_CHANGE to LEADER), and the random nomination delays (the members'
Randoms were unseeded), given as the `nextDouble` that puts each nomination where the log has it.
The leader's log frame at position 96 is the NewLeadershipTermEvent the pcap shows.

A test reading the capture's files directly checks node-state.dat and the first TERM entry too.
"""

from __future__ import annotations

from pathlib import Path

from engine import Node, StateChange
from engine.harness.events import input_of, member_start_of
from formats.cluster_codecs import (
    AppendPosition,
    BooleanType,
    CanvassPosition,
    ClusterTimeUnit,
    CommitPosition,
    NewLeadershipTerm,
    NewLeadershipTermEvent,
    RequestVote,
    Vote,
)
from formats.events import Event, message_event
from formats.node_state import NodeStateFile
from formats.recording_log import RecordingLog

MEMBERS = (
    "0,127.0.0.1:20002,127.0.0.1:20003,127.0.0.1:20004,127.0.0.1:20005,127.0.0.1:20001|"
    "1,127.0.0.1:20102,127.0.0.1:20103,127.0.0.1:20104,127.0.0.1:20105,127.0.0.1:20101|"
    "2,127.0.0.1:20202,127.0.0.1:20203,127.0.0.1:20204,127.0.0.1:20205,127.0.0.1:20201"
)
LOG_SESSION_ID = -2037162306


class FixedDraw:
    """A RandomSource that returns one chosen nextDouble (the delay the capture implies)."""

    def __init__(self, value: float) -> None:
        self.value = value

    def next_double(self) -> float:
        return self.value


def ns(seconds: str) -> int:
    """An agent-log time ("1186.863414223") in ns."""
    whole, frac = seconds.split(".")
    return int(whole) * 1_000_000_000 + int(frac.ljust(9, "0"))


def canvass(sender: int) -> CanvassPosition:
    return CanvassPosition(
        log_leadership_term_id=-1, log_position=0, leadership_term_id=-1, follower_member_id=sender, protocol_version=1 << 16
    )


def new_leadership_term(log_term: int, recording_id: int, timestamp: int, startup: bool) -> NewLeadershipTerm:
    return NewLeadershipTerm(
        log_leadership_term_id=log_term,
        next_leadership_term_id=0,
        next_term_base_log_position=0,
        next_log_position=-1,
        leadership_term_id=0,
        term_base_log_position=0,
        log_position=0,
        leader_recording_id=recording_id,
        timestamp=timestamp,
        leader_member_id=1,
        log_session_id=LOG_SESSION_ID,
        app_version=1,
        is_startup=BooleanType.TRUE if startup else BooleanType.FALSE,
    )


REQUEST_VOTE = RequestVote(
    log_leadership_term_id=-1, log_position=0, candidate_term_id=0, candidate_member_id=1, protocol_version=1 << 16
)
NEW_TERM_EVENT = NewLeadershipTermEvent(
    leadership_term_id=0,
    log_position=96,
    timestamp=1795312188680,
    term_base_log_position=0,
    leader_member_id=1,
    log_session_id=LOG_SESSION_ID,
    time_unit=ClusterTimeUnit.MILLIS,
    app_version=1,
)


def follower_inputs(canvass_times: dict[int, list[str]], rest: list[tuple[str, object]]):
    timeline = [(t, sender, canvass(sender)) for sender, times in canvass_times.items() for t in times]
    timeline += [(t, 1, message) for t, message in rest]
    return sorted(timeline, key=lambda item: ns(item[0]))


INPUTS = {
    0: (
        "1186.204079673",  # NEW_ELECTION "node started"
        0.9,  # nominates too late: member 1's RequestVote comes first
        follower_inputs(
            {
                2: ["1186.567415766", "1186.671011909", "1186.702222773", "1186.798607704"],
                1: ["1186.698340670", "1186.698362122", "1186.797991174"],
            },
            [
                ("1186.841168707", REQUEST_VOTE),
                ("1186.863414223", new_leadership_term(-1, -1, 1795312188514, False)),
                ("1186.863521483", CommitPosition(leadership_term_id=-1, log_position=0, leader_member_id=1)),
                ("1186.863533351", new_leadership_term(-1, -1, 1795312188516, True)),
                ("1186.863542845", CommitPosition(leadership_term_id=-1, log_position=0, leader_member_id=1)),
                ("1186.923167360", CommitPosition(leadership_term_id=0, log_position=0, leader_member_id=1)),
                ("1186.923191977", new_leadership_term(0, 0, 1795312188576, True)),
                ("1187.048000000", "log"),
                ("1187.049996342", CommitPosition(leadership_term_id=0, log_position=96, leader_member_id=1)),
            ],
        ),
    ),
    2: (
        "1186.517911557",
        0.9,
        follower_inputs(
            {
                0: ["1186.565413408", "1186.565445626", "1186.632145063", "1186.707380103", "1186.799486957"],
                1: ["1186.697717634", "1186.697733328", "1186.796906716"],
            },
            [
                ("1186.842250071", REQUEST_VOTE),
                ("1186.866055304", new_leadership_term(-1, -1, 1795312188514, False)),
                ("1186.866161593", CommitPosition(leadership_term_id=-1, log_position=0, leader_member_id=1)),
                ("1186.866173040", new_leadership_term(-1, -1, 1795312188516, True)),
                ("1186.866181212", CommitPosition(leadership_term_id=-1, log_position=0, leader_member_id=1)),
                ("1186.924204398", CommitPosition(leadership_term_id=0, log_position=0, leader_member_id=1)),
                ("1186.924228794", new_leadership_term(0, 0, 1795312188576, True)),
                ("1187.048000000", "log"),
                ("1187.050590339", CommitPosition(leadership_term_id=0, log_position=96, leader_member_id=1)),
            ],
        ),
    ),
    1: (
        "1186.681137853",
        0.295,  # NOMINATE at 1186.691 → CANDIDATE_BALLOT at 1186.838
        sorted(
            [(t, 0, canvass(0)) for t in ["1186.691479866", "1186.691497572", "1186.691504172", "1186.707486883", "1186.799609930"]]
            + [(t, 2, canvass(2)) for t in ["1186.691515139", "1186.691520497", "1186.702919307", "1186.799625183"]]
            + [
                (
                    t,
                    voter,
                    Vote(
                        candidate_term_id=0,
                        log_leadership_term_id=-1,
                        log_position=0,
                        candidate_member_id=1,
                        follower_member_id=voter,
                        vote=BooleanType.TRUE,
                    ),
                )
                for t, voter in [("1186.842000000", 0), ("1186.843500000", 2)]
            ]
            + [
                (t, follower, AppendPosition(leadership_term_id=0, log_position=position, follower_member_id=follower, flags=0))
                for t, follower, position in [
                    ("1187.015077965", 2, 0),
                    ("1187.026031781", 0, 0),
                    ("1187.049196068", 0, 96),
                    ("1187.049207865", 2, 96),
                ]
            ],
            key=lambda item: ns(item[0]),
        ),
    ),
}

# ELECTION_STATE_CHANGE lines from the agent logs: from -> to, leaderId, candidateTermId, leadershipTermId,
# logPosition, logLeadershipTermId, appendPosition, catchupPosition.
FOLLOWER_CHANGES = """
INIT CANVASS -1 -1 -1 0 -1 0 -1
CANVASS NOMINATE -1 -1 -1 0 -1 0 -1
NOMINATE FOLLOWER_BALLOT -1 0 -1 0 -1 0 -1
FOLLOWER_BALLOT FOLLOWER_REPLAY 1 0 0 0 -1 0 -1
FOLLOWER_REPLAY FOLLOWER_LOG_INIT 1 0 0 0 -1 0 -1
FOLLOWER_LOG_INIT FOLLOWER_LOG_AWAIT 1 0 0 0 -1 0 -1
FOLLOWER_LOG_AWAIT FOLLOWER_READY 1 0 0 0 0 0 -1
FOLLOWER_READY CLOSED 1 0 0 0 0 0 -1
"""
LEADER_CHANGES = """
INIT CANVASS -1 -1 -1 0 -1 0 -1
CANVASS NOMINATE -1 -1 -1 0 -1 0 -1
NOMINATE CANDIDATE_BALLOT -1 0 -1 0 -1 0 -1
CANDIDATE_BALLOT LEADER_LOG_REPLICATION 1 0 0 0 -1 0 -1
LEADER_LOG_REPLICATION LEADER_REPLAY 1 0 0 0 -1 0 -1
LEADER_REPLAY LEADER_INIT 1 0 0 0 -1 0 -1
LEADER_INIT LEADER_READY 1 0 0 0 0 0 -1
LEADER_READY CLOSED 1 0 0 0 0 0 -1
"""


def expected(table: str) -> list[tuple]:
    rows = []
    for line in table.strip().splitlines():
        old, new, *numbers = line.split()
        rows.append((old, new, *map(int, numbers)))
    return rows


def replay_member(member_id: int) -> tuple[Node, list]:
    start_time, draw, inputs = INPUTS[member_id]
    start = member_start_of(
        Event(ts=ns(start_time), node=member_id, dir="local", peer=None, channel="local", type="MemberStart",
              fields={"clusterMembers": MEMBERS})
    )
    node = Node(member_id, start, random=FixedDraw(draw))
    for when, sender, message in inputs:
        if message == "log":
            event = message_event(NEW_TERM_EVENT, ts=ns(when), node=member_id, dir="in", peer=1, channel="log")
            event = Event(**{**{k: getattr(event, k) for k in ("ts", "node", "dir", "peer", "channel", "type", "fields")},
                             "extra": {"logPosition": 96}})
        else:
            event = message_event(message, ts=ns(when), node=member_id, dir="in", peer=sender, channel="consensus")
        node.step(input_of(event), event.ts)
    node.advance(ns("1187.060000000"))
    return node, node.take_outputs()


def state_changes(outputs: list) -> list[tuple]:
    return [
        (
            o.from_state,
            o.to_state,
            o.leader_id,
            o.candidate_term_id,
            o.leadership_term_id,
            o.log_position,
            o.log_leadership_term_id,
            o.append_position,
            o.catchup_position,
        )
        for o in outputs
        if isinstance(o, StateChange)
    ]


def test_member_1_wins_term_0_through_the_states_and_values_the_real_leader_logged():
    node, outputs = replay_member(1)
    assert state_changes(outputs) == expected(LEADER_CHANGES)
    roles = [(o.from_role, o.to_role) for o in outputs if type(o).__name__ == "RoleChange"]
    assert roles == [("FOLLOWER", "CANDIDATE"), ("CANDIDATE", "LEADER")]


def test_members_0_and_2_follow_through_the_states_and_values_the_real_followers_logged():
    for member_id in (0, 2):
        _, outputs = replay_member(member_id)
        assert state_changes(outputs) == expected(FOLLOWER_CHANGES), f"member {member_id}"


def test_the_leader_sends_what_the_followers_received_in_the_order_they_received_it():
    """The followers' agent logs show NLT, CommitPosition(term -1), NLT(startup), CommitPosition(term -1),
    then CommitPosition(term 0) and NLT(logTerm 0, recording 0): the stale term on CommitPosition during
    LEADER_LOG_REPLICATION/LEADER_REPLAY is Aeron 1.47.3's (fixed in 1.50.0)."""
    _, outputs = replay_member(1)
    to_member_0 = [o.message for o in outputs if type(o).__name__ == "Send" and o.peer == 0 and o.channel == "consensus"]
    sequence = [
        (type(m).__name__, m.leadership_term_id, getattr(m, "log_leadership_term_id", None), getattr(m, "is_startup", None))
        for m in to_member_0
        if type(m).__name__ in ("NewLeadershipTerm", "CommitPosition")
    ]
    assert sequence[:6] == [
        ("NewLeadershipTerm", 0, -1, BooleanType.FALSE),
        ("CommitPosition", -1, None, None),
        ("NewLeadershipTerm", 0, -1, BooleanType.TRUE),
        ("CommitPosition", -1, None, None),
        ("CommitPosition", 0, None, None),
        ("NewLeadershipTerm", 0, 0, BooleanType.TRUE),
    ]
    nlts = [m for m in to_member_0 if type(m).__name__ == "NewLeadershipTerm"]
    assert [m.leader_recording_id for m in nlts[:3]] == [-1, -1, 0]
    assert [(m.next_leadership_term_id, m.next_term_base_log_position, m.next_log_position) for m in nlts[:3]] == [(0, 0, -1)] * 3


def test_the_leaders_first_log_entry_is_a_new_leadership_term_event_ending_at_96():
    _, outputs = replay_member(1)
    appends = [o for o in outputs if type(o).__name__ == "LogAppend"]
    assert appends[0].position == 96
    assert type(appends[0].message).__name__ == "NewLeadershipTermEvent"
    assert (appends[0].message.leadership_term_id, appends[0].message.term_base_log_position) == (0, 0)
    commits = [o.message.log_position for o in outputs if type(o).__name__ == "Send" and type(o.message).__name__ == "CommitPosition"]
    assert commits[-1] == 96  # both followers acknowledged 96


def test_followers_acknowledge_the_first_log_entry_and_commit_it():
    for member_id in (0, 2):
        node, outputs = replay_member(member_id)
        appended = [o.message.log_position for o in outputs if type(o).__name__ == "Send" and type(o.message).__name__ == "AppendPosition"]
        assert appended == [0, 96], f"member {member_id}"
        state = node.view().to_json()
        assert (state["commitPosition"], state["agentLeadershipTermId"], state["role"]) == (96, 0, "FOLLOWER")


def test_every_member_writes_candidate_term_0_to_node_state_and_term_0_to_recording_log_as_the_real_ones(capture: Path):
    for member_id in (0, 1, 2):
        node, outputs = replay_member(member_id)
        real_state = NodeStateFile.decode((capture / f"node{member_id}" / "node-state.dat").read_bytes()).candidate_term
        writes = [o for o in outputs if type(o).__name__ == "NodeStateWrite"]
        assert [(w.candidate_term_id, w.log_position) for w in writes] == [(real_state.candidate_term_id, real_state.log_position)]
        real_log = RecordingLog.decode((capture / f"node{member_id}" / "recording.log").read_bytes())
        real_term = next(e for e in real_log.entries if e.type_name == "TERM")
        model_term = node.agent.recording_log.find_term_entry(0)
        assert (model_term.recording_id, model_term.leadership_term_id, model_term.term_base_log_position) == (
            real_term.recording_id,
            real_term.leadership_term_id,
            real_term.term_base_log_position,
        )
