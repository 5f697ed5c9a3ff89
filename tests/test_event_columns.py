"""Events as columns write the replay file `replay_file.write_table(events_to_table(...))` writes.

`formats.event_columns` writes the replay table a record batch at a time from columns; the file must
be the one the per-event code writes, byte for byte: per-name columns of every kind (integers, one
beyond int64, booleans, text, JSON), nulls, payloads or none, every shape of ``extra``, and more rows
than one record batch holds (the IPC writer copies the next rows' value bytes along with a slice).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from formats import cluster_codecs as cc
from formats import event_columns, replay_file
from formats.event_columns import BATCH_ROWS, EventColumns
from formats.events import Event

ROOT = Path(__file__).resolve().parents[1]


def _reference_bytes(events: list[Event], **meta) -> bytes:
    sink = pa.BufferOutputStream()
    replay_file.write_table(replay_file.events_to_table(events, **meta), sink)
    return sink.getvalue().to_pybytes()


def _column_bytes(columns: EventColumns, **meta) -> bytes:
    sink = pa.BufferOutputStream()
    columns.write_replay(sink, **meta)
    return sink.getvalue().to_pybytes()


@pytest.mark.parametrize("sample", sorted((ROOT / "samples").glob("*/incident.arrow")), ids=lambda p: p.parent.name)
def test_a_samples_events_written_from_columns_are_its_replay_file_and_read_back_as_the_same_events(sample):
    events, metadata = replay_file.read_events(sample.read_bytes())
    meta = {"source": metadata.source, "cluster_members": metadata.cluster_members, "metadata": dict(metadata.extra)}
    columns = EventColumns.from_events(events)
    assert _column_bytes(columns, **meta) == _reference_bytes(events, **meta)
    assert list(columns) == events
    assert columns.to_table(**meta).equals(replay_file.events_to_table(events, **meta))


def _many_events(count: int) -> list[Event]:
    """Rows of every kind the replay file holds, more than a record batch of them."""
    vote = cc.Vote(candidate_term_id=3, log_leadership_term_id=2, log_position=640, candidate_member_id=1,
                   follower_member_id=2, vote=cc.BooleanType.TRUE)
    payload = vote.encode()
    shared = vote.to_fields()
    events = []
    for k in range(count):
        kind = k % 9
        extra: dict | None = {"packet": k}
        if kind == 1:
            extra = {"logPosition": 64 * k, "packet": k}
        elif kind == 2:
            extra = {"logPosition": 64 * k, "packet": k, "capturedTs": 10 * k}
        elif kind == 3:
            extra = {"packet": k, "capturedTs": -k}
        elif kind == 4:
            extra = {"source": f"node{k % 3}", "n": [k, None]}
        elif kind == 5:
            extra = None
        elif kind == 6:
            extra = {"packet": 1 << 70}  # beyond int64: encoded as any other mapping
        if kind in (0, 1, 2, 3):
            events.append(Event(ts=k, node=k % 3, dir="out" if k % 2 else "in", peer=(k + 1) % 3, channel="consensus",
                                type="Vote", fields=shared, payload=payload, extra=extra))
        else:
            fields = {"clusterMembers": "x" * (k % 7), "flag": bool(k % 2), "count": k * 1000, "list": [k] * (k % 3),
                      "huge": (1 << 64) if k % 1000 == 0 else k}
            if k % 5 == 0:
                fields = {"reason": "é" * (k % 4)}
            events.append(Event(ts=k, node=k % 5, dir="local", peer=None, channel="local",
                                type="MemberStart" if kind != 8 else "End", fields=fields, extra=extra))
    return events


@pytest.mark.parametrize("near", [event_columns.NEAR_ROWS, (1,)], ids=["near", "copied"])
def test_more_rows_than_a_record_batch_of_every_kind_write_the_same_bytes(near, monkeypatch):
    """The next rows' bytes a batch brings along: made with the batch (near) or copied after it."""
    monkeypatch.setattr(event_columns, "NEAR_ROWS", near)
    events = _many_events(BATCH_ROWS * 2 + 777)
    meta = {"source": "many", "cluster_members": "0,a:1", "metadata": {"recount.aeronEvidence": "[]"}}
    columns = EventColumns.from_events(events)
    assert _column_bytes(columns, **meta) == _reference_bytes(events, **meta)
    assert [columns.event(k) for k in (0, 1, 2, 3, 4, 6, 100_000)] == [events[k] for k in (0, 1, 2, 3, 4, 6, 100_000)]


def test_rare_names_and_batches_without_them_write_the_same_bytes():
    """A name few rows have: batches where no row has it (all nulls, made without ``take``), and a batch
    whose last bytes are followed by the next value's only thousands of rows on (the bytes it brings)."""
    count = BATCH_ROWS * 3 + 10
    rare_text = {3: "abc", BATCH_ROWS + 5000: "défg" * 20, BATCH_ROWS * 3 + 2: ""}
    rare_int = {7: -5, 9: 1 << 62}
    rare_bool = {BATCH_ROWS * 2 + 1: True}
    events = []
    for k in range(count):
        fields: dict = {"memberId": k % 3}
        if k in rare_text:
            fields["reason"] = rare_text[k]
        if k in rare_int:
            fields["count"] = rare_int[k]
        if k in rare_bool:
            fields["flag"] = rare_bool[k]
        events.append(Event(ts=k, node=k % 3, dir="local", peer=None, channel="local", type="MemberStart",
                            fields=fields, extra={"packet": k}))
    meta = {"source": "rare", "cluster_members": None, "metadata": None}
    columns = EventColumns.from_events(events)
    assert _column_bytes(columns, **meta) == _reference_bytes(events, **meta)


def test_no_events_and_one_event_write_the_same_bytes():
    for events in ([], _many_events(1), _many_events(5)[4:]):
        assert _column_bytes(EventColumns.from_events(events), source="s") == _reference_bytes(events, source="s")


def test_rows_taken_joined_and_replaced_are_those_events():
    events = _many_events(40)
    columns = EventColumns.from_events(events)
    order = np.arange(39, -1, -3)
    assert list(columns.take(order)) == [events[k] for k in order.tolist()]
    other = EventColumns.from_events(events[:5], entries=columns.entries)
    assert list(EventColumns.gathered([columns, other], np.array([40, 3, 44]))) == [events[0], events[3], events[4]]
    assert list(EventColumns.concat([columns, EventColumns.from_events(events[:2])])) == events + events[:2]
    start = Event(ts=4, node=1, dir="local", peer=None, channel="local", type="MemberStart", fields={"config": {"a": 1}})
    replaced = columns.with_events({4: start})
    assert list(replaced) == events[:4] + [start] + events[5:]
    assert replaced.ts is columns.ts  # what a replacement does not change is shared
    assert list(columns) == events
    assert columns.nodes() == [0, 1, 2, 3, 4]
    assert columns.rows_of_type("End").tolist() == [k for k, e in enumerate(events) if e.type == "End"]


def test_numbers_composed_into_texts_are_written_as_str_writes_them():
    """`_Texts` writes int64 values digit place by digit place (the places every value has, without
    picking rows): each row is what ``str`` gives, at any width, sign and extreme."""
    rng = np.random.default_rng(3)
    values = np.concatenate([rng.integers(-10**18, 10**18, 3000), rng.integers(0, 1000, 3000),
                             np.array([0, -1, 9, 10, -10, 99, 100, -(1 << 63), (1 << 63) - 1])])
    texts = event_columns._Texts(len(values))
    texts.set(np.arange(len(values)), [b'{"x":', values, b',"y":', values[::-1].copy(), b"}"])
    assert texts.array().to_pylist() == [f'{{"x":{a},"y":{b}}}' for a, b in zip(values.tolist(), values[::-1].tolist(), strict=True)]


@given(st.lists(st.one_of(st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1),
                          st.integers(min_value=-(10 ** 9) + 1, max_value=10 ** 9 - 1),
                          st.integers(min_value=0, max_value=999)), min_size=1, max_size=60))
def test_numbers_are_written_in_decimal_as_str_writes_them_whatever_their_width(values):
    """`_write_decimal` (32-bit arithmetic when every magnitude has at most nine digits, 64-bit else)."""
    array = np.array(values, dtype=np.int64)
    widths = event_columns._decimal_widths(array)
    at = np.concatenate([[0], np.cumsum(widths)[:-1]]).astype(np.int64)
    data = np.zeros(int(widths.sum()), dtype=np.uint8)
    ends = event_columns._write_decimal(data, at, array, widths)
    assert data.tobytes().decode() == "".join(str(v) for v in values)
    assert ends.tolist() == (at + widths).tolist()


def test_numbers_after_long_texts_are_written_as_eight_digit_blocks_as_str_writes_them():
    """After a text of seven bytes or more, values from 0 to 10**8 are written eight digits at a time,
    the leading zeros on that text (written after them): each row is still what ``str`` gives, next to
    rows whose numbers do not fit (written place by place) and with a short text before another."""
    rng = np.random.default_rng(11)
    small = np.concatenate([rng.integers(0, 10 ** 8, 4000), np.array([0, 9, 10, 9999, 10_000, 99_999_999])])
    large = np.concatenate([small[:-3], np.array([10 ** 8, -1, (1 << 63) - 1])])
    for first, second in ((small, small[::-1].copy()), (small, large), (large, small)):
        texts = event_columns._Texts(2 * len(first) + 1)
        rows = np.arange(1, 2 * len(first) + 1, 2)
        texts.set(rows, [b'{"logPosition":', first, b',"packet":', second, b"}"])
        texts.set(rows - 1, [b'{"x":', second, b"}"])
        expected = [None] * (2 * len(first) + 1)
        for k, (a, b) in enumerate(zip(first.tolist(), second.tolist(), strict=True)):
            expected[2 * k + 1] = f'{{"logPosition":{a},"packet":{b}}}'
            expected[2 * k] = f'{{"x":{b}}}'
        assert texts.array().to_pylist() == expected


@given(st.lists(st.integers(min_value=0, max_value=10 ** 8 + 5), min_size=1, max_size=40))
def test_numbers_written_in_blocks_are_written_as_str_writes_them(values):
    array = np.array(values, dtype=np.int64)
    widths = event_columns._decimal_widths(array)
    room = 7
    at = room + np.concatenate([[0], np.cumsum(widths + room)[:-1]]).astype(np.int64)
    data = np.full(int((widths + room).sum()), ord("."), dtype=np.uint8)
    ends = event_columns._write_decimal(data, at, array, widths, room=room)
    for start in (at - room).tolist():  # the bytes before each number, written after it
        data[start:start + room] = ord(".")
    assert data.tobytes().decode() == "".join("." * room + str(v) for v in values)
    assert ends.tolist() == (at + widths).tolist()


@pytest.mark.parametrize("sizes", [(40, 5, 3), (5, 40, 3), (3, 5, 40), (0, 40, 0), (40,)])
def test_rows_gathered_from_parts_are_the_joined_parts_rows(sizes):
    """`EventColumns.gathered` takes the largest part's rows directly and puts the others' in after."""
    events = _many_events(sum(sizes) + 1)[1:]
    parts, start = [], 0
    columns = EventColumns.from_events(events[:sizes[0]])
    for size in sizes:
        parts.append(EventColumns.from_events(events[start:start + size], entries=columns.entries))
        start += size
    rows = np.random.default_rng(sum(sizes)).permutation(sum(sizes))[: sum(sizes) - 2]
    gathered = EventColumns.gathered(parts, rows)
    joined = EventColumns.concat_shared(parts).take(rows)
    for name in EventColumns._ROW_COLUMNS:
        assert np.array_equal(getattr(gathered, name), getattr(joined, name))
        assert getattr(gathered, name).dtype == getattr(joined, name).dtype
    assert list(gathered) == [events[k] for k in rows.tolist()]


def test_extras_of_the_usual_shapes_and_others_are_told_apart():
    others: list = []
    shape = event_columns._extra_shape
    assert shape({"packet": 5}, others) == (event_columns.EXTRA_PACKET, 5, 0, None, -1)
    assert shape({"logPosition": 7, "packet": 5}, others) == (event_columns.EXTRA_LOG, 5, 7, None, -1)
    assert shape({"logPosition": 7, "packet": 5, "capturedTs": 3}, others) == (event_columns.EXTRA_LOG, 5, 7, 3, -1)
    assert shape({"packet": 5, "capturedTs": -3}, others) == (event_columns.EXTRA_PACKET, 5, 0, -3, -1)
    odd = [{"packet": True}, {"packet": 1 << 63}, {"packet": 5, "logPosition": 7}, {"logPosition": 7, "x": 5},
           {"logPosition": 7.0, "packet": 5}, {"capturedTs": 3}, {"x": 1}]
    for k, extra in enumerate(odd):
        assert shape(extra, others) == (event_columns.EXTRA_OTHER, 0, 0, None, k)
    assert others == odd


def test_a_rare_name_with_long_values_writes_the_same_bytes():
    """A name few rows of a batch have, whose values hold many bytes, and rare booleans and integers in
    a batch full of other names' values."""
    count = BATCH_ROWS + 3000
    events = []
    for k in range(count):
        fields: dict = {"memberId": k % 3, "logPosition": 64 * k}
        if k % 70 == 3:
            fields["clusterMembers"] = "0,host:20000|" * (20 + k % 13)
        if k % 997 == 5:
            fields["flag"] = bool(k % 2)
        if k % 500 == 1:
            fields["count"] = -k
        events.append(Event(ts=k, node=k % 3, dir="local", peer=None, channel="local", type="MemberStart",
                            fields=fields, extra={"logPosition": k, "packet": k} if k % 2 else None))
    meta = {"source": "long", "cluster_members": None, "metadata": None}
    assert _column_bytes(EventColumns.from_events(events), **meta) == _reference_bytes(events, **meta)


@pytest.mark.parametrize("later", ["two batches on", "many rows of the next batch"])
def test_the_bytes_a_rare_text_brings_along_come_from_the_batches_after_it(later):
    """A batch's last value of a name few rows have is followed by its next value two batches on (the
    batch between without it), or in many rows of the next batch (looked through row by row there)."""
    count = BATCH_ROWS * 3 + 100
    events = []
    for k in range(count):
        fields: dict = {"memberId": k % 3}
        batch = k // BATCH_ROWS
        if (batch == 0 and k % 9000 == 7) or (later == "two batches on" and batch == 2 and k % 7000 == 11):
            fields["reason"] = "r%d" % k
        if later == "many rows of the next batch" and batch == 1 and k % 3 == 0:
            fields["reason"] = "" if k % 2 else "s%d" % k
        events.append(Event(ts=k, node=k % 3, dir="local", peer=None, channel="local", type="MemberStart",
                            fields=fields, extra={"packet": k}))
    meta = {"source": "rare", "cluster_members": None, "metadata": None}
    assert _column_bytes(EventColumns.from_events(events), **meta) == _reference_bytes(events, **meta)
