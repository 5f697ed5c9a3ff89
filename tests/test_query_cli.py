"""`recount query FILE... "SQL"`: DuckDB over replay files, as a table, JSON or CSV."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from cli.app import run
from formats import cluster_codecs as cc
from formats import replay_file
from formats.events import Event, message_event
from recorder.query import QueryError, query

ROOT = Path(__file__).resolve().parents[1]


def vote(ts: int, node: int, peer: int, dir: str, term: int, yes: bool) -> Event:
    message = cc.Vote(candidate_term_id=term, log_leadership_term_id=-1, log_position=0, candidate_member_id=1,
                      follower_member_id=peer if dir == "in" else node,
                      vote=cc.BooleanType.TRUE if yes else cc.BooleanType.FALSE)
    return message_event(message, ts=ts, node=node, dir=dir, peer=peer, channel="consensus",
                         payload=message.encode())


def write(path: Path, events: list[Event], source: str) -> Path:
    table = replay_file.events_to_table(events, source=source)
    with pa.OSFile(str(path), "wb") as sink:
        replay_file.write_table(table, sink)
    return path


@pytest.fixture
def files(tmp_path):
    first = write(tmp_path / "a.arrow", [
        vote(10, 1, 0, "in", 3, True),
        vote(20, 1, 2, "in", 3, False),
        Event(ts=30, node=1, dir="local", peer=None, channel="local", type="ElectionStateChange",
              fields={"from": "CANDIDATE_BALLOT", "to": "CANVASS", "reason": ""}),
    ], "a")
    second = write(tmp_path / "b.arrow", [vote(5, 1, 0, "in", 4, True)], "b")
    return first, second


def test_rows_come_back_as_json_objects_by_aeron_field_name(files, capsys):
    code = run(["query", str(files[0]), "SELECT peer, candidateTermId, vote FROM events WHERE type = 'Vote' "
                "ORDER BY seq", "--json"])
    out, err = capsys.readouterr()
    assert code == 0 and err == ""
    assert json.loads(out) == [{"peer": 0, "candidateTermId": 3, "vote": "TRUE"},
                               {"peer": 2, "candidateTermId": 3, "vote": "FALSE"}]


def test_several_files_are_one_table_with_a_file_column(files, capsys):
    code = run(["query", str(files[0]), str(files[1]),
                "SELECT file, count(*) AS n, max(candidateTermId) AS term FROM events GROUP BY file ORDER BY file",
                "--json"])
    out, _ = capsys.readouterr()
    assert code == 0
    assert json.loads(out) == [{"file": str(files[0]), "n": 3, "term": 3}, {"file": str(files[1]), "n": 1, "term": 4}]


def test_csv_output_has_a_header_and_binary_as_hex(files, capsys):
    code = run(["query", str(files[0]), "SELECT seq, type, payload FROM events ORDER BY seq", "--csv"])
    out, _ = capsys.readouterr()
    assert code == 0
    rows = list(csv.reader(io.StringIO(out)))
    assert rows[0] == ["seq", "type", "payload"]
    assert rows[1][1] == "Vote" and bytes.fromhex(rows[1][2])[2] == 52  # the SBE header's templateId
    assert rows[3] == ["2", "ElectionStateChange", ""]


def test_the_default_output_is_a_table_with_the_row_count_on_stderr(files, capsys):
    code = run(["query", str(files[0]), "SELECT \"from\", \"to\" FROM events WHERE type = 'ElectionStateChange'"])
    out, err = capsys.readouterr()
    assert code == 0
    assert "CANDIDATE_BALLOT" in out and "CANVASS" in out and "1 row" in err


def test_bad_sql_exits_2_with_one_line(files, capsys):
    code = run(["query", str(files[0]), "SELEKT * FROM events"])
    _, err = capsys.readouterr()
    assert code == 2 and err.count("\n") == 1 and err.startswith("recount: query: Parser Error")


def test_an_unknown_column_is_bad_sql_too(files):
    with pytest.raises(QueryError, match="nosuchfield"):
        query([files[0]], "SELECT nosuchfield FROM events")


def test_a_file_that_is_not_a_replay_exits_2_naming_it(tmp_path, capsys):
    path = tmp_path / "x.arrow"
    path.write_bytes(b"not arrow at all")
    code = run(["query", str(path), "SELECT 1"])
    _, err = capsys.readouterr()
    assert code == 2 and "x.arrow" in err and err.count("\n") == 1
    assert run(["query", str(tmp_path / "missing.arrow"), "SELECT 1"]) == 2


def test_sql_without_files_is_a_usage_error(capsys):
    assert run(["query", "SELECT 1"]) == 2
    assert "expected one or more replay files" in capsys.readouterr().err


def test_query_runs_as_a_real_process(files):
    done = subprocess.run([sys.executable, "-m", "cli", "query", str(files[1]), "SELECT ts, node FROM events",
                           "--json"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [{"ts": 5, "node": 1}]
