"""`io.aeron.cluster.Election` of Aeron 1.47.3: the 18 states, their handlers and the message handlers.

Theory of operation.  An `Election` is created by the consensus module agent (`engine.model.agent`) when
a node starts or loses its leader, and driven by it: `do_work(now_ns)` runs exactly one state's
handler per duty cycle (a transition made there is not followed by the new state's handler in the
same call), and the agent hands it the consensus messages it receives (`on_canvass_position`, ...).
Everything Aeron's Election does to the outside world goes through the agent: sends, the role,
the log publication and subscription, the archive, node-state.dat and recording.log.  The code
follows aeron-election.md §2–3 line by line, with Aeron's names in snake_case; each handler's
docstring says where the reference describes it.

`_state(new, now_ns, reason)` is the one place a state changes; it runs Aeron's entry actions and
emits a `StateChange` output with the values Aeron's ELECTION_STATE_CHANGE event logs.

Errors are Python exceptions shaped like Aeron's (`ClusterEvent`, `ClusterException`,
`TimeoutException`): their `str()` is Java's `getMessage()`, category first ("WARN - ..."), which
is the reason Aeron logs when `handle_error` sends the election back to INIT.

`next_deadline_ns()` tells the agent the earliest time at which this state could act without a new
input, so the driver can jump over idle milliseconds.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING

from engine.model import members as cm
from engine.model.exceptions import ClusterEvent, ClusterException, TimeoutException
from engine.model.members import NULL_POSITION, NULL_VALUE, ClusterMember
from formats.cluster_codecs import (
    AppendPosition,
    BooleanType,
    CanvassPosition,
    CatchupPosition,
    NewLeadershipTerm,
    RequestVote,
    Vote,
)
from formats.cluster_codecs_ext import with_commit_position

if TYPE_CHECKING:
    from engine.model.agent_surface import ElectionAgent

DAY_NS = 86_400 * 1_000_000_000
NULL_SESSION_ID = -1
APPEND_POSITION_FLAG_NONE = 0
APPEND_POSITION_FLAG_CATCHUP = 1


class ElectionState(enum.Enum):
    """Aeron's `ElectionState`; the value is the code written to the election-state counter."""

    INIT = 0
    CANVASS = 1
    NOMINATE = 2
    CANDIDATE_BALLOT = 3
    FOLLOWER_BALLOT = 4
    LEADER_LOG_REPLICATION = 5
    LEADER_REPLAY = 6
    LEADER_INIT = 7
    LEADER_READY = 8
    FOLLOWER_LOG_REPLICATION = 9
    FOLLOWER_REPLAY = 10
    FOLLOWER_CATCHUP_INIT = 11
    FOLLOWER_CATCHUP_AWAIT = 12
    FOLLOWER_CATCHUP = 13
    FOLLOWER_LOG_INIT = 14
    FOLLOWER_LOG_AWAIT = 15
    FOLLOWER_READY = 16
    CLOSED = 17

    @property
    def code(self) -> int:
        return self.value

    @classmethod
    def from_code(cls, code: int) -> ElectionState:
        try:
            return cls(code)
        except ValueError:
            raise ValueError(f"invalid election state counter code: {code}") from None


S = ElectionState


class Election:
    """One election, as `io.aeron.cluster.Election` holds it (field names are Aeron's)."""

    __slots__ = (
        "agent",
        "members",
        "member_by_id",
        "this_member",
        "config",
        "flags",
        "initial_log_leadership_term_id",
        "initial_time_of_last_update_ns",
        "initial_term_base_log_position",
        "is_node_startup",
        "time_of_last_state_change_ns",
        "time_of_last_update_ns",
        "time_of_last_commit_position_update_ns",
        "nomination_deadline_ns",
        "log_position",
        "append_position",
        "catchup_join_position",
        "catchup_commit_position",
        "replication_leadership_term_id",
        "replication_stop_position",
        "replication_deadline_ns",
        "replication_term_base_log_position",
        "replication_commit_position",
        "leader_recording_id",
        "leadership_term_id",
        "log_leadership_term_id",
        "candidate_term_id",
        "last_published_commit_position",
        "log_session_id",
        "graceful_closed_leader_id",
        "is_first_init",
        "is_leader_startup",
        "is_extended_canvass",
        "leader_member",
        "state",
        "log_subscription",
        "log_replay",
        "log_replication",
        "notified_commit_position",
    )

    def __init__(
        self,
        agent: ElectionAgent,
        *,
        is_node_startup: bool,
        graceful_closed_leader_id: int,
        leadership_term_id: int,
        term_base_log_position: int,
        log_position: int,
        append_position: int,
    ) -> None:
        """§2.0: starting values, and the single-node shortcut (straight to LEADER_LOG_REPLICATION)."""
        self.agent = agent
        self.members = agent.members
        self.member_by_id = agent.member_by_id
        self.this_member = agent.this_member
        self.config = agent.config
        self.flags = agent.flags
        self.is_node_startup = is_node_startup
        self.is_extended_canvass = is_node_startup
        self.graceful_closed_leader_id = graceful_closed_leader_id
        self.log_position = log_position
        self.append_position = append_position
        self.log_leadership_term_id = leadership_term_id
        self.initial_log_leadership_term_id = leadership_term_id
        self.initial_term_base_log_position = term_base_log_position
        self.leadership_term_id = leadership_term_id
        self.candidate_term_id = leadership_term_id
        self.catchup_join_position = NULL_POSITION
        self.catchup_commit_position = 0
        self.replication_leadership_term_id = NULL_VALUE
        self.replication_stop_position = NULL_POSITION
        self.replication_deadline_ns = 0
        self.replication_term_base_log_position = NULL_VALUE
        self.replication_commit_position = 0
        self.leader_recording_id = NULL_VALUE
        self.last_published_commit_position = 0
        self.log_session_id = NULL_SESSION_ID
        self.is_first_init = True
        self.is_leader_startup = False
        self.leader_member: ClusterMember | None = None
        self.state = S.INIT
        self.log_subscription = None
        self.log_replay = None
        self.log_replication = None
        self.nomination_deadline_ns = 0
        self.time_of_last_state_change_ns = 0
        # 1.50.0 (`follower_replay_bounded_by_commit`): the commit position the leader has announced.
        self.notified_commit_position = 0

        now_ns = agent.clock_ns()
        self.initial_time_of_last_update_ns = now_ns - DAY_NS
        self.time_of_last_update_ns = self.initial_time_of_last_update_ns
        self.time_of_last_commit_position_update_ns = self.initial_time_of_last_update_ns
        agent.election_state_code = S.INIT.code
        if self.flags.new_election_event:
            agent.election_count += 1

        # Since 1.50.1/1.51.0 the single node goes through INIT like everyone else (`_init` bumps the term).
        if self._is_single_node() and not self.flags.single_node_term_bump_in_init:
            self.candidate_term_id = max(
                leadership_term_id + 1, agent.node_state.candidate_term.candidate_term_id + 1
            )
            self.leadership_term_id = self.candidate_term_id
            self.leader_member = self.this_member
            agent.update_candidate_term_id(self.candidate_term_id, log_position, agent.epoch_ms())
            self._state(S.LEADER_LOG_REPLICATION, now_ns, "")

    # -- queries the agent uses --------------------------------------------------------------------------

    def leader(self) -> ClusterMember | None:
        return self.leader_member

    def _is_single_node(self) -> bool:
        return len(self.members) == 1 and self.this_member.id == self.members[0].id

    def _answers_as_leader(self) -> bool:
        """Whether to answer a lagging member with NewLeadershipTerm: by role since 1.43.0, by state before."""
        if self.flags.leader_role_from_log_replication:
            return self.agent.role is self.agent.Role.LEADER
        return self.state in (S.LEADER_LOG_REPLICATION, S.LEADER_REPLAY, S.LEADER_INIT, S.LEADER_READY)

    # -- the duty cycle ------------------------------------------------------------------------------------

    def do_work(self, now_ns: int) -> int:
        return _STATE_HANDLERS[self.state](self, now_ns)

    def handle_error(self, now_ns: int, ex: BaseException) -> None:
        """§3.11: logPosition = the commit counter, then INIT with the exception's message as reason."""
        self.agent.count_error(ex)
        self.log_position = self.agent.commit_position
        self._state(S.INIT, now_ns, str(ex))

    # -- message handlers (§3) -----------------------------------------------------------------------------

    def on_recording_signal(self, correlation_id: int, recording_id: int, position: int, signal: str) -> None:
        """§3.8."""
        if self.state is S.INIT:
            return
        if self.log_replication is not None:
            self.log_replication.on_signal(correlation_id, recording_id, position, signal)
            if self.log_replication.recording_id != NULL_VALUE:
                self.agent.set_log_recording_id(self.log_replication.recording_id)

    def on_canvass_position(
        self,
        log_leadership_term_id: int,
        log_position: int,
        leadership_term_id: int,
        follower_member_id: int,
        protocol_version: int,
    ) -> None:
        """§3.1."""
        if self.state is S.INIT:
            return
        if follower_member_id == self.graceful_closed_leader_id:
            self.graceful_closed_leader_id = NULL_VALUE
        follower = self.member_by_id.get(follower_member_id)
        if follower is not None and self.this_member.id != follower_member_id:
            follower.leadership_term_id = log_leadership_term_id
            follower.log_position = log_position
            if self.flags.consistent_follower_positions:
                follower.time_of_last_append_position_ns = self.agent.clock_ns()
            if log_leadership_term_id < self.leadership_term_id:
                if self._answers_as_leader():
                    self._publish_new_leadership_term(follower, log_leadership_term_id, self.agent.cluster_time())
            elif log_leadership_term_id > self.leadership_term_id:
                if self.state in (S.LEADER_LOG_REPLICATION, S.LEADER_READY):
                    raise ClusterEvent("potential new election in progress")

    def on_request_vote(
        self,
        log_leadership_term_id: int,
        log_position: int,
        candidate_term_id: int,
        candidate_id: int,
        protocol_version: int,
    ) -> None:
        """§3.2.  The node-state logPosition written is the *candidate's* (the parameter hides the field)."""
        if self.state is S.INIT or candidate_id == self.this_member.id:
            return
        agent = self.agent
        if candidate_term_id <= self.candidate_term_id:
            self._place_vote(candidate_term_id, candidate_id, False)
        elif cm.compare_log(self.log_leadership_term_id, self.append_position, log_leadership_term_id, log_position) > 0:
            self.candidate_term_id = agent.propose_max_candidate_term_id(candidate_term_id, log_position, agent.epoch_ms())
            if not self.flags.worse_log_vote_keeps_state:
                # Before 1.43.0 (258555b19c): back to INIT, then the NO vote.
                self._state(S.INIT, agent.clock_ns(), "")
                self._place_vote(candidate_term_id, candidate_id, False)
                return
            self._place_vote(candidate_term_id, candidate_id, False)
            candidate = self.member_by_id.get(candidate_id)
            if candidate is not None and self._answers_as_leader():
                self._publish_new_leadership_term(candidate, self.log_leadership_term_id, agent.cluster_time())
        elif self.state in (S.CANVASS, S.NOMINATE, S.CANDIDATE_BALLOT, S.FOLLOWER_BALLOT):
            now_ns = agent.clock_ns()
            self.candidate_term_id = agent.propose_max_candidate_term_id(
                candidate_term_id, log_position, now_ns // 1_000_000
            )
            self._place_vote(candidate_term_id, candidate_id, True)
            self._state(S.FOLLOWER_BALLOT, now_ns, "")

    def on_vote(
        self,
        candidate_term_id: int,
        log_leadership_term_id: int,
        log_position: int,
        candidate_member_id: int,
        follower_member_id: int,
        vote: bool,
    ) -> None:
        """§3.3."""
        if self.state is S.INIT:
            return
        if (
            self.state is S.CANDIDATE_BALLOT
            and candidate_term_id == self.candidate_term_id
            and candidate_member_id == self.this_member.id
        ):
            follower = self.member_by_id.get(follower_member_id)
            if follower is not None:
                follower.candidate_term_id = candidate_term_id
                follower.leadership_term_id = log_leadership_term_id
                follower.log_position = log_position
                follower.vote = vote

    def on_new_leadership_term(
        self,
        log_leadership_term_id: int,
        next_leadership_term_id: int,
        next_term_base_log_position: int,
        next_log_position: int,
        leadership_term_id: int,
        term_base_log_position: int,
        log_position: int,
        leader_recording_id: int,
        timestamp: int,
        leader_member_id: int,
        log_session_id: int,
        is_startup: bool,
        *,
        commit_position: int | None = None,
    ) -> None:
        """§3.4.  ``commit_position``: NewLeadershipTerm's schema-v15 field (Aeron 1.50.0), when sent."""
        if self.state is S.INIT:
            return
        leader = self.member_by_id.get(leader_member_id)
        if leader is None or (leader_member_id == self.this_member.id and leadership_term_id == self.leadership_term_id):
            return
        if leader_member_id == self.graceful_closed_leader_id:
            self.graceful_closed_leader_id = NULL_VALUE
        agent = self.agent
        if (
            self.state in (S.FOLLOWER_BALLOT, S.CANDIDATE_BALLOT) and leadership_term_id == self.candidate_term_id
        ) or self.state is S.CANVASS:
            if log_leadership_term_id == self.log_leadership_term_id:
                if next_term_base_log_position != NULL_POSITION and next_term_base_log_position < self.append_position:
                    self._on_truncate_log_entry(
                        self.this_member.id,
                        self.state,
                        log_leadership_term_id,
                        self.leadership_term_id,
                        self.candidate_term_id,
                        agent.commit_position,
                        self.log_position,
                        self.append_position,
                        self.append_position if self.flags.append_position_reset_on_truncation else log_position,
                        next_term_base_log_position,
                    )
                self.leader_member = leader
                self.is_leader_startup = is_startup
                self.leadership_term_id = leadership_term_id
                self.candidate_term_id = max(leadership_term_id, self.candidate_term_id)
                self.log_session_id = log_session_id
                self.leader_recording_id = leader_recording_id
                self.catchup_join_position = log_position if self.append_position < log_position else NULL_POSITION
                if self.flags.follower_replay_bounded_by_commit and commit_position is not None:
                    self.notified_commit_position = commit_position

                if self.append_position < term_base_log_position:
                    if next_leadership_term_id != NULL_VALUE:
                        if self.append_position < next_term_base_log_position:
                            self.replication_leadership_term_id = log_leadership_term_id
                            self.replication_stop_position = next_term_base_log_position
                            # An open but uncommitted term: its base is already in recording.log.
                            self.replication_term_base_log_position = NULL_VALUE
                            self._state(S.FOLLOWER_LOG_REPLICATION, agent.clock_ns(), "")
                        elif self.append_position == next_term_base_log_position:
                            if next_log_position != NULL_POSITION:
                                self.replication_leadership_term_id = next_leadership_term_id
                                self.replication_stop_position = next_log_position
                                self.replication_term_base_log_position = next_term_base_log_position
                                self._state(S.FOLLOWER_LOG_REPLICATION, agent.clock_ns(), "")
                    else:
                        raise ClusterException(
                            f"invalid newLeadershipTerm - this.appendPosition={self.append_position}"
                            f" < termBaseLogPosition={term_base_log_position}"
                            f" and nextLeadershipTermId={next_leadership_term_id}"
                            f", logLeadershipTermId={log_leadership_term_id}"
                            f", nextTermBaseLogPosition={next_term_base_log_position}"
                            f", nextLogPosition={next_log_position}, leadershipTermId={leadership_term_id}"
                            f", termBaseLogPosition={term_base_log_position}, logPosition={log_position}"
                            f", leaderRecordingId={leader_recording_id}, leaderMemberId={leader_member_id}"
                            f", logSessionId={log_session_id}, isStartup={'true' if is_startup else 'false'}"
                        )
                else:
                    self._state(S.FOLLOWER_REPLAY, agent.clock_ns(), "")
            else:
                self._state(S.CANVASS, agent.clock_ns(), "")

        if (
            self.state is S.FOLLOWER_LOG_REPLICATION
            and self.leader_member is not None
            and leader_member_id == self.leader_member.id
        ):
            self.replication_deadline_ns = agent.clock_ns() + self.config.leader_heartbeat_timeout_ns

    def on_append_position(self, leadership_term_id: int, log_position: int, follower_member_id: int, flags: int) -> None:
        """§3.5."""
        if self.state is S.INIT:
            return
        if leadership_term_id <= self.leadership_term_id:
            follower = self.member_by_id.get(follower_member_id)
            if follower is not None:
                follower.leadership_term_id = leadership_term_id
                follower.log_position = log_position
                follower.time_of_last_append_position_ns = self.agent.clock_ns()
                self.agent.track_catchup_completion(follower, leadership_term_id, flags)

    def on_commit_position(self, leadership_term_id: int, log_position: int, leader_member_id: int) -> None:
        """§3.6.  In FOLLOWER_LOG_REPLICATION the term is not checked (Aeron does not)."""
        if self.state is S.INIT:
            return
        leader = self.leader_member
        if (
            leadership_term_id == self.leadership_term_id
            and self.catchup_join_position != NULL_POSITION
            and self.state is S.FOLLOWER_CATCHUP
            and leader is not None
            and leader_member_id == leader.id
        ):
            self.catchup_commit_position = max(self.catchup_commit_position, log_position)
            if self.flags.follower_replay_bounded_by_commit:
                self.notified_commit_position = log_position
        elif self.state is S.FOLLOWER_LOG_REPLICATION and leader is not None and leader_member_id == leader.id:
            self.replication_commit_position = max(self.replication_commit_position, log_position)
            if self.flags.follower_replay_bounded_by_commit:
                self.notified_commit_position = log_position
            self.replication_deadline_ns = self.agent.clock_ns() + self.config.leader_heartbeat_timeout_ns
        elif leadership_term_id > self.leadership_term_id and self.state is S.LEADER_READY:
            if self.flags.replay_reasons:
                # 1.49.0 names who and where (the text, double space and closing parenthesis as Aeron's).
                raise ClusterEvent(
                    "new leader detected due to commit position - "
                    f" memberId={self.this_member.id}"
                    f" this.leadershipTermId={self.leadership_term_id}"
                    f" this.leaderMemberId={leader.id if leader is not None else NULL_VALUE}"
                    f" this.logPosition={self.log_position}"
                    f" newLeadershipTermId={leadership_term_id}"
                    f" newLeaderMemberId={leader_member_id}"
                    f" newCommitPosition={log_position})"
                )
            raise ClusterEvent("new leader detected due to commit position")

    def on_replay_new_leadership_term_event(
        self, leadership_term_id: int, log_position: int, timestamp: int, term_base_log_position: int
    ) -> None:
        """§3.7: only FOLLOWER_CATCHUP and FOLLOWER_REPLAY act on it."""
        if self.state is S.INIT:
            return
        if self.state in (S.FOLLOWER_CATCHUP, S.FOLLOWER_REPLAY):
            now_ns = self.agent.cluster_time_to_ns(timestamp)
            self._ensure_recording_log_coherent(leadership_term_id, term_base_log_position, NULL_VALUE, now_ns)
            self.log_position = log_position
            self.log_leadership_term_id = leadership_term_id

    def _on_truncate_log_entry(
        self,
        member_id: int,
        state: ElectionState,
        log_leadership_term_id: int,
        leadership_term_id: int,
        candidate_term_id: int,
        commit_position: int,
        log_position: int,
        append_position: int,
        old_position: int,
        new_position: int,
    ) -> None:
        """§3.9: truncate through the agent, then always throw (→ INIT)."""
        self.agent.truncate_log_entry(log_leadership_term_id, new_position)
        if self.flags.append_position_reset_on_truncation:
            # 1.50.0: the election's appendPosition follows the truncation at once.
            self.append_position = new_position
        raise ClusterEvent(
            f"Truncating Cluster Log - memberId={member_id} state={state.name}"
            f" this.logLeadershipTermId={log_leadership_term_id} this.leadershipTermId={leadership_term_id}"
            f" this.candidateTermId={candidate_term_id} this.commitPosition={commit_position}"
            f" this.logPosition={log_position} this.appendPosition={append_position}"
            f" oldPosition={old_position} newPosition={new_position}"
        )

    # -- state handlers (§2) -------------------------------------------------------------------------------

    def _init(self, now_ns: int) -> int:
        """§2.1."""
        if self.is_first_init:
            self.is_first_init = False
            if not self.is_node_startup:
                self._prepare_for_new_leadership(now_ns)
        else:
            self._stop_log_replication()
            self._stop_catchup()
            self._prepare_for_new_leadership(now_ns)
            self.log_session_id = NULL_SESSION_ID
            self._stop_replay()
            if self.log_subscription is not None:
                self.agent.close_log_subscription()
                self.log_subscription = None

        if self.flags.follower_replay_bounded_by_commit:
            self.notified_commit_position = 0
        self.candidate_term_id = max(self.agent.node_state.candidate_term.candidate_term_id, self.leadership_term_id)
        if self._is_single_node():
            if self.flags.single_node_term_bump_in_init:
                # 1.50.1/1.51.0 (#1932): every election of a single node moves to a new term.
                agent = self.agent
                self.candidate_term_id = max(
                    self.leadership_term_id + 1, agent.node_state.candidate_term.candidate_term_id + 1
                )
                self.leadership_term_id = self.candidate_term_id
                self.leader_member = self.this_member
                agent.update_candidate_term_id(self.candidate_term_id, self.log_position, agent.epoch_ms())
            # Without the flag a re-election reuses leadershipTermId: the bug #1932 fixed.
            self._state(S.LEADER_LOG_REPLICATION, now_ns, "")
        else:
            self._state(S.CANVASS, now_ns, "")
        return 1

    def _canvass(self, now_ns: int) -> int:
        """§2.2."""
        work_count = 0
        if self._has_update_interval_expired(now_ns, self.config.election_status_interval_ns):
            self.time_of_last_update_ns = now_ns
            self._publish_canvass_position()
            work_count += 1

        if self.agent.is_passive or (
            self.config.appointed_leader_id != NULL_VALUE and self.config.appointed_leader_id != self.this_member.id
        ):
            return work_count

        if self._is_canvass_candidate(now_ns):
            delay_ns = self.agent.draw_nomination_delay_ns()
            self.nomination_deadline_ns = now_ns + delay_ns
            self._state(S.NOMINATE, now_ns, "")
            work_count += 1
        return work_count

    def canvass_deadline_ns(self) -> int:
        if self.is_extended_canvass:
            return self.time_of_last_state_change_ns + self.config.startup_canvass_timeout_ns
        if not self.flags.canvass_deadline_from_leader_update:
            return self.time_of_last_state_change_ns + self.config.election_timeout_ns
        return self.agent.time_of_last_leader_update_ns + self.config.leader_heartbeat_timeout_ns

    def _is_canvass_candidate(self, now_ns: int) -> bool:
        if self.flags.unanimous_or_timeout_ballot:
            graceful = self.graceful_closed_leader_id if self.flags.graceful_closed_leader else NULL_VALUE
            if cm.is_unanimous_candidate(self.members, self.this_member, graceful):
                return True
        elif cm.is_unanimous_candidate_1_40(self.members, self.this_member):
            return True
        return now_ns >= self.canvass_deadline_ns() and cm.is_quorum_candidate(self.members, self.this_member)

    def _nominate(self, now_ns: int) -> int:
        """§2.3."""
        if now_ns >= self.nomination_deadline_ns:
            agent = self.agent
            self.candidate_term_id = agent.propose_max_candidate_term_id(
                self.candidate_term_id + 1, self.log_position, agent.epoch_ms()
            )
            cm.become_candidate(self.members, self.candidate_term_id, self.this_member.id)
            self._state(S.CANDIDATE_BALLOT, now_ns, "")
            return 1
        if self.flags.nominate_sends_canvass and self._has_update_interval_expired(
            now_ns, self.config.election_status_interval_ns
        ):
            self.time_of_last_update_ns = now_ns
            self._publish_canvass_position()
            return 1
        return 0

    def _candidate_ballot(self, now_ns: int) -> int:
        """§2.4 (and 1.40's rules when `unanimous_or_timeout_ballot` is off, §8.2)."""
        work_count = 0
        members = self.members
        if self.flags.unanimous_or_timeout_ballot:
            graceful = self.graceful_closed_leader_id if self.flags.graceful_closed_leader else NULL_VALUE
            won_now = cm.is_unanimous_leader(members, self.candidate_term_id, graceful)
        else:
            won_now = cm.has_won_vote_on_full_count(
                members, self.candidate_term_id
            ) or cm.has_majority_vote_with_canvass_members(members, self.candidate_term_id)

        if won_now:
            self.leader_member = self.this_member
            self.leadership_term_id = self.candidate_term_id
            self._state(S.LEADER_LOG_REPLICATION, now_ns, "")
            work_count += 1
        elif now_ns >= self.time_of_last_state_change_ns + self.config.election_timeout_ns:
            if self.flags.unanimous_or_timeout_ballot:
                won_at_timeout = cm.is_quorum_leader(members, self.candidate_term_id)
            else:
                won_at_timeout = cm.has_majority_vote(members, self.candidate_term_id)
            if won_at_timeout:
                self.leader_member = self.this_member
                self.leadership_term_id = self.candidate_term_id
                self._state(S.LEADER_LOG_REPLICATION, now_ns, "")
            else:
                self._state(S.CANVASS, now_ns, "")
            work_count += 1
        else:
            for member in members:
                if not member.is_ballot_sent:
                    work_count += 1
                    member.is_ballot_sent = self.agent.send(
                        member.id,
                        RequestVote(
                            log_leadership_term_id=self.log_leadership_term_id,
                            log_position=self.append_position,
                            candidate_term_id=self.candidate_term_id,
                            candidate_member_id=self.this_member.id,
                            protocol_version=self.agent.protocol_version,
                        ),
                    )
        return work_count

    def _follower_ballot(self, now_ns: int) -> int:
        """§2.5."""
        if now_ns >= self.time_of_last_state_change_ns + self.config.election_timeout_ns:
            self._state(S.CANVASS, now_ns, "")
            return 1
        return 0

    def _leader_log_replication(self, now_ns: int) -> int:
        """§2.6.  CommitPosition goes out with the agent's (previous) term: fixed only in 1.50.0."""
        work_count = 0
        self.this_member.log_position = self.append_position
        self.this_member.time_of_last_append_position_ns = now_ns
        quorum_position = self.agent.quorum_position()
        work_count += self._publish_new_leadership_term_on_interval(now_ns)
        work_count += self._publish_commit_position_on_interval(quorum_position, now_ns)
        if quorum_position >= self.append_position:
            work_count += 1
            self._state(S.LEADER_REPLAY, now_ns, "")
        return work_count

    def _leader_replay(self, now_ns: int) -> int:
        """§2.7."""
        work_count = 0
        if self.log_replay is None:
            if self.log_position < self.append_position:
                self.log_replay = self.agent.new_log_replay(self.log_position, self.append_position)
            else:
                self._state(S.LEADER_INIT, now_ns, "")
            work_count += 1
            self.is_leader_startup = self.is_node_startup
            cm.reset_log_positions(self.members, NULL_POSITION)
            self.this_member.leadership_term_id = self.leadership_term_id
            self.this_member.log_position = self.append_position
        else:
            work_count += self.log_replay.do_work()
            if self.log_replay.is_done():
                self._stop_replay()
                self.log_position = self.append_position
                self._state(S.LEADER_INIT, now_ns, "")
        work_count += self._publish_new_leadership_term_on_interval(now_ns)
        work_count += self._publish_commit_position_on_interval(self.agent.quorum_position(), now_ns)
        return work_count

    def _leader_init(self, now_ns: int) -> int:
        """§2.8."""
        self.agent.join_log_as_leader(self.leadership_term_id, self.log_position, self.log_session_id, self.is_leader_startup)
        self._update_recording_log(now_ns)
        self._state(S.LEADER_READY, now_ns, "")
        return 1

    def _leader_ready(self, now_ns: int) -> int:
        """§2.9."""
        agent = self.agent
        work_count = agent.update_leader_position(now_ns, self.append_position)
        work_count += self._publish_new_leadership_term_on_interval(now_ns)
        if self._is_leader_ready_complete(now_ns):
            if agent.append_new_leadership_term_event(now_ns):
                agent.election_complete(now_ns)
                self._state(S.CLOSED, now_ns, "")
                work_count += 1
        return work_count

    def _is_leader_ready_complete(self, now_ns: int) -> bool:
        if self.flags.active_member_quorum:
            # 1.50.0 (b999d5d91d, d37dfa873b): an active quorum at the position, no voters rule, no wait.
            return cm.has_active_quorum_at_position(
                self.members,
                self.this_member,
                self.log_position,
                self.leadership_term_id,
                now_ns,
                self.config.leader_heartbeat_timeout_ns,
            )
        return cm.has_voters_at_position(self.members, self.log_position, self.leadership_term_id) or (
            now_ns >= self.time_of_last_state_change_ns + self.config.leader_heartbeat_timeout_ns
            and cm.has_quorum_at_position(self.members, self.log_position, self.leadership_term_id)
        )

    def _follower_log_replication(self, now_ns: int) -> int:
        """§2.10."""
        work_count = 0
        agent = self.agent
        if self.log_replication is None:
            if self.append_position < self.replication_stop_position:
                leader = self.leader_member
                self.log_replication = agent.new_log_replication(
                    leader.archive_endpoint if leader else "",
                    leader.archive_response_endpoint if leader else None,
                    self.leader_recording_id,
                    self.replication_stop_position,
                    now_ns,
                )
                self.replication_deadline_ns = now_ns + self.config.leader_heartbeat_timeout_ns
                work_count += 1
            else:
                self._update_recording_log_for_replication(
                    self.replication_leadership_term_id,
                    self.replication_term_base_log_position,
                    self.replication_stop_position,
                    now_ns,
                )
                self._state(S.CANVASS, now_ns, "")
        else:
            work_count += agent.poll_archive_events()
            self.log_replication.poll(now_ns)
            replication_done = self.log_replication.has_replication_ended and self.log_replication.has_stopped
            # Published after sampling completion so the last position of the term goes out too.
            work_count += self._publish_follower_replication_position(now_ns)
            if replication_done:
                if self.replication_commit_position >= self.append_position:
                    agent.log_replication_ended(self.log_replication, self.leader_recording_id)
                    self.append_position = self.log_replication.position
                    self._stop_log_replication()
                    self._update_recording_log_for_replication(
                        self.replication_leadership_term_id,
                        self.replication_term_base_log_position,
                        self.replication_stop_position,
                        now_ns,
                    )
                    self._state(S.CANVASS, now_ns, "")
                    work_count += 1
                elif now_ns >= self.replication_deadline_ns:
                    raise TimeoutException("timeout awaiting commit position", "WARN")
        return work_count

    def _follower_replay(self, now_ns: int) -> int:
        """§2.11.  The replay runs to appendPosition even past the cluster's commit (fixed in 1.50.0).

        With `follower_replay_bounded_by_commit` (1.50.0) it stops at min(appendPosition,
        notifiedCommitPosition).  Choice of the model: the uncommitted rest of the local log is then
        taken through catch-up from the leader (catchupJoinPosition = appendPosition), which confirms it
        against the leader's log before the services see it.
        """
        work_count = 0
        reasons = self.flags.replay_reasons
        if self.log_replay is None:
            work_count += 1
            stop = self._replay_stop_position()
            if self.log_position < stop:
                self.log_replay = self.agent.new_log_replay(self.log_position, stop)
            else:
                self._leave_follower_replay(now_ns, "skip log replay" if reasons else "")
        else:
            work_count += self.log_replay.do_work()
            if self.log_replay.is_done():
                stop = self.log_replay.stop_position
                self._stop_replay()
                self.log_position = stop if self.flags.follower_replay_bounded_by_commit else self.append_position
                self._leave_follower_replay(now_ns, "log replay done" if reasons else "")
        return work_count

    def _replay_stop_position(self) -> int:
        if self.flags.follower_replay_bounded_by_commit:
            return min(self.append_position, max(self.notified_commit_position, self.log_position))
        return self.append_position

    def _leave_follower_replay(self, now_ns: int, reason: str) -> None:
        if (
            self.flags.follower_replay_bounded_by_commit
            and self.log_position < self.append_position
            and self.catchup_join_position == NULL_POSITION
        ):
            # The local log's uncommitted tail comes by catch-up.
            self.catchup_join_position = self.append_position
        next_state = S.FOLLOWER_CATCHUP_INIT if self.catchup_join_position != NULL_POSITION else S.FOLLOWER_LOG_INIT
        self._state(next_state, now_ns, reason)

    def _follower_catchup_init(self, now_ns: int) -> int:
        """§2.12."""
        agent = self.agent
        if self.log_subscription is None:
            self.log_subscription = agent.add_follower_subscription(self.log_session_id)
            agent.add_catchup_log_destination(self.this_member.catchup_endpoint)

        endpoint = self.this_member.catchup_endpoint
        catchup_endpoint: str | None
        if endpoint.endswith(":0"):
            resolved = agent.resolved_catchup_endpoint()
            catchup_endpoint = None if resolved is None else endpoint[:-2] + resolved[resolved.rfind(":") :]
        else:
            catchup_endpoint = endpoint

        leader = self.leader_member
        if catchup_endpoint is not None and leader is not None and agent.send(
            leader.id,
            CatchupPosition(
                leadership_term_id=self.leadership_term_id,
                log_position=self.log_position,
                follower_member_id=self.this_member.id,
                catchup_endpoint=catchup_endpoint,
            ),
        ):
            self.time_of_last_update_ns = now_ns
            agent.catchup_initiated(now_ns)
            self._state(S.FOLLOWER_CATCHUP_AWAIT, now_ns, "")
        elif now_ns >= self.time_of_last_state_change_ns + self.config.leader_heartbeat_timeout_ns:
            raise TimeoutException("failed to send catchup position", "WARN")
        return 1

    def _follower_catchup_await(self, now_ns: int) -> int:
        """§2.13."""
        work_count = 0
        agent = self.agent
        image = agent.find_log_image(self.log_session_id, self.log_position)
        timeout = now_ns >= self.time_of_last_state_change_ns + self.config.leader_heartbeat_timeout_ns
        if image is not None:
            self._verify_log_join_position("followerCatchupAwait", image.join_position)
            if agent.try_join_log_as_follower(image, self.is_leader_startup, now_ns):
                self._state(S.FOLLOWER_CATCHUP, now_ns, "")
                work_count += 1
            elif agent.is_log_subscription_errored():
                raise ClusterException(f"failed to add catchup log as follower - {agent.log_subscription_channel()}", "WARN")
            elif timeout:
                raise TimeoutException("failed to join catchup log as follower", "WARN")
        elif timeout:
            raise TimeoutException("failed to join catchup log", "WARN")
        return work_count

    def _follower_catchup(self, now_ns: int) -> int:
        """§2.14."""
        agent = self.agent
        limit = self.catchup_commit_position
        if self.flags.follower_replay_bounded_by_commit:
            limit = max(limit, self.notified_commit_position)
        work_count = agent.catchup_poll(limit, now_ns)
        if agent.live_log_destination is None and agent.is_catchup_near_live(
            max(self.catchup_join_position, self.catchup_commit_position)
        ):
            agent.add_live_log_destination(self.this_member.log_endpoint)
            work_count += 1
        position = agent.commit_position
        if (
            position >= self.catchup_join_position
            and position >= self.catchup_commit_position
            and agent.catchup_log_destination is None
            and agent.state is not agent.ModuleState.SNAPSHOT
        ):
            self.append_position = position
            self.log_position = position
            self._state(S.FOLLOWER_LOG_INIT, now_ns, "")
            work_count += 1
        return work_count

    def _follower_log_init(self, now_ns: int) -> int:
        """§2.15."""
        if self.log_subscription is None:
            if self.log_session_id != NULL_SESSION_ID:
                self.log_subscription = self.agent.add_follower_subscription(self.log_session_id)
                self.agent.add_live_log_destination(self.this_member.log_endpoint)
                self._state(S.FOLLOWER_LOG_AWAIT, now_ns, "")
        else:
            self._state(S.FOLLOWER_READY, now_ns, "")
        return 1

    def _follower_log_await(self, now_ns: int) -> int:
        """§2.16."""
        work_count = 0
        agent = self.agent
        image = agent.find_log_image(self.log_session_id, self.log_position)
        timeout = now_ns >= self.time_of_last_state_change_ns + self.config.leader_heartbeat_timeout_ns
        if image is not None:
            self._verify_log_join_position("followerLogAwait", image.join_position)
            if agent.try_join_log_as_follower(image, self.is_leader_startup, now_ns):
                self.append_position = image.join_position
                self.log_position = image.join_position
                self._update_recording_log(now_ns)
                self._state(S.FOLLOWER_READY, now_ns, "")
                work_count += 1
            elif timeout:
                raise TimeoutException("failed to join live log as follower", "WARN")
        elif agent.is_log_subscription_errored():
            raise ClusterException(f"failed to add live log as follower - {agent.log_subscription_channel()}", "WARN")
        elif timeout:
            raise TimeoutException("failed to join live log", "WARN")
        return work_count

    def _follower_ready(self, now_ns: int) -> int:
        """§2.17."""
        leader = self.leader_member
        if leader is not None and self.agent.send(
            leader.id,
            AppendPosition(
                leadership_term_id=self.leadership_term_id,
                log_position=self.log_position,
                follower_member_id=self.this_member.id,
                flags=APPEND_POSITION_FLAG_NONE,
            ),
        ):
            self.agent.election_complete(now_ns)
            self._state(S.CLOSED, now_ns, "")
        elif now_ns >= self.time_of_last_state_change_ns + self.config.leader_heartbeat_timeout_ns:
            raise TimeoutException("ready follower failed to notify leader", "WARN")
        return 1

    def _closed(self, now_ns: int) -> int:
        return 0

    # -- helpers -------------------------------------------------------------------------------------------

    def _publish_canvass_position(self) -> None:
        agent = self.agent
        message = CanvassPosition(
            log_leadership_term_id=self.log_leadership_term_id,
            log_position=self.append_position,
            leadership_term_id=self.leadership_term_id,
            follower_member_id=self.this_member.id,
            protocol_version=agent.protocol_version,
        )
        for member in self.members:
            if member.id != self.this_member.id:
                agent.send(member.id, message)

    def _place_vote(self, candidate_term_id: int, candidate_id: int, vote: bool) -> None:
        if candidate_id in self.member_by_id:
            self.agent.send(
                candidate_id,
                Vote(
                    candidate_term_id=candidate_term_id,
                    log_leadership_term_id=self.log_leadership_term_id,
                    log_position=self.append_position,
                    candidate_member_id=candidate_id,
                    follower_member_id=self.this_member.id,
                    vote=BooleanType.TRUE if vote else BooleanType.FALSE,
                ),
            )

    def _publish_new_leadership_term_on_interval(self, now_ns: int) -> int:
        if self._has_update_interval_expired(now_ns, self.config.leader_heartbeat_interval_ns):
            self.time_of_last_update_ns = now_ns
            timestamp = self.agent.ns_to_cluster_time(now_ns)
            for member in self.members:
                self._publish_new_leadership_term(member, self.log_leadership_term_id, timestamp)
            return 1
        return 0

    def _publish_commit_position_on_interval(self, quorum_position: int, now_ns: int) -> int:
        if self.flags.election_commit_bounded_by_append:
            # a9d7215d74 (1.50.0): never announce more than the leader itself has.
            quorum_position = min(self.append_position, quorum_position)
        if self.last_published_commit_position < quorum_position or (
            self.last_published_commit_position == quorum_position
            and now_ns - self.time_of_last_commit_position_update_ns >= self.config.leader_heartbeat_interval_ns
        ):
            self.time_of_last_commit_position_update_ns = now_ns
            self.last_published_commit_position = quorum_position
            # Before 1.50.0 this went out with the agent's (previous) term.
            term = self.leadership_term_id if self.flags.commit_position_election_term else None
            self.agent.publish_commit_position(quorum_position, term)
            return 1
        return 0

    def _publish_new_leadership_term(self, member: ClusterMember, log_leadership_term_id: int, timestamp: int) -> None:
        if member.id == self.this_member.id or self.log_session_id == NULL_SESSION_ID:
            return
        next_entry = self.agent.recording_log.find_term_entry(log_leadership_term_id + 1)
        if next_entry is not None:
            next_leadership_term_id = next_entry.leadership_term_id
            next_term_base_log_position = next_entry.term_base_log_position
            next_log_position = next_entry.log_position if next_entry.log_position != NULL_POSITION else self.append_position
        else:
            next_leadership_term_id = self.leadership_term_id
            next_term_base_log_position = self.append_position
            next_log_position = NULL_POSITION
        message = NewLeadershipTerm(
            log_leadership_term_id=log_leadership_term_id,
            next_leadership_term_id=next_leadership_term_id,
            next_term_base_log_position=next_term_base_log_position,
            next_log_position=next_log_position,
            leadership_term_id=self.leadership_term_id,
            term_base_log_position=self.append_position,
            log_position=self.append_position,
            leader_recording_id=self.agent.log_recording_id,
            timestamp=timestamp,
            leader_member_id=self.this_member.id,
            log_session_id=self.log_session_id,
            # Before 1.47.0 the Election did not fill in the configured appVersion (null value 0).
            app_version=self.config.app_version if self.flags.election_app_version else 0,
            is_startup=BooleanType.TRUE if self.is_leader_startup else BooleanType.FALSE,
        )
        if self.flags.follower_replay_bounded_by_commit:
            # Schema v15 (1.50.0): the quorum position goes with it, as Aeron's Election sends it.
            message = with_commit_position(message, self.agent.quorum_position())
        self.agent.send(member.id, message)

    def _publish_follower_replication_position(self, now_ns: int) -> int:
        position = self.log_replication.position
        if position > self.append_position or (
            position == self.append_position
            and self._has_update_interval_expired(now_ns, self.config.leader_heartbeat_interval_ns)
        ):
            leader = self.leader_member
            if leader is not None and self.agent.send(
                leader.id,
                AppendPosition(
                    leadership_term_id=self.leadership_term_id,
                    log_position=position,
                    follower_member_id=self.this_member.id,
                    flags=APPEND_POSITION_FLAG_NONE,
                ),
            ):
                self.append_position = position
                self.time_of_last_update_ns = now_ns
                return 1
        return 0

    def _has_update_interval_expired(self, now_ns: int, interval_ns: int) -> bool:
        return now_ns - self.time_of_last_update_ns >= interval_ns

    def _verify_log_join_position(self, state: str, join_position: int) -> None:
        if join_position != self.log_position:
            inequality = " less " if join_position < self.log_position else " greater "
            raise ClusterEvent(f"{state} - joinPosition={join_position}{inequality}than logPosition={self.log_position}")

    def _prepare_for_new_leadership(self, now_ns: int) -> None:
        last_append_position = self.agent.prepare_for_new_leadership(self.log_position, now_ns)
        if last_append_position != NULL_POSITION:
            self.append_position = last_append_position

    def _stop_catchup(self) -> None:
        self.agent.stop_all_catchups()
        self.catchup_join_position = NULL_POSITION
        self.catchup_commit_position = 0

    def _stop_replay(self) -> None:
        if self.log_replay is not None:
            self.log_replay.close()
            self.log_replay = None

    def _stop_log_replication(self) -> None:
        if self.log_replication is not None:
            self.log_replication.close()
            self.log_replication = None
        self.replication_commit_position = 0
        self.replication_deadline_ns = 0
        self.last_published_commit_position = 0

    def _ensure_recording_log_coherent(
        self, leadership_term_id: int, term_base_log_position: int, log_position: int, now_ns: int
    ) -> None:
        agent = self.agent
        recording_id = agent.log_recording_id
        if recording_id == NULL_VALUE:
            # Happens during replication if the initial appendPosition != 0 and nextTermLogPosition == appendPosition.
            return
        agent.ensure_recording_log_coherent(
            recording_id,
            self.initial_log_leadership_term_id,
            self.initial_term_base_log_position,
            leadership_term_id,
            term_base_log_position if term_base_log_position != NULL_VALUE else self.initial_term_base_log_position,
            log_position,
            now_ns,
        )

    def _update_recording_log(self, now_ns: int) -> None:
        self._ensure_recording_log_coherent(self.leadership_term_id, self.log_position, NULL_VALUE, now_ns)
        self.log_leadership_term_id = self.leadership_term_id

    def _update_recording_log_for_replication(
        self, leadership_term_id: int, term_base_log_position: int, log_position: int, now_ns: int
    ) -> None:
        self._ensure_recording_log_coherent(leadership_term_id, term_base_log_position, log_position, now_ns)
        self.log_leadership_term_id = leadership_term_id

    def _state(self, new_state: ElectionState, now_ns: int, reason: str) -> None:
        """The generic state change of §2.0: entry actions, the log hook, then the timers re-armed."""
        if new_state is self.state:
            return
        agent = self.agent
        old_state = self.state
        if not self.flags.state_logged_after_entry:
            self._log_state_change(old_state, new_state, reason)
        if old_state is S.CANVASS:
            self.is_extended_canvass = False

        if new_state is S.CANVASS:
            cm.reset(self.members)
            self.this_member.leadership_term_id = self.leadership_term_id
            self.this_member.log_position = self.append_position
            self.leader_member = None
            agent.set_role(agent.Role.FOLLOWER)
        elif new_state is S.CANDIDATE_BALLOT:
            agent.set_role(agent.Role.CANDIDATE)
        elif new_state is S.LEADER_LOG_REPLICATION:
            if self.flags.leader_role_from_log_replication:
                agent.set_role(agent.Role.LEADER)
            self.log_session_id = agent.add_log_publication(self.append_position)
        elif new_state is S.LEADER_INIT and not self.flags.leader_role_from_log_replication:
            agent.set_role(agent.Role.LEADER)  # before 1.43.0 the role changed only here
        elif new_state in (S.FOLLOWER_LOG_REPLICATION, S.FOLLOWER_REPLAY):
            agent.set_role(agent.Role.FOLLOWER)

        if self.flags.state_logged_after_entry:
            self._log_state_change(old_state, new_state, reason)
        self.state = new_state
        agent.election_state_code = new_state.code
        self.time_of_last_state_change_ns = now_ns
        self.time_of_last_update_ns = self.initial_time_of_last_update_ns
        self.time_of_last_commit_position_update_ns = self.initial_time_of_last_update_ns

    def _log_state_change(self, old_state: ElectionState, new_state: ElectionState, reason: str) -> None:
        self.agent.log_state_change(
            old_state,
            new_state,
            self.leader_member.id if self.leader_member is not None else NULL_VALUE,
            self.candidate_term_id,
            self.leadership_term_id,
            self.log_position,
            self.log_leadership_term_id,
            self.append_position,
            self.catchup_join_position,
            reason,
        )

    # -- scheduling -----------------------------------------------------------------------------------------

    def next_deadline_ns(self, after_ns: int) -> int | None:
        """The earliest time after ``after_ns`` at which `do_work` could act without a new input (None:
        only inputs can help).  It may be early (the driver then runs a cycle that does nothing), never
        late.  Deadlines already passed are left out: their state handler has seen them and waits for
        something else."""
        config = self.config
        state = self.state
        candidates: list[int] = []
        if state in (S.INIT, S.LEADER_INIT):
            candidates.append(after_ns + 1)  # these states always move on in their next cycle
        elif state in (S.CANVASS, S.NOMINATE):
            if state is S.CANVASS or self.flags.nominate_sends_canvass:
                candidates.append(self.time_of_last_update_ns + config.election_status_interval_ns)
            if state is S.CANVASS:
                candidates.append(self.canvass_deadline_ns())
            else:
                candidates.append(self.nomination_deadline_ns)
        elif state in (S.CANDIDATE_BALLOT, S.FOLLOWER_BALLOT):
            candidates.append(self.time_of_last_state_change_ns + config.election_timeout_ns)
        if state in (S.LEADER_REPLAY, S.FOLLOWER_REPLAY) and self.log_replay is not None:
            done_at = self.log_replay.done_at_ns  # a replay that takes the time it took (agent log)
            if done_at is not None:
                candidates.append(done_at)
        if state in (S.LEADER_LOG_REPLICATION, S.LEADER_REPLAY, S.LEADER_READY):
            candidates.append(self.time_of_last_update_ns + config.leader_heartbeat_interval_ns)
            if state is not S.LEADER_READY:
                candidates.append(self.time_of_last_commit_position_update_ns + config.leader_heartbeat_interval_ns)
            else:
                candidates.append(self.time_of_last_state_change_ns + config.leader_heartbeat_timeout_ns)
                candidates.append(self.agent.time_of_last_log_update_ns + config.leader_heartbeat_interval_ns)
        elif state is S.FOLLOWER_LOG_REPLICATION:
            candidates.append(self.time_of_last_update_ns + config.leader_heartbeat_interval_ns)
            candidates.append(self.replication_deadline_ns)
            if self.log_replication is not None:
                deadline = self.log_replication.next_deadline_ns()
                if deadline is not None:
                    candidates.append(deadline)
        elif state in (S.FOLLOWER_CATCHUP_INIT, S.FOLLOWER_CATCHUP_AWAIT, S.FOLLOWER_LOG_AWAIT, S.FOLLOWER_READY):
            candidates.append(self.time_of_last_state_change_ns + config.leader_heartbeat_timeout_ns)
            if self.agent.follower_recording_ns is not None:  # the log recording takes its recorded time
                candidates.append(self.agent.follower_recording_ns)
        elif state is S.FOLLOWER_CATCHUP:
            agent = self.agent
            candidates.append(agent.time_of_last_append_position_send_ns + config.leader_heartbeat_interval_ns)
            candidates.append(agent.time_of_last_append_position_update_ns + config.leader_heartbeat_timeout_ns + 1)
        future = [c for c in candidates if c > after_ns]
        return min(future) if future else None

    def to_json(self) -> dict:
        return {
            "state": self.state.name,
            "leaderMemberId": self.leader_member.id if self.leader_member is not None else NULL_VALUE,
            "candidateTermId": self.candidate_term_id,
            "leadershipTermId": self.leadership_term_id,
            "logLeadershipTermId": self.log_leadership_term_id,
            "logPosition": self.log_position,
            "appendPosition": self.append_position,
            "catchupJoinPosition": self.catchup_join_position,
            "catchupCommitPosition": self.catchup_commit_position,
            "isNodeStartup": self.is_node_startup,
            "isLeaderStartup": self.is_leader_startup,
            "isExtendedCanvass": self.is_extended_canvass,
            "gracefulClosedLeaderId": self.graceful_closed_leader_id,
            "logSessionId": self.log_session_id,
        }


_STATE_HANDLERS = {
    S.INIT: Election._init,
    S.CANVASS: Election._canvass,
    S.NOMINATE: Election._nominate,
    S.CANDIDATE_BALLOT: Election._candidate_ballot,
    S.FOLLOWER_BALLOT: Election._follower_ballot,
    S.LEADER_LOG_REPLICATION: Election._leader_log_replication,
    S.LEADER_REPLAY: Election._leader_replay,
    S.LEADER_INIT: Election._leader_init,
    S.LEADER_READY: Election._leader_ready,
    S.FOLLOWER_LOG_REPLICATION: Election._follower_log_replication,
    S.FOLLOWER_REPLAY: Election._follower_replay,
    S.FOLLOWER_CATCHUP_INIT: Election._follower_catchup_init,
    S.FOLLOWER_CATCHUP_AWAIT: Election._follower_catchup_await,
    S.FOLLOWER_CATCHUP: Election._follower_catchup,
    S.FOLLOWER_LOG_INIT: Election._follower_log_init,
    S.FOLLOWER_LOG_AWAIT: Election._follower_log_await,
    S.FOLLOWER_READY: Election._follower_ready,
    S.CLOSED: Election._closed,
}
