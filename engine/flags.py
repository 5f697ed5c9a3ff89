"""Behaviour switches for election changes between Aeron versions; the defaults are 1.47.3.

Each flag names one change from aeron-election.md §8 and is True when the model behaves as
1.47.3 does.  Version-specific code in the engine sits behind ``self.flags.<name>`` so that a
version bisect (issue 7) can switch one change at a time.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ModelFlags:
    #: 1.41.0 (#1383 and friends): a candidate wins early only on unanimity, and on a quorum with no
    #: NO vote only at the ballot timeout.  False gives 1.40's rules (`hasWonVoteOnFullCount` or
    #: `hasMajorityVoteWithCanvassMembers` at once, `hasMajorityVote` at the timeout, and an
    #: `isUnanimousCandidate` over every member).
    unanimous_or_timeout_ballot: bool = True
    #: 1.47.0 (3c434a6e35, backported to 1.46.6): NOMINATE keeps sending CanvassPosition on the status
    #: interval.  False: NOMINATE sends nothing.
    nominate_sends_canvass: bool = True
    #: 1.41.0: the non-extended CANVASS deadline is `timeOfLastLeaderUpdateNs + leaderHeartbeatTimeoutNs`.
    #: False: 1.40's `timeOfLastStateChangeNs + electionTimeoutNs`.
    canvass_deadline_from_leader_update: bool = True
    #: 1.41.0 (e916f05c56): a gracefully closed leader is skipped by the unanimity checks.
    graceful_closed_leader: bool = True

    @classmethod
    def for_version(cls, version: str) -> ModelFlags:
        """The flags for an Aeron version string such as ``"1.47.3"`` (only versions we model)."""
        parts = tuple(int(p) for p in version.split(".")[:3])
        if parts < (1, 40, 0):
            raise ValueError(f"Aeron {version} is older than the oldest modelled version (1.40.0)")
        if parts >= (1, 48, 0):
            raise ValueError(f"Aeron {version} is newer than the newest modelled version (1.47.3)")
        return cls(
            unanimous_or_timeout_ballot=parts >= (1, 41, 0),
            nominate_sends_canvass=parts >= (1, 47, 0) or (1, 46, 6) <= parts < (1, 47, 0),
            canvass_deadline_from_leader_update=parts >= (1, 41, 0),
            graceful_closed_leader=parts >= (1, 41, 0),
        )
