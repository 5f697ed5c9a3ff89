"""A frozen view of one member's state (`Node.view()`): what the consensus module and its election
hold at one instant, as typed values.

Names are Aeron's, in snake_case; `MemberView.to_json()` gives them in camelCase, in a fixed order,
for the files and the terminal (the trace's divergence ``state``, the summary, a scenario's
``state`` line, the TUI's inspector and the expressions of breakpoints and ``bisect --check``).
States are the model's enums (`ElectionState`, `Role`, `ModuleState`); a view holds no reference to
anything mutable, so it can be kept, compared and handed to another thread.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from formats.node_state import NodeState, node_state_to_json
from formats.recording_log import Entry, entry_to_json


@dataclass(frozen=True, slots=True, kw_only=True)
class PeerView:
    """One row of the member's ClusterMember table (`io.aeron.cluster.ClusterMember`)."""

    member_id: int
    leadership_term_id: int
    log_position: int
    candidate_term_id: int
    vote: bool | None
    is_ballot_sent: bool
    is_leader: bool
    time_of_last_append_position_ns: int
    catchup_replay_session_id: int

    def to_json(self) -> dict[str, Any]:
        return {
            "memberId": self.member_id,
            "leadershipTermId": self.leadership_term_id,
            "logPosition": self.log_position,
            "candidateTermId": self.candidate_term_id,
            "vote": None if self.vote is None else ("TRUE" if self.vote else "FALSE"),
            "isBallotSent": self.is_ballot_sent,
            "isLeader": self.is_leader,
            "timeOfLastAppendPositionNs": self.time_of_last_append_position_ns,
            "catchupReplaySessionId": self.catchup_replay_session_id,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberView:
    """One member at one instant (see the module docstring)."""

    member_id: int
    is_running: bool
    now_ns: int
    election_state: Any  # ElectionState (CLOSED when no election runs)
    role: Any  # Role
    module_state: Any  # ModuleState
    leadership_term_id: int
    log_leadership_term_id: int
    candidate_term_id: int
    leader_member_id: int
    log_position: int
    append_position: int
    commit_position: int
    catchup_join_position: int
    agent_leadership_term_id: int
    notified_commit_position: int
    log_recording_id: int
    log_session_id: int
    election_count: int
    errors: int
    #: The member's pending deadlines by name (``election``, ``nomination``, ``slowTick``, ...), in ns.
    deadlines: tuple[tuple[str, int], ...]
    members: tuple[PeerView, ...]
    node_state: NodeState
    recording_log: tuple[Entry, ...]
    #: The session id of the log publication it leads with (None: it publishes no log), and of the
    #: log image it follows (None: none).  What a harness needs to end a follower's image when the
    #: leader stops; not part of `to_json`.
    log_publication_session_id: int | None = None
    log_image_session_id: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "electionState": self.election_state.name,
            "role": self.role.name,
            "moduleState": self.module_state.name,
            "leadershipTermId": self.leadership_term_id,
            "logLeadershipTermId": self.log_leadership_term_id,
            "candidateTermId": self.candidate_term_id,
            "leaderMemberId": self.leader_member_id,
            "logPosition": self.log_position,
            "appendPosition": self.append_position,
            "commitPosition": self.commit_position,
            "catchupJoinPosition": self.catchup_join_position,
            "agentLeadershipTermId": self.agent_leadership_term_id,
            "notifiedCommitPosition": self.notified_commit_position,
            "logRecordingId": self.log_recording_id,
            "logSessionId": self.log_session_id,
            "electionCount": self.election_count,
            "errors": self.errors,
            "deadlines": dict(self.deadlines),
            "members": [m.to_json() for m in self.members],
            "nodeState": node_state_to_json(self.node_state),
            "recordingLog": [entry_to_json(e) for e in self.recording_log],
            "memberId": self.member_id,
            "isRunning": self.is_running,
            "now": self.now_ns,
        }
