"""Model versions: Aeron releases 1.40.0 … 1.51.0 as sets of behaviour flags, and user models.

A *model* is what a replay runs: a name, the `ModelFlags` it switches on, and how to build a member's
`Node` (Aeron's own releases all use `engine.model.node.Node`; a user model may bring its own).

Releases.  `VERSIONS` is the ordered list a bisect walks: every minor release from 1.40.0 to 1.51.0,
plus the patch releases that carry an election change of aeron-election.md §8 (1.46.6's backport,
1.47.3 — the baseline the engine is written from —, 1.48.4, 1.49.1, 1.50.1, 1.50.2).  The flags of a
release are computed, not listed: a flag is on in release ``r`` when ``r`` is at or after the
flag's first release (`FlagInfo.since`), or is on a release line that got the change as a backport
at or after the backport's patch release.  So any release number in range works (`model_for("1.44.2")`),
and two releases with equal flags behave identically (a bisect can reuse one's result for the other).

User models.  A team's patched model is a Python distribution with an entry point in the group
``recount.models``; the entry point's name is the model's name (``recount replay --model NAME``).
What it loads may be:

* a `ModelFlags` (a release's behaviour with some flags changed),
* a `Model` (flags, a node factory, a description),
* a subclass of `engine.model.node.Node` (the 1.47.3 flags, that class's nodes),
* a mapping ``{"flags": ModelFlags | {name: bool}, "base": "1.47.3", "node_factory": callable,
  "description": "..."}`` (every key optional), or
* a function taking no arguments that returns any of the above.

A node factory is called as ``factory(member_id, start, random=random, flags=flags)`` and must return
an object with `Node`'s driving API.  Entry points are read once, when a name is not a release or when
all models are listed; a broken one is a `ValueError` naming the entry point, never a traceback.

Pure apart from reading installed distributions' metadata (`importlib.metadata`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

from engine.model.flags import FLAG_BY_NAME, FLAGS, ModelFlags

ENTRY_POINT_GROUP = "recount.models"
#: The release the engine is written from; the default model.
BASELINE = "1.47.3"
OLDEST = (1, 40, 0)
NEWEST_LINE = (1, 51)

#: The releases a bisect walks, oldest first.
VERSIONS: tuple[str, ...] = (
    "1.40.0",
    "1.41.0",
    "1.41.5",
    "1.41.7",
    "1.42.0",
    "1.43.0",
    "1.44.0",
    "1.45.0",
    "1.46.0",
    "1.46.6",
    "1.47.0",
    "1.47.3",
    "1.48.0",
    "1.48.4",
    "1.49.0",
    "1.49.1",
    "1.50.0",
    "1.50.1",
    "1.50.2",
    "1.50.4",
    "1.51.0",
)

#: What each release's model has been judged by.  A release is *checked* when a real capture of it
#: (named here) replays with its model with zero divergences and every logged election state change;
#: *compared* when a real capture of it exists but the model does not reproduce it yet (what is left is
#: said); every other release is modelled from the release notes and sources only (aeron-election.md §8).
REAL_CAPTURES: dict[str, tuple[tuple[str, str, str], ...]] = {
    # version: ((capture, status, what the capture showed), ...)
    "1.47.3": (
        ("aeron-1.47.3-capture/a_clean_start", "checked", "zero divergences, every logged state change"),
    ),
    "1.50.4": (
        ("aeron-versions-capture/v1.50.4_a_clean_start", "checked",
         "zero divergences, the 33 logged state changes (split vote in term 0, leader 2 in term 1)"),
    ),
    "1.41.7": (
        ("aeron-versions-capture/v1.41.7_a_clean_start", "checked",
         "zero divergences and every one of the 43 logged state changes: the two-leader overlap, member 1's"
         " step-down on 'new leader detected due to commit position', and the ClusterTool shutdown through"
         " each follower's recorded 1.8-2.0 s snapshot to its TerminationAck"),
    ),
}


#: The cluster codec schema's version (schema id 111, in every message's SBE header) -> the Aeron release
#: lines that send it, from aeron-cluster-codecs.xml at each tag.
SCHEMA_VERSION_LINES: dict[int, tuple[str, str]] = {
    9: ("1.40", "1.40"), 10: ("1.41", "1.41"), 11: ("1.42", "1.42"), 12: ("1.43", "1.47"),
    13: ("1.48", "1.48"), 14: ("1.49", "1.49"), 15: ("1.50", "1.50"), 16: ("1.51", "1.51"),
}


def _line(text: str) -> tuple[int, int]:
    return parse_version(text)[:2]


def model_from_evidence(evidence: Sequence[Mapping[str, Any]]) -> tuple[str | None, str]:
    """The release a capture's evidence points to, and why; (None, why) when it says nothing or clashes.

    Each item is ``{"source", "says", "first", "last", "exact"}``: the release lines it allows
    (``last`` None: and later) and, when it names one (1.50's agent log), the ``exact`` release.  An
    exact release wins; otherwise the newest modelled release of the lines every item allows.
    """
    if not evidence:
        return None, "no evidence of the Aeron version"
    low, high = OLDEST[:2], NEWEST_LINE
    for item in evidence:
        low = max(low, _line(item["first"]))
        if item.get("last"):
            high = min(high, _line(item["last"]))
    counts: dict[str, int] = {}
    for item in evidence:
        counts[item["says"]] = counts.get(item["says"], 0) + 1
    said = "; ".join(says + (f" (×{n})" if n > 1 else "") for says, n in counts.items())
    exact = sorted({item["exact"] for item in evidence if item.get("exact")})
    if len(exact) > 1:
        return None, f"the evidence names several releases ({said})"
    if exact:
        if not low <= _line(exact[0]) <= high:
            return None, f"the evidence clashes ({said})"
        return ".".join(map(str, parse_version(exact[0]))), said
    if low > high:
        return None, f"the evidence clashes ({said})"
    fitting = [v for v in VERSIONS if low <= _line(v) <= high]
    if not fitting:
        return None, f"no modelled release fits ({said})"
    return fitting[-1], f"{said}; the newest modelled release of {'.'.join(map(str, low))}" + (
        f"–{'.'.join(map(str, high))}" if high != low else "")


def confidence(version: str) -> dict[str, Any]:
    """How far a release's model is borne out: ``level`` checked / compared / notes, and the captures."""
    try:
        name = ".".join(str(n) for n in parse_version(version))
    except ValueError:
        return {"version": version, "level": "user", "captures": []}
    captures = REAL_CAPTURES.get(name, ())
    levels = [status for _, status, _ in captures]
    level = "checked" if "checked" in levels else "compared" if levels else "notes"
    return {
        "version": name,
        "level": level,
        "captures": [{"capture": c, "status": status, "note": note} for c, status, note in captures],
    }


def parse_version(text: str) -> tuple[int, int, int]:
    """``"1.47.3"`` -> (1, 47, 3); a missing patch is 0.  Anything else is a `ValueError`."""
    parts = text.strip().split(".")
    if not 2 <= len(parts) <= 3 or not all(p.isdigit() for p in parts):
        raise ValueError(f"{text!r} is not an Aeron release number such as 1.47.3")
    numbers = [int(p) for p in parts] + [0] * (3 - len(parts))
    return numbers[0], numbers[1], numbers[2]


def is_release(text: str) -> bool:
    try:
        parse_version(text)
    except ValueError:
        return False
    return True


def _has(info_since: str, backports: tuple[str, ...], version: tuple[int, int, int]) -> bool:
    if version >= parse_version(info_since):
        return True
    for backport in backports:
        patch = parse_version(backport)
        if version[:2] == patch[:2] and version >= patch:
            return True
    return False


def flags_for_version(version: str) -> ModelFlags:
    """The flags of Aeron ``version`` (1.40.0 … 1.51.x).  Out of range is a `ValueError`."""
    number = parse_version(version)
    if number < OLDEST:
        raise ValueError(f"Aeron {version} is older than the oldest modelled release ({'.'.join(map(str, OLDEST))})")
    if number[:2] > NEWEST_LINE:
        raise ValueError(f"Aeron {version} is newer than the newest modelled release line ({NEWEST_LINE[0]}.{NEWEST_LINE[1]})")
    return ModelFlags(**{info.name: _has(info.since, info.backports, number) for info in FLAGS})


@dataclass(frozen=True)
class Model:
    """A replayable model: a name, its behaviour flags and the factory of its members' Nodes."""

    name: str
    flags: ModelFlags
    node_factory: Callable[..., Any] | None = None
    description: str = ""
    origin: str = "release"  # "release", or "entry point <name> (<distribution>)"

    def new_node(self, member_id: int, start: Any, *, random: Any) -> Any:
        if self.node_factory is None:
            from engine.model.node import Node

            return Node(member_id, start, random=random, flags=self.flags)
        return self.node_factory(member_id, start, random=random, flags=self.flags)

    @property
    def is_release(self) -> bool:
        return self.origin == "release"


def release_model(version: str) -> Model:
    number = parse_version(version)
    name = ".".join(str(n) for n in number)
    description = "the baseline the engine is written from" if name == BASELINE else ""
    return Model(name=name, flags=flags_for_version(name), description=description)


# -- user models -----------------------------------------------------------------------------------------------

_user_models: dict[str, Model] | None = None


def _entry_points() -> list[Any]:
    import importlib.metadata  # here: 6 ms of a command's start that reads no user model (recount convert)

    found = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
    # Sorted by name, then distribution, so that duplicates resolve the same way everywhere.
    return sorted(found, key=lambda ep: (ep.name, _dist_name(ep), ep.value))


def _dist_name(entry_point: Any) -> str:
    dist = getattr(entry_point, "dist", None)
    if dist is None:
        return ""
    return getattr(dist, "name", "") or ""


def _flags_from(value: Any, base: ModelFlags, where: str) -> ModelFlags:
    if isinstance(value, ModelFlags):
        return value
    if isinstance(value, Mapping):
        unknown = sorted(set(value) - set(FLAG_BY_NAME))
        if unknown:
            raise ValueError(f"{where}: unknown flag {unknown[0]!r} (known: {', '.join(FLAG_BY_NAME)})")
        for name, flag in value.items():
            if not isinstance(flag, bool):
                raise ValueError(f"{where}: flag {name!r} must be true or false, got {flag!r}")
        return replace(base, **dict(value))
    raise ValueError(f"{where}: 'flags' must be a ModelFlags or a mapping of flag names to booleans")


def model_from_object(name: str, obj: Any, *, origin: str = "user", depth: int = 0) -> Model:
    """Interpret what a ``recount.models`` entry point loaded (see the module docstring)."""
    from engine.model.node import Node

    where = f"model {name!r} ({origin})"
    if isinstance(obj, Model):
        return replace(obj, name=name, origin=origin)
    if isinstance(obj, ModelFlags):
        return Model(name=name, flags=obj, origin=origin, description="flags")
    if isinstance(obj, type) and issubclass(obj, Node):
        return Model(name=name, flags=ModelFlags(), node_factory=obj, origin=origin, description=obj.__qualname__)
    if isinstance(obj, Mapping):
        unknown = sorted(set(obj) - {"flags", "base", "node_factory", "description"})
        if unknown:
            raise ValueError(f"{where}: unknown key {unknown[0]!r} (expected flags, base, node_factory, description)")
        base_name = obj.get("base", BASELINE)
        try:
            base = flags_for_version(str(base_name))
        except ValueError as error:
            raise ValueError(f"{where}: 'base': {error}") from None
        flags = _flags_from(obj.get("flags", base), base, where)
        factory = obj.get("node_factory")
        if factory is not None and not callable(factory):
            raise ValueError(f"{where}: 'node_factory' must be callable")
        description = obj.get("description", "")
        return Model(name=name, flags=flags, node_factory=factory, description=str(description), origin=origin)
    if callable(obj) and depth == 0:
        try:
            produced = obj()
        except Exception as error:  # a user's code: report it as one line, never a traceback
            raise ValueError(f"{where}: calling it failed: {type(error).__name__}: {error}") from None
        return model_from_object(name, produced, origin=origin, depth=1)
    raise ValueError(
        f"{where}: expected ModelFlags, Model, a Node subclass, a mapping or a function returning one,"
        f" got {type(obj).__name__}"
    )


def user_models(*, refresh: bool = False) -> dict[str, Model]:
    """The models installed through the ``recount.models`` entry-point group, by name."""
    global _user_models
    if _user_models is not None and not refresh:
        return _user_models
    _user_models = None  # a broken entry point fails every time, not only the first
    models: dict[str, Model] = {}
    for entry_point in _entry_points():
        dist = _dist_name(entry_point)
        origin = f"entry point {entry_point.name}" + (f" ({dist})" if dist else "")
        if entry_point.name in models:
            continue  # the first by (name, distribution) wins
        if is_release(entry_point.name):
            raise ValueError(f"{origin}: a user model cannot take the name of an Aeron release")
        try:
            loaded = entry_point.load()
        except Exception as error:  # an import error in someone's plugin: one line, never a traceback
            raise ValueError(f"{origin} = {entry_point.value}: cannot load it: {type(error).__name__}: {error}") from None
        models[entry_point.name] = model_from_object(entry_point.name, loaded, origin=origin)
    _user_models = models
    return models


def model_for(name: str) -> Model:
    """The model called ``name``: an Aeron release (1.40.0 … 1.51.x) or an installed user model."""
    if is_release(name):
        return release_model(name)
    models = user_models()
    if name in models:
        return models[name]
    known = ", ".join(VERSIONS + tuple(sorted(models)))
    raise ValueError(f"unknown model {name!r}; known models: {known}")


def all_models() -> list[Model]:
    """Every release of `VERSIONS`, then the user models by name."""
    return [release_model(v) for v in VERSIONS] + [user_models()[n] for n in sorted(user_models())]


def flag_changes(older: ModelFlags, newer: ModelFlags) -> list[dict[str, Any]]:
    """The flags that differ between two models, with what they mean, in catalogue order."""
    out = []
    for name in newer.changed_from(older):
        info = FLAG_BY_NAME[name]
        out.append(
            {
                "flag": name,
                "from": getattr(older, name),
                "to": getattr(newer, name),
                "since": info.since,
                "summary": info.summary,
                "before": info.before,
                "after": info.after,
            }
        )
    return out


def versions_document() -> dict[str, Any]:
    """What `recount versions --json` prints: releases with their flags and what each flag changes."""
    releases = []
    previous: ModelFlags | None = None
    for version in VERSIONS:
        flags = flags_for_version(version)
        introduced = [] if previous is None else flags.changed_from(previous)
        releases.append(
            {
                "version": version,
                "baseline": version == BASELINE,
                "flags": {f.name: getattr(flags, f.name) for f in fields(flags)},
                "changes": introduced,
                "confidence": confidence(version),
            }
        )
        previous = flags
    from engine.model.flags import LEFT_OUT

    return {
        "baseline": BASELINE,
        "versions": releases,
        "flags": [
            {
                "flag": info.name,
                "since": info.since,
                "backports": list(info.backports),
                "commits": info.commits,
                "summary": info.summary,
                "before": info.before,
                "after": info.after,
            }
            for info in FLAGS
        ],
        "leftOut": [{"since": since, "change": change, "why": why} for since, change, why in LEFT_OUT],
        "userModels": [
            {
                "name": model.name,
                "origin": model.origin,
                "description": model.description,
                "flags": {f.name: getattr(model.flags, f.name) for f in fields(model.flags)},
                "nodeFactory": model.node_factory is not None,
            }
            for model in (user_models()[n] for n in sorted(user_models()))
        ],
    }
