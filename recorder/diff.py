"""`recount diff`: where two replays of a cluster part ways, and everything that differs.

The two sides are traces (contract §3 records): two replays of one capture under different models,
replays of two captures, or trace files written by ``recount replay --json``.  `diff_traces` compares
them member by member:

1. Each member's records are reduced to its *behaviour*: every record except ``summary``, ``random``
   (a draw is an input) and ``input`` (the same external inputs on both sides), keyed by everything
   but its time and the wall-clock values (``timestamp`` in message fields, node-state.dat and
   recording.log entries).  Periodic messages repeat: a send equal to the member's previous send of
   that type to that peer is folded into it, so a run of identical heartbeats is one entry whatever
   its length (a leader elected 1 s later sends a few more CommitPositions, which is not news).
2. The two sequences of keys are aligned with `difflib.SequenceMatcher` (no junk heuristics): equal
   blocks pair records with the same content, the log positions being part of the content; the
   other blocks are records only one side has (``delete``: only A, ``insert``: only B) or that differ
   (``replace``).
3. Paired records more than ``tolerance_ns`` apart are a ``timing`` difference.

Every difference has a time (the earliest record involved); the *first divergence* is the earliest
difference over all members (ties: lower member id, then A before B).  With it come both sides'
records and, for each member, its state just before that time on each side, folded from the trace
(election state, role, terms, positions, leader).  The summary adds counts per member and kind and
the fields of the final summary records that differ.

Pure functions over lists of records; deterministic (members and differences in sorted order).
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.versions import confidence

IGNORED_KINDS = frozenset({"summary", "random", "input"})
#: Keys of a member's folded state shown with the first divergence.
STATE_KEYS = (
    "electionState",
    "role",
    "leadershipTermId",
    "logLeadershipTermId",
    "candidateTermId",
    "leaderMemberId",
    "logPosition",
    "appendPosition",
    "running",
)


def _without_wall_clock(record: Mapping[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in record.items() if k != "ts"}
    kind = record.get("kind")
    if kind in ("send", "logAppend") and isinstance(out.get("fields"), Mapping):
        out["fields"] = {k: v for k, v in out["fields"].items() if k != "timestamp"}
    elif kind == "nodeState":
        out.pop("timestamp", None)
    elif kind == "recordingLog" and isinstance(out.get("entry"), Mapping):
        out["entry"] = {k: v for k, v in out["entry"].items() if k != "timestamp"}
    elif kind == "divergence":
        out.pop("state", None)
    return out


def behaviour_key(record: Mapping[str, Any]) -> str:
    """What a record says, without when: equal keys mean the same behaviour."""
    return json.dumps(_without_wall_clock(record), sort_keys=True, separators=(",", ":"), default=str)


def member_behaviour(records: Iterable[Mapping[str, Any]]) -> dict[Any, list[tuple[str, Mapping[str, Any]]]]:
    """Per member, its behaviour records in order as (key, record), repeats of a send folded."""
    out: dict[Any, list[tuple[str, Mapping[str, Any]]]] = {}
    last_send: dict[tuple[Any, ...], str] = {}
    for record in records:
        kind = record.get("kind")
        if kind in IGNORED_KINDS:
            continue
        node = record.get("node")
        key = behaviour_key(record)
        if kind == "send":
            series = (node, record.get("peer"), record.get("channel"), record.get("type"))
            if last_send.get(series) == key:
                continue
            last_send[series] = key
        out.setdefault(node, []).append((key, record))
    return out


@dataclass
class Side:
    """One side of a diff: a label for people and its trace records."""

    label: str
    records: Sequence[Mapping[str, Any]]
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def summary(self) -> Mapping[str, Any]:
        for record in reversed(self.records):
            if record.get("kind") == "summary":
                return record
        return {}


def _order(value: Any) -> tuple[int, Any]:
    """Sort members: integers first, in order, then anything else by text (None last)."""
    if isinstance(value, int):
        return (0, value)
    return (1, "" if value is None else str(value))


def _ts(records: Sequence[Mapping[str, Any]]) -> int | None:
    times = [r.get("ts") for r in records if isinstance(r.get("ts"), int)]
    return min(times) if times else None


def fold_states(records: Iterable[Mapping[str, Any]], before_ts: int | None) -> dict[str, dict[str, Any]]:
    """Each member's state from the trace, as it was just before ``before_ts`` (None: at the end)."""
    states: dict[Any, dict[str, Any]] = {}
    for record in records:
        ts = record.get("ts")
        if before_ts is not None and isinstance(ts, int) and ts >= before_ts:
            break
        node = record.get("node")
        if node is None:
            continue
        # Every member starts as a running FOLLOWER (Aeron's initial role); records say what changed.
        state = states.setdefault(node, {**{key: None for key in STATE_KEYS}, "role": "FOLLOWER", "running": True})
        kind = record.get("kind")
        if kind == "state":
            state["electionState"] = record.get("to")
            state["leadershipTermId"] = record.get("leadershipTermId")
            state["logLeadershipTermId"] = record.get("logLeadershipTermId")
            state["candidateTermId"] = record.get("candidateTermId")
            state["leaderMemberId"] = record.get("leaderId")
            state["logPosition"] = record.get("logPosition")
            state["appendPosition"] = record.get("appendPosition")
            state["running"] = True
        elif kind == "role":
            state["role"] = record.get("to")
        elif kind == "moduleState":
            state["running"] = record.get("to") != "CLOSED"
        elif kind == "input" and record.get("type") in ("MemberCrash", "MemberStop"):
            state["running"] = False
        elif kind == "input" and record.get("type") == "MemberStart":
            state["running"] = True
    return {str(node): states[node] for node in sorted(states, key=_order)}


def record_changes(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The values that differ between two records, by dotted key (``fields.commitPosition``), time
    included: what to show when their one-line descriptions read the same."""
    if a is None or b is None:
        return []

    def flat(record: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in record.items():
            if isinstance(value, Mapping):
                out.update(flat(value, f"{prefix}{key}."))
            else:
                out[f"{prefix}{key}"] = value
        return out

    fa, fb = flat(a), flat(b)
    missing = object()
    return [
        {"key": key, "a": fa.get(key), "b": fb.get(key)}
        for key in sorted(set(fa) | set(fb))
        if fa.get(key, missing) != fb.get(key, missing)
    ]


def diff_traces(a: Side, b: Side, *, tolerance_ns: int = 0, limit: int | None = None) -> dict[str, Any]:
    """The diff document (what ``recount diff --json`` prints); see the module docstring."""
    if tolerance_ns < 0:
        raise ValueError("the tolerance must not be negative")
    behaviour_a = member_behaviour(a.records)
    behaviour_b = member_behaviour(b.records)
    differences: list[dict[str, Any]] = []
    counts: dict[str, dict[str, int]] = {}
    for node in sorted(set(behaviour_a) | set(behaviour_b), key=_order):
        seq_a = behaviour_a.get(node, [])
        seq_b = behaviour_b.get(node, [])
        member_counts = {"records": max(len(seq_a), len(seq_b)), "replace": 0, "delete": 0, "insert": 0, "timing": 0}
        matcher = difflib.SequenceMatcher(None, [k for k, _ in seq_a], [k for k, _ in seq_b], autojunk=False)
        for op, i1, i2, j1, j2 in matcher.get_opcodes():
            if op == "equal":
                for (_, ra), (_, rb) in zip(seq_a[i1:i2], seq_b[j1:j2], strict=True):
                    ta, tb = ra.get("ts"), rb.get("ts")
                    if isinstance(ta, int) and isinstance(tb, int) and abs(ta - tb) > tolerance_ns:
                        member_counts["timing"] += 1
                        differences.append(
                            {"op": "timing", "node": node, "ts": min(ta, tb), "deltaNs": tb - ta, "a": [ra], "b": [rb]}
                        )
                continue
            records_a = [r for _, r in seq_a[i1:i2]]
            records_b = [r for _, r in seq_b[j1:j2]]
            member_counts[op] += 1
            times = [t for t in (_ts(records_a), _ts(records_b)) if t is not None]
            differences.append(
                {"op": op, "node": node, "ts": min(times) if times else None, "a": records_a, "b": records_b}
            )
        counts[str(node)] = member_counts
    differences.sort(key=lambda d: (d["ts"] if d["ts"] is not None else -1, _order(d["node"])))

    first = None
    if differences:
        head = differences[0]
        at = head["ts"]
        first = {
            "ts": at,
            "node": head["node"],
            "op": head["op"],
            "a": head["a"][0] if head["a"] else None,
            "b": head["b"][0] if head["b"] else None,
            "changes": record_changes(head["a"][0] if head["a"] else None, head["b"][0] if head["b"] else None),
            "stateA": fold_states(a.records, at),
            "stateB": fold_states(b.records, at),
        }
    final_a = (a.summary.get("nodes") or {}) if a.summary else {}
    final_b = (b.summary.get("nodes") or {}) if b.summary else {}
    final_differences = []
    for node in sorted(set(final_a) | set(final_b), key=lambda n: _order(int(n) if str(n).lstrip("-").isdigit() else n)):
        sa, sb = final_a.get(node) or {}, final_b.get(node) or {}
        for key in sorted(set(sa) | set(sb), key=lambda k: (k not in STATE_KEYS, STATE_KEYS.index(k) if k in STATE_KEYS else 0, k)):
            if sa.get(key) != sb.get(key):
                final_differences.append({"node": node, "field": key, "a": sa.get(key), "b": sb.get(key)})
    invariants = {
        "a": sum(1 for r in a.records if r.get("kind") == "invariant"),
        "b": sum(1 for r in b.records if r.get("kind") == "invariant"),
    }
    shown = differences if limit is None else differences[:limit]
    return {
        "a": {"label": a.label, **a.info, "start": _ts(a.records), "traceSha256": a.summary.get("traceSha256") if a.summary else None},
        "b": {"label": b.label, **b.info, "start": _ts(b.records), "traceSha256": b.summary.get("traceSha256") if b.summary else None},
        "identical": not differences and not final_differences,
        "toleranceNs": tolerance_ns,
        "firstDivergence": first,
        "summary": {
            "differences": len(differences),
            "members": counts,
            "finalStateDifferences": final_differences,
            "invariants": invariants,
        },
        "differences": shown,
        "differencesShown": len(shown),
    }


# -- the sides: replays of captures, or trace files --------------------------------------------------------------

MODES = ("cluster", "node")


def replay_records(
    loaded: Any,
    *,
    model: str,
    mode: str = "cluster",
    seed: int | None = None,
    until: int | None = None,
) -> list[dict[str, Any]]:
    """The trace of one replay of ``loaded`` (`recorder.convert.LoadedEvents`) under ``model``."""
    if mode == "cluster":
        from engine.cluster_replay import cluster_replay

        records = cluster_replay(
            loaded.events, model=model, seed=seed, until=until, refs=loaded.refs, ref_kind=loaded.ref_kind
        )
    elif mode == "node":
        from engine.replay import replay

        records = replay(loaded.events, model=model, seed=seed, until=until, refs=loaded.refs, ref_kind=loaded.ref_kind)
    else:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    return list(records)


def is_trace_text(first_line: str) -> bool:
    """Does this line start a trace (``recount replay --json``) rather than a capture?"""
    try:
        document = json.loads(first_line)
    except json.JSONDecodeError:
        return False
    return isinstance(document, dict) and "kind" in document and "dir" not in document


def parse_trace(lines: Iterable[str], *, source: str) -> list[dict[str, Any]]:
    """Trace records from JSON Lines text; a bad line is a `DecodeError` naming it."""
    from formats.errors import DecodeError

    records = []
    for number, text in enumerate(lines, start=1):
        stripped = text.strip()
        if not stripped or stripped.startswith("#"):
            continue
        try:
            record = json.loads(stripped)
        except json.JSONDecodeError as error:
            raise DecodeError(f"not valid JSON ({error.msg} at column {error.colno})", source=source, offset=number, unit="line") from None
        if not isinstance(record, dict) or not isinstance(record.get("kind"), str):
            raise DecodeError("expected a trace record: a JSON object with a 'kind'", source=source, offset=number, unit="line")
        records.append(record)
    return records


def first_line(path: str) -> str | None:
    """The first non-blank, non-comment line of a text file (None for binary files and directories)."""
    from pathlib import Path

    file = Path(path)
    if file.is_dir():
        return None
    with file.open("rb") as handle:
        head = handle.read(8)
        if head.startswith(b"ARROW1") or b"\x00" in head:
            return None
        handle.seek(0)
        for raw in handle:
            try:
                text = raw.decode("utf-8").strip()
            except UnicodeDecodeError:
                return None
            if text and not text.startswith("#"):
                return text
    return None


def load_side(
    path: str,
    *,
    model: str | None,
    mode: str = "cluster",
    seed: int | None = None,
    until: int | None = None,
    label: str | None = None,
) -> Side:
    """A trace file as it is, or a capture / replay file replayed under ``model`` (default 1.47.3)."""
    line = first_line(path)
    if line is not None and is_trace_text(line):
        if model is not None:
            raise ValueError(f"{path} is a trace already; --model applies to captures and replay files only")
        with open(path, encoding="utf-8") as handle:
            records = parse_trace(handle, source=path)
        summary = next((r for r in reversed(records) if r.get("kind") == "summary"), {})
        traced = summary.get("model")
        return Side(label or path, records, {"source": path, "kind": "trace", "model": traced,
                                             **({"confidence": confidence(traced)} if traced else {})})
    from recorder import convert as loader

    chosen = model or "1.47.3"
    loaded = loader.load(path)
    if not loaded.events:  # a diff of two empty replays would say "identical" about the wrong files
        raise ValueError(f"{path}: holds no events (expected a replay file, a capture or a trace)")
    first = min(event.ts for event in loaded.events)
    if until is not None and until < first:  # an empty replay on each side would diff as "identical"
        raise ValueError(f"--until {until}: before the first event of {path} (ts {first} ns); times are the "
                         f"recording's own ts in ns")
    records = replay_records(loaded, model=chosen, mode=mode, seed=seed, until=until)
    info = {"source": path, "kind": "replay", "model": chosen, "mode": mode,
            "confidence": confidence(chosen)}
    if loaded.summary is not None:  # an incident directory: what was found in it (`recorder.discovery`)
        info["found"] = loaded.summary.get("found", [])
    from recorder.evidence import coverage

    warnings = coverage(loaded.events, loaded.cluster_members).warnings()
    if warnings:
        info["warnings"] = warnings
    return Side(label or f"{path} @ {chosen}", records, info)
