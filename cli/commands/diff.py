"""`recount diff A [B]`: the first divergence between two replays, and a summary of all differences."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from cli import output, progress, render_capture
from cli.commands.replay import check_input
from cli.commands.versions import confidence_text
from cli.errors import UserError
from cli.options import DURATION, Mode, duration_ns
from formats.describe import describe_record
from formats.errors import DecodeError
from recorder.diff import diff_traces, load_side


def _sides(a: str, b: str | None, models: list[str]) -> list[tuple[str, str | None]]:
    if b is None:
        if len(models) != 2:
            raise UserError("with one file give two models to compare: --model X --model Y")
        return [(a, models[0]), (a, models[1])]
    if len(models) == 0:
        return [(a, None), (b, None)]
    if len(models) == 1:
        return [(a, models[0]), (b, models[0])]
    if len(models) == 2:
        return [(a, models[0]), (b, models[1])]
    raise UserError("--model may be given at most twice")


def diff(
    a: Annotated[str, typer.Argument(help="A capture, replay file or trace (JSON Lines from `recount replay --json`).", show_default=False)],
    b: Annotated[str | None, typer.Argument(help="The other side (omit it to replay A under two models).", show_default=False)] = None,
    model: Annotated[
        list[str] | None,
        typer.Option("--model", help="Model to replay under (an Aeron release or a user model); give it twice for two.", show_default=False),
    ] = None,
    mode: Annotated[Mode, typer.Option("--mode", help="How captures are replayed.")] = Mode.cluster,
    seed: Annotated[int | None, typer.Option("--seed", help="Base seed for the nomination delays.")] = None,
    until: Annotated[int | None, typer.Option("--until", help="Stop the replays at this time (ns or a duration).",
                                              parser=duration_ns, metavar=DURATION, show_default=False)] = None,
    tolerance: Annotated[int, typer.Option("--tolerance", help="Equal records further apart in time than this differ in timing.",
                                           parser=duration_ns, metavar=DURATION, show_default="0ns")] = 0,
    limit: Annotated[int, typer.Option("--limit", min=0, help="Show at most this many differences.")] = 20,
    json_output: Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")] = False,
) -> None:
    """Align two replays by member, time and log position; show the first divergence and all differences."""
    tolerance_ns, until_ns = tolerance, until
    sides = []
    for path, chosen in _sides(a, b, list(model or [])):
        check_input(path)
        try:
            with progress.phase(f"replaying {path} under {chosen or 'its model'}"):
                side = load_side(path, model=chosen, mode=mode.value, seed=seed, until=until_ns)
            sides.append(side)
            if side.info.get("found"):
                render_capture.print_found({"found": side.info["found"]})
            render_capture.print_warnings([f"{path}: {w}" for w in side.info.get("warnings", [])])
        except DecodeError:
            raise
        except ValueError as error:  # an unknown model, a trace given a model
            raise UserError(str(error)) from None
        except OSError as error:
            raise UserError(f"{error.filename or path}: {error.strerror or error}") from None
    with progress.phase("aligning the two replays"):
        document = diff_traces(sides[0], sides[1], tolerance_ns=tolerance_ns, limit=limit)
    if json_output:
        output.print_json(document)
        return
    print_diff(document)


def _line(record: Any) -> str:
    return describe_record(record) if record else "nothing"


def print_changes(first: dict[str, Any]) -> None:
    """The differing values of the first divergence's two records (what one line cannot show)."""
    for change in first.get("changes") or []:
        output.stdout.print(f"     {change['key']}: A {change['a']}  B {change['b']}", markup=False)


def _origin(document: dict[str, Any]) -> int | None:
    """A's first record's time, to print times from (epoch nanoseconds read badly)."""
    start = document["a"].get("start")
    return start if isinstance(start, int) else None


def print_diff(document: dict[str, Any]) -> None:
    console = output.stdout
    a, b = document["a"], document["b"]
    for name, side in (("A", a), ("B", b)):
        judged = f" — model {side['model']}: {confidence_text(side['confidence'])}" if side.get("confidence") else ""
        console.print(Text(f"{name}: {side['label']}{judged}", style="bold"))
    first = document["firstDivergence"]
    if first is None:
        console.print(Text("identical behaviour" if document["identical"] else "same behaviour; the final states differ",
                           style="bold green"))
    else:
        origin = _origin(document)
        since = f" (+{(first['ts'] - origin) / 1_000_000:.3f} ms)" if origin is not None and first["ts"] is not None else ""
        console.print(Text(f"first divergence at {first['ts']} ns{since}, member {first['node']} ({first['op']}):",
                           style="bold red"))
        console.print(f"  A: {_line(first['a'])}")
        console.print(f"  B: {_line(first['b'])}")
        print_changes(first)
        if not first["stateA"] and not first["stateB"]:
            console.print("  (nothing happened before it)")
        table = Table(title="members just before it (A | B)", title_justify="left", header_style="bold")
        for column in ("member", "election", "role", "term", "candidate", "leader", "log", "append"):
            table.add_column(column)
        for member in sorted(set(first["stateA"]) | set(first["stateB"]), key=lambda m: (len(m), m)):
            sa, sb = first["stateA"].get(member, {}), first["stateB"].get(member, {})
            keys = ("electionState", "role", "leadershipTermId", "candidateTermId", "leaderMemberId", "logPosition", "appendPosition")
            table.add_row(member, *(f"{sa.get(k)} | {sb.get(k)}" if sa.get(k) != sb.get(k) else str(sa.get(k)) for k in keys))
        if first["stateA"] or first["stateB"]:
            console.print(table)
    summary = document["summary"]
    table = Table(title=f"{summary['differences']} difference(s) by member", title_justify="left", header_style="bold")
    for column in ("member", "records", "changed", "only A", "only B", "timing"):
        table.add_column(column, justify="right")
    for member, counts in summary["members"].items():
        table.add_row(member, str(counts["records"]), str(counts["replace"]), str(counts["delete"]), str(counts["insert"]), str(counts["timing"]))
    console.print(table)
    for item in summary["finalStateDifferences"]:
        console.print(f"  final member {item['node']} {item['field']}: A {item['a']}  B {item['b']}")
    shown = document["differences"]
    if shown:
        console.print(Text(f"first {len(shown)} difference(s):", style="bold"))
        for item in shown:
            a_lines = "; ".join(_line(r) for r in item["a"][:3]) or "nothing"
            b_lines = "; ".join(_line(r) for r in item["b"][:3]) or "nothing"
            console.print(f"  {item['ts']} member {item['node']} {item['op']}: A {a_lines} | B {b_lines}")


def register(app: typer.Typer) -> None:
    app.command(
        "diff",
        epilog=(
            "Examples:\n\n"
            "  recount diff incident.arrow --model 1.41.0 --model 1.42.0\n\n"
            "  recount diff monday.arrow tuesday.arrow --json\n\n"
            "  recount replay a.arrow --json > a.jsonl; recount diff a.jsonl b.jsonl --tolerance 5ms"
        ),
    )(diff)
