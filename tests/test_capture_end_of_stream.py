"""When a follower acted on its leader's log ending (`recorder.capture.end_of_stream`), without reference material."""

from __future__ import annotations

from recorder.capture.end_of_stream import ANSWER_NS, end_of_stream_times


def test_a_canvass_soon_after_the_end_of_stream_is_when_the_follower_acted_on_it():
    sends = {4: ([100, 140], ["AppendPosition", "CanvassPosition"])}
    assert end_of_stream_times([(4, 120)], sends, {4: [200]}) == [140]


def test_a_follower_that_sent_nothing_more_before_its_end_made_no_election():
    sends = {1: ([100, 500], ["AppendPosition", "CanvassPosition"])}
    assert end_of_stream_times([(1, 120)], sends, {1: [200]}) == [None]


def test_any_other_answer_leaves_the_end_of_stream_where_it_was():
    # It became the leader (a NewLeadershipTerm), or canvassed long after for another reason.
    sends = {0: ([130], ["NewLeadershipTerm"]), 2: ([120 + ANSWER_NS + 1], ["CanvassPosition"])}
    assert end_of_stream_times([(0, 120), (2, 120)], sends, {}) == [True, True]

