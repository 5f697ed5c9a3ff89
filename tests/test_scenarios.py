"""Scenario tests that read like the protocol: datadriven files in tests/testdata/election/*.txt.

The command language, the transcript format and the rewrite rule are engine.scenario's (its module
docstring); this test finds the files, runs each against one world, and compares transcripts.

``RECOUNT_REWRITE=1 pytest tests/test_scenarios.py`` rewrites the transcripts from what the engine
does; commit only a diff you understand: the expectations are written from aeron-election.md, not
copied from the engine.  Where the engine disagrees with the reference, the stanza keeps the
reference's transcript under a ``# xfail: <why>`` comment (the test then reports an expected
failure, and fails once the engine agrees, so the mark comes off).

What these transcripts are: regression pins, written against aeron-election.md and the engine's own
runs.  They say the engine still does what it did; they prove nothing about Aeron.  Evidence of
fidelity comes from real captures (tests/test_real_capture_conformance.py,
tests/test_real_capture_replay.py, tests/test_real_version_captures.py).
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

import pytest

from engine.scenario import Stanza, parse_file, render_file, rewritten, run_stanzas

TESTDATA = Path(__file__).parent / "testdata" / "election"
REWRITE = os.environ.get("RECOUNT_REWRITE") == "1"


def run_file(path: Path) -> tuple[list[Stanza], list[list[str]]]:
    stanzas, _ = parse_file(path.read_text(encoding="utf-8"))
    return stanzas, run_stanzas(stanzas)


SCENARIOS = sorted(TESTDATA.glob("*.txt"))


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_scenario(path: Path) -> None:
    stanzas, trailer = parse_file(path.read_text(encoding="utf-8"))
    actual = run_stanzas(stanzas)
    if REWRITE:
        path.write_text(rewritten(stanzas, trailer, actual), encoding="utf-8")
        return
    known_bugs = []
    for stanza, lines in zip(stanzas, actual, strict=True):
        reason = stanza.xfail()
        if lines == stanza.expected:
            if reason is not None:
                pytest.fail(f"{path.name}:{stanza.line}: marked '# xfail: {reason}' but the engine now agrees; remove the mark")
            continue
        diff = "\n".join(difflib.unified_diff(stanza.expected, lines, "expected", "engine", lineterm=""))
        commands = " / ".join(stanza.command_lines())
        if reason is None:
            pytest.fail(f"{path.name}:{stanza.line}: {commands}\n{diff}")
        known_bugs.append(f"{path.name}:{stanza.line}: {reason}\n{diff}")
    if known_bugs:
        pytest.xfail("the engine disagrees with the reference (known bugs):\n" + "\n".join(known_bugs))


def test_scenario_files_round_trip_through_the_parser() -> None:
    for path in SCENARIOS:
        text = path.read_text(encoding="utf-8")
        stanzas, trailer = parse_file(text)
        assert render_file(stanzas, trailer) == text, path.name


def test_rewriting_takes_the_engines_transcript_but_keeps_a_known_bugs_expectation() -> None:
    text = (
        "members 1\n----\n\n"
        "start 0 delay=10ms\n----\nstale line\n\n"
        "# xfail: a known bug\nstate 0\n----\nwhat the reference says\n"
    )
    stanzas, trailer = parse_file(text)
    actual = run_stanzas(stanzas)
    again, _ = parse_file(rewritten(stanzas, trailer, actual))
    assert [s.expected for s in again] == [actual[0], actual[1], ["what the reference says"]]
    assert actual[1] and actual[1] != ["stale line"]
