"""`LogStore` (engine.model.sim_parts): chunked frames with shared frozen chunks behave exactly like one
plain list of (end, message), and a copy never sees what happens to its original (or back)."""

from __future__ import annotations

import copy
from bisect import bisect_right

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.model import sim_parts
from engine.model.sim_parts import LogStore


class PlainLog:
    """The reference: every frame in one list, as the store was before it was chunked."""

    def __init__(self, base: int = 0) -> None:
        self.base = base
        self.ends: list[int] = []
        self.messages: list[object] = []

    @property
    def end(self) -> int:
        return self.ends[-1] if self.ends else self.base

    def append(self, end: int, message: object) -> None:
        if end > self.end:
            self.ends.append(end)
            self.messages.append(message)

    def truncate(self, position: int) -> None:
        if position >= self.end:
            return
        if position <= self.base:
            self.base = position
            self.ends.clear()
            self.messages.clear()
            return
        index = bisect_right(self.ends, position)
        del self.ends[index:], self.messages[index:]
        if self.end < position:
            self.append(position, None)

    def set_end(self, position: int) -> None:
        if position > self.end:
            self.append(position, None)
        else:
            self.truncate(position)

    def frames(self, position: int, limit: int | None = None) -> list[tuple[int, int, object]]:
        out = []
        for i in range(bisect_right(self.ends, position), len(self.ends)):
            if limit is not None and self.ends[i] > limit:
                break
            out.append((self.ends[i - 1] if i else self.base, self.ends[i], self.messages[i]))
        return out

    def overlapping(self, start: int, stop: int) -> list[tuple[int, int, object]]:
        out = []
        for i in range(bisect_right(self.ends, start), len(self.ends)):
            frame_start = self.ends[i - 1] if i else self.base
            if frame_start >= stop:
                break
            out.append((frame_start, self.ends[i], self.messages[i]))
        return out


operations = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 5)),
        st.tuples(st.just("many"), st.integers(1, 60)),
        st.tuples(st.just("truncate"), st.integers(0, 600)),
        st.tuples(st.just("set_end"), st.integers(0, 600)),
        st.tuples(st.just("copy"), st.just(0)),
    ),
    max_size=60,
)


def _same(store: LogStore, plain: PlainLog, probes: list[int]) -> None:
    assert store.end == plain.end
    assert len(store) == len(plain.ends)
    for p in probes:
        assert store.after(p) == plain.frames(p)
        assert store.after(p, p + 37) == plain.frames(p, p + 37)
        assert store.overlapping(p, p + 23) == plain.overlapping(p, p + 23)


@settings(max_examples=150, deadline=None)
@given(operations, st.integers(0, 20))
def test_a_chunked_log_store_answers_as_one_plain_list_and_its_copies_are_independent(ops, base):
    old = sim_parts.LOG_CHUNK, sim_parts.LOG_GROUP
    sim_parts.LOG_CHUNK, sim_parts.LOG_GROUP = 4, 3  # small: every operation crosses chunk and group boundaries
    try:
        store, plain = LogStore(base), PlainLog(base)
        copies: list[tuple[LogStore, PlainLog]] = []
        message = 0
        for op, value in ops:
            if op == "append":
                message += 1
                store.append(store.end + value, message)
                plain.append(plain.end + value, message)
            elif op == "many":
                for _ in range(value):
                    message += 1
                    store.append(store.end + 3, message)
                    plain.append(plain.end + 3, message)
            elif op == "truncate":
                store.truncate(value)
                plain.truncate(value)
            elif op == "set_end":
                store.set_end(value)
                plain.set_end(value)
            else:
                twin = PlainLog(plain.base)
                twin.ends, twin.messages = list(plain.ends), list(plain.messages)
                copies.append((copy.deepcopy(store), twin))
        probes = [plain.base - 1, plain.base, plain.end // 2, plain.end - 1, plain.end, plain.end + 5]
        _same(store, plain, probes)
        for twin_store, twin_plain in copies:  # what happened to the original after a copy never shows in it
            _same(twin_store, twin_plain, [twin_plain.base, twin_plain.end // 3, twin_plain.end - 2])
    finally:
        sim_parts.LOG_CHUNK, sim_parts.LOG_GROUP = old


def test_copying_a_long_log_shares_its_frozen_frames():
    store = LogStore(0)
    for i in range(1, 5000):
        store.append(i * 32, ("frame", i))
    twin = copy.deepcopy(store)
    assert twin.after(0) == store.after(0)
    assert twin._groups is store._groups and twin._chunks is store._chunks  # shared, not copied
    twin.truncate(100 * 32)
    assert store.end == 4999 * 32 and twin.end == 100 * 32
    assert len(store.after(0)) == 4999


def test_frozen_ends_take_eight_bytes_a_frame_and_positions_beyond_64_bits_still_work():
    # A long replay keeps every frame of every member's log: the frozen chunks hold their ends as int64s.
    store = LogStore(0)
    for i in range(1, 200):
        store.append(i * 32, None)
    assert type(store._chunks[0][0]).__name__ == "array" and store._chunks[0][0].itemsize == 8
    # A hand-made input's position that is no int64 is kept as it is, and answers the same.
    huge, plain = LogStore(0), PlainLog(0)
    for i in range(1, 200):
        huge.append(i * 2**57, i)
        plain.append(i * 2**57, i)
    _same(huge, plain, [0, 2**62, 2**63 + 5, plain.end])
    huge.truncate(2**63)
    plain.truncate(2**63)
    _same(huge, plain, [0, 2**62, plain.end])
