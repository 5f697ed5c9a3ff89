"""Argument values without pydantic, where Typer's own coercion would give them back unchanged.

Typer (0.29) coerces every parameter's value through a pydantic ``TypeAdapter`` built for it when it is
first used: the first one imports pydantic (60-70 ms of a command's start, and 8 MB), and one is built
even for an option left out (None, which it never looks at).  The values of a command line are mostly
strings for ``str`` options, lists of strings, defaults and booleans, which the adapters give back
unchanged; `Group` (recount's Typer group, `cli.app`) has each parameter of the command that runs start
with a `Deferred` coercion that gives those back itself and hands anything else (a value to convert or
check, an error to word) to the adapter Typer would have built, built then.  `recount convert FILE -o
OUT --members ... --force` imports no pydantic at all.

This is the one module of ``cli`` that reaches into Typer's internals (a parameter's
``type_descriptor`` and its lazily built ``_runtime_param``, `typer._coercion.RuntimeParam`): only with
the Typer releases it is known to work with (`KNOWN_TYPER`); with any other, or one where they are not as
expected, nothing is deferred and Typer coerces as it always does.
tests/test_startup.py compares the deferred coercion with Typer's own for every parameter of every
command, over values of every kind, valid and not.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any

import typer
import typer.core

#: The Typer releases whose internals this module was written against and tested with (tests/test_startup.py
#: compares its coercion with theirs): with any other, nothing is deferred.
KNOWN_TYPER = ("0.29.",)


def deferred_class() -> type | None:
    """A `typer._coercion.RuntimeParam` that gives back the values Typer's adapters would give back
    unchanged, and hands the others to Typer's own coercion (None: a Typer this module does not know)."""
    if not typer.__version__.startswith(KNOWN_TYPER):
        return None
    try:
        from typer._coercion import RuntimeParam, build_runtime_param
    except ImportError:
        return None

    class Deferred(RuntimeParam):
        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            annotation = self.annotation
            info = self.parameter_info
            if info.parser is not None:
                if annotation is int:
                    # Typer's adapter for a parser gives back what the parser returns, whatever it is; an
                    # error is worded by that adapter (the parser is called again there: ours are pure)
                    try:
                        return info.parser(value)
                    except Exception:  # noqa: BLE001 - any failure is Typer's to word, as it would have
                        pass
            elif annotation is str and type(value) is str:
                return value
            elif (annotation == list[str] and type(value) in (list, tuple)
                    and all(type(item) is str for item in value)):
                return list(value)
            elif isinstance(annotation, type) and issubclass(annotation, enum.Enum) and type(value) is annotation:
                return value
            elif (annotation is int and type(value) is int and not info.clamp
                    and (info.min is None or value >= info.min) and (info.max is None or value <= info.max)):
                return value
            full = param.__dict__.get("_full_runtime_param")
            if full is None:
                full = param._full_runtime_param = build_runtime_param(param.type_descriptor)
            return full._coerce_value(value, param=param, ctx=ctx)

    return Deferred


def defer(params: Sequence[Any]) -> None:
    """Each of ``params`` (Typer's parameters, their coercion not built yet) starts with a `Deferred` one;
    a parameter that opens a file is left to Typer."""
    deferred = deferred_class()
    if deferred is None:
        return
    for param in params:
        descriptor = getattr(param, "type_descriptor", None)
        if descriptor is None or param.__dict__.get("_runtime_param", False) is not None:
            continue  # not Typer's, or not as this module expects
        if descriptor.file_annotation is not None:
            continue
        param._runtime_param = deferred(annotation=descriptor.annotation, parameter_info=descriptor.parameter_info)


class Group(typer.core.TyperGroup):
    """recount's group: its own parameters' coercion and that of the command it runs deferred before
    they are parsed (``--help`` included: ``get_params`` makes it)."""

    def parse_args(self, ctx: typer.Context, args: list[str]) -> list[str]:
        defer(self.get_params(ctx))
        return super().parse_args(ctx, args)

    def resolve_command(self, ctx: typer.Context, args: list[str]) -> Any:
        name, command, rest = super().resolve_command(ctx, args)
        if command is not None:  # its parameters as its own context will list them (click's make_context)
            own = command.context_class(command, info_name=name, parent=ctx, **command.context_settings)
            defer(command.get_params(own))
        return name, command, rest
