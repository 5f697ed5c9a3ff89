"""A follower's log replication read from its AppendPositions (`recorder.capture.replications`), without reference material."""

from __future__ import annotations

from formats.events import Event
from recorder.capture.publications import Life
from recorder.capture.replications import _replication_positions, append_rows

LIFE = Life(member=1, start_ns=0, end_ns=None, since_ns=None)


def _sent(ts: int, term: int, position: int, flags: int = 0) -> Event:
    return Event(ts=ts, node=1, dir="out", peer=0, channel="consensus", type="AppendPosition",
                 fields={"leadershipTermId": term, "logPosition": position, "followerMemberId": 1, "flags": flags})


def test_positions_that_moved_before_the_image_of_the_terms_log_are_a_replication():
    rows = append_rows([_sent(10, 5, 56352), _sent(20, 5, 56352), _sent(30, 5, 60480), _sent(50, 5, 60576)])
    # The image of the term's log (session 7) came at 40: what followed is the log, not the replication.
    assert _replication_positions(rows, LIFE, [[7, 40]], {7: 5}) == [[10, 56352], [20, 56352], [30, 60480]]


def test_positions_that_never_moved_or_came_after_the_image_are_no_replication():
    rows = append_rows([_sent(10, 5, 56352), _sent(20, 5, 56352), _sent(50, 5, 60576), _sent(60, 5, 60600, flags=1)])
    assert _replication_positions(rows, LIFE, [[7, 40]], {7: 5}) == []
