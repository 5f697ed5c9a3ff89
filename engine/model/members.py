"""Cluster members and the quorum helpers of `io.aeron.cluster.ClusterMember`, exactly.

A `ClusterMember` is mutable: the election and the consensus module write what they learn about a
peer into it (its log position, its vote, ...).  The helpers are plain functions over a sequence of
members, with Aeron's names in snake_case and Aeron's rules to the letter (aeron-election.md §4),
including the odd ones: `quorum_position` never lets −1 displace a 0, `is_quorum_leader` ignores
members voting in another term, `has_voters_at_position` is vacuously true with no voters.

`vote` is tri-state as in Java (`None`, `True`, `False`).  Positions and terms use −1 for
NULL_VALUE / NULL_POSITION.
"""

from __future__ import annotations

from collections.abc import Sequence

from engine.model.view import PeerView
from formats import cluster_members

NULL_VALUE = -1
NULL_POSITION = -1


class ClusterMember:
    __slots__ = (
        "id",
        "ingress_endpoint",
        "consensus_endpoint",
        "log_endpoint",
        "catchup_endpoint",
        "archive_endpoint",
        "archive_response_endpoint",
        "egress_response_endpoint",
        "is_ballot_sent",
        "is_leader",
        "has_terminated",
        "vote",
        "candidate_term_id",
        "leadership_term_id",
        "log_position",
        "time_of_last_append_position_ns",
        "catchup_replay_session_id",
        "catchup_replay_correlation_id",
    )

    def __init__(
        self,
        id: int,
        ingress_endpoint: str = "",
        consensus_endpoint: str = "",
        log_endpoint: str = "",
        catchup_endpoint: str = "",
        archive_endpoint: str = "",
        archive_response_endpoint: str | None = None,
        egress_response_endpoint: str | None = None,
    ) -> None:
        self.id = id
        self.ingress_endpoint = ingress_endpoint
        self.consensus_endpoint = consensus_endpoint
        self.log_endpoint = log_endpoint
        self.catchup_endpoint = catchup_endpoint
        self.archive_endpoint = archive_endpoint
        self.archive_response_endpoint = archive_response_endpoint
        self.egress_response_endpoint = egress_response_endpoint
        self.is_ballot_sent = False
        self.is_leader = False
        self.has_terminated = False
        self.vote: bool | None = None
        self.candidate_term_id = NULL_VALUE
        self.leadership_term_id = NULL_VALUE
        self.log_position = NULL_POSITION
        self.time_of_last_append_position_ns = NULL_VALUE
        self.catchup_replay_session_id = NULL_VALUE
        self.catchup_replay_correlation_id = NULL_VALUE

    def reset(self) -> None:
        """Aeron's `reset()`: the election fields only; the append time and catch-up ids stay."""
        self.is_ballot_sent = False
        self.is_leader = False
        self.has_terminated = False
        self.vote = None
        self.candidate_term_id = NULL_VALUE
        self.leadership_term_id = NULL_VALUE
        self.log_position = NULL_POSITION

    def copy(self) -> ClusterMember:
        other = ClusterMember.__new__(ClusterMember)
        for name in ClusterMember.__slots__:
            setattr(other, name, getattr(self, name))
        return other

    def view(self) -> PeerView:
        return PeerView(
            member_id=self.id,
            leadership_term_id=self.leadership_term_id,
            log_position=self.log_position,
            candidate_term_id=self.candidate_term_id,
            vote=self.vote,
            is_ballot_sent=self.is_ballot_sent,
            is_leader=self.is_leader,
            time_of_last_append_position_ns=self.time_of_last_append_position_ns,
            catchup_replay_session_id=self.catchup_replay_session_id,
        )

    def __repr__(self) -> str:
        return (
            f"ClusterMember(id={self.id}, term={self.leadership_term_id}, pos={self.log_position}, "
            f"cand={self.candidate_term_id}, vote={self.vote}, leader={self.is_leader})"
        )


def parse_cluster_members(text: str, *, strict: bool = False) -> list[ClusterMember]:
    """Aeron's `ClusterMember.parse`, as `formats.cluster_members` reads the string (a bad entry is a
    `DecodeError`, a `ValueError`, in Aeron's words), into fresh mutable members."""
    return [
        ClusterMember(
            entry.id,
            entry.ingress_endpoint,
            entry.consensus_endpoint,
            entry.log_endpoint,
            entry.catchup_endpoint,
            entry.archive_endpoint,
            entry.archive_response_endpoint,
            entry.egress_response_endpoint,
        )
        for entry in cluster_members.parse_cluster_members(text, strict=strict)
    ]


def quorum_threshold(member_count: int) -> int:
    return (member_count >> 1) + 1


def compare_log(lhs_term: int, lhs_position: int, rhs_term: int, rhs_position: int) -> int:
    if lhs_term > rhs_term:
        return 1
    if lhs_term < rhs_term:
        return -1
    if lhs_position > rhs_position:
        return 1
    if lhs_position < rhs_position:
        return -1
    return 0


def compare_member_log(lhs: ClusterMember, rhs: ClusterMember) -> int:
    return compare_log(lhs.leadership_term_id, lhs.log_position, rhs.leadership_term_id, rhs.log_position)


def is_unanimous_candidate(
    members: Sequence[ClusterMember], candidate: ClusterMember, graceful_closed_leader_id: int = NULL_VALUE
) -> bool:
    count = 0
    for member in members:
        if member.id == graceful_closed_leader_id:
            continue
        if member.log_position == NULL_POSITION or compare_member_log(candidate, member) < 0:
            return False
        count += 1
    return count >= quorum_threshold(len(members))


def is_quorum_candidate(members: Sequence[ClusterMember], candidate: ClusterMember) -> bool:
    count = 0
    for member in members:
        if member.log_position != NULL_POSITION and compare_member_log(candidate, member) >= 0:
            count += 1
    return count >= quorum_threshold(len(members))


def become_candidate(members: Sequence[ClusterMember], candidate_term_id: int, candidate_id: int) -> None:
    for member in members:
        if member.id == candidate_id:
            member.vote = True
            member.candidate_term_id = candidate_term_id
            member.is_ballot_sent = True
        else:
            member.vote = None
            member.candidate_term_id = NULL_VALUE
            member.is_ballot_sent = False


def is_unanimous_leader(
    members: Sequence[ClusterMember], candidate_term_id: int, graceful_closed_leader_id: int = NULL_VALUE
) -> bool:
    count = 0
    for member in members:
        if member.id == graceful_closed_leader_id:
            continue
        if member.candidate_term_id != candidate_term_id or member.vote is not True:
            return False
        count += 1
    return count >= quorum_threshold(len(members))


def is_quorum_leader(members: Sequence[ClusterMember], candidate_term_id: int) -> bool:
    votes = 0
    for member in members:
        if member.candidate_term_id == candidate_term_id:
            if member.vote is False:
                return False
            if member.vote is True:
                votes += 1
    return votes >= quorum_threshold(len(members))


def quorum_position(members: Sequence[ClusterMember], ranked_positions: list[int]) -> int:
    """The q-th highest log position, floored at 0; ``ranked_positions`` has length q (reused)."""
    length = len(ranked_positions)
    for i in range(length):
        ranked_positions[i] = 0
    for member in members:
        new_position = member.log_position
        for i in range(length):
            if new_position > ranked_positions[i]:
                ranked_positions[i + 1 :] = ranked_positions[i : length - 1]
                ranked_positions[i] = new_position
                break
    return ranked_positions[length - 1]


def has_active_quorum(members: Sequence[ClusterMember], now_ns: int, timeout_ns: int) -> bool:
    threshold = quorum_threshold(len(members))
    for member in members:
        if member.is_leader or now_ns <= member.time_of_last_append_position_ns + timeout_ns:
            threshold -= 1
            if threshold <= 0:
                return True
    return False


def has_voters_at_position(members: Sequence[ClusterMember], position: int, leadership_term_id: int) -> bool:
    for member in members:
        if member.vote is not None and (
            member.log_position < position or member.leadership_term_id != leadership_term_id
        ):
            return False
    return True


def _is_active(member: ClusterMember, leader: ClusterMember, now_ns: int, timeout_ns: int) -> bool:
    return member is leader or member.time_of_last_append_position_ns + timeout_ns > now_ns


def active_quorum_position(
    members: Sequence[ClusterMember], ranked_positions: list[int], leader: ClusterMember, now_ns: int, timeout_ns: int
) -> int:
    """1.50.0 (b999d5d91d): `quorum_position` over the members heard from within ``timeout_ns`` (the
    leader always counts); the others are left out, as if they had no position."""
    length = len(ranked_positions)
    for i in range(length):
        ranked_positions[i] = 0
    for member in members:
        if not _is_active(member, leader, now_ns, timeout_ns):
            continue
        new_position = member.log_position
        for i in range(length):
            if new_position > ranked_positions[i]:
                ranked_positions[i + 1 :] = ranked_positions[i : length - 1]
                ranked_positions[i] = new_position
                break
    return ranked_positions[length - 1]


def has_active_quorum_at_position(
    members: Sequence[ClusterMember],
    leader: ClusterMember,
    position: int,
    leadership_term_id: int,
    now_ns: int,
    timeout_ns: int,
) -> bool:
    """1.50.0 (d37dfa873b): LEADER_READY's test, a quorum of active members at the term and position."""
    count = 0
    for member in members:
        if (
            _is_active(member, leader, now_ns, timeout_ns)
            and member.leadership_term_id == leadership_term_id
            and member.log_position >= position
        ):
            count += 1
    return count >= quorum_threshold(len(members))


def has_quorum_at_position(members: Sequence[ClusterMember], position: int, leadership_term_id: int) -> bool:
    count = 0
    for member in members:
        if member.leadership_term_id == leadership_term_id and member.log_position >= position:
            count += 1
    return count >= quorum_threshold(len(members))


def reset_log_positions(members: Sequence[ClusterMember], log_position: int) -> None:
    for member in members:
        member.log_position = log_position


def reset(members: Sequence[ClusterMember]) -> None:
    for member in members:
        member.reset()


# -- Helpers removed in 1.41.0 (bodies as in tag 1.40.0), for ModelFlags.unanimous_or_timeout_ballot=False --


def is_unanimous_candidate_1_40(members: Sequence[ClusterMember], candidate: ClusterMember) -> bool:
    for member in members:
        if member.log_position == NULL_POSITION or compare_member_log(candidate, member) < 0:
            return False
    return True


def has_won_vote_on_full_count(members: Sequence[ClusterMember], candidate_term_id: int) -> bool:
    votes = 0
    for member in members:
        if member.vote is None or member.candidate_term_id != candidate_term_id:
            return False
        if member.vote is True:
            votes += 1
    return votes >= quorum_threshold(len(members))


def has_majority_vote_with_canvass_members(members: Sequence[ClusterMember], candidate_term_id: int) -> bool:
    votes = 0
    for member in members:
        if member.log_position != NULL_POSITION and member.vote is None:
            return False
        if member.vote is True and member.candidate_term_id == candidate_term_id:
            votes += 1
    return votes >= quorum_threshold(len(members))


def has_majority_vote(members: Sequence[ClusterMember], candidate_term_id: int) -> bool:
    votes = 0
    for member in members:
        if member.vote is True and member.candidate_term_id == candidate_term_id:
            votes += 1
    return votes >= quorum_threshold(len(members))
