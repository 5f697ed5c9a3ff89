"""A leader's ClusterTool shutdown read from the wire (`recorder.capture.shutdowns`), without reference material."""

from __future__ import annotations

from formats.events import Event
from recorder.capture.publications import Life
from recorder.capture.shutdowns import shutdown_snapshots


def _sent(ts: int, type_name: str, peer: int, **fields) -> Event:
    return Event(ts=ts, node=2, dir="out", peer=peer, channel="consensus", type=type_name, fields=fields)


def _action(ts: int, position: int, peer: int, flags: int = 0) -> Event:
    return _sent(ts, "ClusterActionRequest", peer, leadershipTermId=3, logPosition=position, timestamp=ts,
                 action="SNAPSHOT", flags=flags)


LIFE = Life(member=2, start_ns=0, end_ns=None, since_ns=None)


def test_the_termination_position_at_a_snapshots_end_names_that_snapshot_of_the_life():
    events = [_action(10, 52704, 0), _action(11, 52704, 1), _action(20, 54048, 0), _action(21, 54048, 1),
              _sent(22, "TerminationPosition", 0, leadershipTermId=3, logPosition=54048)]
    found = shutdown_snapshots(events, [LIFE])
    assert found[(2, 0)][0] == 1 and "54048" in found[(2, 0)][1]


def test_a_termination_position_without_its_snapshot_action_on_the_wire_names_none():
    # An abort (no snapshot), or the action's frame not captured: the index would be a guess.
    events = [_action(10, 52704, 0), _sent(22, "TerminationPosition", 0, leadershipTermId=3, logPosition=54048)]
    assert shutdown_snapshots(events, [LIFE]) == {}


def test_snapshots_and_termination_of_another_life_do_not_count():
    earlier = Life(member=2, start_ns=0, end_ns=15, since_ns=None)
    later = Life(member=2, start_ns=16, end_ns=None, since_ns=15)
    events = [_action(10, 52704, 0), _action(20, 54048, 0),
              _sent(22, "TerminationPosition", 0, leadershipTermId=3, logPosition=54048)]
    found = shutdown_snapshots(events, [earlier, later])
    assert list(found) == [(2, 16)] and found[(2, 16)][0] == 0


def test_a_termination_position_at_no_snapshot_actions_end_is_an_abort_seen_by_then():
    from recorder.capture.shutdowns import aborts

    events = [_action(10, 52704, 0), _sent(22, "TerminationPosition", 0, leadershipTermId=3, logPosition=54048)]
    assert aborts(events, [LIFE]) == {(2, 0): 22}
    shutdown = [_action(20, 54048, 0), _sent(22, "TerminationPosition", 0, leadershipTermId=3, logPosition=54048)]
    assert aborts(shutdown, [LIFE]) == {}
