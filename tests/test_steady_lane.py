"""The steady-state lane (engine.steady) is the same replay as NodeReplay.feed, byte for byte.

`ReplaySession.lines()` sends the events of a cluster at work through the lane and the rest through the
model's own path; ``lines(lane=False)`` sends everything through the model's path.  Each test here
replays one recording both ways and demands the same lines (the summary's trace hash included), and
that the lane took part (a lane that never engages would pass any comparison).

Every test runs twice, with the lane's loop compiled (`engine._window`) and in Python (`lane_loop`):
both must give the model's bytes.  Without the compiled module (no C compiler at install) the compiled
runs skip; in CI it must be there (``tests/test_compiled.py``).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine import compiled
from engine.replay import ReplaySession, in_memory
from engine.steady import SteadyLane, _templates_hold, lane_rows, rows_of_events
from engine.trace import encode_record
from recorder import convert as loader

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = sorted(ROOT.glob("samples/*/incident.arrow"))

LOOP = {"compiled": True}  # which loop the running test's lanes use (`lane_loop`)


def pytest_generate_tests(metafunc):
    """Each test with both loops, but a test marked ``python_lane`` (it spies on the Python loop's methods)
    or ``compiled_lane`` (it is about the compiled loop) with its own alone."""
    if "lane_loop" in metafunc.fixturenames:
        definition = metafunc.definition
        loops = ["python"] if definition.get_closest_marker("python_lane") else \
            ["compiled"] if definition.get_closest_marker("compiled_lane") else ["compiled", "python"]
        metafunc.parametrize("lane_loop", loops, indirect=True)


@pytest.fixture(autouse=True)
def lane_loop(request, monkeypatch):
    """The lane's loop for this test: `engine._window`'s, or `SteadyLane.run`'s own."""
    if request.param == "compiled":
        if compiled.window_module() is None:
            pytest.skip("engine._window is not built (no C compiler when installed): the Python loop alone")
    else:
        monkeypatch.setattr(compiled, "_enabled", False)
    LOOP["compiled"] = request.param == "compiled"
    return request.param


def _loop_is_the_tests(session) -> None:
    """The lane ran the loop the test asked for (a compiled module silently unused would pass any test)."""
    assert session.steady is not None
    assert (session.steady.compiled is not None) == LOOP["compiled"]


def _both(events, refs=None, **options) -> tuple[list[str], list[str], int]:
    """The lines of a replay through the lane and without it, and how many events the lane took."""
    laned = ReplaySession(events, refs=refs, **options)
    fast = list(laned.lines())
    _loop_is_the_tests(laned)
    slow = list(ReplaySession(events, refs=refs, **options).lines(lane=False))
    return fast, slow, laned.steady.handled if laned.steady is not None else 0


def _first_difference(fast: list[str], slow: list[str]) -> str:
    for i, (a, b) in enumerate(zip(fast, slow, strict=False)):
        if a != b:
            return f"line {i}:\n lane {a[:300]}\n feed {b[:300]}"
    return f"{len(fast)} lines through the lane, {len(slow)} without"


def _bench():
    spec = importlib.util.spec_from_file_location("bench_replay", ROOT / "benchmarks" / "bench_replay.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("bench_replay", module)
    spec.loader.exec_module(module)
    return module


def test_the_templates_spell_what_the_model_records_encode_to():
    assert _templates_hold()


@pytest.mark.parametrize("path", SAMPLES, ids=[p.parent.name for p in SAMPLES])
def test_a_sample_replays_to_the_same_bytes_through_the_lane(path):
    loaded = loader.load(path)
    fast, slow, handled = _both(loaded.events, refs=loaded.refs, ref_kind=loaded.ref_kind)
    assert fast == slow, _first_difference(fast, slow)
    assert handled > 0


@pytest.mark.parametrize("path", SAMPLES[:3], ids=[p.parent.name for p in SAMPLES[:3]])
def test_a_streamed_replay_file_replays_to_the_same_bytes_through_the_lane(path):
    """The file read a slice at a time (its typed columns as lane rows, events built only where the lane
    declines), as `recount replay FILE --json` reads it."""
    opened = loader.ReplayFileInput(path) if hasattr(loader, "ReplayFileInput") else None
    assert opened is not None
    session = ReplaySession(opened.ordered(None))
    fast = list(session.lines())
    slow = list(ReplaySession(loader.ReplayFileInput(path).ordered(None)).lines(lane=False))
    assert fast == slow, _first_difference(fast, slow)
    assert session.steady is not None and session.steady.handled > 0


def _mutated(events, *, drop_every: int = 0, shift_node: int | None = None, shift_ns: int = 0):
    """Recorded sends taken away, or one member's sends moved in time: divergences inside steady stretches."""
    out = []
    count = 0
    for event in events:
        if event.dir == "out" and event.channel == "consensus" and event.type in ("AppendPosition", "CommitPosition"):
            count += 1
            if drop_every and count % drop_every == 0:
                continue
            if shift_node is not None and event.node == shift_node:
                event = dataclasses.replace(event, ts=event.ts + shift_ns)
        out.append(event)
    return out


@pytest.mark.parametrize("path", SAMPLES, ids=[p.parent.name for p in SAMPLES])
@pytest.mark.parametrize("mutation", [dict(drop_every=3), dict(drop_every=7), dict(shift_node=0, shift_ns=700_000_000),
                                      dict(shift_node=1, shift_ns=-650_000_000)],
                         ids=["drop3", "drop7", "late0", "early1"])
def test_divergences_in_steady_stretches_come_out_the_same(path, mutation):
    loaded = loader.load(path)
    events = _mutated(loaded.events, **mutation)
    fast, slow, handled = _both(events)
    assert fast == slow, _first_difference(fast, slow)
    assert handled > 0
    assert '"kind":"divergence"' in "".join(slow)  # the mutation made some: they are what is compared


def test_steady_traffic_without_payloads_replays_to_the_same_bytes():
    bench = _bench()
    events = bench.capture(3_000, outs=True)
    fast, slow, handled = _both(events)
    assert fast == slow, _first_difference(fast, slow)
    assert handled > 0.9 * len(events)


def test_steady_traffic_with_recorded_sends_missing_and_late():
    bench = _bench()
    events = bench.capture(3_000, outs=True)
    events = _mutated(events, drop_every=11)
    events = _mutated(events, shift_node=2, shift_ns=800_000_000)
    fast, slow, handled = _both(events)
    assert fast == slow, _first_difference(fast, slow)
    assert handled > 0.5 * len(events)
    assert '"kind":"divergence"' in "".join(slow)


def _frames_together(events):
    """Each follower's log frames paired: the second of a pair moved back to arrive with the first (one
    batch of two), and every other pair's second frame without its position, which the lane declines
    (the model's path adds its LogFrame to the batch the lane started)."""
    out, last_frame, pairs = [], {}, 0
    for event in events:
        if event.dir == "in" and event.channel == "log" and event.type == "SessionMessageHeader":
            first = last_frame.pop(event.node, None)
            if first is None:
                last_frame[event.node] = len(out)
            else:
                pairs += 1
                moved = dataclasses.replace(event, ts=out[first].ts, extra=None if pairs % 2 else event.extra)
                out.insert(first + 1, moved)
                continue
        out.append(event)
    return out


def test_frames_arriving_together_replay_the_same_whoever_takes_their_batch(monkeypatch):
    """A batch of frames the lane started is fed by the lane, or by the model's path when one of its frames
    is one the lane declines (the lane's frames then become the model's LogFrames): the same bytes."""
    from engine.replay import NodeReplay

    fed = []
    feed_log_batch = NodeReplay._feed_log_batch

    def spy(self, node_id):
        fed.append([type(f).__name__ for f in self._log_batches[node_id][1]])
        return feed_log_batch(self, node_id)

    monkeypatch.setattr(NodeReplay, "_feed_log_batch", spy)
    events = _frames_together(_bench().capture(2_000, outs=True))
    fast, slow, handled = _both(events)
    assert fast == slow, _first_difference(fast, slow)
    assert handled > 0.5 * len(events)
    assert ["tuple", "LogFrame"] in fed  # a batch the lane started, finished by the model's path


@pytest.mark.python_lane
def test_frames_fed_when_the_time_line_moves_on_replay_the_same_through_the_lane(monkeypatch):
    """Without the followers' recorded AppendPositions, no later event of a follower's comes at the instant its
    frame arrived: its batch is fed when the time line moves past it (`NodeReplay._prologue`), after the other
    follower's frame at that instant and before the event that moved it (the leader hearing an AppendPosition,
    whose CommitPositions follow the followers' sends in the trace).  The lane feeds each batch then."""
    from engine.steady import SteadyLane as Lane

    fed = []
    feed_batch = Lane._feed_batch

    def spy(self, node_id, out):
        fed.append((self.replay._log_batches[node_id][0], self.replay.now))
        return feed_batch(self, node_id, out)

    monkeypatch.setattr(Lane, "_feed_batch", spy)
    events = [e for e in _bench().capture(2_000, outs=True) if not (e.dir == "out" and e.type == "AppendPosition")]
    fast, slow, handled = _both(events)
    assert fast == slow, _first_difference(fast, slow)
    assert handled > 0.9 * len(events)
    start = min(e.ts for e in events if e.channel == "ingress")  # the steady traffic's (the election's has sends)
    frames = sum(1 for e in events if e.dir == "in" and e.channel == "log" and e.ts >= start)
    fed = [(batch_ts, now) for batch_ts, now in fed if batch_ts >= start]
    assert len(fed) == frames  # the lane fed every frame's batch...
    assert all(batch_ts < now for batch_ts, now in fed)  # ...each at the first event after its instant


@pytest.mark.parametrize("who", ["leader", "follower"])
def test_traffic_to_a_member_whose_process_died_replays_the_same_through_the_lane(who, monkeypatch):
    """A member is killed half way and its host's capture goes on showing what reaches it (log frames,
    CommitPositions to a follower; AppendPositions and ingress to a leader): the lane takes those
    messages as `_body` does (no model, the time and the committed position noted), same bytes."""
    import dataclasses as dc

    from engine.steady import SteadyLane as Lane

    taken = []
    absent = Lane._absent
    def spy(self, row):
        result = absent(self, row)
        if result:
            taken.append(row[4])
        return result

    monkeypatch.setattr(Lane, "_absent", spy)
    events = _bench().capture(2_000, outs=True)
    leader = next(e.node for e in events if e.channel == "ingress")
    node = leader if who == "leader" else next(e.node for e in events if e.channel == "log" and e.dir == "in")
    at = len(events) // 2
    crash = dc.replace(events[at], node=node, dir="local", peer=None, channel="local", type="MemberCrash", fields={},
                       payload=None, extra=None)
    after = [e for e in events[at:] if not (e.node == node and e.dir == "out")]
    # what reaches the dead member says a little more was committed than the others hear: the invariant
    # checker must see it whichever path takes it
    after = [dc.replace(e, fields={**e.fields, "logPosition": e.fields["logPosition"] + 32})
             if e.node == node and e.dir == "in" and e.type == "CommitPosition" else e for e in after]
    events = events[:at] + [crash] + after
    laned, plain = ReplaySession(events), ReplaySession(events)
    fast, slow = list(laned.lines()), list(plain.lines(lane=False))
    assert fast == slow, _first_difference(fast, slow)
    assert len(taken) > 100 and laned.steady.handled > 0.5 * len(events)
    seen = laned._driver.invariants, plain._driver.invariants
    assert (seen[0].committed, seen[0].committed_terms) == (seen[1].committed, seen[1].committed_terms)
    kinds = {"leader": {"AppendPosition", "SessionMessageHeader"}, "follower": {"CommitPosition", "SessionMessageHeader"}}
    assert kinds[who] <= set(taken)


def test_lane_rows_read_a_batch_as_the_events_are_read(tmp_path):
    """The typed columns the lane reads give the values the events built from the same batch hold."""
    path = SAMPLES[0]
    opened = loader.ReplayFileInput(path)
    file = opened.file
    batch = file.batches[0]
    rows = lane_rows(batch)
    events, seqs = file.events(0)
    for row, event, seq in zip(rows, events, seqs, strict=True):
        assert row[0] == event.ts and row[1] == event.node and row[2:5] == (event.dir, event.channel, event.type)
        assert row[5] == event.peer and row[15] == seq
        assert (row[14] is None) == (event.payload is None)
        position = (event.extra or {}).get("logPosition")
        assert row[13] == (position if type(position) is int else None)


def test_a_user_model_spelling_messages_otherwise_turns_the_lane_off(monkeypatch):
    import engine.steady as steady

    monkeypatch.setattr(steady, "_COMMIT", steady._COMMIT.replace("leaderMemberId", "leaderId"))
    assert not steady._templates_hold()
    loaded = loader.load(SAMPLES[0])
    session = ReplaySession(loaded.events, refs=loaded.refs)
    lines = list(session.lines())
    assert session.steady is None
    assert lines == list(ReplaySession(loaded.events, refs=loaded.refs).lines(lane=False))


def test_the_lane_declines_what_it_does_not_model():
    """A member in an election, or any event of a kind the lane has no handler for, goes to the model."""
    loaded = loader.load(SAMPLES[0])
    session = ReplaySession(loaded.events, refs=loaded.refs)
    lane = SteadyLane(session._driver, lambda k: {})
    event, ref = session.source.at(0)  # the first MemberStart
    row = next(iter(rows_of_events([(event, ref)])))
    given = []
    lane.run([row], 0, [], lambda i: given.append(i) or (event, ref), session.ref_kind)
    assert given == [0] and lane.handled == 0
    assert 0 in session.members  # the model's path started the member


# -- the real captures (../shared), both runs ---------------------------------------------------------------

def _capture_params() -> list:
    from tests.test_real_capture_conformance import _params

    return _params_plain(_params())


def _params_plain(params) -> list:
    return [pytest.param(*p.values, id=p.id) for p in params]


@pytest.mark.parametrize(("name", "run"), _capture_params())
def test_a_real_capture_replays_to_the_same_bytes_through_the_lane(name, run):
    from tests.test_real_capture_conformance import _report

    report = _report(name, run)
    laned = ReplaySession(list(report.events))
    fast = list(laned.lines())
    _loop_is_the_tests(laned)
    slow = [encode_record(record) for record in report.records]
    assert fast == slow, _first_difference(fast, slow)
    assert laned.steady is not None and laned.steady.handled > 0


def test_a_replay_of_some_members_only_does_not_take_the_lane():
    """``--node``: the lane steps every member or none, so a replay of some members stays on the model's path."""
    loaded = loader.load(SAMPLES[0])
    session = ReplaySession(loaded.events, refs=loaded.refs, nodes=[1])
    lines = list(session.lines())
    assert session.steady is None
    assert lines == list(ReplaySession(loaded.events, refs=loaded.refs, nodes=[1]).lines(lane=False))


@pytest.mark.parametrize("path", SAMPLES[:4], ids=[p.parent.name for p in SAMPLES[:4]])
def test_records_through_the_lane_are_the_model_records(path):
    """`records()` (what the text timeline and `replay()` read) through the lane: equal dicts, in order, with
    the same summary (its hash over the same lines)."""
    loaded = loader.load(path)
    events = _mutated(loaded.events, drop_every=5)
    laned = ReplaySession(events)
    fast = list(laned.records())
    _loop_is_the_tests(laned)
    slow = list(ReplaySession(events).records(lane=False))
    assert fast == slow
    assert [_keys(r) for r in fast] == [_keys(r) for r in slow]  # each record's keys in the model's order
    assert [encode_record(r) for r in fast] == [encode_record(r) for r in slow]
    assert laned.steady is not None and laned.steady.handled > 0


def _keys(record):
    return [(key, _keys(value) if type(value) is dict else None) for key, value in record.items()]


def test_records_of_steady_traffic_through_the_lane():
    bench = _bench()
    events = bench.capture(2_000, outs=True)
    laned = ReplaySession(events)
    fast = list(laned.records())
    _loop_is_the_tests(laned)
    slow = list(ReplaySession(events).records(lane=False))
    assert fast == slow
    assert [_keys(r) for r in fast] == [_keys(r) for r in slow]


def test_lane_rows_read_every_spelling_of_extra_as_the_events_do(tmp_path):
    """``extra``'s logPosition: the common one-key object read in one pass, any other object as JSON."""
    from formats.events import Event
    from formats.replay_file import events_to_table, write_table

    extras = [{"logPosition": 5}, {"logPosition": -1}, {"packet": 3, "logPosition": 7}, {"logPosition": "x"},
              None, {"logPosition": 12345678901234567890}, {"other": 1}, {"logPosition": 0}]
    events = [Event(ts=1000 + i, node=0, dir="in", peer=1, channel="log", type="SessionMessageHeader",
                    fields={"leadershipTermId": 0, "clusterSessionId": 1, "timestamp": i}, extra=extra)
              for i, extra in enumerate(extras)]
    path = tmp_path / "extras.arrow"
    with open(path, "wb") as sink:
        write_table(events_to_table(events, source="test"), sink)
    opened = loader.ReplayFileInput(path)
    rows = lane_rows(opened.file.batches[0])
    built, _ = opened.file.events(0)
    for row, event in zip(rows, built, strict=True):
        position = (event.extra or {}).get("logPosition")
        assert row[13] == (position if type(position) is int else None), event.extra


def test_an_event_built_alone_is_the_event_its_slice_builds(tmp_path):
    """Whether a message type's fields come from the typed columns is decided over the slice `read` builds;
    an event built on its own (`at`, and the rows the lane gives back to the model) is decided the same way,
    even where one row of a type carries a column the others do not."""
    from formats.events import Event
    from formats.replay_file import events_to_table, write_table

    events = []
    for i in range(40):
        fields = {"leadershipTermId": 0, "logPosition": 64 * i, "followerMemberId": 0, "flags": 0}
        if i == 7:
            fields["leaderMemberId"] = 1  # a column no AppendPosition has: the slice reads them all from JSON
        events.append(Event(ts=1000 + i, node=0, dir="out", peer=1, channel="consensus", type="AppendPosition",
                            fields=fields))
    path = tmp_path / "odd.arrow"
    with open(path, "wb") as sink:
        write_table(events_to_table(events, source="test"), sink)
    ordered = loader.ReplayFileInput(path).ordered(None)
    read = list(ordered.read(0))
    for k, (event, ref) in enumerate(read):
        alone, alone_ref = ordered.at(k)
        assert alone_ref == ref and alone.fields == event.fields and list(alone.fields) == list(event.fields)
        assert type(alone) is type(event)


def test_lane_rows_read_extra_texts_as_json_does():
    """The one-pass reading of ``extra`` against `json.loads` on odd texts: nested, repeated, float, escaped."""
    import pyarrow as pa

    from engine.steady import _extra_position

    texts = ['{"logPosition":5}', '{"packet":3,"logPosition":7}', '{"logPosition":-1,"x":2}',
             '{"a":{"logPosition":5}}', '{"logPosition":5.0}', '{"logPosition":1,"logPosition":2}',
             '{"note":"a{b","logPosition":9}', None, '{"other":1}', '{"logPosition":"x"}',
             '{"x":1,"logPosition":12,"y":"z"}', '{"s":"\\"logPosition\\":3","logPosition":4}', '{"logPosition":1e3}']
    count = len(texts)
    batch = pa.RecordBatch.from_arrays(
        [pa.array(range(count)), pa.array([0] * count, pa.int32()), pa.array(["in"] * count).dictionary_encode(),
         pa.array(["log"] * count).dictionary_encode(), pa.array(["SessionMessageHeader"] * count).dictionary_encode(),
         pa.array(texts)], names=["ts", "node", "dir", "channel", "type", "extra"])
    rows = lane_rows(batch)
    assert [row[13] for row in rows] == [_extra_position(text) for text in texts]
    assert [row[13] for row in rows][:4] == [5, 7, -1, None]


def _extra_batch(texts):
    import pyarrow as pa

    count = len(texts)
    return pa.RecordBatch.from_arrays(
        [pa.array(range(count)), pa.array([0] * count, pa.int32()), pa.array(["in"] * count).dictionary_encode(),
         pa.array(["log"] * count).dictionary_encode(), pa.array(["SessionMessageHeader"] * count).dictionary_encode(),
         pa.array(texts, pa.string())], names=["ts", "node", "dir", "channel", "type", "extra"])


@given(st.lists(st.one_of(st.none(), st.text("0123456789", min_size=1, max_size=20).map('{{"logPosition":{}}}'.format),
                          st.sampled_from(['{"logPosition":-1}', '{"logPosition": 3}', '{"logPosition":1.5}',
                                           '{"logPosition":"7"}', '{"logPosition":\u0661\u0662}', '{"a":1,"logPosition":2}'])),
                min_size=1, max_size=30))
def test_lane_rows_read_extra_as_json_does_when_every_text_has_the_plain_spelling_or_not(texts):
    """A batch whose every ``extra`` is ``{"logPosition":N}`` is read without the general pass (N of up to 18
    ASCII digits); any other text in the batch (19 digits, a sign, other digits, more keys) sends the whole
    batch through the general one: either way each row's position is what JSON reads."""
    from engine.steady import _extra_position

    rows = lane_rows(_extra_batch(texts))
    assert [row[13] for row in rows] == [_extra_position(text) for text in texts]


@pytest.mark.parametrize("lane", [True, False], ids=["lane", "feed"])
def test_line_blocks_are_the_lines_in_blocks_with_the_summary_alone_last(lane):
    """`recount replay --json` writes a block of lines at a time (`ReplaySession.line_blocks`): joined, the
    blocks are `lines()`, none is empty, and the summary's line is alone in the last (the command appends
    to it)."""
    path = SAMPLES[0]
    blocks = list(ReplaySession(loader.ReplayFileInput(path).ordered(None)).line_blocks(lane=lane))
    lines = list(ReplaySession(loader.ReplayFileInput(path).ordered(None)).lines(lane=lane))
    assert [line for block in blocks for line in block] == lines
    assert all(blocks) and len(blocks) >= 2
    assert blocks[-1] == [lines[-1]] and lines[-1].startswith('{"kind":"summary"')
    assert not any(line.startswith('{"kind":"summary"') for block in blocks[:-1] for line in block)


@pytest.mark.parametrize("lane", [True, False], ids=["lane", "feed"])
def test_byte_blocks_are_the_lines_as_written_and_hashed(lane):
    """`recount replay --json` writes `ReplaySession.byte_blocks`: each block the UTF-8 of its lines, each line
    followed by a newline, the summary alone in the last; together, exactly the bytes of `lines()` written
    one per line, and the summary's hash is over the bytes before it."""
    import hashlib
    import json

    for path in SAMPLES:
        session = ReplaySession(loader.ReplayFileInput(path).ordered(None))
        blocks = list(session.byte_blocks(lane=lane))
        if lane:
            _loop_is_the_tests(session)
        lines = list(ReplaySession(loader.ReplayFileInput(path).ordered(None)).lines(lane=lane))
        assert b"".join(blocks) == "".join(line + "\n" for line in lines).encode("utf-8")
        assert all(blocks) and all(block.endswith(b"\n") for block in blocks)
        assert blocks[-1] == (lines[-1] + "\n").encode() and lines[-1].startswith('{"kind":"summary"')
        assert not any(block.startswith(b'{"kind":"summary"') for block in blocks[:-1])
        assert json.loads(lines[-1])["traceSha256"] == hashlib.sha256(b"".join(blocks[:-1])).hexdigest()


@pytest.mark.parametrize("rows", [512, 2048, 8192])
def test_the_trace_is_the_same_whatever_the_lanes_chunks(rows):
    """The lane takes a source's events a chunk at a time (the text timeline asks for smaller chunks than
    ``--json``, `engine.replay.TIMELINE_CHUNK_ROWS`): steady traffic with recorded sends missing and late replays
    to the same bytes, its records and lane items the same, whatever the chunks' size."""
    bench = _bench()
    events = _mutated(_mutated(bench.capture(2_000, outs=True), drop_every=11), shift_node=2, shift_ns=800_000_000)
    ordered = in_memory(events)
    reference = list(ReplaySession(ordered).lines(lane=False))
    session = ReplaySession(ordered)
    laned = session._laned(True, rows)
    assert laned is not None
    session.steady = laned[0]
    lines = [line for block in session._lane_out(*laned, as_records=False) for line in block]
    assert lines == reference, _first_difference(lines, reference)
    _loop_is_the_tests(session)
    assert any('"kind":"divergence"' in line for line in lines)


def test_the_timeline_is_the_records_with_the_lanes_left_as_items():
    """`ReplaySession.timeline` (what the text timeline reads) gives the lane's records as ``(template, values)``
    and every other record as `records` does: expanded by `RECORD_OF`, exactly `records()`, with the same hash;
    for every sample and a cluster at work's traffic."""
    from engine.steady import RECORD_OF, TEMPLATES

    sources = [(path, lambda path=path: loader.ReplayFileInput(path).ordered(None)) for path in SAMPLES]
    mutated = _mutated(loader.load(SAMPLES[0]).events, drop_every=3)  # divergences within the lane's stretches
    sources.append(("mutated", lambda: mutated))
    for name, source in sources:
        session = ReplaySession(source())
        items = list(session.timeline())
        _loop_is_the_tests(session)
        records = list(ReplaySession(source()).records())
        lane_items = [one for one in items if type(one) is tuple]
        assert lane_items and all(one[0] in TEMPLATES and type(one[1]) is tuple for one in lane_items), name
        assert [RECORD_OF[one[0]](*one[1]) if type(one) is tuple else one for one in items] == records, name
        assert any(one.get("kind") == "divergence" for one in records) is (name == "mutated")


@given(st.data())
def test_each_lane_record_is_what_its_trace_line_decodes_to(data):
    """The lane puts out ``(template, values)``: the line is ``template % values`` and the record
    `ReplaySession.records` gives is ``RECORD_OF[template](*values)``, built without parsing the line; it must
    be the dict the line decodes to, key order included (for any 64-bit values)."""
    import json

    from engine.steady import RECORD_OF

    for template, build in RECORD_OF.items():
        values = tuple(data.draw(st.integers(-(1 << 63), (1 << 63) - 1)) for _ in range(template.count("%d")))
        record = build(*values)
        decoded = json.loads(template % values)
        assert record == decoded and list(record) == list(decoded)
        assert list(record["fields"]) == list(decoded["fields"])


@pytest.mark.compiled_lane
def test_the_compiled_loop_takes_steady_traffic_itself(monkeypatch):
    """`engine._window` hands a row to the Python lane's handler only in doubt: on steady traffic, after the
    election, none (a compiled loop that handed every row over would be byte-identical, and no faster)."""
    from engine.steady import SteadyLane as Lane

    handed = []
    for name in ("_append_position", "_commit_position", "_log_frame", "_ingress", "_own_append", "_feed_batch"):
        def spy(self, *args, _original=getattr(Lane, name), _name=name):
            handed.append((_name, self.replay.now))
            return _original(self, *args)

        monkeypatch.setattr(Lane, name, spy)
    events = _bench().capture(3_000, outs=True)
    fast, slow, handled = _both(events)
    assert fast == slow, _first_difference(fast, slow)
    assert handled > 0.9 * len(events)
    start = min(e.ts for e in events if e.channel == "ingress")  # the steady traffic's first event
    assert [one for one in handed if one[1] >= start] == []
