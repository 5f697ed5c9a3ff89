"""Snapshot tests of the main screens over the leader-failover sample (pytest-textual-snapshot).

Update after a deliberate change with ``pytest tests/test_tui_snapshots.py --snapshot-update`` and
look at the SVGs in tests/__snapshots__/ before committing them.  The snapshots are regression pins
of our own screens over a simulated sample: they say nothing about Aeron.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from cli.tui.app import Jump, RecountApp
from cli.tui.session import Session
from formats import replay_file

ROOT = Path(__file__).resolve().parents[1]
FAILOVER = ROOT / "samples" / "leader-failover" / "incident.arrow"
SIZE = (200, 50)


@pytest.fixture
def failover_path() -> Path:
    if not FAILOVER.exists():
        pytest.skip(f"sample {FAILOVER} not found (recount simulate writes the samples)")
    return FAILOVER


def indexed_then(*steps):
    async def run_before(pilot) -> None:
        app = pilot.app
        await app.wait_until_indexed()
        for step in steps:
            step(app)
        await pilot.pause()
        await app.wait_until_settled()  # the answer of the last move on screen
        await pilot.pause()

    return run_before


def test_main_screen_at_the_moment_the_new_leader_was_elected(snap_compare, failover_path):
    app = RecountApp(Session.open(failover_path))
    assert snap_compare(app, terminal_size=SIZE, run_before=indexed_then(lambda a: a.jump(Jump("term", 1))))


def test_main_screen_filtered_to_votes_with_a_breakpoint(snap_compare, failover_path):
    app = RecountApp(Session.open(failover_path))

    def setup(a: RecountApp) -> None:
        a.apply_filter("type=RequestVote,Vote")
        a.add_breakpoint("node 2 candidateTermId >= 1")

    assert snap_compare(app, terminal_size=SIZE, run_before=indexed_then(setup))


def test_help_screen(snap_compare, failover_path):
    app = RecountApp(Session.open(failover_path))
    assert snap_compare(app, terminal_size=SIZE, press=["question_mark"], run_before=indexed_then())


def test_diff_screen_at_the_first_difference(snap_compare, failover_path, tmp_path):
    events, metadata = replay_file.read_events(pa.memory_map(str(failover_path)))
    lost = next(
        i
        for i, e in enumerate(events)
        if (e.node, e.dir, e.type, e.peer) == (1, "in", "Vote", 2) and e.fields["candidateTermId"] == 1
    )
    other = tmp_path / "lost-vote.arrow"
    with pa.OSFile(str(other), "wb") as sink:
        replay_file.write_table(
            replay_file.events_to_table(events[:lost] + events[lost + 1 :], source="lost-vote"), sink
        )
    app = RecountApp(
        Session.open(failover_path), other=Session.open(other), other_name="lost-vote.arrow (model 1.47.3)"
    )
    assert snap_compare(app, terminal_size=SIZE, press=["v"], run_before=indexed_then())
