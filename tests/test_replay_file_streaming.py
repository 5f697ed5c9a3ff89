"""`recount replay FILE.arrow` streams the replay file (issue 13 item 1): what it reads a batch at a
time from typed columns is what the whole-table reader (`table_to_events`) reads, row for row, and
the trace it prints is the in-memory replay's, byte for byte, whatever the batches and the row order.
"""

from __future__ import annotations

import dataclasses
import gc
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cli.app import run
from engine.replay import ReplaySession, in_memory, replay_lines
from formats import cluster_codecs as c
from formats import replay_file
from formats.cluster_codecs_ext import NewLeadershipTerm as NewLeadershipTermV15
from formats.events import Event, message_event
from formats.replay_file import ColumnarEvent, ReplayFile
from formats.sbe import encode
from recorder import convert
from recorder.version_evidence import METADATA_KEY, schema_versions, wire_evidence
from tests.conftest import REFERENCE, _require

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = sorted(ROOT.glob("samples/*/incident.arrow"))
#: Real captures with what sets them apart: the most rows (five members), the newest and the oldest schema.
REAL = ("aeron-1.47.3-capture/h_five_members_leader_kill", "aeron-versions-capture/v1.50.4_a_clean_start",
        "aeron-versions-capture/v1.41.7_a_clean_start")


def _read_whole(path: Path) -> tuple[list[Event], list[int]]:
    with pa.memory_map(str(path)) as source:
        table = replay_file.read_table(source, name=str(path))
        return replay_file.table_to_events(table, name=str(path)), table.column("seq").to_pylist()


def _streamed(path: Path) -> tuple[list[Event], list[int]]:
    file = ReplayFile(pa.memory_map(str(path)), name=str(path))
    for _ in file.checked():
        pass
    events, seqs = [], []
    for number in range(len(file.batches)):
        batch_events, batch_seqs = file.events(number)
        events += batch_events
        seqs += batch_seqs
    return events, seqs


def _assert_same_events(streamed: list[Event], whole: list[Event]) -> int:
    """Same values, the same key order and value types in ``fields``, the same messages; the count of
    rows built from typed columns."""
    assert len(streamed) == len(whole)
    columnar = 0
    for mine, theirs in zip(streamed, whole, strict=True):
        assert mine == theirs and theirs == mine
        assert [(k, type(v)) for k, v in mine.fields.items()] == [(k, type(v)) for k, v in theirs.fields.items()]
        if isinstance(mine, ColumnarEvent):
            columnar += 1
            built, decoded = mine.message(), theirs.message()
            assert type(built) is type(decoded) and built == decoded
    return columnar


def _rewrite(path: Path, out: Path, *, rows_per_batch: int | None = None, order=None, metadata=None) -> Path:
    """``path``'s table written again: in smaller batches, its rows reordered, or other metadata."""
    with pa.memory_map(str(path)) as source:
        table = replay_file.read_table(source)
    if order is not None:
        events = replay_file.table_to_events(table)
        events = [events[i] for i in order(events)]
        meta = replay_file.check_metadata(table.schema)
        table = replay_file.events_to_table(events, source="reordered", cluster_members=meta.cluster_members,
                                            metadata=dict(meta.extra))
    if metadata is not None:
        table = table.replace_schema_metadata(metadata(dict(table.schema.metadata)))
    with pa.OSFile(str(out), "wb") as sink, ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table, max_chunksize=rows_per_batch)
    return out


@pytest.mark.parametrize("path", SAMPLES, ids=[p.parent.name for p in SAMPLES])
def test_every_sample_row_streamed_from_typed_columns_is_the_event_the_whole_table_reader_reads(path):
    streamed, seqs = _streamed(path)
    whole, whole_seqs = _read_whole(path)
    assert seqs == whole_seqs
    assert _assert_same_events(streamed, whole) > 0.9 * len(whole)  # every message row of a sample


@pytest.fixture(scope="module")
def real_files(tmp_path_factory) -> dict[str, Path]:
    out = {}
    for name in REAL:
        folder = _require(REFERENCE / name)
        path = tmp_path_factory.mktemp("real") / f"{folder.name}.arrow"
        convert.convert([str(folder)], path)
        out[folder.name] = path
    return out


@pytest.mark.parametrize("name", [n.split("/")[1] for n in REAL])
def test_every_real_capture_row_streamed_is_the_event_the_whole_table_reader_reads(real_files, name):
    streamed, seqs = _streamed(real_files[name])
    whole, whole_seqs = _read_whole(real_files[name])
    assert seqs == whole_seqs
    # The agent log's events and the messages with var data are read from their JSON, the rest from columns.
    assert _assert_same_events(streamed, whole) > 0.6 * len(whole)


def test_a_columnar_event_equals_its_event_and_a_replaced_one_is_a_plain_event():
    streamed, _ = _streamed(SAMPLES[0])
    event = next(e for e in streamed if isinstance(e, ColumnarEvent) and e.type == "AppendPosition")
    plain = Event(ts=event.ts, node=event.node, dir=event.dir, peer=event.peer, channel=event.channel,
                  type=event.type, fields=dict(event.fields), payload=event.payload, extra=event.extra)
    assert event == plain and plain == event
    changed = dataclasses.replace(event, fields={**event.fields, "logPosition": 1}, payload=None)
    assert type(changed) is Event and changed.message().log_position == 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.ts = 0  # type: ignore[misc]


def test_an_extended_message_is_read_from_columns_with_its_own_fields_last(tmp_path):
    """A NewLeadershipTerm of schema 15 whose fields carry commitPosition (as the extended decoder gives
    them) keeps them, in that order; its message is the generated class, as decoding its payload gives."""
    extended = NewLeadershipTermV15(
        log_leadership_term_id=1, next_leadership_term_id=3, next_term_base_log_position=96, next_log_position=96,
        leadership_term_id=2, term_base_log_position=0, log_position=96, leader_recording_id=0, timestamp=5,
        leader_member_id=1, log_session_id=7, app_version=1, is_startup=c.BooleanType.FALSE, commit_position=96)
    payload = encode(extended, version=15)
    start = Event(ts=0, node=0, dir="local", peer=None, channel="local", type="MemberStart",
                  fields={"clusterMembers": "0,a:1,a:2,a:3,a:4,a:5|1,b:1,b:2,b:3,b:4,b:5"})
    received = message_event(extended, ts=1, node=0, dir="in", peer=1, channel="consensus", payload=payload)
    table = replay_file.events_to_table([start, received], source="t")
    path = tmp_path / "v15.arrow"
    path.write_bytes(replay_file.to_ipc_bytes(table))
    streamed, _ = _streamed(path)
    whole, _ = _read_whole(path)
    assert list(streamed[1].fields)[-1] == "commitPosition" and streamed[1].fields["commitPosition"] == 96
    assert _assert_same_events(streamed, whole) == 1


@pytest.fixture(scope="module")
def failover(tmp_path_factory) -> Path:
    return next(p for p in SAMPLES if p.parent.name == "leader-failover")


@pytest.mark.parametrize("layout", ["batches of 97 rows", "rows grouped by member", "rows by member backwards"])
def test_the_streamed_replay_prints_the_in_memory_replays_trace_whatever_the_batches_and_row_order(
        failover, tmp_path, capsys, layout):
    if layout == "batches of 97 rows":
        path = _rewrite(failover, tmp_path / "small.arrow", rows_per_batch=97)
    else:
        reverse = layout.endswith("backwards")
        path = _rewrite(failover, tmp_path / "grouped.arrow", rows_per_batch=200,
                        order=lambda events: sorted(range(len(events)), key=lambda i: events[i].node, reverse=reverse))
    loaded = convert.load(path)  # the whole file, read at once
    until = loaded.events[0].ts + 9_000_000_000
    for options, until_ns in (([], None), (["--until", str(until)], until)):
        expected = list(replay_lines(loaded.events, refs=loaded.refs, until=until_ns))
        assert run(["replay", str(path), "--json", *options]) == 0
        printed = capsys.readouterr().out.splitlines()
        assert [line.split(',"modelChosen"')[0] for line in printed] == [line[:-1] if line.startswith(
            '{"kind":"summary"') else line for line in expected]


@pytest.mark.parametrize("layout", ["batches of 97 rows", "rows grouped by member"])
def test_a_streamed_session_seeks_back_and_forth_to_the_states_of_the_in_memory_one(failover, tmp_path, layout):
    order = None if layout.startswith("batches") else (lambda events: sorted(range(len(events)), key=lambda i: events[i].node))
    path = _rewrite(failover, tmp_path / "file.arrow", rows_per_batch=97, order=order)
    loaded = convert.load(path)
    streamed = ReplaySession(convert.ReplayFileInput(path).ordered(), checkpoint_every=60)
    whole = ReplaySession(loaded.events, refs=loaded.refs, checkpoint_every=60)
    assert len(streamed) == len(whole)
    for k in (len(whole) - 1, 5, 97 * 3 + 1, len(whole) // 2, 0, len(whole)):
        streamed.seek(k)
        whole.seek(k)
        assert streamed.views() == whole.views()
        if k < len(whole):
            assert streamed.event(k) == whole.event(k)


def test_a_damaged_row_in_a_later_batch_is_refused_before_any_trace_is_printed(failover, tmp_path, capsys):
    with pa.memory_map(str(failover)) as source:
        table = replay_file.read_table(source)
    path = tmp_path / "damaged.arrow"
    texts = table.column("fields").to_pylist()
    texts[750] = "[1, 2]"
    damaged = table.set_column(table.schema.get_field_index("fields"), "fields", pa.array(texts, pa.string()))
    with pa.OSFile(str(path), "wb") as sink, ipc.new_file(sink, damaged.schema) as writer:
        writer.write_table(damaged, max_chunksize=100)
    assert run(["replay", str(path), "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.strip().splitlines() == [
        f"recount: {path}, row 750: the fields column holds JSON list, expected an object"]


def test_streaming_holds_the_events_of_one_slice_of_a_batch_at_a_time(tmp_path):
    path = _rewrite(SAMPLES[0], tmp_path / "batches.arrow", rows_per_batch=300)
    opened = convert.ReplayFileInput(path)
    source = opened.ordered()
    source_slice = type(source).SLICE
    type(source).SLICE = 50
    try:
        gc.collect()
        before = sum(isinstance(o, Event) for o in gc.get_objects())
        most = 0
        for k, (event, _) in enumerate(source.read()):
            if k % 37 == 0:
                del event
                most = max(most, sum(isinstance(o, Event) for o in gc.get_objects()) - before)
        assert k + 1 == len(source) > 1000
        assert most <= 50
    finally:
        type(source).SLICE = source_slice


def test_what_is_known_before_the_replay_comes_from_columns_as_it_came_from_every_event(tmp_path):
    """Members, time span, members string, coverage, lifecycle and the recording facts of a replay file."""
    from recorder.evidence import coverage

    path = _rewrite(SAMPLES[0], tmp_path / "batches.arrow", rows_per_batch=211)
    loaded = convert.load(path)
    opened = convert.ReplayFileInput(path)
    assert opened.nodes == tuple(sorted({e.node for e in loaded.events}))
    assert (opened.first_ts, opened.last_ts) == (min(e.ts for e in loaded.events), max(e.ts for e in loaded.events))
    assert opened.cluster_members == loaded.cluster_members
    assert opened.coverage() == coverage(loaded.events, loaded.cluster_members)
    lifecycle = [e for e in loaded.events if e.type in ("MemberStart", "MemberStop", "MemberCrash")]
    assert opened.lifecycle_events() == lifecycle
    middle = loaded.events[len(loaded.events) // 2].ts
    for until in (None, middle):
        assert opened.ordered(until).facts() == in_memory(loaded.events, until=until).facts()
        assert len(opened.ordered(until)) == len(in_memory(loaded.events, until=until))


def test_a_streamed_real_incidents_facts_hold_the_evidence_gaps_its_lifecycle_events_report(tmp_path):
    """What `scan` reads of lifecycle events' ``extra`` (issue 12's evidence gaps, which depend on the
    replay's tolerance) comes out of the streamed file as out of every event."""
    folder = _require(REFERENCE / "aeron-1.47.3-capture" / "g_leader_sigterm_reelection_rejoin")
    path = tmp_path / "g.arrow"
    convert.convert([str(folder)], path)
    loaded = convert.load(path)
    opened = convert.ReplayFileInput(path)
    for tolerance_ns in (None, 50_000_000, 2_000_000_000):
        streamed = opened.ordered().facts(tolerance_ns)
        assert streamed == (in_memory(loaded.events).facts(tolerance_ns) if tolerance_ns is not None
                            else in_memory(loaded.events).facts())
        assert streamed.gaps


def test_the_wire_evidence_of_a_file_without_stored_evidence_comes_from_its_payload_column(real_files, tmp_path):
    path = _rewrite(real_files["v1.41.7_a_clean_start"], tmp_path / "no-evidence.arrow", rows_per_batch=500,
                    metadata=lambda meta: {k: v for k, v in meta.items() if k.decode() != METADATA_KEY})
    loaded = convert.load(path)
    assert schema_versions(loaded.events)  # captured messages, with their packet numbers
    assert convert.ReplayFileInput(path).evidence == wire_evidence(loaded.events)


def test_rows_that_carry_one_message_give_one_message_object_and_the_window_of_kept_ones_is_bounded():
    # The members' log recordings keep every frame's message for the whole replay: a frame as each
    # follower received it (and as its leader appended it, where that is recorded) must be one object.
    streamed, _ = _streamed(ROOT / "samples/leader-failover/incident.arrow")
    frames: dict[tuple, list[ColumnarEvent]] = {}
    for event in streamed:
        if isinstance(event, ColumnarEvent) and event.channel == "log":
            frames.setdefault((event.type, *event.fields.values()), []).append(event)
    shared = [copies for copies in frames.values() if len({e.node for e in copies}) > 1]
    assert len(shared) > 10
    for copies in shared:
        messages = [e.message() for e in copies]
        assert all(m is messages[0] for m in messages)
        assert messages[0] == Event(**{f.name: getattr(copies[0], f.name) for f in dataclasses.fields(Event)}).message()
    distinct = {id(copies[0].message()) for copies in shared}
    assert len(distinct) == len(shared)  # different values, different messages
    assert 0 < len(replay_file._RECENT_MESSAGES) <= replay_file.RECENT_MESSAGES


_SHAPE_ROWS = st.lists(st.tuples(st.sampled_from([0, 1, 2, 7]), st.sampled_from(["in", "out", "local"]),
                                 st.sampled_from(["consensus", "log", "local"]),
                                 st.sampled_from(["AppendPosition", "Vote", "MemberStart"]),
                                 st.one_of(st.none(), st.integers(0, 4)), st.integers(0, 50)), min_size=1, max_size=60)


@given(rows=_SHAPE_ROWS, encoded=st.booleans(), ids=st.sampled_from(["small", "wide", "huge"]))
def test_each_shape_of_a_batch_comes_with_its_earliest_time_in_the_order_shapes_first_appear(rows, encoded, ids):
    """`ReplayFileInput`'s summary of a batch (what `facts` and `coverage` are answered from): every
    (node, dir, channel, type, peer) with its earliest ts, as a plain reading of the rows gives it, with or
    without dictionary-encoded names, a null peer a shape of its own, and member ids that pack into a few bits
    (a table of the packed shapes), into more (`np.unique`), or too far apart for one 64-bit key per row (the
    rows then read one by one)."""
    if ids == "huge":
        rows = [((1 << 60) if node == 7 else -(1 << 60) if node == 2 else node, *rest) for node, *rest in rows]
    elif ids == "wide":
        rows = [((1 << 20) if node == 7 else node, *rest) for node, *rest in rows]
    names = ["node", "dir", "channel", "type", "peer", "ts"]
    columns = [list(column) for column in zip(*rows, strict=True)]
    arrays = [pa.array(columns[0], pa.int64()), *(pa.array(columns[i]) for i in (1, 2, 3)),
              pa.array(columns[4], pa.int32()), pa.array(columns[5], pa.int64())]
    if encoded:
        arrays[1:4] = [array.dictionary_encode() for array in arrays[1:4]]
    batch = pa.RecordBatch.from_arrays(arrays, names=names)
    expected: dict[tuple, int] = {}
    for *shape, ts in rows:
        expected[tuple(shape)] = min(ts, expected.get(tuple(shape), ts))
    assert convert._first_of_each_shape(batch) == list(expected.items())
