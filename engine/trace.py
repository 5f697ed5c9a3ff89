"""Trace records as canonical JSON lines, and the running hash that the summary carries (contract §3).

A trace is what `recount replay --json` prints: one record per line, each with ``kind``, ``ts`` and
``node`` first, the kind's own keys after them in the order the record was built (the engine's
``to_json`` methods build them in contract order; nested dicts keep their insertion order, which is
code order, never hash order).  Lines are ``json.dumps(..., separators=(",", ":"),
ensure_ascii=False)``; a set (which has no stable order) is written as a sorted list, and a float
that is not finite is refused, so that equal traces are equal bytes.

`TraceHasher` keeps a SHA-256 over the UTF-8 bytes of every line followed by ``\\n``, exactly the
bytes the CLI writes before the summary line; the summary's ``traceSha256`` is its hex digest.  Two
runs of the same replay file with the same model and seed therefore print the same hash.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping
from itertools import islice
from typing import Any

#: Keys every record starts with, in this order.
LEADING_KEYS = ("kind", "ts", "node")


def canonical(record: Mapping[str, Any]) -> dict[str, Any]:
    """The record with ``kind``, ``ts``, ``node`` first (``null`` when absent), the rest in order."""
    if type(record) is dict and tuple(islice(record, 3)) == LEADING_KEYS:
        return record  # already in order (every engine output's to_json is)
    out: dict[str, Any] = {key: record.get(key) for key in LEADING_KEYS}
    for key, value in record.items():
        if key not in out:
            out[key] = value
    return out


def _default(value: Any) -> Any:
    if isinstance(value, set | frozenset):
        return sorted(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    if hasattr(value, "to_json"):
        return value.to_json()
    if hasattr(value, "name") and hasattr(value, "value"):  # an enum member: by Aeron's name
        return value.name
    raise TypeError(f"a trace record holds a {type(value).__name__}, which has no JSON form")


#: Built once: ``json.dumps`` with keyword arguments builds a new encoder on every call, which cost
#: more than the encoding itself for the short records of a trace.  Same options, same bytes.
_ENCODER = json.JSONEncoder(
    separators=(",", ":"), ensure_ascii=False, allow_nan=False, check_circular=False, default=_default
)
_encode = _ENCODER.encode


def encode_record(record: Mapping[str, Any]) -> str:
    """One trace line (no newline)."""
    return _encode(canonical(record))


def encoded_lines(items: list[Any], encode: Any = encode_record) -> bytes:
    """The UTF-8 bytes of the lines, each followed by ``\\n`` (what a writer of the trace writes and the hash
    is over), a line being the item when it is a str, else ``encode(item)``.  `engine._window` has the same
    function in one pass; `encoded_lines_of` picks it."""
    if not items:
        return b""
    return ("\n".join([item if type(item) is str else encode(item) for item in items]) + "\n").encode("utf-8")


def encoded_lines_of(window: Any) -> Any:
    """`encoded_lines`, from the compiled module ``window`` (`engine.compiled.window_module`) when there is one."""
    return encoded_lines if window is None else window.encoded_lines


class TraceHasher:
    """The running SHA-256 over the trace lines written so far."""

    __slots__ = ("_sha", "lines")

    def __init__(self) -> None:
        self._sha = hashlib.sha256()
        self.lines = 0

    def add(self, record: Mapping[str, Any]) -> str:
        """Encode ``record``, hash its line, and return the line."""
        line = _encode(canonical(record))
        self._sha.update((line + "\n").encode("utf-8"))
        self.lines += 1
        return line

    def add_line(self, line: str) -> None:
        self._sha.update((line + "\n").encode("utf-8"))
        self.lines += 1

    def add_lines(self, lines: list[str]) -> None:
        """`add_line` of each, in one update."""
        if lines:
            self._sha.update(("\n".join(lines) + "\n").encode("utf-8"))
            self.lines += len(lines)

    def add_encoded(self, data: bytes, lines: int) -> None:
        """Hash ``data``, the `encoded_lines` of ``lines`` lines (the bytes as written)."""
        self._sha.update(data)
        self.lines += lines

    def hexdigest(self) -> str:
        return self._sha.hexdigest()

    def copy(self) -> TraceHasher:
        clone = TraceHasher.__new__(TraceHasher)
        clone._sha = self._sha.copy()
        clone.lines = self.lines
        return clone

    def __deepcopy__(self, memo: dict) -> TraceHasher:  # hashlib objects do not pickle; they copy
        return self.copy()


def summary_record(
    *,
    ts: int | None,
    model: str,
    seed: int,
    nodes: Mapping[str, Any],
    divergences: int,
    trace_sha256: str,
    **extra: Any,
) -> dict[str, Any]:
    """The last record of a trace (contract §3); ``extra`` keys go between ``divergences`` and the hash."""
    record: dict[str, Any] = {
        "kind": "summary",
        "ts": ts,
        "node": None,
        "model": model,
        "seed": seed,
        "nodes": dict(nodes),
        "divergences": divergences,
    }
    record.update(extra)
    record["traceSha256"] = trace_sha256
    return record


def trace_lines(records: Iterable[Mapping[str, Any]]) -> Iterator[str]:
    """The lines of a finished trace, each record encoded canonically (the summary included)."""
    for record in records:
        yield encode_record(record)


def verify(lines: Iterable[str]) -> bool:
    """True when the last line is a summary whose ``traceSha256`` matches the lines before it."""
    hasher = TraceHasher()
    last = None
    for line in lines:
        if last is not None:
            hasher.add_line(last)
        last = line
    if last is None:
        return False
    summary = json.loads(last)
    return summary.get("kind") == "summary" and summary.get("traceSha256") == hasher.hexdigest()
