"""`recount bisect`: the first Aeron release whose behaviour on a capture answers a check differently.

Given a capture (a replay file or anything `recount replay` reads), two releases whose answers to a
check differ, and the check (`recorder.checks`), binary search over the ordered releases between them
(`engine.versions.VERSIONS`, or a list given) for the boundary: the first release, walking from the
older end, whose answer is the newer end's.  ``good`` and ``bad`` name the releases where the check
passes and fails; either may be the older one, so the search finds where a bug came in
(``--good 1.40.0 --bad 1.41.0``) or where it was fixed (``--bad 1.41.0 --good 1.47.3``).

Each release is tried by a cluster replay (`engine.cluster_replay`) of the capture under that
release's flags (or a node replay with ``mode="node"``).  Releases with equal flags behave alike, so a
result is reused for every release with the same flags.  A check is assumed to change once between
the two ends (as for any bisection); every release actually tried is listed with its answer, so a
non-monotonic history can be seen.

The report says the release found, the flags that changed from the release before it (from the
catalogue in `engine.model.flags`), and the first event where the two behave differently (`recorder.diff`
between their traces).  Deterministic: the same capture, check and options give the same report.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from engine.versions import VERSIONS, confidence, flag_changes, model_for
from recorder.checks import Check
from recorder.diff import Side, diff_traces, replay_records


class BisectError(ValueError):
    """The bisection cannot be done as asked (one line, for the CLI)."""


@dataclass
class Trial:
    version: str
    result: bool
    reused_from: str | None = None


def bisect(
    loaded: Any,
    *,
    good: str,
    bad: str,
    check: Check,
    versions: Sequence[str] = VERSIONS,
    mode: str = "cluster",
    seed: int | None = None,
    until: int | None = None,
    on_trial: Callable[[Trial], None] | None = None,
) -> dict[str, Any]:
    """Find the first release where ``check`` changes between ``good`` and ``bad`` (see the docstring)."""
    versions = list(versions)
    for name in (good, bad):
        if name not in versions:
            raise BisectError(f"{name!r} is not among the releases searched ({', '.join(versions)})")
    if good == bad:
        raise BisectError("--good and --bad must be different releases")
    models = {v: model_for(v) for v in versions}
    traces: dict[str, list[dict[str, Any]]] = {}
    by_flags: dict[Any, str] = {}
    trials: list[Trial] = []

    def trace_of(version: str) -> list[dict[str, Any]]:
        if version not in traces:
            traces[version] = replay_records(loaded, model=version, mode=mode, seed=seed, until=until)
        return traces[version]

    results: dict[str, bool] = {}

    def answer(version: str) -> bool:
        if version in results:
            return results[version]
        flags = models[version].flags
        twin = by_flags.get(flags) if models[version].node_factory is None else None
        if twin is not None:
            results[version] = results[twin]
            trial = Trial(version, results[version], reused_from=twin)
        else:
            results[version] = check.evaluate(trace_of(version))
            if models[version].node_factory is None:
                by_flags[flags] = version
            trial = Trial(version, results[version])
        trials.append(trial)
        if on_trial is not None:
            on_trial(trial)
        return results[version]

    lo, hi = sorted((versions.index(good), versions.index(bad)))
    if answer(good) is not True:
        raise BisectError(f"the check is false on --good {good}; it must hold there ({check})")
    if answer(bad) is not False:
        raise BisectError(f"the check holds on --bad {bad}; it must fail there ({check})")
    low_answer = results[versions[lo]]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if answer(versions[mid]) == low_answer:
            lo = mid
        else:
            hi = mid
    found, before = versions[hi], versions[lo]
    for version in (before, found):
        trace_of(_traced_twin(version, models, by_flags))
    difference = diff_traces(
        Side(before, traces[_traced_twin(before, models, by_flags)]),
        Side(found, traces[_traced_twin(found, models, by_flags)]),
    )
    direction = "fixed" if results[found] else "broke"
    return {
        "check": str(check),
        "good": good,
        "bad": bad,
        "mode": mode,
        "firstChanged": found,
        "previous": before,
        "direction": direction,
        "resultBefore": results[before],
        "resultAt": results[found],
        "flagsChanged": flag_changes(models[before].flags, models[found].flags),
        "confidence": {version: confidence(version) for version in (before, found)},
        "firstDifference": difference["firstDivergence"],
        "differences": difference["summary"]["differences"],
        "trials": [
            {"version": t.version, "result": t.result, "confidence": confidence(t.version)["level"],
             **({"sameFlagsAs": t.reused_from} if t.reused_from else {})}
            for t in trials
        ],
    }


def _traced_twin(version: str, models: dict[str, Any], by_flags: dict[Any, str]) -> str:
    """The release whose trace stands for ``version`` (one with the same flags that was replayed)."""
    if models[version].node_factory is None:
        return by_flags.get(models[version].flags, version)
    return version
