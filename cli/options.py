"""Option types the commands share: how an option's text becomes a value, and what --help says of it.

A value that is not one the option takes is refused by Typer before the command runs, as a usage
error: one line, exit status 2 (`cli.app.run`).
"""

from __future__ import annotations

import typer

from engine.model.config import parse_duration_ns

#: What --help shows for a time or duration option.
DURATION = "DURATION"


def duration_ns(text: str | int) -> int:
    """A time or duration option (``--until``, ``--tolerance``): nanoseconds, or a duration such as
    ``1500ms`` or ``2.5s`` (`engine.model.config.parse_duration_ns`)."""
    try:
        return parse_duration_ns(text)
    except ValueError as error:
        raise typer.BadParameter(str(error)) from None
