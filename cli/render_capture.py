"""How `recount convert` shows reading captures: a progress bar by bytes, and what was read and skipped.

Everything here goes to stderr, so that ``--json`` output on stdout stays one document.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from cli import output

#: Inputs smaller than this are read before a bar would be worth drawing.
PROGRESS_MIN_BYTES = 16 << 20
#: Problems and notes shown in full; the rest are counted (all are in the --json summary).
SHOWN = 10
#: Notes of `recorder.capture.members.infer_members` saying an endpoint's member was guessed or not found.
GUESSES = ("guessed by address", "could not tell whose")


def _capture_bytes(inputs: Sequence[str]) -> int:
    """The bytes of the captures among ``inputs``, directories included (what the bar counts)."""
    total = 0
    for name in inputs:
        if os.path.isdir(name):
            for directory, _, files in os.walk(name, followlinks=True):
                total += _capture_bytes([os.path.join(directory, f) for f in files])
        elif os.path.isfile(name) and name.lower().endswith((".pcap", ".pcapng", ".cap")):
            total += os.path.getsize(name)
    return total


@contextmanager
def progress_by_bytes(inputs: Sequence[str]) -> Iterator[Callable[[int], None] | None]:
    """A callback advancing a progress bar by bytes read, or None for small inputs (`cli.progress`
    decides whether it is drawn)."""
    from cli import progress

    total = _capture_bytes(inputs)
    if total < PROGRESS_MIN_BYTES or not progress.enabled():
        yield None
        return
    read = [0]
    with progress.over_time("reading captures", 0, total) as reached:
        def advance(count: int) -> None:
            read[0] += count
            reached(read[0])

        yield advance


def _micros(ns: int | None) -> str:
    return "unbounded" if ns is None else f"{ns / 1000:.0f} µs"


def print_summary(summary: dict[str, Any]) -> None:
    """The capture summary for people: members, what was decoded, skipped, assumed and aligned."""
    err = output.stderr
    source = summary.get("clusterMembersFrom")
    if source == "inferred":
        output.warn(f"cluster members inferred from the traffic: {summary.get('clusterMembers')} (give --members)")
    decoded = summary.get("decoded") or {}
    if decoded:
        messages = sum(decoded.get("messages", {}).values())
        err.print(f"read {decoded.get('datagrams', 0)} datagrams: {messages} cluster messages")
    for item in summary.get("inputs", []):
        if item.get("kind") == "capture" and item.get("truncated"):
            output.warn(f"{item['path']}: the file ends inside a packet (capture cut short); everything before"
                        " it was read")
    skipped = (decoded.get("skipped") or {}) if decoded else {}
    if skipped:
        err.print("skipped: " + ", ".join(f"{count} {category}" for category, count in skipped.items()))
    problems = summary.get("problems", [])
    groups = _grouped(problems)
    for (file, detail), places in groups[:SHOWN]:
        where = ", ".join(p for p in (file, places[0]) if p)
        more = f" (and {len(places) - 1} more like it)" if len(places) > 1 else ""
        output.warn((f"{where}: {detail}" if where else detail) + more)
    if len(groups) > SHOWN:
        err.print(f"... and {sum(len(p) for _, p in groups[SHOWN:])} more problem(s) (--json lists them)")
    for alignment in summary.get("alignment", []):
        err.print(f"member {alignment['node']}'s agent log: clock aligned by {alignment['method']},"
                  f" within {_micros(alignment['boundNs'])}")
    notes = [n for n in summary.get("notes", []) if not (source == "inferred" and n.startswith("cluster members inferred"))]
    for note in notes:  # what rests on a guess is a warning, not one note among many
        if note.startswith(GUESSES):
            output.warn(note)
    notes = [n for n in notes if not n.startswith(GUESSES)]
    for note in notes[:SHOWN]:
        err.print(f"note: {note}", markup=False)
    if len(notes) > SHOWN:
        err.print(f"... and {len(notes) - SHOWN} more note(s) (--json lists them)")


def _grouped(problems: Sequence[dict[str, Any]]) -> list[tuple[tuple[str | None, str], list[str]]]:
    """Problems with the same file and detail as one entry, with every place it happened, in order."""
    groups: dict[tuple[str | None, str], list[str]] = {}
    for problem in problems:
        place = ", ".join(f"{unit} {problem[unit]}" for unit in ("packet", "offset", "line") if unit in problem)
        groups.setdefault((problem.get("file"), problem["detail"]), []).append(place)
    return list(groups.items())


def print_found(summary: dict[str, Any]) -> None:
    """What was found in the directories given and which member each input was taken for (stderr)."""
    err = output.stderr
    for found in summary.get("found", []):
        err.print(f"found in {found['given']}:", markup=False)
        for item in found["found"]:
            members = item.get("members") or []
            if not members:
                assigned = ""
            elif item["kind"] in ("pcap", "pcapng"):
                assigned = f"taken on the host of member(s) {', '.join(map(str, members))}"
            else:
                assigned = f"member {', '.join(map(str, members))}"
            err.print(f"  {item['path']:<40} {item['kind']:<12} {assigned}".rstrip(), markup=False)
    for note in summary.get("notes", []):
        if note.startswith("warning: "):  # e.g. a --config value that clashes with what the capture shows
            from rich.markup import escape

            output.warn(escape(note[len("warning: "):]))
        else:
            err.print(f"note: {note}", markup=False)


def print_warnings(warnings: Sequence[str]) -> None:
    """Whose side the inputs show, and the endpoints not known (`recorder.evidence`): before any result."""
    for warning in warnings:
        output.warn(warning)
