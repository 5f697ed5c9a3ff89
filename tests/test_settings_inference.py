"""Settings a capture shows (recorder.settings): inferred from the real Aeron 1.47.3 captures' wire and
judged by what each member really ran with (the ConsensusModule.Context dump in its node-stdout.log);
used by convert unless --config says otherwise."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cli.app import run
from engine.replay import replay
from formats.event_columns import EventColumns
from formats.event_columns import stable_order as _stable_order
from formats.events import Event
from recorder import convert
from recorder.settings import (
    ELECTION_TIMEOUT,
    HEARTBEAT_INTERVAL,
    HEARTBEAT_TIMEOUT,
    STATUS_INTERVAL,
    Inferred,
    apply_inferred,
    infer_settings,
)

MS = 1_000_000
CONTEXT_FIELDS = {
    HEARTBEAT_INTERVAL: "leaderHeartbeatIntervalNs",
    STATUS_INTERVAL: "electionStatusIntervalNs",
    HEARTBEAT_TIMEOUT: "leaderHeartbeatTimeoutNs",
    ELECTION_TIMEOUT: "electionTimeoutNs",
}


def _captures(reference: Path) -> list[Path]:
    return sorted(p for p in (reference / "aeron-1.47.3-capture").iterdir() if (p / "capture.pcap").exists())


def _ran_with(capture: Path) -> dict[str, int]:
    """What every member's ConsensusModule.Context said, from the CONFIG dump in node-stdout.log."""
    values: dict[str, set[int]] = {}
    for log in capture.glob("node*/node-stdout.log"):
        text = log.read_text(encoding="utf-8", errors="replace")
        for name, field in CONTEXT_FIELDS.items():
            values.setdefault(name, set()).update(int(v) for v in re.findall(rf"\b{field}=(\d+)", text))
    assert all(len(v) == 1 for v in values.values()), values
    return {name: v.pop() for name, v in values.items()}


@pytest.mark.parametrize("agent_logs", [True, False], ids=["with agent logs", "wire and dirs only"])
def test_the_settings_inferred_from_each_real_capture_are_what_its_members_ran_with(reference, agent_logs):
    checked = 0
    for capture in _captures(reference):
        truth = _ran_with(capture)
        inputs = [str(capture)] if agent_logs else [str(capture / "capture.pcapng"),
                                                    *(str(p) for p in sorted(capture.glob("node[0-9]")))]
        inferred = infer_settings(convert.build(inputs).events)
        names = {one.name for one in inferred}
        assert {HEARTBEAT_INTERVAL, STATUS_INTERVAL} <= names, capture.name
        for one in inferred:
            assert one.value_ns == truth[one.name], (capture.name, one.note)
            checked += 1
    # The heartbeat timeout shows only where a leader went silent (g, h, j); the election timeout only
    # where a ballot timed out (in an agent log: f, g, h, j; on the wire, twice or more: f, h, j).
    assert checked >= (18 if agent_logs else 17)


def test_convert_uses_what_the_capture_shows_and_says_so_and_replays_closer(reference, tmp_path, capsys):
    capture = reference / "aeron-1.47.3-capture" / "j_short_timeouts_leader_kill"
    out = tmp_path / "j.arrow"
    assert run(["convert", str(capture), "-o", str(out), "--json"]) == 0
    notes = json.loads(capsys.readouterr().out)["notes"]
    assert any(n.startswith(f"{HEARTBEAT_TIMEOUT}=3000ms inferred from") for n in notes)
    built = convert.build([str(capture)])
    starts = [e for e in built.events if e.type == "MemberStart"]
    assert starts and all(e.fields["config"][HEARTBEAT_TIMEOUT] == 3000 * MS for e in starts)
    assert all(e.fields["config"][STATUS_INTERVAL] == 50 * MS for e in starts)
    # The capture's own timeouts make the replay of this incident closer to what Aeron did.
    plain = [dataclasses.replace(e, fields={k: v for k, v in e.fields.items() if k != "config"})
             if e.type == "MemberStart" else e for e in built.events]
    assert list(replay(built.events))[-1]["divergences"] < list(replay(plain))[-1]["divergences"]


def test_the_election_timeout_is_read_from_ballots_timing_out_in_the_agent_logs(reference, capsys):
    capture = reference / "aeron-1.47.3-capture" / "j_short_timeouts_leader_kill"
    built = convert.build([str(capture)])
    assert any(n.startswith(f"{ELECTION_TIMEOUT}=500ms inferred from 4 ballot(s) timing out") for n in built.notes)
    starts = [e for e in built.events if e.type == "MemberStart"]
    assert starts and all(e.fields["config"][ELECTION_TIMEOUT] == 500 * MS for e in starts)
    # Without the agent logs, the wire shows the same ballots: from a RequestVote or Vote to the next canvass.
    wire_only = convert.build([str(capture / "capture.pcapng"), *(str(capture / f"node{n}") for n in range(3))])
    assert any(n.startswith(f"{ELECTION_TIMEOUT}=500ms inferred from 4 ballot(s)") and "on the wire" in n
               for n in wire_only.notes)
    assert all(e.fields["config"][ELECTION_TIMEOUT] == 500 * MS for e in wire_only.events if e.type == "MemberStart")
    # --config wins, with a warning.
    given = convert.build([str(capture)], config={ELECTION_TIMEOUT: "1s"})
    assert any(n.startswith(f"warning: {ELECTION_TIMEOUT} is 1000ms as given, but the capture shows 500ms")
               for n in given.notes)
    assert all(e.fields["config"][ELECTION_TIMEOUT] == 1000 * MS for e in given.events if e.type == "MemberStart")


def test_an_election_timeout_below_what_a_ballot_lasted_before_it_ended_otherwise_is_flagged():
    def change(ts_ms, node, source, target):
        return Event(ts=ts_ms * MS, node=node, dir="local", peer=None, channel="local", type="ElectionStateChange",
                     fields={"from": source, "to": target})
    events = [change(0, 0, "CANVASS", "FOLLOWER_BALLOT"), change(700, 0, "FOLLOWER_BALLOT", "CANVASS"),
              change(0, 1, "CANVASS", "FOLLOWER_BALLOT"), change(900, 1, "FOLLOWER_BALLOT", "FOLLOWER_REPLAY")]
    [inferred] = [one for one in infer_settings(events) if one.name == ELECTION_TIMEOUT]
    assert inferred.value_ns == 700 * MS
    assert "FOLLOWER_BALLOT -> FOLLOWER_REPLAY after 900.0ms" in inferred.note


def test_a_given_setting_wins_over_the_capture_with_a_warning():
    start = Event(ts=0, node=0, dir="local", peer=None, channel="local", type="MemberStart",
                  fields={"clusterMembers": "0,h:1,h:2,h:3,h:4,h:5", "config": {HEARTBEAT_TIMEOUT: 5_000 * MS}})
    shown = [Inferred(HEARTBEAT_TIMEOUT, 3_000 * MS, "seen"), Inferred(STATUS_INTERVAL, 50 * MS, "seen too"),
             Inferred(HEARTBEAT_INTERVAL, 200 * MS, "Aeron's default")]
    events, notes = apply_inferred([start], shown)
    config = events[0].fields["config"]
    assert config[HEARTBEAT_TIMEOUT] == 5_000 * MS  # as given
    assert config[STATUS_INTERVAL] == 50 * MS  # not given: the capture's
    assert HEARTBEAT_INTERVAL not in config  # Aeron's default anyway: the event is left as it was
    assert any(n.startswith(f"warning: {HEARTBEAT_TIMEOUT} is 5000ms as given, but the capture shows 3000ms")
               for n in notes)


def test_a_setting_aeron_would_refuse_is_not_used():
    start = Event(ts=0, node=0, dir="local", peer=None, channel="local", type="MemberStart",
                  fields={"clusterMembers": "0,h:1,h:2,h:3,h:4,h:5"})
    # Aeron's Context wants the startup canvass timeout (60 s here) at least twice the heartbeat timeout.
    events, notes = apply_inferred([start], [Inferred(HEARTBEAT_TIMEOUT, 40_000 * MS, "odd")])
    assert "config" not in events[0].fields
    assert any("were not used" in n for n in notes)


@pytest.mark.parametrize("count", [0, 5])
def test_too_few_sends_infer_nothing(count):
    events = [Event(ts=i * 200 * MS, node=0, dir="out", peer=1, channel="consensus", type="CommitPosition",
                    fields={}) for i in range(count)]
    assert infer_settings(events) == []


# --- the columns' array version against the loop over events ------------------------------------------
_SILENCE_EVENTS = st.sampled_from([  # what marks a follower's leader, its silence and its canvass
    ("in", "consensus", "CommitPosition"), ("in", "log", "NewLeadershipTerm"), ("in", "consensus", "AppendPosition"),
    ("out", "consensus", "CanvassPosition"), ("out", "consensus", "CommitPosition"),
    ("out", "consensus", "AppendPosition"), ("local", "local", "MemberStart"),
])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2), st.integers(0, 6_000), _SILENCE_EVENTS),
                min_size=1, max_size=200),
       st.sampled_from([(0, 0), (1 << 17, 0), (0, 1 << 33), (-5, 0)]))
def test_settings_from_columns_are_those_from_events_whatever_the_member_ids_and_the_order(script, shift):
    """Heartbeat gaps, canvass gaps and followers' silences before their canvasses, on made-up events in
    no particular time order (the columns are put in time order first, or read as they are when they
    are): `infer_settings` of the columns infers what it infers from the events, with member ids small
    (one 16-bit key sorted), large (a lexsort) or beyond what a (member, peer) pair of 32 bits each holds."""
    node_shift, peer_shift = shift
    events = [Event(ts=ms * MS, node=node + node_shift, dir=direction,
                    peer=None if direction == "local" else peer + peer_shift, channel=channel, type=kind,
                    fields={"vote": "TRUE"} if kind == "Vote" else {})
              for node, peer, ms, (direction, channel, kind) in script]
    columns = EventColumns.from_events(events)
    assert infer_settings(columns) == infer_settings(events)
    ordered = EventColumns.from_events(sorted(events, key=lambda e: e.ts))
    assert infer_settings(ordered) == infer_settings(events)


@given(st.lists(st.tuples(st.integers(0, 300), st.integers(-3, 3), st.integers(0, 1 << 40)), max_size=200))
def test_a_stable_order_of_small_keys_is_the_lexsort(rows):
    first = np.array([r[0] for r in rows], dtype=np.int64)
    second = np.array([r[1] for r in rows], dtype=np.int64)
    third = np.array([r[2] for r in rows], dtype=np.int64)
    assert np.array_equal(_stable_order(first, second), np.lexsort((second, first)))
    assert np.array_equal(_stable_order(first), np.argsort(first, kind="stable"))
    assert np.array_equal(_stable_order(second, third), np.lexsort((third, second)))
