"""How faithfully a real capture replays: the model's run held against what the real members logged.

Theory of operation.  A *capture folder* is a directory holding a pcap/pcapng capture of a cluster's
traffic and one directory per member (its cluster files as copied after the incident, its
aeron-agent event log beside them) — the layout of ``../shared/reference/aeron-*-capture/*``.
`find_capture_folders` walks a tree for them, so a capture dropped in is picked up without code.

`run_capture` converts a folder as a user would (`recorder.convert.build` on the capture, the member
directories and, unless ``agent_logs=False``, the agent logs; a nested ``before/`` copy of the starting
state is never an input), replays it (`engine.replay.replay`), and `compare` holds the replay against
each member's own agent log (read separately, so that the run *without* agent logs is judged by
them too) and against the capture:

* ``ELECTION_STATE_CHANGE``: the sequence of ``from -> to`` changes, and the same with every field the
  line prints (leaderId, candidateTermId, leadershipTermId, logPosition, logLeadershipTermId,
  appendPosition, catchupPosition);
* ``ROLE_CHANGE``: the sequence of role changes;
* ``NEW_LEADERSHIP_TERM``: the NewLeadershipTerm messages the member handled (the agent logs them as
  `ConsensusModuleAgent.onNewLeadershipTerm` begins, i.e. when its consensus subscription polls them),
  against those the replay delivered to it while it was running, less those its model never polled
  (still held when the life ended, its module waiting for ever on something else:
  `replay_noting_unpolled`);
* RequestVote, Vote and NewLeadershipTerm that each member *sent*, per receiver: the capture's own
  record of them (``out`` events), against the model's sends (fields compared without ``timestamp``
  and ``logSessionId``, which a replay cannot know).

Each is scored the way issue 12 tables it: a logged item is *reproduced* when the model produces it
in order (a longest common subsequence), and an item the model produced that the member never did
counts against (``reproduced = in order - extra``, not below 0).  Pure apart from reading the files.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from formats.agent_log import AgentLogRecord, read_agent_log
from formats.events import Event

#: What an ELECTION_STATE_CHANGE line prints besides ``from -> to`` (Aeron 1.44 onwards).
STATE_FIELDS = ("leaderId", "candidateTermId", "leadershipTermId", "logPosition", "logLeadershipTermId",
                "appendPosition", "catchupPosition")
#: NewLeadershipTerm fields a member's NEW_LEADERSHIP_TERM line prints and a replay can know, by their
#: name in the message; the line calls ``leaderMemberId`` ``leaderId``.
NEW_TERM_FIELDS = ("logLeadershipTermId", "nextLeadershipTermId", "nextTermBaseLogPosition", "nextLogPosition",
                   "leadershipTermId", "termBaseLogPosition", "logPosition", "leaderRecordingId", "leaderMemberId",
                   "isStartup")
_LOGGED_AS = {"leaderMemberId": "leaderId"}
#: The messages whose every send is compared, per receiver.
SIGNIFICANT_SENDS = ("RequestVote", "Vote", "NewLeadershipTerm")
#: Fields of those that a replay cannot know (a wall clock; the media driver's random session id).
_UNKNOWABLE = ("timestamp", "logSessionId")
_CAPTURE_SUFFIXES = (".pcapng", ".pcap", ".cap")
_MEMBER_DIR = re.compile(r"(?:node|member)[-_]?(\d+)", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class CaptureFolder:
    """One real incident as recorded: its capture file, and each member's directory and agent log."""

    path: Path
    capture: Path
    member_dirs: Mapping[int, Path]
    agent_logs: Mapping[int, Path]

    @property
    def name(self) -> str:
        return self.path.name

    def inputs(self, *, agent_logs: bool = True) -> list[str]:
        """What a user would give `recount convert`: the capture, the member dirs, and the agent logs."""
        paths = [str(self.capture)] + [str(self.member_dirs[m]) for m in sorted(self.member_dirs)]
        if agent_logs:
            paths += [str(self.agent_logs[m]) for m in sorted(self.agent_logs)]
        return paths


def find_capture_folders(root: str | os.PathLike[str]) -> list[CaptureFolder]:
    """Every directory under ``root`` (``root`` included) that holds a capture file and member
    directories, in path order.  Of a pcap and a pcapng of the same packets, the pcapng is taken."""
    from recorder.discovery import input_kind

    found = []
    for directory, subdirectories, files in os.walk(root):
        subdirectories.sort()
        captures = sorted(f for f in files if f.lower().endswith(_CAPTURE_SUFFIXES))
        if not captures:
            continue
        capture = min(captures, key=lambda f: (not f.lower().endswith(".pcapng"), f))
        member_dirs: dict[int, Path] = {}
        agent_logs: dict[int, Path] = {}
        for name in subdirectories:
            member = _member_number(name)
            candidate = Path(directory, name)
            if member is None or input_kind(str(candidate)) != "cluster-dir":
                continue
            member_dirs[member] = candidate
            for log in sorted(candidate.iterdir()):
                if log.is_file() and input_kind(str(log)) == "agent-log":
                    agent_logs[member] = log
                    break
        if member_dirs:
            found.append(CaptureFolder(Path(directory), Path(directory, capture), member_dirs, agent_logs))
            subdirectories.clear()  # a capture folder's own directories are its members', not more captures
    return found


def _member_number(name: str) -> int | None:
    """N of a member directory named ``nodeN`` or ``memberN`` (how the captures lay members out)."""
    match = _MEMBER_DIR.fullmatch(name)
    return int(match.group(1)) if match else None


# --- the comparison --------------------------------------------------------------------------------------


def in_order(expected: Sequence[Any], actual: Sequence[Any]) -> int:
    """How many of ``expected`` appear in ``actual`` in the same order (a longest common subsequence)."""
    if not expected or not actual:
        return 0
    previous = [0] * (len(actual) + 1)
    for item in expected:
        current = [0]
        for j, other in enumerate(actual):
            current.append(previous[j] + 1 if item == other else max(previous[j + 1], current[j]))
        previous = current
    return previous[-1]


@dataclass(frozen=True, slots=True)
class Score:
    """One sequence held against its witness."""

    expected: int  #: items the witness shows
    modelled: int  #: items the model produced
    in_order: int  #: witness items the model produced in order

    @property
    def extra(self) -> int:
        """What the model produced that the witness never shows."""
        return self.modelled - self.in_order

    @property
    def reproduced(self) -> int:
        """Issue 12's count: in order, less what the real member never did."""
        return max(0, self.in_order - self.extra)

    @property
    def exact(self) -> bool:
        return self.in_order == self.expected == self.modelled

    def __add__(self, other: Score) -> Score:
        return Score(self.expected + other.expected, self.modelled + other.modelled, self.in_order + other.in_order)

    def to_json(self) -> dict[str, int]:
        return {"expected": self.expected, "modelled": self.modelled, "inOrder": self.in_order, "extra": self.extra,
                "reproduced": self.reproduced}

    @staticmethod
    def of(expected: Sequence[Any], modelled: Sequence[Any]) -> Score:
        return Score(len(expected), len(modelled), in_order(expected, modelled))


NO_SCORE = Score(0, 0, 0)
#: The scores a baseline keeps, by their JSON names.
BASELINE_KEYS = ("states", "statesWithFields", "roles", "newLeadershipTerms", "sends")


@dataclass(frozen=True, slots=True)
class MemberReport:
    member: int
    states: Score  #: ELECTION_STATE_CHANGE from -> to
    states_with_fields: Score
    roles: Score
    new_terms: Score  #: NewLeadershipTerm handled (NEW_LEADERSHIP_TERM lines) vs delivered
    sends: Mapping[str, Score]  #: "Vote->2" -> score of the member's sends of that type to that receiver
    #: The first state change where the model and the log part (index, logged, modelled), for a reader.
    first_difference: tuple[int, Any, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "member": self.member,
            "states": self.states.to_json(),
            "statesWithFields": self.states_with_fields.to_json(),
            "roles": self.roles.to_json(),
            "newLeadershipTerms": self.new_terms.to_json(),
            "sends": {key: score.to_json() for key, score in sorted(self.sends.items())},
            "firstDifference": None if self.first_difference is None else {
                "index": self.first_difference[0], "logged": self.first_difference[1],
                "modelled": self.first_difference[2]},
        }


@dataclass(frozen=True, slots=True)
class CaptureReport:
    name: str
    agent_logs: bool  #: whether the agent logs were inputs (they are the witness either way)
    divergences: int
    members: tuple[MemberReport, ...]
    convert_s: float = 0.0
    replay_s: float = 0.0
    notes: tuple[str, ...] = field(default=())
    #: The failed checks the divergence records hold (before pairing and collapsing into runs).
    divergence_checks: int = 0
    #: Divergence records by cause (engine.divergences): "evidence", "timing", "model".
    causes: Mapping[str, int] = field(default_factory=dict)
    #: The converted events and the trace records their replay gave (for a check that replays them again).
    events: tuple[Any, ...] = field(default=(), repr=False)
    records: tuple[Mapping[str, Any], ...] = field(default=(), repr=False)

    def total(self, what: str) -> Score:
        score = NO_SCORE
        for member in self.members:
            score = score + getattr(member, what)
        return score

    @property
    def sends(self) -> Score:
        score = NO_SCORE
        for member in self.members:
            for one in member.sends.values():
                score = score + one
        return score

    @property
    def conforms(self) -> bool:
        """No divergence, and every member's state changes (with their fields), role changes,
        NewLeadershipTerms handled and significant sends exactly as the witnesses show."""
        return self.divergences == 0 and all(
            m.states_with_fields.exact and m.roles.exact and m.new_terms.exact
            and all(score.exact for score in m.sends.values()) for m in self.members)

    def figures(self) -> dict[str, Any]:
        """The numbers a baseline keeps (`BASELINE_KEYS`): divergences and each score's reproduced/expected/extra."""
        return {"divergences": self.divergences, "divergenceChecks": self.divergence_checks,
                "divergencesFromModel": self.causes.get("model", 0),
                **{key: {"reproduced": score.reproduced, "expected": score.expected, "extra": score.extra}
                   for key, score in (("states", self.total("states")),
                                      ("statesWithFields", self.total("states_with_fields")),
                                      ("roles", self.total("roles")), ("newLeadershipTerms", self.total("new_terms")),
                                      ("sends", self.sends))}}

    def to_json(self) -> dict[str, Any]:
        return {"capture": self.name, "agentLogs": self.agent_logs, "divergences": self.divergences,
                "divergenceChecks": self.divergence_checks, "causes": dict(self.causes),
                "states": self.total("states").to_json(), "statesWithFields": self.total("states_with_fields").to_json(),
                "roles": self.total("roles").to_json(), "newLeadershipTerms": self.total("new_terms").to_json(),
                "sends": self.sends.to_json(), "members": [m.to_json() for m in self.members],
                "convertSeconds": round(self.convert_s, 3), "replaySeconds": round(self.replay_s, 3)}


@dataclass(frozen=True, slots=True)
class Witness:
    """What one member's agent log says it did (all its lives, in order)."""

    states: tuple[tuple[Any, ...], ...]  #: (from, to, *STATE_FIELDS)
    roles: tuple[tuple[str, str], ...]
    new_terms: tuple[tuple[Any, ...], ...]  #: NEW_TERM_FIELDS of each NewLeadershipTerm handled


def read_witness(path: str | os.PathLike[str], member: int) -> Witness:
    """The member's own lines of its agent log (a log may hold lines about other members too)."""
    log = read_agent_log(Path(path).read_text(encoding="utf-8", errors="replace"), source=str(path))
    states, roles, new_terms = [], [], []
    for record in log.records:
        if type(record) is not AgentLogRecord or record.fields.get("memberId", member) != member:
            continue
        fields = record.fields
        if record.event == "ELECTION_STATE_CHANGE":
            states.append((fields["from"], fields["to"], *(fields.get(k) for k in STATE_FIELDS)))
        elif record.event == "ROLE_CHANGE":
            roles.append((fields["from"], fields["to"]))
        elif record.event == "NEW_LEADERSHIP_TERM":
            new_terms.append(tuple(_normal(fields.get(_LOGGED_AS.get(k, k))) for k in NEW_TERM_FIELDS))
    return Witness(tuple(states), tuple(roles), tuple(new_terms))


def _running_deliveries(events: Iterable[Event], member: int,
                        unpolled: Sequence[Sequence[tuple[Any, ...]]] = ()) -> list[tuple[Any, ...]]:
    """The NewLeadershipTerms the replay delivered to ``member`` while its process ran and its model
    polled: ``unpolled`` holds, for each of its lives in order, those the model still held when the life
    ended (its module waiting, for ever, on something else: `replay_noting_unpolled`), which are the
    life's last deliveries and are left out, as the real module never logged them either."""
    running = False
    out: list[tuple[Any, ...]] = []
    life_start = 0
    lives = iter(unpolled)

    def end_life() -> None:
        held = list(next(lives, ()))
        if held and out[len(out) - len(held):] == held and len(out) - len(held) >= life_start:
            del out[len(out) - len(held):]

    for event in events:
        if event.node != member:
            continue
        if event.dir == "local":
            if event.type == "MemberStart":
                if running:
                    end_life()
                running = True
                life_start = len(out)
            elif event.type in ("MemberCrash", "MemberStop") and running:
                running = False
                end_life()
        elif running and event.dir == "in" and event.type == "NewLeadershipTerm":
            out.append(tuple(_normal(event.fields.get(k)) for k in NEW_TERM_FIELDS))
    if running:
        end_life()
    return out


def _message_term_key(message: Any) -> tuple[Any, ...]:
    """A decoded NewLeadershipTerm's `NEW_TERM_FIELDS`, as `_running_deliveries` keys a delivered one."""
    def plain(name: str) -> Any:
        value = getattr(message, re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower(), None)
        return _normal(getattr(value, "name", value))
    return tuple(plain(k) for k in NEW_TERM_FIELDS)


def replay_noting_unpolled(events: Sequence[Event]) -> tuple[list[dict[str, Any]], dict[int, list[list[tuple[Any, ...]]]]]:
    """`engine.replay.replay` of ``events``, and for each member, per life in order, the NewLeadershipTerms
    its model was delivered and never polled: still held when the life ended (at its MemberCrash or
    MemberStop, or at the end of the replay), because its module waited for ever on something else
    (h_five_members_leader_kill: member 3 in `awaitServicesReady` from 19:23:59.4 until it was killed,
    which its agent log shows by logging no NEW_LEADERSHIP_TERM, nor anything else, in those 90 s)."""
    from engine.replay import ReplaySession

    session = ReplaySession(events)
    records: list[dict[str, Any]] = []
    unpolled: dict[int, list[list[tuple[Any, ...]]]] = {}

    def note(member: int) -> None:
        one = session.members.get(member)
        held = [] if one is None else [_message_term_key(m) for m in one.node.held
                                       if type(m).__name__ == "NewLeadershipTerm"]
        unpolled.setdefault(member, []).append(held)

    while session.position < len(session):
        event, _ = session.event(session.position)
        if event.dir == "local" and event.type in ("MemberCrash", "MemberStop"):
            note(event.node)
        records.extend(session.step())
    for member in sorted(session.members):
        if session.members[member].node.is_running:
            note(member)
    records.extend(session.finish())
    return records, unpolled


def _normal(value: Any) -> Any:
    """A boolean as the agent log prints it and as a decoded message holds it (``'TRUE'``) alike."""
    if isinstance(value, str) and value.upper() in ("TRUE", "FALSE"):
        return value.upper() == "TRUE"
    return value


def _sends_key(fields: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted((k, v) for k, v in fields.items() if k not in _UNKNOWABLE))


def _runs(values: Iterable[Any]) -> list[Any]:
    """Consecutive repeats as one (a NewLeadershipTerm resent on every heartbeat is one decision)."""
    out: list[Any] = []
    for value in values:
        if not out or out[-1] != value:
            out.append(value)
    return out


def compare(events: Sequence[Event], records: Sequence[Mapping[str, Any]], witnesses: Mapping[int, Witness],
            unpolled: Mapping[int, Sequence[Sequence[tuple[Any, ...]]]] | None = None) -> tuple[MemberReport, ...]:
    """Each member that has a witness: the replay's ``records`` against its agent log, and the
    capture's sends (``out`` events in ``events``) against the model's; ``unpolled``: what
    `replay_noting_unpolled` found each member's model never polled."""
    reports = []
    for member in sorted(witnesses):
        witness = witnesses[member]
        modelled_states = [(r["from"], r["to"], *(r.get(k) for k in STATE_FIELDS)) for r in records
                           if r.get("kind") == "state" and r.get("node") == member]
        logged_pairs = [s[:2] for s in witness.states]
        modelled_pairs = [s[:2] for s in modelled_states]
        first = next(((i, a, b) for i, (a, b) in enumerate(zip(witness.states, modelled_states, strict=False))
                      if a != b), None)
        if first is None and len(witness.states) != len(modelled_states):
            n = min(len(witness.states), len(modelled_states))
            first = (n, witness.states[n] if n < len(witness.states) else None,
                     modelled_states[n] if n < len(modelled_states) else None)
        modelled_roles = [(r["from"], r["to"]) for r in records if r.get("kind") == "role" and r.get("node") == member]
        sends: dict[str, Score] = {}
        recorded: dict[str, list[Any]] = {}
        for event in events:
            if event.node == member and event.dir == "out" and event.type in SIGNIFICANT_SENDS:
                recorded.setdefault(f"{event.type}->{event.peer}", []).append(_sends_key(event.fields))
        produced: dict[str, list[Any]] = {}
        for record in records:
            if (record.get("kind") == "send" and record.get("node") == member
                    and record.get("type") in SIGNIFICANT_SENDS and record.get("channel") == "consensus"):
                produced.setdefault(f"{record['type']}->{record.get('peer')}", []).append(_sends_key(record["fields"]))
        for key in sorted(set(recorded) | set(produced)):
            sends[key] = Score.of(_runs(recorded.get(key, [])), _runs(produced.get(key, [])))
        reports.append(MemberReport(
            member=member,
            states=Score.of(logged_pairs, modelled_pairs),
            states_with_fields=Score.of(list(witness.states), modelled_states),
            roles=Score.of(list(witness.roles), modelled_roles),
            new_terms=Score.of(list(witness.new_terms), _running_deliveries(events, member, (unpolled or {}).get(member, ()))),
            sends=sends,
            first_difference=first,
        ))
    return tuple(reports)


def run_capture(folder: CaptureFolder, *, agent_logs: bool = True, config: Mapping[str, Any] | None = None
                ) -> CaptureReport:
    """Convert ``folder`` (with or without its agent logs), replay it, and `compare`."""
    import time

    from recorder.convert import build

    started = time.perf_counter()
    built = build(folder.inputs(agent_logs=agent_logs), config=config)
    converted = time.perf_counter()
    records, unpolled = replay_noting_unpolled(built.events)
    replayed = time.perf_counter()
    witnesses = {m: read_witness(path, m) for m, path in folder.agent_logs.items()}
    summary = records[-1] if records and records[-1].get("kind") == "summary" else {}
    causes: dict[str, int] = {}
    for verdict in (summary.get("verdicts") or {}).values():
        for cause in ("evidence", "timing", "model"):
            causes[cause] = causes.get(cause, 0) + verdict.get(cause, 0)
    return CaptureReport(
        name=folder.name,
        agent_logs=agent_logs,
        divergences=int(summary.get("divergences", 0)),
        divergence_checks=int(summary.get("divergenceChecks", summary.get("divergences", 0))),
        causes=causes,
        members=compare(built.events, records, witnesses, unpolled),
        convert_s=converted - started,
        replay_s=replayed - converted,
        notes=tuple(built.notes) + tuple(built.captured.notes if built.captured is not None else ()),
        events=tuple(built.events),
        records=tuple(records),
    )
