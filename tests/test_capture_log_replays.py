"""The log replays a follower's CatchupPositions bound (`recorder.capture.log_replays`), without reference material."""

from __future__ import annotations

from recorder.capture.log_replays import replay_bounds


def test_a_catchup_position_bounds_the_log_replay_begun_after_the_message_before_it():
    sends = {3: ([10, 20, 900, 950, 2000], ["CanvassPosition", "CanvassPosition", "CatchupPosition",
                                          "CatchupPosition", "AppendPosition"])}
    # A CatchupPosition resent is no new replay.
    assert replay_bounds(sends) == {3: [(20, 900)]}
