"""When a follower acted on the end of its leader's log, read from the wire when no agent log says it.

A leader that closes gracefully ends its log publication: the followers' images see end of stream (the
``LogEndOfStream`` the decoder makes from the log's EOS frame).  Aeron 1.47.3's follower does not act on
that itself: the image stays open until its driver drops it, and what the consensus module acts on is
its archive's recording of the log stopping there (autoStop: "log recording stopped: eos=true"), which
the capture does not show; a follower that is closing too has stopped its recording itself and makes no
election.  In h_five_members_leader_kill, SIGTERM to all: leader 0's log ended at 19:25:48.666; member 4
went into an election at .699 (its agent log) and canvassed at .7076; members 1, 2 and 3 sent nothing
more before the capture ended at .761 (their agent logs: no election).

So, for a member without an agent log, a ``LogEndOfStream`` that its next consensus message answers
with a CanvassPosition within `ANSWER_NS` is moved to that CanvassPosition (its election began there,
within ms); one after which the member sent no consensus message at all before its life or capture
ended is dropped (it was closing); any other stays as it was (its next message says nothing of it:
the member was in an election already, or became the leader).

Pure: the events' times in, the moved and dropped events out.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Mapping, Sequence

#: How soon after the end of stream a follower's canvass can be its answer to it (its archive's STOP
#: comes tens of ms after the EOS frame).
ANSWER_NS = 1_000_000_000


def end_of_stream_times(ends: Sequence[tuple[int, int]], sends: Mapping[int, tuple[Sequence[int], Sequence[str]]],
                        lives_end: Mapping[int, Sequence[int]]) -> list[int | None | bool]:
    """For each (member, ts) of ``ends``: the new time, None to drop it, or True to keep it as it is.
    ``sends``: member → (when it sent a consensus message, in order; each one's type);
    ``lives_end``: member → when its lives (and the capture of it) ended, in order."""
    out: list[int | None | bool] = []
    for member, ts in ends:
        times, types = sends.get(member, ((), ()))
        index = bisect_right(times, ts)
        until = next((at for at in lives_end.get(member, ()) if at >= ts), None)
        following = times[index] if index < len(times) else None
        if following is None or (until is not None and following > until):
            out.append(None)
        elif types[index] == "CanvassPosition" and following - ts <= ANSWER_NS:
            out.append(following)
        else:
            out.append(True)
    return out
