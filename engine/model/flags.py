"""Behaviour switches, one per election-relevant change of Aeron 1.40.0 … 1.51.0; defaults are 1.47.3.

Each field of `ModelFlags` names one change from aeron-election.md §8 and is True when the change
is in (the model behaves as the release that made the change and later ones do).  The defaults are
the changes Aeron 1.47.3 has: True for everything released up to 1.47.3, False for what came later.
Version-specific code in the engine sits behind ``self.flags.<name>`` checks, so that a version
bisect (issue 7) can switch one change at a time; `engine.versions` turns a release number into the
set of flags it has.

`FLAGS` is the catalogue: for every flag, the first release with the change (and releases it was
backported to), Aeron's commits, and what the model does on each side.  It is data, not code: the
`recount versions` listing, the bisect report and the tests read it.  Changes of §8 that are not
flags are in `LEFT_OUT`, each with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass(frozen=True, slots=True)
class ModelFlags:
    # -- 1.41.0 ----------------------------------------------------------------------------------------------
    #: #1383 and friends: a candidate wins early only on unanimity, and on a quorum with no NO vote only
    #: at the ballot timeout.  False: 1.40's `hasWonVoteOnFullCount` / `hasMajorityVoteWithCanvassMembers`
    #: at once, `hasMajorityVote` at the timeout, and an `isUnanimousCandidate` over every member.
    unanimous_or_timeout_ballot: bool = True
    #: The non-extended CANVASS deadline is `timeOfLastLeaderUpdateNs + leaderHeartbeatTimeoutNs`.
    #: False: 1.40's `timeOfLastStateChangeNs + electionTimeoutNs`.
    canvass_deadline_from_leader_update: bool = True
    #: e916f05c56: a gracefully closed leader is skipped by the unanimity checks.
    graceful_closed_leader: bool = True
    #: a9ddfb24b1 (#1418): candidateTermId lives in node-state.dat.  False: in cluster-mark.dat, which
    #: keeps the term only (the trace shows `markFile` records instead of `nodeState` ones).
    node_state_file: bool = True
    #: 44b772fcb6: only NewLeadershipTerm / CommitPosition of the current term or later move
    #: `timeOfLastLeaderUpdateNs`.  False: messages of stale terms move it too.
    leader_update_ignores_stale_terms: bool = True
    # -- 1.42.0 ----------------------------------------------------------------------------------------------
    #: c6f921bf6f (#1472), 83c89d9dec: a follower notices its leader's end of stream (a graceful close)
    #: and enters the election with that leader as `gracefulClosedLeaderId`.  False: the log recording
    #: ends first and the election starts ("log recording ended unexpectedly") without knowing the
    #: close was graceful, so the others wait for the gone leader's canvass until the deadline.
    graceful_leader_close_detection: bool = True
    # -- 1.43.0 ----------------------------------------------------------------------------------------------
    #: 258555b19c (backported to 1.41.5 as 30bc13756b; the real 1.41.7 capture's ROLE_CHANGE CANDIDATE ->
    #: LEADER at LEADER_LOG_REPLICATION showed the backports): a RequestVote with a higher term but a worse log gets a NO vote and the node stays in
    #: its state (a leader answers with NewLeadershipTerm).  False: NO, and the election goes back to INIT.
    worse_log_vote_keeps_state: bool = True
    #: 796d050c2b (backported to 1.41.5 as 5f90f54696): the role is LEADER from LEADER_LOG_REPLICATION and the canvass reply to lagging members
    #: goes by role.  False: the role becomes LEADER at LEADER_INIT and the reply goes by leader state.
    leader_role_from_log_replication: bool = True
    # -- 1.44.0 ----------------------------------------------------------------------------------------------
    #: 4d8760a757, 55769dd320: the election counter and the NEW_ELECTION event (the `election` records).
    #: False: no `election` record when an election starts.
    new_election_event: bool = True
    # -- 1.45.0 ----------------------------------------------------------------------------------------------
    #: cb1304daa1: ELECTION_STATE_CHANGE is logged after the new state's entry actions, so the change into
    #: LEADER_LOG_REPLICATION comes after the blocking add of the log publication (j_short_timeouts_leader_kill,
    #: member 1: ROLE_CHANGE at 19:27:45.044, the state change at .874).  False: logged before them.
    state_logged_after_entry: bool = True
    # -- 1.47.0 ----------------------------------------------------------------------------------------------
    #: 3c434a6e35 (backported to 1.46.6): NOMINATE keeps sending CanvassPosition on the status interval.
    #: False: NOMINATE sends nothing.
    nominate_sends_canvass: bool = True
    #: 986bcbfd6e: NewLeadershipTerm sent by the Election carries the configured appVersion.  False: it
    #: carries the field's null value 0 (modelled; the note says only "did not carry" it).
    election_app_version: bool = True
    #: 9872158490 (#1677): the reason is "log recording stopped: eos=<bool>".  False: "log recording stopped".
    recording_stopped_eos_reason: bool = True
    # -- 1.49.0 ----------------------------------------------------------------------------------------------
    #: 1dc29a7c44 and friends: FOLLOWER_REPLAY's exits give the reasons "skip log replay" / "log replay
    #: done", and "new leader detected due to commit position" says which leader and term.
    replay_reasons: bool = False
    # -- 1.50.0 ----------------------------------------------------------------------------------------------
    #: ae89386d1d (#1898): NewLeadershipTerm carries the leader's quorum position (schema v15
    #: `commitPosition`); the follower's election tracks it and CommitPosition as `notifiedCommitPosition`
    #: and FOLLOWER_REPLAY replays only to min(appendPosition, notifiedCommitPosition).  False: 1.47.3
    #: replays the whole local log, past the cluster's commit position.
    follower_replay_bounded_by_commit: bool = False
    #: ae89386d1d: CommitPosition sent in LEADER_LOG_REPLICATION / LEADER_REPLAY carries the election's
    #: (new) term.  False: the agent's previous term.
    commit_position_election_term: bool = False
    #: ae89386d1d: a truncation on NewLeadershipTerm also sets the election's appendPosition to the new
    #: end of the log.  False: appendPosition is left as it was until INIT re-reads the archive.
    append_position_reset_on_truncation: bool = False
    #: a9d7215d74: the election publishes min(leader appendPosition, quorum position) as commit position.
    #: False: the raw quorum position.
    election_commit_bounded_by_append: bool = False
    #: b999d5d91d, d37dfa873b: the quorum position and LEADER_READY's completion count only active
    #: members (an AppendPosition within the leader heartbeat timeout); LEADER_READY waits for an active
    #: quorum at the position instead of `hasVotersAtPosition`.  False: every member counts.
    active_member_quorum: bool = False
    #: 3593d8b347: CanvassPosition sets a member's `timeOfLastAppendPositionNs`; the agent's AppendPosition
    #: outside an election sets the member's `leadershipTermId` too.  False: neither.
    consistent_follower_positions: bool = False
    # -- 1.50.1 (906437c0de) / 1.51.0 (e2fba3f1b1, #1932) ------------------------------------------------
    #: A single-node cluster bumps its term (and writes node-state.dat) in INIT on every election, not only
    #: in the Election's constructor.  False: an INIT re-entry reuses the same leadershipTermId.
    single_node_term_bump_in_init: bool = False

    def changed_from(self, other: ModelFlags) -> list[str]:
        """Names of the flags that differ between ``other`` and ``self``, in catalogue order."""
        return [f.name for f in fields(self) if getattr(self, f.name) != getattr(other, f.name)]


@dataclass(frozen=True, slots=True)
class FlagInfo:
    """One change of aeron-election.md §8 as a flag: where it came from and what each side does."""

    name: str
    since: str  # the first release with the change
    commits: str
    summary: str  # one line: what the change is
    before: str  # what the model does with the flag off
    after: str  # ... and on
    backports: tuple[str, ...] = ()  # earlier release lines that got it in a patch release


FLAGS: tuple[FlagInfo, ...] = (
    FlagInfo(
        "unanimous_or_timeout_ballot", "1.41.0", "1292cb62d5, 67dd12214a, f856a264c6, 57f489516b (#1383), cb34d19ca5",
        "CANDIDATE_BALLOT win rule",
        "wins at once on a full count or a majority of the canvassed members, NO votes allowed; majority at the 1 s timeout",
        "wins at once only on unanimity; a quorum with no NO vote wins only at the 1 s timeout",
    ),
    FlagInfo(
        "canvass_deadline_from_leader_update", "1.41.0", "1292cb62d5, 57f489516b (#1383)",
        "non-extended CANVASS deadline",
        "1 s (electionTimeout) after entering CANVASS",
        "10 s (leaderHeartbeatTimeout) after the last message from a leader",
    ),
    FlagInfo(
        "graceful_closed_leader", "1.41.0", "e916f05c56",
        "gracefully closed leader skipped by unanimity",
        "unanimity needs every member, the gone leader included",
        "the gracefully closed leader is skipped (with the quorum check)",
    ),
    FlagInfo(
        "node_state_file", "1.41.0", "a9ddfb24b1 (#1418)",
        "node-state.dat holds candidateTermId",
        "candidateTermId is proposed into cluster-mark.dat (trace: `markFile` records)",
        "node-state.dat {candidateTermId, logPosition, timestamp} (trace: `nodeState` records)",
    ),
    FlagInfo(
        "leader_update_ignores_stale_terms", "1.41.0", "44b772fcb6",
        "stale-term messages do not count as leader activity",
        "any NewLeadershipTerm or CommitPosition moves timeOfLastLeaderUpdateNs",
        "only those whose term is at least the agent's move it",
    ),
    FlagInfo(
        "graceful_leader_close_detection", "1.42.0", "c6f921bf6f (#1472), 83c89d9dec",
        "graceful leader close detected from end of stream",
        "the log recording ends first: election 'log recording ended unexpectedly', no graceful leader, "
        "so CANVASS waits for the deadline",
        "'log disconnected from leader: eos=true' with the old leader as gracefulClosedLeaderId",
    ),
    FlagInfo(
        "worse_log_vote_keeps_state", "1.43.0", "258555b19c (backport 30bc13756b)",
        "vote NO on a worse log without restarting the election",
        "NO vote, then back to INIT (which may start a new election and truncate)",
        "NO vote, state kept; a leader answers with NewLeadershipTerm",
        backports=("1.41.5",),
    ),
    FlagInfo(
        "leader_role_from_log_replication", "1.43.0", "796d050c2b (backport 5f90f54696)",
        "LEADER role from LEADER_LOG_REPLICATION",
        "role LEADER only at LEADER_INIT; canvass replies go by leader state",
        "role LEADER from LEADER_LOG_REPLICATION; canvass replies go by role",
        backports=("1.41.5",),
    ),
    FlagInfo(
        "new_election_event", "1.44.0", "4d8760a757, 55769dd320",
        "election counter and NEW_ELECTION event",
        "no NEW_ELECTION event (no `election` trace records)",
        "NEW_ELECTION with the reason (an `election` trace record)",
    ),
    FlagInfo(
        "state_logged_after_entry", "1.45.0", "cb1304daa1",
        "ELECTION_STATE_CHANGE logged after the new state's entry actions",
        "the change is logged first (before LEADER_LOG_REPLICATION's log publication is added)",
        "logged after them: into LEADER_LOG_REPLICATION once the driver has added the log publication",
    ),
    FlagInfo(
        "nominate_sends_canvass", "1.47.0", "3c434a6e35 (backport d0849b535a)",
        "NOMINATE keeps publishing CanvassPosition",
        "NOMINATE sends nothing during the nomination delay",
        "CanvassPosition every status interval in NOMINATE too",
        backports=("1.46.6",),
    ),
    FlagInfo(
        "election_app_version", "1.47.0", "986bcbfd6e",
        "Election's NewLeadershipTerm carries appVersion",
        "appVersion left at its null value 0 (modelled)",
        "appVersion = the configured ctx.appVersion()",
    ),
    FlagInfo(
        "recording_stopped_eos_reason", "1.47.0", "9872158490 (#1677)",
        "'log recording stopped: eos=…' reason",
        "reason 'log recording stopped'",
        "reason 'log recording stopped: eos=<bool>'",
    ),
    FlagInfo(
        "replay_reasons", "1.49.0", "1dc29a7c44, 99bde88afd, 1fc0620878, a5e782ac5a",
        "reason texts on replay exits and commit-position leader detection",
        "empty reasons; 'new leader detected due to commit position'",
        "'skip log replay' / 'log replay done'; the commit-position text names member, terms and positions",
    ),
    FlagInfo(
        "follower_replay_bounded_by_commit", "1.50.0", "ae89386d1d (#1898)",
        "FOLLOWER_REPLAY stops at the commit position (NewLeadershipTerm v15 commitPosition)",
        "the follower replays its whole local log, past the cluster commit position",
        "NewLeadershipTerm carries commitPosition; replay to min(appendPosition, notified commit), the rest by catch-up",
    ),
    FlagInfo(
        "commit_position_election_term", "1.50.0", "ae89386d1d (#1898)",
        "election CommitPosition carries the new term",
        "CommitPosition in LEADER_LOG_REPLICATION/LEADER_REPLAY carries the agent's previous term",
        "it carries the election's term",
    ),
    FlagInfo(
        "append_position_reset_on_truncation", "1.50.0", "ae89386d1d (#1898)",
        "truncation resets the election's appendPosition",
        "appendPosition kept until INIT re-reads the archive stop position",
        "appendPosition = the truncation position at once",
    ),
    FlagInfo(
        "election_commit_bounded_by_append", "1.50.0", "a9d7215d74",
        "election commit = min(leader append, quorum)",
        "the raw quorum position is published as commit position",
        "min(leader appendPosition, quorum position)",
    ),
    FlagInfo(
        "active_member_quorum", "1.50.0", "b999d5d91d, d37dfa873b",
        "quorums count only active members",
        "quorum position and LEADER_READY count every member, crashed ones with stale positions too",
        "only members heard from within the leader heartbeat timeout count; LEADER_READY waits for an active quorum",
    ),
    FlagInfo(
        "consistent_follower_positions", "1.50.0", "3593d8b347",
        "consistent follower position updates",
        "CanvassPosition does not set timeOfLastAppendPositionNs; the agent's AppendPosition keeps the member's term",
        "CanvassPosition sets timeOfLastAppendPositionNs; the agent's AppendPosition sets leadershipTermId",
    ),
    FlagInfo(
        "single_node_term_bump_in_init", "1.51.0", "e2fba3f1b1 (#1932), backport 906437c0de",
        "single-node re-election bumps the term in INIT",
        "an INIT re-entry of a single-node cluster reuses the same leadershipTermId",
        "INIT raises the term and writes node-state.dat, as the constructor does",
        backports=("1.50.1",),
    ),
)

#: Changes of §8 (1.40.0 … 1.51.0) that are not flags, and why.
LEFT_OUT: tuple[tuple[str, str, str], ...] = (
    ("1.40.0", "ec28ca3da5, 24b600a1d4 → 754672c5cf",
     "in 1.40.0 itself, the oldest modelled release: every modelled version has them"),
    ("1.41.0", "2986b9fc8c (log publication at recoveryPlan.appendedLogPosition)",
     "the model keeps no publication position apart from the log's end, so the wrong start cannot be shown faithfully"),
    ("1.43.0", "f550f39e4e, 7659663d69 (ERRORED log subscription)",
     "the simulated media driver never fails a subscription"),
    ("1.43.0", "283ea2e0a9 (dynamic join removed)", "dynamic join is not modelled"),
    ("1.45.0", "90a8bff17c, 608eb012a4 (replay stalls on padding)", "the modelled log has no padding frames"),
    ("1.45.0", "f04734684c (archive response channel)", "changes an archive channel, not the election's behaviour"),
    ("1.48.4", "da0ed93e8c (extension doWork in elections)", "the ConsensusModuleExtension API is not modelled"),
    ("1.49.0", "passive-member checks removed", "no effect with a valid configuration (the note says so)"),
    ("1.49.1", "04e86469ba (NPE in catch-up)", "the model has no missing append-position counter to dereference"),
    ("1.50.0", "e6a3e709c0 ('log replay rejected', 'incomplete log replay')",
     "only the reason names are known; the bounded replay of ae89386d1d models the follower side"),
    ("1.50.0", "2239f98eaf, 928d32fbcf", "added and reverted: no net change"),
    ("1.50.2", "6f4dde7c66 (single-node liveness)",
     "the modelled active-member quorum always counts the leader itself, so the 1.50.0–1.50.1 regression cannot arise"),
)

FLAG_BY_NAME: dict[str, FlagInfo] = {info.name: info for info in FLAGS}

assert [f.name for f in fields(ModelFlags)] == [info.name for info in FLAGS], "FLAGS must follow ModelFlags' order"
