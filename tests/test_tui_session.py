"""The TUI's session: member state at any event by re-execution from checkpoints, the index, finding.

Run over the bundled leader-failover sample (leader 0 killed at 4 s, member 1 elected leader of
term 1 at 15.064 s, samples/README.md), and over copies of it changed in one event.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from cli.tui import breakpoints
from cli.tui.session import (
    EventFilter,
    ListLayout,
    ReplaySource,
    Session,
    SessionError,
    Stepper,
    _facts,
    align,
    difference_starts,
    story,
)
from engine.replay import ReplaySession, replay, scan
from formats import replay_file
from formats.cluster_codecs import BooleanType
from formats.errors import DecodeError
from formats.events import dump_jsonl
from formats.sbe import encode

ROOT = Path(__file__).resolve().parents[1]
FAILOVER = ROOT / "samples" / "leader-failover" / "incident.arrow"


def _require(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"sample {path} not found (recount simulate writes the samples)")
    return path


@pytest.fixture(scope="module")
def failover_events():
    events, metadata = replay_file.read_events(pa.memory_map(str(_require(FAILOVER))), name=str(FAILOVER))
    return events, metadata


@pytest.fixture(scope="module")
def failover():
    session = Session.open(_require(FAILOVER), block_size=64)
    session.build_index()
    return session


def write_replay(path: Path, events, cluster_members) -> Path:
    table = replay_file.events_to_table(events, source=path.name, cluster_members=cluster_members)
    with pa.OSFile(str(path), "wb") as sink:
        replay_file.write_table(table, sink)
    return path


def find(events, *, node, dir, type, peer=None, term=None):
    for i, event in enumerate(events):
        if (event.node, event.dir, event.type) == (node, dir, type) and (peer is None or event.peer == peer):
            if term is None or event.fields.get("candidateTermId") == term:
                return i
    raise AssertionError(f"no {dir} {type} at {node}")


def with_vote_flipped(events):
    """Member 2's recorded Vote for member 1 in term 1 says NO instead of YES (an out event: not an input)."""
    events = list(events)
    i = find(events, node=2, dir="out", type="Vote", peer=1, term=1)
    message = dataclasses.replace(events[i].message(), vote=BooleanType.FALSE)
    events[i] = dataclasses.replace(events[i], fields=message.to_fields(), payload=encode(message))
    return events, i


def without_vote_received(events):
    """Member 1 never receives member 2's Vote in term 1: it cannot win that ballot."""
    events = list(events)
    del events[find(events, node=1, dir="in", type="Vote", peer=2, term=1)]
    return events


# -- state at any event ---------------------------------------------------------------------------------------


def test_state_after_any_event_equals_a_fresh_replay_up_to_that_event(failover, failover_events):
    events, _ = failover_events
    wanted = [0, 1, 33, 63, 64, 65, 400, 597, 598, 668, 669, len(events) - 1]
    fresh = ReplaySession(events)
    expected = {}
    for k in range(len(events)):
        fresh.step()
        if k in wanted:
            expected[k] = {n: view.to_json() for n, view in fresh.views().items()}
    # Visit out of order: forward, far back, one back, across checkpoints.
    for k in [669, 0, 668, 400, 64, 63, 65, len(events) - 1, 598, 597, 33, 1]:
        assert failover.states_at(k) == expected[k], k


def test_stepping_back_re_executes_at_most_one_block_from_a_checkpoint(failover, monkeypatch):
    failover.moment(700)
    steps = []
    restores = []
    original_step, original_restore = Stepper.step, Stepper.restore.__func__

    def counting_step(self):
        steps.append(self.position)
        return original_step(self)

    def counting_restore(cls, source, checkpoint):
        restores.append(checkpoint.position)
        return original_restore(cls, source, checkpoint)

    monkeypatch.setattr(Stepper, "step", counting_step)
    monkeypatch.setattr(Stepper, "restore", classmethod(counting_restore))
    moment = failover.moment(699)
    assert restores == [640]  # the checkpoint at or before event 699 (every 64 events)
    assert len(steps) == 700 - 640  # events 640..699 re-executed, nothing replayed from the start
    assert moment.position == 699


def test_seeks_are_exact_when_nominations_come_from_the_recording(tmp_path, failover_events):
    """Without seeds, each member's nomination delay is the one the recording implies (an oracle that
    reads the member's clock): a copy restored from a checkpoint must read its own member's clock."""
    events, metadata = failover_events
    unseeded = [
        dataclasses.replace(e, fields={k: v for k, v in e.fields.items() if k != "seed"})
        if e.type == "MemberStart"
        else e
        for e in events
    ]
    session = Session.open(
        write_replay(tmp_path / "unseeded.arrow", unseeded, metadata.cluster_members), block_size=64
    )
    session.build_index()
    assert session.index.summary["nominationDelay"] == {"0": "recorded", "1": "recorded", "2": "recorded"}
    assert session.index.summary["divergences"] == 0
    fresh = ReplaySession(unseeded)
    expected = {}
    for k in range(len(unseeded)):
        fresh.step()
        if k in (30, 647, 664, 669):
            expected[k] = {n: view.to_json() for n, view in fresh.views().items()}
    for k in (669, 647, 664, 30):  # each restored from a checkpoint before the term-1 nomination draw
        assert session.states_at(k) == expected[k], k
    assert [(t.leadership_term_id, t.leader_member_id) for t in session.index.terms] == [(0, 0), (1, 1)]


def test_the_moment_holds_the_state_before_the_event_too(failover):
    leader_elected = failover.position_of_term(1)
    moment = failover.moment(leader_elected)
    assert moment.states[1]["role"] == "LEADER" and moment.states[1]["leadershipTermId"] == 1
    assert moment.previous[1]["role"] == "CANDIDATE"


def test_index_is_the_same_replay_as_recount_replay(failover, failover_events):
    events, _ = failover_events
    records = list(replay(events))
    assert failover.index.finished and failover.index.error is None
    assert failover.index.summary["traceSha256"] == records[-1]["traceSha256"]
    rebuilt = [r for k in range(len(failover)) for r in failover.records_at(k)]
    assert rebuilt == [r for r in records if r["kind"] != "summary"]
    assert int(failover.index.counts.sum()) == len(records) - 1


def test_lanes_show_the_leader_of_each_term_and_the_killed_member(failover):
    index = failover.index
    assert [(t.leadership_term_id, t.leader_member_id) for t in index.terms] == [(0, 0), (1, 1)]
    last = {member: lane[-1] for member, lane in index.lanes.items()}
    assert last[0].running is False and last[0].position == 598  # MemberCrash at 4 s
    assert (last[1].role, last[1].election_state, last[1].leadership_term_id) == ("LEADER", "CLOSED", 1)
    assert (last[2].role, last[2].leader_member_id) == ("FOLLOWER", 1)
    assert failover.source.relative(index.terms[1].ts) == "+15.064s"


def test_state_changes_are_listed_per_member(failover):
    changes = failover.state_changes(2)
    assert changes == sorted(changes) and changes
    after_crash = failover.next_of(changes, 598, 1)
    state = failover.states_at(after_crash)[2]
    assert state["electionState"] == "CANVASS"  # member 2's heartbeat timeout starts the election
    assert failover.next_of(changes, changes[0], -1) is None


# -- finding ----------------------------------------------------------------------------------------------


def test_jumps_find_time_seq_log_position_and_term(failover):
    source = failover.source
    assert source.position_at_time(source.origin + 4_000_000_000) == 598
    assert source.position_of_seq(669) == 669 and source.position_of_seq(10**9) is None
    k = failover.position_of_log_position(5344)
    assert source.event(k).fields["logPosition"] >= 5344
    assert all(
        source.event(j).fields.get("logPosition", -1) < 5344 for j in range(k) if source.event(j).is_message
    )
    assert failover.position_of_term(1) == 669
    assert failover.position_of_term(9) is None


def test_search_finds_where_a_condition_became_true_in_both_directions(failover):
    became_leader = failover.position_of_term(1)
    condition = breakpoints.parse("node 1 role == LEADER")
    assert failover.search([condition], 0, 1) == (became_leader, [0])
    assert failover.search([condition], len(failover) - 1, -1) == (became_leader, [0])
    # Already true at the cursor: found again neither forward nor backward of it.
    assert failover.search([condition], became_leader, 1) is None
    assert failover.search([condition], became_leader, -1) is None


def test_search_reports_which_condition_fired(failover):
    conditions = [breakpoints.parse("node 0 isRunning == false"), breakpoints.parse("candidateTermId >= 1")]
    crash, fired = failover.search(conditions, 0, 1)
    assert (crash, fired) == (598, [0])
    nomination, fired = failover.search(conditions, crash, 1)
    assert fired == [1]
    assert failover.source.event(nomination).type == "RequestVote"  # node-state.dat written as it nominates


def test_filter_selects_members_channels_and_types(failover):
    positions = EventFilter.parse("node=2 type=Vote,RequestVote").positions(failover.source)
    kinds = {(failover.source.event(int(k)).node, failover.source.event(int(k)).type) for k in positions}
    assert kinds == {(2, "Vote"), (2, "RequestVote")}
    assert len(EventFilter.parse("channel=log").positions(failover.source)) > 0
    assert len(EventFilter.parse("").positions(failover.source)) == len(failover)
    with pytest.raises(ValueError, match="unknown filter key 'colour'"):
        EventFilter.parse("colour=red")
    with pytest.raises(ValueError, match="node= takes member ids"):
        EventFilter.parse("node=leader")


def test_list_layout_puts_each_events_records_under_it(failover):
    positions = np.arange(len(failover))
    layout = ListLayout(positions, failover.index.counts)
    assert layout.height == len(failover) + int(failover.index.counts.sum())
    line = layout.line_of(669)
    assert layout.line(line) == (669, 0)
    assert layout.line(line + 1) == (669, 1)
    assert layout.line(line + 1 + int(failover.index.counts[669])) == (670, 0)


# -- problems and diffs -------------------------------------------------------------------------------------------


def test_divergence_is_found_and_anchored_at_the_recorded_event(tmp_path, failover_events):
    events, metadata = failover_events
    changed, flipped = with_vote_flipped(events)
    session = Session.open(
        write_replay(tmp_path / "flipped.arrow", changed, metadata.cluster_members), block_size=64
    )
    session.build_index()
    divergences = [p for p in session.index.problems if p.record["kind"] == "divergence"]
    assert divergences, "the model votes YES where the recording says NO"
    assert divergences[0].position == flipped
    assert divergences[0].record["expected"]["fields"]["vote"] == "FALSE"
    assert session.index.summary["divergences"] == len(divergences)
    # The flipped event is what was sent, not an input: member state is unchanged.
    assert session.states_at(flipped) == Session.open(_require(FAILOVER)).states_at(flipped)


def test_diff_of_a_replay_with_itself_has_no_differences(failover):
    rows = align(story(failover), story(failover))
    assert rows and not any(row.differs for row in rows)
    assert difference_starts(rows) == []


def test_diff_aligns_two_replays_and_starts_at_the_first_difference(tmp_path, failover, failover_events):
    events, metadata = failover_events
    other = Session.open(
        write_replay(tmp_path / "lost-vote.arrow", without_vote_received(events), metadata.cluster_members)
    )
    other.build_index()
    rows = align(story(failover), story(other))
    starts = difference_starts(rows)
    assert starts
    first = rows[starts[0]]
    # Everything before the lost Vote agrees; the first difference is member 1's fate in term 1.
    assert all(not row.differs for row in rows[: starts[0]])
    assert all(row.left.text == row.right.text for row in rows[: starts[0]])
    assert first.left is not None and first.left.node == 1
    assert "LEADER" in first.left.text
    assert first.left.position >= 668


# -- input -------------------------------------------------------------------------------------------------------


def test_a_jsonl_capture_opens_like_its_replay_file(tmp_path, failover, failover_events):
    events, _ = failover_events
    path = tmp_path / "failover.jsonl"
    path.write_text("".join(dump_jsonl(events)))
    session = Session.open(path, block_size=64)
    session.build_index()
    assert session.source.ref_kind == "line"
    assert [(t.position, t.leadership_term_id) for t in session.index.terms] == [
        (t.position, t.leadership_term_id) for t in failover.index.terms
    ]
    assert session.states_at(669) == failover.states_at(669)


def test_a_replay_whose_seq_goes_backwards_is_refused(failover_events):
    events, _ = failover_events
    table = replay_file.events_to_table(events[:10], source="x")
    seq = table.column("seq").to_pylist()
    seq[5] = 2
    table = table.set_column(0, "seq", pa.array(seq, type=pa.uint64()))
    with pytest.raises(DecodeError, match="seq is not strictly increasing at row 5"):
        ReplaySource(table, name="bad.arrow")


def test_a_file_that_is_not_a_replay_is_a_decode_error(tmp_path):
    path = tmp_path / "notes.arrow"
    path.write_bytes(b"not arrow at all")
    with pytest.raises(DecodeError, match="not an Arrow IPC file"):
        Session.open(path)


def test_a_member_event_before_its_start_stops_the_index_with_one_line(tmp_path, failover_events):
    events, metadata = failover_events
    events = [e for e in events if not (e.type == "MemberStart" and e.node == 2)]
    session = Session.open(write_replay(tmp_path / "no-start.arrow", events, metadata.cluster_members))
    session.build_index()
    assert session.index.finished
    assert (
        "replay stopped at event" in session.index.error and "before its MemberStart" in session.index.error
    )
    assert "\n" not in session.index.error


def test_an_event_outside_the_replay_is_a_session_error(failover):
    with pytest.raises(SessionError, match="outside"):
        failover.moment(len(failover))


# -- where a value last changed ----------------------------------------------------------------------------


def _recorded_values_change_only_at_member_records(session: Session) -> int:
    """Every change of a `RECORDED_FIELDS` value happens at an event in the index's `member_records`
    of that member (what `Session.last_change` walks instead of re-executing the whole replay)."""
    from cli.tui.session import RECORDED_FIELDS

    session.build_index()
    stepper = Stepper.start(session.source, model=session.model)
    previous = stepper.states()
    changes = 0
    for k in range(len(session)):
        stepper.step()
        states = stepper.states()
        for member, state in states.items():
            before = previous.get(member)
            if before is None:
                continue
            for name in RECORDED_FIELDS:
                if state.get(name) != before.get(name):
                    changes += 1
                    assert k in session.index.member_records.get(member, []), (name, member, k)
        previous = states
    return changes


@pytest.mark.parametrize("sample", ["leader-failover", "restart-catchup", "split-vote", "graceful-close-across-versions"])
def test_recorded_values_change_only_where_the_member_has_a_record(sample):
    path = _require(ROOT / "samples" / sample / "incident.arrow")
    assert _recorded_values_change_only_at_member_records(Session.open(path)) > 20


def test_recorded_values_change_only_where_the_member_has_a_record_in_a_real_capture(capture):
    from recorder import convert

    source = ReplaySource.from_loaded(convert.load(capture), name=str(capture))
    assert _recorded_values_change_only_at_member_records(Session(source)) > 20


def _facts_of_every_event(source: ReplaySource):
    return scan(source.event(k) for k in range(len(source)))


@pytest.mark.parametrize("sample", ["leader-failover", "restart-catchup", "graceful-close-across-versions"])
def test_the_sessions_recording_facts_from_columns_are_those_of_every_event(sample):
    """The TUI's replay is `recount replay`'s: the facts it reads from columns and a few whole events
    (`_facts`) are what `engine.replay.scan` makes of every event, lifecycle evidence included."""
    source = Session.open(_require(ROOT / "samples" / sample / "incident.arrow")).source
    assert _facts(source) == _facts_of_every_event(source)
    assert _facts(source).first_start


def test_the_sessions_recording_facts_hold_the_lifecycle_gaps_of_a_real_incident(reference):
    from recorder import convert

    directory = reference / "aeron-1.47.3-capture" / "g_leader_sigterm_reelection_rejoin"
    source = ReplaySource.from_loaded(convert.load(directory), name=directory.name)
    facts = _facts(source)
    assert facts == _facts_of_every_event(source)
    assert facts.gaps  # starting values the evidence leaves uncertain (`engine.divergences.gaps_of`)


def test_last_change_of_a_recorded_value_is_found_from_the_index_with_the_cause_its_record_carries(failover):
    end = len(failover) - 1
    found = failover.last_change(2, "leaderMemberId", end)
    assert (found.before, found.after) == (-1, 1)
    assert found.cause == {"kind": "message", "type": "NewLeadershipTerm", "peer": 1, "channel": "consensus"}
    assert found.is_the_event and failover.source.event(found.position).type == "NewLeadershipTerm"
    role = failover.last_change(1, "role", end)
    assert (role.before, role.after) == ("CANDIDATE", "LEADER") and role.cause == {"kind": "timer", "type": "electionTimeout"}
    assert role.record["kind"] == "role" and not role.is_the_event
    crash = next(k for k in range(len(failover))
                 if (failover.source.event(k).type, failover.source.event(k).node) == ("MemberCrash", 0))
    assert failover.last_change(0, "isRunning", end).position == crash
    started = failover.last_change(2, "role", end)  # a follower all along: since it started
    assert (started.before, started.after, started.cause) == ("-", "FOLLOWER", {"kind": "local", "type": "MemberStart"})
    assert failover.source.event(started.position).type == "MemberStart"


def test_last_change_of_a_value_no_record_speaks_for_tells_a_deadline_from_the_event(failover):
    crash = 592
    # the leader's commit position moves on the AppendPosition its followers send
    found = failover.last_change(0, "commitPosition", crash - 1)
    assert found.cause["kind"] == "message" and found.cause["type"] == "AppendPosition"
    event = failover.source.event(found.position)
    assert (event.node, event.dir, event.type) == (0, "in", "AppendPosition")


def test_a_long_index_takes_what_it_built_out_of_the_collectors_view_and_indexes_the_same(monkeypatch):
    """Every `SETTLE_HEAP_EVERY` events and at the end, the index freezes the heap (`gc.freeze`: full
    collections then skip what the index built, which made the slowest seeks on a 1M-event replay); the
    index it builds is the one built without that, and nothing alive is lost."""
    import gc

    from cli.tui import session as session_module

    plain = Session.open(_require(FAILOVER), block_size=64)
    plain.build_index()
    monkeypatch.setattr(session_module, "SETTLE_HEAP_EVERY", 200)
    settled = Session.open(_require(FAILOVER), block_size=64)
    frozen_before = gc.get_freeze_count()
    try:
        settled.build_index()
        frozen = gc.get_freeze_count() - frozen_before
    finally:
        gc.unfreeze()
    assert len(settled) > 600 and frozen > 0
    assert settled.index.summary["traceSha256"] == plain.index.summary["traceSha256"]
    assert list(settled.index.counts) == list(plain.index.counts)
    last = len(settled) - 1
    assert settled.moment(last) == plain.moment(last)


def test_a_moment_makes_the_screens_dicts_only_when_asked_and_equals_one_made_at_once(failover):
    """`Moment` holds frozen views; its `states`/`previous` are those views' dicts, made once."""
    position = failover.position_of_term(1)
    failover._moments.pop(position, None)  # another test may have asked for it already
    failover._pinned.pop(position, None)
    moment = failover.moment(position)
    assert moment._states is None
    states = moment.states
    assert moment.states is states  # made once
    stepper = failover._fresh(position + 1)
    while stepper.position < position + 1:
        stepper.step()
    assert states == stepper.states()


def test_a_heavy_step_gets_a_checkpoint_after_it_and_a_seek_past_it_restores_that(monkeypatch):
    """A step of the index that took longer than `HEAVY_STEP_S` of CPU is followed by a checkpoint of its
    own (besides those every block), and a seek just past it restores that checkpoint rather than stepping
    through it again, the step's records kept from the index: here every step counts as heavy, so any
    moment is one event's re-execution; the index, the records and the states are the plain index's."""
    from cli.tui import session as session_module

    plain = Session.open(_require(FAILOVER), block_size=64)
    plain.build_index()
    monkeypatch.setattr(session_module, "HEAVY_STEP_S", -1.0)
    heavy = Session.open(_require(FAILOVER), block_size=64)
    heavy.build_index()
    assert heavy.index.summary["traceSha256"] == plain.index.summary["traceSha256"]
    assert heavy.index.checkpoint_positions == list(range(len(heavy) + 1))  # the start, and after every event
    assert [heavy.records_at(k) for k in range(len(heavy))] == [plain.records_at(k) for k in range(len(plain))]
    blocks = range(-(-len(heavy) // 64))
    assert [heavy._replay_block(b) for b in blocks] == [plain._replay_block(b) for b in blocks]
    steps = []
    step = session_module.Stepper.step
    monkeypatch.setattr(session_module.Stepper, "step", lambda self: (steps.append(self.position), step(self))[1])
    for position in (10, 11, 200, len(heavy) // 2, len(heavy) // 2 + 3):
        heavy.moment(position - 5)  # the screen's stepper a few events before
        assert heavy.steps_to(position) <= 1
        steps.clear()
        moment = heavy.moment(position)
        assert len(steps) <= 1 and heavy._stepper.position == position + 1
        assert moment == plain.moment(position)
