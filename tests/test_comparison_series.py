"""The comparison's series (`engine.replay._Series`) keep their runs as columns, with a `_Run` made only as a
handle on one of them when a check or a divergence needs it.  They must answer every question exactly as
the series of one object per run they replaced: which sends start a run, which runs are kept after a
prune, whether a window covers a run, the nearest run to a time and the nearest run of the same key.  The
object-per-run series is kept here as the oracle, and Hypothesis drives both with the same sends.
"""

from __future__ import annotations

import bisect
import json
from types import SimpleNamespace

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.replay import NodeReplay, RecordingFacts, _KeyRuns, _record_of, _Run, _Series
from engine.steady import RECORDED_SEND, SteadyLane, _append_record


class _ObjectRun:
    def __init__(self, number, start, key, position, ref, record):
        self.number, self.start, self.end = number, start, start
        self.key, self.position, self.ref, self.record = key, position, ref, record


class _ObjectSeries:
    """The series as it was before the columns (engine/replay.py at cf58845), one object per run."""

    def __init__(self):
        self.runs, self.starts, self.by_key, self.count = [], [], {}, 0

    def add(self, ts, key, position, ref, record):
        if self.runs and self.runs[-1].key == key and self.runs[-1].position == position:
            self.runs[-1].end = ts
            self.by_key[key].ends[-1] = ts
            return None
        run = _ObjectRun(self.count, ts, key, position, ref, record)
        self.count += 1
        self.runs.append(run)
        self.starts.append(ts)
        index = self.by_key.setdefault(key, _KeyRuns())
        if index.positions and position is not None and index.positions[-1] is not None \
                and position < index.positions[-1]:
            index.monotonic = False
        index.starts.append(ts)
        index.ends.append(ts)
        index.positions.append(position)
        return run

    def covers(self, run, low, high):
        index = self.by_key.get(run.key)
        return index is not None and index.covers(run.position, low, high)

    def nearest_same(self, run, window):
        index = self.by_key.get(run.key)
        if index is None or not index.covers(run.position, run.start - window, run.start + window):
            return None
        first = max(bisect.bisect_left(self.starts, run.start - window) - 1, 0)
        last = bisect.bisect_right(self.starts, run.start + window)
        best = None
        for other in self.runs[first:last]:
            if other.key != run.key or other.end < run.start - window:
                continue
            distance = min(abs(other.start - run.start), abs(other.end - run.start))
            if best is None or distance < best[0]:
                best = (distance, other)
        return best[1] if best is not None else None

    def nearest(self, ts):
        if not self.runs:
            return None
        i = bisect.bisect_left(self.starts, ts)
        candidates = [self.runs[j] for j in (i - 1, i) if 0 <= j < len(self.runs)]
        return min(candidates, key=lambda r: (min(abs(r.start - ts), abs(r.end - ts)), r.start))

    def prune(self, cutoff):
        runs = self.runs
        drop = 0
        while drop < len(runs) - 1 and runs[drop].end < cutoff:
            drop += 1
        if drop:
            del runs[:drop], self.starts[:drop]
        last_key = runs[-1].key if runs else None
        for key, index in self.by_key.items():
            index.prune(cutoff, keep_last=bool(runs) and key == last_key)


def _fields(run):
    return None if run is None else (run.number, run.start, run.end, run.key, run.position, run.ref)


def _record(i):
    return {"sent": i}


KEYS = [(1, 0, 0), (1, 2, 0), (2, 0, 0), ("Vote", True)]
SENDS = st.lists(
    st.one_of(
        # a send: time step (mostly forward; a step back now and then, as no input promises order), key, position
        st.tuples(st.just("send"), st.one_of(st.integers(0, 40), st.integers(-15, -1)), st.sampled_from(KEYS),
                  st.one_of(st.none(), st.integers(0, 6).map(lambda p: p * 32))),
        st.tuples(st.just("prune"), st.integers(-60, 10)),  # a cutoff, this far from the time now
    ),
    max_size=80,
)
PROBES = st.lists(st.tuples(st.integers(-20, 1200), st.sampled_from(KEYS),
                            st.one_of(st.none(), st.integers(0, 200)), st.integers(0, 60)), min_size=1, max_size=6)


@settings(max_examples=300, deadline=None)
@given(SENDS, PROBES)
def test_a_columnar_series_answers_as_one_object_per_run_did(sends, probes):
    series, oracle = _Series(), _ObjectSeries()
    series.record_at = _record
    ts = 0
    begun = []  # every run's handle as `add` gave it, and the oracle's run
    for i, op in enumerate(sends):
        if op[0] == "prune":
            series.prune(ts + op[1])
            oracle.prune(ts + op[1])
        else:
            _, step, key, position = op
            ts = max(ts + step, 0)
            # runs carry a recipe, the position of their recorded event or their trace line (`engine.steady`,
            # `engine._window`), or a builder of their record (the model's path)
            record = ((_record, i) if i % 4 == 1 else i if i % 4 == 2 else json.dumps(_record(i)) if i % 4 == 3
                      else (lambda i=i: _record(i)))
            new, old = series.add(ts, key, position, i, record), oracle.add(ts, key, position, i, _record(i))
            assert _fields(new) == _fields(old)
            if new is not None:
                begun.append((new, old))
        kept = [_fields(run) for run in oracle.runs]
        assert _fields(series.newest()) == (kept[-1] if kept else None)
        assert series.base + len(series.starts) == oracle.count
        assert [_fields(_Run(series, number)) for number, *_ in kept] == kept
        for run in oracle.runs:
            assert _record_of(_Run(series, run.number)) == run.record
    # a check holds its run's handle while the series may prune the run (a state-change check's window can
    # be longer than the prune's margin): what the check reads of it is still there
    for new, old in begun:
        assert (new.start, new.key, new.position, new.ref, _record_of(new)) == \
            (old.start, old.key, old.position, old.ref, old.record)
    for at, key, position, window in probes:
        probe = SimpleNamespace(start=at, key=key, position=position)
        assert series.covers(probe, at - window, at + window) == oracle.covers(probe, at - window, at + window)
        assert _fields(series.nearest(at)) == _fields(oracle.nearest(at))
        assert _fields(series.nearest_same(probe, window)) == _fields(oracle.nearest_same(probe, window))


def test_two_handles_on_one_run_are_one_run_to_the_failed_checks():
    # `NodeReplay.found_by_run` pairs a failed check with the other side's failed check of the same run
    series, other = _Series(), _Series()
    series.add(0, (1,), 32, None, dict)
    series.add(5, (1,), 64, None, dict)
    other.add(0, (1,), 32, None, dict)
    first, second = series.nearest(0), series.nearest(5)
    again = series.nearest_same(SimpleNamespace(start=1, key=(1,), position=32), 10)
    assert first == again and hash(first) == hash(again) and {first: "found"}.get(again) == "found"
    assert first != second and first != other.nearest(0)


def _lane_replay():
    facts = RecordingFacts(compared_channels={1: frozenset({"consensus"})}, observed_kinds={}, nominations={},
                           first_start={})
    replay = NodeReplay(facts)
    return replay, SteadyLane(replay, lambda k: {"recorded": k})


def _recorded_append(ts, term, position, ref):
    """A lane row: member 1's recorded AppendPosition to member 0."""
    return (ts, 1, "out", "consensus", "AppendPosition", 0, term, position, 1, None, 0, None, None, None, None, ref,
            RECORDED_SEND)


def test_a_model_send_of_a_key_whose_recorded_runs_were_all_pruned_is_checked_not_a_crash():
    # Regression: the lane read the newest position of the recording's runs of the key, and a key whose runs
    # were all pruned (an old term's, once the recording moved to a new term) has none: IndexError.
    replay, lane = _lane_replay()
    out: list = []
    assert lane._expected(_recorded_append(0, 1, 64, 10), out)
    assert lane._expected(_recorded_append(10_000_000_000, 2, 96, 11), out)
    replay.expected[(1, 0, "consensus", "AppendPosition")].prune(9_000_000_000)  # term 1's only run goes
    ts = 10_100_000_000
    lane._actual(1, 0, "consensus", "AppendPosition", (1, 1, 0), 64, ts, (_append_record, ts, 1, 0, 1, 64, 0))
    assert [entry[:4] for entry in replay.tentative] == [
        [ts + replay.tolerance_ns, replay.check_seq, 1, (1, 0, "consensus", "AppendPosition")]]
    replay.horizon[1] = ts + 10 * replay.tolerance_ns
    replay._resolve_due(None, out)  # the check fails: the recording has no term 1 run near it any more
    model = [d for d in out if d.get("kind") == "divergence" and d["unmatched"] == "model"]
    assert [(d["ts"], d["actual"]["fields"]["leadershipTermId"]) for d in model] == [(ts, 1)]
