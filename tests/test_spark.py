"""Bulk conversion on Spark: incidents, the ``aeron-capture`` data source, and the per-incident job.

Tests marked ``spark`` run real Spark (`local[2]`) in one session shared by the whole test process
(`tests.spark_session.shared_spark`).  The captures are built here (`tests.spark_session.cluster_capture`)
or linked from the real capture (the ``capture`` fixture), never copied into the project.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from cli.app import run
from formats import replay_file
from formats.errors import DecodeError
from recorder import convert as converter
from recorder.spark import datasource, job
from tests.spark_session import MEMBERS, cluster_capture, shared_spark

ROOT = Path(__file__).resolve().parents[1]
#: Puts faults into the Python workers Spark starts (see its docstring).
FAULTS = Path(__file__).resolve().parent / "spark_faults"


def _write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """Three incidents: a clean capture, one cut short mid-record, and a file that is no capture at all."""
    root = tmp_path_factory.mktemp("captures")
    _write(root / "inc-a" / "host.pcap", cluster_capture(1, heartbeats=40))
    _write(root / "inc-b" / "host.pcap", cluster_capture(2, heartbeats=60)[:-10])
    _write(root / "inc-c" / "broken.pcap", b"this is not a capture")
    _write(root / "inc-c" / "README.txt", b"notes that are no input")
    return root


def _local_replay(inputs: list[str], out: Path) -> bytes:
    """What `recount convert INPUT... -o OUT` writes for these inputs."""
    converter.convert(inputs, out, force=True)
    return out.read_bytes()


def _table(path: Path) -> pa.Table:
    with pa.memory_map(str(path), "r") as source:
        return replay_file.read_table(source, name=str(path))


def _real_incident(capture: Path, root: Path) -> Path:
    """The real capture as one incident: links to its pcap and members' directories (with their agent logs)."""
    incident = root / "clean-start"
    incident.mkdir(parents=True)
    for name in ("capture.pcap", "node0", "node1", "node2"):
        (incident / name).symlink_to(capture / name)
    return incident


# --- incidents and inputs (no Spark) ---------------------------------------------------------------
def test_incidents_are_the_directories_one_level_below_each_root_with_their_inputs_in_path_order(tmp_path):
    _write(tmp_path / "day1" / "inc-b" / "z.pcap", cluster_capture(1, heartbeats=1))
    _write(tmp_path / "day1" / "inc-b" / "sub" / "a.pcap", cluster_capture(2, heartbeats=1))
    _write(tmp_path / "day1" / "inc-a" / "x.jsonl", b'{"ts":1,"node":0,"dir":"local","peer":null,'
                                                    b'"channel":"local","type":"End","fields":{}}\n')
    _write(tmp_path / "day1" / "inc-a" / "notes.txt", b"not an input")
    _write(tmp_path / "day1" / "loose.pcap", cluster_capture(3, heartbeats=1))

    incidents = datasource.discover([str(tmp_path / "day1")])
    assert [i.name for i in incidents] == ["day1", "inc-a", "inc-b"]
    assert [os.path.basename(p) for p in incidents[0].paths] == ["loose.pcap"]
    assert [(os.path.basename(i.path), i.kind) for i in incidents[1].inputs] == [("x.jsonl", "jsonl")]
    assert [os.path.relpath(p, tmp_path) for p in incidents[2].paths] == ["day1/inc-b/sub/a.pcap", "day1/inc-b/z.pcap"]

    deeper = datasource.discover([str(tmp_path)], incident_depth=2)
    assert [i.name for i in deeper] == ["day1", "day1/inc-a", "day1/inc-b"]
    by_file = datasource.discover([str(tmp_path / "day1")], group_by="file")
    assert [i.name for i in by_file] == ["inc-a/x.jsonl", "inc-b/sub/a.pcap", "inc-b/z.pcap", "loose.pcap"]
    assert all(len(i.inputs) == 1 for i in by_file)


def test_a_members_cluster_directory_is_an_input_of_its_incident_never_an_incident_itself(capture, tmp_path):
    _real_incident(capture, tmp_path / "captures")
    [incident] = datasource.discover([str(tmp_path / "captures")])
    assert incident.name == "clean-start"
    kinds = [(os.path.relpath(i.path, tmp_path / "captures" / "clean-start"), i.kind) for i in incident.inputs]
    assert kinds == [
        ("capture.pcap", "pcap"),
        ("node0", "cluster-dir"), ("node0/agent-events.log", "agent-log"),
        ("node1", "cluster-dir"), ("node1/agent-events.log", "agent-log"),
        ("node2", "cluster-dir"), ("node2/agent-events.log", "agent-log"),
    ]


def test_two_roots_holding_incidents_of_the_same_name_are_refused_with_both_paths(tmp_path):
    _write(tmp_path / "a" / "inc" / "h.pcap", cluster_capture(1, heartbeats=1))
    _write(tmp_path / "b" / "inc" / "h.pcap", cluster_capture(1, heartbeats=1))
    with pytest.raises(ValueError, match="two incidents are named 'inc'"):
        datasource.discover([str(tmp_path / "a"), str(tmp_path / "b")])


# --- splitting a big pcap (no Spark) ---------------------------------------------------------------
@pytest.fixture(scope="module")
def big_pcap(tmp_path_factory) -> Path:
    """About 4 MB: a 64 KiB log term rolls over many times, and log messages span several frames."""
    return _write(tmp_path_factory.mktemp("big") / "inc-big" / "host.pcap", cluster_capture(7, heartbeats=600))


def test_a_pcap_split_at_record_boundaries_decodes_to_exactly_the_events_of_the_whole_file(big_pcap):
    whole = datasource.decode_file(datasource.Input(str(big_pcap), "pcap", big_pcap.stat().st_size), members=MEMBERS)
    chunks = datasource.plan_pcap_chunks(str(big_pcap), chunk_bytes=1 << 20, warmup_bytes=16 << 10)
    assert len(chunks) == -(-big_pcap.stat().st_size // (1 << 20)) > 3
    assert [c.first_packet for c in chunks[1:]] == [c.last_packet + 1 for c in chunks[:-1]]
    parts = [datasource.decode_pcap_chunk(str(big_pcap), c, MEMBERS, warmup_bytes=16 << 10) for c in chunks]
    assert all(p.table.num_rows > 0 for p in parts)
    joined = pa.concat_tables([p.table.drop_columns(["seq"]) for p in parts], promote_options="permissive")
    expected = whole.table.drop_columns(["seq"])
    for name in ("ts", "node", "dir", "type", "peer", "payload", "fields", "extra"):
        assert joined.column(name).to_pylist() == expected.column(name).to_pylist(), name
    assert not any(p.problems for p in parts)


def test_without_its_setup_frame_a_chunk_would_count_log_positions_from_the_wrong_term(big_pcap):
    chunks = datasource.plan_pcap_chunks(str(big_pcap), chunk_bytes=1 << 20, warmup_bytes=16 << 10)
    late = chunks[-1]
    assert late.primers, "the planning walk kept the streams' SETUP frames"
    primed = datasource.decode_pcap_chunk(str(big_pcap), late, MEMBERS, warmup_bytes=16 << 10).table
    unprimed = datasource.decode_pcap_chunk(
        str(big_pcap), datasource.Chunk(**{**{f: getattr(late, f) for f in late.__slots__}, "primers": ()}),
        MEMBERS, warmup_bytes=16 << 10).table

    def log_positions(table):
        return [json.loads(extra)["logPosition"] for extra, channel in
                zip(table.column("extra").to_pylist(), table.column("channel").to_pylist(), strict=True)
                if channel == "log"]

    whole = datasource.decode_file(datasource.Input(str(big_pcap), "pcap", 0), members=MEMBERS).table
    assert log_positions(primed) == log_positions(whole)[-len(log_positions(primed)):]
    assert log_positions(unprimed) != log_positions(primed)


# --- Spark ----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def spark():
    return shared_spark()


@pytest.mark.spark
def test_spark_writes_for_every_incident_the_file_the_local_converter_writes_and_a_catalog(spark, corpus, tmp_path):
    out = tmp_path / "out"
    seen: list[tuple[int, int]] = []
    result = job.convert_bulk([str(corpus)], out, spark=spark, progress=lambda done, total: seen.append((done, total)))
    assert seen[0] == (0, 3) and seen[-1] == (3, 3) and seen == sorted(seen)
    statuses = {row["incident"]: row["status"] for row in result.incidents}
    assert statuses == {"inc-a": "converted", "inc-b": "converted", "inc-c": "failed"}
    for name in ("inc-a", "inc-b"):
        [incident] = [i for i in datasource.discover([str(corpus)]) if i.name == name]
        local = _local_replay(incident.paths, tmp_path / f"{name}-local.arrow")
        assert (out / f"{name}.arrow").read_bytes() == local
    assert not (out / "inc-c.arrow").exists()
    assert not [p for p in out.rglob("*") if ".tmp-" in p.name]

    catalog = out / "catalog"
    rows = duckdb.sql(f"SELECT incident, status, events, members, firstTs <= lastTs AS ordered, errors "
                      f"FROM '{catalog}/incidents.parquet' ORDER BY incident").fetchall()
    events_a = _table(out / "inc-a.arrow").num_rows
    assert rows[0] == ("inc-a", "converted", events_a, [0, 1, 2], True, 0)
    assert rows[1][:2] == ("inc-b", "converted") and rows[1][5] == 1
    assert rows[2] == ("inc-c", "failed", None, None, None, 1)
    per_member = duckdb.sql(f"SELECT sum(events) FROM '{catalog}/members.parquet' WHERE incident = 'inc-a'").fetchall()[0]
    assert per_member == (events_a,)
    errors = duckdb.sql(f"SELECT incident, category, detail FROM '{catalog}/errors.parquet' ORDER BY incident").fetchall()
    assert errors[0][0] == "inc-b" and errors[0][1] == "capture file" and "cut short" in errors[0][2]
    assert errors[1][:2] == ("inc-c", "unreadable input") and "broken.pcap" in errors[1][2]


def _samples(tmp_path: Path) -> tuple[Path, Path]:
    """samples/ as it is, and a view of it with only the captures and agent logs (linked, not copied)."""
    samples = ROOT / "samples"
    if not samples.is_dir() or not datasource.discover([str(samples)]):
        pytest.skip("no samples/ in this checkout")
    view = tmp_path / "captures-and-logs"
    for incident in datasource.discover([str(samples)]):
        for item in incident.inputs:
            if item.kind in ("pcap", "agent-log"):
                link = view / incident.name / os.path.relpath(item.path, incident.directory)
                link.parent.mkdir(parents=True, exist_ok=True)
                link.symlink_to(item.path)
    return samples, view


@pytest.mark.spark
def test_every_sample_converts_on_spark_exactly_as_the_local_converter_converts_it(spark, tmp_path):
    samples, view = _samples(tmp_path)
    for root in (samples, view):
        out = tmp_path / f"out-{root.name}"
        result = job.convert_bulk([str(root)], out, spark=spark)
        rows = {row["incident"]: row for row in result.incidents}
        failures = {f["incident"]: f["detail"] for f in result.failures}
        incidents = datasource.discover([str(root)])
        assert sorted(rows) == [i.name for i in incidents] and len(rows) >= 5
        for incident in incidents:
            try:
                local = _local_replay(incident.paths, tmp_path / "local.arrow")
            except DecodeError as error:  # the local converter refuses it: so must Spark, saying the same
                assert rows[incident.name]["status"] == "failed" and failures[incident.name] == str(error)
                continue
            assert rows[incident.name]["status"] == "converted", failures.get(incident.name)
            assert (out / f"{incident.name}.arrow").read_bytes() == local, incident.name
        if root == view:
            assert all(row["status"] == "converted" for row in rows.values())


@pytest.mark.spark
def test_a_second_run_skips_converted_incidents_and_force_converts_them_again(spark, corpus, tmp_path):
    out = tmp_path / "out"
    job.convert_bulk([str(corpus / "inc-a"), str(corpus / "inc-b")], out, spark=spark, incident_depth=0)
    first = {p.name: (p.stat().st_ino, p.read_bytes()) for p in out.glob("*.arrow")}
    catalog = (out / "catalog" / "incidents.parquet").read_bytes()

    again = job.convert_bulk([str(corpus / "inc-a"), str(corpus / "inc-b")], out, spark=spark, incident_depth=0)
    assert [r["status"] for r in again.incidents] == ["skipped", "skipped"]
    assert {p.name: (p.stat().st_ino, p.read_bytes()) for p in out.glob("*.arrow")} == first
    rows = duckdb.sql(f"SELECT incident, events FROM '{out}/catalog/incidents.parquet' ORDER BY 1").fetchall()
    assert rows == [("inc-a", _table(out / "inc-a.arrow").num_rows), ("inc-b", _table(out / "inc-b.arrow").num_rows)]

    forced = job.convert_bulk([str(corpus / "inc-a"), str(corpus / "inc-b")], out, spark=spark, incident_depth=0,
                              force=True)
    assert [r["status"] for r in forced.incidents] == ["converted", "converted"]
    redone = {p.name: (p.stat().st_ino, p.read_bytes()) for p in out.glob("*.arrow")}
    assert {name: data for name, (_, data) in redone.items()} == {name: data for name, (_, data) in first.items()}
    assert all(redone[name][0] != first[name][0] for name in first), "rewritten aside and renamed into place"
    assert (out / "catalog" / "incidents.parquet").read_bytes() == catalog


@pytest.mark.spark
def test_the_data_source_in_incident_mode_gives_the_replay_files_rows_in_its_order(spark, corpus, tmp_path):
    frame = spark.read.format("aeron-capture").option("split", "incident").load(str(corpus))
    rows = frame.toArrow()
    assert set(rows.column("incident").to_pylist()) == {"inc-a", "inc-b"}
    for name in ("inc-a", "inc-b"):
        [incident] = [i for i in datasource.discover([str(corpus)]) if i.name == name]
        _local_replay(incident.paths, tmp_path / "local.arrow")
        expected = _table(tmp_path / "local.arrow")
        mine = rows.filter(pa.compute.equal(rows.column("incident"), name)).sort_by("seq")
        assert mine.column("seq").to_pylist() == list(range(expected.num_rows))
        for column in ("ts", "node", "peer", "payload", "fields", "extra", "logPosition", "candidateTermId"):
            assert mine.column(column).to_pylist() == expected.column(column).to_pylist(), column
        for column in ("dir", "channel", "type"):
            assert mine.column(column).to_pylist() == expected.column(column).cast(pa.string()).to_pylist(), column
        packets = [json.loads(e).get("packet") if e else None for e in expected.column("extra").to_pylist()]
        assert mine.column("packet").to_pylist() == packets


@pytest.mark.spark
def test_the_data_source_splits_a_big_pcap_across_partitions_without_losing_or_repeating_an_event(spark, big_pcap):
    frame = (spark.read.format("aeron-capture").option("members", MEMBERS).option("chunkBytes", str(1 << 20))
             .option("warmupBytes", str(16 << 10)).load(str(big_pcap.parent.parent)))
    assert frame.rdd.getNumPartitions() == -(-big_pcap.stat().st_size // (1 << 20))
    rows = frame.toArrow()
    whole = datasource.decode_file(datasource.Input(str(big_pcap), "pcap", 0), members=MEMBERS).table
    assert rows.num_rows == whole.num_rows
    assert rows.sort_by([("ts", "ascending"), ("packet", "ascending")]).column("payload").to_pylist() == \
        whole.column("payload").to_pylist()
    assert set(rows.column("sourceFile").to_pylist()) == {str(big_pcap)}
    assert rows.column("seq").null_count == rows.num_rows


@pytest.mark.spark
def test_unreadable_records_and_inputs_are_rows_of_the_errors_output_not_failures(spark, corpus):
    errors = spark.read.format("aeron-capture-errors").load(str(corpus)).orderBy("incident").collect()
    assert [(e["incident"], e["category"]) for e in errors] == [("inc-b", "capture file"), ("inc-c", "unreadable input")]
    assert errors[0]["sourceFile"].endswith("inc-b/host.pcap") and errors[0]["offset"] is not None
    assert "pcap magic" in errors[1]["detail"]
    same = spark.read.format("aeron-capture").option("errors", "true").load(str(corpus)).count()
    assert same == len(errors)


@pytest.mark.spark
def test_recount_convert_engine_spark_on_the_real_capture_matches_the_local_converter(spark, capture, tmp_path,
                                                                                     capsys):
    incident = _real_incident(capture, tmp_path / "captures")
    out = tmp_path / "out"
    status = run(["convert", str(tmp_path / "captures"), "--out-dir", str(out), "--engine", "spark",
                  "--master", "local[2]", "--conf", "spark.sql.shuffle.partitions=2", "--json"])
    assert status == 0
    document = json.loads(capsys.readouterr().out)
    assert (document["converted"], document["failed"]) == (1, 0)
    inputs = document["incidents"][0]["inputs"]
    assert [os.path.basename(p) for p in inputs] == ["capture.pcap", "node0", "agent-events.log", "node1",
                                                     "agent-events.log", "node2", "agent-events.log"]
    local = tmp_path / "local.arrow"
    status = run(["convert", *inputs, "-o", str(local)])
    assert status == 0
    assert (out / "clean-start.arrow").read_bytes() == local.read_bytes()
    types = dict(document["incidents"][0]["eventTypes"])
    assert types["RequestVote"] > 0 and types["MemberStart"] == 3
    assert incident.exists()


def _tree(directory: Path) -> dict[str, bytes]:
    return {p.relative_to(directory).as_posix(): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


@pytest.mark.spark
def test_a_python_worker_killed_in_the_middle_of_an_incident_is_retried_and_the_output_is_identical(
        spark, corpus, tmp_path):
    clean = tmp_path / "clean"
    job.convert_bulk([str(corpus)], clean, spark=spark)
    faults = tmp_path / "faults"
    faults.mkdir()
    environment = spark.sparkContext.environment  # what the Python workers of later jobs start with
    saved = dict(environment)
    environment.update(PYTHONPATH=str(FAULTS), RECOUNT_TEST_FAULT="die-once", RECOUNT_TEST_FAULT_DIR=str(faults))
    out = tmp_path / "faulted"
    try:
        result = job.convert_bulk([str(corpus)], out, spark=spark)
    finally:
        environment.clear()
        environment.update(saved)
    pid, half_written, size = (faults / "died").read_text().split()
    assert int(pid) > 0 and int(size) > 0, "a worker wrote half an incident's file and died"
    assert Path(half_written).parent.parent == out and not Path(half_written).exists()
    assert {row["incident"]: row["status"] for row in result.incidents} == {
        "inc-a": "converted", "inc-b": "converted", "inc-c": "failed"}
    assert _tree(out) == _tree(clean)  # every replay file and the catalog, byte for byte; nothing else


# --- replay file names from directory names ----------------------------------------------------------
def test_incident_names_become_replay_files_inside_the_output_directory_that_never_collide():
    names = ["inc-a", "..", ".", "../../etc/passwd", "/abs/olute", "a/../../b", ".hidden", "new\nline",
             "back\\slash", "inc a", "inc_a", "Inc-B", "inc-b", "", "é", "x" * 300, "bad\udcffbyte", "day1/inc-a"]
    files = job.replay_file_names(names)
    assert files["inc-a"] == "inc-a.arrow" and files["inc_a"] == "inc_a.arrow" and files["day1/inc-a"] == \
        "day1/inc-a.arrow"
    assert len({f.casefold() for f in files.values()}) == len(names), "no two share a file, whatever the case"
    for name, file in files.items():
        parts = file.split("/")
        assert all(part and not part.startswith(".") and len(part) < 140 for part in parts), (name, file)
        assert all(c.isascii() and (c.isalnum() or c in "._+-") for part in parts for c in part), (name, file)
        assert file.endswith(".arrow") and len(parts) == len(name.split("/")), (name, file)
    assert files["inc a"].startswith("inc_a-") and files["Inc-B"].startswith("Inc-B-")
    assert job.replay_file_names(list(reversed(names))) == files, "the same names whatever their order"


def test_odd_directory_names_convert_into_the_output_directory_under_safe_names(tmp_path):
    capture = cluster_capture(3, heartbeats=2)
    roots = tmp_path / "captures"
    for name in ("inc a", "inc_a", "-dash", "new\nline", "Inc-B", "inc-b", "\u00e9t\u00e9"):
        _write(roots / name / "host.pcap", capture)
    out = tmp_path / "out"
    result = job.convert_bulk([str(roots)], out, engine="local")
    rows = {row["incident"]: row for row in result.incidents}
    assert len(rows) == 7 and all(row["status"] == "converted" for row in rows.values())
    files = {p.relative_to(out).as_posix() for p in out.rglob("*.arrow")}
    assert files == {row["replayFile"] for row in rows.values()} and len(files) == 7
    assert rows["inc_a"]["replayFile"] == "inc_a.arrow" and rows["inc a"]["replayFile"] != "inc_a.arrow"
    local = _local_replay([str(roots / "new\nline" / "host.pcap")], tmp_path / "local.arrow")
    assert (out / rows["new\nline"]["replayFile"]).read_bytes() == local
    assert sorted(p.name for p in out.iterdir()) == sorted([*files, "catalog"]), "no staging left behind"


# --- processes --------------------------------------------------------------------------------------
def _descendants(root: int) -> set[tuple[int, str]]:
    """(pid, start time) of the live descendants of ``root``, from /proc."""
    children: dict[int, list[tuple[int, str]]] = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except (OSError, ValueError):
            continue
        children.setdefault(int(fields[1]), []).append((int(entry), fields[19]))
    found, todo = set(), [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child[0])
    return found


def _still_running(processes: set[tuple[int, str]]) -> list[str]:
    running = []
    for pid, start in processes:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                command = cmdline.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if fields[19] == start and fields[0] != "Z":
            running.append(f"{pid}: {command[:100]}")
    return running


def _convert_in_a_subprocess(corpus: Path, out: Path, faults: Path, fault: str | None) -> subprocess.Popen:
    env = dict(os.environ, RECOUNT_TEST_FAULT_DIR=str(faults), PYTHONPATH=str(FAULTS))
    if fault:
        env["RECOUNT_TEST_FAULT"] = fault
    return subprocess.Popen([sys.executable, "-m", "cli", "convert", str(corpus), "--out-dir", str(out), "--engine",
                             "spark", "--master", "local[2]", "--conf", "spark.sql.shuffle.partitions=2", "--json"],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.spark
@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc to follow the process tree")
def test_ctrl_c_in_the_middle_of_a_spark_conversion_leaves_no_jvm_or_python_worker_running(corpus, tmp_path):
    faults = tmp_path / "faults"
    faults.mkdir()
    out = tmp_path / "out"
    process = _convert_in_a_subprocess(corpus, out, faults, "hang")
    seen: set[tuple[int, str]] = set()
    try:
        deadline = time.monotonic() + 120
        while len(list(faults.glob("started-*"))) < 2 and process.poll() is None and time.monotonic() < deadline:
            seen |= _descendants(process.pid)
            time.sleep(0.2)
        seen |= _descendants(process.pid)
        assert len(list(faults.glob("started-*"))) == 2, "two tasks are in the middle of an incident"
        workers = {int(marker.name.split("-")[1]) for marker in faults.glob("started-*")}
        assert workers <= {pid for pid, _ in seen}, "the workers are the command's own descendants"
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=60)
    finally:
        process.kill()
        process.communicate()
    assert process.returncode == 130, err
    assert "Traceback" not in err and "ERROR" not in err, err  # py4j is not interrupted mid-call
    assert _still_running(seen) == []
    assert not out.exists() or not [p for p in out.rglob("*") if p.suffix == ".arrow" or "staging" in p.name]


@pytest.mark.spark
@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc to follow the process tree")
def test_a_spark_conversion_that_ends_with_a_failed_incident_leaves_no_jvm_or_python_worker_running(
        corpus, tmp_path):
    process = _convert_in_a_subprocess(corpus, tmp_path / "out", tmp_path, None)
    seen: set[tuple[int, str]] = set()
    while process.poll() is None:
        seen |= _descendants(process.pid)
        time.sleep(0.2)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 2 and "1 incident(s) could not be converted" in err, err
    assert len(seen) >= 2 and _still_running(seen) == []


# --- the command line -----------------------------------------------------------------------------
def test_bulk_mode_in_a_subprocess_with_the_local_engine_prints_one_json_document_and_exits_2_on_a_bad_incident(
        corpus, tmp_path):
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "cli", "convert", str(corpus), "--out-dir", str(out), "--engine",
                           "local", "--json"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    document = json.loads(done.stdout)
    assert (document["converted"], document["failed"]) == (2, 1)
    assert [(f["incident"], f["category"]) for f in document["failures"]] == [("inc-c", "unreadable input")]
    assert done.stderr.strip().splitlines()[-1] == (
        f"recount: 1 incident(s) could not be converted (see {out}/catalog/errors.parquet)")


def test_bulk_mode_options_that_make_no_sense_are_one_line_usage_errors(corpus, tmp_path, capsys):
    assert run(["convert", str(corpus), "--engine", "spark"]) == 2
    assert "give --out-dir" in capsys.readouterr().err
    assert run(["convert", str(corpus), "--out-dir", str(tmp_path), "-o", "x.arrow"]) == 2
    assert "drop -o" in capsys.readouterr().err
    assert run(["convert", str(corpus), "--out-dir", str(tmp_path), "--conf", "nonsense"]) == 2
    assert "expected KEY=VALUE" in capsys.readouterr().err
    assert run(["convert", str(tmp_path / "missing"), "--out-dir", str(tmp_path / "o"), "--engine", "local"]) == 2
    assert "no such file" in capsys.readouterr().err
