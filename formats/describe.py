"""The one canonical one-line description of every value recount shows.

`describe_message(msg, sender, receiver)` -> ``1→0 Vote candidateTermId=3 log=(5,96) ✓``, `describe_event(event)`
and `describe_record(record)` (a trace record of contract §3, as a dict) are what the CLI timeline,
the TUI, logs and the scenario-test transcripts all print, so that a line read in one place can be
searched for in another.

Rules that keep the lines compact and stable:

* ``S→R`` prefixes a message with its sender and receiver member ids; ``*`` stands for "every other
  member" and ``?`` for an unknown peer (a client, or a peer the capture does not name).
* Positions of a log are written ``log=(logLeadershipTermId,logPosition)``; a member id that the
  prefix already shows (``followerMemberId`` of a CanvassPosition from that follower, ...) is left out,
  and written out when it differs, because then it is news.
* Values that depend on a wall clock (the ``timestamp`` of NewLeadershipTerm and friends) are left
  out of the compact forms; `describe_fields` with ``full=True`` shows everything.
* A field whose short form would read as something else is spelled out: a vote's ``candidateTermId``
  (``cand=0`` read as a member id).
* Numbers are plain ASCII integers (``-1``), so a line can be typed back into a scenario file.
* Messages without a compact form print every field by its Aeron name, in schema order.

Pure functions of their arguments; no I/O; imports only `formats`.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from typing import Any

from formats.cluster_members import member_count

ARROW = "→"
YES = "✓"
NO = "✗"


def _v(value: Any) -> str:
    kind = type(value)
    if kind is int:  # most values: first, and without the isinstance checks below (same result)
        return str(value)
    if kind is str:
        return value if value and " " not in value and "=" not in value else repr(value)
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, str):
        return value if value and " " not in value and "=" not in value else repr(value)
    if isinstance(value, list | tuple):
        return "[" + ",".join(_v(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ",".join(f"{k}={_v(v)}" for k, v in value.items()) + "}"
    return str(value)


def _flag(value: Any) -> bool | None:
    """A BooleanType in any of its spellings (enum, name, JSON bool, 0/1)."""
    if isinstance(value, enum.Enum):
        value = value.name
    if value in (True, "TRUE", 1):
        return True
    if value in (False, "FALSE", 0):
        return False
    return None


def _log(fields: Mapping[str, Any], term_key: str = "logLeadershipTermId", pos_key: str = "logPosition") -> str:
    return f"log=({_v(fields.get(term_key))},{_v(fields.get(pos_key))})"


def _unless(fields: Mapping[str, Any], key: str, label: str, implied: int | None) -> list[str]:
    value = fields.get(key)
    if value is None or (implied is not None and value == implied):
        return []
    return [f"{label}={_v(value)}"]


# Each compact form: (fields, sender, receiver) -> the parts after the type name.
_Compact = Callable[[Mapping[str, Any], "int | None", "int | None"], list[str]]


def _canvass(f, sender, receiver):
    return [_log(f), f"term={_v(f.get('leadershipTermId'))}", *_unless(f, "followerMemberId", "from", sender)]


def _request_vote(f, sender, receiver):
    return [f"candidateTermId={_v(f.get('candidateTermId'))}", _log(f), *_unless(f, "candidateMemberId", "candidate", sender)]


def _vote(f, sender, receiver):
    verdict = _flag(f.get("vote"))
    mark = YES if verdict else NO if verdict is False else f"vote={_v(f.get('vote'))}"
    return [
        f"candidateTermId={_v(f.get('candidateTermId'))}",
        _log(f),
        *_unless(f, "candidateMemberId", "candidate", receiver),
        *_unless(f, "followerMemberId", "follower", sender),
        mark,
    ]


def _new_leadership_term(f, sender, receiver):
    parts = [
        f"term={_v(f.get('leadershipTermId'))}",
        f"base={_v(f.get('termBaseLogPosition'))}",
        f"pos={_v(f.get('logPosition'))}",
        f"logTerm={_v(f.get('logLeadershipTermId'))}",
        "next=({},{},{})".format(
            _v(f.get("nextLeadershipTermId")), _v(f.get("nextTermBaseLogPosition")), _v(f.get("nextLogPosition"))
        ),
        *_unless(f, "leaderMemberId", "leader", sender),
        f"session={_v(f.get('logSessionId'))}",
        f"rec={_v(f.get('leaderRecordingId'))}",
    ]
    if _flag(f.get("isStartup")):
        parts.append("startup")
    return parts


# AppendPosition and CommitPosition are most of a timeline's lines: `_unless` is written out in them.


def _append_position(f, sender, receiver):
    get = f.get
    parts = [f"term={_v(get('leadershipTermId'))} pos={_v(get('logPosition'))}"]
    follower = get("followerMemberId")
    if follower is not None and not (sender is not None and follower == sender):
        parts.append(f"from={_v(follower)}")
    flags = get("flags")
    if flags in (0, None, 255):
        return parts
    parts.append("catchup" if isinstance(flags, int) and flags & 1 else f"flags={_v(flags)}")
    return parts


def _commit_position(f, sender, receiver):
    get = f.get
    text = f"term={_v(get('leadershipTermId'))} pos={_v(get('logPosition'))}"
    leader = get("leaderMemberId")
    if leader is not None and not (sender is not None and leader == sender):
        return [text, f"leader={_v(leader)}"]
    return [text]


def _catchup_position(f, sender, receiver):
    parts = [f"term={_v(f.get('leadershipTermId'))}", f"pos={_v(f.get('logPosition'))}"]
    parts += _unless(f, "followerMemberId", "from", sender)
    if f.get("catchupEndpoint"):
        parts.append(f"endpoint={_v(f.get('catchupEndpoint'))}")
    return parts


def _stop_catchup(f, sender, receiver):
    return [f"term={_v(f.get('leadershipTermId'))}", *_unless(f, "followerMemberId", "follower", receiver)]


def _new_leadership_term_event(f, sender, receiver):
    return [
        f"term={_v(f.get('leadershipTermId'))}",
        f"base={_v(f.get('termBaseLogPosition'))}",
        f"pos={_v(f.get('logPosition'))}",
        f"leader={_v(f.get('leaderMemberId'))}",
        f"session={_v(f.get('logSessionId'))}",
    ]


def _termination_position(f, sender, receiver):
    return [f"term={_v(f.get('leadershipTermId'))}", f"pos={_v(f.get('logPosition'))}"]


def _termination_ack(f, sender, receiver):
    return [
        f"term={_v(f.get('leadershipTermId'))}",
        f"pos={_v(f.get('logPosition'))}",
        *_unless(f, "memberId", "member", sender),
    ]


def _session_message_header(f, sender, receiver):
    return [f"term={_v(f.get('leadershipTermId'))}", f"session={_v(f.get('clusterSessionId'))}"]


COMPACT: dict[str, _Compact] = {
    "CanvassPosition": _canvass,
    "RequestVote": _request_vote,
    "Vote": _vote,
    "NewLeadershipTerm": _new_leadership_term,
    "AppendPosition": _append_position,
    "CommitPosition": _commit_position,
    "CatchupPosition": _catchup_position,
    "StopCatchup": _stop_catchup,
    "NewLeadershipTermEvent": _new_leadership_term_event,
    "TerminationPosition": _termination_position,
    "TerminationAck": _termination_ack,
    "SessionMessageHeader": _session_message_header,
}


def _endpoint(member: int | None) -> str:
    return "?" if member is None else str(member)


def _prefix(sender: int | None, receiver: int | None, *, broadcast: bool = True) -> str:
    if sender is None and receiver is None:
        return ""
    to = "*" if receiver is None and broadcast else _endpoint(receiver)
    return f"{_endpoint(sender)}{ARROW}{to} "


def describe_fields(
    type_name: str,
    fields: Mapping[str, Any],
    sender: int | None = None,
    receiver: int | None = None,
    *,
    full: bool = False,
) -> str:
    """``Type k=v ...`` for a message given by name and fields (Aeron names), without the prefix."""
    compact = None if full else COMPACT.get(type_name)
    if compact is not None:
        parts = compact(fields, sender, receiver)
    else:
        parts = [f"{key}={_v(value)}" for key, value in fields.items()]
    return " ".join([type_name, *parts])


def describe_message(message: Any, sender: int | None = None, receiver: int | None = None) -> str:
    """``1→0 Vote candidateTermId=3 log=(5,96) ✓``: a message dataclass with who sent it to whom.

    With a sender and no receiver the message went to every other member (``0→*``); with neither,
    there is no prefix.
    """
    fields = message.to_fields() if hasattr(message, "to_fields") else dict(message)
    name = type(message).__name__ if hasattr(message, "to_fields") else str(fields.pop("type", "?"))
    return _prefix(sender, receiver) + describe_fields(name, fields, sender, receiver)


def describe_local(node: int, type_name: str, fields: Mapping[str, Any]) -> str:
    """A local event (MemberStart, MemberCrash, an agent-log observation...) at ``node``."""
    if type_name == "MemberStart":
        parts = [f"members={member_count(fields.get('clusterMembers')) or '?'}"]
        appointed = fields.get("appointedLeaderId", -1)
        if appointed not in (-1, None):
            parts.append(f"appointed={_v(appointed)}")
        node_state = fields.get("nodeState")
        if isinstance(node_state, Mapping) and node_state.get("candidateTermId", -1) != -1:
            parts.append(f"candidateTermId={_v(node_state.get('candidateTermId'))}")
        log = fields.get("recordingLog")
        if log:
            parts.append(f"terms={len(log)}")
        if "appendPosition" in fields:
            parts.append(f"append={_v(fields['appendPosition'])}")
        if "seed" in fields:
            parts.append(f"seed={_v(fields['seed'])}")
        return f"{node} MemberStart " + " ".join(parts)
    if type_name in ("ElectionStateChange", "RoleChange", "StateChange"):
        what = {"ElectionStateChange": "", "RoleChange": "role ", "StateChange": "module "}[type_name]
        return f"{node} {what}{_v(fields.get('from'))} {ARROW} {_v(fields.get('to'))} (observed)"
    if type_name == "NewElection":
        return f"{node} election {fields.get('reason')!r} term={_v(fields.get('leadershipTermId'))} (observed)"
    if not fields:
        return f"{node} {type_name}"
    return f"{node} {type_name} " + " ".join(f"{k}={_v(v)}" for k, v in fields.items())


def describe_event(event: Any) -> str:
    """An `formats.events.Event`: ``1→0 Vote ...`` as seen from its node (in: peer→node, out: node→peer)."""
    if event.dir == "local":
        return describe_local(event.node, event.type, event.fields)
    if event.dir == "in":
        sender, receiver = event.peer, event.node
    else:
        sender, receiver = event.node, event.peer
    prefix = f"{_endpoint(sender)}{ARROW}{_endpoint(receiver)} "
    channel = "" if event.channel == "consensus" else f"[{event.channel}] "
    try:
        fields = event.message().to_fields() if event.payload is not None else event.fields
    except ValueError:
        fields = event.fields
    position = (event.extra or {}).get("logPosition")
    at = f" @{_v(position)}" if position is not None else ""
    return prefix + channel + describe_fields(event.type, fields, sender, receiver) + at


def format_ts(ts_ns: int | None) -> str:
    """``1150ms`` for a whole millisecond (the engine's tick), else ``1150.000123ms``."""
    if ts_ns is None:
        return "-"
    ms, rest = divmod(ts_ns, 1_000_000)
    return f"{ms}ms" if rest == 0 else f"{ms}.{rest:06d}ms"


def _entry(entry: Mapping[str, Any]) -> str:
    kind = entry.get("type", "TERM")
    parts = [
        f"term={_v(entry.get('leadershipTermId'))}",
        f"base={_v(entry.get('termBaseLogPosition'))}",
        f"pos={_v(entry.get('logPosition'))}",
    ]
    if kind != "TERM":
        parts.insert(0, str(kind))
    if entry.get("isValid") is False:
        parts.append("invalid")
    return " ".join(parts)


#: A timer cause's deadline, as a sentence says it (the name is `MemberView.deadlines`').
_DEADLINES = {
    "electionTimeout": "its election timeout",
    "leaderHeartbeatTimeout": "its leader heartbeat timeout",
    "inactiveFollowerQuorum": "its inactive-follower-quorum check",
    "nomination": "its nomination deadline",
    "canvass": "its canvass deadline",
    "election": "its election's next deadline",
    "commitPositionHeartbeat": "its CommitPosition heartbeat",
    "appendPositionHeartbeat": "its AppendPosition heartbeat",
    "slowTick": "its slow tick",
    "clusterControlToggle": "the operator's ClusterControl toggle",
    "driverWait": "the end of its wait for the media driver",
    "logImage": "its log image becoming available",
    "dutyCycle": "a duty cycle",
}


def describe_cause(cause: Mapping[str, Any] | None) -> str:
    """A change's cause (a trace record's ``cause``) as the end of a sentence: ``on RequestVote from 0``,
    ``on its nomination deadline``, ``on MemberStart``; empty when there is none."""
    if not cause:
        return ""
    kind, name = cause.get("kind"), str(cause.get("type"))
    if kind == "message":
        channel = cause.get("channel")
        where = f" from {cause['peer']}" if cause.get("peer") is not None else ""
        via = f" ({channel})" if channel not in (None, "consensus") else ""
        return f"on {name}{where}{via}"
    if kind == "timer":
        return f"on {_DEADLINES.get(name, 'its ' + name + ' deadline')}"
    if name == "OwnLogAppend":
        return "on its own log append"
    return f"on {name}"


#: A send's line up to its type (``0→1 [log] ``), by (node, peer, channel): a timeline has a handful.
_SEND_HEADS: dict[tuple[Any, Any, Any], str] = {}


def _send_head(node: Any, peer: Any, channel: Any) -> str:
    head = _prefix(node, peer, broadcast=False) + (f"[{channel}] " if channel not in (None, "consensus") else "")
    try:
        if len(_SEND_HEADS) >= 4096:
            _SEND_HEADS.clear()
        _SEND_HEADS[node, peer, channel] = head
    except TypeError:  # an unhashable value (a hand-made record): not kept
        pass
    return head


def send_head(node: Any, peer: Any, channel: Any) -> str:
    """What a send's line (`describe_send`) begins with, up to its type: ``0→1 [log] ``."""
    try:
        return _SEND_HEADS[node, peer, channel]
    except (KeyError, TypeError):
        return _send_head(node, peer, channel)


def describe_send(node: Any, peer: Any, channel: Any, type_name: str, fields: Mapping[str, Any],
                  log_position: Any = None) -> str:
    """A send record's line (`describe_record` of one of kind ``send``), given its parts."""
    head = send_head(node, peer, channel)
    # A cluster at work's sends (most of a timeline's lines) written at once: what `describe_fields` writes of
    # them when their values are ints and the member ids the prefix shows (tests/test_describe.py).
    get = fields.get
    if type_name == "AppendPosition":
        term, position, flags = get("leadershipTermId"), get("logPosition"), get("flags")
        if type(term) is int and type(position) is int and get("followerMemberId") == node and flags == 0 \
                and log_position is None:
            return f"{head}AppendPosition term={term} pos={position}"
    elif type_name == "CommitPosition":
        term, position = get("leadershipTermId"), get("logPosition")
        if type(term) is int and type(position) is int and get("leaderMemberId") == node and log_position is None:
            return f"{head}CommitPosition term={term} pos={position}"
    elif type_name == "SessionMessageHeader":
        term, session = get("leadershipTermId"), get("clusterSessionId")
        if type(term) is int and type(session) is int and type(log_position) is int:
            return f"{head}SessionMessageHeader term={term} session={session} @{log_position}"
    text = head + describe_fields(type_name, fields, node, peer)
    return text if log_position is None else f"{text} @{_v(log_position)}"


def describe_record(record: Mapping[str, Any]) -> str:
    """A trace record of contract §3 (``kind`` send/state/role/...), without its time."""
    kind = record.get("kind")
    node = record.get("node")
    if kind == "send":
        return describe_send(node, record.get("peer"), record.get("channel"), str(record.get("type")),
                             record.get("fields") or {}, record.get("logPosition"))
    if kind == "state":
        reason = record.get("reason")
        tail = f" ({reason})" if reason else ""
        return f"{node} {_v(record.get('from'))} {ARROW} {_v(record.get('to'))}{tail}"
    if kind == "role":
        return f"{node} role {_v(record.get('from'))} {ARROW} {_v(record.get('to'))}"
    if kind == "moduleState":
        return f"{node} module {_v(record.get('from'))} {ARROW} {_v(record.get('to'))}"
    if kind == "election":
        return (
            f"{node} election {record.get('reason')!r} term={_v(record.get('leadershipTermId'))}"
            f" log={_v(record.get('logPosition'))} append={_v(record.get('appendPosition'))}"
        )
    if kind == "nodeState":
        return (
            f"{node} node-state candidateTermId={_v(record.get('candidateTermId'))}"
            f" logPosition={_v(record.get('logPosition'))}"
        )
    if kind == "recordingLog":
        return f"{node} recording.log {record.get('op')} {_entry(record.get('entry') or {})}"
    if kind == "logAppend":
        message = record.get("type") or (record.get("message") or {}).get("type", "?")
        return f"{node} log +{message} {ARROW} {_v(record.get('position'))}"
    if kind == "divergence":
        cause = record.get("cause")
        count = record.get("count") or 1
        tag = f" [{cause}{f' ×{count}' if count > 1 else ''}]" if cause else ""
        return (
            f"{node} DIVERGENCE{tag} expected {_outline(record.get('expected'))}"
            f" actual {_outline(record.get('actual'))}"
        )
    if kind == "invariant":
        return f"{node} INVARIANT {record.get('name')}: {record.get('detail')}"
    if kind == "random":
        return f"{node} random {record.get('draw', 'nextDouble')}={_v(record.get('value'))} ({record.get('source')})"
    if kind == "summary":
        return f"summary model={record.get('model')} divergences={record.get('divergences')}"
    rest = {k: v for k, v in record.items() if k not in ("kind", "ts", "node")}
    return f"{node} {kind} " + " ".join(f"{k}={_v(v)}" for k, v in rest.items())


def _outline(value: Any) -> str:
    """A divergence's expected/actual side: a send or event record, a list of them, or nothing."""
    if value is None:
        return "nothing"
    if isinstance(value, Mapping):
        if "type" in value and "fields" in value and value.get("dir") == "local":
            return describe_local(value.get("node"), str(value["type"]), value.get("fields") or {})
        if "type" in value and "fields" in value:
            sender = value.get("node") if value.get("dir", "out") == "out" else value.get("peer")
            receiver = value.get("peer") if value.get("dir", "out") == "out" else value.get("node")
            return _prefix(sender, receiver, broadcast=False) + describe_fields(
                str(value["type"]), value.get("fields") or {}, sender, receiver
            )
        if "kind" in value:
            return describe_record(value)
        return _v(value)
    if isinstance(value, list | tuple):
        return "[" + "; ".join(_outline(v) for v in value) + "]"
    return _v(value)
