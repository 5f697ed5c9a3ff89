"""`recount replay`'s text timeline (`cli.render_replay.print_timeline`) builds its lines as strings:
plain into a pipe, with escape codes rendered once per style on a terminal.  These tests hold it to
what rich writes when it renders every line itself (the path a console that records still takes),
over the samples' replays and made-up lines that need rich's own handling."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from cli import render_replay
from engine.replay import replay
from recorder import convert

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = sorted(path.parent for path in (ROOT / "samples").glob("*/incident.arrow"))


@pytest.fixture(scope="module")
def timelines() -> dict[str, tuple[list[dict], list[render_replay.Lifecycle]]]:
    """Each sample's trace records and process lifecycle, as `recount replay` renders them."""
    out = {}
    for sample in SAMPLES:
        loaded = convert.load(sample / "incident.arrow")
        records = list(replay(loaded.events, refs=loaded.refs, ref_kind=loaded.ref_kind))
        out[sample.name] = (records, render_replay.lifecycle_of(loaded.events))
    return out


def _made_up(records: list[dict]) -> list[dict]:
    """Lines rich must handle as it always did: a divergence pointing at its recorded event, a record
    without a time, and descriptions with control characters and a line break."""
    send = next(r for r in records if r["kind"] == "send")
    state = next(r for r in records if r["kind"] == "state")
    return [
        dict(send, kind="divergence", event=12, cause="model", count=3),
        dict(state, ts=None),
        dict(state, reason="bell\x07 and\rreturn"),
        dict(state, reason="two\nlines"),
        dict(send, type="AppendPosition", channel="log", logPosition=96),
    ]


def _timeline(console: Console, records: list[dict], lifecycle, **options) -> str:
    render_replay.print_timeline(console, iter(records), source="sample", lifecycle=lifecycle, **options)
    return console.file.getvalue()


def _terminal(color_system: str | None, *, record: bool = False, no_color: bool = False) -> Console:
    return Console(file=io.StringIO(), force_terminal=True, soft_wrap=True, width=100, color_system=color_system,
                   record=record, no_color=no_color, highlight=False)


def test_the_samples_are_there():
    assert len(SAMPLES) >= 5, SAMPLES


@pytest.mark.parametrize("color_system,no_color", [("truecolor", False), ("256", False), ("standard", False),
                                                   ("truecolor", True)])
def test_a_terminal_gets_the_bytes_rich_renders_line_by_line(timelines, color_system, no_color):
    for name, (records, lifecycle) in timelines.items():
        records = [*_made_up(records), *records]
        for options in ({}, {"heartbeats": True}, {"wall_clock": True}):
            fast = _timeline(_terminal(color_system, no_color=no_color), records, lifecycle, **options)
            # A console that records takes rich's own path: one Text per line, rendered by rich.
            reference = _timeline(_terminal(color_system, record=True, no_color=no_color), records, lifecycle,
                                  **options)
            assert fast == reference, (name, options)
            assert "\x1b[2m" in fast and ("\x1b[31m" in fast) is (not no_color)  # dim stays, NO_COLOR drops red


def test_a_pipe_gets_the_terminal_lines_without_their_styles(timelines):
    for name, (records, lifecycle) in timelines.items():
        # (rich would also drop a description's control characters: a pipe gets them as they are.)
        records = [*_made_up(records)[:2], *records]
        for options in ({}, {"heartbeats": True}, {"wall_clock": True}):
            plain = _timeline(Console(file=io.StringIO(), width=160, soft_wrap=True), records, lifecycle, **options)
            reference = _timeline(Console(file=io.StringIO(), width=160, soft_wrap=True, record=True), records,
                                  lifecycle, **options)
            assert plain == reference, (name, options)
            assert "\x1b[" not in plain


def test_repeated_heartbeats_are_hidden_from_the_string_lines_as_from_rich(timelines):
    records, lifecycle = timelines["leader-failover"]
    shown = _timeline(Console(file=io.StringIO(), width=160, soft_wrap=True), records, lifecycle).splitlines()
    every = _timeline(Console(file=io.StringIO(), width=160, soft_wrap=True), records, lifecycle,
                      heartbeats=True).splitlines()
    hidden = next(line for line in shown if "repeated heartbeat(s) hidden" in line)
    count = int(hidden.split()[0])
    assert count > 0 and len(every) == len(shown) + count - 1  # the count's own line is not in every


# -- the steady-state lane's items: `ReplaySession.timeline` leaves the lane's records as (template, values) ----

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from engine.steady import RECORD_OF, TEMPLATES  # noqa: E402

_MEMBERS = st.integers(0, 3)
_SMALL = st.integers(-2, 5)  # terms, positions and flags that repeat, so that the heartbeat filter hides some


@st.composite
def _lane_item(draw) -> tuple[str, tuple[int, ...]]:
    template = draw(st.sampled_from(TEMPLATES))
    ts = draw(st.integers(0, 5_000_000_000))
    values = [ts] + [draw(_MEMBERS) for _ in range(2)] + [draw(_SMALL) for _ in range(template.count("%d") - 3)]
    if draw(st.booleans()) and template.count("%d") >= 6:
        values[5] = values[1]  # the common case: a member's own id in its send (the lane writes it at once)
    if draw(st.booleans()) and template.count("%d") == 7 and "AppendPosition" in template:
        values[6] = 0
    return template, tuple(values)


@st.composite
def _timeline_of_items(draw) -> list:
    """Lane items in time order, some given as the dicts they stand for (dicts with other fields among them):
    the heartbeat filter must compare a periodic send alike whichever way it came."""
    items = sorted(draw(st.lists(_lane_item(), min_size=1, max_size=40)), key=lambda item: item[1][0])
    out = []
    for item in items:
        way = draw(st.integers(0, 3))
        if way == 0:
            out.append(RECORD_OF[item[0]](*item[1]))
        elif way == 1 and RECORD_OF[item[0]](*item[1])["kind"] == "send":
            record = RECORD_OF[item[0]](*item[1])
            record["fields"] = dict(record["fields"], extra=1)  # fields the lane's values cannot hold
            out.append(record)
        else:
            out.append(item)
    return out


def _records_of(items: list) -> list[dict]:
    return [RECORD_OF[one[0]](*one[1]) if type(one) is tuple else one for one in items]


@pytest.fixture(params=["compiled", "python"])
def lane_text(request):
    """Which describes the lane items: `engine._window.LaneText` (compiled), or `_LaneItems` (Python)."""
    from engine import compiled

    if request.param == "compiled" and compiled.window_module() is None:
        pytest.skip("engine._window is not built (tests/test_compiled.py says so, and fails in CI)")
    previous = compiled.use_compiled(request.param == "compiled")
    yield request.param
    compiled.use_compiled(previous)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(items=_timeline_of_items(), options=st.sampled_from([{}, {"heartbeats": True}, {"wall_clock": True}]))
def test_a_lane_item_is_written_as_the_record_it_stands_for(lane_text, items, options):
    """`print_timeline` writes a lane item, ``(template, values)``, from its values (`_LaneItems`, or
    `engine._window.LaneText`): the same bytes as for ``RECORD_OF[template](*values)``, in a pipe, a terminal and
    a recording console, heartbeats hidden alike; so a member's own id, another id, flags, and records of the same
    sends given as dicts."""
    assert (type(render_replay._lane_items(render_replay.HeartbeatFilter(), False)).__name__
            == ("LaneText" if lane_text == "compiled" else "_LaneItems"))
    records = _records_of(items)
    for make in (lambda: Console(file=io.StringIO(), width=160, soft_wrap=True), lambda: _terminal("truecolor"),
                 lambda: _terminal("256", record=True)):
        assert _timeline(make(), items, [], **options) == _timeline(make(), records, [], **options)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(items=_timeline_of_items(), options=st.sampled_from([{}, {"heartbeats": True}, {"wall_clock": True}]),
       data=st.data())
def test_lane_items_in_blocks_are_written_as_one_by_one(lane_text, items, options, data):
    """`recount replay` hands `print_timeline` a chunk's records and items at a time (``blocks``): a run of lane
    items is written in one call (`lines_into`), which must stop where a lifecycle line goes in and at a record;
    the same bytes as the records one by one, for any split into blocks, in a pipe, a terminal and a recording
    console."""
    cuts = sorted(data.draw(st.sets(st.integers(1, max(1, len(items) - 1)), max_size=6)))
    blocks = [items[a:b] for a, b in zip([0, *cuts], [*cuts, len(items)], strict=True) if items[a:b]]
    times = [record[1][0] if type(record) is tuple else record["ts"] for record in items]
    lifecycle = [render_replay.Lifecycle(ts, data.draw(_MEMBERS), data.draw(st.sampled_from(["MemberStop",
                                                                                            "MemberCrash"])))
                 for ts in sorted(data.draw(st.lists(st.sampled_from(times), max_size=3)))]
    records = _records_of(items)
    for make in (lambda: Console(file=io.StringIO(), width=160, soft_wrap=True), lambda: _terminal("truecolor"),
                 lambda: _terminal("256", record=True)):
        expected = _timeline(make(), records, lifecycle, **options)
        console = make()
        render_replay.print_timeline(console, iter(blocks), source="sample", lifecycle=lifecycle, blocks=True,
                                     **options)
        assert console.file.getvalue() == expected


def test_the_lane_items_of_a_steady_replay_print_as_its_records():
    """`recount replay`'s timeline takes `ReplaySession.timeline` (the lane's records as items): for the samples and
    a cluster at work, the same text as from `ReplaySession.records`."""
    import tempfile

    from engine.replay import ReplaySession

    sys_path = str(ROOT / "benchmarks")
    import sys

    sys.path.insert(0, sys_path)
    try:
        import bench_replay_file
    finally:
        sys.path.remove(sys_path)
    with tempfile.TemporaryDirectory() as work:
        steady = Path(work) / "steady.arrow"
        bench_replay_file.write_file(steady, 6_000)
        for path in [*(sample / "incident.arrow" for sample in SAMPLES), steady]:
            items = list(ReplaySession(convert.ReplayFileInput(path).ordered(None)).timeline())
            records = list(ReplaySession(convert.ReplayFileInput(path).ordered(None)).records())
            assert any(type(one) is tuple for one in items), path
            assert _records_of(items) == records
            blocks = list(ReplaySession(convert.ReplayFileInput(path).ordered(None)).timeline_blocks())
            assert [one for block in blocks for one in block] == items and all(blocks)
            for options in ({}, {"heartbeats": True}):
                expected = _timeline(Console(file=io.StringIO(), width=160, soft_wrap=True), records, [], **options)
                assert _timeline(Console(file=io.StringIO(), width=160, soft_wrap=True), items, [], **options) == expected
                console = Console(file=io.StringIO(), width=160, soft_wrap=True)
                render_replay.print_timeline(console, iter(blocks), source="sample", blocks=True, **options)
                assert console.file.getvalue() == expected
