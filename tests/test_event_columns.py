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
