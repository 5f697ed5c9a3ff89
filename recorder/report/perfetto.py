"""An `Incident` as Chrome trace-event JSON, the format Perfetto UI and chrome://tracing open.

`trace_document(incident)` returns the JSON document (a dict; pure).  Each member is a process
(``pid`` = member id + 1, named ``member N``) with four threads, each one track:

* ``election state`` (tid 1): a B/E slice per election state held for some time; states passed
  through in the same instant are in the slice's ``args.via``; a down period is a ``DOWN (crash)``
  or ``DOWN (stop)`` slice.
* ``role`` (tid 2): a B/E slice per role (FOLLOWER, CANDIDATE, LEADER).
* ``consensus`` (tid 3): an instant (``ph: i``, thread scope) for every consensus message the member
  sent (``→2 RequestVote``) or received (``0→ Vote``), its fields in ``args``; a flow (``ph: s`` on
  the sender, ``ph: f`` with ``bp: e`` on the receiver, one ``id`` per message) from each send to its
  receipt, so the viewer draws an arrow between the two members.  The flow event follows its
  instant at the same timestamp, so it binds to it.
* ``problems`` (tid 4): an instant per divergence or invariant violation, ``args`` saying what.

Timestamps are microseconds (the format's unit) from the first recorded event, with nanosecond
digits; every track's events are in time order, and a B is closed by its E before the next B on
the same track, so slices never overlap.  ``otherData`` carries the source, the model, the epoch
of time zero and the trace's sha256.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from formats.describe import describe_record
from recorder.report.model import Incident, Message

STATE_TID, ROLE_TID, CONSENSUS_TID, PROBLEMS_TID = 1, 2, 3, 4
THREAD_NAMES = {STATE_TID: "election state", ROLE_TID: "role", CONSENSUS_TID: "consensus", PROBLEMS_TID: "problems"}


def _pid(member: int) -> int:
    return member + 1


def trace_document(incident: Incident) -> dict[str, Any]:
    """The whole trace: ``traceEvents`` (metadata first, then each track in time order) and ``otherData``."""
    origin = incident.start_ns

    def us(ts: int) -> float | int:
        offset = ts - origin
        return offset // 1000 if offset % 1000 == 0 else offset / 1000

    events: list[dict[str, Any]] = []
    for index, member in enumerate(incident.members):
        pid = _pid(member)
        events.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": f"member {member}"}})
        events.append({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": index}})
        for tid, name in THREAD_NAMES.items():
            events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}})
            events.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid, "args": {"sort_index": tid}})
    for lane in incident.lanes:
        pid = _pid(lane.member)
        slices = [(s.start_ns, s.end_ns, s.value, {"via": list(s.via), **({"settled": s.note} if s.note else {})})
                  for s in lane.states]
        slices += [(d.start_ns, d.end_ns, f"DOWN ({d.cause})", {"restarted": d.restarted}) for d in lane.down]
        events.extend(_slices(pid, STATE_TID, "election", slices, us))
        events.extend(_slices(pid, ROLE_TID, "role", [(s.start_ns, s.end_ns, s.value, {}) for s in lane.roles], us))
    events.extend(_consensus(incident, us))
    events.extend(_problems(incident, us))
    return {
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": {
            "source": incident.source,
            "model": incident.model,
            "originEpochNs": origin,
            "traceSha256": incident.summary.get("traceSha256"),
            "generator": "recount export --format perfetto",
        },
    }


def _slices(pid: int, tid: int, category: str, spans: list[tuple[int, int, str, dict]], us) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for start, end, name, args in sorted(spans, key=lambda s: (s[0], s[1])):
        if end <= start:
            continue
        out.append({"ph": "B", "name": name, "cat": category, "pid": pid, "tid": tid, "ts": us(start),
                    "args": {k: v for k, v in args.items() if v not in ([], None)}})
        out.append({"ph": "E", "name": name, "cat": category, "pid": pid, "tid": tid, "ts": us(end)})
    return out


def _message_args(message: Message) -> dict[str, Any]:
    args: dict[str, Any] = {"from": message.sender, "to": message.receiver, **dict(message.fields)}
    if message.send_ref is not None:
        args["sentEvent"] = message.send_ref
    if message.receive_ref is not None:
        args["receivedEvent"] = message.receive_ref
    return args


def _consensus(incident: Incident, us) -> list[dict[str, Any]]:
    """Per member, in time order: each send or receipt as an instant, a flow end right after it."""
    per_member: dict[int, list[tuple[int, int, list[dict[str, Any]]]]] = {}
    flow_id = 0

    def end(member: int, ts: int, name: str, args: dict, flow: str, order: int, message: Message) -> None:
        group = [{"ph": "i", "s": "t", "name": name, "cat": "consensus", "pid": _pid(member), "tid": CONSENSUS_TID,
                  "ts": us(ts), "args": args}]
        if flow:
            group.append({"ph": flow, "name": message.type, "cat": "consensus", "id": flow_id, "bp": "e",
                          "pid": _pid(member), "tid": CONSENSUS_TID, "ts": us(ts)})
        per_member.setdefault(member, []).append((ts, order, group))

    for order, message in enumerate(incident.messages):
        both = message.send_ns is not None and message.receive_ns is not None
        flow_id += both
        args = _message_args(message)
        if message.send_ns is not None:
            end(message.sender, message.send_ns, f"→{message.receiver} {message.type}", args, "s" if both else "",
                order * 2, message)
        if message.receive_ns is not None:
            end(message.receiver, message.receive_ns, f"{message.sender}→ {message.type}", args, "f" if both else "",
                order * 2 + 1, message)
    out: list[dict[str, Any]] = []
    for member in sorted(per_member):
        for _, _, group in sorted(per_member[member], key=lambda item: (item[0], item[1])):
            out.extend(group)
    return out


def _problems(incident: Incident, us) -> list[dict[str, Any]]:
    out = []
    for problem in sorted(incident.problems, key=lambda p: (p.ts if isinstance(p.ts, int) else incident.end_ns)):
        member = problem.member if isinstance(problem.member, int) else None
        ts = problem.ts if isinstance(problem.ts, int) else incident.end_ns
        record: Mapping[str, Any] = problem.record
        out.append({
            "ph": "i", "s": "t" if member is not None else "g",
            "name": "DIVERGENCE" if problem.kind == "divergence" else f"INVARIANT {record.get('name')}",
            "cat": problem.kind, "pid": _pid(member) if member is not None else 0, "tid": PROBLEMS_TID, "ts": us(ts),
            "args": {"what": describe_record(record), "event": record.get("event")},
        })
    return out


__all__ = ["trace_document"]
