"""Option types the commands share: how an option's text becomes a value, and what --help says of it.

A value that is not one the option takes is refused by Typer before the command runs, as a usage
error: one line, exit status 2 (`cli.app.run`).  Choices are `enum.StrEnum`s: --help lists them, and
a member is the very string the library functions take.  This module stays light (no engine import:
`recount convert` uses it too); tests/test_cli_options.py checks the enums against the library's own
tuples of the same choices.
"""

from __future__ import annotations

import enum

import typer

#: What --help shows for a time or duration option.
DURATION = "DURATION"


def duration_ns(text: str | int) -> int:
    """A time or duration option (``--until``, ``--tolerance``): nanoseconds, or a duration such as
    ``1500ms`` or ``2.5s`` (`engine.model.config.parse_duration_ns`)."""
    from engine.model.config import parse_duration_ns  # here: `recount convert` imports this module too

    try:
        return parse_duration_ns(text)
    except ValueError as error:
        raise typer.BadParameter(str(error)) from None


# -- choices: enums, so that --help lists them and Typer refuses anything else ------------------------------


class Mode(enum.StrEnum):
    """How a capture is replayed (`recorder.diff.MODES`, `engine.replay` and `engine.cluster_replay`)."""

    node = "node"
    cluster = "cluster"


class Nomination(enum.StrEnum):
    """Where nomination delays come from (`engine.replay.NOMINATION_SOURCES`)."""

    auto = "auto"
    seeded = "seeded"
    recorded = "recorded"


class Engine(enum.StrEnum):
    """Where bulk conversion runs."""

    local = "local"
    spark = "spark"


class GroupBy(enum.StrEnum):
    """How bulk conversion groups inputs into incidents."""

    directory = "directory"
    file = "file"


class ExportFormat(enum.StrEnum):
    perfetto = "perfetto"
