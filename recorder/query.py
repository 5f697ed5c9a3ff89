"""SQL over replay files: DuckDB sees one or many replay files as one table, ``events``.

Each file is memory-mapped and read by `formats.replay_file.read_table` (which refuses what is not a
replay file, or a newer format), then registered with an in-process DuckDB connection without a
copy.  With several files, ``events`` is their ``UNION ALL BY NAME`` (a column one file lacks is
NULL in its rows; a column whose type differs between files takes the common supertype, in the
end VARCHAR) plus a ``file`` column naming each row's file; each file is also a table of its own,
``events_1``, ``events_2``, ...  Field columns keep their Aeron names (``candidateTermId``, ...),
so queries quote nothing but reserved words.

Values come back as Python values fit for JSON and CSV: binary (``payload``) as hex, anything DuckDB
returns that JSON cannot hold (timestamps, decimals, UUIDs) as its text.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import duckdb
import pyarrow as pa

from formats import replay_file
from formats.errors import DecodeError


class QueryError(ValueError):
    """The SQL was refused by DuckDB: one line saying why."""


@dataclass(frozen=True, slots=True)
class QueryResult:
    columns: tuple[str, ...]
    rows: list[tuple[Any, ...]]

    def records(self) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, row, strict=True)) for row in self.rows]


def _plain(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return str(value)


def _unique(names: Sequence[str]) -> tuple[str, ...]:
    """Column names made unique (``SELECT ts, ts`` gives ``ts`` and ``ts_2``), so rows can be objects."""
    seen: dict[str, int] = {}
    out = []
    for name in names:
        count = seen.get(name, 0) + 1
        seen[name] = count
        out.append(name if count == 1 else f"{name}_{count}")
    return tuple(out)


def _load(path: str) -> pa.Table:
    # Checked here because pyarrow's own error for a missing file names no file (``error.filename``).
    if not os.path.exists(path):
        raise FileNotFoundError(2, "no such file (expected a replay file, *.arrow)", path)
    if os.path.isdir(path):
        raise IsADirectoryError(21, "is a directory, expected a replay file (*.arrow)", path)
    with pa.memory_map(path, "r") as source:
        return replay_file.read_table(source, name=path)


def query(files: Sequence[str | os.PathLike[str]], sql: str) -> QueryResult:
    """Run ``sql`` with table ``events`` over the replay ``files``."""
    if not files:
        raise ValueError("no replay files given")
    names = [os.fspath(f) for f in files]
    tables = [_load(name) for name in names]
    connection = duckdb.connect(":memory:")
    try:
        if len(tables) == 1:
            connection.register("events", tables[0])
        else:
            parts = []
            for number, (name, table) in enumerate(zip(names, tables, strict=True), start=1):
                view = f"events_{number}"
                connection.register(view, table)
                literal = name.replace("'", "''")
                parts.append(f"SELECT *, '{literal}' AS file FROM {view}")
            connection.execute("CREATE VIEW events AS " + " UNION ALL BY NAME ".join(parts))
        try:
            cursor = connection.execute(sql)
        except duckdb.Error as error:
            raise QueryError(_first_line(error)) from None
        if cursor.description is None:
            return QueryResult((), [])
        columns = _unique([d[0] for d in cursor.description])
        try:
            rows = [tuple(_plain(v) for v in row) for row in cursor.fetchall()]
        except duckdb.Error as error:
            raise QueryError(_first_line(error)) from None
        return QueryResult(columns, rows)
    except duckdb.Error as error:  # registering the files (e.g. columns DuckDB cannot union)
        raise DecodeError(f"cannot query these files together: {_first_line(error)}", source=", ".join(names)) from None
    finally:
        connection.close()


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
